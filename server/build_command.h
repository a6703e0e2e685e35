#pragma once
// The command line that builds an exported .cu into a shared library, in its one home: the export's
// source comment, its report and evoctl's summary print it. File names come from the user (evoctl
// export --out), so each is shell-quoted: a pasted line runs nvcc on that file and nothing else.
#include <string>
#include <string_view>

namespace evo {

// s as one shell word: unchanged when it holds only characters no POSIX shell treats specially,
// else in single quotes (a ' inside becomes '\'').
inline std::string shell_quote(std::string_view s) {
  auto plain = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           std::string_view("_-./+=:,@%").find(c) != std::string_view::npos;
  };
  bool needs = s.empty();
  for (char c : s) needs = needs || !plain(c);
  if (!needs) return std::string(s);
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

inline std::string exported_build_command(const std::string& cu_path, const std::string& so_path,
                                          const std::string& arch = "sm_90a") {
  return "nvcc -O3 -shared -Xcompiler -fPIC -arch=" + shell_quote(arch) + " -o " + shell_quote(so_path) + " " +
         shell_quote(cu_path);
}

}  // namespace evo
