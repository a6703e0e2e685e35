#pragma once
// evod's TLS certificate and key, checked before it listens: gRPC only says that it could not
// start its port, which reads like a busy port. Here each problem is one line naming the file.
#include <string>

namespace evo::security {

// Throws SecurityError when cert_pem holds no certificate, key_pem no (unencrypted) private key,
// or the key is not the certificate's. The paths only name the files in the message.
void check_tls_key_pair(const std::string& cert_pem, const std::string& key_pem, const std::string& cert_path,
                        const std::string& key_path);

}  // namespace evo::security
