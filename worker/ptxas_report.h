#pragma once
// Reads the resource figures of one kernel out of a `--ptxas-options=-v` log. The log of one NVRTC
// program may describe several functions; only the named (lowered) kernel's lines count.
#include <optional>
#include <string>
#include <string_view>

#include "evo/evo.pb.h"

namespace evo {

// Registers, stack frame, spill stores/loads and static shared memory of `lowered_name`, with the
// kernel's own log lines in ptxas_log. nullopt when the log has no entry for that kernel.
std::optional<v1::ResourceReport> parse_ptxas_report(std::string_view log,
                                                     std::string_view lowered_name);

// ptxas's refusal to fit the kernel into the registers its block size leaves each thread (65536
// over the threads: 128 at 512): "Register allocation failed with register count of 'N'". The
// kernel asks more of the device than it has, as a spill does: a resource reject, not a compile
// error. The line without its "ptxas fatal : (C7600)" prefix; nullopt when the log has none.
std::optional<std::string> register_allocation_failure(std::string_view log);

}  // namespace evo
