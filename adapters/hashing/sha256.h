// SHA-256 (OpenSSL), shared by whoever needs a content hash: the webhook receiver's
// deduplication, the cache scopes of vendor accounts, the idempotency keys' request
// fingerprints, and the tests that check them.
#ifndef ADAPTERS_HASHING_SHA256_H_
#define ADAPTERS_HASHING_SHA256_H_

#include <string>

namespace inspection::hashing {

// Lower-case hex SHA-256 of `data` (64 characters).
std::string Sha256Hex(const std::string& data);

}  // namespace inspection::hashing

#endif  // ADAPTERS_HASHING_SHA256_H_
