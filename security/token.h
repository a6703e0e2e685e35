#pragma once
// The shared secret that evod, evo-worker and evoctl agree on. It is read from a file (preferred:
// a command line shows up in `ps`, a file with mode 0600 does not) or from $EVO_TOKEN, and sent as
// gRPC metadata `authorization: Bearer <token>`.
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace evo::security {

// A token, certificate or key file that cannot serve: one line that names the problem.
class SecurityError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

inline constexpr const char* kTokenEnv = "EVO_TOKEN";
inline constexpr size_t kMinTokenBytes = 16;
inline constexpr size_t kMaxTokenBytes = 4096;

// Checks a token's text: 16..4096 bytes of printable ASCII without spaces (it travels in an HTTP/2
// header). Returns it unchanged or throws SecurityError; `origin` names where it came from.
std::string validate_token(std::string_view token, const std::string& origin);

// Reads the token of a file: its content with trailing whitespace (a final newline) removed.
// Throws SecurityError when the file cannot be read, is a directory, or its content is not a
// valid token.
std::string read_token_file(const std::string& path);

// The same for any secret kept in a file (an enrolment key: what = "enrolment key file").
std::string read_secret_file(const std::string& path, const std::string& what);

// One line of warning when other users may read the token file (group or other permission bits
// set: anyone who reads it can drive evod), else nullopt. Called once the file was read.
std::optional<std::string> token_file_warning(const std::string& path);
// The same for any secret file; reader_can says what whoever reads it can do.
std::optional<std::string> secret_file_warning(const std::string& path, const std::string& what,
                                               const std::string& reader_can);

// The token to use: the file's when token_file is non-empty, else env_value's (the value of
// $EVO_TOKEN, nullptr when unset), else "" (no authentication).
std::string resolve_token(const std::string& token_file, const char* env_value);

// Equal in time that depends only on the length of `expected`, never on where the first
// difference is: a peer cannot find the token byte by byte by timing refusals.
bool tokens_equal(std::string_view presented, std::string_view expected);

}  // namespace evo::security
