#include "listen_policy.h"

#include <arpa/inet.h>

namespace evo::security {

namespace {

// "host:port" -> host; "[v6]:port" -> v6; no port -> the whole text.
std::string host_of(const std::string& listen) {
  if (!listen.empty() && listen.front() == '[') {
    auto close = listen.find(']');
    return close == std::string::npos ? listen : listen.substr(1, close - 1);
  }
  auto colon = listen.rfind(':');
  if (colon == std::string::npos) return listen;
  // A bare IPv6 address without brackets has several colons and no port to strip.
  if (listen.find(':') != colon) return listen;
  return listen.substr(0, colon);
}

}  // namespace

bool is_loopback_listen(const std::string& listen) {
  if (listen.rfind("unix:", 0) == 0 || listen.rfind("unix-abstract:", 0) == 0) return true;
  const std::string host = host_of(listen);
  if (host == "localhost") return true;
  in_addr v4{};
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  if (inet_pton(AF_INET6, host.c_str(), &v6) == 1) return IN6_IS_ADDR_LOOPBACK(&v6);
  return false;  // wildcards, other names and anything unreadable
}

std::optional<std::string> listen_refusal(const std::string& listen, bool has_token, bool insecure) {
  if (has_token || insecure || is_loopback_listen(listen)) return std::nullopt;
  return "refusing to listen on " + listen +
         " (not loopback) without a token: give --token-file FILE (or set EVO_TOKEN), or --insecure to "
         "let anyone who can reach it drive evod";
}

}  // namespace evo::security
