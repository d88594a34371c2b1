// Every component's series (tests/metrics/all_metrics.h: created from one registry as the
// server does) without HTTP: the label set rules, that every family and series exists
// from construction on, that the handles count exactly what they are told, and that nothing
// a caller passes can create a series outside the bounded label sets.
#include "gateway/reconcile/reconcile_metrics.h"
#include "gateway/tracing/otlp_exporter.h"
#include "gateway/webhooks/webhook_metrics.h"
#include "tests/metrics/all_metrics.h"

#include "gateway/version/version.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <prometheus/metric_type.h>

namespace inspection::metrics {
namespace {

using ::prometheus::MetricFamily;
using ::prometheus::MetricType;
using ::testing::HasSubstr;
using LabelMap = std::map<std::string, std::string>;
using namespace std::chrono_literals;

// --- lookups in Collect() output -------------------------------------------------------------

const MetricFamily* FindFamily(const std::vector<MetricFamily>& families, const std::string& name) {
  for (const MetricFamily& family : families) {
    if (family.name == name) return &family;
  }
  return nullptr;
}

LabelMap LabelsOf(const prometheus::ClientMetric& metric) {
  LabelMap labels;
  for (const auto& label : metric.label) labels[label.name] = label.value;
  return labels;
}

// The one series of `name` whose labels are exactly `labels`; fails the test when absent.
const prometheus::ClientMetric* FindSeries(const std::vector<MetricFamily>& families,
                                           const std::string& name, const LabelMap& labels) {
  const MetricFamily* family = FindFamily(families, name);
  if (family == nullptr) {
    ADD_FAILURE() << "no family " << name;
    return nullptr;
  }
  for (const prometheus::ClientMetric& metric : family->metric) {
    if (LabelsOf(metric) == labels) return &metric;
  }
  ADD_FAILURE() << "no series of " << name << " with the given labels";
  return nullptr;
}

double Value(const std::vector<MetricFamily>& families, const std::string& name,
             const LabelMap& labels = {}) {
  const prometheus::ClientMetric* metric = FindSeries(families, name, labels);
  if (metric == nullptr) return std::numeric_limits<double>::quiet_NaN();
  const MetricType type = FindFamily(families, name)->type;
  return type == MetricType::Counter ? metric->counter.value : metric->gauge.value;
}

uint64_t HistogramCount(const std::vector<MetricFamily>& families, const std::string& name,
                        const LabelMap& labels = {}) {
  const prometheus::ClientMetric* metric = FindSeries(families, name, labels);
  return metric == nullptr ? ~uint64_t{0} : metric->histogram.sample_count;
}

// Every (family, label set) pair, to compare the series space before and after recording.
std::set<std::pair<std::string, LabelMap>> SeriesSpace(const std::vector<MetricFamily>& families) {
  std::set<std::pair<std::string, LabelMap>> space;
  for (const MetricFamily& family : families) {
    if (family.name.rfind("process_", 0) == 0) continue;  // per-scrape, not from labels
    for (const auto& metric : family.metric) space.emplace(family.name, LabelsOf(metric));
  }
  return space;
}

AllMetricsConfig TestConfig() {
  AllMetricsConfig config;
  config.routes = {"create_token", "get_token_status", "search_inspections"};
  config.grpc_methods = {
      {"inspection.v1.TokenService", "CreateToken", GrpcType::kUnary},
      {"inspection.v1.EventService", "Subscribe", GrpcType::kServerStream},
  };
  config.upstreams = {"vendor"};
  config.stream_rpcs = {"Subscribe", "WatchTokenStatus"};
  return config;
}

std::shared_ptr<AllMetrics> MakeMetrics(const AllMetricsConfig& config = TestConfig()) {
  absl::StatusOr<std::shared_ptr<AllMetrics>> metrics = AllMetrics::Create(config);
  EXPECT_TRUE(metrics.ok()) << metrics.status();
  return metrics.ok() ? *std::move(metrics) : nullptr;
}

// --- configuration ---------------------------------------------------------------------------

TEST(AllMetricsConfigTest, AcceptsTheRouteTableShapedConfig) {
  EXPECT_NE(MakeMetrics(), nullptr);
  EXPECT_NE(MakeMetrics(AllMetricsConfig{}), nullptr);  // empty sets: only "other"
}

TEST(AllMetricsConfigTest, RejectsLabelValuesOutsideTheRules) {
  struct Case {
    std::string what;
    AllMetricsConfig config;
    std::string message;
  };
  std::vector<Case> cases;
  auto with_routes = [](std::vector<std::string> routes) {
    AllMetricsConfig config = TestConfig();
    config.routes = std::move(routes);
    return config;
  };
  cases.push_back({"url", with_routes({"https://vendor.test/apiV1/token"}), "routes"});
  cases.push_back({"path with id", with_routes({"inspections/8f2c"}), "routes"});
  cases.push_back({"uuid", with_routes({"4b7e3c1a-9d2f-4e8b-a1c3-5f6d7e8f9a0b"}), "routes"});
  cases.push_back({"empty", with_routes({""}), "routes"});
  cases.push_back({"too long", with_routes({std::string(129, 'a')}), "routes"});
  cases.push_back({"reserved", with_routes({"other"}), "reserved"});
  cases.push_back({"duplicate", with_routes({"create_token", "create_token"}), "duplicate"});
  AllMetricsConfig bad_upstream = TestConfig();
  bad_upstream.upstreams = {"vendor:443"};
  cases.push_back({"upstream host:port", bad_upstream, "upstreams"});
  AllMetricsConfig bad_rpc = TestConfig();
  bad_rpc.stream_rpcs = {"Subscribe", "Subscribe"};
  cases.push_back({"duplicate stream rpc", bad_rpc, "stream_rpcs"});
  AllMetricsConfig bad_method = TestConfig();
  bad_method.grpc_methods.push_back({"inspection.v1.TokenService", "Create Token"});
  cases.push_back({"method with space", bad_method, "grpc_methods.method"});
  AllMetricsConfig dup_method = TestConfig();
  dup_method.grpc_methods.push_back(dup_method.grpc_methods[0]);
  cases.push_back({"duplicate method", dup_method, "duplicate method"});

  for (const Case& c : cases) {
    absl::StatusOr<std::shared_ptr<AllMetrics>> metrics = AllMetrics::Create(c.config);
    ASSERT_FALSE(metrics.ok()) << c.what;
    EXPECT_EQ(metrics.status().code(), absl::StatusCode::kInvalidArgument) << c.what;
    EXPECT_THAT(std::string(metrics.status().message()), HasSubstr(c.message)) << c.what;
  }
  // The longest allowed value is fine.
  EXPECT_TRUE(AllMetrics::Create(with_routes({std::string(128, 'a')})).ok());
}

// --- label spellings -------------------------------------------------------------------------

TEST(LabelSpellingTest, StatusClassOfHttpStatus) {
  EXPECT_EQ(StatusClassOf(100), StatusClass::k1xx);
  EXPECT_EQ(StatusClassOf(200), StatusClass::k2xx);
  EXPECT_EQ(StatusClassOf(304), StatusClass::k3xx);
  EXPECT_EQ(StatusClassOf(429), StatusClass::k4xx);
  EXPECT_EQ(StatusClassOf(599), StatusClass::k5xx);
  EXPECT_EQ(StatusClassOf(0), StatusClass::kTransportError);
  EXPECT_EQ(StatusClassOf(99), StatusClass::kTransportError);
  EXPECT_EQ(StatusClassOf(600), StatusClass::kTransportError);
  EXPECT_EQ(StatusClassOf(-1), StatusClass::kTransportError);
  EXPECT_EQ(StatusClassLabel(StatusClass::k5xx), "5xx");
  EXPECT_EQ(StatusClassLabel(StatusClass::kTransportError), "transport_error");
}

TEST(LabelSpellingTest, GrpcCodesUseGoGrpcPrometheusSpelling) {
  EXPECT_EQ(GrpcCodeLabel(grpc::StatusCode::OK), "OK");
  EXPECT_EQ(GrpcCodeLabel(grpc::StatusCode::CANCELLED), "Canceled");
  EXPECT_EQ(GrpcCodeLabel(grpc::StatusCode::DEADLINE_EXCEEDED), "DeadlineExceeded");
  EXPECT_EQ(GrpcCodeLabel(grpc::StatusCode::RESOURCE_EXHAUSTED), "ResourceExhausted");
  EXPECT_EQ(GrpcCodeLabel(grpc::StatusCode::UNAUTHENTICATED), "Unauthenticated");
  EXPECT_EQ(GrpcCodeLabel(static_cast<grpc::StatusCode>(42)), "Unknown");
  EXPECT_EQ(GrpcTypeLabel(GrpcType::kServerStream), "server_stream");
  EXPECT_EQ(RetryReasonLabel(RetryReason::kStatus503), "status_503");
  EXPECT_EQ(CircuitStateLabel(CircuitState::kHalfOpen), "half_open");
  EXPECT_EQ(StreamDropReasonLabel(StreamDropReason::kSlowConsumer), "slow_consumer");
}

// --- registration ----------------------------------------------------------------------------

TEST(GatewayMetricsTest, RegistersEveryFamilyAndSeriesAtConstruction) {
  std::shared_ptr<AllMetrics> metrics = MakeMetrics();
  ASSERT_NE(metrics, nullptr);
  // The components that own their series create them from the scope, as the server does
  // at start-up whether or not they run: the exposition is the same set of families.
  const std::vector<MetricFamily> families = metrics->Collect();

  // name -> (type, number of series): 3 routes + other = 4; 2 gRPC methods + 4 "other"
  // buckets (one per grpc_type) = 6; 1 upstream + other = 2; 2 stream RPCs + other = 3.
  const std::map<std::string, std::pair<MetricType, size_t>> expected = {
      {"grpc_server_started_total", {MetricType::Counter, 6}},
      {"grpc_server_handled_total", {MetricType::Counter, 6 * 17}},
      {"grpc_server_handling_seconds", {MetricType::Histogram, 6}},
      {"grpc_server_msg_sent_total", {MetricType::Counter, 6}},
      {"grpc_server_msg_received_total", {MetricType::Counter, 6}},
      {"inspection_upstream_requests_total", {MetricType::Counter, 4 * 6}},
      {"inspection_upstream_request_duration_seconds", {MetricType::Histogram, 4}},
      {"inspection_upstream_retries_total", {MetricType::Counter, 4 * 7}},
      {"inspection_upstream_retry_budget_exhausted_total", {MetricType::Counter, 4}},
      {"inspection_upstream_circuit_state", {MetricType::Gauge, 2}},
      {"inspection_upstream_circuit_transitions_total", {MetricType::Counter, 2 * 3}},
      {"inspection_upstream_attempts_per_call", {MetricType::Histogram, 4}},
      {"inspection_upstream_caller_deadline_timeouts_total", {MetricType::Counter, 4}},
      {"inspection_cache_hits_total", {MetricType::Counter, 4}},
      {"inspection_cache_misses_total", {MetricType::Counter, 4}},
      {"inspection_cache_coalesced_total", {MetricType::Counter, 4}},
      {"inspection_cache_stale_served_total", {MetricType::Counter, 4}},
      {"inspection_cache_waiter_deadlines_total", {MetricType::Counter, 4}},
      {"inspection_cache_evictions_total", {MetricType::Counter, 1}},
      {"inspection_cache_bytes", {MetricType::Gauge, 1}},
      {"inspection_upstream_buffered_response_bytes", {MetricType::Gauge, 1}},
      {"inspection_upstream_buffered_response_limit_bytes", {MetricType::Gauge, 1}},
      {"inspection_idempotency_replays_total", {MetricType::Counter, 4}},
      {"inspection_webhook_deliveries_total", {MetricType::Counter, 12}},
      {"inspection_webhook_http_refusals_total", {MetricType::Counter, 12}},
      {"inspection_webhook_connections", {MetricType::Gauge, 1}},
      {"inspection_webhook_listener_accepting", {MetricType::Gauge, 1}},
      {"inspection_webhook_accept_errors_total", {MetricType::Counter, 1}},
      {"inspection_webhook_unknown_event_names_total", {MetricType::Counter, 1}},
      {"inspection_event_log_appends_total", {MetricType::Counter, 1}},
      {"inspection_event_log_append_errors_total", {MetricType::Counter, 1}},
      {"inspection_reconcile_polls_total", {MetricType::Counter, 2}},
      {"inspection_gateway_build_info", {MetricType::Gauge, 1}},
      {"inspection_reconcile_recovered_total", {MetricType::Counter, 2}},
      {"inspection_reconcile_overdue_items", {MetricType::Gauge, 1}},
      {"inspection_reconcile_ledger_errors_total", {MetricType::Counter, 1}},
      {"inspection_reconcile_given_up_total", {MetricType::Counter, 1}},
      {"inspection_reconcile_unrecorded_items", {MetricType::Gauge, 1}},
      {"inspection_reconcile_unrecorded_dropped_total", {MetricType::Counter, 1}},
      {"inspection_trace_spans_exported_total", {MetricType::Counter, 1}},
      {"inspection_trace_spans_dropped_total", {MetricType::Counter, 2}},
      {"inspection_trace_export_failures_total", {MetricType::Counter, 1}},
      {"inspection_stream_subscribers", {MetricType::Gauge, 3}},
      {"inspection_stream_fanout_lag_seconds", {MetricType::Histogram, 1}},
      {"inspection_stream_dropped_subscribers_total", {MetricType::Counter, 5}},
      {"inspection_stream_catching_up_subscribers", {MetricType::Gauge, 1}},
      {"inspection_vendor_unknown_fields_total", {MetricType::Counter, 4}},
      {"process_start_time_seconds", {MetricType::Gauge, 1}},
      {"process_cpu_seconds_total", {MetricType::Counter, 1}},
      {"process_resident_memory_bytes", {MetricType::Gauge, 1}},
      {"process_virtual_memory_bytes", {MetricType::Gauge, 1}},
      {"process_open_fds", {MetricType::Gauge, 1}},
      {"process_max_fds", {MetricType::Gauge, 1}},
      {"process_threads", {MetricType::Gauge, 1}},
  };
  std::map<std::string, std::pair<MetricType, size_t>> actual;
  for (const MetricFamily& family : families) {
    EXPECT_TRUE(
        actual.emplace(family.name, std::make_pair(family.type, family.metric.size())).second)
        << "family twice: " << family.name;
  }
  EXPECT_EQ(actual, expected);

  // Spot checks of label sets and that everything starts at zero.
  EXPECT_EQ(Value(families, "grpc_server_handled_total",
                  {{"grpc_type", "server_stream"},
                   {"grpc_service", "inspection.v1.EventService"},
                   {"grpc_method", "Subscribe"},
                   {"grpc_code", "ResourceExhausted"}}),
            0);
  EXPECT_EQ(Value(families, "inspection_upstream_retries_total",
                  {{"account", "default"}, {"route", "other"}, {"reason", "status_429"}}),
            0);
  EXPECT_EQ(Value(families, "inspection_upstream_circuit_state",
                  {{"account", "default"}, {"upstream", "vendor"}}),
            0);
  for (const MetricFamily& family : families) {
    if (family.name.rfind("process_", 0) == 0) continue;
    // The build info is 1 from the start (its labels are the information).
    const double expected = family.name == "inspection_gateway_build_info" ? 1 : 0;
    for (const auto& metric : family.metric) {
      EXPECT_EQ(metric.counter.value + metric.gauge.value + metric.histogram.sample_count, expected)
          << family.name;
    }
  }
}

// --- handles ---------------------------------------------------------------------------------

TEST(GatewayMetricsTest, RouteHandlesCountExactlyAndOnlyTheirRoute) {
  std::shared_ptr<AllMetrics> metrics = MakeMetrics();
  ASSERT_NE(metrics, nullptr);
  RouteMetrics& create_token = metrics->ForRoute(0);
  EXPECT_EQ(&create_token, &metrics->ForRouteLabel("create_token"));

  create_token.RecordAttempt(201, 100ms);
  create_token.RecordAttempt(StatusClass::k2xx, 200ms);
  create_token.RecordAttempt(503, 50ms);
  create_token.RecordAttempt(0, 1500ms);  // no response at all
  create_token.RecordRetry(RetryReason::kStatus503);
  create_token.RecordRetry(RetryReason::kConnect);
  create_token.RecordRetryBudgetExhausted();
  create_token.RecordAttemptsPerCall(3);
  create_token.RecordCacheHit();
  create_token.RecordCacheHit();
  create_token.RecordCacheMiss();
  create_token.RecordCacheCoalesced();
  create_token.RecordCacheStaleServed();
  create_token.RecordIdempotencyReplay();
  create_token.RecordVendorUnknownFields(4);
  create_token.RecordVendorUnknownFields(0);
  metrics->ForRoute(2).RecordAttempt(404, 10ms);

  const std::vector<MetricFamily> f = metrics->Collect();
  const LabelMap route = {{"account", "default"}, {"route", "create_token"}};
  auto requests = [&](const std::string& route_label, const std::string& status_class) {
    return Value(f, "inspection_upstream_requests_total",
                 {{"account", "default"}, {"route", route_label}, {"status_class", status_class}});
  };
  EXPECT_EQ(requests("create_token", "2xx"), 2);
  EXPECT_EQ(requests("create_token", "5xx"), 1);
  EXPECT_EQ(requests("create_token", "transport_error"), 1);
  EXPECT_EQ(requests("create_token", "4xx"), 0);
  EXPECT_EQ(requests("search_inspections", "4xx"), 1);
  EXPECT_EQ(requests("get_token_status", "4xx"), 0);
  EXPECT_EQ(requests("other", "2xx"), 0);

  const prometheus::ClientMetric* duration =
      FindSeries(f, "inspection_upstream_request_duration_seconds", route);
  ASSERT_NE(duration, nullptr);
  EXPECT_EQ(duration->histogram.sample_count, 4u);
  EXPECT_DOUBLE_EQ(duration->histogram.sample_sum, 1.85);
  // Cumulative buckets: 0.05 <= 0.05, 0.1 <= 0.1, 0.2 <= 0.25, 1.5 <= 2.5.
  std::map<double, uint64_t> buckets;
  for (const auto& bucket : duration->histogram.bucket) {
    buckets[bucket.upper_bound] = bucket.cumulative_count;
  }
  EXPECT_EQ(buckets[0.025], 0u);
  EXPECT_EQ(buckets[0.05], 1u);
  EXPECT_EQ(buckets[0.1], 2u);
  EXPECT_EQ(buckets[0.25], 3u);
  EXPECT_EQ(buckets[1], 3u);
  EXPECT_EQ(buckets[2.5], 4u);
  EXPECT_EQ(buckets[std::numeric_limits<double>::infinity()], 4u);

  EXPECT_EQ(Value(f, "inspection_upstream_retries_total",
                  {{"account", "default"}, {"route", "create_token"}, {"reason", "status_503"}}),
            1);
  EXPECT_EQ(Value(f, "inspection_upstream_retries_total",
                  {{"account", "default"}, {"route", "create_token"}, {"reason", "connect"}}),
            1);
  EXPECT_EQ(Value(f, "inspection_upstream_retries_total",
                  {{"account", "default"}, {"route", "create_token"}, {"reason", "timeout"}}),
            0);
  EXPECT_EQ(Value(f, "inspection_upstream_retry_budget_exhausted_total", route), 1);
  EXPECT_EQ(HistogramCount(f, "inspection_upstream_attempts_per_call", route), 1u);
  EXPECT_EQ(FindSeries(f, "inspection_upstream_attempts_per_call", route)->histogram.sample_sum, 3);
  EXPECT_EQ(Value(f, "inspection_cache_hits_total", route), 2);
  EXPECT_EQ(Value(f, "inspection_cache_misses_total", route), 1);
  EXPECT_EQ(Value(f, "inspection_cache_coalesced_total", route), 1);
  EXPECT_EQ(Value(f, "inspection_cache_stale_served_total", route), 1);
  EXPECT_EQ(Value(f, "inspection_idempotency_replays_total", route), 1);
  EXPECT_EQ(Value(f, "inspection_vendor_unknown_fields_total", route), 4);
  EXPECT_EQ(Value(f, "inspection_cache_hits_total",
                  {{"account", "default"}, {"route", "get_token_status"}}),
            0);
}

TEST(GatewayMetricsTest, EachVendorAccountHasItsOwnRouteAndCircuitSeries) {
  AllMetricsConfig config = TestConfig();
  config.accounts = {"default", "prod-eu"};
  config.upstreams = {"vendor", "vendor.prod_eu"};
  std::shared_ptr<AllMetrics> metrics = MakeMetrics(config);
  ASSERT_NE(metrics, nullptr);
  EXPECT_EQ(metrics->AccountIndex(""), 0u);
  EXPECT_EQ(metrics->AccountIndex("default"), 0u);
  EXPECT_EQ(metrics->AccountIndex("prod-eu"), 1u);
  EXPECT_EQ(metrics->AccountIndex("nope"), 0u);
  EXPECT_EQ(&metrics->ForRoute(0), &metrics->ForRoute(0, 0));
  EXPECT_NE(&metrics->ForRoute(0, 0), &metrics->ForRoute(0, 1));
  EXPECT_EQ(&metrics->ForRoute(0, 7), &metrics->ForRoute(0, 0));  // out of range: first
  EXPECT_EQ(&metrics->ForRouteLabel("create_token", 1), &metrics->ForRoute(0, 1));

  metrics->ForRoute(0, 1).RecordAttempt(503, 10ms);
  metrics->ForRoute(0, 1).RecordRetry(RetryReason::kStatus503);
  metrics->ForRoute(0, 1).RecordCacheMiss();
  metrics->ForRoute(0, 0).RecordAttempt(200, 10ms);
  metrics->ForRoute(99, 1).RecordCacheHit();  // the other route of prod-eu
  metrics->ForUpstream(1).RecordTransition(CircuitState::kOpen);

  const std::vector<MetricFamily> f = metrics->Collect();
  auto requests = [&](const std::string& account, const std::string& status_class) {
    return Value(f, "inspection_upstream_requests_total",
                 {{"account", account}, {"route", "create_token"}, {"status_class", status_class}});
  };
  EXPECT_EQ(requests("prod-eu", "5xx"), 1);
  EXPECT_EQ(requests("prod-eu", "2xx"), 0);
  EXPECT_EQ(requests("default", "2xx"), 1);
  EXPECT_EQ(requests("default", "5xx"), 0);
  EXPECT_EQ(Value(f, "inspection_upstream_retries_total",
                  {{"account", "prod-eu"}, {"route", "create_token"}, {"reason", "status_503"}}),
            1);
  EXPECT_EQ(Value(f, "inspection_cache_misses_total",
                  {{"account", "prod-eu"}, {"route", "create_token"}}),
            1);
  EXPECT_EQ(Value(f, "inspection_cache_hits_total", {{"account", "prod-eu"}, {"route", "other"}}),
            1);
  EXPECT_EQ(Value(f, "inspection_upstream_circuit_state",
                  {{"account", "prod-eu"}, {"upstream", "vendor.prod_eu"}}),
            2);
  EXPECT_EQ(Value(f, "inspection_upstream_circuit_state",
                  {{"account", "default"}, {"upstream", "vendor"}}),
            0);
  // Series per account: (3 routes + other) x 6 status classes x 2 accounts.
  EXPECT_EQ(FindFamily(f, "inspection_upstream_requests_total")->metric.size(), 48u);
}

TEST(AllMetricsConfigTest, RejectsAccountLabelsOutsideTheRules) {
  for (const std::vector<std::string>& accounts :
       std::vector<std::vector<std::string>>{{""}, {"a b"}, {std::string(65, 'a')}, {"x", "x"}}) {
    AllMetricsConfig config = TestConfig();
    config.accounts = accounts;
    const auto created = AllMetrics::Create(config);
    ASSERT_FALSE(created.ok());
    EXPECT_EQ(created.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(created.status().message(), HasSubstr("accounts"));
  }
}

TEST(GatewayMetricsTest, UnknownNamesAndIndexesLandInTheOtherBucket) {
  std::shared_ptr<AllMetrics> metrics = MakeMetrics();
  ASSERT_NE(metrics, nullptr);
  RouteMetrics& other_route = metrics->ForRoute(metrics->route_count());
  EXPECT_EQ(&metrics->ForRoute(1000), &other_route);
  EXPECT_EQ(&metrics->ForRouteLabel("/apiV1/inspections/8f2c"), &other_route);
  EXPECT_EQ(&metrics->ForRouteLabel(""), &other_route);
  EXPECT_EQ(&metrics->ForRouteLabel("other"), &other_route);
  EXPECT_NE(&metrics->ForRouteLabel("get_token_status"), &other_route);

  metrics->ForRouteLabel("/apiV1/inspections/8f2c").RecordCacheMiss();
  metrics->ForRoute(1000).RecordCacheMiss();
  metrics->ForUpstream(7).RecordTransition(CircuitState::kOpen);
  metrics->ForStreamRpc(9).SubscriberStarted();
  metrics->ForGrpcMethod("/grpc.health.v1.Health/Check", GrpcType::kUnary).RecordStarted();
  metrics->ForGrpcMethod(99).RecordStarted();
  metrics->ForGrpcMethod("/x.Y/Z", GrpcType::kBidiStream).RecordStarted();

  const std::vector<MetricFamily> f = metrics->Collect();
  EXPECT_EQ(Value(f, "inspection_cache_misses_total", {{"account", "default"}, {"route", "other"}}),
            2);
  EXPECT_EQ(
      Value(f, "inspection_upstream_circuit_state", {{"account", "other"}, {"upstream", "other"}}),
      2);
  EXPECT_EQ(Value(f, "inspection_upstream_circuit_state",
                  {{"account", "default"}, {"upstream", "vendor"}}),
            0);
  EXPECT_EQ(Value(f, "inspection_stream_subscribers", {{"rpc", "other"}}), 1);
  EXPECT_EQ(Value(f, "grpc_server_started_total",
                  {{"grpc_type", "unary"}, {"grpc_service", "other"}, {"grpc_method", "other"}}),
            2);
  EXPECT_EQ(
      Value(f, "grpc_server_started_total",
            {{"grpc_type", "bidi_stream"}, {"grpc_service", "other"}, {"grpc_method", "other"}}),
      1);
}

TEST(GatewayMetricsTest, RecordingNeverCreatesASeries) {
  std::shared_ptr<AllMetrics> metrics = MakeMetrics();
  ASSERT_NE(metrics, nullptr);
  const auto before = SeriesSpace(metrics->Collect());

  // Everything a careless or hostile caller could pass.
  for (size_t i : {size_t{0}, size_t{2}, size_t{3}, size_t{1} << 40}) {
    metrics->ForRoute(i).RecordAttempt(777, 1s);
    metrics->ForRoute(i).RecordRetry(static_cast<RetryReason>(99));
    metrics->ForRoute(i).RecordAttempt(static_cast<StatusClass>(99), 1s);
    metrics->ForUpstream(i).RecordTransition(static_cast<CircuitState>(1));
    metrics->ForStreamRpc(i).SubscriberStarted();
    metrics->ForGrpcMethod(i).RecordHandled(static_cast<grpc::StatusCode>(1234), 1ms);
  }
  metrics->ForRouteLabel("https://vendor.test/apiV1/token?key=secret").RecordCacheHit();
  metrics->ForGrpcMethod("/inspection.v1.TokenService/Nope", static_cast<GrpcType>(17))
      .RecordStarted();
  metrics->RecordDroppedSubscriber(static_cast<StreamDropReason>(50));

  const std::vector<MetricFamily> after_families = metrics->Collect();
  EXPECT_EQ(SeriesSpace(after_families), before);
  // And the odd values were attributed to bounded buckets, not lost.
  EXPECT_EQ(
      Value(after_families, "inspection_upstream_requests_total",
            {{"account", "default"}, {"route", "other"}, {"status_class", "transport_error"}}),
      4);  // 777 and the out-of-range class, for indexes 3 and 2^40
  EXPECT_EQ(Value(after_families, "grpc_server_handled_total",
                  {{"grpc_type", "unary"},
                   {"grpc_service", "inspection.v1.TokenService"},
                   {"grpc_method", "CreateToken"},
                   {"grpc_code", "Unknown"}}),
            1);
}

TEST(GatewayMetricsTest, CircuitTransitionsMoveTheStateGauge) {
  std::shared_ptr<AllMetrics> metrics = MakeMetrics();
  ASSERT_NE(metrics, nullptr);
  UpstreamMetrics& vendor = metrics->ForUpstream(0);
  const LabelMap upstream = {{"account", "default"}, {"upstream", "vendor"}};
  auto transitions = [&](const std::vector<MetricFamily>& f, const std::string& to) {
    return Value(f, "inspection_upstream_circuit_transitions_total",
                 {{"account", "default"}, {"upstream", "vendor"}, {"to", to}});
  };

  vendor.RecordTransition(CircuitState::kOpen);
  auto f = metrics->Collect();
  EXPECT_EQ(Value(f, "inspection_upstream_circuit_state", upstream), 2);
  vendor.RecordTransition(CircuitState::kHalfOpen);
  f = metrics->Collect();
  EXPECT_EQ(Value(f, "inspection_upstream_circuit_state", upstream), 1);
  vendor.RecordTransition(CircuitState::kOpen);
  vendor.RecordTransition(CircuitState::kHalfOpen);
  vendor.RecordTransition(CircuitState::kClosed);
  f = metrics->Collect();
  EXPECT_EQ(Value(f, "inspection_upstream_circuit_state", upstream), 0);
  EXPECT_EQ(transitions(f, "open"), 2);
  EXPECT_EQ(transitions(f, "half_open"), 2);
  EXPECT_EQ(transitions(f, "closed"), 1);
  vendor.SetState(CircuitState::kOpen);
  f = metrics->Collect();
  EXPECT_EQ(Value(f, "inspection_upstream_circuit_state", upstream), 2);
  EXPECT_EQ(transitions(f, "open"), 2);  // SetState is not a transition
}

TEST(GatewayMetricsTest, GlobalFamiliesCountExactly) {
  std::shared_ptr<AllMetrics> metrics = MakeMetrics();
  ASSERT_NE(metrics, nullptr);
  metrics->RecordCacheEvictions(3);
  metrics->RecordCacheEvictions(0);
  metrics->SetCacheBytes(4096);
  metrics->SetCacheBytes(1024);
  metrics->SetUpstreamBufferedResponseBytes(4096);
  metrics->SetUpstreamBufferedResponseLimitBytes(8192);
  // The webhook port's series are the receiver's (webhook_metrics.h), in the same registry.
  webhooks::WebhookMetrics& webhook = metrics->webhook();
  webhook.Delivery(webhooks::WebhookOutcome::kAccepted);
  webhook.Delivery(webhooks::WebhookOutcome::kAccepted);
  webhook.Delivery(webhooks::WebhookOutcome::kUnauthorized);
  webhook.UnknownEventName();
  webhook.Delivery(webhooks::WebhookOutcome::kStoreFailure);
  metrics->ForStreamRpc(0).SubscriberStarted();
  metrics->ForStreamRpc(0).SubscriberStarted();
  metrics->ForStreamRpc(0).SubscriberEnded();
  metrics->ForStreamRpc(1).SubscriberStarted();
  metrics->RecordFanoutLag(3ms);
  metrics->RecordFanoutLag(20s);
  metrics->RecordDroppedSubscriber(StreamDropReason::kSlowConsumer);

  const std::vector<MetricFamily> f = metrics->Collect();
  EXPECT_EQ(Value(f, "inspection_gateway_build_info",
                  {{"version", version::Version()}, {"revision", version::Revision()}}),
            1);
  EXPECT_EQ(Value(f, "inspection_cache_evictions_total"), 3);
  EXPECT_EQ(Value(f, "inspection_cache_bytes"), 1024);
  EXPECT_EQ(Value(f, "inspection_upstream_buffered_response_bytes"), 4096);
  EXPECT_EQ(Value(f, "inspection_upstream_buffered_response_limit_bytes"), 8192);
  EXPECT_EQ(Value(f, "inspection_webhook_deliveries_total", {{"outcome", "accepted"}}), 2);
  EXPECT_EQ(Value(f, "inspection_webhook_deliveries_total", {{"outcome", "unauthorized"}}), 1);
  EXPECT_EQ(Value(f, "inspection_webhook_deliveries_total", {{"outcome", "duplicate"}}), 0);
  EXPECT_EQ(Value(f, "inspection_webhook_unknown_event_names_total"), 1);
  EXPECT_EQ(Value(f, "inspection_event_log_appends_total"), 2);
  EXPECT_EQ(Value(f, "inspection_event_log_append_errors_total"), 1);
  EXPECT_EQ(Value(f, "inspection_stream_subscribers", {{"rpc", "Subscribe"}}), 1);
  EXPECT_EQ(Value(f, "inspection_stream_subscribers", {{"rpc", "WatchTokenStatus"}}), 1);
  EXPECT_EQ(Value(f, "inspection_stream_dropped_subscribers_total", {{"reason", "slow_consumer"}}),
            1);
  const prometheus::ClientMetric* lag = FindSeries(f, "inspection_stream_fanout_lag_seconds", {});
  ASSERT_NE(lag, nullptr);
  EXPECT_EQ(lag->histogram.sample_count, 2u);
  EXPECT_DOUBLE_EQ(lag->histogram.sample_sum, 20.003);
  for (const auto& bucket : lag->histogram.bucket) {
    const uint64_t expected = bucket.upper_bound < 0.003 ? 0 : bucket.upper_bound < 20 ? 1 : 2;
    EXPECT_EQ(bucket.cumulative_count, expected) << "le=" << bucket.upper_bound;
  }
}

TEST(GatewayMetricsTest, ConcurrentRecordingLosesNothing) {
  std::shared_ptr<AllMetrics> metrics = MakeMetrics();
  ASSERT_NE(metrics, nullptr);
  constexpr int kThreads = 4;
  constexpr int kPerThread = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      RouteMetrics& route = metrics->ForRoute(0);
      for (int i = 0; i < kPerThread; ++i) {
        route.RecordAttempt(200, 1ms);
        metrics->ForStreamRpc(0).SubscriberStarted();
        metrics->ForStreamRpc(0).SubscriberEnded();
      }
    });
  }
  // Scrapes run concurrently with the recording, as in production.
  for (int i = 0; i < 20; ++i) metrics->Collect();
  for (std::thread& thread : threads) thread.join();

  const std::vector<MetricFamily> f = metrics->Collect();
  EXPECT_EQ(Value(f, "inspection_upstream_requests_total",
                  {{"account", "default"}, {"route", "create_token"}, {"status_class", "2xx"}}),
            kThreads * kPerThread);
  EXPECT_EQ(HistogramCount(f, "inspection_upstream_request_duration_seconds",
                           {{"account", "default"}, {"route", "create_token"}}),
            static_cast<uint64_t>(kThreads * kPerThread));
  EXPECT_EQ(Value(f, "inspection_stream_subscribers", {{"rpc", "Subscribe"}}), 0);
}

}  // namespace
}  // namespace inspection::metrics
