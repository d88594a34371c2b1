#ifndef GATEWAY_PIPELINE_PIPELINE_METRICS_H_
#define GATEWAY_PIPELINE_PIPELINE_METRICS_H_

// The request pipeline's series (docs/design.md §7): every upstream attempt, retry and
// cache outcome by `account` and `route` (RetryingCaller, CachingCaller; the server adds
// idempotency replays and vendor drift), each account's circuit breaker, and the cache's
// size. Created once from the registry's scope, every series up front, from bounded label
// sets (route table labels, configured accounts); the hot path holds typed handles, so a
// sample is an atomic add or one histogram observation. A label outside the sets is never
// created: unknown names and indexes land in a pre-created "other" bucket. Thread-safe;
// handles stay valid as long as this object lives.

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>

#include "absl/status/statusor.h"
#include "gateway/metrics/metrics_scope.h"
#include "gateway/resilience/circuit_breaker.h"
#include "gateway/resilience/retry_policy.h"

namespace inspection::pipeline {

// `status_class` of an upstream attempt: the HTTP status class, or transport_error when no
// HTTP response arrived (connect failure, reset, timeout, malformed response).
enum class StatusClass { k1xx, k2xx, k3xx, k4xx, k5xx, kTransportError };
inline constexpr size_t kNumStatusClasses = 6;
std::string_view StatusClassLabel(StatusClass status_class);
// 100..599 -> its class; anything else (0 = "no response", garbage) -> kTransportError.
StatusClass StatusClassOf(int http_status);

// `reason` of an upstream retry: the retry policy's own enum (one type, no mirror);
// resilience::RetryReasonLabel spells the label. kNotRetryable is never counted.
using RetryReason = resilience::RetryReason;
inline constexpr size_t kNumRetryReasons = 7;  // kConnect .. kStatus504

// Circuit breaker state: the breaker's own enum. The value of
// inspection_upstream_circuit_state is CircuitStateGaugeValue (closed 0, half-open 1,
// open 2); `to` label values: closed, half_open, open.
using CircuitState = resilience::CircuitState;
inline constexpr size_t kNumCircuitStates = 3;
double CircuitStateGaugeValue(CircuitState state);
std::string_view CircuitStateLabel(CircuitState state);

// Everything labelled by `account` and `route`: upstream traffic, retries, cache, idempotency,
// vendor drift.
class RouteMetrics {
 public:
  // One upstream HTTP attempt finished (each retry is an attempt):
  // inspection_upstream_requests_total{status_class} and
  // inspection_upstream_request_duration_seconds (time to the response or the failure).
  void RecordAttempt(StatusClass status_class, std::chrono::nanoseconds elapsed);
  // Same, classifying an HTTP status with StatusClassOf().
  void RecordAttempt(int http_status, std::chrono::nanoseconds elapsed);
  // A retry was scheduled (inspection_upstream_retries_total{reason}).
  void RecordRetry(RetryReason reason);
  // A retry was wanted but the retry budget refused it.
  void RecordRetryBudgetExhausted();
  // An attempt timed out on the caller's own deadline (shorter than the route's timeout):
  // not counted against the breaker (inspection_upstream_caller_deadline_timeouts_total).
  void RecordCallerDeadlineTimeout();
  // One logical call finished after `attempts` attempts (>= 1):
  // inspection_upstream_attempts_per_call.
  void RecordAttemptsPerCall(int attempts);
  // inspection_cache_{hits,misses,coalesced,stale_served}_total.
  void RecordCacheHit();
  void RecordCacheMiss();
  void RecordCacheCoalesced();    // a request that waited for an identical in-flight one
  void RecordCacheStaleServed();  // stale-if-error answer
  // A caller's deadline passed while it waited for a shared cache fetch; it was answered
  // CALLER_DEADLINE_EXCEEDED and the fetch went on (inspection_cache_waiter_deadlines_total).
  void RecordCacheWaiterDeadline();
  // inspection_idempotency_replays_total: a stored outcome was replayed for a repeated key.
  void RecordIdempotencyReplay();
  // inspection_vendor_unknown_fields_total: `count` JSON fields we do not model arrived.
  void RecordVendorUnknownFields(uint64_t count);

 private:
  friend class PipelineMetrics;
  std::array<prometheus::Counter*, kNumStatusClasses> requests_{};
  prometheus::Histogram* duration_ = nullptr;
  std::array<prometheus::Counter*, kNumRetryReasons> retries_{};
  prometheus::Counter* budget_exhausted_ = nullptr;
  prometheus::Counter* caller_deadline_timeouts_ = nullptr;
  prometheus::Histogram* attempts_per_call_ = nullptr;
  prometheus::Counter* cache_hits_ = nullptr;
  prometheus::Counter* cache_misses_ = nullptr;
  prometheus::Counter* cache_coalesced_ = nullptr;
  prometheus::Counter* cache_stale_served_ = nullptr;
  prometheus::Counter* cache_waiter_deadlines_ = nullptr;
  prometheus::Counter* idempotency_replays_ = nullptr;
  prometheus::Counter* unknown_fields_ = nullptr;
};

// Circuit breaker of one upstream.
class UpstreamMetrics {
 public:
  // The breaker moved to `to`: inspection_upstream_circuit_transitions_total{to} += 1 and
  // inspection_upstream_circuit_state = to.
  void RecordTransition(CircuitState to);
  // Sets the state gauge only (e.g. the initial state; it starts at closed = 0).
  void SetState(CircuitState state);

 private:
  friend class PipelineMetrics;
  prometheus::Gauge* state_ = nullptr;
  std::array<prometheus::Counter*, kNumCircuitStates> transitions_{};
};

// The label sets, each from configuration only (so the series stay bounded).
struct PipelineMetricsConfig {
  // `route` label values; position = route index for ForRoute() (the route table's order,
  // RouteId's numeric value). CheckLabelValues' rules.
  std::vector<std::string> routes;
  // `account` label values (1..64 of [A-Za-z0-9_.-]; "default" for the default account);
  // position = account index for ForRoute() and AccountIndex(). Empty: {"default"}.
  std::vector<std::string> accounts;
  // `upstream` label values of the circuit breakers; position = index for ForUpstream();
  // upstreams[i] is the breaker of accounts[i] (its `account` label).
  std::vector<std::string> upstreams;
};

class PipelineMetrics {
 public:
  // Registers every family and series. InvalidArgument when a label set breaks its rules
  // (the message names the list and the value).
  static absl::StatusOr<std::shared_ptr<PipelineMetrics>> Create(
      const metrics::MetricsScope& scope, const PipelineMetricsConfig& config);

  // Handles of config.routes[route_index] for config.accounts[account_index]; a route index
  // out of range gets the "other" route, an account index out of range the first account.
  RouteMetrics& ForRoute(size_t route_index, size_t account_index = 0);
  // By label value (a map lookup: resolve once, not per request); unknown -> "other".
  RouteMetrics& ForRouteLabel(std::string_view route_label, size_t account_index = 0);
  // The account index of a vendor account name as calls carry it (CallOptions::account:
  // "" or "default" for the default account). Calls name only configured accounts (the
  // services refuse others); an unknown name gets index 0. A small map lookup.
  size_t AccountIndex(std::string_view account) const;
  size_t route_count() const { return route_labels_.size(); }

  // Handles of config.upstreams[index]; out of range -> "other".
  UpstreamMetrics& ForUpstream(size_t upstream_index);

  void RecordCacheEvictions(uint64_t count);  // inspection_cache_evictions_total
  void SetCacheBytes(uint64_t bytes);         // inspection_cache_bytes

 private:
  PipelineMetrics() = default;
  void BuildRoutes(const metrics::MetricsScope& scope, const std::vector<std::string>& routes);
  void BuildUpstreams(const metrics::MetricsScope& scope,
                      const std::vector<std::string>& upstreams);
  void BuildCache(const metrics::MetricsScope& scope);

  // Built once in Create(), never resized afterwards: element addresses are stable.
  std::vector<std::string> account_labels_;
  std::map<std::string, size_t, std::less<>> account_index_;
  std::vector<std::string> route_labels_;
  std::map<std::string, size_t, std::less<>> route_index_;
  // Per account, route_labels_.size() + 1 handles ("other" last).
  std::vector<RouteMetrics> routes_;
  std::vector<UpstreamMetrics> upstreams_;  // + "other" last
  prometheus::Counter* cache_evictions_ = nullptr;
  prometheus::Gauge* cache_bytes_ = nullptr;
};

}  // namespace inspection::pipeline

#endif  // GATEWAY_PIPELINE_PIPELINE_METRICS_H_
