#ifndef GATEWAY_RESILIENCE_RETRY_WAIT_H_
#define GATEWAY_RESILIENCE_RETRY_WAIT_H_

#include <optional>

#include "absl/time/time.h"

namespace inspection::resilience {

// The time an attempt needs at the very least; no attempt starts with less than this left
// before the caller's deadline.
inline constexpr absl::Duration kDefaultMinAttemptTime = absl::Milliseconds(50);

struct RetryWaitInputs {
  // The vendor's Retry-After (seconds or HTTP-date, already parsed into a delay from now);
  // nullopt when absent. Negative values count as zero.
  std::optional<absl::Duration> retry_after;
  // This retry's backoff (BackoffSequence::NextDelay()).
  absl::Duration backoff = absl::ZeroDuration();
  // Until the caller's deadline; absl::InfiniteDuration() when there is none.
  absl::Duration time_remaining = absl::InfiniteDuration();
  // See kDefaultMinAttemptTime.
  absl::Duration min_attempt_time = kDefaultMinAttemptTime;
};

struct RetryWaitDecision {
  // true: wait `delay`, then start the next attempt.
  // false: give up now and answer the client, passing `delay` back as RetryInfo /
  //        grpc-retry-pushback-ms (when we would have waited, so should the client).
  bool retry = false;
  // max(backoff, retry_after) in both cases.
  absl::Duration delay = absl::ZeroDuration();
};

// Retry-After is honoured when it fits in the deadline: the wait is max(backoff,
// retry_after), and the retry happens iff wait + min_attempt_time <= time_remaining
// ("no attempt starts that cannot finish in time"). Retry-After is a lower bound, never
// shortened to fit: the vendor said "not before", so an early retry would only be
// refused again. Callers wanting a ceiling on very long Retry-After values with no
// deadline clamp `retry_after` before calling. Pure; thread-safe.
RetryWaitDecision DecideRetryWait(const RetryWaitInputs& inputs);

}  // namespace inspection::resilience

#endif  // GATEWAY_RESILIENCE_RETRY_WAIT_H_
