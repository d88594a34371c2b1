// Issue 17 end to end: the gateway in front of the in-process sandbox recovers damage
// results whose createReport webhook is lost (the sandbox's `drop` webhook fault), runs
// without webhooks at all (webhook-less mode), survives kill -9 with overdue work, and
// shares the polls between two replicas on one Redis.
#include <signal.h>

#include <httplib.h>

#include <memory>
#include <string>
#include <vector>

#include <google/protobuf/util/json_util.h>

#include "adapters/eventlog/work_ledger.h"
#include "gateway/version/version.h"
#include "inspection/v1/event.grpc.pb.h"
#include "sandbox/emulator/sandbox_server.h"
#include "tests/integration/gateway_fixture.h"
#include "tests/integration/sandbox_helpers.h"
#include "tests/support/gateway_binary.h"
#include "tests/support/redis_server.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"
#include "tests/support/wait.h"

namespace inspection::testing {
namespace {

constexpr char kWebhookKey[] = "reconcile-webhook-key";
constexpr auto kDeadline = std::chrono::seconds(30);

nlohmann::json PayloadOf(const v1::Event& event) {
  std::string json;
  EXPECT_TRUE(google::protobuf::util::MessageToJsonString(event.payload(), &json).ok());
  return nlohmann::json::parse(json);
}

class ReconcileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto sandbox = sandbox::SandboxServer::Start(sandbox::SandboxOptions{});
    ASSERT_TRUE(sandbox.ok()) << sandbox.status();
    sandbox_ = std::move(*sandbox);
  }

  // A gateway on the sandbox with short reconcile intervals. `webhooks`: a receiver that
  // the sandbox delivers to; otherwise no webhook key (webhook-less mode).
  std::unique_ptr<server::GatewayServer> StartGateway(
      bool webhooks, std::function<void(server::GatewayServerOptions&)> tweak = nullptr) {
    server::GatewayServerOptions options;
    options.grpc_addr = "127.0.0.1:0";
    options.vendor.base_url = sandbox_->BaseUrl();
    options.vendor.api_key = sandbox::kDefaultSandboxApiKey;
    options.webapp_url = sandbox_->WebappUrl();
    options.event_log_url = "sqlite:" + temp_.File(absl::StrCat("events-", ++starts_, ".db"));
    options.admin_port = 0;
    if (webhooks) {
      options.webhook.host = "127.0.0.1";
      options.webhook.port = 0;
      options.webhook.current_key = kWebhookKey;
    }
    reconcile::ReconcilerOptions& r = options.reconcile.reconciler;
    r.after = absl::Milliseconds(300);
    r.interval = absl::Milliseconds(100);
    r.max_interval = absl::Milliseconds(200);
    r.scan_interval = absl::Milliseconds(20);
    r.lease = absl::Seconds(1);
    if (tweak) tweak(options);
    auto gateway = server::GatewayServer::Start(std::move(options));
    EXPECT_TRUE(gateway.ok()) << gateway.status();
    if (!gateway.ok()) return nullptr;
    if (webhooks) {
      sandbox_->ConfigureWebhook(
          absl::StrCat("http://127.0.0.1:", (*gateway)->webhook_port(), "/webhooks/v2"),
          kWebhookKey, {"newInspection", "detectionFinished", "createReport"});
    }
    return std::move(*gateway);
  }

  void AddFault(const std::string& json) {
    auto rules = sandbox::ParseFaultRules(nlohmann::json::parse(json));
    ASSERT_TRUE(rules.ok()) << rules.status();
    sandbox_->faults().AddRules(*rules);
  }

  static std::shared_ptr<grpc::Channel> ChannelTo(const server::GatewayServer& gateway) {
    return grpc::CreateChannel(absl::StrCat("127.0.0.1:", gateway.grpc_port()),
                               grpc::InsecureChannelCredentials());
  }

  // Runs StreamDamageResults to its end; returns every message.
  static std::vector<v1::StreamDamageResultsResponse> StreamDamageResults(
      const server::GatewayServer& gateway, const std::string& url, grpc::Status* status) {
    auto stub = v1::DamageService::NewStub(ChannelTo(gateway));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + kDeadline);
    v1::StreamDamageResultsRequest request;
    request.add_urls(url);
    auto reader = stub->StreamDamageResults(&context, request);
    std::vector<v1::StreamDamageResultsResponse> messages;
    v1::StreamDamageResultsResponse message;
    while (reader->Read(&message)) messages.push_back(message);
    *status = reader->Finish();
    return messages;
  }

  int SandboxCalls(const std::string& route) { return VendorCalls(*sandbox_, route); }

  TempDir temp_;
  std::unique_ptr<sandbox::SandboxServer> sandbox_;
  int starts_ = 0;
};

TEST_F(ReconcileTest, ALostCreateReportStillEndsStreamDamageResultsWithTheReport) {
  auto gateway = StartGateway(/*webhooks=*/true);
  ASSERT_NE(gateway, nullptr);
  ASSERT_FALSE(gateway->webhook_less());
  AddFault(R"({"webhook": true, "event": "createReport", "kind": "drop"})");
  CountVendorCalls(*sandbox_, "get_damages_report");

  grpc::Status status;
  const auto messages =
      StreamDamageResults(*gateway, "https://images.example.com/lost/front.jpg", &status);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_GE(messages.size(), 2u);
  const std::string inspection_id = messages.front().submitted().inspection_id();
  ASSERT_FALSE(inspection_id.empty());
  // The last message is the report the gateway recovered by polling, and says so.
  const v1::Event& last = messages.back().event();
  EXPECT_EQ(last.source(), v1::EVENT_SOURCE_RECONCILE);
  EXPECT_EQ(last.event_name_raw(), "damagesReport");
  EXPECT_EQ(last.event_name(), v1::EVENT_NAME_UNSPECIFIED);
  EXPECT_EQ(last.inspection_id(), inspection_id);
  const nlohmann::json payload = PayloadOf(last);
  EXPECT_EQ(payload["source"], "reconcile");
  EXPECT_EQ(payload["cause"], "missed_webhook");
  EXPECT_EQ(payload["inspectionId"], inspection_id);
  EXPECT_TRUE(payload["report"].is_object()) << payload.dump();
  // The webhooks that did arrive came first, marked as webhooks; no createReport.
  for (size_t i = 1; i + 1 < messages.size(); ++i) {
    EXPECT_EQ(messages[i].event().source(), v1::EVENT_SOURCE_WEBHOOK);
    EXPECT_NE(messages[i].event().event_name(), v1::EVENT_NAME_CREATE_REPORT);
  }
  // The sandbox dropped the createReport, and the vendor saw a bounded number of polls:
  // the report is there at the first one.
  bool dropped = false;
  for (const auto& record : sandbox_->webhooks().Log()) {
    if (record.event_name == "createReport") dropped = record.outcome == "injected_drop";
  }
  EXPECT_TRUE(dropped);
  EXPECT_EQ(SandboxCalls("get_damages_report"), 1);
  // The reconciler counts the recovery once the work ledger has it resolved, just after the
  // append that the stream delivered: wait for it rather than race it.
  EXPECT_TRUE(WaitUntil([&] { return gateway->reconciler()->stats().recovered == 1; },
                        std::chrono::seconds(10)))
      << "recovered: " << gateway->reconciler()->stats().recovered;

  // The metrics say results are being recovered by polling (webhooks are being lost).
  httplib::Client admin("127.0.0.1", gateway->admin_port());
  auto scrape = admin.Get("/metrics");
  ASSERT_TRUE(scrape);
  EXPECT_EQ(PrometheusSample(scrape->body,
                             R"(inspection_reconcile_recovered_total{cause="missed_webhook"})"),
            1);
  EXPECT_EQ(
      PrometheusSample(scrape->body, R"(inspection_reconcile_polls_total{kind="inspection"})"), 1);
  // And which build is running.
  EXPECT_EQ(
      PrometheusSample(scrape->body, absl::StrCat(R"(inspection_gateway_build_info{revision=")",
                                                  version::Revision(), R"(",version=")",
                                                  version::Version(), R"("})")),
      1);

  // The createReport that arrives late is still stored and streamed, and tells itself
  // apart from the recovered report.
  httplib::Client webhook("127.0.0.1", gateway->webhook_port());
  const nlohmann::json late = {{"event", "createReport"}, {"inspectionId", inspection_id}};
  auto delivered =
      webhook.Post("/webhooks/v2", {{"x-api-key", kWebhookKey}}, late.dump(), "application/json");
  ASSERT_TRUE(delivered);
  EXPECT_EQ(delivered->status, 200);
  auto events = v1::EventService::NewStub(ChannelTo(*gateway));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + kDeadline);
  v1::SubscribeRequest subscribe;
  subscribe.set_from_start(true);
  subscribe.set_inspection_id(inspection_id);
  auto reader = events->Subscribe(&context, subscribe);
  std::vector<v1::Event> seen;
  v1::SubscribeResponse response;
  while (reader->Read(&response)) {
    seen.push_back(response.event());
    if (response.event().event_name() == v1::EVENT_NAME_CREATE_REPORT) break;
  }
  context.TryCancel();
  reader->Finish();
  ASSERT_GE(seen.size(), 2u);
  EXPECT_EQ(seen[seen.size() - 2].source(), v1::EVENT_SOURCE_RECONCILE);
  EXPECT_EQ(seen.back().source(), v1::EVENT_SOURCE_WEBHOOK);
  EXPECT_EQ(seen.back().event_name(), v1::EVENT_NAME_CREATE_REPORT);
}

TEST_F(ReconcileTest, AWebhookThatArrivesResolvesTheInspectionWithoutAPoll) {
  auto ledger = eventlog::OpenSqliteWorkLedger(temp_.File("work.db"));
  ASSERT_TRUE(ledger.ok()) << ledger.status();
  std::shared_ptr<eventlog::WorkLedger> shared(std::move(*ledger));
  auto gateway = StartGateway(/*webhooks=*/true, [&](server::GatewayServerOptions& options) {
    options.reconcile.ledger = shared;
    options.reconcile.reconciler.after = absl::Seconds(20);
  });
  ASSERT_NE(gateway, nullptr);
  CountVendorCalls(*sandbox_, "get_damages_report");
  grpc::Status status;
  const auto messages =
      StreamDamageResults(*gateway, "https://images.example.com/kept/front.jpg", &status);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_FALSE(messages.empty());
  EXPECT_EQ(messages.back().event().event_name(), v1::EVENT_NAME_CREATE_REPORT);
  EXPECT_EQ(messages.back().event().source(), v1::EVENT_SOURCE_WEBHOOK);
  // Recorded, then resolved by the createReport: nothing is left to poll.
  EXPECT_TRUE(WaitUntil(
      [&] {
        auto pending = shared->CountPending(INT64_MAX);
        return pending.ok() && *pending == 0;
      },
      kDeadline));
  EXPECT_EQ(SandboxCalls("get_damages_report"), 0);
  EXPECT_EQ(gateway->reconciler()->stats().polls, 0);
}

// No webhook receiver, no public endpoint: Subscribe still sees the results of what this
// gateway started, a damage detection and a self-inspection token walked to completion.
TEST_F(ReconcileTest, WebhookLessModeFeedsSubscribeByPolling) {
  auto gateway = StartGateway(/*webhooks=*/false);
  ASSERT_NE(gateway, nullptr);
  ASSERT_TRUE(gateway->webhook_less());
  EXPECT_EQ(gateway->webhook_port(), 0) << "no receiver in webhook-less mode";
  auto channel = ChannelTo(*gateway);
  auto events = v1::EventService::NewStub(channel);
  grpc::ClientContext subscribe_context;
  subscribe_context.set_deadline(std::chrono::system_clock::now() + kDeadline);
  v1::SubscribeRequest subscribe;
  subscribe.set_from_start(true);
  auto subscription = events->Subscribe(&subscribe_context, subscribe);

  v1::DetectDamageRequest detect;
  detect.add_urls("https://images.example.com/pollonly/front.jpg");
  v1::DetectDamageResponse detected;
  auto damage = v1::DamageService::NewStub(channel);
  ASSERT_TRUE(damage->DetectDamage(GatewayTest::Context().get(), detect, &detected).ok());
  ASSERT_FALSE(detected.inspection_id().empty());

  v1::SubscribeResponse received;
  ASSERT_TRUE(subscription->Read(&received));
  EXPECT_EQ(received.event().inspection_id(), detected.inspection_id());
  EXPECT_EQ(received.event().source(), v1::EVENT_SOURCE_RECONCILE);
  EXPECT_EQ(PayloadOf(received.event())["cause"], "webhook_less");

  // A token: created through the gateway, walked to completion by the "customer".
  auto tokens = v1::TokenService::NewStub(channel);
  v1::CreateTokenResponse created;
  ASSERT_TRUE(
      tokens->CreateToken(GatewayTest::Context().get(), ValidTokenRequest(), &created).ok());
  const std::string uid = created.token().uid();
  httplib::Client admin(sandbox_->BaseUrl());
  std::string token_inspection;  // from the token status body the last step answers
  for (const char* step : {"open", "start-shooting", "finish-shooting", "complete"}) {
    auto response =
        admin.Post(absl::StrCat("/_sandbox/tokens/", uid, "/", step), "", "application/json");
    ASSERT_TRUE(response) << step;
    ASSERT_EQ(response->status, 200) << step << ": " << response->body;
    const nlohmann::json status = nlohmann::json::parse(response->body);
    token_inspection = status["token"]["inspectionPtr"].value("id", "");
  }
  ASSERT_FALSE(token_inspection.empty());
  ASSERT_TRUE(subscription->Read(&received));
  EXPECT_EQ(received.event().source(), v1::EVENT_SOURCE_RECONCILE);
  EXPECT_EQ(received.event().inspection_id(), token_inspection);
  EXPECT_GE(gateway->reconciler()->stats().tokens_completed, 1);
  subscribe_context.TryCancel();
  subscription->Finish();
}

// A flood of submissions whose reports all need polling (webhook-less mode): the vendor
// sees no more polls than reconcile.max_polls_per_minute allows (a burst of that many, then
// one per 1/rate), the rest waits as overdue, and an ordinary RPC during the backlog goes
// through.
TEST_F(ReconcileTest, AFloodOfSubmissionsIsPolledWithinTheBudget) {
  constexpr int kSubmissions = 150;
  constexpr int kPerMinute = 30;
  auto gateway = StartGateway(/*webhooks=*/false, [](server::GatewayServerOptions& options) {
    options.reconcile.reconciler.max_polls_per_minute = kPerMinute;
    options.reconcile.reconciler.interval = absl::Milliseconds(10);
  });
  ASSERT_NE(gateway, nullptr);
  CountVendorCalls(*sandbox_, "get_damages_report");
  const absl::Time started = absl::Now();
  auto damage = v1::DamageService::NewStub(ChannelTo(*gateway));
  for (int i = 0; i < kSubmissions; ++i) {
    v1::DetectDamageRequest detect;
    detect.add_urls(absl::StrCat("https://images.example.com/flood/", i, ".jpg"));
    v1::DetectDamageResponse detected;
    ASSERT_TRUE(damage->DetectDamage(GatewayTest::Context().get(), detect, &detected).ok()) << i;
  }
  // The backlog builds up behind the budget.
  ASSERT_TRUE(WaitUntil(
      [&] { return gateway->reconciler()->stats().overdue >= kSubmissions - kPerMinute - 5; },
      kDeadline))
      << "overdue " << gateway->reconciler()->stats().overdue;
  // An ordinary call still goes through meanwhile.
  v1::DetectDamageRequest detect;
  detect.add_urls("https://images.example.com/flood/legit.jpg");
  v1::DetectDamageResponse detected;
  EXPECT_TRUE(damage->DetectDamage(GatewayTest::Context().get(), detect, &detected).ok());
  const double minutes = absl::ToDoubleMinutes(absl::Now() - started);
  const int allowed = kPerMinute + static_cast<int>(minutes * kPerMinute) + 1;
  const int polled = SandboxCalls("get_damages_report");
  EXPECT_GE(polled, kPerMinute) << "the burst is used";
  EXPECT_LE(polled, allowed) << "within the budget after " << minutes << " min";
  EXPECT_EQ(gateway->reconciler()->stats().polls, polled);
  EXPECT_GT(gateway->reconciler()->stats().budget_limited, 0);
}

// Two replicas on one Redis (event log and work ledger): an overdue inspection is polled by
// one of them at a time; when that one goes away mid-poll, the other finishes the job after
// the lease.
TEST_F(ReconcileTest, TwoReplicasOnOneRedisShareTheWorkAndOneFinishesWhatTheOtherLeft) {
  std::string error;
  auto redis = RedisServer::Start(&error);
  if (redis == nullptr) GTEST_SKIP() << "redis-server: " << error;
  const std::string url = redis->Url("/0?stream=reconcile");
  auto redis_gateway = [&](server::GatewayServerOptions& options) {
    options.event_log_url = url;
    options.reconcile.reconciler.lease = absl::Milliseconds(700);
  };
  // The first poll hangs (the vendor holds it for 5 s); the replica that made it is then
  // shut down with the item still claimed.
  AddFault(R"({"route": "get_damages_report", "kind": "latency", "latency_ms": 5000,
               "times": 1})");
  auto first = StartGateway(/*webhooks=*/true, redis_gateway);
  auto second = StartGateway(/*webhooks=*/true, redis_gateway);
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);
  AddFault(R"({"webhook": true, "event": "createReport", "kind": "drop"})");

  v1::DetectDamageRequest detect;
  detect.add_urls("https://images.example.com/replicas/front.jpg");
  v1::DetectDamageResponse detected;
  ASSERT_TRUE(v1::DamageService::NewStub(ChannelTo(*first))
                  ->DetectDamage(GatewayTest::Context().get(), detect, &detected)
                  .ok());
  // One of the two claims it and hangs at the vendor; the other does not poll it meanwhile.
  ASSERT_TRUE(WaitUntil(
      [&] { return first->reconciler()->stats().polls + second->reconciler()->stats().polls >= 1; },
      kDeadline));
  server::GatewayServer* holder =
      first->reconciler()->stats().polls > 0 ? first.get() : second.get();
  server::GatewayServer* other = holder == first.get() ? second.get() : first.get();
  EXPECT_EQ(other->reconciler()->stats().polls, 0);
  if (holder == first.get()) {
    first.reset();
  } else {
    second.reset();
  }
  // The other replica takes it over once the lease ends, and the report is recovered once.
  ASSERT_TRUE(WaitUntil([&] { return other->reconciler()->stats().recovered == 1; }, kDeadline));
  EXPECT_EQ(other->reconciler()->stats().polls, 1);
  auto read = other->event_log().ReadAfter("", 100);
  ASSERT_TRUE(read.ok());
  int reports = 0;
  for (const auto& stored : *read) {
    if (stored.event.event_name == "damagesReport") {
      ++reports;
      EXPECT_EQ(stored.event.inspection_id, detected.inspection_id());
    }
  }
  EXPECT_EQ(reports, 1);
}

// kill -9 a gateway mid-poll of an overdue inspection: after a restart the inspection is
// still reconciled from the SQLite work ledger beside the event log.
TEST_F(ReconcileTest, KillNineMidPollAndTheRestartedGatewayStillReconciles) {
  // The first poll hangs at the vendor, so the gateway is killed with the item claimed.
  AddFault(R"({"route": "get_damages_report", "kind": "latency", "latency_ms": 5000,
               "times": 1})");
  const std::string events_file = temp_.File("killed-events.db");
  auto start = [&] {
    std::vector<std::string> argv =
        LoopbackGatewayArgv(GATEWAY_BINARY, sandbox_->BaseUrl(), events_file);
    // The shortest lease allowed: longer than a poll's 10 s deadline. The restarted
    // gateway waits for it to end.
    for (const char* flag : {"--webhook-mode=poll", "--reconcile-interval-ms=200",
                             "--reconcile-lease-ms=10001", "--reconcile-scan-interval-ms=20"}) {
      argv.push_back(flag);
    }
    argv.push_back("--webapp-url=" + sandbox_->WebappUrl());
    return std::make_unique<Subprocess>(
        argv, std::vector<std::string>{
                  absl::StrCat("INSPECTION_API_KEY=", sandbox::kDefaultSandboxApiKey)});
  };
  auto killed = start();
  ServingPorts ports = WaitUntilServing(*killed, kDeadline);
  ASSERT_GT(ports.grpc, 0) << killed->output();
  auto channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", ports.grpc),
                                     grpc::InsecureChannelCredentials());
  v1::DetectDamageRequest detect;
  detect.add_urls("https://images.example.com/killed/front.jpg");
  v1::DetectDamageResponse detected;
  ASSERT_TRUE(v1::DamageService::NewStub(channel)
                  ->DetectDamage(GatewayTest::Context().get(), detect, &detected)
                  .ok());
  // Wait until its poll is held at the vendor (the one-shot latency rule has fired).
  ASSERT_TRUE(WaitUntil(
      [&] {
        for (const auto& rule : sandbox_->faults().Rules()) {
          if (rule.route == "get_damages_report" && rule.times != 0) return false;
        }
        return true;
      },
      kDeadline));
  ASSERT_NE(killed->Stop(SIGKILL, kDeadline), -1);
  killed.reset();
  {
    auto ledger = eventlog::OpenSqliteWorkLedger(events_file + ".work");
    ASSERT_TRUE(ledger.ok()) << ledger.status();
    auto pending = (*ledger)->CountPending(INT64_MAX);
    ASSERT_TRUE(pending.ok());
    EXPECT_EQ(*pending, 1) << "the killed gateway's item is still recorded";
  }

  // The restarted gateway claims it once the dead one's lease ends, and the recovered
  // report reaches a subscriber.
  auto restarted = start();
  ports = WaitUntilServing(*restarted, kDeadline);
  ASSERT_GT(ports.grpc, 0) << restarted->output();
  channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", ports.grpc),
                                grpc::InsecureChannelCredentials());
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + kDeadline);
  v1::SubscribeRequest subscribe;
  subscribe.set_from_start(true);
  subscribe.set_inspection_id(detected.inspection_id());
  auto reader = v1::EventService::NewStub(channel)->Subscribe(&context, subscribe);
  v1::SubscribeResponse received;
  ASSERT_TRUE(reader->Read(&received)) << restarted->output();
  EXPECT_EQ(received.event().source(), v1::EVENT_SOURCE_RECONCILE);
  EXPECT_EQ(received.event().inspection_id(), detected.inspection_id());
  context.TryCancel();
  reader->Finish();
  restarted->Stop(SIGTERM, kDeadline);
}

}  // namespace
}  // namespace inspection::testing
