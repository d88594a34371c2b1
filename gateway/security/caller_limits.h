#ifndef GATEWAY_SECURITY_CALLER_LIMITS_H_
#define GATEWAY_SECURITY_CALLER_LIMITS_H_

#include <cstddef>
#include <functional>
#include <list>
#include <memory>
#include <string>
#include <unordered_map>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace inspection::security {

struct CallerLimitsOptions {
  // Calls a caller may start per second, on average (a token bucket of `burst` tokens
  // refilled at this rate). 0: no rate limit.
  double requests_per_second = 0;
  // The bucket's size; 0: one second's worth (at least 1).
  int burst = 0;
  // Streams (Subscribe, StreamDamageResults, WatchTokenStatus, Health/Watch, reflection) a
  // caller may hold open at once. 0: no limit.
  int max_streams = 0;
  // Callers tracked at once; past it, the caller used least recently among those holding no
  // stream is forgotten (it starts again with a full bucket). Callers holding streams are
  // kept whatever their number (their count must stand), and those are bounded by the
  // stream limits (streams.max_total), so the table holds at most this plus that many.
  size_t max_tracked_callers = 100000;
  std::function<absl::Time()> clock = [] { return absl::Now(); };
};

// Per-caller limits, local to this replica: a token bucket of calls and a count of open
// streams per caller (the certificate identity, or the peer address without one).
// Thread-safe.
class CallerLimiter : public std::enable_shared_from_this<CallerLimiter> {
 public:
  // Made with std::make_shared: a stream guard keeps the limiter alive.
  explicit CallerLimiter(CallerLimitsOptions options);

  // Takes one call from `caller`'s bucket. False when it is empty; `retry_after` is then
  // how long until a token is there.
  bool TryCall(const std::string& caller, absl::Duration* retry_after);

  // Opens a stream of `caller`: a guard that closes it when destroyed, or null when the
  // caller already holds max_streams.
  std::shared_ptr<void> TryOpenStream(const std::string& caller);

  size_t tracked_callers() const;

 private:
  struct Caller {
    double tokens = 0;
    absl::Time refilled;
    int streams = 0;
    // Its place in `forgettable_` while it holds no stream (end() while it holds one).
    std::list<const std::string*>::iterator place;
  };
  void RefillLocked(Caller& caller, absl::Time now) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The caller's entry (made with a full bucket if new), moved to the front of the
  // forgettable ones if it holds no stream; the least recently used one is forgotten first
  // when the table is full.
  Caller& FindLocked(const std::string& key, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CloseStream(const std::string& caller);

  const CallerLimitsOptions options_;
  const double burst_;
  mutable absl::Mutex mu_;
  std::unordered_map<std::string, Caller> callers_ ABSL_GUARDED_BY(mu_);
  // Callers holding no stream, most recently used first (keys point into callers_).
  std::list<const std::string*> forgettable_ ABSL_GUARDED_BY(mu_);
};

}  // namespace inspection::security

#endif  // GATEWAY_SECURITY_CALLER_LIMITS_H_
