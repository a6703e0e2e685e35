#include "client_security.h"

#include <cerrno>
#include <cstring>
#include <fstream>
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
