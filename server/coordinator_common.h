#pragma once
// What the coordinator's managers (run_lifecycle.h, lease_scheduler.h, worker_registry.h,
// run_views.h) share: the error they refuse a request with, the clock they read and the random
// ids they mint.
#include <cstdint>
#include <cstdio>
#include <functional>
#include <random>
#include <stdexcept>
#include <string>

namespace evo {

// The gRPC service (coordinator_service.h) turns the code into a status code.
class CoordinatorError : public std::runtime_error {
 public:
  // kPermissionDenied: a worker call whose credential is not the one evod issued that worker, or
  // from a worker evod quarantined.
  enum class Code { kInvalidArgument, kNotFound, kFailedPrecondition, kPermissionDenied };
  CoordinatorError(Code code, const std::string& message) : std::runtime_error(message), code_(code) {}
  Code code() const { return code_; }

 private:
  Code code_;
};

// Milliseconds since the Unix epoch; injectable so that tests move time by hand.
using Clock = std::function<int64_t()>;

// Random ids, so that a restarted evod does not mint the ids of before again: a prefix and 64
// random bits in hex ("w-" for workers, "l-" for leases).
class RandomIds {
 public:
  RandomIds() : rng_(std::random_device{}()) {}
  std::string next(const char* prefix) {
    char id[48];
    std::snprintf(id, sizeof id, "%s%016llx", prefix, static_cast<unsigned long long>(rng_()));
    return id;
  }

 private:
  std::mt19937_64 rng_;
};

}  // namespace evo
