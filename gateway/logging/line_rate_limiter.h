#ifndef GATEWAY_LOGGING_LINE_RATE_LIMITER_H_
#define GATEWAY_LOGGING_LINE_RATE_LIMITER_H_

// Bounds the log lines that outside input can cause (rejected webhooks, calls denied by the
// authorization policy or the per-caller limits), so that an attacker cannot flood the log:
// a token bucket of `per_second` lines with a burst of as many. A line that gets through
// says how many were suppressed before it (`suppressed` field), so nothing is silently
// lost from the count; the metrics count every rejection regardless.
//
//   LineRateLimiter limiter(10);
//   uint64_t suppressed = 0;
//   if (limiter.Admit(&suppressed)) {
//     logging::Warn("webhook rejected", {{"reason", reason}, {"suppressed", suppressed}});
//   }
//
// Thread-safe.

#include <cstdint>
#include <functional>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace inspection::logging {

class LineRateLimiter {
 public:
  // per_second <= 0: every line is suppressed (and counted).
  explicit LineRateLimiter(double per_second, std::function<absl::Time()> clock = nullptr);

  // True when the line may be written; then *suppressed is the number of lines refused
  // since the last one admitted (and the count starts again).
  bool Admit(uint64_t* suppressed);

 private:
  const double per_second_;
  const std::function<absl::Time()> clock_;
  absl::Mutex mu_;
  double tokens_ ABSL_GUARDED_BY(mu_);
  absl::Time last_ ABSL_GUARDED_BY(mu_);
  uint64_t suppressed_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace inspection::logging

#endif  // GATEWAY_LOGGING_LINE_RATE_LIMITER_H_
