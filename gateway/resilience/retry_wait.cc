#include "gateway/resilience/retry_wait.h"

#include <algorithm>

namespace inspection::resilience {

RetryWaitDecision DecideRetryWait(const RetryWaitInputs& inputs) {
  RetryWaitDecision decision;
  const absl::Duration backoff = std::max(inputs.backoff, absl::ZeroDuration());
  const absl::Duration retry_after =
      std::max(inputs.retry_after.value_or(absl::ZeroDuration()), absl::ZeroDuration());
  decision.delay = std::max(backoff, retry_after);
  // Duration arithmetic saturates, so an infinite time_remaining (no deadline) fits any
  // finite wait and a huge Retry-After cannot wrap around into "fits". An infinite wait
  // never fits: it would park the request forever.
  const absl::Duration needed =
      decision.delay + std::max(inputs.min_attempt_time, absl::ZeroDuration());
  decision.retry = decision.delay != absl::InfiniteDuration() && needed <= inputs.time_remaining;
  return decision;
}

}  // namespace inspection::resilience
