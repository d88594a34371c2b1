#ifndef GATEWAY_WEBHOOKS_WEBHOOK_KEY_MATCHER_H_
#define GATEWAY_WEBHOOKS_WEBHOOK_KEY_MATCHER_H_

#include <array>
#include <string>

#include "absl/status/statusor.h"

namespace inspection::webhooks {

// Checks a presented `x-api-key` value against the configured webhook header key and,
// during a rotation, the previous one, in time that depends on neither key: both sides
// are hashed (SHA-256) and the digests compared with CRYPTO_memcmp, so neither the
// length nor the first differing byte of a key shows in the timing, and both keys are
// always checked. Only digests are kept; the keys themselves are not retained.
//
// Thread-safety: immutable after Create(); Matches() may be called concurrently.
class WebhookKeyMatcher {
 public:
  // FailedPrecondition when `current_key` is empty: the receiver never runs without a
  // key. An empty `previous_key` means "no rotation in progress".
  static absl::StatusOr<WebhookKeyMatcher> Create(const std::string& current_key,
                                                  const std::string& previous_key);

  // True when `presented` equals the current or the previous key.
  bool Matches(const std::string& presented) const;

 private:
  using Digest = std::array<unsigned char, 32>;

  WebhookKeyMatcher(const Digest& current, const Digest& previous)
      : current_(current), previous_(previous) {}

  static Digest Sha256(const std::string& data);

  Digest current_;
  Digest previous_;  // the current key's digest again when no rotation is in progress
};

}  // namespace inspection::webhooks

#endif  // GATEWAY_WEBHOOKS_WEBHOOK_KEY_MATCHER_H_
