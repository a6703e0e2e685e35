#pragma once
// evod's check of the shared token on every call. Without a token the gate is open (the loopback
// default); with one, a call passes only when its metadata holds `authorization: Bearer <token>`.
#include <string>

#include <grpcpp/grpcpp.h>

namespace evo::security {

class TokenGate {
 public:
  TokenGate() = default;  // open: every call passes
  explicit TokenGate(std::string token) : token_(std::move(token)) {}

  bool enabled() const { return !token_.empty(); }
  // OK, or UNAUTHENTICATED with one line saying what was missing or wrong (never the token).
  grpc::Status check(const grpc::ServerContext& context) const;

 private:
  std::string token_;
};

}  // namespace evo::security
