#pragma once
// Genome <-> evo.v1.Genome, the one place the typed genome of the wire and the Genome of the code
// meet. Text ("fa_s512_v3:BLOCK_M=32,...") is for people and the store; it is parsed once where it
// enters (evoctl, evod's submit, the store) and a genome then travels as this message.
#include <string_view>

#include "evo/evo.pb.h"
#include "genome.h"

namespace evo {

// Every gene by its value (an enumerated gene's value is its label's index).
v1::Genome genome_to_proto(const Genome& g);

// The genome a message names, checked once against its kernel's space: genes it does not name take
// their defaults. Throws InputError (one line, naming the kernel) for a message that names no kernel
// or an unknown one, an unknown gene (a retired gene too: only text translates those), or a value
// outside its gene's domain.
Genome genome_from_proto(const v1::Genome& m);

// The message of a stored or printed genome text ("fa_s512_v3:..."), parsed by its kernel's space.
// Throws InputError as SearchSpace::parse does, or for a text that names no known kernel.
v1::Genome genome_proto_of_text(std::string_view text);

}  // namespace evo
