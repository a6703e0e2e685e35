#pragma once
// evoctl as a function, so that tests drive it exactly as main does.
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace evo::cli {

struct Environment {
  bool stdout_is_tty = false;       // live progress bar vs. plain lines
  std::string coordinator;          // $EVO_COORDINATOR, or empty
  std::optional<std::string> token; // $EVO_TOKEN when set (--token-file takes precedence)
  int connect_timeout_ms = 5000;    // how long to wait for evod before "cannot reach"
  // $EVO_CONNECT_TIMEOUT_S when set: replaces connect_timeout_ms, or is a usage error if it is not
  // a whole number of seconds in 1..600.
  std::optional<std::string> connect_timeout_s;
};

// args excludes the program name. Returns the exit status: 0 ok, 1 evod refused, failed or could
// not be reached (one line on err), 2 usage error (one line on err).
int run_evoctl(const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
               const Environment& env);

}  // namespace evo::cli
