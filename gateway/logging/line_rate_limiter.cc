#include "gateway/logging/line_rate_limiter.h"

#include <algorithm>
#include <utility>

namespace inspection::logging {

LineRateLimiter::LineRateLimiter(double per_second, std::function<absl::Time()> clock)
    : per_second_(per_second),
      clock_(clock ? std::move(clock) : [] { return absl::Now(); }),
      tokens_(std::max(per_second, 0.0)),
      last_(clock_()) {}

bool LineRateLimiter::Admit(uint64_t* suppressed) {
  absl::MutexLock lock(&mu_);
  if (per_second_ > 0) {
    const absl::Time now = clock_();
    const double elapsed = absl::ToDoubleSeconds(now - last_);
    if (elapsed > 0) {
      tokens_ = std::min(per_second_, tokens_ + elapsed * per_second_);
      last_ = now;
    }
  }
  if (tokens_ < 1.0) {
    ++suppressed_;
    return false;
  }
  tokens_ -= 1.0;
  *suppressed = suppressed_;
  suppressed_ = 0;
  return true;
}

}  // namespace inspection::logging
