#ifndef GATEWAY_RESILIENCE_BACKOFF_H_
#define GATEWAY_RESILIENCE_BACKOFF_H_

#include <functional>
#include <optional>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace inspection::resilience {

// Returns a uniformly distributed double in [0, 1). Injected so that tests can assert
// exact backoff sequences; values outside [0, 1) (and NaN) are clamped by the users below.
using RandomSource = std::function<double()>;

// A thread-safe RandomSource (one engine per thread, seeded from std::random_device).
RandomSource DefaultRandomSource();

struct BackoffConfig {
  // First retry waits uniform(0, base); each further retry doubles the ceiling ...
  absl::Duration base = absl::Milliseconds(25);
  // ... up to `cap` (in the spirit of Envoy/userver: 25 ms base, 250 ms..1 s cap).
  absl::Duration cap = absl::Seconds(1);
  // Total attempts for one request, the first one included (as gRPC's maxAttempts):
  // 1 = never retry. Usually per route.
  int max_attempts = 3;
};

// Exponential backoff with full jitter (AWS style):
//   delay(retry) = uniform(0, min(cap, base * 2^retry)),  retry = 0 for the first retry.
// An immutable value built once from validated config (one per route when max_attempts
// differs per route). Thread-safe: all methods are const and pure.
class BackoffPolicy {
 public:
  // INVALID_ARGUMENT unless 0 < base <= cap < infinity and max_attempts >= 1.
  static absl::StatusOr<BackoffPolicy> Create(const BackoffConfig& config);

  // min(cap, base * 2^retry): the upper bound of the jitter range before retry `retry`
  // (0-based; negative values are treated as 0). Never overflows.
  absl::Duration Ceiling(int retry) const;

  // Ceiling(retry) scaled by `random01` (clamped into [0, 1)), rounded to the nearest
  // microsecond (no timer is finer, and whole microseconds read well in tests and logs).
  // Always in [0, Ceiling(retry)].
  absl::Duration Delay(int retry, double random01) const;

  int max_attempts() const { return config_.max_attempts; }
  const BackoffConfig& config() const { return config_; }

 private:
  explicit BackoffPolicy(const BackoffConfig& config) : config_(config) {}

  BackoffConfig config_;
};

// Per-request state: the delays before retry 1, 2, ... of one request, and the attempt
// limit. Not thread-safe (one request's retry loop owns it); the RandomSource is called
// once per NextDelay().
class BackoffSequence {
 public:
  // A null `random` means DefaultRandomSource().
  BackoffSequence(BackoffPolicy policy, RandomSource random);

  // The wait before the next attempt, or nullopt when the policy's max_attempts have all
  // been used (the first attempt counts as used from the start).
  std::optional<absl::Duration> NextDelay();

  // Retries handed out so far (attempts made = retries() + 1).
  int retries() const { return retries_; }

 private:
  const BackoffPolicy policy_;
  const RandomSource random_;
  int retries_ = 0;
};

}  // namespace inspection::resilience

#endif  // GATEWAY_RESILIENCE_BACKOFF_H_
