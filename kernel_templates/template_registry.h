#pragma once
// The kernel families and kernels evo can search, as embedded text. A family (attention/) holds
// what its kernels share (family.h: the float32 reference kernel of the correctness gate, the host
// code an exported kernel needs, its problem). A kernel (attention/fa_s512_v3/) is the CUDA source NVRTC compiles and
// the search space (genes, domains, constraints, launch formulas) that population/ reads.
// template_registry.cpp lists each family and each kernel in one line.
#include <string>
#include <string_view>
#include <vector>

#include "family.h"

namespace evo {

struct KernelTemplate {
  std::string_view id;  // "fa_s512_v3": the name `evoctl submit --seed` takes
  const KernelFamily* family;
  std::string_view source;      // CUDA C++; includes nothing beyond the CUDA toolkit's headers
  std::string_view space_json;  // see attention/fa_s512_v3/space.json
};

// nullptr for an unknown id.
const KernelTemplate* find_template(std::string_view id);
// A family by its id ("attention"); nullptr for an unknown one.
const KernelFamily* find_family(std::string_view id);
std::vector<std::string> template_ids();

// A stable 64-bit FNV-1a hash, hex; used for cache keys over template sources and genomes.
std::string fnv1a_hex(std::string_view text);

// "fa_s512_v3@<hash of its kernel source, space and its family's code>": what a cache of results
// per genome must be keyed by besides the genome, since one genome names a different kernel once
// the template's code changes. The id alone for an unknown template.
std::string template_fingerprint(std::string_view id);
// The fingerprints of every template of this build, in template_ids() order.
std::vector<std::string> template_fingerprints();

}  // namespace evo
