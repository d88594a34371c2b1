#include "gateway/upstream/vendor_client.h"

#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "gateway/logging/log.h"
#include "gateway/tracing/trace_context.h"

namespace inspection::upstream {
namespace {

// Records requests and answers them synchronously with a scripted result.
class RecordingTransport : public http::HttpTransport {
 public:
  void Send(http::HttpRequest request, http::HttpCallback done) override {
    requests.push_back(request);
    std::move(done)(next);
  }
  std::vector<http::HttpRequest> requests;
  http::HttpResult next;
};

class VendorClientTest : public ::testing::Test {
 protected:
  VendorClientTest() : client_(Options(), &transport_) {}
  static VendorClientOptions Options() {
    VendorClientOptions options;
    options.base_url = "https://vendor.example.test";
    options.api_key = "sekret-key-123";
    return options;
  }
  VendorResult Call(routes::RouteId route, const vendor::VendorRequest& request,
                    std::chrono::system_clock::time_point deadline =
                        std::chrono::system_clock::time_point::max()) {
    VendorResult out;
    client_.Call(route, request, deadline, CallOptions{.request_id = "req-1"},
                 [&out](VendorResult result) { out = std::move(result); });
    return out;
  }
  RecordingTransport transport_;
  VendorClient client_;
};

TEST_F(VendorClientTest, BuildsUrlWithEncodedPathAndQuery) {
  vendor::VendorRequest request;
  request.path_params = {{"inspectionId", "a b/c"}};
  EXPECT_EQ(client_.BuildUrl(routes::GetRoute(routes::RouteId::kGetDamagesReport), request),
            "https://vendor.example.test/apiv1/inspection/apiV1_sdk/inspection/damagesReport/"
            "a%20b%2Fc");
  vendor::VendorRequest search;
  search.query = {{"licensePlate", "AB 12&x=1"}, {"page", "2"}};
  EXPECT_EQ(client_.BuildUrl(routes::GetRoute(routes::RouteId::kSearchInspections), search),
            "https://vendor.example.test/apiv1/inspection/search?licensePlate=AB%2012%26x%3D1"
            "&page=2");
}

TEST_F(VendorClientTest, SendsHeadersBodyAndRouteTimeout) {
  transport_.next.response.status = 200;
  transport_.next.response.body = R"({"status": "send"})";
  vendor::VendorRequest request;
  request.body = nlohmann::json{{"url", "https://img.example.test/a.jpg"}};
  VendorResult result = Call(routes::RouteId::kAssessQuality, request);
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result.json_body()["status"], "send");
  ASSERT_EQ(transport_.requests.size(), 1u);
  const auto& sent = transport_.requests[0];
  EXPECT_EQ(sent.method, "POST");
  EXPECT_EQ(sent.url, "https://vendor.example.test/apiV1/quality/image");
  EXPECT_EQ(sent.body, R"({"url":"https://img.example.test/a.jpg"})");
  EXPECT_EQ(sent.timeout, routes::GetRoute(routes::RouteId::kAssessQuality).timeout);
  auto header = [&](const std::string& name) -> std::string {
    for (const auto& [key, value] : sent.headers) {
      if (key == name) return value;
    }
    return "<missing>";
  };
  EXPECT_EQ(header("X-API-Key"), "sekret-key-123");
  EXPECT_EQ(header("Content-Type"), "application/json");
  EXPECT_EQ(header("X-Request-Id"), "req-1");
}

TEST_F(VendorClientTest, NonIdempotentRoutesNeverReuseAConnection) {
  transport_.next.response.status = 200;
  transport_.next.response.body = "{}";
  Call(routes::RouteId::kCreateToken, {});
  Call(routes::RouteId::kDetectDamage, {});
  Call(routes::RouteId::kTestWebhook, {});
  Call(routes::RouteId::kGetTokenStatus, {});
  Call(routes::RouteId::kUpdateEventConfig, {});
  ASSERT_EQ(transport_.requests.size(), 5u);
  EXPECT_FALSE(transport_.requests[0].reuse_connection);
  EXPECT_FALSE(transport_.requests[1].reuse_connection);
  EXPECT_FALSE(transport_.requests[2].reuse_connection);
  EXPECT_TRUE(transport_.requests[3].reuse_connection);
  EXPECT_TRUE(transport_.requests[4].reuse_connection);
}

TEST_F(VendorClientTest, GetHasNoBodyAndNoContentType) {
  transport_.next.response.status = 200;
  transport_.next.response.body = "{}";
  VendorResult result = Call(routes::RouteId::kGetWebhookConfig, {});
  ASSERT_TRUE(result.ok());
  ASSERT_EQ(transport_.requests.size(), 1u);
  EXPECT_EQ(transport_.requests[0].method, "GET");
  EXPECT_TRUE(transport_.requests[0].body.empty());
  for (const auto& [key, value] : transport_.requests[0].headers) EXPECT_NE(key, "Content-Type");
}

TEST_F(VendorClientTest, DeadlineShortensTheAttemptTimeout) {
  transport_.next.response.status = 200;
  transport_.next.response.body = "{}";
  Call(routes::RouteId::kSegmentParts, {},
       std::chrono::system_clock::now() + std::chrono::milliseconds(800));
  ASSERT_EQ(transport_.requests.size(), 1u);
  EXPECT_LE(transport_.requests[0].timeout, std::chrono::milliseconds(800));
  EXPECT_GT(transport_.requests[0].timeout, std::chrono::milliseconds(500));
}

TEST_F(VendorClientTest, ExpiredDeadlineNeverCallsTheVendor) {
  VendorResult result = Call(routes::RouteId::kCreateToken, {},
                             std::chrono::system_clock::now() - std::chrono::milliseconds(1));
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error->code, absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(result.error->reason, "DEADLINE_TOO_SHORT");
  EXPECT_TRUE(transport_.requests.empty());
}

TEST_F(VendorClientTest, EmptyTwoHundredIsNullAndGarbageIsMalformed) {
  transport_.next.response.status = 204;
  transport_.next.response.body = "  \n";
  VendorResult empty = Call(routes::RouteId::kDetectDamage, {});
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty.body, nullptr);
  EXPECT_TRUE(empty.json_body().is_null());

  transport_.next.response.status = 200;
  transport_.next.response.body = "<html>oops</html>";
  VendorResult garbage = Call(routes::RouteId::kDetectDamage, {});
  ASSERT_FALSE(garbage.ok());
  EXPECT_EQ(garbage.error->reason, "VENDOR_MALFORMED_RESPONSE");
  EXPECT_EQ(garbage.error->metadata.at("vendor_body"), "<html>oops</html>");
}

// An answer nested past upstream.max_json_depth fails the call instead of reaching the code
// that walks it recursively: on GetWebhookConfig the webhook-key seal re-serializes the
// body, and 300,000 levels of `[` overflowed the thread's stack there (a crash, before).
TEST_F(VendorClientTest, AnAnswerNestedPastTheDepthLimitIsMalformedNotACrash) {
  constexpr int kDepth = 300000;
  transport_.next.response.status = 200;
  transport_.next.response.body = std::string(kDepth, '[') + std::string(kDepth, ']');
  VendorResult deep = Call(routes::RouteId::kGetWebhookConfig, {});
  ASSERT_FALSE(deep.ok());
  EXPECT_EQ(deep.error->code, absl::StatusCode::kUnavailable);
  EXPECT_EQ(deep.error->reason, "VENDOR_MALFORMED_RESPONSE");
  EXPECT_NE(deep.error->message.find("deeper than 512 levels (upstream.max_json_depth)"),
            std::string::npos)
      << deep.error->message;
  EXPECT_EQ(deep.body, nullptr);

  // At the limit it is an answer like any other, sealed and re-serialized.
  const std::string at_limit =
      std::string(511, '[') + R"({"headerKey":"k"})" + std::string(511, ']');
  transport_.next.response.body = at_limit;
  VendorResult ok = Call(routes::RouteId::kGetWebhookConfig, {});
  ASSERT_TRUE(ok.ok()) << ok.error->message;
  ASSERT_NE(ok.body, nullptr);
  EXPECT_EQ(ok.response.body, ok.body->dump());

  // The limit is the option's.
  VendorClientOptions shallow = Options();
  shallow.max_json_depth = 2;
  VendorClient client(shallow, &transport_);
  transport_.next.response.body = R"({"a": {"b": [1]}})";
  std::optional<VendorResult> three;
  client.Call(routes::RouteId::kDetectDamage, {}, std::chrono::system_clock::time_point::max(),
              CallOptions{}, [&three](VendorResult r) { three = std::move(r); });
  ASSERT_TRUE(three.has_value());
  ASSERT_FALSE(three->ok());
  EXPECT_NE(three->error->message.find("deeper than 2 levels"), std::string::npos);
}

// An answer with more JSON values than upstream.max_json_elements fails the call while it
// is parsed: decoded, a value costs up to ~320 bytes, so a 60 MB answer of empty objects
// took 1.9 GB (outside review of issue 31). Not retried (RESOURCE_EXHAUSTED, kTooLarge).
TEST_F(VendorClientTest, AnAnswerWithTooManyValuesIsTooLargeNotATree) {
  VendorClientOptions options = Options();
  EXPECT_EQ(options.max_json_elements, 250'000) << "the documented default";
  options.max_json_elements = 1000;
  VendorClient client(options, &transport_);
  const auto call = [&](std::string body) {
    transport_.next.response.status = 200;
    transport_.next.response.body = std::move(body);
    std::optional<VendorResult> result;
    client.Call(routes::RouteId::kGetWebhookConfig, {},
                std::chrono::system_clock::time_point::max(), CallOptions{},
                [&result](VendorResult r) { result = std::move(r); });
    EXPECT_TRUE(result.has_value());
    return std::move(*result);
  };
  // 1,000 values: the object and 999 members. Within the limit.
  std::string at_limit = R"({"headerKey":"k")";
  for (int i = 1; i < 999; ++i) absl::StrAppend(&at_limit, R"(,"m)", i, R"(":{})");
  at_limit += "}";
  VendorResult ok = call(at_limit);
  ASSERT_TRUE(ok.ok()) << ok.error->message;

  std::string over = "[{}";
  for (int i = 1; i < 5000; ++i) over += ",{}";
  over += "]";
  VendorResult refused = call(over);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error->code, absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(refused.error->reason, "VENDOR_RESPONSE_TOO_LARGE");
  EXPECT_EQ(refused.error->failure.kind, resilience::VendorFailure::Kind::kTooLarge);
  EXPECT_NE(refused.error->message.find("more than 1000 JSON values (upstream.max_json_elements)"),
            std::string::npos)
      << refused.error->message;
  EXPECT_EQ(refused.body, nullptr);
}

TEST_F(VendorClientTest, ScrubsTheApiKeyFromWhatComesBack) {
  transport_.next.response.status = 401;
  transport_.next.response.body = R"({"message": "bad key sekret-key-123"})";
  VendorResult result = Call(routes::RouteId::kGetTokenStatus, {});
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error->metadata.at("vendor_body"), R"({"message": "bad key [redacted]"})");
  EXPECT_EQ(result.error->message.find("sekret-key-123"), std::string::npos);
}

TEST_F(VendorClientTest, TransportFailuresBecomeReasons) {
  transport_.next.error = http::TransportError::kConnect;
  transport_.next.error_detail = "Connection refused";
  VendorResult result = Call(routes::RouteId::kGetTokenStatus, {});
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error->code, absl::StatusCode::kUnavailable);
  EXPECT_EQ(result.error->reason, "VENDOR_UNREACHABLE");
  EXPECT_EQ(result.error->metadata.at("request_sent"), "false");

  transport_.next.error = http::TransportError::kTimeout;
  result = Call(routes::RouteId::kGetTokenStatus, {});
  EXPECT_EQ(result.error->code, absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(result.error->reason, "VENDOR_TIMEOUT");
}

}  // namespace
}  // namespace inspection::upstream

namespace inspection::upstream {
namespace {

vendor::VendorRequest TokenRequest() {
  vendor::VendorRequest request;
  request.path_params = {{"uid", "u1"}};
  return request;
}

class RecordingSpans final : public tracing::SpanSink {
 public:
  void Record(tracing::Span span) override { spans.push_back(std::move(span)); }
  std::vector<tracing::Span> spans;
};

std::string Header(const http::HttpRequest& request, const std::string& name) {
  for (const auto& [key, value] : request.headers) {
    if (key == name) return value;
  }
  return "";
}

TEST(VendorClientTraceTest, EachAttemptSendsAChildTraceparentLogsAndRecordsItsSpan) {
  RecordingTransport transport;
  transport.next.response.status = 503;
  transport.next.response.body = R"({"message": "busy"})";
  RecordingSpans spans;
  VendorClientOptions options;
  options.base_url = "https://vendor.example.test";
  options.api_key = "sekret-key-123";
  options.spans = &spans;
  options.account_label = "preprod";
  VendorClient client(options, &transport);

  std::vector<std::string> lines;
  logging::DefaultLogger().SetLevel(logging::Level::kDebug);
  logging::DefaultLogger().SetSink([&](absl::string_view line) { lines.emplace_back(line); });
  CallOptions call{.request_id = "req-9"};
  call.trace = tracing::TraceContext::FromHeaders(
      "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "congo=t61rcWkgMzE");
  call.attempt = 2;
  client.Call(routes::RouteId::kGetTokenStatus, TokenRequest(),
              std::chrono::system_clock::time_point::max(), call, [](VendorResult) {});
  logging::DefaultLogger().SetSink(logging::Logger::StderrSink());
  logging::DefaultLogger().SetLevel(logging::Level::kInfo);

  ASSERT_EQ(transport.requests.size(), 1u);
  const auto sent = tracing::ParseTraceparent(Header(transport.requests[0], "traceparent"));
  ASSERT_TRUE(sent.has_value());
  EXPECT_EQ(tracing::Hex(sent->trace_id), "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_NE(sent->parent_id, call.trace->span_id);
  EXPECT_EQ(Header(transport.requests[0], "tracestate"), "congo=t61rcWkgMzE");

  ASSERT_EQ(spans.spans.size(), 1u);
  const tracing::Span& span = spans.spans[0];
  EXPECT_EQ(span.kind, tracing::SpanKind::kClient);
  EXPECT_EQ(span.span_id, sent->parent_id);
  EXPECT_EQ(span.parent_span_id, call.trace->span_id);
  EXPECT_EQ(span.status, tracing::SpanStatus::kError);
  EXPECT_EQ(span.name, "GET " + routes::GetRoute(routes::RouteId::kGetTokenStatus).path_template);

  ASSERT_EQ(lines.size(), 1u);
  const nlohmann::json line = nlohmann::json::parse(lines[0]);
  EXPECT_EQ(line["msg"], "vendor attempt");
  EXPECT_EQ(line["level"], "debug");
  EXPECT_EQ(line["attempt"], 2);
  EXPECT_EQ(line["http_status"], 503);
  EXPECT_EQ(line["account"], "preprod");
  EXPECT_EQ(line["trace_id"], "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_EQ(line["span_id"], tracing::Hex(sent->parent_id));
  EXPECT_EQ(lines[0].find("sekret-key-123"), std::string::npos);
}

}  // namespace
}  // namespace inspection::upstream
