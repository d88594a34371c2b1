#include "gateway/webhooks/webhook_key_matcher.h"

#include <openssl/crypto.h>
#include <openssl/sha.h>

#include <string>

#include "absl/status/status.h"

namespace inspection::webhooks {

absl::StatusOr<WebhookKeyMatcher> WebhookKeyMatcher::Create(const std::string& current_key,
                                                            const std::string& previous_key) {
  if (current_key.empty()) {
    // Never run open: an unauthenticated webhook endpoint would let anyone inject events.
    return absl::FailedPreconditionError(
        "no webhook key configured (the vendor's webhookHeaderKey): the webhook receiver "
        "does not run without one");
  }
  // Without a previous key its slot holds the current key's digest, so Matches() does the
  // same work either way and its answer is unchanged.
  const Digest current = Sha256(current_key);
  return WebhookKeyMatcher(current, previous_key.empty() ? current : Sha256(previous_key));
}

bool WebhookKeyMatcher::Matches(const std::string& presented) const {
  const Digest digest = Sha256(presented);
  // Both comparisons always run and are combined without a branch on the first one.
  const int current_differs = CRYPTO_memcmp(digest.data(), current_.data(), digest.size());
  const int previous_differs = CRYPTO_memcmp(digest.data(), previous_.data(), digest.size());
  return (current_differs == 0) | (previous_differs == 0);
}

WebhookKeyMatcher::Digest WebhookKeyMatcher::Sha256(const std::string& data) {
  Digest digest;
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), digest.data());
  return digest;
}

}  // namespace inspection::webhooks
