// Named vendor accounts (config `accounts`, metadata `x-vendor-account`): every call,
// cache entry, idempotency key, breaker, token poll and webhook event stays with its
// account. Two in-process sandboxes play two vendor accounts; a third account shares the
// default account's sandbox with another API key.
#include <httplib.h>

#include <map>
#include <string>
#include <thread>
#include <vector>

#include "google/rpc/error_details.pb.h"
#include "inspection/v1/event.grpc.pb.h"
#include "sandbox/emulator/sandbox_server.h"
#include "tests/integration/gateway_fixture.h"
#include "tests/integration/sandbox_helpers.h"
#include "tests/support/temp_dir.h"
#include "tests/support/wait.h"

namespace inspection::testing {
namespace {

constexpr char kWebhookKey[] = "default-webhook-key";
constexpr char kPreprodApiKey[] = "preprod-api-key";
constexpr char kPreprodWebhookKey[] = "preprod-webhook-key";
constexpr char kSecondApiKey[] = "second-api-key";
constexpr char kPreprodPath[] = "/webhooks/v2/preprod";

class VendorAccountsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    sandbox::SandboxOptions production;
    production.api_keys = {sandbox::kDefaultSandboxApiKey, kSecondApiKey};
    auto started = sandbox::SandboxServer::Start(production);
    ASSERT_TRUE(started.ok()) << started.status();
    production_ = std::move(*started);
    sandbox::SandboxOptions preprod;
    preprod.api_keys = {kPreprodApiKey};
    preprod.seed = 2;  // ids unlike production's
    started = sandbox::SandboxServer::Start(preprod);
    ASSERT_TRUE(started.ok()) << started.status();
    preprod_ = std::move(*started);

    server::GatewayServerOptions options;
    options.grpc_addr = "127.0.0.1:0";
    options.vendor.base_url = production_->BaseUrl();
    options.vendor.api_key = sandbox::kDefaultSandboxApiKey;
    // "preprod": its own vendor; "second": the default account's vendor, another key.
    options.accounts = {{"preprod", preprod_->BaseUrl(), kPreprodApiKey},
                        {"second", production_->BaseUrl(), kSecondApiKey}};
    options.webapp_url = production_->WebappUrl();
    options.event_log_url = "sqlite:" + temp_.File("events.db");
    options.webhook.host = "127.0.0.1";
    options.webhook.port = 0;
    options.webhook.current_key = kWebhookKey;
    options.webhook.accounts = {{"preprod", kPreprodPath, kPreprodWebhookKey, ""}};
    options.token_watch.interval = absl::Milliseconds(20);
    options.circuit_breaker.consecutive_failures = 3;
    options.circuit_breaker.open_duration = absl::Seconds(60);
    options.retry.backoff.max_attempts = 1;
    options.admin_port = 0;
    auto gateway = server::GatewayServer::Start(std::move(options));
    ASSERT_TRUE(gateway.ok()) << gateway.status();
    gateway_ = std::move(*gateway);
    auto channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", gateway_->grpc_port()),
                                       grpc::InsecureChannelCredentials());
    token_ = v1::TokenService::NewStub(channel);
    event_config_ = v1::EventConfigService::NewStub(channel);
    damage_ = v1::DamageService::NewStub(channel);
    events_ = v1::EventService::NewStub(channel);
    image_ = v1::ImageService::NewStub(channel);
    // Each vendor delivers to its own path with its own key, as registered.
    const std::string hooks = absl::StrCat("http://127.0.0.1:", gateway_->webhook_port());
    const std::vector<std::string> events = {"newInspection", "detectionFinished", "createReport"};
    production_->ConfigureWebhook(hooks + "/webhooks/v2", kWebhookKey, events);
    preprod_->ConfigureWebhook(hooks + kPreprodPath, kPreprodWebhookKey, events);
  }

  // A context that names `account` ("" sends no x-vendor-account).
  static std::unique_ptr<grpc::ClientContext> For(const std::string& account,
                                                  int timeout_ms = 10000) {
    auto context = GatewayTest::Context(timeout_ms);
    if (!account.empty()) context->AddMetadata("x-vendor-account", account);
    return context;
  }
  int PostWebhook(const std::string& path, const std::string& key, const std::string& body) {
    httplib::Client client("127.0.0.1", gateway_->webhook_port());
    auto response = client.Post(path, {{"x-api-key", key}}, body, "application/json");
    return response ? response->status : -1;
  }
  std::string Metrics() {
    httplib::Client client("127.0.0.1", gateway_->admin_port());
    auto response = client.Get("/metrics");
    EXPECT_TRUE(response);
    return response ? response->body : "";
  }

  TempDir temp_;
  std::unique_ptr<sandbox::SandboxServer> production_;
  std::unique_ptr<sandbox::SandboxServer> preprod_;
  std::unique_ptr<server::GatewayServer> gateway_;
  std::unique_ptr<v1::TokenService::Stub> token_;
  std::unique_ptr<v1::EventConfigService::Stub> event_config_;
  std::unique_ptr<v1::DamageService::Stub> damage_;
  std::unique_ptr<v1::EventService::Stub> events_;
  std::unique_ptr<v1::ImageService::Stub> image_;
};

TEST_F(VendorAccountsTest, TwoVendorAccountsNeverShareACacheEntry) {
  // Two accounts whose webhook configurations differ: each must get its own.
  preprod_->ConfigureWebhook("https://preprod.example.test/hook", "k", {});
  CountVendorCalls(*production_, "get_webhook_config");
  CountVendorCalls(*preprod_, "get_webhook_config");
  std::map<std::string, std::string> urls;
  for (const std::string account : {"", "second", "preprod"}) {
    auto first = For(account);
    v1::GetWebhookConfigResponse response;
    ASSERT_TRUE(event_config_->GetWebhookConfig(first.get(), {}, &response).ok()) << account;
    EXPECT_EQ(ServerHeader(*first, "x-cache"), "miss") << "account \"" << account << "\"";
    urls[account] = response.config().webhook_url_v2();
  }
  // "" and "second" share one vendor but not an API key: two entries, two vendor calls.
  EXPECT_EQ(VendorCalls(*production_, "get_webhook_config"), 2);
  EXPECT_EQ(VendorCalls(*preprod_, "get_webhook_config"), 1);
  EXPECT_EQ(urls["preprod"], "https://preprod.example.test/hook");
  EXPECT_NE(urls[""], urls["preprod"]);
  // Each account's own entry now answers, and no vendor is called again.
  for (const std::string account : {"", "second", "preprod", "default"}) {
    auto again = For(account);
    v1::GetWebhookConfigResponse response;
    ASSERT_TRUE(event_config_->GetWebhookConfig(again.get(), {}, &response).ok()) << account;
    EXPECT_EQ(ServerHeader(*again, "x-cache"), "hit") << "account \"" << account << "\"";
    EXPECT_EQ(response.config().webhook_url_v2(), urls[account == "default" ? "" : account]);
  }
  EXPECT_EQ(VendorCalls(*production_, "get_webhook_config"), 2);
  EXPECT_EQ(VendorCalls(*preprod_, "get_webhook_config"), 1);
}

TEST_F(VendorAccountsTest, AWriteInvalidatesOnlyItsOwnAccountsEntry) {
  v1::GetWebhookConfigResponse response;
  ASSERT_TRUE(event_config_->GetWebhookConfig(For("").get(), {}, &response).ok());
  ASSERT_TRUE(event_config_->GetWebhookConfig(For("preprod").get(), {}, &response).ok());
  v1::UpdateWebhookConfigRequest update;
  update.set_webhook_url_v2("https://changed.example.test/hook");
  v1::UpdateWebhookConfigResponse updated;
  ASSERT_TRUE(event_config_->UpdateWebhookConfig(For("preprod").get(), update, &updated).ok());
  auto preprod = For("preprod");
  ASSERT_TRUE(event_config_->GetWebhookConfig(preprod.get(), {}, &response).ok());
  EXPECT_EQ(ServerHeader(*preprod, "x-cache"), "miss");
  EXPECT_EQ(response.config().webhook_url_v2(), "https://changed.example.test/hook");
  // The write went to preprod's vendor only.
  auto production = For("");
  ASSERT_TRUE(event_config_->GetWebhookConfig(production.get(), {}, &response).ok());
  EXPECT_NE(response.config().webhook_url_v2(), "https://changed.example.test/hook");
}

TEST_F(VendorAccountsTest, CallsGoToTheirAccountsVendorAndIdempotencyKeysStayWithIt) {
  v1::CreateTokenRequest request = ValidTokenRequest();
  request.set_idempotency_key("order-42");
  v1::CreateTokenResponse in_production;
  v1::CreateTokenResponse in_preprod;
  ASSERT_TRUE(token_->CreateToken(For("").get(), request, &in_production).ok());
  // The same key in another account is another operation, not a replay.
  auto preprod = For("preprod");
  ASSERT_TRUE(token_->CreateToken(preprod.get(), request, &in_preprod).ok());
  EXPECT_EQ(ServerHeader(*preprod, "idempotency-replayed"), "");
  EXPECT_NE(in_production.token().uid(), in_preprod.token().uid());
  EXPECT_EQ(SandboxState(*production_)["tokens"].size(), 1u);
  EXPECT_EQ(SandboxState(*preprod_)["tokens"].size(), 1u);
  // Within an account, the key replays.
  v1::CreateTokenResponse replayed;
  auto again = For("preprod");
  ASSERT_TRUE(token_->CreateToken(again.get(), request, &replayed).ok());
  EXPECT_EQ(ServerHeader(*again, "idempotency-replayed"), "true");
  EXPECT_EQ(replayed.token().uid(), in_preprod.token().uid());
  EXPECT_EQ(SandboxState(*preprod_)["tokens"].size(), 1u);

  // A token lives at its account's vendor: the default account does not know it.
  v1::GetTokenStatusRequest status_request;
  status_request.set_uid(in_preprod.token().uid());
  v1::GetTokenStatusResponse status;
  EXPECT_TRUE(token_->GetTokenStatus(For("preprod").get(), status_request, &status).ok());
  EXPECT_EQ(token_->GetTokenStatus(For("").get(), status_request, &status).error_code(),
            grpc::StatusCode::NOT_FOUND);
}

TEST_F(VendorAccountsTest, AnUnknownAccountIsInvalidArgumentOnEveryKindOfCall) {
  auto check = [](const grpc::Status& status, const std::string& what) {
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << what;
    const auto bad_request = GatewayTest::BadRequestOf(status);
    ASSERT_EQ(bad_request.field_violations_size(), 1) << what;
    EXPECT_EQ(bad_request.field_violations(0).field(), "x-vendor-account") << what;
  };
  CountVendorCalls(*production_, "get_webhook_config");
  v1::GetWebhookConfigResponse config;
  check(event_config_->GetWebhookConfig(For("staging").get(), {}, &config), "unary");
  EXPECT_EQ(VendorCalls(*production_, "get_webhook_config"), 0);

  v1::SubscribeResponse event;
  auto subscribe_context = For("staging");
  auto subscription = events_->Subscribe(subscribe_context.get(), v1::SubscribeRequest());
  EXPECT_FALSE(subscription->Read(&event));
  check(subscription->Finish(), "Subscribe");

  v1::WatchTokenStatusRequest watch;
  watch.set_uid("0123456789abcdef");
  auto watch_context = For("staging");
  auto watcher = token_->WatchTokenStatus(watch_context.get(), watch);
  v1::WatchTokenStatusResponse status;
  EXPECT_FALSE(watcher->Read(&status));
  check(watcher->Finish(), "WatchTokenStatus");

  v1::StreamDamageResultsRequest damage;
  damage.add_urls("https://images.example.com/accounts/front.jpg");
  auto damage_context = For("staging");
  auto results = damage_->StreamDamageResults(damage_context.get(), damage);
  v1::StreamDamageResultsResponse result;
  EXPECT_FALSE(results->Read(&result));
  check(results->Finish(), "StreamDamageResults");
}

TEST_F(VendorAccountsTest, WebhooksOfAnAccountReachOnlyItsSubscribers) {
  struct Subscriber {
    std::unique_ptr<grpc::ClientContext> context;
    std::unique_ptr<grpc::ClientReader<v1::SubscribeResponse>> reader;
  };
  std::map<std::string, Subscriber> subscribers;
  for (const std::string account : {"", "preprod", "second"}) {
    Subscriber& s = subscribers[account];
    s.context = For(account, 20000);
    s.reader = events_->Subscribe(s.context.get(), v1::SubscribeRequest());
  }
  ASSERT_TRUE(
      WaitUntil([&] { return gateway_->hub().SubscriberCount() == 3; }, std::chrono::seconds(10)));
  // A key only opens its own account's path.
  const std::string body = R"({"event": "createReport", "inspectionId": "insp-pre-1"})";
  EXPECT_EQ(PostWebhook("/webhooks/v2", kPreprodWebhookKey, body), 401);
  EXPECT_EQ(PostWebhook(kPreprodPath, kWebhookKey, body), 401);
  EXPECT_EQ(PostWebhook(kPreprodPath, kPreprodWebhookKey, body), 200);
  EXPECT_EQ(PostWebhook("/webhooks/v2", kWebhookKey,
                        R"({"event": "createReport", "inspectionId": "insp-prod-1"})"),
            200);

  v1::SubscribeResponse message;
  ASSERT_TRUE(subscribers["preprod"].reader->Read(&message));
  EXPECT_EQ(message.event().inspection_id(), "insp-pre-1");
  EXPECT_EQ(message.event().vendor_account(), "preprod");
  ASSERT_TRUE(subscribers[""].reader->Read(&message));
  EXPECT_EQ(message.event().inspection_id(), "insp-prod-1");
  EXPECT_EQ(message.event().vendor_account(), "");
  // Neither saw the other's event, and "second" (no webhooks of its own) saw none: after
  // both events, each stream ends at its deadline with nothing more.
  for (auto& [account, subscriber] : subscribers) subscriber.context->TryCancel();
  for (auto& [account, subscriber] : subscribers) {
    while (subscriber.reader->Read(&message)) {
      ADD_FAILURE() << "account \"" << account << "\" got " << message.event().inspection_id();
    }
    subscriber.reader->Finish();
  }
  // Both are in the one log, each with its account.
  auto stored = gateway_->event_log().ReadAfter("", 100);
  ASSERT_TRUE(stored.ok());
  std::map<std::string, std::string> accounts;
  for (const auto& event : *stored) accounts[event.event.inspection_id] = event.event.account;
  EXPECT_EQ(accounts,
            (std::map<std::string, std::string>{{"insp-pre-1", "preprod"}, {"insp-prod-1", ""}}));
}

TEST_F(VendorAccountsTest, StreamDamageResultsFollowsTheAccountsOwnWebhooks) {
  auto context = For("preprod", 30000);
  v1::StreamDamageResultsRequest request;
  request.add_urls("https://images.example.com/accounts/front.jpg");
  auto reader = damage_->StreamDamageResults(context.get(), request);
  std::vector<v1::StreamDamageResultsResponse> messages;
  v1::StreamDamageResultsResponse message;
  while (reader->Read(&message)) messages.push_back(message);
  grpc::Status status = reader->Finish();
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(messages.size(), 4u);
  const std::string inspection_id = messages[0].submitted().inspection_id();
  for (size_t i = 1; i < messages.size(); ++i) {
    EXPECT_EQ(messages[i].event().inspection_id(), inspection_id);
    EXPECT_EQ(messages[i].event().vendor_account(), "preprod");
  }
  // The inspection exists at preprod's vendor only.
  EXPECT_EQ(SandboxState(*preprod_)["inspections"].size(), 1u) << SandboxState(*preprod_).dump();
  EXPECT_EQ(SandboxState(*production_)["inspections"].size(), 0u);
}

TEST_F(VendorAccountsTest, WatchTokenStatusPollsTheNamedAccount) {
  v1::CreateTokenResponse created;
  ASSERT_TRUE(token_->CreateToken(For("preprod").get(), ValidTokenRequest(), &created).ok());
  v1::WatchTokenStatusRequest request;
  request.set_uid(created.token().uid());
  auto context = For("preprod");
  auto reader = token_->WatchTokenStatus(context.get(), request);
  v1::WatchTokenStatusResponse status;
  ASSERT_TRUE(reader->Read(&status));
  EXPECT_EQ(status.token().tradein_status(), v1::TRADEIN_STATUS_CREATED);
  EXPECT_EQ(gateway_->token_poller("preprod").stats().active_uids, 1u);
  EXPECT_EQ(gateway_->token_poller("").stats().polls_issued, 0u);
  context->TryCancel();
  reader->Finish();
  // The default account's vendor has no such token: its watch ends with NOT_FOUND.
  auto other = For("");
  auto other_reader = token_->WatchTokenStatus(other.get(), request);
  EXPECT_FALSE(other_reader->Read(&status));
  EXPECT_EQ(other_reader->Finish().error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(VendorAccountsTest, OneAccountsOutageOpensOnlyItsBreaker) {
  auto rules = sandbox::ParseFaultRules(nlohmann::json::parse(
      R"({"route": "assess_quality", "kind": "error", "status": 503, "times": 100})"));
  ASSERT_TRUE(rules.ok());
  preprod_->faults().AddRules(*rules);
  auto assess = [&](const std::string& account, int i) {
    v1::AssessQualityRequest request;
    request.set_url(absl::StrCat("https://images.example.com/outage/", i, ".jpg"));
    v1::AssessQualityResponse response;
    return image_->AssessQuality(For(account).get(), request, &response);
  };
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(assess("preprod", i).error_code(), grpc::StatusCode::UNAVAILABLE);
  }
  EXPECT_EQ(gateway_->circuit_breaker("preprod").state(), resilience::CircuitState::kOpen);
  const grpc::Status fast = assess("preprod", 99);
  EXPECT_EQ(fast.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(GatewayTest::ErrorInfoOf(fast).reason(), "CIRCUIT_OPEN");
  // The other accounts are untouched.
  EXPECT_TRUE(assess("", 100).ok());
  EXPECT_TRUE(assess("second", 101).ok());
  EXPECT_EQ(gateway_->circuit_breaker("").state(), resilience::CircuitState::kClosed);
  EXPECT_EQ(gateway_->circuit_breaker("second").state(), resilience::CircuitState::kClosed);
  // And /metrics tells them apart.
  const std::string metrics = Metrics();
  EXPECT_NE(metrics.find("inspection_upstream_circuit_state{account=\"preprod\","
                         "upstream=\"vendor.preprod\"} 2"),
            std::string::npos)
      << metrics;
  EXPECT_NE(
      metrics.find("inspection_upstream_circuit_state{account=\"default\",upstream=\"vendor\"} 0"),
      std::string::npos);
  EXPECT_NE(metrics.find("inspection_upstream_circuit_state{account=\"second\","
                         "upstream=\"vendor.second\"} 0"),
            std::string::npos);
  // Upstream attempts per account: preprod's 503s are its own; the default account's two
  // answers were 2xx and it has no 5xx at all.
  const std::string preprod_5xx =
      "inspection_upstream_requests_total{account=\"preprod\",route=\"assess_quality\","
      "status_class=\"5xx\"} ";
  const size_t at = metrics.find(preprod_5xx);
  ASSERT_NE(at, std::string::npos) << metrics;
  EXPECT_GE(std::stod(metrics.substr(at + preprod_5xx.size())), 3.0);
  EXPECT_NE(metrics.find("inspection_upstream_requests_total{account=\"default\","
                         "route=\"assess_quality\",status_class=\"5xx\"} 0\n"),
            std::string::npos);
  EXPECT_NE(metrics.find("inspection_upstream_requests_total{account=\"default\","
                         "route=\"assess_quality\",status_class=\"2xx\"} 1\n"),
            std::string::npos);
  EXPECT_NE(metrics.find("inspection_upstream_requests_total{account=\"second\","
                         "route=\"assess_quality\",status_class=\"2xx\"} 1\n"),
            std::string::npos);
  // Retries and circuit transitions too.
  EXPECT_NE(metrics.find("inspection_upstream_circuit_transitions_total{account=\"preprod\","
                         "to=\"open\",upstream=\"vendor.preprod\"} 1\n"),
            std::string::npos);
}

// Options of a gateway that calls no vendor (start-up checks only).
server::GatewayServerOptions OfflineOptions(const TempDir& temp) {
  server::GatewayServerOptions options;
  options.grpc_addr = "127.0.0.1:0";
  options.vendor.base_url = "http://127.0.0.1:1";
  options.vendor.api_key = "k";
  options.admin_port = -1;
  options.event_log_url = "sqlite:" + temp.File("events.db");
  return options;
}

TEST(VendorAccountsStartTest, RefusesWebhooksForAnAccountThatIsNotConfigured) {
  TempDir temp;
  server::GatewayServerOptions options = OfflineOptions(temp);
  options.webhook.host = "127.0.0.1";
  options.webhook.port = 0;
  options.webhook.current_key = "webhook-key";
  options.webhook.accounts = {{"ghost", "/webhooks/v2/ghost", "ghost-key", ""}};
  auto gateway = server::GatewayServer::Start(std::move(options));
  ASSERT_FALSE(gateway.ok());
  EXPECT_EQ(gateway.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(gateway.status().message().find("\"ghost\""), std::string::npos) << gateway.status();
}

TEST(VendorAccountsStartTest, RefusesTheReservedAndDuplicateNames) {
  for (const std::vector<std::string>& names :
       {std::vector<std::string>{"default"}, std::vector<std::string>{"a", "a"},
        std::vector<std::string>{""}}) {
    TempDir temp;
    server::GatewayServerOptions options = OfflineOptions(temp);
    for (const std::string& name : names) {
      options.accounts.push_back({name, "http://127.0.0.1:1", "k2"});
    }
    auto gateway = server::GatewayServer::Start(std::move(options));
    EXPECT_FALSE(gateway.ok()) << names.size() << " " << names[0];
  }
}

}  // namespace
}  // namespace inspection::testing
