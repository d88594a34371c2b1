#include "gateway/metrics/gateway_metrics.h"

#include "gateway/version/version.h"

#include <algorithm>
#include <exception>
#include <set>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace inspection::metrics {
namespace {

using prometheus::Counter;
using prometheus::Family;
using prometheus::Gauge;
using prometheus::Histogram;
using prometheus::Labels;

// Label values of the enums, indexed by the enum's value.
constexpr std::array<std::string_view, kNumGrpcTypes> kGrpcTypeLabels = {
    "unary", "client_stream", "server_stream", "bidi_stream"};
// Go's codes.Code.String(), which is what go-grpc-prometheus puts in grpc_code; dashboards
// and alerts written for it match on these exact strings (note "Canceled").
constexpr std::array<std::string_view, kNumGrpcCodes> kGrpcCodeLabels = {
    "OK",       "Canceled",       "Unknown",          "InvalidArgument",   "DeadlineExceeded",
    "NotFound", "AlreadyExists",  "PermissionDenied", "ResourceExhausted", "FailedPrecondition",
    "Aborted",  "OutOfRange",     "Unimplemented",    "Internal",          "Unavailable",
    "DataLoss", "Unauthenticated"};
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
constexpr std::array<std::string_view, kNumStreamDropReasons> kStreamDropReasonLabels = {
    "slow_consumer", "cursor_expired", "shutdown", "error", "idle_catch_up"};

// Latency buckets (seconds): Prometheus' default buckets, which go-grpc-prometheus uses,
// plus 30 s and 60 s because vendor image analysis can legitimately take that long.
const Histogram::BucketBoundaries& LatencyBuckets() {
  static const auto* const kBuckets = new Histogram::BucketBoundaries{
      0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
  return *kBuckets;
}
// Attempts per logical call: integers, so bucket at each small count.
const Histogram::BucketBoundaries& AttemptBuckets() {
  static const auto* const kBuckets = new Histogram::BucketBoundaries{1, 2, 3, 4, 5, 6, 8, 10};
  return *kBuckets;
}
// Fan-out lag (seconds): local dispatch is sub-millisecond; a shared Redis log adds a poll
// interval; anything past 10 s is an incident.
const Histogram::BucketBoundaries& LagBuckets() {
  static const auto* const kBuckets = new Histogram::BucketBoundaries{
      0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
  return *kBuckets;
}

double Seconds(std::chrono::nanoseconds elapsed) {
  return std::chrono::duration<double>(elapsed).count();
}

std::string Str(std::string_view view) { return std::string(view); }

// The charset keeps URLs (':', '/', '?'), free text and most ids (which come with '-') out;
// the length cap keeps a mistaken payload from becoming a label.
bool IsValidLabelValue(std::string_view value) {
  if (value.empty() || value.size() > 128) return false;
  for (const char c : value) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '.';
    if (!ok) return false;
  }
  return true;
}

absl::Status CheckLabelValues(std::string_view list, const std::vector<std::string>& values) {
  std::set<std::string_view> seen;
  for (const std::string& value : values) {
    if (!IsValidLabelValue(value)) {
      return absl::InvalidArgumentError(absl::StrCat(
          Str(list), ": label value \"", value, "\" must be 1..128 characters of [A-Za-z0-9_.]"));
    }
    if (value == kOtherLabel) {
      return absl::InvalidArgumentError(
          absl::StrCat(Str(list), ": \"other\" is reserved for the catch-all bucket"));
    }
    if (!seen.insert(value).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(Str(list), ": duplicate label value \"", value, "\""));
    }
  }
  return absl::OkStatus();
}

// Account names: the config's own rule (1..64 of [A-Za-z0-9._-]), unique.
absl::Status CheckAccountLabels(const std::vector<std::string>& accounts) {
  std::set<std::string_view> seen;
  for (const std::string& account : accounts) {
    const bool chars_ok = std::all_of(account.begin(), account.end(), [](char c) {
      return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
             c == '_' || c == '.' || c == '-';
    });
    if (account.empty() || account.size() > 64 || !chars_ok) {
      return absl::InvalidArgumentError(absl::StrCat(
          "accounts: label value \"", account, "\" must be 1..64 characters of [A-Za-z0-9_.-]"));
    }
    if (!seen.insert(account).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("accounts: duplicate label value \"", account, "\""));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckConfig(const GatewayMetricsConfig& config) {
  if (absl::Status s = CheckLabelValues("routes", config.routes); !s.ok()) return s;
  if (absl::Status s = CheckAccountLabels(config.accounts); !s.ok()) return s;
  if (absl::Status s = CheckLabelValues("upstreams", config.upstreams); !s.ok()) return s;
  if (absl::Status s = CheckLabelValues("stream_rpcs", config.stream_rpcs); !s.ok()) return s;
  std::set<std::string> full_names;
  for (const GrpcMethodSpec& spec : config.grpc_methods) {
    if (absl::Status s = CheckLabelValues("grpc_methods.service", {spec.service}); !s.ok()) {
      return s;
    }
    if (absl::Status s = CheckLabelValues("grpc_methods.method", {spec.method}); !s.ok()) {
      return s;
    }
    if (static_cast<size_t>(spec.type) >= kNumGrpcTypes) {
      return absl::InvalidArgumentError(
          absl::StrCat("grpc_methods: bad type for ", spec.service, "/", spec.method));
    }
    if (!full_names.insert(absl::StrCat("/", spec.service, "/", spec.method)).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("grpc_methods: duplicate method ", spec.service, "/", spec.method));
    }
  }
  return absl::OkStatus();
}

// Index of `label` in a list that ends with the "other" bucket; unknown -> the last index.
size_t IndexOrOther(const std::map<std::string, size_t, std::less<>>& index, std::string_view key,
                    size_t other) {
  const auto it = index.find(key);
  return it == index.end() ? other : it->second;
}

}  // namespace

std::string_view GrpcTypeLabel(GrpcType type) {
  const size_t i = static_cast<size_t>(type);
  return i < kNumGrpcTypes ? kGrpcTypeLabels[i] : kOtherLabel;
}

std::string_view GrpcCodeLabel(grpc::StatusCode code) {
  const size_t i = static_cast<size_t>(code);
  return kGrpcCodeLabels[i < kNumGrpcCodes ? i : static_cast<size_t>(grpc::StatusCode::UNKNOWN)];
}

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

std::string_view StreamDropReasonLabel(StreamDropReason reason) {
  return BoundedAt(kStreamDropReasonLabels, static_cast<size_t>(reason));
}

// --- handles -------------------------------------------------------------------------------

void GrpcMethodMetrics::RecordStarted() { started_->Increment(); }

void GrpcMethodMetrics::RecordHandled(grpc::StatusCode code, std::chrono::nanoseconds elapsed) {
  size_t i = static_cast<size_t>(code);
  if (i >= kNumGrpcCodes) i = static_cast<size_t>(grpc::StatusCode::UNKNOWN);
  handled_[i]->Increment();
  handling_seconds_->Observe(Seconds(elapsed));
}

void GrpcMethodMetrics::RecordMsgSent() { msg_sent_->Increment(); }
void GrpcMethodMetrics::RecordMsgReceived() { msg_received_->Increment(); }

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

void StreamRpcMetrics::SubscriberStarted() { subscribers_->Increment(); }
void StreamRpcMetrics::SubscriberEnded() { subscribers_->Decrement(); }

// --- GatewayMetrics --------------------------------------------------------------------------

absl::StatusOr<std::shared_ptr<GatewayMetrics>> GatewayMetrics::Create(
    const GatewayMetricsConfig& config) {
  if (absl::Status status = CheckConfig(config); !status.ok()) return status;
  std::shared_ptr<GatewayMetrics> metrics(new GatewayMetrics());
  // prometheus-cpp reports bad names and clashing families by throwing; that can only
  // happen here, at start-up, and becomes a Status so the caller decides.
  try {
    metrics->Build(config);
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("registering metrics: ", e.what()));
  }
  return metrics;
}

GatewayMetrics::GatewayMetrics() : registry_(std::make_shared<prometheus::Registry>()) {}

GatewayMetrics::~GatewayMetrics() = default;

void GatewayMetrics::Build(const GatewayMetricsConfig& config) {
  account_labels_ = config.accounts;
  if (account_labels_.empty()) account_labels_.emplace_back(kDefaultAccountLabel);
  for (size_t i = 0; i < account_labels_.size(); ++i) account_index_.emplace(account_labels_[i], i);
  BuildGrpc(config.grpc_methods);
  BuildRoutes(config.routes);
  BuildUpstreams(config.upstreams);
  BuildCacheAndEvents();
  BuildStreams(config.stream_rpcs);
}

void GatewayMetrics::BuildGrpc(const std::vector<GrpcMethodSpec>& methods) {
  prometheus::Registry& registry = *registry_;
  // gRPC server, go-grpc-prometheus names and help texts. Every (method, code) series exists
  // from the start, like go-grpc-prometheus' InitializeMetrics(): rate() over a code that
  // has never occurred is 0, not "no data".
  auto& started = prometheus::BuildCounter()
                      .Name("grpc_server_started_total")
                      .Help("Total number of RPCs started on the server.")
                      .Register(registry);
  auto& handled = prometheus::BuildCounter()
                      .Name("grpc_server_handled_total")
                      .Help(
                          "Total number of RPCs completed on the server, regardless of "
                          "success or failure.")
                      .Register(registry);
  auto& handling = prometheus::BuildHistogram()
                       .Name("grpc_server_handling_seconds")
                       .Help(
                           "Histogram of response latency (seconds) of gRPC that had been "
                           "application-level handled by the server.")
                       .Register(registry);
  auto& msg_sent = prometheus::BuildCounter()
                       .Name("grpc_server_msg_sent_total")
                       .Help("Total number of gRPC stream messages sent by the server.")
                       .Register(registry);
  auto& msg_received = prometheus::BuildCounter()
                           .Name("grpc_server_msg_received_total")
                           .Help("Total number of RPC stream messages received on the server.")
                           .Register(registry);
  auto make_grpc = [&](std::string_view service, std::string_view method, GrpcType type) {
    const Labels labels = {{"grpc_type", Str(GrpcTypeLabel(type))},
                           {"grpc_service", Str(service)},
                           {"grpc_method", Str(method)}};
    GrpcMethodMetrics m;
    m.started_ = &started.Add(labels);
    for (size_t code = 0; code < kNumGrpcCodes; ++code) {
      Labels with_code = labels;
      with_code.emplace("grpc_code", Str(kGrpcCodeLabels[code]));
      m.handled_[code] = &handled.Add(with_code);
    }
    m.handling_seconds_ = &handling.Add(labels, LatencyBuckets());
    m.msg_sent_ = &msg_sent.Add(labels);
    m.msg_received_ = &msg_received.Add(labels);
    return m;
  };
  grpc_methods_.reserve(methods.size());
  for (const GrpcMethodSpec& spec : methods) {
    grpc_method_index_.emplace(absl::StrCat("/", spec.service, "/", spec.method),
                               grpc_methods_.size());
    grpc_methods_.push_back(make_grpc(spec.service, spec.method, spec.type));
  }
  for (size_t t = 0; t < kNumGrpcTypes; ++t) {
    grpc_other_[t] = make_grpc(kOtherLabel, kOtherLabel, static_cast<GrpcType>(t));
  }
}

void GatewayMetrics::BuildRoutes(const std::vector<std::string>& routes) {
  prometheus::Registry& registry = *registry_;
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

void GatewayMetrics::BuildUpstreams(const std::vector<std::string>& upstreams) {
  prometheus::Registry& registry = *registry_;
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

void GatewayMetrics::BuildCacheAndEvents() {
  BuildCache();
  BuildWebhooks();
}

void GatewayMetrics::BuildCache() {
  prometheus::Registry& registry = *registry_;
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
  upstream_buffered_response_bytes_ =
      &prometheus::BuildGauge()
           .Name("inspection_upstream_buffered_response_bytes")
           .Help(
               "Bytes of answer bodies the vendor calls being read hold now (bounded by "
               "upstream.max_buffered_response_bytes).")
           .Register(registry)
           .Add({});
  upstream_buffered_response_limit_bytes_ =
      &prometheus::BuildGauge()
           .Name("inspection_upstream_buffered_response_limit_bytes")
           .Help(
               "upstream.max_buffered_response_bytes: what the answers being read may hold "
               "together (0: unlimited).")
           .Register(registry)
           .Add({});
}

// The authorization policy's denials and the build (the webhook port's and the event
// log's series are the receiver's: webhooks/webhook_metrics.h).
void GatewayMetrics::BuildWebhooks() {
  prometheus::Registry& registry = *registry_;
  authz_denied_ = &prometheus::BuildCounter()
                       .Name("inspection_authz_denied_total")
                       .Help(
                           "Calls the authorization policy (grpc.authz_policy_file) denied, "
                           "by method.")
                       .Register(registry);
  prometheus::BuildGauge()
      .Name("inspection_gateway_build_info")
      .Help(
          "Always 1: the build this process runs (version: the project's SemVer version; "
          "revision: the git revision it was built from).")
      .Register(registry)
      .Add({{"version", version::Version()}, {"revision", version::Revision()}})
      .Set(1);
}

void GatewayMetrics::BuildStreams(const std::vector<std::string>& rpcs) {
  prometheus::Registry& registry = *registry_;
  auto& subscribers = prometheus::BuildGauge()
                          .Name("inspection_stream_subscribers")
                          .Help("Server streams currently delivering events, by RPC.")
                          .Register(registry);
  stream_rpcs_.reserve(rpcs.size() + 1);
  stream_rpc_names_ = rpcs;
  for (const std::string& rpc : rpcs) {
    StreamRpcMetrics m;
    m.subscribers_ = &subscribers.Add({{"rpc", rpc}});
    stream_rpcs_.push_back(m);
  }
  StreamRpcMetrics other_rpc;
  other_rpc.subscribers_ = &subscribers.Add({{"rpc", Str(kOtherLabel)}});
  stream_rpcs_.push_back(other_rpc);
  catching_up_ = &prometheus::BuildGauge()
                      .Name("inspection_stream_catching_up_subscribers")
                      .Help(
                          "Streams still reading the event log from a cursor (after_cursor, "
                          "from_start) before joining the live dispatch.")
                      .Register(registry)
                      .Add({});
  fanout_lag_ = &prometheus::BuildHistogram()
                     .Name("inspection_stream_fanout_lag_seconds")
                     .Help(
                         "Time from an event's append to the log to its hand-off to a "
                         "subscriber.")
                     .Register(registry)
                     .Add({}, LagBuckets());
  auto& dropped = prometheus::BuildCounter()
                      .Name("inspection_stream_dropped_subscribers_total")
                      .Help("Subscribers ended by the gateway, by reason.")
                      .Register(registry);
  for (size_t r = 0; r < kNumStreamDropReasons; ++r) {
    dropped_subscribers_[r] = &dropped.Add({{"reason", Str(kStreamDropReasonLabels[r])}});
  }
}

std::vector<prometheus::MetricFamily> GatewayMetrics::Collect() const {
  if (collect_hook_) collect_hook_();
  std::vector<prometheus::MetricFamily> families = registry_->Collect();
  std::vector<prometheus::MetricFamily> process = process_collector_.Collect();
  families.insert(families.end(), std::make_move_iterator(process.begin()),
                  std::make_move_iterator(process.end()));
  return families;
}

RouteMetrics& GatewayMetrics::ForRoute(size_t route_index, size_t account_index) {
  const size_t block = route_labels_.size() + 1;
  const size_t account = account_index < account_labels_.size() ? account_index : 0;
  const size_t route = route_index < route_labels_.size() ? route_index : route_labels_.size();
  return routes_[account * block + route];
}

RouteMetrics& GatewayMetrics::ForRouteLabel(std::string_view route_label, size_t account_index) {
  return ForRoute(IndexOrOther(route_index_, route_label, route_labels_.size()), account_index);
}

size_t GatewayMetrics::AccountIndex(std::string_view account) const {
  if (account.empty()) return 0;
  const auto it = account_index_.find(account);
  return it == account_index_.end() ? 0 : it->second;
}

GrpcMethodMetrics& GatewayMetrics::ForGrpcMethod(size_t index) {
  if (index < grpc_methods_.size()) return grpc_methods_[index];
  return grpc_other_[static_cast<size_t>(GrpcType::kUnary)];
}

GrpcMethodMetrics& GatewayMetrics::ForGrpcMethod(std::string_view full_method, GrpcType type) {
  const auto it = grpc_method_index_.find(full_method);
  if (it != grpc_method_index_.end()) return grpc_methods_[it->second];
  const size_t t = static_cast<size_t>(type);
  return grpc_other_[t < kNumGrpcTypes ? t : static_cast<size_t>(GrpcType::kBidiStream)];
}

UpstreamMetrics& GatewayMetrics::ForUpstream(size_t upstream_index) {
  const size_t other = upstreams_.size() - 1;
  return upstreams_[upstream_index < other ? upstream_index : other];
}

StreamRpcMetrics* GatewayMetrics::FindStreamRpc(std::string_view rpc) {
  for (size_t i = 0; i < stream_rpc_names_.size(); ++i) {
    if (stream_rpc_names_[i] == rpc) return &stream_rpcs_[i];
  }
  return nullptr;
}

StreamRpcMetrics& GatewayMetrics::ForStreamRpc(size_t rpc_index) {
  const size_t other = stream_rpcs_.size() - 1;
  return stream_rpcs_[rpc_index < other ? rpc_index : other];
}

void GatewayMetrics::RecordCacheEvictions(uint64_t count) {
  if (count > 0) cache_evictions_->Increment(static_cast<double>(count));
}

void GatewayMetrics::SetUpstreamBufferedResponseBytes(uint64_t bytes) {
  upstream_buffered_response_bytes_->Set(static_cast<double>(bytes));
}

void GatewayMetrics::SetUpstreamBufferedResponseLimitBytes(uint64_t bytes) {
  upstream_buffered_response_limit_bytes_->Set(static_cast<double>(bytes));
}

void GatewayMetrics::SetCacheBytes(uint64_t bytes) {
  cache_bytes_->Set(static_cast<double>(bytes));
}

void GatewayMetrics::RecordAuthzDenied(std::string_view grpc_method) {
  prometheus::Counter* counter = nullptr;
  {
    absl::MutexLock lock(&authz_mu_);
    auto at = authz_denied_by_method_.find(grpc_method);
    if (at == authz_denied_by_method_.end()) {
      at = authz_denied_by_method_
               .emplace(std::string(grpc_method),
                        &authz_denied_->Add({{"grpc_method", std::string(grpc_method)}}))
               .first;
    }
    counter = at->second;
  }
  counter->Increment();
}

void GatewayMetrics::SetCatchingUpSubscribers(size_t count) {
  catching_up_->Set(static_cast<double>(count));
}

void GatewayMetrics::RecordFanoutLag(std::chrono::nanoseconds lag) {
  fanout_lag_->Observe(Seconds(lag));
}

void GatewayMetrics::RecordDroppedSubscriber(StreamDropReason reason) {
  BoundedAt(dropped_subscribers_, static_cast<size_t>(reason))->Increment();
}

}  // namespace inspection::metrics
