#include "gateway/pipeline/pipeline_metrics.h"

#include <prometheus/family.h>
#include <prometheus/registry.h>

#include "absl/strings/str_cat.h"

namespace inspection::pipeline {
namespace {

using metrics::BoundedAt;
using metrics::IndexOrOther;
using metrics::kOtherLabel;
using metrics::LatencyBuckets;
using metrics::Seconds;
using prometheus::Labels;

std::string Str(std::string_view view) { return std::string(view); }

constexpr std::array<std::string_view, kNumStatusClasses> kStatusClassLabels = {
    "1xx", "2xx", "3xx", "4xx", "5xx", "transport_error"};
// Every retryable reason, in label order: resilience::RetryReason without kNotRetryable.
constexpr std::array<RetryReason, kNumRetryReasons> kRetryReasons = {
    RetryReason::kConnect,   RetryReason::kReset,     RetryReason::kTimeout,
    RetryReason::kStatus429, RetryReason::kStatus502, RetryReason::kStatus503,
    RetryReason::kStatus504};
// Indexed by CircuitStateGaugeValue.
constexpr std::array<std::string_view, kNumCircuitStates> kCircuitStateLabels = {
    "closed", "half_open", "open"};

// Attempts per logical call: integers, so bucket at each small count.
const prometheus::Histogram::BucketBoundaries& AttemptBuckets() {
  static const auto* const kBuckets =
      new prometheus::Histogram::BucketBoundaries{1, 2, 3, 4, 5, 6, 8, 10};
  return *kBuckets;
}
}  // namespace

std::string_view StatusClassLabel(StatusClass status_class) {
  return BoundedAt(kStatusClassLabels, static_cast<size_t>(status_class));
}

StatusClass StatusClassOf(int http_status) {
  if (http_status < 100 || http_status > 599) return StatusClass::kTransportError;
  return static_cast<StatusClass>(http_status / 100 - 1);
}

double CircuitStateGaugeValue(CircuitState state) {
  switch (state) {
    case CircuitState::kClosed:
      return 0;
    case CircuitState::kHalfOpen:
      return 1;
    case CircuitState::kOpen:
      return 2;
  }
  return 0;
}

std::string_view CircuitStateLabel(CircuitState state) {
  return BoundedAt(kCircuitStateLabels, static_cast<size_t>(CircuitStateGaugeValue(state)));
}

void RouteMetrics::RecordAttempt(StatusClass status_class, std::chrono::nanoseconds elapsed) {
  BoundedAt(requests_, static_cast<size_t>(status_class))->Increment();
  duration_->Observe(Seconds(elapsed));
}

void RouteMetrics::RecordAttempt(int http_status, std::chrono::nanoseconds elapsed) {
  RecordAttempt(StatusClassOf(http_status), elapsed);
}

void RouteMetrics::RecordRetry(RetryReason reason) {
  for (size_t r = 0; r < kNumRetryReasons; ++r) {
    if (kRetryReasons[r] == reason) retries_[r]->Increment();
  }
}

void RouteMetrics::RecordRetryBudgetExhausted() { budget_exhausted_->Increment(); }

void RouteMetrics::RecordCallerDeadlineTimeout() { caller_deadline_timeouts_->Increment(); }

void RouteMetrics::RecordAttemptsPerCall(int attempts) {
  attempts_per_call_->Observe(static_cast<double>(attempts));
}

void RouteMetrics::RecordCacheHit() { cache_hits_->Increment(); }
void RouteMetrics::RecordCacheMiss() { cache_misses_->Increment(); }
void RouteMetrics::RecordCacheCoalesced() { cache_coalesced_->Increment(); }
void RouteMetrics::RecordCacheWaiterDeadline() { cache_waiter_deadlines_->Increment(); }
void RouteMetrics::RecordCacheStaleServed() { cache_stale_served_->Increment(); }
void RouteMetrics::RecordIdempotencyReplay() { idempotency_replays_->Increment(); }

void RouteMetrics::RecordVendorUnknownFields(uint64_t count) {
  if (count > 0) unknown_fields_->Increment(static_cast<double>(count));
}

void UpstreamMetrics::RecordTransition(CircuitState to) {
  BoundedAt(transitions_, static_cast<size_t>(CircuitStateGaugeValue(to)))->Increment();
  SetState(to);
}

void UpstreamMetrics::SetState(CircuitState state) { state_->Set(CircuitStateGaugeValue(state)); }

absl::StatusOr<std::shared_ptr<PipelineMetrics>> PipelineMetrics::Create(
    const metrics::MetricsScope& scope, const PipelineMetricsConfig& config) {
  if (absl::Status s = metrics::CheckLabelValues("routes", config.routes); !s.ok()) return s;
  if (absl::Status s = metrics::CheckAccountLabels(config.accounts); !s.ok()) return s;
  if (absl::Status s = metrics::CheckLabelValues("upstreams", config.upstreams); !s.ok()) {
    return s;
  }
  std::shared_ptr<PipelineMetrics> out(new PipelineMetrics());
  out->account_labels_ = config.accounts;
  if (out->account_labels_.empty())
    out->account_labels_.emplace_back(metrics::kDefaultAccountLabel);
  for (size_t i = 0; i < out->account_labels_.size(); ++i) {
    out->account_index_.emplace(out->account_labels_[i], i);
  }
  absl::Status built = metrics::Registering([&] {
    out->BuildRoutes(scope, config.routes);
    out->BuildUpstreams(scope, config.upstreams);
    out->BuildCache(scope);
  });
  if (!built.ok()) return built;
  return out;
}

void PipelineMetrics::BuildRoutes(const metrics::MetricsScope& scope,
                                  const std::vector<std::string>& routes) {
  prometheus::Registry& registry = scope.registry();
  auto& requests = prometheus::BuildCounter()
                       .Name("inspection_upstream_requests_total")
                       .Help("Upstream (vendor) HTTP attempts by route and status class.")
                       .Register(registry);
  auto& duration = prometheus::BuildHistogram()
                       .Name("inspection_upstream_request_duration_seconds")
                       .Help("Duration of upstream HTTP attempts, to the response or failure.")
                       .Register(registry);
  auto& retries = prometheus::BuildCounter()
                      .Name("inspection_upstream_retries_total")
                      .Help("Upstream retries scheduled, by route and reason.")
                      .Register(registry);
  auto& budget = prometheus::BuildCounter()
                     .Name("inspection_upstream_retry_budget_exhausted_total")
                     .Help("Retries not made because the retry budget was exhausted.")
                     .Register(registry);
  auto& caller_deadline = prometheus::BuildCounter()
                              .Name("inspection_upstream_caller_deadline_timeouts_total")
                              .Help(
                                  "Upstream attempts that timed out on the caller's own deadline "
                                  "(shorter than the route's timeout); not counted against the "
                                  "circuit breaker.")
                              .Register(registry);
  auto& attempts = prometheus::BuildHistogram()
                       .Name("inspection_upstream_attempts_per_call")
                       .Help("Upstream attempts made per logical call.")
                       .Register(registry);
  auto& hits = prometheus::BuildCounter()
                   .Name("inspection_cache_hits_total")
                   .Help("Response cache hits.")
                   .Register(registry);
  auto& misses = prometheus::BuildCounter()
                     .Name("inspection_cache_misses_total")
                     .Help("Response cache misses.")
                     .Register(registry);
  auto& coalesced = prometheus::BuildCounter()
                        .Name("inspection_cache_coalesced_total")
                        .Help("Requests that waited for an identical in-flight upstream call.")
                        .Register(registry);
  auto& stale = prometheus::BuildCounter()
                    .Name("inspection_cache_stale_served_total")
                    .Help("Stale cache entries served because the upstream failed.")
                    .Register(registry);
  auto& waiter_deadlines = prometheus::BuildCounter()
                               .Name("inspection_cache_waiter_deadlines_total")
                               .Help(
                                   "Callers whose deadline passed while they waited for a shared "
                                   "cache fetch (answered CALLER_DEADLINE_EXCEEDED; the fetch "
                                   "went on and its answer was cached).")
                               .Register(registry);
  auto& replays = prometheus::BuildCounter()
                      .Name("inspection_idempotency_replays_total")
                      .Help("Stored outcomes replayed for a repeated idempotency key.")
                      .Register(registry);
  auto& unknown_fields = prometheus::BuildCounter()
                             .Name("inspection_vendor_unknown_fields_total")
                             .Help(
                                 "JSON fields received from the vendor that the gateway does "
                                 "not model (kept, and counted here).")
                             .Register(registry);
  auto make_route = [&](std::string_view account, std::string_view route) {
    const Labels labels = {{"account", Str(account)}, {"route", Str(route)}};
    RouteMetrics m;
    for (size_t c = 0; c < kNumStatusClasses; ++c) {
      m.requests_[c] = &requests.Add({{"account", Str(account)},
                                      {"route", Str(route)},
                                      {"status_class", Str(kStatusClassLabels[c])}});
    }
    m.duration_ = &duration.Add(labels, LatencyBuckets());
    for (size_t r = 0; r < kNumRetryReasons; ++r) {
      m.retries_[r] =
          &retries.Add({{"account", Str(account)},
                        {"route", Str(route)},
                        {"reason", Str(resilience::RetryReasonLabel(kRetryReasons[r]))}});
    }
    m.budget_exhausted_ = &budget.Add(labels);
    m.caller_deadline_timeouts_ = &caller_deadline.Add(labels);
    m.attempts_per_call_ = &attempts.Add(labels, AttemptBuckets());
    m.cache_hits_ = &hits.Add(labels);
    m.cache_misses_ = &misses.Add(labels);
    m.cache_coalesced_ = &coalesced.Add(labels);
    m.cache_stale_served_ = &stale.Add(labels);
    m.cache_waiter_deadlines_ = &waiter_deadlines.Add(labels);
    m.idempotency_replays_ = &replays.Add(labels);
    m.unknown_fields_ = &unknown_fields.Add(labels);
    return m;
  };
  route_labels_ = routes;
  for (size_t r = 0; r < routes.size(); ++r) route_index_.emplace(routes[r], r);
  // One block of routes.size() + 1 handles ("other" last) per account, in account order.
  routes_.reserve(account_labels_.size() * (routes.size() + 1));
  for (const std::string& account : account_labels_) {
    for (const std::string& route : routes) routes_.push_back(make_route(account, route));
    routes_.push_back(make_route(account, kOtherLabel));
  }
}

void PipelineMetrics::BuildUpstreams(const metrics::MetricsScope& scope,
                                     const std::vector<std::string>& upstreams) {
  prometheus::Registry& registry = scope.registry();
  auto& circuit_state = prometheus::BuildGauge()
                            .Name("inspection_upstream_circuit_state")
                            .Help("Circuit breaker state: 0 closed, 1 half-open, 2 open.")
                            .Register(registry);
  auto& transitions = prometheus::BuildCounter()
                          .Name("inspection_upstream_circuit_transitions_total")
                          .Help("Circuit breaker state changes, by target state.")
                          .Register(registry);
  auto make_upstream = [&](std::string_view upstream, std::string_view account) {
    UpstreamMetrics m;
    m.state_ = &circuit_state.Add({{"upstream", Str(upstream)}, {"account", Str(account)}});
    for (size_t s = 0; s < kNumCircuitStates; ++s) {
      m.transitions_[s] = &transitions.Add({{"upstream", Str(upstream)},
                                            {"account", Str(account)},
                                            {"to", Str(kCircuitStateLabels[s])}});
    }
    return m;
  };
  upstreams_.reserve(upstreams.size() + 1);
  for (size_t i = 0; i < upstreams.size(); ++i) {
    // upstreams[i] is the breaker of accounts[i] (the composition root keeps them aligned).
    const std::string_view account =
        i < account_labels_.size() ? std::string_view(account_labels_[i]) : kOtherLabel;
    upstreams_.push_back(make_upstream(upstreams[i], account));
  }
  upstreams_.push_back(make_upstream(kOtherLabel, kOtherLabel));
}

void PipelineMetrics::BuildCache(const metrics::MetricsScope& scope) {
  prometheus::Registry& registry = scope.registry();
  cache_evictions_ = &prometheus::BuildCounter()
                          .Name("inspection_cache_evictions_total")
                          .Help("Cache entries evicted to stay within the byte bound.")
                          .Register(registry)
                          .Add({});
  cache_bytes_ = &prometheus::BuildGauge()
                      .Name("inspection_cache_bytes")
                      .Help("Bytes held by the response cache.")
                      .Register(registry)
                      .Add({});
}

RouteMetrics& PipelineMetrics::ForRoute(size_t route_index, size_t account_index) {
  const size_t block = route_labels_.size() + 1;
  const size_t account = account_index < account_labels_.size() ? account_index : 0;
  const size_t route = route_index < route_labels_.size() ? route_index : route_labels_.size();
  return routes_[account * block + route];
}

RouteMetrics& PipelineMetrics::ForRouteLabel(std::string_view route_label, size_t account_index) {
  return ForRoute(IndexOrOther(route_index_, route_label, route_labels_.size()), account_index);
}

size_t PipelineMetrics::AccountIndex(std::string_view account) const {
  if (account.empty()) return 0;
  const auto it = account_index_.find(account);
  return it == account_index_.end() ? 0 : it->second;
}

UpstreamMetrics& PipelineMetrics::ForUpstream(size_t upstream_index) {
  const size_t other = upstreams_.size() - 1;
  return upstreams_[upstream_index < other ? upstream_index : other];
}

void PipelineMetrics::RecordCacheEvictions(uint64_t count) {
  if (count > 0) cache_evictions_->Increment(static_cast<double>(count));
}

void PipelineMetrics::SetCacheBytes(uint64_t bytes) {
  cache_bytes_->Set(static_cast<double>(bytes));
}

}  // namespace inspection::pipeline
