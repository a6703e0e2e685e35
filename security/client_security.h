#pragma once
// How a client (evo-worker, evoctl) talks to evod: the token it presents on every call and whether
// the channel is TLS. The token goes in per-call metadata rather than gRPC call credentials,
// because gRPC refuses call credentials on a plaintext channel and plaintext on loopback is the
// default deployment.
#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

namespace evo::security {

struct ClientSecurity {
  std::string token;       // empty: no authorization metadata
  bool tls = false;
  std::string tls_ca_pem;  // the CA that signed evod's certificate (tls only)
};

// From the flags --token-file F (else $EVO_TOKEN, env_token) and --tls-ca CA. Throws SecurityError
// naming the file that cannot be read or the token that is not valid.
ClientSecurity load_client_security(const std::string& token_file, const char* env_token,
                                    const std::string& tls_ca_file);

std::shared_ptr<grpc::ChannelCredentials> channel_credentials(const ClientSecurity& security);

// Adds `authorization: Bearer <token>` to the call when a token is set.
void attach_token(grpc::ClientContext& context, const ClientSecurity& security);

// Why a channel to `address` did not come up, for the person: when nothing accepts a TCP connection
// there, that (is evod running?); when something does, the channel failed above TCP: with tls, the
// TLS handshake (the CA, or the certificate's name); without, the server may speak TLS.
std::string unreachable_reason(const std::string& address, bool tls);

// The whole text of a PEM file (certificate, key or CA); throws SecurityError naming `what`.
std::string read_pem_file(const std::string& path, const char* what);

}  // namespace evo::security
