// clients/service_config.json, the gRPC service config we ship to callers: it retries
// exactly the RPCs whose vendor call is safe or idempotent (their vendor_route annotation),
// never a creation or a stream, and a channel that loads it gets a call through a
// transient UNAVAILABLE that a channel without it does not.
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "gateway/routes/route_table.h"
#include "sandbox/emulator/sandbox_server.h"
#include "tests/integration/gateway_fixture.h"
#include "tests/integration/sandbox_helpers.h"
#include "tests/support/temp_dir.h"

namespace inspection::testing {
namespace {

std::string ServiceConfigText() {
  std::ifstream file(std::string(SOURCE_DIR) + "/clients/service_config.json");
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

// "/inspection.v1.TokenService/GetTokenStatus" for every name of one methodConfig.
std::set<std::string> Names(const nlohmann::json& method_config) {
  std::set<std::string> names;
  for (const auto& name : method_config.at("name")) {
    names.insert(absl::StrCat("/", name.at("service").get<std::string>(), "/",
                              name.at("method").get<std::string>()));
  }
  return names;
}

TEST(ServiceConfigTest, RetriesExactlyTheSafeAndIdempotentRpcsOnUnavailable) {
  const nlohmann::json config = nlohmann::json::parse(ServiceConfigText());
  std::set<std::string> retried;
  std::set<std::string> listed;
  for (const auto& method_config : config.at("methodConfig")) {
    const std::set<std::string> names = Names(method_config);
    listed.insert(names.begin(), names.end());
    if (!method_config.contains("retryPolicy")) continue;
    retried.insert(names.begin(), names.end());
    const auto& policy = method_config.at("retryPolicy");
    EXPECT_EQ(policy.at("retryableStatusCodes"), nlohmann::json::array({"UNAVAILABLE"}));
    EXPECT_LE(policy.at("maxAttempts").get<int>(), 5);
  }
  std::set<std::string> expected;
  for (const routes::Route& route : routes::AllRoutes()) {
    if (route.idempotency != routes::Idempotency::kNonIdempotent) {
      expected.insert(route.grpc_method);
    }
  }
  EXPECT_EQ(retried, expected) << "retried: the unary RPCs whose vendor call is safe or "
                                  "idempotent, and nothing else";
  for (const char* never :
       {"/inspection.v1.TokenService/CreateToken", "/inspection.v1.DamageService/DetectDamage",
        "/inspection.v1.EventConfigService/TestWebhook",
        "/inspection.v1.DamageService/StreamDamageResults", "/inspection.v1.EventService/Subscribe",
        "/inspection.v1.TokenService/WatchTokenStatus"}) {
    EXPECT_EQ(retried.count(never), 0u) << never;
    EXPECT_EQ(listed.count(never), 1u) << never << " is named (without a retry policy)";
  }
  EXPECT_TRUE(config.contains("retryThrottling"));
}

// The gateway answers UNAVAILABLE once its own retries are spent (the vendor answered 503
// three times); a channel with the shipped service config retries and gets the answer.
TEST(ServiceConfigTest, AChannelWithItGetsThroughATransientUnavailable) {
  auto sandbox = sandbox::SandboxServer::Start(sandbox::SandboxOptions{});
  ASSERT_TRUE(sandbox.ok()) << sandbox.status();
  TempDir temp;
  server::GatewayServerOptions options;
  options.grpc_addr = "127.0.0.1:0";
  options.vendor.base_url = (*sandbox)->BaseUrl();
  options.vendor.api_key = sandbox::kDefaultSandboxApiKey;
  options.webapp_url = (*sandbox)->WebappUrl();
  options.event_log_url = "sqlite:" + temp.File("events.db");
  options.admin_port = -1;
  options.retry.backoff.base = absl::Milliseconds(1);
  options.retry.backoff.cap = absl::Milliseconds(2);
  options.circuit_breaker.consecutive_failures = 0;  // the breaker stays out of this
  auto gateway = server::GatewayServer::Start(std::move(options));
  ASSERT_TRUE(gateway.ok()) << gateway.status();
  const std::string target = absl::StrCat("127.0.0.1:", (*gateway)->grpc_port());

  v1::CreateTokenResponse created;
  ASSERT_TRUE(
      v1::TokenService::NewStub(grpc::CreateChannel(target, grpc::InsecureChannelCredentials()))
          ->CreateToken(GatewayTest::Context().get(), ValidTokenRequest(), &created)
          .ok());
  v1::GetTokenStatusRequest request;
  request.set_uid(created.token().uid());
  auto fail_three_times = [&] {
    auto rules = sandbox::ParseFaultRules(nlohmann::json::parse(
        R"({"route": "get_token_status", "kind": "error", "status": 503, "times": 3})"));
    ASSERT_TRUE(rules.ok()) << rules.status();
    (*sandbox)->faults().AddRules(*rules);
  };

  // Without the service config: the caller sees the UNAVAILABLE.
  fail_three_times();
  v1::GetTokenStatusResponse response;
  grpc::ChannelArguments plain;
  plain.SetInt(GRPC_ARG_ENABLE_RETRIES, 1);
  auto context = GatewayTest::Context(30000);
  grpc::Status status =
      v1::TokenService::NewStub(
          grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), plain))
          ->GetTokenStatus(context.get(), request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE) << status.error_message();
  // An error is Trailers-Only (what lets a retry policy retry it): no response headers,
  // the request id in the trailers.
  EXPECT_EQ(context->GetServerInitialMetadata().count("x-request-id"), 0u);
  EXPECT_EQ(context->GetServerTrailingMetadata().count("x-request-id"), 1u);

  // With it: the second attempt gets the token's status.
  fail_three_times();
  grpc::ChannelArguments configured;
  configured.SetServiceConfigJSON(ServiceConfigText());
  status = v1::TokenService::NewStub(
               grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), configured))
               ->GetTokenStatus(GatewayTest::Context(30000).get(), request, &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.token().uid(), created.token().uid());
}

}  // namespace
}  // namespace inspection::testing
