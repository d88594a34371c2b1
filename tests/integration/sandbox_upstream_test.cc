// The gateway in front of the in-process sandbox: behaviours that need a stateful
// vendor with fault injection.
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "adapters/vendor/event_config_mapper.h"
#include "gateway/server/webhook_registration.h"
#include "google/rpc/error_details.pb.h"
#include "inspection/v1/event.grpc.pb.h"
#include "sandbox/emulator/sandbox_server.h"
#include "tests/integration/gateway_fixture.h"
#include "tests/integration/sandbox_helpers.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"
#include "tests/support/wait.h"

namespace inspection::testing {
namespace {

constexpr char kWebhookKey[] = "gateway-webhook-key";

class SandboxUpstreamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto sandbox = sandbox::SandboxServer::Start(sandbox::SandboxOptions{});
    ASSERT_TRUE(sandbox.ok()) << sandbox.status();
    sandbox_ = std::move(*sandbox);
    StartGateway();
  }

  void StartGateway(std::function<void(server::GatewayServerOptions&)> tweak = nullptr) {
    gateway_.reset();
    server::GatewayServerOptions options;
    options.grpc_addr = "127.0.0.1:0";
    options.vendor.base_url = sandbox_->BaseUrl();
    options.vendor.api_key = sandbox::kDefaultSandboxApiKey;
    options.webapp_url = sandbox_->WebappUrl();
    options.event_log_url = "sqlite:" + temp_.File("events.db");
    options.webhook.host = "127.0.0.1";
    options.webhook.port = 0;
    options.webhook.current_key = kWebhookKey;
    options.token_watch.interval = absl::Milliseconds(20);
    options.admin_port = 0;
    options.event_log_url = "sqlite:" + temp_.File(absl::StrCat("events-", ++starts_, ".db"));
    if (tweak) tweak(options);
    auto gateway = server::GatewayServer::Start(std::move(options));
    ASSERT_TRUE(gateway.ok()) << gateway.status();
    gateway_ = std::move(*gateway);
    auto channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", gateway_->grpc_port()),
                                       grpc::InsecureChannelCredentials());
    token_ = v1::TokenService::NewStub(channel);
    event_config_ = v1::EventConfigService::NewStub(channel);
    damage_ = v1::DamageService::NewStub(channel);
    events_ = v1::EventService::NewStub(channel);
    // The sandbox delivers its webhooks to this gateway, as the vendor would.
    sandbox_->ConfigureWebhook(
        absl::StrCat("http://127.0.0.1:", gateway_->webhook_port(), "/webhooks/v2"), kWebhookKey,
        {"newInspection", "detectionFinished", "createReport", "tradeinVehicle"});
    image_ = v1::ImageService::NewStub(channel);
  }

  void AddFault(const std::string& json) {
    auto rules = sandbox::ParseFaultRules(nlohmann::json::parse(json));
    ASSERT_TRUE(rules.ok()) << rules.status();
    sandbox_->faults().AddRules(*rules);
  }

  grpc::Status AssessQuality(
      int timeout_ms = 10000,
      const std::string& url = "https://images.example.com/retry/front.jpg") {
    v1::AssessQualityRequest request;
    request.set_url(url);
    v1::AssessQualityResponse response;
    return image_->AssessQuality(GatewayTest::Context(timeout_ms).get(), request, &response);
  }

  void Admin(const std::string& path) {
    httplib::Client client(sandbox_->BaseUrl());
    auto response = client.Post(path.c_str(), "", "application/json");
    ASSERT_TRUE(response) << path;
    ASSERT_EQ(response->status, 200) << path << ": " << response->body;
  }

  nlohmann::json SandboxState() { return testing::SandboxState(*sandbox_); }

  TempDir temp_;
  std::unique_ptr<sandbox::SandboxServer> sandbox_;
  std::unique_ptr<server::GatewayServer> gateway_;
  std::unique_ptr<v1::TokenService::Stub> token_;
  std::unique_ptr<v1::EventConfigService::Stub> event_config_;
  std::unique_ptr<v1::DamageService::Stub> damage_;
  std::unique_ptr<v1::EventService::Stub> events_;
  std::unique_ptr<v1::ImageService::Stub> image_;
  int starts_ = 0;
};

TEST_F(SandboxUpstreamTest, ResetOnAWarmConnectionNeverCreatesATokenBehindTheCallersBack) {
  // Warm a keep-alive connection to the vendor with a safe call.
  v1::GetWebhookConfigResponse config;
  ASSERT_TRUE(
      event_config_
          ->GetWebhookConfig(GatewayTest::Context().get(), v1::GetWebhookConfigRequest(), &config)
          .ok());
  // The vendor resets the next token creation once. A client that reused the warm
  // connection would see "connection died before any answer" and silently send the
  // POST again, creating a token the caller was told failed.
  sandbox_->faults().AddRules(*sandbox::ParseFaultRules(
      nlohmann::json::parse(R"({"route": "create_token", "kind": "reset", "times": 1})")));
  v1::CreateTokenResponse response;
  auto keyed = ValidTokenRequest();
  keyed.set_idempotency_key("order-reset-1");
  grpc::Status status = token_->CreateToken(GatewayTest::Context().get(), keyed, &response);
  // The request may have reached the vendor and no answer came back: not UNAVAILABLE,
  // which retry policies would send again, but UNKNOWN with the guidance.
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNKNOWN) << status.error_message();
  EXPECT_EQ(GatewayTest::ErrorInfoOf(status).reason(), "OUTCOME_UNKNOWN");
  EXPECT_EQ(GatewayTest::ErrorInfoOf(status).metadata().at("cause"), "VENDOR_CONNECTION_LOST");
  EXPECT_NE(status.error_message().find("same idempotency key"), std::string::npos);
  nlohmann::json state = SandboxState();
  ASSERT_TRUE(state.contains("tokens")) << state.dump();
  EXPECT_EQ(state["tokens"].size(), 0u) << "the failed creation reached the vendor twice";
  // Repeated with the same key: the same answer, and no second call (the reset fires once,
  // so a call that reached the vendor again would have created a token).
  grpc::Status repeated = token_->CreateToken(GatewayTest::Context().get(), keyed, &response);
  EXPECT_EQ(repeated.error_code(), grpc::StatusCode::UNKNOWN);
  EXPECT_EQ(GatewayTest::ErrorInfoOf(repeated).reason(), "OUTCOME_UNKNOWN");
  EXPECT_EQ(SandboxState()["tokens"].size(), 0u) << "a repeat with the key created a token";

  // The next creation goes through: exactly one token exists.
  ASSERT_TRUE(
      token_->CreateToken(GatewayTest::Context().get(), ValidTokenRequest(), &response).ok());
  EXPECT_EQ(SandboxState()["tokens"].size(), 1u);
}

TEST_F(SandboxUpstreamTest, SandboxValidationErrorsReachTheCallerWithTheVendorBody) {
  // A request the gateway accepts but the vendor rejects (rules the spec does not state
  // exist at a real vendor): the vendor's 400 and its body reach the caller.
  sandbox_->faults().AddRules(*sandbox::ParseFaultRules(nlohmann::json::parse(
      R"({"route": "create_token", "kind": "error", "status": 400,
          "body": "{\"error\": \"invalid_request\", \"fields\": [{\"field\": \"customer.email\"}]}",
          "times": 1})")));
  v1::CreateTokenResponse response;
  grpc::Status status =
      token_->CreateToken(GatewayTest::Context().get(), ValidTokenRequest(), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  auto info = GatewayTest::ErrorInfoOf(status);
  EXPECT_EQ(info.reason(), "VENDOR_HTTP_ERROR");
  EXPECT_NE(info.metadata().at("vendor_body").find("customer.email"), std::string::npos);
}

TEST_F(SandboxUpstreamTest, IdempotencyKeysReplayRejectMismatchesAndJoinConcurrentDuplicates) {
  // Replay: the second call with the same key returns the first token, no new one.
  auto request = ValidTokenRequest();
  request.set_idempotency_key("order-1");
  v1::CreateTokenResponse first, second;
  ASSERT_TRUE(token_->CreateToken(GatewayTest::Context().get(), request, &first).ok());
  grpc::ClientContext replay_context;
  ASSERT_TRUE(token_->CreateToken(&replay_context, request, &second).ok());
  EXPECT_EQ(second.token().uid(), first.token().uid());
  EXPECT_EQ(second.customer_url(), first.customer_url());
  auto replayed = replay_context.GetServerInitialMetadata().find("idempotency-replayed");
  ASSERT_NE(replayed, replay_context.GetServerInitialMetadata().end());
  EXPECT_EQ(replayed->second, "true");
  EXPECT_EQ(SandboxState()["tokens"].size(), 1u);

  // The same key with other parameters is rejected, naming the key.
  auto other = request;
  other.set_validity(30);
  v1::CreateTokenResponse rejected;
  grpc::Status mismatch = token_->CreateToken(GatewayTest::Context().get(), other, &rejected);
  EXPECT_EQ(mismatch.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(GatewayTest::BadRequestOf(mismatch).field_violations(0).field(), "idempotency_key");

  // Concurrent duplicates (the vendor is slow) wait for the first: one token in total.
  sandbox_->faults().AddRules(*sandbox::ParseFaultRules(
      nlohmann::json::parse(R"({"route": "create_token", "kind": "latency", "latency_ms": 300})")));
  auto concurrent = ValidTokenRequest();
  concurrent.set_idempotency_key("order-2");
  constexpr int kCalls = 8;
  std::vector<std::thread> threads;
  std::vector<std::string> uids(kCalls);
  std::atomic<int> ok{0};
  for (int i = 0; i < kCalls; ++i) {
    threads.emplace_back([&, i] {
      v1::CreateTokenResponse response;
      if (token_->CreateToken(GatewayTest::Context().get(), concurrent, &response).ok()) {
        ++ok;
        uids[i] = response.token().uid();
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(ok.load(), kCalls);
  for (const auto& uid : uids) EXPECT_EQ(uid, uids[0]);
  EXPECT_EQ(SandboxState()["tokens"].size(), 2u);

  // The key may also come as metadata.
  grpc::ClientContext with_metadata;
  with_metadata.AddMetadata("idempotency-key", "order-1");
  v1::CreateTokenResponse third;
  ASSERT_TRUE(token_->CreateToken(&with_metadata, ValidTokenRequest(), &third).ok());
  EXPECT_EQ(third.token().uid(), first.token().uid());
}

TEST_F(SandboxUpstreamTest, AnIdempotencyKeyOver255CharactersIsRefusedBeforeTheVendor) {
  for (const std::string& key : {std::string(256, 'k'), std::string("has space")}) {
    auto request = ValidTokenRequest();
    request.set_idempotency_key(key);
    v1::CreateTokenResponse response;
    const grpc::Status status =
        token_->CreateToken(GatewayTest::Context().get(), request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << key;
    EXPECT_EQ(GatewayTest::BadRequestOf(status).field_violations(0).field(), "idempotency_key");
  }
  EXPECT_EQ(SandboxState()["tokens"].size(), 0u);
}

// Impatient callers do not open the breaker for everyone (issue 14): twelve calls with a
// 50 ms deadline against a vendor answering in 300 ms time out on their own deadline, and
// a patient caller is served, not refused with CIRCUIT_OPEN. (GetTokenStatus: not cached,
// so every call is its own vendor attempt.)
TEST_F(SandboxUpstreamTest, ImpatientCallersDoNotOpenTheBreakerForThePatientOnes) {
  v1::CreateTokenResponse created;
  ASSERT_TRUE(
      token_->CreateToken(GatewayTest::Context().get(), ValidTokenRequest(), &created).ok());
  AddFault(R"({"route": "get_token_status", "kind": "latency", "latency_ms": 300})");
  for (int i = 0; i < 12; ++i) {
    grpc::ClientContext impatient;
    impatient.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(50));
    v1::GetTokenStatusRequest request;
    request.set_uid(created.token().uid());
    v1::GetTokenStatusResponse response;
    EXPECT_EQ(token_->GetTokenStatus(&impatient, request, &response).error_code(),
              grpc::StatusCode::DEADLINE_EXCEEDED)
        << i;
  }
  grpc::ClientContext patient;
  patient.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::GetTokenStatusRequest request;
  request.set_uid(created.token().uid());
  v1::GetTokenStatusResponse response;
  const grpc::Status status = token_->GetTokenStatus(&patient, request, &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  // Counted apart: every impatient attempt, none against the breaker.
  httplib::Client admin("127.0.0.1", gateway_->admin_port());
  auto metrics = admin.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_NE(
      metrics->body.find(
          R"(inspection_upstream_caller_deadline_timeouts_total{account="default",route="get_token_status"} 12)"),
      std::string::npos);
}

// A cached route: impatient callers that arrive together share one fetch, which runs with
// the route's timeout, not the first caller's 50 ms. Each stops waiting at its own deadline
// (CALLER_DEADLINE_EXCEEDED); the fetch completes and is cached, so the vendor is called
// once and the patient caller after them is answered from the cache.
TEST_F(SandboxUpstreamTest, ImpatientCallersOfOneCachedFetchDoNotFailIt) {
  AddFault(R"({"route": "assess_quality", "kind": "latency", "latency_ms": 300, "times": 100})");
  constexpr int kImpatient = 12;
  std::vector<grpc::Status> statuses(kImpatient);
  std::vector<std::string> cache(kImpatient);
  std::vector<std::thread> threads;
  for (int i = 0; i < kImpatient; ++i) {
    threads.emplace_back([&, i] {
      grpc::ClientContext impatient;
      impatient.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(50));
      v1::AssessQualityRequest request;
      request.set_url("https://images.example.com/shared.jpg");
      v1::AssessQualityResponse response;
      statuses[i] = image_->AssessQuality(&impatient, request, &response);
      if (auto it = impatient.GetServerInitialMetadata().find("x-cache");
          it != impatient.GetServerInitialMetadata().end()) {
        cache[i] = std::string(it->second.data(), it->second.size());
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (int i = 0; i < kImpatient; ++i) {
    // A thread that started after the fetch ended (a loaded machine) is answered from the
    // cache; everyone else runs out of its own time.
    if (statuses[i].ok()) {
      EXPECT_EQ(cache[i], "hit") << i;
    } else {
      EXPECT_EQ(statuses[i].error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << i;
    }
  }
  grpc::ClientContext patient;
  patient.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::AssessQualityRequest request;
  request.set_url("https://images.example.com/shared.jpg");
  v1::AssessQualityResponse response;
  const grpc::Status status = image_->AssessQuality(&patient, request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  auto rules = sandbox_->faults().Rules();
  ASSERT_EQ(rules.size(), 1u);
  EXPECT_EQ(rules[0].times, 99) << "one vendor call for all thirteen callers";

  httplib::Client admin("127.0.0.1", gateway_->admin_port());
  auto metrics = admin.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_NE(
      metrics->body.find(
          R"(inspection_upstream_caller_deadline_timeouts_total{account="default",route="assess_quality"} 0)"),
      std::string::npos)
      << "the shared fetch was never cut by a caller's deadline";
  const int timed_out = static_cast<int>(std::count_if(
      statuses.begin(), statuses.end(), [](const grpc::Status& s) { return !s.ok(); }));
  const std::string waited = absl::StrCat(
      R"(inspection_cache_waiter_deadlines_total{account="default",route="assess_quality"} )",
      timed_out);
  EXPECT_TRUE(WaitUntil(
      [&] {
        auto now = admin.Get("/metrics");
        return now && now->body.find(waited) != std::string::npos;
      },
      std::chrono::seconds(5)))
      << waited;
}

TEST_F(SandboxUpstreamTest, A503TwiceThenSuccessIsOneSuccessfulRpcAfterThreeVendorCalls) {
  AddFault(R"({"route": "assess_quality", "kind": "error", "status": 503, "times": 2})");
  grpc::Status status = AssessQuality();
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_TRUE(sandbox_->faults().Rules().empty()) << "both injected 503s were consumed";
}

TEST_F(SandboxUpstreamTest, A500OnCreateTokenIsNeverRetried) {
  AddFault(R"({"route": "create_token", "kind": "error", "status": 500, "times": 3})");
  v1::CreateTokenResponse response;
  grpc::Status status =
      token_->CreateToken(GatewayTest::Context().get(), ValidTokenRequest(), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
  auto rules = sandbox_->faults().Rules();
  ASSERT_EQ(rules.size(), 1u);
  EXPECT_EQ(rules[0].times, 2) << "exactly one vendor call";
}

TEST_F(SandboxUpstreamTest, ARetryAfterThatFitsIsWaitedOut) {
  AddFault(R"({"route": "assess_quality", "kind": "rate_limit", "retry_after": "1", "times": 1})");
  grpc::Status status = AssessQuality(/*timeout_ms=*/5000);
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_TRUE(sandbox_->faults().Rules().empty());
}

TEST_F(SandboxUpstreamTest, ARetryAfterBeyondTheDeadlineComesBackAsRetryInfoAndPushback) {
  AddFault(R"({"route": "assess_quality", "kind": "rate_limit", "retry_after": "30", "times": 1})");
  v1::AssessQualityRequest request;
  request.set_url("https://images.example.com/retry/front.jpg");
  v1::AssessQualityResponse response;
  auto context = GatewayTest::Context(2000);
  grpc::Status status = image_->AssessQuality(context.get(), request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  google::rpc::Status details;
  ASSERT_TRUE(details.ParseFromString(status.error_details()));
  bool found = false;
  for (const auto& any : details.details()) {
    google::rpc::RetryInfo retry;
    if (any.UnpackTo(&retry)) {
      found = true;
      EXPECT_GE(retry.retry_delay().seconds(), 30);
    }
  }
  EXPECT_TRUE(found);
  auto pushback = context->GetServerTrailingMetadata().find("grpc-retry-pushback-ms");
  ASSERT_NE(pushback, context->GetServerTrailingMetadata().end());
  EXPECT_GE(std::stol(std::string(pushback->second.data(), pushback->second.size())), 30000);
}

TEST_F(SandboxUpstreamTest, TheBreakerOpensFailsFastAndRecovers) {
  StartGateway([](server::GatewayServerOptions& options) {
    options.circuit_breaker.consecutive_failures = 3;
    options.circuit_breaker.open_duration = absl::Milliseconds(300);
    options.retry.backoff.max_attempts = 1;  // count vendor failures one per RPC
  });
  AddFault(R"({"route": "assess_quality", "kind": "error", "status": 500})");
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(AssessQuality().error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(gateway_->circuit_breaker().state(), resilience::CircuitState::kOpen);
  // Open: fails fast without calling the vendor, and says when to come back.
  grpc::Status fast = AssessQuality();
  EXPECT_EQ(fast.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(GatewayTest::ErrorInfoOf(fast).reason(), "CIRCUIT_OPEN");
  // The vendor recovers; after the open period a probe succeeds and closes the breaker.
  sandbox_->faults().Clear();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (gateway_->circuit_breaker().RetryAfter() > absl::ZeroDuration() &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();
  }
  EXPECT_TRUE(AssessQuality().ok());
  EXPECT_EQ(gateway_->circuit_breaker().state(), resilience::CircuitState::kClosed);
}

TEST_F(SandboxUpstreamTest, AnOutageAddsAtMostTheBudgetedRetries) {
  StartGateway([](server::GatewayServerOptions& options) {
    options.circuit_breaker.consecutive_failures = 1000000;  // keep calling the vendor
    options.circuit_breaker.minimum_requests = 1000000;
    options.retry.backoff.max_attempts = 5;
    options.retry.backoff.base = absl::Milliseconds(1);
    options.retry.backoff.cap = absl::Milliseconds(5);
  });
  AddFault(R"({"route": "assess_quality", "kind": "error", "status": 503})");
  // 1,000 distinct requests (distinct URLs: the cache must not coalesce them).
  constexpr int kThreads = 10;
  constexpr int kCalls = 1000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kCalls / kThreads; ++i) {
        AssessQuality(10000, "https://images.example.com/outage/" + std::to_string(t) + "-" +
                                 std::to_string(i) + ".jpg");
      }
    });
  }
  for (auto& thread : threads) thread.join();
  const auto stats = gateway_->retry_budget_stats();
  // Up to 4 retries each would be 240; the budget (20% of in-flight, at least 3) allows
  // far fewer, and every refusal is counted.
  EXPECT_GT(stats.retries_started, 0);
  EXPECT_LT(stats.retries_started, kCalls);  // unbudgeted: up to 4 per call
  std::cout << "outage: " << kCalls << " calls, " << stats.retries_started << " retries, "
            << stats.budget_exhausted << " refused by the budget\n";
  EXPECT_GT(stats.budget_exhausted, 0);
  EXPECT_EQ(stats.requests_in_flight, 0);
  EXPECT_EQ(stats.retries_in_flight, 0);
}

// The value of the first sample of `name` whose labels include every `labels` pair.
double Sample(const std::string& text, const std::string& name,
              const std::vector<std::string>& labels) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(name + "{", 0) != 0 && line.rfind(name + " ", 0) != 0) continue;
    bool all = true;
    for (const auto& label : labels) all = all && line.find(label) != std::string::npos;
    if (all) return std::stod(line.substr(line.rfind(' ') + 1));
  }
  return -1;
}

TEST_F(SandboxUpstreamTest, MetricsCountWhatAScriptedScenarioDid) {
  AddFault(R"({"route": "assess_quality", "kind": "error", "status": 503, "times": 2})");
  ASSERT_TRUE(AssessQuality().ok());  // 2 x 503 then 200: one RPC, three vendor calls
  v1::CreateTokenRequest invalid = ValidTokenRequest();
  invalid.set_validity(0);
  v1::CreateTokenResponse response;
  EXPECT_EQ(token_->CreateToken(GatewayTest::Context().get(), invalid, &response).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);  // rejected before the vendor
  ASSERT_TRUE(AssessQuality().ok());              // the same image again: a cache hit
  // Webhooks: one with a wrong key, one stored (an unknown event name), one duplicate.
  {
    httplib::Client hooks("127.0.0.1", gateway_->webhook_port());
    const std::string body = R"({"event": "someFutureEvent", "inspectionId": "insp-m-1"})";
    auto wrong =
        hooks.Post("/webhooks/v2", {{"x-api-key", "not-the-key"}}, body, "application/json");
    ASSERT_TRUE(wrong);
    EXPECT_EQ(wrong->status, 401);
    for (int i = 0; i < 2; ++i) {
      auto stored =
          hooks.Post("/webhooks/v2", {{"x-api-key", kWebhookKey}}, body, "application/json");
      ASSERT_TRUE(stored);
      EXPECT_EQ(stored->status, 200);
    }
  }
  // A stream that is open while the metrics are read.
  grpc::ClientContext stream_context;
  v1::SubscribeRequest subscribe;
  auto stream = events_->Subscribe(&stream_context, subscribe);
  httplib::Client admin("127.0.0.1", gateway_->admin_port());
  // The stream is counted once the server has taken the call, and the fan-out lag once
  // the hub has dispatched the stored event: both happen asynchronously.
  std::string text;
  ASSERT_TRUE(WaitUntil(
      [&] {
        auto metrics = admin.Get("/metrics");
        if (!metrics || metrics->status != 200) return false;
        text = metrics->body;
        return Sample(text, "inspection_stream_subscribers", {"rpc=\"Subscribe\""}) == 1 &&
               Sample(text, "inspection_stream_fanout_lag_seconds_count", {}) == 1;
      },
      std::chrono::seconds(10)))
      << text;
  const std::string route = "route=\"assess_quality\"";
  EXPECT_EQ(Sample(text, "inspection_upstream_requests_total", {route, "status_class=\"5xx\""}), 2);
  EXPECT_EQ(Sample(text, "inspection_upstream_requests_total", {route, "status_class=\"2xx\""}), 1);
  EXPECT_EQ(Sample(text, "inspection_upstream_retries_total", {route, "reason=\"status_503\""}), 2);
  EXPECT_EQ(Sample(text, "inspection_upstream_attempts_per_call_sum", {route}), 3);
  EXPECT_EQ(Sample(text, "grpc_server_handled_total",
                   {"grpc_method=\"AssessQuality\"", "grpc_code=\"OK\""}),
            2);
  EXPECT_EQ(Sample(text, "grpc_server_handled_total",
                   {"grpc_method=\"CreateToken\"", "grpc_code=\"InvalidArgument\""}),
            1);
  EXPECT_EQ(Sample(text, "inspection_upstream_requests_total",
                   {"route=\"create_token\"", "status_class=\"2xx\""}),
            0);
  EXPECT_EQ(Sample(text, "inspection_cache_hits_total", {route}), 1);
  EXPECT_EQ(Sample(text, "inspection_cache_misses_total", {route}), 1);
  EXPECT_GT(Sample(text, "inspection_cache_bytes", {}), 0);
  EXPECT_EQ(Sample(text, "inspection_webhook_deliveries_total", {"outcome=\"unauthorized\""}), 1);
  EXPECT_EQ(Sample(text, "inspection_webhook_deliveries_total", {"outcome=\"accepted\""}), 1);
  EXPECT_EQ(Sample(text, "inspection_webhook_deliveries_total", {"outcome=\"duplicate\""}), 1);
  EXPECT_EQ(Sample(text, "inspection_webhook_unknown_event_names_total", {}), 1);
  EXPECT_EQ(Sample(text, "inspection_event_log_appends_total", {}), 1);
  EXPECT_EQ(Sample(text, "inspection_event_log_append_errors_total", {}), 0);
  EXPECT_EQ(Sample(text, "inspection_stream_subscribers", {"rpc=\"Subscribe\""}), 1);
  EXPECT_EQ(Sample(text, "inspection_stream_fanout_lag_seconds_count", {}), 1);
  // No secret in the exposition.
  EXPECT_EQ(text.find(sandbox::kDefaultSandboxApiKey), std::string::npos);
  EXPECT_EQ(text.find(kWebhookKey), std::string::npos);

  // The exposition is valid for Prometheus.
  const std::string file = temp_.File("metrics.txt");
  {
    std::ofstream out(file);
    out << text;
  }
  Subprocess promtool({"/bin/sh", "-c", "promtool check metrics < " + file});
  EXPECT_EQ(promtool.Wait(std::chrono::seconds(30)), 0)
      << "promtool (scripts/install-deps.sh installs it): " << promtool.output();

  auto healthz = admin.Get("/healthz");
  ASSERT_TRUE(healthz);
  EXPECT_EQ(healthz->status, 200);
  auto readyz = admin.Get("/readyz");
  ASSERT_TRUE(readyz);
  EXPECT_EQ(readyz->status, 200);
  stream_context.TryCancel();
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::CANCELLED);
}

TEST_F(SandboxUpstreamTest, RegisterWebhookSetsTheUrlKeyAndEvents) {
  ASSERT_TRUE(server::RegisterWebhookAtVendor(gateway_->deps(), "https://gw.example.test/hook",
                                              "registered-key", {"createReport", "chaseUpVehicle"},
                                              std::chrono::seconds(10))
                  .ok());
  v1::GetWebhookConfigResponse config;
  ASSERT_TRUE(
      event_config_
          ->GetWebhookConfig(GatewayTest::Context().get(), v1::GetWebhookConfigRequest(), &config)
          .ok());
  EXPECT_EQ(config.config().webhook_url_v2(), "https://gw.example.test/hook");
  EXPECT_TRUE(config.config().webhook_header_key_set());
  EXPECT_EQ(config.config().webhook_header_key_sha256_prefix(),
            vendor::WebhookKeySha256Prefix("registered-key"));
  EXPECT_EQ(config.ShortDebugString().find("registered-key"), std::string::npos);
  v1::ListEventConfigsResponse events;
  ASSERT_TRUE(
      event_config_
          ->ListEventConfigs(GatewayTest::Context().get(), v1::ListEventConfigsRequest(), &events)
          .ok());
  std::set<std::string> enabled;
  for (const auto& event : events.event_configs()) {
    if (event.webhook()) enabled.insert(event.event_name_raw());
  }
  // newInspection, detectionFinished and tradeinVehicle were enabled by the fixture.
  EXPECT_TRUE(enabled.count("createReport"));
  EXPECT_TRUE(enabled.count("chaseUpVehicle"));
  // A vendor refusal stops registration with the vendor's reason.
  absl::Status refused =
      server::RegisterWebhookAtVendor(gateway_->deps(), "https://gw.example.test/hook", "k",
                                      {"noSuchEvent"}, std::chrono::seconds(10));
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("noSuchEvent"), std::string::npos);
}

// Every vendor call goes through the call core (services::CallEndpoint), whoever makes it:
// StreamDamageResults' submission, WatchTokenStatus' polls and webhook registration each
// reach the observer (the log line, the drift and replay metrics) with their route, origin
// and outcome, as unary RPCs do (issue 15).
class RecordingObserver final : public services::RpcObserver {
 public:
  void OnRpcFinished(const services::RpcRecord& record) override {
    absl::MutexLock lock(&mu_);
    seen_.push_back({std::string(record.origin),
                     record.route == nullptr ? "" : record.route->metric_label, record.code});
  }
  struct Seen {
    std::string origin;
    std::string route;
    grpc::StatusCode code;
  };
  bool Has(const std::string& origin, const std::string& route, grpc::StatusCode code) {
    absl::MutexLock lock(&mu_);
    for (const Seen& seen : seen_) {
      if (seen.origin == origin && seen.route == route && seen.code == code) return true;
    }
    return false;
  }

 private:
  absl::Mutex mu_;
  std::vector<Seen> seen_ ABSL_GUARDED_BY(mu_);
};

TEST_F(SandboxUpstreamTest, EveryVendorCallGoesThroughTheCallCore) {
  RecordingObserver observer;
  StartGateway([&](server::GatewayServerOptions& options) { options.observer = &observer; });

  // A unary RPC.
  v1::CreateTokenResponse created;
  ASSERT_TRUE(
      token_->CreateToken(GatewayTest::Context().get(), ValidTokenRequest(), &created).ok());
  EXPECT_TRUE(observer.Has("rpc", "create_token", grpc::StatusCode::OK));

  // StreamDamageResults' submission.
  {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    v1::StreamDamageResultsRequest request;
    request.add_urls("https://images.example.com/core/front.jpg");
    auto reader = damage_->StreamDamageResults(&context, request);
    v1::StreamDamageResultsResponse message;
    while (reader->Read(&message)) {
    }
    ASSERT_TRUE(reader->Finish().ok());
  }
  EXPECT_TRUE(observer.Has("stream", "detect_damage", grpc::StatusCode::OK));

  // A WatchTokenStatus poll.
  {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    v1::WatchTokenStatusRequest request;
    request.set_uid(created.token().uid());
    auto reader = token_->WatchTokenStatus(&context, request);
    v1::WatchTokenStatusResponse message;
    ASSERT_TRUE(reader->Read(&message));
    context.TryCancel();
    reader->Finish();
  }
  EXPECT_TRUE(observer.Has("token_watch", "get_token_status", grpc::StatusCode::OK));

  // Webhook registration, and its failure with the vendor's reason.
  ASSERT_TRUE(server::RegisterWebhookAtVendor(gateway_->deps(), "https://gw.example.test/core",
                                              "core-key", {"createReport"},
                                              std::chrono::seconds(10))
                  .ok());
  EXPECT_TRUE(observer.Has("startup", "update_webhook_config", grpc::StatusCode::OK));
  EXPECT_TRUE(observer.Has("startup", "update_event_config", grpc::StatusCode::OK));
  EXPECT_FALSE(server::RegisterWebhookAtVendor(gateway_->deps(), "https://gw.example.test/core",
                                               "core-key", {"noSuchEvent"},
                                               std::chrono::seconds(10))
                   .ok());
  EXPECT_TRUE(observer.Has("startup", "update_event_config", grpc::StatusCode::INVALID_ARGUMENT));
  StartGateway();  // the observer goes out of scope before the fixture's gateway
}

TEST_F(SandboxUpstreamTest, StreamDamageResultsEndsAfterTheReport) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  v1::StreamDamageResultsRequest request;
  request.add_urls("https://images.example.com/stream/front.jpg");
  request.add_urls("https://images.example.com/stream/back.jpg");
  auto reader = damage_->StreamDamageResults(&context, request);
  std::vector<v1::StreamDamageResultsResponse> messages;
  v1::StreamDamageResultsResponse message;
  while (reader->Read(&message)) messages.push_back(message);
  grpc::Status status = reader->Finish();
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(messages.size(), 4u);
  ASSERT_TRUE(messages[0].has_submitted());
  const std::string inspection_id = messages[0].submitted().inspection_id();
  EXPECT_FALSE(inspection_id.empty());
  std::vector<std::string> names;
  for (size_t i = 1; i < messages.size(); ++i) {
    ASSERT_TRUE(messages[i].has_event());
    EXPECT_EQ(messages[i].event().inspection_id(), inspection_id);
    names.push_back(messages[i].event().event_name_raw());
  }
  EXPECT_EQ(names,
            (std::vector<std::string>{"newInspection", "detectionFinished", "createReport"}));
  EXPECT_FALSE(messages[3].event().create_report().data_api().data().damages().empty());
}

// An idempotency key on StreamDamageResults (shared with DetectDamage): the repeat
// submits nothing, and gets the first submission and that inspection's events to the end.
TEST_F(SandboxUpstreamTest, StreamDamageResultsWithAKeySubmitsOnceAndReplaysTheInspection) {
  auto stream = [&](const std::string& key, grpc::ClientContext* context,
                    std::vector<v1::StreamDamageResultsResponse>* messages) {
    context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    v1::StreamDamageResultsRequest request;
    request.add_urls("https://images.example.com/keyed/front.jpg");
    request.set_idempotency_key(key);
    auto reader = damage_->StreamDamageResults(context, request);
    v1::StreamDamageResultsResponse message;
    while (reader->Read(&message)) messages->push_back(message);
    return reader->Finish();
  };
  grpc::ClientContext first_context;
  std::vector<v1::StreamDamageResultsResponse> first;
  ASSERT_TRUE(stream("claim-7", &first_context, &first).ok());
  ASSERT_EQ(first.size(), 4u);
  grpc::ClientContext again_context;
  std::vector<v1::StreamDamageResultsResponse> again;
  ASSERT_TRUE(stream("claim-7", &again_context, &again).ok());
  ASSERT_EQ(again.size(), 4u);
  EXPECT_EQ(again[0].submitted().inspection_id(), first[0].submitted().inspection_id());
  for (size_t i = 1; i < again.size(); ++i) {
    EXPECT_EQ(again[i].event().cursor(), first[i].event().cursor()) << i;
  }
  auto replayed = again_context.GetServerInitialMetadata().find("idempotency-replayed");
  ASSERT_NE(replayed, again_context.GetServerInitialMetadata().end());
  EXPECT_EQ(SandboxState()["inspections"].size(), 1u) << "submitted once";

  // DetectDamage with the same key and URLs is the same operation: replayed too.
  v1::DetectDamageRequest detect;
  detect.add_urls("https://images.example.com/keyed/front.jpg");
  detect.set_idempotency_key("claim-7");
  v1::DetectDamageResponse detected;
  ASSERT_TRUE(damage_->DetectDamage(GatewayTest::Context().get(), detect, &detected).ok());
  EXPECT_EQ(detected.inspection_id(), first[0].submitted().inspection_id());
  EXPECT_EQ(SandboxState()["inspections"].size(), 1u);

  // The same key with other URLs is refused.
  grpc::ClientContext other_context;
  other_context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  v1::StreamDamageResultsRequest other;
  other.add_urls("https://images.example.com/keyed/other.jpg");
  other.set_idempotency_key("claim-7");
  auto reader = damage_->StreamDamageResults(&other_context, other);
  v1::StreamDamageResultsResponse ignored;
  EXPECT_FALSE(reader->Read(&ignored));
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(SandboxUpstreamTest, DuplicatedAndReorderedWebhookDeliveriesAreStoredOnce) {
  sandbox_->faults().AddRules(*sandbox::ParseFaultRules(nlohmann::json::parse(
      R"([{"webhook": true, "event": "createReport", "kind": "duplicate"},
          {"webhook": true, "event": "newInspection", "kind": "duplicate"},
          {"webhook": true, "event": "detectionFinished", "kind": "reorder"}])")));
  grpc::ClientContext context;
  v1::StreamDamageResultsRequest request;
  request.add_urls("https://images.example.com/dup/front.jpg");
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  auto reader = damage_->StreamDamageResults(&context, request);
  v1::StreamDamageResultsResponse message;
  std::string inspection_id;
  while (reader->Read(&message)) {
    if (message.has_submitted()) inspection_id = message.submitted().inspection_id();
  }
  ASSERT_TRUE(reader->Finish().ok());
  // Every delivery, the duplicates included, has reached the receiver...
  ASSERT_TRUE(sandbox_->webhooks().WaitIdle(std::chrono::seconds(20)));
  int delivered = 0;
  for (const auto& record : sandbox_->webhooks().Log()) {
    if (record.outcome == "delivered") ++delivered;
  }
  EXPECT_GE(delivered, 5);  // 3 events + 2 duplicates
  // ...and the log holds each event once.
  auto stored = gateway_->event_log().ReadAfter("", 1000);
  ASSERT_TRUE(stored.ok());
  std::map<std::string, int> counts;
  for (const auto& event : *stored) {
    if (event.event.inspection_id == inspection_id) ++counts[event.event.event_name];
  }
  EXPECT_EQ(counts, (std::map<std::string, int>{
                        {"newInspection", 1}, {"detectionFinished", 1}, {"createReport", 1}}));
}

TEST_F(SandboxUpstreamTest, WatchTokenStatusFollowsTheCustomerThroughOnePollPerToken) {
  v1::CreateTokenResponse created;
  ASSERT_TRUE(
      token_->CreateToken(GatewayTest::Context().get(), ValidTokenRequest(), &created).ok());
  const std::string uid = created.token().uid();
  constexpr int kWatchers = 3;
  struct Watcher {
    grpc::ClientContext context;
    std::unique_ptr<grpc::ClientReader<v1::WatchTokenStatusResponse>> reader;
  };
  std::vector<std::unique_ptr<Watcher>> watchers;
  v1::WatchTokenStatusRequest request;
  request.set_uid(uid);
  for (int i = 0; i < kWatchers; ++i) {
    auto watcher = std::make_unique<Watcher>();
    watcher->context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    watcher->reader = token_->WatchTokenStatus(&watcher->context, request);
    watchers.push_back(std::move(watcher));
  }
  // Walk the customer one step at a time, each after every watcher saw the previous one.
  const std::vector<std::pair<std::string, v1::TradeinStatus>> steps = {
      {"", v1::TRADEIN_STATUS_CREATED},
      {"open", v1::TRADEIN_STATUS_OPENED},
      {"start-shooting", v1::TRADEIN_STATUS_SHOOTING},
      {"finish-shooting", v1::TRADEIN_STATUS_PICTURES_TAKEN},
      {"complete", v1::TRADEIN_STATUS_COMPLETED}};
  for (const auto& [step, expected] : steps) {
    if (!step.empty()) Admin("/_sandbox/tokens/" + uid + "/" + step);
    for (auto& watcher : watchers) {
      v1::WatchTokenStatusResponse response;
      ASSERT_TRUE(watcher->reader->Read(&response)) << "waiting for " << step;
      EXPECT_EQ(response.token().tradein_status(), expected) << step;
    }
    // Three watchers, one token: one shared poll loop (until completion ends them all).
    if (expected != v1::TRADEIN_STATUS_COMPLETED) {
      const auto stats = gateway_->token_poller().stats();
      EXPECT_EQ(stats.active_uids, 1u) << step;
      EXPECT_EQ(stats.watchers, static_cast<size_t>(kWatchers)) << step;
    }
  }
  // Completed is final: every stream ends OK.
  for (auto& watcher : watchers) {
    v1::WatchTokenStatusResponse extra;
    EXPECT_FALSE(watcher->reader->Read(&extra));
    EXPECT_TRUE(watcher->reader->Finish().ok());
  }
}

// ---- The response cache in the pipeline (above the retry loop) ----

class CachePipelineTest : public SandboxUpstreamTest {
 protected:
  // Counts vendor calls on `route` (see CountVendorCalls).
  void CountCalls(const std::string& route) { CountVendorCalls(*sandbox_, route); }
  // Vendor calls on `route` since CountCalls (or a slower counting rule's start).
  int VendorCalls(const std::string& route, int start = 100000) {
    return testing::VendorCalls(*sandbox_, route, start);
  }
  grpc::Status GetWebhookConfig(grpc::ClientContext* context,
                                v1::GetWebhookConfigResponse* response) {
    return event_config_->GetWebhookConfig(context, v1::GetWebhookConfigRequest(), response);
  }
  std::unique_ptr<v1::InspectionService::Stub> inspections() {
    return v1::InspectionService::NewStub(grpc::CreateChannel(
        absl::StrCat("127.0.0.1:", gateway_->grpc_port()), grpc::InsecureChannelCredentials()));
  }
  void PostWebhook(const std::string& body) {
    httplib::Client client("127.0.0.1", gateway_->webhook_port());
    auto response =
        client.Post("/webhooks/v2", {{"x-api-key", kWebhookKey}}, body, "application/json");
    ASSERT_TRUE(response);
    ASSERT_EQ(response->status, 200) << response->body;
  }
};

TEST_F(CachePipelineTest, HundredConcurrentIdenticalGetsCauseOneVendorCall) {
  // Slow enough that all 100 arrive while the first is in flight.
  AddFault(R"({"route": "get_webhook_config", "kind": "latency", "latency_ms": 300,
               "times": 1000})");
  constexpr int kCallers = 100;
  std::vector<std::string> how(kCallers);
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kCallers; ++i) {
    threads.emplace_back([&, i] {
      auto context = GatewayTest::Context(10000);
      v1::GetWebhookConfigResponse response;
      if (GetWebhookConfig(context.get(), &response).ok()) ++ok;
      how[i] = ServerHeader(*context, "x-cache");
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(ok.load(), kCallers);
  EXPECT_EQ(VendorCalls("get_webhook_config", 1000), 1);
  std::map<std::string, int> counts;
  for (const auto& h : how) ++counts[h];
  EXPECT_EQ(counts["miss"], 1);
  EXPECT_EQ(counts["miss"] + counts["coalesced"] + counts["hit"], kCallers);
  EXPECT_GT(counts["coalesced"], 0);
  const auto stats = gateway_->cache().fetcher_stats();
  EXPECT_EQ(stats.fetches, 1u);
}

TEST_F(CachePipelineTest, AWriteDropsTheCachedReadAndTheNextReadSeesIt) {
  CountCalls("get_webhook_config");
  v1::GetWebhookConfigResponse before;
  auto first = GatewayTest::Context();
  ASSERT_TRUE(GetWebhookConfig(first.get(), &before).ok());
  EXPECT_EQ(ServerHeader(*first, "x-cache"), "miss");
  auto second = GatewayTest::Context();
  ASSERT_TRUE(GetWebhookConfig(second.get(), &before).ok());
  EXPECT_EQ(ServerHeader(*second, "x-cache"), "hit");
  EXPECT_EQ(VendorCalls("get_webhook_config"), 1);

  v1::UpdateWebhookConfigRequest update;
  update.set_webhook_url_v2("https://changed.example.test/hook");
  update.set_webhook_header_key("changed-key");
  v1::UpdateWebhookConfigResponse updated;
  ASSERT_TRUE(
      event_config_->UpdateWebhookConfig(GatewayTest::Context().get(), update, &updated).ok());

  v1::GetWebhookConfigResponse after;
  auto third = GatewayTest::Context();
  ASSERT_TRUE(GetWebhookConfig(third.get(), &after).ok());
  EXPECT_EQ(ServerHeader(*third, "x-cache"), "miss");
  EXPECT_EQ(after.config().webhook_url_v2(), "https://changed.example.test/hook");
  EXPECT_EQ(VendorCalls("get_webhook_config"), 2);
}

TEST_F(CachePipelineTest, BypassMetadataCallsTheVendorAndRefreshesTheEntry) {
  CountCalls("get_webhook_config");
  v1::GetWebhookConfigResponse response;
  ASSERT_TRUE(GetWebhookConfig(GatewayTest::Context().get(), &response).ok());
  auto bypass = GatewayTest::Context();
  bypass->AddMetadata("cache-control", "no-cache");
  ASSERT_TRUE(GetWebhookConfig(bypass.get(), &response).ok());
  EXPECT_EQ(ServerHeader(*bypass, "x-cache"), "bypass");
  EXPECT_EQ(VendorCalls("get_webhook_config"), 2);
  auto after = GatewayTest::Context();
  ASSERT_TRUE(GetWebhookConfig(after.get(), &response).ok());
  EXPECT_EQ(ServerHeader(*after, "x-cache"), "hit");
  EXPECT_EQ(VendorCalls("get_webhook_config"), 2);
}

TEST_F(CachePipelineTest, AnEventAboutAnInspectionDropsCachedSearchResults) {
  CountCalls("search_inspections");
  auto stub = inspections();
  v1::SearchInspectionsRequest search;
  search.set_license_plate("AB-123-CD");
  search.set_page(1);
  search.set_limit(10);
  v1::SearchInspectionsResponse results;
  grpc::Status first = stub->SearchInspections(GatewayTest::Context().get(), search, &results);
  ASSERT_TRUE(first.ok()) << first.error_message();
  auto cached = GatewayTest::Context();
  ASSERT_TRUE(stub->SearchInspections(cached.get(), search, &results).ok());
  EXPECT_EQ(ServerHeader(*cached, "x-cache"), "hit");
  EXPECT_EQ(VendorCalls("search_inspections"), 1);

  const uint64_t invalidated_before = gateway_->cache().cache_stats().invalidated;
  PostWebhook(R"({"event": "createReport", "inspectionId": "insp-cache-1"})");
  ASSERT_TRUE(
      WaitUntil([&] { return gateway_->cache().cache_stats().invalidated > invalidated_before; },
                std::chrono::seconds(10)))
      << "the hub never handed the event to the cache";

  auto fresh = GatewayTest::Context();
  ASSERT_TRUE(stub->SearchInspections(fresh.get(), search, &results).ok());
  EXPECT_EQ(ServerHeader(*fresh, "x-cache"), "miss");
  EXPECT_EQ(VendorCalls("search_inspections"), 2);
}

TEST_F(CachePipelineTest, StaleIfErrorServesTheOldAnswerAndFlagsIt) {
  absl::Time now = absl::Now();
  absl::Mutex clock_mu;
  StartGateway([&](server::GatewayServerOptions& options) {
    options.cache.stale_if_error = absl::Minutes(10);
    options.retry.clock = [&] {
      absl::MutexLock lock(&clock_mu);
      return now;
    };
  });
  v1::GetWebhookConfigResponse fresh;
  ASSERT_TRUE(GetWebhookConfig(GatewayTest::Context().get(), &fresh).ok());
  {
    absl::MutexLock lock(&clock_mu);
    now += absl::Seconds(31);  // past get_webhook_config's 30 s TTL
  }
  AddFault(R"({"route": "get_webhook_config", "kind": "error", "status": 503})");
  auto stale = GatewayTest::Context(10000);
  v1::GetWebhookConfigResponse served;
  grpc::Status status = GetWebhookConfig(stale.get(), &served);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(ServerHeader(*stale, "x-cache"), "stale");
  EXPECT_FALSE(ServerHeader(*stale, "x-cache-stale-cause").empty());
  EXPECT_EQ(served.config().webhook_url_v2(), fresh.config().webhook_url_v2());
  EXPECT_EQ(gateway_->cache().cache_stats().stale_served, 1u);

  // Past the stale window the vendor's failure reaches the caller.
  {
    absl::MutexLock lock(&clock_mu);
    now += absl::Minutes(11);
  }
  auto too_old = GatewayTest::Context(10000);
  EXPECT_EQ(GetWebhookConfig(too_old.get(), &served).error_code(), grpc::StatusCode::UNAVAILABLE);
  // A 4xx is the vendor's answer about the request: never hidden behind a stale entry.
}

TEST_F(CachePipelineTest, ImageAnalysisCachingHasAnOffSwitch) {
  CountCalls("assess_quality");
  ASSERT_TRUE(AssessQuality().ok());
  ASSERT_TRUE(AssessQuality().ok());
  EXPECT_EQ(VendorCalls("assess_quality"), 1) << "cached by (URL, parameters)";
  ASSERT_TRUE(AssessQuality(10000, "https://images.example.com/retry/other.jpg").ok());
  EXPECT_EQ(VendorCalls("assess_quality"), 2) << "another URL is another entry";

  StartGateway([](server::GatewayServerOptions& options) { options.cache.image_analysis = false; });
  const int before = VendorCalls("assess_quality");
  ASSERT_TRUE(AssessQuality().ok());
  ASSERT_TRUE(AssessQuality().ok());
  EXPECT_EQ(VendorCalls("assess_quality") - before, 2);
}

}  // namespace
}  // namespace inspection::testing
