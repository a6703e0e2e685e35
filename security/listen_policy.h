#pragma once
// Where evod may listen without a token: only where nobody but this host's users can reach it.
#include <optional>
#include <string>

namespace evo::security {

// True for loopback listen addresses: 127.0.0.0/8, ::1, localhost, and unix sockets. False for
// wildcards (0.0.0.0, [::], ":port") and every other host.
bool is_loopback_listen(const std::string& listen);

// Why evod must not start with these settings (one line), or nullopt when it may.
std::optional<std::string> listen_refusal(const std::string& listen, bool has_token, bool insecure);

}  // namespace evo::security
