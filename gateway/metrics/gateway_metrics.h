#ifndef GATEWAY_METRICS_GATEWAY_METRICS_H_
#define GATEWAY_METRICS_GATEWAY_METRICS_H_

// Every Prometheus metric of the gateway, registered once at construction.
//
// The rule (STYLE.md, prometheus-cpp): every family and every series is created when
// GatewayMetrics is built, from bounded label sets passed in by the composition root (route
// table metric labels, gRPC methods, upstream names, streaming RPC names). The hot path gets
// typed handles (RouteMetrics, GrpcMethodMetrics, ...) that hold pointers to the children, so
// recording a sample is an atomic add or one histogram observation: no label lookup, no
// allocation, no family lock. A label value outside the bounded sets is never created: lookups
// by an unknown name or index land in a pre-created "other" bucket.
//
// Wiring (the lead's composition root):
//   GatewayMetricsConfig config;
//   for (const routes::Route& r : routes::AllRoutes())
//     config.routes.emplace_back(r.metric_label);          // index == RouteId
//   config.grpc_methods = {{"inspection.v1.TokenService", "CreateToken", GrpcType::kUnary},
//                          ...};
//   config.upstreams = {"vendor"};
//   config.stream_rpcs = {"Subscribe", "StreamDamageResults", "WatchTokenStatus"};
//   absl::StatusOr<std::shared_ptr<GatewayMetrics>> metrics = GatewayMetrics::Create(config);
//   ...
//   metrics->ForRoute(static_cast<size_t>(RouteId::kCreateToken)).RecordAttempt(200, elapsed);
//
// Thread safety: GatewayMetrics and every handle it returns are safe to use from any thread
// concurrently (prometheus-cpp counters and gauges are atomics, histograms take a short
// internal lock). Handles stay valid as long as the GatewayMetrics object lives.

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <grpcpp/support/status_code_enum.h>
#include <prometheus/collectable.h>
#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/metric_family.h>
#include <prometheus/registry.h>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "gateway/metrics/metrics_scope.h"
#include "gateway/metrics/process_collector.h"
#include "gateway/resilience/circuit_breaker.h"
#include "gateway/resilience/retry_policy.h"

namespace inspection::metrics {

// The label value of every "other" bucket. Reserved: no configured label may use it.
inline constexpr std::string_view kOtherLabel = "other";
// The `account` label value of the default vendor account (upstream_url, api_key_file); the
// configuration reserves the name, so no named account can take it.
inline constexpr std::string_view kDefaultAccountLabel = "default";

// ---------------------------------------------------------------------------------------------
// Bounded label sets (enums), each with its exact label values.
// ---------------------------------------------------------------------------------------------

// `grpc_type`, go-grpc-prometheus spelling: unary, client_stream, server_stream, bidi_stream.
enum class GrpcType { kUnary, kClientStream, kServerStream, kBidiStream };
inline constexpr size_t kNumGrpcTypes = 4;
std::string_view GrpcTypeLabel(GrpcType type);

// `grpc_code`: the 17 gRPC codes, spelled as go-grpc-prometheus does (Go's codes.Code
// String(): "OK", "Canceled", "InvalidArgument", ...) so stock dashboards work.
inline constexpr size_t kNumGrpcCodes = 17;
std::string_view GrpcCodeLabel(grpc::StatusCode code);

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

// `reason` a streaming subscriber was ended by the gateway (not by the client).
enum class StreamDropReason {
  kSlowConsumer,   // its bounded queue was full (RESOURCE_EXHAUSTED)
  kCursorExpired,  // resume cursor older than retention (OUT_OF_RANGE)
  kShutdown,       // graceful shutdown (UNAVAILABLE + resumable cursor)
  kError,          // event log read failure or anything else
  kIdleCatchUp,    // catching up, its queue stayed full for streams.catchup_idle_timeout_ms
};
inline constexpr size_t kNumStreamDropReasons = 5;
std::string_view StreamDropReasonLabel(StreamDropReason reason);

// ---------------------------------------------------------------------------------------------
// Configuration: the bounded label sets that come from the rest of the gateway.
// ---------------------------------------------------------------------------------------------

struct GrpcMethodSpec {
  std::string service;  // fully qualified, "inspection.v1.TokenService"
  std::string method;   // "CreateToken"
  GrpcType type = GrpcType::kUnary;
};

// Every label value must be 1..128 characters of [A-Za-z0-9_.], unique within its list and
// not "other": this keeps ids and URLs out of the label space by construction.
struct GatewayMetricsConfig {
  // `route` label values; position = route index for ForRoute() (use the route table's
  // order, RouteId's numeric value).
  std::vector<std::string> routes;
  // The gRPC methods the interceptor attributes by name; others go to the "other" bucket.
  std::vector<GrpcMethodSpec> grpc_methods;
  // `account` label values (vendor account names, 1..64 of [A-Za-z0-9_.-]; "default" for
  // the default account) of every route metric (upstream attempts, retries, cache) and of
  // the circuit breakers; position = account index for ForRoute() and AccountIndex().
  // Empty: {"default"}. They come from configuration only, so the series stay bounded.
  std::vector<std::string> accounts;
  // `upstream` label values of the circuit breakers; position = index for ForUpstream();
  // upstreams[i] is the breaker of accounts[i] (its `account` label).
  std::vector<std::string> upstreams;
  // `rpc` label values of inspection_stream_subscribers; position = index for ForStreamRpc().
  std::vector<std::string> stream_rpcs;
};

// ---------------------------------------------------------------------------------------------
// Hot-path handles. Obtained from GatewayMetrics; cheap to call; thread-safe; never null.
// ---------------------------------------------------------------------------------------------

// go-grpc-prometheus server metrics of one gRPC method (or of the "other" bucket).
class GrpcMethodMetrics {
 public:
  // grpc_server_started_total.
  void RecordStarted();
  // grpc_server_handled_total{grpc_code} and grpc_server_handling_seconds. A code outside
  // 0..16 counts as Unknown.
  void RecordHandled(grpc::StatusCode code, std::chrono::nanoseconds elapsed);
  // grpc_server_msg_sent_total / grpc_server_msg_received_total.
  void RecordMsgSent();
  void RecordMsgReceived();

 private:
  friend class GatewayMetrics;
  prometheus::Counter* started_ = nullptr;
  std::array<prometheus::Counter*, kNumGrpcCodes> handled_{};
  prometheus::Histogram* handling_seconds_ = nullptr;
  prometheus::Counter* msg_sent_ = nullptr;
  prometheus::Counter* msg_received_ = nullptr;
};

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
  friend class GatewayMetrics;
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
  friend class GatewayMetrics;
  prometheus::Gauge* state_ = nullptr;
  std::array<prometheus::Counter*, kNumCircuitStates> transitions_{};
};

// inspection_stream_subscribers{rpc}: call SubscriberStarted() when a stream starts
// delivering and SubscriberEnded() exactly once when it ends, whatever the reason.
class StreamRpcMetrics {
 public:
  void SubscriberStarted();
  void SubscriberEnded();

 private:
  friend class GatewayMetrics;
  prometheus::Gauge* subscribers_ = nullptr;
};

// ---------------------------------------------------------------------------------------------
// GatewayMetrics
// ---------------------------------------------------------------------------------------------

// Owns the registry and every family. A prometheus::Collectable: Collect() returns the
// registry's families followed by the process_* families (read from /proc/self per scrape),
// which is what AdminServer serves on /metrics.
class GatewayMetrics final : public prometheus::Collectable {
 public:
  // Registers every family and series. InvalidArgument when a label set breaks the rules of
  // GatewayMetricsConfig (the message names the offending list and value).
  static absl::StatusOr<std::shared_ptr<GatewayMetrics>> Create(const GatewayMetricsConfig& config);

  GatewayMetrics(const GatewayMetrics&) = delete;
  GatewayMetrics& operator=(const GatewayMetrics&) = delete;
  ~GatewayMetrics() override;

  // Thread-safe; reads /proc/self for the process_* families.
  std::vector<prometheus::MetricFamily> Collect() const override;
  // Runs at the start of every Collect() (i.e. per scrape), for a gauge read from elsewhere
  // then (the vendor transport's buffered bytes). Set once, before serving.
  void SetCollectHook(std::function<void()> hook) { collect_hook_ = std::move(hook); }

  // --- routes -------------------------------------------------------------------------------
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

  // --- gRPC server (used by GrpcServerMetricsInterceptorFactory) ----------------------------
  // Handles of config.grpc_methods[index]; out of range -> the "other" bucket of kUnary.
  GrpcMethodMetrics& ForGrpcMethod(size_t index);
  // By full method name as gRPC reports it ("/inspection.v1.TokenService/CreateToken"): the
  // configured method (its configured type wins), else the "other" bucket of `type`
  // (grpc_service="other", grpc_method="other"). An ordered-map lookup, no allocation.
  GrpcMethodMetrics& ForGrpcMethod(std::string_view full_method, GrpcType type);

  // --- circuit breakers ---------------------------------------------------------------------
  // Handles of config.upstreams[index]; out of range -> "other".
  UpstreamMetrics& ForUpstream(size_t upstream_index);

  // --- cache (global) -----------------------------------------------------------------------
  void RecordCacheEvictions(uint64_t count);  // inspection_cache_evictions_total
  void SetCacheBytes(uint64_t bytes);         // inspection_cache_bytes
  // inspection_upstream_buffered_response_bytes: answer bodies the vendor calls being read
  // hold now (against upstream.max_buffered_response_bytes).
  void SetUpstreamBufferedResponseBytes(uint64_t bytes);
  // inspection_upstream_buffered_response_limit_bytes: upstream.max_buffered_response_bytes
  // (0: unlimited), so that an alert can compare the two.
  void SetUpstreamBufferedResponseLimitBytes(uint64_t bytes);

  // --- authorization -----------------------------------------------------------------------
  // inspection_authz_denied_total{grpc_method}: calls the authorization policy denied.
  // `grpc_method` is a full method name of this gateway (a bounded set).
  void RecordAuthzDenied(std::string_view grpc_method);

  // The reconciler's, the span exporter's and the webhook port's series are theirs
  // (reconcile_metrics.h, otlp_exporter.h, webhooks/webhook_metrics.h), created from scope()
  // into this registry.
  MetricsScope scope() const { return MetricsScope(*registry_); }

  // --- streams ------------------------------------------------------------------------------
  // Handles of config.stream_rpcs[index]; out of range -> "other".
  StreamRpcMetrics& ForStreamRpc(size_t rpc_index);
  // Handles of the stream RPC named `rpc` (a method name, e.g. "Subscribe"); null when it
  // is not one of config.stream_rpcs.
  StreamRpcMetrics* FindStreamRpc(std::string_view rpc);
  // inspection_stream_fanout_lag_seconds: from an event's append to the log to its hand-off
  // to a subscriber's queue.
  void RecordFanoutLag(std::chrono::nanoseconds lag);
  // inspection_stream_catching_up_subscribers: streams still reading the log from a cursor
  // (after_cursor, from_start) before they join the live dispatch.
  void SetCatchingUpSubscribers(size_t count);
  // inspection_stream_dropped_subscribers_total{reason}.
  void RecordDroppedSubscriber(StreamDropReason reason);

 private:
  GatewayMetrics();
  // Register everything; throw what prometheus-cpp throws (Create() catches it).
  void Build(const GatewayMetricsConfig& config);
  void BuildGrpc(const std::vector<GrpcMethodSpec>& methods);
  void BuildRoutes(const std::vector<std::string>& routes);
  void BuildUpstreams(const std::vector<std::string>& upstreams);
  void BuildCacheAndEvents();
  void BuildCache();
  void BuildWebhooks();
  void BuildStreams(const std::vector<std::string>& rpcs);

  const std::shared_ptr<prometheus::Registry> registry_;
  std::function<void()> collect_hook_;
  ProcessCollector process_collector_;

  // Built once in Build(), never resized afterwards: element addresses are stable.
  std::vector<std::string> account_labels_;
  std::map<std::string, size_t, std::less<>> account_index_;
  std::vector<std::string> route_labels_;
  std::map<std::string, size_t, std::less<>> route_index_;
  // Per account, route_labels_.size() + 1 handles ("other" last).
  std::vector<RouteMetrics> routes_;

  std::map<std::string, size_t, std::less<>> grpc_method_index_;  // "/svc/method" -> index
  std::vector<GrpcMethodMetrics> grpc_methods_;
  std::array<GrpcMethodMetrics, kNumGrpcTypes> grpc_other_;

  std::vector<UpstreamMetrics> upstreams_;     // + "other" last
  std::vector<StreamRpcMetrics> stream_rpcs_;  // + "other" last
  std::vector<std::string> stream_rpc_names_;  // config.stream_rpcs

  prometheus::Counter* cache_evictions_ = nullptr;
  prometheus::Gauge* cache_bytes_ = nullptr;
  prometheus::Gauge* upstream_buffered_response_bytes_ = nullptr;
  prometheus::Gauge* upstream_buffered_response_limit_bytes_ = nullptr;
  prometheus::Family<prometheus::Counter>* authz_denied_ = nullptr;
  absl::Mutex authz_mu_;
  std::map<std::string, prometheus::Counter*, std::less<>> authz_denied_by_method_
      ABSL_GUARDED_BY(authz_mu_);
  prometheus::Histogram* fanout_lag_ = nullptr;
  prometheus::Gauge* catching_up_ = nullptr;
  std::array<prometheus::Counter*, kNumStreamDropReasons> dropped_subscribers_{};
};

}  // namespace inspection::metrics

#endif  // GATEWAY_METRICS_GATEWAY_METRICS_H_
