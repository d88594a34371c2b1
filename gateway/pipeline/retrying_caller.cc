#include "gateway/pipeline/retrying_caller.h"

#include "absl/strings/str_cat.h"
#include "gateway/resilience/retry_policy.h"

namespace inspection::pipeline {
namespace {

// Whether an outcome says the vendor is unhealthy (counts against the breaker).
bool UnhealthyOutcome(const upstream::VendorResult& result) {
  return !result.ok() && result.error->failure.CountsAgainstVendor();
}

}  // namespace

struct RetryingCaller::CallState {
  routes::RouteId route;
  vendor::VendorRequest request;
  std::chrono::system_clock::time_point deadline;
  upstream::CallOptions options;
  upstream::VendorCallback done;
  resilience::BackoffSequence backoff;
  bool retry_in_flight = false;
  int attempts = 0;
  std::chrono::steady_clock::time_point attempt_start;
  // The attempt's time was cut to the caller's deadline (shorter than the route's
  // timeout): its timeout says nothing about the vendor's health.
  bool cut_by_caller = false;
};

RetryingCaller::RetryingCaller(upstream::VendorCaller* next, RetryOptions options,
                               resilience::RetryBudget* budget, resilience::CircuitBreaker* breaker,
                               timers::Scheduler* timers)
    : next_(next),
      options_(std::move(options)),
      policy_(*resilience::BackoffPolicy::Create(options_.backoff)),
      budget_(budget),
      breaker_(breaker),
      timers_(timers) {}

void RetryingCaller::Call(routes::RouteId route, const vendor::VendorRequest& request,
                          std::chrono::system_clock::time_point deadline,
                          const upstream::CallOptions& options, upstream::VendorCallback done) {
  budget_->RequestStarted();
  auto state =
      std::make_shared<CallState>(CallState{route, request, deadline, options, std::move(done),
                                            resilience::BackoffSequence(policy_, options_.random)});
  Attempt(std::move(state));
}

void RetryingCaller::Attempt(std::shared_ptr<CallState> state) {
  resilience::CircuitBreaker::Permit permit = breaker_->Allow();
  if (!permit) {
    // Fail fast while the vendor is known to be down; tell the caller when to come back.
    const routes::Route& route = routes::GetRoute(state->route);
    errors::ApiError error;
    error.code = absl::StatusCode::kUnavailable;
    error.reason = std::string(errors::kReasonCircuitOpen);
    error.failure.kind = resilience::VendorFailure::Kind::kNotCalled;
    error.metadata["route"] = std::string(route.metric_label);
    error.message = absl::StrCat("the vendor is failing; calls are paused (",
                                 std::string(route.metric_label), ")");
    error.retry_delay =
        std::chrono::milliseconds(absl::ToInt64Milliseconds(breaker_->RetryAfter()));
    upstream::VendorResult result;
    result.error = std::move(error);
    Finish(state, std::move(result));
    return;
  }
  ++state->attempts;
  state->options.attempt = state->attempts;
  state->attempt_start = std::chrono::steady_clock::now();
  state->cut_by_caller =
      state->deadline - std::chrono::system_clock::now() < routes::GetRoute(state->route).timeout;
  next_->Call(state->route, state->request, state->deadline, state->options,
              [this, state, permit](upstream::VendorResult result) mutable {
                OnResult(std::move(state), permit, std::move(result));
              });
}

void RetryingCaller::OnResult(std::shared_ptr<CallState> state,
                              resilience::CircuitBreaker::Permit permit,
                              upstream::VendorResult result) {
  if (!result.ok() && state->cut_by_caller &&
      result.error->failure.kind == resilience::VendorFailure::Kind::kTimeout) {
    // An impatient caller's own deadline ran out, not the vendor's time: the permit goes
    // back unrecorded, so such callers cannot open the breaker for everyone else.
    breaker_->Release(permit);
    if (options_.metrics != nullptr) {
      options_.metrics->ForRoute(static_cast<size_t>(state->route), options_.metrics_account)
          .RecordCallerDeadlineTimeout();
    }
  } else {
    breaker_->Record(permit, !UnhealthyOutcome(result));
  }
  RouteMetrics* route_metrics = options_.metrics == nullptr
                                    ? nullptr
                                    : &options_.metrics->ForRoute(static_cast<size_t>(state->route),
                                                                  options_.metrics_account);
  if (route_metrics != nullptr) {
    // status 0 (no HTTP answer) is counted as transport_error.
    route_metrics->RecordAttempt(static_cast<int>(result.response.status),
                                 std::chrono::steady_clock::now() - state->attempt_start);
  }
  if (state->retry_in_flight) {
    budget_->RetryFinished();
    state->retry_in_flight = false;
  }
  if (result.ok()) {
    Finish(state, std::move(result));
    return;
  }
  const routes::Route& route = routes::GetRoute(state->route);
  const resilience::RetryReason reason =
      resilience::ClassifyRetry(route.idempotency, result.error->failure);
  if (!resilience::IsRetryable(reason)) {
    Finish(state, std::move(result));
    return;
  }
  std::optional<absl::Duration> backoff = state->backoff.NextDelay();
  if (!backoff.has_value()) {  // attempts used up
    Finish(state, std::move(result));
    return;
  }
  resilience::RetryWaitInputs inputs;
  if (result.error->retry_delay.has_value()) {
    inputs.retry_after = absl::Milliseconds(result.error->retry_delay->count());
  }
  inputs.backoff = *backoff;
  if (state->deadline != std::chrono::system_clock::time_point::max()) {
    inputs.time_remaining = absl::FromChrono(state->deadline) - options_.clock();
  }
  inputs.min_attempt_time = options_.min_attempt_time;
  const resilience::RetryWaitDecision decision = resilience::DecideRetryWait(inputs);
  if (!decision.retry) {
    // Giving up before the deadline: the caller learns how long to wait.
    result.error->retry_delay =
        std::chrono::milliseconds(absl::ToInt64Milliseconds(decision.delay));
    Finish(state, std::move(result));
    return;
  }
  if (!budget_->TryStartRetry()) {  // an outage must not multiply the load on the vendor
    if (route_metrics != nullptr) route_metrics->RecordRetryBudgetExhausted();
    result.error->metadata["retry_budget"] = "exhausted";
    Finish(state, std::move(result));
    return;
  }
  state->retry_in_flight = true;
  if (route_metrics != nullptr) route_metrics->RecordRetry(reason);
  timers_->RunAfter(decision.delay, [this, state]() mutable { Attempt(std::move(state)); });
}

void RetryingCaller::Finish(const std::shared_ptr<CallState>& state,
                            upstream::VendorResult result) {
  if (state->retry_in_flight) {
    budget_->RetryFinished();
    state->retry_in_flight = false;
  }
  budget_->RequestFinished();
  result.attempts = state->attempts;
  if (options_.metrics != nullptr && state->attempts > 0) {
    options_.metrics->ForRoute(static_cast<size_t>(state->route), options_.metrics_account)
        .RecordAttemptsPerCall(state->attempts);
  }
  std::move(state->done)(std::move(result));
}

}  // namespace inspection::pipeline
