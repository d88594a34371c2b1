// The gateway in front of the in-process sandbox: behaviours that need a stateful
// vendor with fault injection.
#include <httplib.h>

#include "sandbox/emulator/sandbox_server.h"
#include "tests/integration/gateway_fixture.h"

namespace inspection::testing {
namespace {

class SandboxUpstreamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto sandbox = sandbox::SandboxServer::Start(sandbox::SandboxOptions{});
    ASSERT_TRUE(sandbox.ok()) << sandbox.status();
    sandbox_ = std::move(*sandbox);
    server::GatewayServerOptions options;
    options.grpc_addr = "127.0.0.1:0";
    options.vendor.base_url = sandbox_->BaseUrl();
    options.vendor.api_key = sandbox::kDefaultSandboxApiKey;
    options.webapp_url = sandbox_->WebappUrl();
    auto gateway = server::GatewayServer::Start(std::move(options));
    ASSERT_TRUE(gateway.ok()) << gateway.status();
    gateway_ = std::move(*gateway);
    auto channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", gateway_->grpc_port()),
                                       grpc::InsecureChannelCredentials());
    token_ = v1::TokenService::NewStub(channel);
    event_config_ = v1::EventConfigService::NewStub(channel);
  }

  nlohmann::json SandboxState() {
    httplib::Client client(sandbox_->BaseUrl());
    auto response = client.Get("/_sandbox/state");
    EXPECT_TRUE(response) << "no answer from /_sandbox/state";
    if (!response) return nullptr;
    return nlohmann::json::parse(response->body, nullptr, false);
  }

  std::unique_ptr<sandbox::SandboxServer> sandbox_;
  std::unique_ptr<server::GatewayServer> gateway_;
  std::unique_ptr<v1::TokenService::Stub> token_;
  std::unique_ptr<v1::EventConfigService::Stub> event_config_;
};

v1::CreateTokenRequest ValidTokenRequest() {
  return GatewayTest::Parse<v1::CreateTokenRequest>(R"pb(
    options { shoot_inspect: true fast_track: false }
    trade_in { sending_type: SENDING_TYPE_NONE }
    customer {
      email: "<EMAIL>"
      firstname: "<FIRST_NAME>"
      lastname: "<LAST_NAME>"
      phone: "<PHONE>"
      locale: LOCALE_DE
    }
    validity: 7
  )pb");
}

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
  grpc::Status status =
      token_->CreateToken(GatewayTest::Context().get(), ValidTokenRequest(), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(GatewayTest::ErrorInfoOf(status).reason(), "VENDOR_CONNECTION_LOST");
  nlohmann::json state = SandboxState();
  ASSERT_TRUE(state.contains("tokens")) << state.dump();
  EXPECT_EQ(state["tokens"].size(), 0u) << "the failed creation reached the vendor twice";

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

}  // namespace
}  // namespace inspection::testing
