#ifndef GATEWAY_RESILIENCE_CIRCUIT_BREAKER_H_
#define GATEWAY_RESILIENCE_CIRCUIT_BREAKER_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace inspection::resilience {

enum class CircuitState { kClosed, kOpen, kHalfOpen };

// Metric label: "closed", "open", "half_open". Static storage.
std::string_view CircuitStateName(CircuitState state);

struct CircuitBreakerConfig {
  // Closed -> open after this many consecutive failures. 0 disables this rule.
  int consecutive_failures = 5;
  // Closed -> open when, over the rolling window, failures / requests >= failure_ratio
  // and requests >= minimum_requests. In (0, 1].
  double failure_ratio = 0.5;
  int minimum_requests = 20;
  // The rolling window: `window_buckets` fixed buckets of `bucket_width` each, aligned on
  // multiples of bucket_width since the Unix epoch. The window is the current bucket and
  // the (window_buckets - 1) before it, so it covers between
  // (window_buckets - 1) * bucket_width and window_buckets * bucket_width of history
  // (9..10 s with the defaults).
  int window_buckets = 10;
  absl::Duration bucket_width = absl::Seconds(1);
  // Open -> half-open after open_duration. Each re-open straight from half-open (the
  // probe failed) doubles the previous open time, up to max_open_duration; closing resets
  // it. Set max_open_duration = open_duration for a constant open time.
  absl::Duration open_duration = absl::Seconds(5);
  absl::Duration max_open_duration = absl::Seconds(60);
  // Half-open: at most this many probes in flight at once ...
  int half_open_max_probes = 1;
  // ... and this many consecutive probe successes close the breaker; one probe failure
  // re-opens it.
  int success_threshold = 1;
};

struct CircuitBreakerStats {
  int64_t opened = 0;       // transitions into kOpen (from closed or half-open)
  int64_t half_opened = 0;  // transitions into kHalfOpen
  int64_t closed = 0;       // transitions into kClosed (recoveries)
  int64_t rejected = 0;     // Allow() calls refused (fail fast)
};

// A circuit breaker for one upstream.
//
//   closed --(consecutive failures | failure ratio over the window)--> open
//   open --(open time elapsed)--> half-open
//   half-open --(success_threshold consecutive probe successes)--> closed
//   half-open --(a probe failure)--> open (for twice as long, up to the maximum)
//
// Usage, per call:
//   CircuitBreaker::Permit permit = breaker.Allow();
//   if (!permit) -> fail fast: UNAVAILABLE + RetryInfo(breaker.RetryAfter())
//   ... call ... ; breaker.Record(permit, /*success=*/...);   // or Release(permit)
// What counts as a failure is the caller's decision (typically connect errors, resets,
// timeouts and 5xx, but not 4xx, which say nothing about the vendor's health).
//
// A Permit remembers the breaker's "generation" (bumped on every transition), so outcomes
// of calls admitted before a transition are ignored: a slow call admitted while closed
// that succeeds during half-open neither closes the breaker nor takes a probe's place.
//
// Time only moves when the clock is read: open -> half-open happens inside whichever
// method first notices that the open time has elapsed (state(), Allow(), RetryAfter(),
// Record(), Stats()). No timers, no threads.
//
// Thread-safe. The listener is called outside the internal lock, exactly once per
// transition and in transition order even when several threads cause transitions (a
// thread that finds another one delivering leaves its transitions to it). It may call
// back into the breaker; it must not block for long, since it delays the calling
// request. The clock is called under the lock and must not call back into the breaker.
class CircuitBreaker {
 public:
  using Clock = std::function<absl::Time()>;
  using Listener = std::function<void(CircuitState from, CircuitState to)>;

  // The answer of Allow(). Cheap to copy; holds no resources, so a dropped Permit only
  // matters in half-open (see Release()).
  class Permit {
   public:
    Permit() = default;  // not allowed
    bool allowed() const { return allowed_; }
    explicit operator bool() const { return allowed_; }

   private:
    friend class CircuitBreaker;
    bool allowed_ = false;
    bool probe_ = false;
    uint64_t generation_ = 0;
  };

  // INVALID_ARGUMENT for out-of-range config: consecutive_failures < 0, failure_ratio not
  // in (0, 1], minimum_requests < 1, window_buckets < 1, bucket_width <= 0,
  // open_duration <= 0, max_open_duration < open_duration, half_open_max_probes < 1,
  // success_threshold < 1, any infinite duration. A null clock means absl::Now; the
  // listener may be null.
  static absl::StatusOr<std::unique_ptr<CircuitBreaker>> Create(const CircuitBreakerConfig& config,
                                                                Clock clock,
                                                                Listener listener = nullptr);

  CircuitBreaker(const CircuitBreaker&) = delete;
  CircuitBreaker& operator=(const CircuitBreaker&) = delete;

  // Closed: allowed. Open: refused (counted in `rejected`). Half-open: allowed as a probe
  // while fewer than half_open_max_probes probes are in flight, refused otherwise.
  Permit Allow();

  // The outcome of a call admitted by `permit`. Ignored when the permit was refused or
  // belongs to an earlier generation. Call at most once per permit.
  void Record(const Permit& permit, bool success);

  // The call admitted by `permit` ended without an outcome that says anything about the
  // upstream (e.g. the client cancelled): frees its probe slot in half-open, counts
  // nothing. Every allowed permit must end in exactly one Record() or Release(), or a
  // half-open breaker runs out of probe slots and stays half-open.
  void Release(const Permit& permit);

  CircuitState state();

  // While open: the time left until half-open (> 0), for RetryInfo /
  // grpc-retry-pushback-ms. Otherwise zero: a half-open breaker that refuses a call has a
  // probe in flight and no estimate of when it will answer.
  absl::Duration RetryAfter();

  CircuitBreakerStats Stats();

 private:
  struct Bucket {
    // bucket_width periods since the Unix epoch; the minimum int64_t = never used.
    int64_t index = std::numeric_limits<int64_t>::min();
    int64_t successes = 0;
    int64_t failures = 0;
  };
  using Transition = std::pair<CircuitState, CircuitState>;

  CircuitBreaker(const CircuitBreakerConfig& config, Clock clock, Listener listener);

  // Opens -> half-opens when the open time has elapsed at `now`.
  void AdvanceLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void TransitionLocked(CircuitState to, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RecordClosedLocked(bool success, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ResetCountsLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Calls the listener for queued transitions, unless another thread already is.
  void DeliverTransitions() ABSL_LOCKS_EXCLUDED(mu_);

  const CircuitBreakerConfig config_;
  const Clock clock_;
  const Listener listener_;

  absl::Mutex mu_;
  CircuitState state_ ABSL_GUARDED_BY(mu_) = CircuitState::kClosed;
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  // Closed.
  int consecutive_failures_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<Bucket> buckets_ ABSL_GUARDED_BY(mu_);  // ring, indexed by index % size
  int64_t latest_bucket_ ABSL_GUARDED_BY(mu_) = 0;
  // Open.
  absl::Time open_until_ ABSL_GUARDED_BY(mu_);
  absl::Duration current_open_duration_ ABSL_GUARDED_BY(mu_);
  // Half-open.
  int probes_in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  int probe_successes_ ABSL_GUARDED_BY(mu_) = 0;

  CircuitBreakerStats stats_ ABSL_GUARDED_BY(mu_);
  std::deque<Transition> undelivered_ ABSL_GUARDED_BY(mu_);
  bool delivering_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace inspection::resilience

#endif  // GATEWAY_RESILIENCE_CIRCUIT_BREAKER_H_
