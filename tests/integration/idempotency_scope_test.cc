// Idempotency keys under mTLS are scoped by the caller's certificate identity (issue 31,
// review): they were scoped by vendor account only, so a caller who guessed another
// caller's key and parameters was replayed that caller's outcome. The same caller repeating
// its key is still replayed; another caller with the same key makes its own call.
#include <atomic>
#include <chrono>
#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "gateway/server/gateway_server.h"
#include "inspection/v1/damage.grpc.pb.h"
#include "tests/support/fake_vendor.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_pki.h"

namespace inspection::testing {
namespace {

class IdempotencyScopeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(pki_.ok()) << pki_.error();
    ASSERT_TRUE(pki_.Issue("server", "gateway-1", "DNS:localhost,IP:127.0.0.1")) << pki_.error();
    ASSERT_TRUE(pki_.Issue("claims", "claims", "URI:spiffe://test/claims")) << pki_.error();
    ASSERT_TRUE(pki_.Issue("fraud", "fraud", "URI:spiffe://test/fraud")) << pki_.error();
    ASSERT_TRUE(vendor_.Start());
    vendor_.SetHandler([this](const RecordedRequest&) {
      ScriptedResponse answer;
      answer.body = absl::StrCat(R"({"message": "processing", "data": {"inspectionId": "insp_)",
                                 ++submissions_, R"("}})");
      return answer;
    });
    server::GatewayServerOptions options;
    options.grpc_addr = "127.0.0.1:0";
    options.admin_host = "127.0.0.1";
    options.admin_port = 0;
    options.vendor.base_url = vendor_.BaseUrl();
    options.vendor.api_key = "idempotency-scope-vendor-key";
    options.webapp_url = "https://webapp.example.test";
    options.event_log_url = "sqlite:" + temp_.File("events.db");
    options.tls.cert_file = pki_.Path("server.pem");
    options.tls.key_file = pki_.Path("server.key");
    options.tls.client_ca_file = pki_.Path("ca.pem");
    auto gateway = server::GatewayServer::Start(std::move(options));
    ASSERT_TRUE(gateway.ok()) << gateway.status();
    gateway_ = *std::move(gateway);
  }

  std::unique_ptr<v1::DamageService::Stub> Stub(const std::string& client) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = pki_.Read("ca.pem");
    ssl.pem_private_key = pki_.Read(client + ".key");
    ssl.pem_cert_chain = pki_.Read(client + ".pem");
    grpc::ChannelArguments args;
    args.SetSslTargetNameOverride("localhost");
    args.SetInt("grpc.use_local_subchannel_pool", 1);
    return v1::DamageService::NewStub(grpc::CreateCustomChannel(
        absl::StrCat("127.0.0.1:", gateway_->grpc_port()), grpc::SslCredentials(ssl), args));
  }

  // DetectDamage with the key; the inspection id answered, and whether it was a replay.
  std::string Detect(v1::DamageService::Stub& stub, bool* replayed) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::DetectDamageRequest request;
    request.add_urls("https://img.example.test/front.jpg");
    request.set_idempotency_key("order-1");
    v1::DetectDamageResponse response;
    const grpc::Status status = stub.DetectDamage(&context, request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    *replayed = context.GetServerInitialMetadata().count("idempotency-replayed") > 0;
    return response.inspection_id();
  }

  TempDir temp_;
  TestPki pki_{temp_.path()};
  FakeVendor vendor_;
  std::atomic<int> submissions_{0};
  std::unique_ptr<server::GatewayServer> gateway_;
};

TEST_F(IdempotencyScopeTest, AnotherCallerWithTheSameKeyIsNotReplayedTheFirstCallersOutcome) {
  auto claims = Stub("claims");
  auto fraud = Stub("fraud");
  bool replayed = true;
  EXPECT_EQ(Detect(*claims, &replayed), "insp_1");
  EXPECT_FALSE(replayed);
  // The same caller, the same key and parameters: the first outcome, no second submission.
  EXPECT_EQ(Detect(*claims, &replayed), "insp_1");
  EXPECT_TRUE(replayed);
  EXPECT_EQ(vendor_.RequestCount(), 1u);
  // Another caller guessing the key and parameters gets a submission of its own.
  EXPECT_EQ(Detect(*fraud, &replayed), "insp_2");
  EXPECT_FALSE(replayed);
  EXPECT_EQ(vendor_.RequestCount(), 2u);
  EXPECT_EQ(Detect(*fraud, &replayed), "insp_2");
  EXPECT_TRUE(replayed);
}

}  // namespace
}  // namespace inspection::testing
