#pragma once
// A wall time as people write it and read it back ("90s", "10m", "1h30m"): how evod words a spent
// budget and evoctl prints one (evoctl's --budget reads the same form).
#include <cstdint>
#include <string>

namespace evo {

inline std::string duration_text(int64_t ms) {
  const int64_t s = ms / 1000, h = s / 3600, m = s % 3600 / 60, rest = s % 60;
  std::string out;
  if (h) out += std::to_string(h) + "h";
  if (m) out += std::to_string(m) + "m";
  if (rest || out.empty()) out += std::to_string(rest) + "s";
  return out;
}

}  // namespace evo
