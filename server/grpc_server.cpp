#include "grpc_server.h"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <google/protobuf/descriptor.h>
#include <grpcpp/support/server_interceptor.h>

namespace evo {

namespace {

// gRPC parses a request before the handler runs; bytes that are not the RPC's message get
// Status(INTERNAL, "") (or "No payload" for none), which says nothing to the client and blames the
// server. This interceptor sees the status about to be sent and, for those two and only those,
// answers INVALID_ARGUMENT with the message type that was expected. The service's own errors always
// carry a message, so an empty INTERNAL is never one of them.
class BadRequestBytes final : public grpc::experimental::Interceptor {
 public:
  explicit BadRequestBytes(const char* method) : method_(method ? method : "") {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    using grpc::experimental::InterceptionHookPoints;
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      const grpc::Status status = methods->GetSendStatus();
      if (status.error_code() == grpc::StatusCode::INTERNAL &&
          (status.error_message().empty() || status.error_message() == "No payload"))
        methods->ModifySendStatus(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, explanation()));
    }
    methods->Proceed();
  }

 private:
  // "/evo.v1.Coordinator/ReportResult" -> "ReportResult: the request is not a valid evo.v1.ReportRequest
  // (its bytes do not parse as that protobuf message)".
  std::string explanation() const {
    const auto slash = method_.rfind('/');
    const std::string rpc = slash == std::string::npos ? method_ : method_.substr(slash + 1);
    std::string type = "request message";
    const std::string service = method_.size() > 1 && slash != std::string::npos ? method_.substr(1, slash - 1) : "";
    if (const auto* s = google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(service))
      if (const auto* m = s->FindMethodByName(rpc)) type = m->input_type()->full_name();
    return rpc + ": the request is not a valid " + type + " (its bytes do not parse as that protobuf message)";
  }

  std::string method_;
};

class BadRequestBytesFactory final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  grpc::experimental::Interceptor* CreateServerInterceptor(grpc::experimental::ServerRpcInfo* info) override {
    return new BadRequestBytes(info->method());
  }
};

// "host:port" or "[v6]:port" -> host and port; false for anything else (unix sockets).
bool split_listen(const std::string& listen, std::string* host, std::string* port) {
  if (listen.rfind("unix:", 0) == 0 || listen.rfind("unix-abstract:", 0) == 0) return false;
  const auto colon = listen.rfind(':');
  if (colon == std::string::npos) return false;
  *host = listen.substr(0, colon);
  *port = listen.substr(colon + 1);
  if (host->size() >= 2 && host->front() == '[' && host->back() == ']') *host = host->substr(1, host->size() - 2);
  return true;
}

}  // namespace

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
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(std::make_unique<BadRequestBytesFactory>());
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  builder.RegisterService(&service);
  auto server = builder.BuildAndStart();
  if (!server || *port == 0) return nullptr;
  return server;
}

std::string listen_failure_reason(const std::string& listen) {
  std::string host, port;
  if (!split_listen(listen, &host, &port)) return "gRPC could not start a port there";
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  const int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), port.c_str(), &hints, &found);
  if (rc != 0) return "cannot resolve '" + host + "' port '" + port + "': " + gai_strerror(rc);
  std::string reason = "gRPC could not start a port there, though a socket binds to it now";
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd < 0) continue;
    const int on = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);  // as gRPC does
    const int bound = ::bind(fd, a->ai_addr, a->ai_addrlen);
    const int err = errno;
    ::close(fd);
    if (bound == 0) continue;
    if (err == EADDRINUSE) reason = std::string("in use by another process: ") + std::strerror(err);
    else if (err == EADDRNOTAVAIL) reason = std::string("not an address of this host: ") + std::strerror(err);
    else if (err == EACCES)
      reason = std::string("not allowed: ") + std::strerror(err) + " (ports below 1024 need privileges)";
    else reason = std::strerror(err);
    break;
  }
  freeaddrinfo(found);
  return reason;
}

}  // namespace evo
