#include "token.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

namespace evo::security {

std::string validate_token(std::string_view token, const std::string& origin) {
  if (token.empty()) throw SecurityError(origin + " is empty");
  if (token.size() < kMinTokenBytes)
    throw SecurityError(origin + " is too short (" + std::to_string(token.size()) + " bytes; use at least " +
                     std::to_string(kMinTokenBytes) + ", e.g. from `openssl rand -hex 32`)");
  if (token.size() > kMaxTokenBytes)
    throw SecurityError(origin + " is too long (" + std::to_string(token.size()) + " bytes; at most " +
                     std::to_string(kMaxTokenBytes) + ")");
  for (char c : token) {
    auto u = static_cast<unsigned char>(c);
    if (u < 0x21 || u > 0x7e)
      throw SecurityError(origin + " holds a space, control or non-ASCII character (allowed: printable ASCII)");
  }
  return std::string(token);
}

std::string read_token_file(const std::string& path) { return read_secret_file(path, "token file"); }

std::string read_secret_file(const std::string& path, const std::string& what) {
  struct stat st {};
  // A directory opens like a file and reads as nothing: say what it is, not that it is empty.
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    throw SecurityError(what + " '" + path + "' is a directory, not a file holding the secret");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw SecurityError("cannot read " + what + " '" + path + "': " + std::strerror(errno));
  // Read at most a little more than the longest valid token: a wrong path (a device, a huge file)
  // must not be slurped whole.
  char buf[kMaxTokenBytes + 64];
  in.read(buf, sizeof buf);
  std::string text(buf, static_cast<size_t>(in.gcount()));
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ' || text.back() == '\t'))
    text.pop_back();
  return validate_token(text, what + " '" + path + "'");
}

std::optional<std::string> token_file_warning(const std::string& path) {
  return secret_file_warning(path, "token file", "can act as any worker or admin");
}

std::optional<std::string> secret_file_warning(const std::string& path, const std::string& what,
                                               const std::string& reader_can) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || (st.st_mode & (S_IRWXG | S_IRWXO)) == 0) return std::nullopt;
  char mode[8];
  std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
  return what + " '" + path + "' is open to other users (mode " + mode + "): whoever reads it " + reader_can +
         "; chmod 600 it";
}

std::string resolve_token(const std::string& token_file, const char* env_value) {
  if (!token_file.empty()) return read_token_file(token_file);
  if (env_value != nullptr) return validate_token(env_value, std::string("$") + kTokenEnv);
  return "";
}

bool tokens_equal(std::string_view presented, std::string_view expected) {
  // Walk all of `expected` whatever `presented` holds; fold the length difference in.
  unsigned char diff = presented.size() == expected.size() ? 0 : 1;
  for (size_t i = 0; i < expected.size(); ++i) {
    unsigned char p = i < presented.size() ? static_cast<unsigned char>(presented[i]) : 0;
    diff |= static_cast<unsigned char>(p ^ static_cast<unsigned char>(expected[i]));
  }
  // Keep the compiler from turning the loop into an early exit.
  volatile unsigned char sink = diff;
  return sink == 0;
}

}  // namespace evo::security
