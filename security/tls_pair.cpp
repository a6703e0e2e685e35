#include "tls_pair.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <memory>

#include "token.h"

namespace evo::security {

namespace {

struct Freer {
  void operator()(BIO* b) const { BIO_free(b); }
  void operator()(X509* x) const { X509_free(x); }
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
template <typename T>
using Owned = std::unique_ptr<T, Freer>;

Owned<BIO> memory_bio(const std::string& pem) {
  return Owned<BIO>(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}

}  // namespace

void check_tls_key_pair(const std::string& cert_pem, const std::string& key_pem, const std::string& cert_path,
                        const std::string& key_path) {
  Owned<X509> cert(PEM_read_bio_X509(memory_bio(cert_pem).get(), nullptr, nullptr, nullptr));
  // A passphrase callback that gives none: an encrypted key fails here instead of prompting.
  auto no_passphrase = [](char*, int, int, void*) { return 0; };
  Owned<EVP_PKEY> key(PEM_read_bio_PrivateKey(memory_bio(key_pem).get(), nullptr, no_passphrase, nullptr));
  ERR_clear_error();
  if (!cert) throw SecurityError("TLS certificate '" + cert_path + "' holds no PEM certificate that can be read");
  if (!key)
    throw SecurityError("TLS key '" + key_path +
                        "' holds no PEM private key that can be read (an encrypted key is not supported)");
  const bool pair = X509_check_private_key(cert.get(), key.get()) == 1;
  ERR_clear_error();
  if (!pair)
    throw SecurityError("TLS key '" + key_path + "' is not the key of certificate '" + cert_path +
                        "' (their public keys differ): give the key the certificate was issued for");
}

}  // namespace evo::security
