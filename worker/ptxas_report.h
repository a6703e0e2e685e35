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

}  // namespace evo
