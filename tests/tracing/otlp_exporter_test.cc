// The OTLP exporter without a network: what it encodes, that Record() never blocks and a
// full queue drops and counts, that a refusing or silent collector costs spans, not memory.
#include "gateway/tracing/otlp_exporter.h"

#include <atomic>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <prometheus/registry.h>

#include "absl/synchronization/mutex.h"
#include "nlohmann/json.hpp"
#include "tests/support/wait.h"

namespace inspection::tracing {
namespace {

using namespace std::chrono_literals;
using ::inspection::testing::WaitUntil;

// Answers each request with `status`, or never answers while `hold` is set (it then
// answers with a transport error when released, as CurlTransport does at shutdown).
class FakeCollector final : public http::HttpTransport {
 public:
  void Send(http::HttpRequest request, http::HttpCallback done) override {
    absl::MutexLock lock(&mu_);
    requests_.push_back(request);
    if (hold_) {
      held_.push_back(std::move(done));
      return;
    }
    http::HttpResult result;
    result.response.status = status_;
    mu_.Unlock();
    std::move(done)(std::move(result));
    mu_.Lock();
  }
  void SetStatus(int status) {
    absl::MutexLock lock(&mu_);
    status_ = status;
  }
  void Hold() {
    absl::MutexLock lock(&mu_);
    hold_ = true;
  }
  void ReleaseAll() {
    std::vector<http::HttpCallback> held;
    {
      absl::MutexLock lock(&mu_);
      held.swap(held_);
      hold_ = false;
    }
    for (auto& done : held) {
      http::HttpResult result;
      result.error = http::TransportError::kTimeout;
      std::move(done)(std::move(result));
    }
  }
  std::vector<http::HttpRequest> requests() {
    absl::MutexLock lock(&mu_);
    return requests_;
  }

 private:
  absl::Mutex mu_;
  std::vector<http::HttpRequest> requests_;
  std::vector<http::HttpCallback> held_;
  int status_ = 200;
  bool hold_ = false;
};

Span MakeSpan(int i) {
  Span span;
  span.trace_id = NewTraceId();
  span.span_id = NewSpanId();
  span.name = "span-" + std::to_string(i);
  span.kind = SpanKind::kServer;
  span.start_unix_nano = 1700000000000000000ull + static_cast<uint64_t>(i);
  span.end_unix_nano = span.start_unix_nano + 1000;
  span.attributes = {{"s", std::string("v")}, {"i", int64_t{-7}}, {"b", true}, {"d", 0.5}};
  return span;
}

OtlpExporterOptions Options() {
  OtlpExporterOptions options;
  options.endpoint = "http://collector.test:4318/v1/traces";
  options.max_queued_spans = 8;
  options.max_batch_spans = 4;
  options.export_interval = 20ms;
  options.export_timeout = 200ms;
  options.service_version = "9.9.9";
  return options;
}

TEST(OtlpJsonTest, EncodesOtlpJsonConventions) {
  Span span = MakeSpan(1);
  span.parent_span_id = NewSpanId();
  span.tracestate = "congo=t61rcWkgMzE";
  span.status = SpanStatus::kError;
  span.status_message = "VENDOR_UNAVAILABLE";
  const nlohmann::json request = nlohmann::json::parse(EncodeOtlpJson({span}, Options()));
  const auto& resource = request["resourceSpans"][0];
  EXPECT_EQ(resource["resource"]["attributes"][0],
            (nlohmann::json{{"key", "service.name"},
                            {"value", {{"stringValue", "inspection-gateway"}}}}));
  EXPECT_EQ(resource["scopeSpans"][0]["scope"]["version"], "9.9.9");
  const auto& out = resource["scopeSpans"][0]["spans"][0];
  EXPECT_EQ(out["traceId"], Hex(span.trace_id));  // hex, not base64
  EXPECT_EQ(out["spanId"], Hex(span.span_id));
  EXPECT_EQ(out["parentSpanId"], Hex(span.parent_span_id));
  EXPECT_EQ(out["traceState"], "congo=t61rcWkgMzE");
  EXPECT_EQ(out["kind"], 2);                                   // enums are integers
  EXPECT_EQ(out["startTimeUnixNano"], "1700000000000000001");  // 64-bit as strings
  EXPECT_EQ(out["status"], (nlohmann::json{{"code", 2}, {"message", "VENDOR_UNAVAILABLE"}}));
  EXPECT_EQ(out["attributes"][1]["value"], (nlohmann::json{{"intValue", "-7"}}));
  EXPECT_EQ(out["attributes"][2]["value"], (nlohmann::json{{"boolValue", true}}));
  EXPECT_EQ(out["attributes"][3]["value"], (nlohmann::json{{"doubleValue", 0.5}}));
  // A root span has no parentSpanId at all (not an empty string).
  const nlohmann::json root = nlohmann::json::parse(EncodeOtlpJson({MakeSpan(2)}, Options()));
  EXPECT_FALSE(root["resourceSpans"][0]["scopeSpans"][0]["spans"][0].contains("parentSpanId"));
}

TEST(OtlpJsonTest, ABadUtf8ByteDoesNotBreakTheBatch) {
  Span span = MakeSpan(1);
  span.name = std::string("bad \xff byte");
  EXPECT_NO_THROW(nlohmann::json::parse(EncodeOtlpJson({span}, Options())));
}

TEST(OtlpExporterTest, RefusesABadEndpointOrZeroBounds) {
  FakeCollector collector;
  OtlpExporterOptions options = Options();
  options.endpoint = "collector:4318";
  EXPECT_EQ(OtlpExporter::Create(options, &collector).status().code(),
            absl::StatusCode::kInvalidArgument);
  options = Options();
  options.max_queued_spans = 0;
  EXPECT_EQ(OtlpExporter::Create(options, &collector).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(OtlpExporterTest, SendsBatchesToTheEndpointAndCountsThem) {
  FakeCollector collector;
  auto exporter = OtlpExporter::Create(Options(), &collector);
  ASSERT_TRUE(exporter.ok()) << exporter.status();
  for (int i = 0; i < 6; ++i) (*exporter)->Record(MakeSpan(i));
  ASSERT_TRUE(WaitUntil([&] { return (*exporter)->stats().exported == 6; }, 5s));
  const auto requests = collector.requests();
  ASSERT_GE(requests.size(), 2u);  // batches of at most 4
  size_t spans = 0;
  for (const http::HttpRequest& request : requests) {
    EXPECT_EQ(request.method, "POST");
    EXPECT_EQ(request.url, "http://collector.test:4318/v1/traces");
    const auto batch =
        nlohmann::json::parse(request.body)["resourceSpans"][0]["scopeSpans"][0]["spans"];
    EXPECT_LE(batch.size(), 4u);
    spans += batch.size();
  }
  EXPECT_EQ(spans, 6u);
  EXPECT_EQ((*exporter)->stats().dropped_queue_full, 0u);
}

TEST(OtlpExporterTest, CountsExportedSpansInItsPrometheusSeries) {
  FakeCollector collector;
  prometheus::Registry registry;
  const OtlpExporterMetrics metrics = OtlpExporterMetrics::Create(metrics::MetricsScope(registry));
  OtlpExporterOptions options = Options();
  options.metrics = &metrics;
  auto exporter = OtlpExporter::Create(options, &collector);
  ASSERT_TRUE(exporter.ok()) << exporter.status();
  for (int i = 0; i < 6; ++i) (*exporter)->Record(MakeSpan(i));
  ASSERT_TRUE(WaitUntil([&] { return metrics.exported->Value() == 6; }, 5s));
  EXPECT_EQ(metrics.dropped_queue_full->Value(), 0);
  EXPECT_EQ(metrics.export_failures->Value(), 0);
}

TEST(OtlpExporterTest, AFullQueueDropsAndCountsWithoutBlocking) {
  FakeCollector collector;
  collector.Hold();  // the collector never answers: the exporter's thread is stuck sending
  OtlpExporterOptions options = Options();
  options.export_timeout = 5s;
  // Its Prometheus series are its own, updated where spans are dropped or exported.
  prometheus::Registry registry;
  const OtlpExporterMetrics metrics = OtlpExporterMetrics::Create(metrics::MetricsScope(registry));
  options.metrics = &metrics;
  auto exporter = OtlpExporter::Create(options, &collector);
  ASSERT_TRUE(exporter.ok());
  for (int i = 0; i < 4; ++i) (*exporter)->Record(MakeSpan(i));  // one batch, taken
  ASSERT_TRUE(WaitUntil([&] { return collector.requests().size() == 1; }, 5s));
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 1000; ++i) (*exporter)->Record(MakeSpan(i));
  // Record() never waited for the collector.
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1s);
  EXPECT_EQ((*exporter)->stats().dropped_queue_full, 1000u - 8u);
  collector.ReleaseAll();  // the held batch fails
  ASSERT_TRUE(WaitUntil([&] { return (*exporter)->stats().dropped_export_failed >= 4; }, 5s));
  EXPECT_GE((*exporter)->stats().export_requests_failed, 1u);
  EXPECT_EQ(metrics.dropped_queue_full->Value(), 1000 - 8);
  EXPECT_GE(metrics.dropped_export_failed->Value(), 4);
  EXPECT_GE(metrics.export_failures->Value(), 1);
}

TEST(OtlpExporterTest, ARefusingCollectorCostsSpansNotMemory) {
  FakeCollector collector;
  collector.SetStatus(503);
  auto exporter = OtlpExporter::Create(Options(), &collector);
  ASSERT_TRUE(exporter.ok());
  for (int i = 0; i < 3; ++i) (*exporter)->Record(MakeSpan(i));
  ASSERT_TRUE(WaitUntil([&] { return (*exporter)->stats().dropped_export_failed == 3; }, 5s));
  EXPECT_EQ((*exporter)->stats().exported, 0u);
  // No retry: every span was sent exactly once.
  size_t sent = 0;
  for (const http::HttpRequest& request : collector.requests()) {
    sent +=
        nlohmann::json::parse(request.body)["resourceSpans"][0]["scopeSpans"][0]["spans"].size();
  }
  EXPECT_EQ(sent, 3u);
}

TEST(OtlpExporterTest, StopSendsWhatIsQueuedAndLaterSpansAreCounted) {
  FakeCollector collector;
  OtlpExporterOptions options = Options();
  options.export_interval = 1h;  // only Stop() sends
  auto exporter = OtlpExporter::Create(options, &collector);
  ASSERT_TRUE(exporter.ok());
  (*exporter)->Record(MakeSpan(1));
  (*exporter)->Record(MakeSpan(2));
  (*exporter)->Stop();
  EXPECT_EQ((*exporter)->stats().exported, 2u);
  (*exporter)->Record(MakeSpan(3));
  EXPECT_EQ((*exporter)->stats().dropped_queue_full, 1u);
  (*exporter)->Stop();  // idempotent
}

TEST(OtlpExporterTest, ASilentCollectorCannotHoldUpShutdown) {
  FakeCollector collector;
  collector.Hold();
  OtlpExporterOptions options = Options();
  options.export_interval = 1h;  // only Stop() sends
  options.export_timeout = 60s;  // the last batch waits at most kLastBatchTimeout anyway
  auto exporter = OtlpExporter::Create(options, &collector);
  ASSERT_TRUE(exporter.ok());
  (*exporter)->Record(MakeSpan(1));
  const auto start = std::chrono::steady_clock::now();
  (*exporter)->Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
  ASSERT_EQ(collector.requests().size(), 1u);
  EXPECT_EQ(collector.requests()[0].timeout, OtlpExporter::kLastBatchTimeout);
  EXPECT_EQ((*exporter)->stats().dropped_export_failed, 1u);
  collector.ReleaseAll();
}

}  // namespace
}  // namespace inspection::tracing
