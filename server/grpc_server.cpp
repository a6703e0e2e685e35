#include "grpc_server.h"

namespace evo {

std::unique_ptr<grpc::Server> start_grpc_server(grpc::Service& service, const GrpcServerConfig& config,
                                                int* port) {
  std::shared_ptr<grpc::ServerCredentials> credentials = grpc::InsecureServerCredentials();
  if (!config.tls_cert_pem.empty()) {
    grpc::SslServerCredentialsOptions options;
    options.pem_key_cert_pairs.push_back({config.tls_key_pem, config.tls_cert_pem});
    credentials = grpc::SslServerCredentials(options);
  }
  grpc::ServerBuilder builder;
  builder.AddListeningPort(config.listen, credentials, port);
  // gRPC sets SO_REUSEPORT by default, so a second evod on a port one already serves would bind
  // too and the kernel would split the clients' calls between two databases. Refuse instead.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.SetMaxReceiveMessageSize(config.max_receive_bytes);
  builder.RegisterService(&service);
  auto server = builder.BuildAndStart();
  if (!server || *port == 0) return nullptr;
  return server;
}

}  // namespace evo
