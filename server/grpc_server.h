#pragma once
// Builds and starts evod's gRPC server the one way evod and the tests both use: the receive-size
// limit, and TLS when a certificate and key are given (plaintext otherwise).
#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "server_config.h"

namespace evo {

struct GrpcServerConfig {
  std::string listen = "127.0.0.1:50051";
  std::string tls_cert_pem;  // both empty: plaintext
  std::string tls_key_pem;
  int max_receive_bytes = server::kMaxReceiveMessageBytes;
};

// The started server and the port it got (for "127.0.0.1:0"); nullptr when it cannot listen.
// A request that does not parse as its RPC's message is answered INVALID_ARGUMENT naming the
// message type (gRPC itself answers it before any handler runs, as INTERNAL with no message).
std::unique_ptr<grpc::Server> start_grpc_server(grpc::Service& service, const GrpcServerConfig& config,
                                                int* port);

// Why the server could not listen on `listen`, in words, found by binding a socket there as gRPC
// would: "in use by another process (Address already in use)", "not an address of this host
// (...)", "cannot resolve 'host' (...)", or a plain "gRPC could not start a port there" when the
// socket binds (with TLS, certificate problems are found before: security/tls_pair.h).
std::string listen_failure_reason(const std::string& listen);

}  // namespace evo
