#pragma once
// Gate 2's resource half: the ptxas figures of exactly the build that is timed. Spills or a stack
// frame mean an array went to local memory (the seed kernel's WMMA-on-local-memory failure);
// shared memory over the device's opt-in limit cannot launch.
#include <cstdint>
#include <optional>
#include <string>

#include "evo/evo.pb.h"

namespace evo {

// One line naming the figure and its limit ("stack frame 256 bytes > limit 0 bytes ..."), or
// nullopt when the kernel passes. Shared memory counts static + dynamic_smem_bytes().
// min_registers: the launch's LaunchConfig::min_registers (registers a thread must hold at launch
// for its warpgroups' register hand-over; 0 for any).
std::optional<std::string> resource_violation(const v1::ResourceReport& r, int64_t smem_limit,
                                              int64_t min_registers = 0);

// A failed compile whose ptxas log says the kernel needs more registers than its block of
// `threads` leaves each thread: one line, as a resource reject (like a spill) rather than a
// compile error; nullopt for any other failure.
std::optional<std::string> register_shortage(const std::string& ptxas_log, int64_t threads);

}  // namespace evo
