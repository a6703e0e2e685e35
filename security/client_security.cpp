#include "client_security.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>

#include "token.h"

namespace evo::security {

std::string read_pem_file(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw SecurityError(std::string("cannot read ") + what + " '" + path + "': " + std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  if (text.str().find("-----BEGIN ") == std::string::npos)
    throw SecurityError(std::string(what) + " '" + path + "' is not a PEM file (no -----BEGIN line)");
  return text.str();
}

namespace {

// Whether a TCP connection to "host:port" ("[v6]:port", "dns:///host:port") opens within
// timeout_ms; nullopt for a target this cannot tell (unix sockets, other schemes, a bad name).
std::optional<bool> tcp_accepts(std::string target, int timeout_ms) {
  if (target.rfind("dns:///", 0) == 0) target = target.substr(7);
  const auto colon = target.rfind(':');
  if (colon == std::string::npos || target.find("://") != std::string::npos || target.rfind("unix", 0) == 0)
    return std::nullopt;
  std::string host = target.substr(0, colon), port = target.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), port.c_str(), &hints, &found) != 0) return std::nullopt;
  bool accepted = false;
  for (addrinfo* a = found; a != nullptr && !accepted; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0) continue;
    if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
      accepted = true;
    } else if (errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      int err = 0;
      socklen_t len = sizeof err;
      accepted = ::poll(&p, 1, timeout_ms) == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0;
    }
    ::close(fd);
  }
  freeaddrinfo(found);
  return accepted;
}

}  // namespace

std::string unreachable_reason(const std::string& address, bool tls) {
  const std::optional<bool> accepts = tcp_accepts(address, 2000);
  if (accepts && *accepts && tls)
    return "something accepts connections at " + address +
           " but the TLS handshake failed: is --tls-ca the CA that signed evod's certificate, does that "
           "certificate name this host, and does evod serve TLS (--tls-cert)?";
  if (accepts && *accepts)
    return "something accepts connections at " + address +
           " but does not answer plaintext gRPC: if evod serves TLS (--tls-cert), pass --tls-ca CA";
  if (accepts) return "nothing accepts connections at " + address + ": is evod running, on that address?";
  return "cannot reach evod at " + address + ": is it running?";
}

ClientSecurity load_client_security(const std::string& token_file, const char* env_token,
                                    const std::string& tls_ca_file) {
  ClientSecurity s;
  s.token = resolve_token(token_file, env_token);
  if (!tls_ca_file.empty()) {
    s.tls = true;
    s.tls_ca_pem = read_pem_file(tls_ca_file, "TLS CA file");
  }
  return s;
}

std::shared_ptr<grpc::ChannelCredentials> channel_credentials(const ClientSecurity& security) {
  if (!security.tls) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = security.tls_ca_pem;
  return grpc::SslCredentials(options);
}

void attach_token(grpc::ClientContext& context, const ClientSecurity& security) {
  if (!security.token.empty()) context.AddMetadata("authorization", "Bearer " + security.token);
}

}  // namespace evo::security
