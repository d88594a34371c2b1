#ifndef SANDBOX_CLOCK_H_
#define SANDBOX_CLOCK_H_

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace inspection::sandbox {

// The sandbox's notion of "now": real time plus an offset that the admin API can
// advance (to expire tokens without waiting days). Thread-safe.
class SandboxClock {
 public:
  absl::Time Now() const {
    absl::MutexLock lock(&mu_);
    return absl::Now() + offset_;
  }
  void Advance(absl::Duration by) {
    absl::MutexLock lock(&mu_);
    offset_ += by;
  }
  absl::Duration offset() const {
    absl::MutexLock lock(&mu_);
    return offset_;
  }

 private:
  mutable absl::Mutex mu_;
  absl::Duration offset_ ABSL_GUARDED_BY(mu_) = absl::ZeroDuration();
};

// ISO 8601 UTC with milliseconds, the spec's timestamp style: 2024-03-01T10:00:00.000Z.
inline std::string IsoTime(absl::Time t) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", t, absl::UTCTimeZone());
}

}  // namespace inspection::sandbox

#endif  // SANDBOX_CLOCK_H_
