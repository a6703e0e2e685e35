#pragma once
// Resident memory of a process, from /proc/<pid>/status (Linux): VmRSS now and VmHWM, its peak.
#include <sys/types.h>

#include <cstdint>
#include <fstream>
#include <string>

namespace evo::load {

struct ProcMemory {
  int64_t rss_kb = -1;   // VmRSS
  int64_t peak_kb = -1;  // VmHWM
};

inline ProcMemory read_proc_memory(pid_t pid) {
  ProcMemory m;
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string key;
  while (in >> key) {
    if (key == "VmRSS:") in >> m.rss_kb;
    else if (key == "VmHWM:") in >> m.peak_kb;
    std::string rest;
    std::getline(in, rest);
  }
  return m;
}

}  // namespace evo::load
