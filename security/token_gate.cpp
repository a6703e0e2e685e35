#include "token_gate.h"

#include "token.h"

namespace evo::security {

grpc::Status TokenGate::check(const grpc::ServerContext& context) const {
  if (!enabled()) return grpc::Status::OK;
  const auto& metadata = context.client_metadata();
  auto it = metadata.find("authorization");
  if (it == metadata.end())
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        "this evod requires a token: pass --token-file FILE (or set EVO_TOKEN) to the client");
  const std::string value(it->second.data(), it->second.size());
  static const std::string kScheme = "Bearer ";
  if (value.compare(0, kScheme.size(), kScheme) != 0)
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "authorization metadata must be 'Bearer <token>'");
  if (!tokens_equal(std::string_view(value).substr(kScheme.size()), token_))
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "wrong token");
  return grpc::Status::OK;
}

}  // namespace evo::security
