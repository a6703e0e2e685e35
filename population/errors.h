#pragma once
#include <stdexcept>
#include <string>

namespace evo {

// Bad input from a person or a peer: an unknown seed, a malformed shape or genome, a gene out of
// its domain. The message is one line that names the problem; callers turn it into a non-zero exit
// (CLI) or INVALID_ARGUMENT (gRPC). Nothing stored may change before it is thrown.
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace evo
