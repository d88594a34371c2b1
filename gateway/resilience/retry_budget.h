#ifndef GATEWAY_RESILIENCE_RETRY_BUDGET_H_
#define GATEWAY_RESILIENCE_RETRY_BUDGET_H_

#include <cstdint>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace inspection::resilience {

struct RetryBudgetConfig {
  // Retries in flight may be this share of the requests in flight (Envoy: budget_percent).
  double ratio = 0.2;
  // ... but at least this many, so that a quiet gateway can still retry
  // (Envoy: min_retry_concurrency).
  int64_t min_retries = 3;
};

struct RetryBudgetStats {
  int64_t requests_in_flight = 0;
  int64_t retries_in_flight = 0;
  int64_t retries_started = 0;   // TryStartRetry() that returned true, ever
  int64_t budget_exhausted = 0;  // TryStartRetry() that returned false, ever
};

// Limits retries so that an outage does not multiply the load on the vendor (Envoy's
// retry budget): a retry may start iff
//   retries_in_flight < max(min_retries, ratio * requests_in_flight).
// "Requests" are client requests (one RequestStarted() per request, however many attempts
// it makes); "retries" are attempts after a request's first, counted from the moment
// TryStartRetry() grants them to RetryFinished() (a retry's backoff wait included: it is
// a commitment to send).
// One per upstream, shared by all its requests. Thread-safe.
class RetryBudget {
 public:
  // INVALID_ARGUMENT unless ratio is finite and >= 0 and min_retries >= 0.
  static absl::StatusOr<std::unique_ptr<RetryBudget>> Create(const RetryBudgetConfig& config);

  RetryBudget(const RetryBudget&) = delete;
  RetryBudget& operator=(const RetryBudget&) = delete;

  void RequestStarted();
  // Unbalanced calls (more finishes than starts) are ignored rather than going negative.
  void RequestFinished();

  // True, counting one more retry in flight, iff the budget allows a retry now; the
  // caller then owes one RetryFinished(). False counts in `budget_exhausted`.
  bool TryStartRetry();
  // Unbalanced calls are ignored rather than going negative.
  void RetryFinished();

  RetryBudgetStats Stats() const;

 private:
  explicit RetryBudget(const RetryBudgetConfig& config) : config_(config) {}

  const RetryBudgetConfig config_;
  mutable absl::Mutex mu_;
  RetryBudgetStats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace inspection::resilience

#endif  // GATEWAY_RESILIENCE_RETRY_BUDGET_H_
