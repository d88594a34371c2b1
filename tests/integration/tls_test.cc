// TLS and mTLS on the gRPC listener, with certificates made at test time (openssl CLI):
// who can connect, and a certificate rotated on disk served without a restart.
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <cstdio>
#include <fstream>

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gateway/logging/log.h"
#include "gateway/server/gateway_server.h"
#include "gateway/server/rpc_log_observer.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "inspection/v1/event.grpc.pb.h"
#include "inspection/v1/event_config.grpc.pb.h"
#include "tests/support/captured_log.h"
#include "tests/support/fake_vendor.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_pki.h"
#include "tests/support/wait.h"

namespace inspection::testing {
namespace {

constexpr char kApiKey[] = "tls-test-vendor-key";
constexpr char kServerSans[] = "DNS:localhost,IP:127.0.0.1";

class TlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(pki_.ok()) << pki_.error();
    ASSERT_TRUE(pki_.Issue("server", "gateway-1", kServerSans)) << pki_.error();
    ASSERT_TRUE(pki_.Issue("client-a", "client-a", "URI:spiffe://test/client-a")) << pki_.error();
    ASSERT_TRUE(pki_.Issue("client-b", "client-b", "URI:spiffe://test/client-b")) << pki_.error();
    ASSERT_TRUE(other_ca_.ok()) << other_ca_.error();
    ASSERT_TRUE(other_ca_.Issue("intruder", "intruder", "URI:spiffe://test/intruder"))
        << other_ca_.error();
    ASSERT_TRUE(vendor_.Start());
    ScriptedResponse reply;
    reply.body = R"({"webhookHeaderKey": null, "webhookUrl": null, "webhookUrlV2": null})";
    vendor_.RespondWith(reply);
  }

  void StartGateway(bool mtls, std::chrono::seconds refresh = std::chrono::seconds(60),
                    const std::string& policy_file = "",
                    security::CallerLimitsOptions limits = {}) {
    server::GatewayServerOptions options;
    options.caller_limits = limits;
    options.observer = &log_observer_;
    options.authz_policy_file = policy_file;
    options.authz_refresh_interval = std::chrono::seconds(1);
    options.accounts.push_back({"preprod", vendor_.BaseUrl(), "tls-test-preprod-key"});
    options.admin_host = "127.0.0.1";
    options.grpc_addr = "127.0.0.1:0";
    options.vendor.base_url = vendor_.BaseUrl();
    options.vendor.api_key = kApiKey;
    options.webapp_url = "https://webapp.example.test";
    options.admin_port = 0;
    options.event_log_url = "sqlite:" + temp_.File("events.db");
    options.tls.cert_file = pki_.Path("server.pem");
    options.tls.key_file = pki_.Path("server.key");
    if (mtls) options.tls.client_ca_file = pki_.Path("ca.pem");
    options.tls.refresh_interval = refresh;
    auto gateway = server::GatewayServer::Start(std::move(options));
    ASSERT_TRUE(gateway.ok()) << gateway.status();
    gateway_ = *std::move(gateway);
  }

  // A channel trusting `ca` and presenting `client` ("" for no client certificate).
  std::shared_ptr<grpc::Channel> TlsChannel(const TestPki& ca, const TestPki* issuer,
                                            const std::string& client) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = ca.Read("ca.pem");
    if (!client.empty()) {
      ssl.pem_private_key = issuer->Read(client + ".key");
      ssl.pem_cert_chain = issuer->Read(client + ".pem");
    }
    grpc::ChannelArguments args;
    args.SetSslTargetNameOverride("localhost");
    // A new connection (and handshake) per channel: no subchannel sharing.
    args.SetInt("grpc.use_local_subchannel_pool", 1);
    return grpc::CreateCustomChannel(Target(), grpc::SslCredentials(ssl), args);
  }

  std::string Target() const { return absl::StrCat("127.0.0.1:", gateway_->grpc_port()); }

  // GetWebhookConfig on `channel`; the server certificate's CN through `peer_cn`.
  grpc::Status Call(const std::shared_ptr<grpc::Channel>& channel, std::string* peer_cn = nullptr,
                    const std::string& account = "") {
    auto stub = v1::EventConfigService::NewStub(channel);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::GetWebhookConfigResponse response;
    context.AddMetadata("cache-control", "no-cache");
    if (!account.empty()) context.AddMetadata("x-vendor-account", account);
    grpc::Status status = stub->GetWebhookConfig(&context, {}, &response);
    if (peer_cn != nullptr && context.auth_context() != nullptr) {
      for (const auto& value : context.auth_context()->FindPropertyValues("x509_common_name")) {
        *peer_cn = std::string(value.data(), value.size());
      }
    }
    return status;
  }

  std::string LogText() {
    absl::MutexLock lock(&log_mu_);
    return log_text_;
  }

  absl::Mutex log_mu_;
  std::string log_text_ ABSL_GUARDED_BY(log_mu_);
  logging::Logger logger_{[this](absl::string_view line) {
    absl::MutexLock lock(&log_mu_);
    absl::StrAppend(&log_text_, line, "\n");
  }};
  server::RpcLogObserver log_observer_{logger_};
  TempDir temp_;
  TestPki pki_{temp_.path()};
  TempDir other_dir_;
  TestPki other_ca_{other_dir_.path(), "some other CA"};
  FakeVendor vendor_;
  std::unique_ptr<server::GatewayServer> gateway_;
};

TEST_F(TlsTest, TheListenerSpeaksOnlyTls) {
  StartGateway(/*mtls=*/false);
  EXPECT_TRUE(Call(TlsChannel(pki_, nullptr, "")).ok());
  const grpc::Status plaintext =
      Call(grpc::CreateChannel(Target(), grpc::InsecureChannelCredentials()));
  EXPECT_EQ(plaintext.error_code(), grpc::StatusCode::UNAVAILABLE) << plaintext.error_message();
  // A client that does not trust the server's CA does not talk to it either.
  EXPECT_EQ(Call(TlsChannel(other_ca_, nullptr, "")).error_code(), grpc::StatusCode::UNAVAILABLE);
}

TEST_F(TlsTest, MtlsRefusesClientsWithoutOrWithAnUntrustedCertificate) {
  StartGateway(/*mtls=*/true);
  EXPECT_TRUE(Call(TlsChannel(pki_, &pki_, "client-a")).ok());
  EXPECT_EQ(Call(TlsChannel(pki_, nullptr, "")).error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(Call(TlsChannel(pki_, &other_ca_, "intruder")).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  // Refused at the handshake: the vendor never heard of them.
  EXPECT_EQ(vendor_.RequestCount(), 1u);
}

// Every call's log line names the caller's certificate identity; a write leaves an audit
// line (who, which RPC, which account, which resource, the outcome) whatever log.level.
TEST_F(TlsTest, LogLinesNameTheCallerAndWritesLeaveAnAuditLine) {
  StartGateway(/*mtls=*/true);
  logger_.SetLevel(logging::Level::kError);  // audit lines are written all the same
  ASSERT_TRUE(Call(TlsChannel(pki_, &pki_, "client-a")).ok());
  auto stub = v1::EventConfigService::NewStub(TlsChannel(pki_, &pki_, "client-a"));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::UpdateWebhookConfigRequest update;
  update.set_webhook_url_v2("https://hooks.example.test/v2");
  update.set_webhook_header_key("whk-audit-secret");
  v1::UpdateWebhookConfigResponse response;
  ASSERT_TRUE(stub->UpdateWebhookConfig(&context, update, &response).ok());
  const std::string log = LogText();
  const size_t audit = log.find(R"("msg":"audit")");
  ASSERT_NE(audit, std::string::npos) << log;
  const std::string line = log.substr(audit, log.find('\n', audit) - audit);
  EXPECT_NE(line.find(R"("caller":"spiffe://test/client-a")"), std::string::npos) << line;
  EXPECT_NE(line.find(R"("rpc":"/inspection.v1.EventConfigService/UpdateWebhookConfig")"),
            std::string::npos)
      << line;
  EXPECT_NE(line.find(R"("account":"default")"), std::string::npos) << line;
  EXPECT_NE(line.find(R"("resource":"webhook_url_v2=https://hooks.example.test/v2")"),
            std::string::npos)
      << line;
  EXPECT_NE(line.find(R"("grpc_code":0)"), std::string::npos) << line;
  // One audit line: GetWebhookConfig is a read. The key is in no line.
  EXPECT_EQ(log.find(R"("msg":"audit")", audit + 1), std::string::npos) << log;
  EXPECT_EQ(log.find("whk-audit-secret"), std::string::npos);
}

// Two identities under one policy: A may use the preprod account only, B may call
// everything but UpdateWebhookConfig. A denial is PERMISSION_DENIED, counted by method,
// and a policy changed on disk takes effect without a restart.
TEST_F(TlsTest, ThePolicyDecidesPerIdentityRpcAndAccountAndReloadsWithoutARestart) {
  const std::string policy = temp_.File("policy.json");
  auto write_policy = [&](const std::string& text) {
    std::ofstream(policy + ".tmp") << text;
    std::rename((policy + ".tmp").c_str(), policy.c_str());
  };
  write_policy(R"({"name": "gateway",
    "deny_rules": [{"name": "b-no-webhook-writes",
      "source": {"principals": ["spiffe://test/client-b"]},
      "request": {"paths": ["/inspection.v1.EventConfigService/UpdateWebhookConfig"]}}],
    "allow_rules": [{"name": "a-preprod-only",
      "source": {"principals": ["spiffe://test/client-a"]},
      "request": {"headers": [{"key": "x-vendor-account", "values": ["preprod"]}]}},
      {"name": "b-everything", "source": {"principals": ["spiffe://test/client-b"]}}]})");
  StartGateway(/*mtls=*/true, std::chrono::seconds(60), policy);
  const auto a = TlsChannel(pki_, &pki_, "client-a");
  const auto b = TlsChannel(pki_, &pki_, "client-b");
  EXPECT_TRUE(Call(a, nullptr, "preprod").ok());
  const grpc::Status a_default = Call(a);
  EXPECT_EQ(a_default.error_code(), grpc::StatusCode::PERMISSION_DENIED)
      << a_default.error_message();
  EXPECT_TRUE(Call(b).ok());
  auto update_as_b = [&] {
    auto stub = v1::EventConfigService::NewStub(b);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::UpdateWebhookConfigRequest update;
    update.set_webhook_url_v2("https://attacker.example.test/steal");
    v1::UpdateWebhookConfigResponse response;
    return stub->UpdateWebhookConfig(&context, update, &response);
  };
  EXPECT_EQ(update_as_b().error_code(), grpc::StatusCode::PERMISSION_DENIED);
  // Denied calls never reached the vendor: the two allowed GetWebhookConfig calls did.
  EXPECT_EQ(vendor_.RequestCount(), 2u);
  httplib::Client admin("127.0.0.1", gateway_->admin_port());
  auto metrics = admin.Get("/metrics");
  ASSERT_TRUE(metrics);
  for (const char* method : {"/inspection.v1.EventConfigService/UpdateWebhookConfig",
                             "/inspection.v1.EventConfigService/GetWebhookConfig"}) {
    EXPECT_NE(metrics->body.find(
                  absl::StrCat("inspection_authz_denied_total{grpc_method=\"", method, "\"} 1")),
              std::string::npos)
        << method;
  }

  // The policy changes on disk: A may now use the default account too, B nothing.
  write_policy(R"({"name": "gateway-2", "allow_rules": [{"name": "a-any-account",
      "source": {"principals": ["spiffe://test/client-a"]}}]})");
  EXPECT_TRUE(WaitUntil([&] { return Call(a).ok(); }, std::chrono::seconds(20)));
  EXPECT_EQ(Call(b).error_code(), grpc::StatusCode::PERMISSION_DENIED);
}

// One caller over its limits does not move another's: A's calls past its rate and its
// second stream are RESOURCE_EXHAUSTED (with RetryInfo for the rate), B is served.
TEST_F(TlsTest, PerCallerLimitsStopOnlyTheCallerOverThem) {
  security::CallerLimitsOptions limits;
  limits.requests_per_second = 0.001;  // no refill within the test: the burst is the budget
  limits.burst = 3;
  limits.max_streams = 1;
  StartGateway(/*mtls=*/true, std::chrono::seconds(60), "", limits);
  const auto a = TlsChannel(pki_, &pki_, "client-a");
  const auto b = TlsChannel(pki_, &pki_, "client-b");
  // A's first stream takes one call and its one stream slot.
  auto events = v1::EventService::NewStub(a);
  grpc::ClientContext stream_context;
  v1::SubscribeRequest subscribe;
  auto stream = events->Subscribe(&stream_context, subscribe);
  // The first stream holds its slot at the server before the second is tried.
  httplib::Client admin("127.0.0.1", gateway_->admin_port());
  ASSERT_TRUE(WaitUntil(
      [&] {
        auto metrics = admin.Get("/metrics");
        return metrics &&
               metrics->body.find(R"(inspection_stream_subscribers{rpc="Subscribe"} 1)") !=
                   std::string::npos;
      },
      std::chrono::seconds(20)));
  EXPECT_TRUE(Call(a).ok());
  grpc::ClientContext second_context;
  second_context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::SubscribeResponse ignored;
  auto second = events->Subscribe(&second_context, subscribe);
  EXPECT_FALSE(second->Read(&ignored));
  const grpc::Status second_status = second->Finish();
  EXPECT_EQ(second_status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << second_status.error_message();
  EXPECT_NE(second_status.error_message().find("streams"), std::string::npos);
  // A's burst (3 calls: the first stream, one call, the refused stream) is spent.
  const grpc::Status over = Call(a);
  EXPECT_EQ(over.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << over.error_message();
  EXPECT_NE(over.error_message().find("rate"), std::string::npos);
  google::rpc::Status rich;
  ASSERT_TRUE(rich.ParseFromString(over.error_details()));
  bool has_retry_info = false;
  for (const auto& detail : rich.details()) has_retry_info |= detail.Is<google::rpc::RetryInfo>();
  EXPECT_TRUE(has_retry_info);
  // B is untouched by A.
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(Call(b).ok()) << i;
  stream_context.TryCancel();
  stream->Finish();
}

TEST_F(TlsTest, RefusedCallsAreLoggedWithTheCallerButCannotFloodTheLog) {
  CapturedLog captured;
  security::CallerLimitsOptions limits;
  limits.requests_per_second = 0.001;
  limits.burst = 1;
  StartGateway(/*mtls=*/true, std::chrono::seconds(60), "", limits);  // 10 lines/s by default
  const auto a = TlsChannel(pki_, &pki_, "client-a");
  EXPECT_TRUE(Call(a).ok());
  constexpr int kFlood = 200;
  for (int i = 0; i < kFlood; ++i) {
    ASSERT_EQ(Call(a).error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  }
  // Another caller's call during the flood still goes through.
  EXPECT_TRUE(Call(TlsChannel(pki_, &pki_, "client-b")).ok());
  const std::vector<nlohmann::json> refused = captured.With("call refused");
  ASSERT_GE(refused.size(), 1u);
  EXPECT_LT(refused.size(), static_cast<size_t>(kFlood) / 2) << refused.size();
  EXPECT_EQ(refused[0]["reason"], "CALLER_RATE_LIMITED");
  EXPECT_EQ(refused[0]["caller"], "spiffe://test/client-a");
  EXPECT_EQ(refused[0]["method"], "/inspection.v1.EventConfigService/GetWebhookConfig");
  EXPECT_NE(refused[0]["peer"].get<std::string>().find("127.0.0.1"), std::string::npos);
  EXPECT_EQ(refused[0]["trace_id"].get<std::string>().size(), 32u);
  uint64_t accounted = refused.size();
  for (size_t i = 1; i < refused.size(); ++i) accounted += refused[i]["suppressed"].get<uint64_t>();
  EXPECT_LE(accounted, static_cast<uint64_t>(kFlood));
}

TEST_F(TlsTest, ARotatedServerCertificateIsServedWithoutARestart) {
  StartGateway(/*mtls=*/true, std::chrono::seconds(1));
  std::string cn;
  ASSERT_TRUE(Call(TlsChannel(pki_, &pki_, "client-a"), &cn).ok());
  EXPECT_EQ(cn, "gateway-1");
  ASSERT_TRUE(pki_.Issue("server", "gateway-2", kServerSans)) << pki_.error();
  // The file watcher picks the new pair up within its interval; new handshakes get it.
  EXPECT_TRUE(WaitUntil(
      [&] { return Call(TlsChannel(pki_, &pki_, "client-a"), &cn).ok() && cn == "gateway-2"; },
      std::chrono::seconds(20)))
      << "still served: " << cn;
}

TEST_F(TlsTest, UnreadableOrNonPemFilesStopTheStartNamingTheKey) {
  server::GatewayServerOptions options;
  options.grpc_addr = "127.0.0.1:0";
  options.vendor.base_url = vendor_.BaseUrl();
  options.vendor.api_key = kApiKey;
  options.webapp_url = "https://webapp.example.test";
  options.admin_port = -1;
  options.event_log_url = "sqlite:" + temp_.File("events-2.db");
  options.tls.cert_file = temp_.File("missing.pem");
  options.tls.key_file = pki_.Path("server.key");
  auto missing = server::GatewayServer::Start(options);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("grpc.tls.cert_file"), std::string::npos)
      << missing.status();
  options.tls.cert_file = pki_.Path("server.pem");
  options.tls.key_file = pki_.Path("server.ext");  // not PEM
  auto not_pem = server::GatewayServer::Start(options);
  ASSERT_FALSE(not_pem.ok());
  EXPECT_NE(not_pem.status().message().find("grpc.tls.key_file"), std::string::npos);
  // The key's content never shows in the message.
  EXPECT_EQ(not_pem.status().message().find("PRIVATE KEY"), std::string::npos);
}

// The listener's files were read without a bound (grpc.tls.key_file=/dev/zero grew to GBs):
// a key file is at most 64 KiB, a certificate chain or CA bundle 1 MiB, of a regular file.
TEST_F(TlsTest, TlsFilesPastTheirBoundOrNotRegularFilesStopTheStart) {
  using ::testing::AllOf;
  using ::testing::HasSubstr;
  using ::testing::Not;
  server::GatewayServerOptions options;
  options.grpc_addr = "127.0.0.1:0";
  options.vendor.base_url = vendor_.BaseUrl();
  options.vendor.api_key = kApiKey;
  options.webapp_url = "https://webapp.example.test";
  options.admin_port = -1;
  options.event_log_url = "sqlite:" + temp_.File("events-3.db");
  options.tls.cert_file = pki_.Path("server.pem");
  options.tls.key_file = "/dev/zero";
  auto device = server::GatewayServer::Start(options);
  ASSERT_FALSE(device.ok());
  EXPECT_THAT(std::string(device.status().message()),
              AllOf(HasSubstr("grpc.tls.key_file"), HasSubstr("not a regular file")));

  const std::string pem = "-----BEGIN PRIVATE KEY-----\n";
  const std::string huge_key = temp_.File("huge.key");
  std::ofstream(huge_key) << pem << std::string(64 * 1024, 'k');
  options.tls.key_file = huge_key;
  auto key = server::GatewayServer::Start(options);
  ASSERT_FALSE(key.ok());
  EXPECT_THAT(std::string(key.status().message()),
              AllOf(HasSubstr("grpc.tls.key_file"), HasSubstr("larger than 65536 bytes"),
                    Not(HasSubstr("kkkk"))));

  const std::string huge_chain = temp_.File("huge.pem");
  std::ofstream(huge_chain) << "-----BEGIN CERTIFICATE-----\n" << std::string(1 << 20, 'c');
  options.tls.key_file = pki_.Path("server.key");
  options.tls.cert_file = huge_chain;
  auto chain = server::GatewayServer::Start(options);
  ASSERT_FALSE(chain.ok());
  EXPECT_THAT(std::string(chain.status().message()),
              AllOf(HasSubstr("grpc.tls.cert_file"), HasSubstr("larger than 1048576 bytes")));

  options.tls.cert_file = pki_.Path("server.pem");
  options.tls.client_ca_file = huge_chain;
  auto bundle = server::GatewayServer::Start(options);
  ASSERT_FALSE(bundle.ok());
  EXPECT_THAT(std::string(bundle.status().message()),
              AllOf(HasSubstr("grpc.tls.client_ca_file"), HasSubstr("larger than 1048576 bytes")));
}

}  // namespace
}  // namespace inspection::testing
