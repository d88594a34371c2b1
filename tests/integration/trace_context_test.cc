// W3C trace context through the gateway: a caller's traceparent reaches the vendor as a child
// (same trace id, new span id per attempt), the RPC's log line and response carry the trace
// id, a call without one still sends a valid traceparent, and each RPC and vendor attempt is
// recorded as a span with the right parentage.
#include <atomic>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/synchronization/mutex.h"
#include "gateway/server/rpc_log_observer.h"
#include "gateway/tracing/trace_context.h"
#include "nlohmann/json.hpp"
#include "tests/integration/gateway_fixture.h"
#include "tests/support/captured_log.h"
#include "tests/support/wait.h"

namespace inspection::testing {
namespace {

using namespace std::chrono_literals;

constexpr char kCallerTrace[] = "4bf92f3577b34da6a3ce929d0e0e4736";
constexpr char kCallerSpan[] = "00f067aa0ba902b7";
constexpr char kTraceparent[] = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

class RecordingSink final : public tracing::SpanSink {
 public:
  void Record(tracing::Span span) override {
    absl::MutexLock lock(&mu_);
    spans_.push_back(std::move(span));
  }
  std::vector<tracing::Span> spans() {
    absl::MutexLock lock(&mu_);
    return spans_;
  }

 private:
  absl::Mutex mu_;
  std::vector<tracing::Span> spans_;
};

std::string HeaderOf(const RecordedRequest& request, const std::string& name) {
  for (const auto& [key, value] : request.headers) {
    if (key == name) return value;
  }
  return "";
}

std::string Attribute(const tracing::Span& span, const std::string& key) {
  for (const auto& [name, value] : span.attributes) {
    if (name != key) continue;
    if (const auto* s = std::get_if<std::string>(&value)) return *s;
    if (const auto* i = std::get_if<int64_t>(&value)) return std::to_string(*i);
  }
  return "(absent)";
}

class TraceContextTest : public GatewayTest {
 protected:
  void SetUp() override {
    ASSERT_TRUE(vendor_.Start());
    StartGateway(vendor_.BaseUrl(), [this](server::GatewayServerOptions& options) {
      options.span_sink = &sink_;
      options.observer = &log_observer_;
      options.retry.backoff.base = absl::Milliseconds(1);
      options.retry.backoff.cap = absl::Milliseconds(2);
    });
  }

  std::vector<nlohmann::json> LogLines(const std::string& msg) { return captured_.With(msg); }

  grpc::Status GetStatus(grpc::ClientContext* context, std::string* trace_header) {
    v1::GetTokenStatusRequest request;
    request.set_uid("tok-1");
    v1::GetTokenStatusResponse response;
    grpc::Status status = token_->GetTokenStatus(context, request, &response);
    const auto& headers =
        status.ok() ? context->GetServerInitialMetadata() : context->GetServerTrailingMetadata();
    auto it = headers.find("x-trace-id");
    if (it != headers.end()) *trace_header = std::string(it->second.data(), it->second.size());
    return status;
  }

  logging::Logger logger_;
  CapturedLog captured_{logging::Level::kDebug, logger_};
  server::RpcLogObserver log_observer_{logger_};
  RecordingSink sink_;
};

constexpr char kTokenBody[] =
    R"({"uid": "tok-1", "tradeinStatus": 1, "licensePlate": "AB-123-CD"})";

TEST_F(TraceContextTest, TheCallersTraceReachesTheVendorAsAChildSpan) {
  VendorReplies(200, kTokenBody);
  auto context = Context();
  context->AddMetadata("traceparent", kTraceparent);
  context->AddMetadata("tracestate", "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7");
  std::string trace_header;
  ASSERT_TRUE(GetStatus(context.get(), &trace_header).ok());
  EXPECT_EQ(trace_header, kCallerTrace);

  const RecordedRequest sent = OnlyRequest();
  const auto parsed = tracing::ParseTraceparent(HeaderOf(sent, "traceparent"));
  ASSERT_TRUE(parsed.has_value()) << HeaderOf(sent, "traceparent");
  EXPECT_EQ(tracing::Hex(parsed->trace_id), kCallerTrace);
  EXPECT_NE(tracing::Hex(parsed->parent_id), kCallerSpan);
  EXPECT_EQ(parsed->flags, 1);
  EXPECT_EQ(HeaderOf(sent, "tracestate"), "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7");

  // The log line of the call carries the trace; the gateway's span is the vendor span's
  // parent, and its parent is the caller's span.
  std::vector<nlohmann::json> lines;
  ASSERT_TRUE(WaitUntil([&] { return !(lines = LogLines("rpc finished")).empty(); }, 5s));
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0]["trace_id"], kCallerTrace);
  EXPECT_EQ(lines[0]["method"], "/inspection.v1.TokenService/GetTokenStatus");
  EXPECT_EQ(lines[0]["attempts"], 1);
  EXPECT_EQ(lines[0]["cache"], "none");  // GetTokenStatus is not cacheable
  EXPECT_EQ(lines[0]["account"], "default");
  EXPECT_NE(lines[0]["peer"].get<std::string>().find("127.0.0.1"), std::string::npos);
  const std::string server_span = lines[0]["span_id"];

  std::vector<tracing::Span> spans;
  ASSERT_TRUE(WaitUntil([&] { return (spans = sink_.spans()).size() == 2; }, 5s));
  const tracing::Span& client = spans[0].kind == tracing::SpanKind::kClient ? spans[0] : spans[1];
  const tracing::Span& server = spans[0].kind == tracing::SpanKind::kClient ? spans[1] : spans[0];
  EXPECT_EQ(server.kind, tracing::SpanKind::kServer);
  EXPECT_EQ(server.name, "inspection.v1.TokenService/GetTokenStatus");
  EXPECT_EQ(tracing::Hex(server.trace_id), kCallerTrace);
  EXPECT_EQ(tracing::Hex(server.parent_span_id), kCallerSpan);
  EXPECT_EQ(tracing::Hex(server.span_id), server_span);
  EXPECT_EQ(Attribute(server, "inspection.cache"), "(absent)");
  EXPECT_EQ(Attribute(server, "inspection.attempts"), "1");
  EXPECT_EQ(Attribute(server, "rpc.grpc.status_code"), "0");
  EXPECT_EQ(client.parent_span_id, server.span_id);
  EXPECT_EQ(client.span_id, parsed->parent_id);
  EXPECT_EQ(Attribute(client, "http.response.status_code"), "200");
  EXPECT_EQ(Attribute(client, "inspection.attempt"), "1");
  EXPECT_EQ(client.tracestate, "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7");
  EXPECT_GE(server.end_unix_nano, server.start_unix_nano);
  EXPECT_GE(client.end_unix_nano, client.start_unix_nano);
}

TEST_F(TraceContextTest, TheCacheOutcomeIsOnTheLogLineAndTheSpan) {
  VendorReplies(200, R"({"webhookHeaderKey": null, "webhookUrl": null, "webhookUrlV2": null})");
  for (int i = 0; i < 2; ++i) {
    v1::GetWebhookConfigResponse response;
    ASSERT_TRUE(
        event_config_->GetWebhookConfig(Context().get(), v1::GetWebhookConfigRequest(), &response)
            .ok());
  }
  std::vector<nlohmann::json> lines;
  ASSERT_TRUE(WaitUntil([&] { return (lines = LogLines("rpc finished")).size() == 2; }, 5s));
  EXPECT_EQ(lines[0]["cache"], "miss");
  EXPECT_EQ(lines[0]["attempts"], 1);
  EXPECT_EQ(lines[1]["cache"], "hit");
  EXPECT_EQ(lines[1]["attempts"], 0);
  std::vector<tracing::Span> spans;
  // miss: server + client span; hit: the server span alone.
  ASSERT_TRUE(WaitUntil([&] { return (spans = sink_.spans()).size() == 3; }, 5s));
  EXPECT_EQ(Attribute(spans.back(), "inspection.cache"), "hit");
  EXPECT_EQ(spans.back().kind, tracing::SpanKind::kServer);
}

TEST_F(TraceContextTest, ACallWithoutTraceparentStillSendsAValidOne) {
  VendorReplies(200, kTokenBody);
  auto context = Context();
  std::string trace_header;
  ASSERT_TRUE(GetStatus(context.get(), &trace_header).ok());
  const auto parsed = tracing::ParseTraceparent(HeaderOf(OnlyRequest(), "traceparent"));
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(tracing::Hex(parsed->trace_id), trace_header);
  EXPECT_EQ(HeaderOf(OnlyRequest(), "tracestate"), "");
  std::vector<nlohmann::json> lines;
  ASSERT_TRUE(WaitUntil([&] { return !(lines = LogLines("rpc finished")).empty(); }, 5s));
  EXPECT_EQ(lines[0]["trace_id"], trace_header);
  std::vector<tracing::Span> spans;
  ASSERT_TRUE(WaitUntil([&] { return (spans = sink_.spans()).size() == 2; }, 5s));
  for (const tracing::Span& span : spans) EXPECT_EQ(tracing::Hex(span.trace_id), trace_header);
}

TEST_F(TraceContextTest, AMalformedTraceparentStartsANewTraceAndDropsTracestate) {
  VendorReplies(200, kTokenBody);
  auto context = Context();
  // Upper-case hex is invalid in version 00.
  context->AddMetadata("traceparent", "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01");
  context->AddMetadata("tracestate", "congo=t61rcWkgMzE");
  std::string trace_header;
  ASSERT_TRUE(GetStatus(context.get(), &trace_header).ok());
  EXPECT_NE(trace_header, kCallerTrace);
  EXPECT_EQ(trace_header.size(), 32u);
  const RecordedRequest sent = OnlyRequest();
  const auto parsed = tracing::ParseTraceparent(HeaderOf(sent, "traceparent"));
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(tracing::Hex(parsed->trace_id), trace_header);
  EXPECT_EQ(HeaderOf(sent, "tracestate"), "");
}

TEST_F(TraceContextTest, EachRetryIsAChildSpanWithItsOwnIdAndAttemptNumber) {
  // GetTokenStatus is safe: a 503 is retried.
  std::atomic<int> calls{0};
  vendor_.SetHandler([&calls](const RecordedRequest&) {
    ScriptedResponse response;
    response.status = calls++ == 0 ? 503 : 200;
    response.body = response.status == 200 ? kTokenBody : R"({"message": "busy"})";
    return response;
  });
  auto context = Context();
  context->AddMetadata("traceparent", kTraceparent);
  std::string trace_header;
  ASSERT_TRUE(GetStatus(context.get(), &trace_header).ok());
  const auto requests = vendor_.Requests();
  ASSERT_EQ(requests.size(), 2u);
  const auto first = tracing::ParseTraceparent(HeaderOf(requests[0], "traceparent"));
  const auto second = tracing::ParseTraceparent(HeaderOf(requests[1], "traceparent"));
  ASSERT_TRUE(first.has_value() && second.has_value());
  EXPECT_EQ(tracing::Hex(first->trace_id), kCallerTrace);
  EXPECT_EQ(tracing::Hex(second->trace_id), kCallerTrace);
  EXPECT_NE(first->parent_id, second->parent_id);

  std::vector<tracing::Span> spans;
  ASSERT_TRUE(WaitUntil([&] { return (spans = sink_.spans()).size() == 3; }, 5s));
  std::vector<std::string> attempts;
  for (const tracing::Span& span : spans) {
    if (span.kind == tracing::SpanKind::kClient)
      attempts.push_back(Attribute(span, "inspection.attempt"));
  }
  EXPECT_EQ(attempts, (std::vector<std::string>{"1", "2"}));
  std::vector<nlohmann::json> lines;
  ASSERT_TRUE(WaitUntil([&] { return !(lines = LogLines("rpc finished")).empty(); }, 5s));
  EXPECT_EQ(lines[0]["attempts"], 2);
}

TEST_F(TraceContextTest, AnUnsampledTraceIsPropagatedButNotRecorded) {
  VendorReplies(200, kTokenBody);
  auto context = Context();
  context->AddMetadata("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00");
  std::string trace_header;
  ASSERT_TRUE(GetStatus(context.get(), &trace_header).ok());
  const auto parsed = tracing::ParseTraceparent(HeaderOf(OnlyRequest(), "traceparent"));
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(tracing::Hex(parsed->trace_id), kCallerTrace);
  EXPECT_EQ(parsed->flags, 0);
  std::vector<nlohmann::json> lines;
  ASSERT_TRUE(WaitUntil([&] { return !(lines = LogLines("rpc finished")).empty(); }, 5s));
  EXPECT_EQ(lines[0]["trace_id"], kCallerTrace);
  EXPECT_TRUE(sink_.spans().empty());
}

}  // namespace
}  // namespace inspection::testing
