#ifndef GATEWAY_PIPELINE_RETRYING_CALLER_H_
#define GATEWAY_PIPELINE_RETRYING_CALLER_H_

#include <functional>
#include <memory>

#include "gateway/pipeline/pipeline_metrics.h"
#include "gateway/resilience/backoff.h"
#include "gateway/resilience/circuit_breaker.h"
#include "gateway/resilience/retry_budget.h"
#include "gateway/resilience/retry_wait.h"
#include "gateway/timers/scheduler.h"
#include "gateway/upstream/vendor_caller.h"

namespace inspection::pipeline {

struct RetryOptions {
  resilience::BackoffConfig backoff;  // base 25 ms, cap 1 s, 3 attempts by default
  absl::Duration min_attempt_time = resilience::kDefaultMinAttemptTime;
  std::function<absl::Time()> clock = [] { return absl::Now(); };
  resilience::RandomSource random;  // null: a thread-local generator
  // Upstream metrics (attempts by status class and latency, retries by reason, budget
  // refusals, attempts per call); null records nothing.
  PipelineMetrics* metrics = nullptr;
  // The vendor account this loop calls, as PipelineMetrics::AccountIndex gives it: the
  // `account` label of its metrics.
  size_t metrics_account = 0;
};

// The retry loop and circuit breaker of the request pipeline (docs/design.md §4), a decorator
// over the next VendorCaller. Per call: ask the breaker (open: fail fast with UNAVAILABLE
// and RetryInfo), call the next caller, and on failure retry only what the route's
// idempotency and the failure allow (resilience::ClassifyRetry), after a full-jitter
// backoff or the vendor's Retry-After, only if the attempt can still finish before the
// caller's deadline and the retry budget has room. When it gives up with a delay in mind
// the error carries it as RetryInfo (and the service adds grpc-retry-pushback-ms). Waits
// are timers: no thread is held. Thread-safe.
class RetryingCaller final : public upstream::VendorCaller {
 public:
  RetryingCaller(upstream::VendorCaller* next, RetryOptions options,
                 resilience::RetryBudget* budget, resilience::CircuitBreaker* breaker,
                 timers::Scheduler* timers);

  void Call(routes::RouteId route, const vendor::VendorRequest& request,
            std::chrono::system_clock::time_point deadline, const upstream::CallOptions& options,
            upstream::VendorCallback done) override;

 private:
  struct CallState;
  void Attempt(std::shared_ptr<CallState> state);
  void OnResult(std::shared_ptr<CallState> state, resilience::CircuitBreaker::Permit permit,
                upstream::VendorResult result);
  void Finish(const std::shared_ptr<CallState>& state, upstream::VendorResult result);

  upstream::VendorCaller* const next_;
  const RetryOptions options_;
  const resilience::BackoffPolicy policy_;
  resilience::RetryBudget* const budget_;
  resilience::CircuitBreaker* const breaker_;
  timers::Scheduler* const timers_;
};

}  // namespace inspection::pipeline

#endif  // GATEWAY_PIPELINE_RETRYING_CALLER_H_
