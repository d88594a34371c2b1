// How vendor failures reach gRPC callers: every HTTP status class, unreadable bodies,
// connection failures and deadlines, with the vendor's body preserved.
#include "tests/integration/gateway_fixture.h"
#include "tests/support/wait.h"

namespace inspection::testing {
namespace {

class VendorErrorsTest : public GatewayTest {
 protected:
  grpc::Status CallStatus(int timeout_ms = 5000) {
    v1::GetTokenStatusRequest request;
    request.set_uid("u1");
    v1::GetTokenStatusResponse response;
    grpc::Status status = token_->GetTokenStatus(Context(timeout_ms).get(), request, &response);
    if (!status.ok()) {
      // Never a half-filled message alongside an error.
      EXPECT_EQ(response.ByteSizeLong(), 0u);
    }
    return status;
  }
};

struct HttpCase {
  int http_status;
  grpc::StatusCode code;
};
void PrintTo(const HttpCase& c, std::ostream* os) {
  *os << "HTTP " << c.http_status << " -> gRPC " << static_cast<int>(c.code);
}

class HttpStatusMappingTest : public VendorErrorsTest,
                              public ::testing::WithParamInterface<HttpCase> {};

TEST_P(HttpStatusMappingTest, MapsStatusAndPreservesTheVendorBody) {
  const HttpCase c = GetParam();
  const std::string body = absl::StrCat(R"({"error": "vendor says )", c.http_status, R"("})");
  VendorReplies(c.http_status, body);
  grpc::Status status = CallStatus();
  EXPECT_EQ(status.error_code(), c.code) << c.http_status;
  auto info = ErrorInfoOf(status);
  EXPECT_EQ(info.reason(), "VENDOR_HTTP_ERROR");
  EXPECT_EQ(info.domain(), "inspection-gateway");
  EXPECT_EQ(info.metadata().at("http_status"), absl::StrCat(c.http_status));
  EXPECT_EQ(info.metadata().at("vendor_body"), body);
  EXPECT_EQ(info.metadata().at("route"), "get_token_status");
  EXPECT_NE(status.error_message().find(absl::StrCat("vendor says ", c.http_status)),
            std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(EveryClass, HttpStatusMappingTest,
                         ::testing::Values(HttpCase{400, grpc::StatusCode::INVALID_ARGUMENT},
                                           HttpCase{401, grpc::StatusCode::UNAUTHENTICATED},
                                           HttpCase{403, grpc::StatusCode::PERMISSION_DENIED},
                                           HttpCase{404, grpc::StatusCode::NOT_FOUND},
                                           HttpCase{409, grpc::StatusCode::ABORTED},
                                           HttpCase{422, grpc::StatusCode::INVALID_ARGUMENT},
                                           HttpCase{429, grpc::StatusCode::RESOURCE_EXHAUSTED},
                                           HttpCase{405, grpc::StatusCode::FAILED_PRECONDITION},
                                           HttpCase{500, grpc::StatusCode::UNAVAILABLE},
                                           HttpCase{502, grpc::StatusCode::UNAVAILABLE},
                                           HttpCase{503, grpc::StatusCode::UNAVAILABLE},
                                           HttpCase{504, grpc::StatusCode::UNAVAILABLE},
                                           HttpCase{302, grpc::StatusCode::UNKNOWN}),
                         [](const ::testing::TestParamInfo<HttpCase>& info) {
                           return absl::StrCat("Http", info.param.http_status);
                         });

TEST_F(VendorErrorsTest, RateLimitCarriesRetryInfo) {
  ScriptedResponse response;
  response.status = 429;
  response.body = R"({"message": "slow down"})";
  response.headers = {{"Retry-After", "7"}};
  vendor_.RespondWith(response);
  grpc::Status status = CallStatus();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  bool found = false;
  const google::rpc::Status details = Details(status);
  for (const auto& any : details.details()) {
    google::rpc::RetryInfo retry;
    if (any.UnpackTo(&retry)) {
      found = true;
      EXPECT_EQ(retry.retry_delay().seconds(), 7);
    }
  }
  EXPECT_TRUE(found) << "no RetryInfo";
}

TEST_F(VendorErrorsTest, MalformedJsonIsItsOwnReason) {
  VendorReplies(200, R"({"token": {"uid": "u1", )");
  grpc::Status status = CallStatus();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
  auto info = ErrorInfoOf(status);
  EXPECT_EQ(info.reason(), "VENDOR_MALFORMED_RESPONSE");
  EXPECT_EQ(info.metadata().at("vendor_body"), R"({"token": {"uid": "u1", )");
}

TEST_F(VendorErrorsTest, WrongShapeIsItsOwnReason) {
  VendorReplies(200, R"(["not", "an", "object"])");
  grpc::Status status = CallStatus();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(ErrorInfoOf(status).reason(), "VENDOR_UNEXPECTED_RESPONSE");
}

// A hostile vendor: 300,000 levels of `[` on GetWebhookConfig, whose answer the gateway
// re-serializes after sealing the webhook key. Before upstream.max_json_depth that recursion
// ran off the end of the thread's stack and took the whole gateway down; now the call fails
// on its own and the next one is answered.
TEST_F(VendorErrorsTest, AnAnswerNestedTooDeeplyFailsTheCallNotTheGateway) {
  constexpr int kDepth = 300000;
  VendorReplies(200, std::string(kDepth, '[') + std::string(kDepth, ']'));
  v1::GetWebhookConfigRequest request;
  v1::GetWebhookConfigResponse response;
  grpc::Status status = event_config_->GetWebhookConfig(Context(5000).get(), request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
  auto info = ErrorInfoOf(status);
  EXPECT_EQ(info.reason(), "VENDOR_MALFORMED_RESPONSE");
  EXPECT_NE(status.error_message().find("deeper than 512 levels"), std::string::npos)
      << status.error_message();
  EXPECT_EQ(info.metadata().at("vendor_body").size(), 4096u);  // bounded, not 600 KB

  VendorReplies(200, R"({"webhookHeaderKey": null, "webhookUrl": null,
                         "webhookUrlV2": "https://hooks.example.test/v2"})");
  response.Clear();
  status = event_config_->GetWebhookConfig(Context(5000).get(), request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.config().webhook_url_v2(), "https://hooks.example.test/v2");
}

// An answer longer than upstream.max_response_bytes: RESOURCE_EXHAUSTED with its own reason
// (it used to be VENDOR_CONNECTION_LOST, which the gateway retried: the same request got the
// same answer), sent once; on a creation, the token may exist, so the outcome is unknown.
TEST_F(VendorErrorsTest, AnAnswerOverTheSizeLimitIsItsOwnReasonAndIsSentOnce) {
  StartGateway(vendor_.BaseUrl(),
               [](server::GatewayServerOptions& options) { options.max_response_bytes = 4096; });
  VendorReplies(200, R"({"token": {"uid": "u1", "pad": ")" + std::string(8192, 'x') + R"("}})");

  grpc::Status status = CallStatus();  // GetTokenStatus: idempotent, retried when transient
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
  const auto info = ErrorInfoOf(status);
  ASSERT_EQ(info.reason(), "VENDOR_RESPONSE_TOO_LARGE");
  EXPECT_EQ(info.metadata().at("transport_error"), "too_large");
  EXPECT_EQ(info.metadata().at("request_sent"), "true");
  EXPECT_NE(status.error_message().find("upstream.max_response_bytes"), std::string::npos)
      << status.error_message();
  EXPECT_NE(status.error_message().find("limit 4096 bytes"), std::string::npos)
      << status.error_message();
  EXPECT_EQ(vendor_.RequestCount(), 1u) << "an answer too large was asked for again";

  const v1::CreateTokenRequest create = PlaceholderTokenRequest();
  v1::CreateTokenResponse created;
  status = token_->CreateToken(Context(5000).get(), create, &created);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNKNOWN) << status.error_message();
  const auto outcome = ErrorInfoOf(status);
  ASSERT_EQ(outcome.reason(), "OUTCOME_UNKNOWN");
  EXPECT_EQ(outcome.metadata().at("cause"), "VENDOR_RESPONSE_TOO_LARGE");
  EXPECT_EQ(vendor_.RequestCount(), 2u);

  // The limit is per answer: a short one on the same gateway is read.
  VendorReplies(200, R"({"token": {"uid": "u1"}})");
  v1::GetTokenStatusRequest request;
  request.set_uid("u1");
  v1::GetTokenStatusResponse response;
  status = token_->GetTokenStatus(Context(5000).get(), request, &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(vendor_.RequestCount(), 3u);
}

TEST_F(VendorErrorsTest, TruncatedBodyIsAConnectionError) {
  ScriptedResponse response;
  response.status = 200;
  response.body = R"({"token": {"uid": "u1"}, "webApiVersion": "v2"})";
  response.kind = ScriptedResponse::Kind::kTruncated;
  vendor_.RespondWith(response);
  grpc::Status status = CallStatus();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(ErrorInfoOf(status).reason(), "VENDOR_CONNECTION_LOST");
}

TEST_F(VendorErrorsTest, ConnectionRefusedIsUnavailable) {
  StartGateway(absl::StrCat("http://127.0.0.1:", UnusedClosedPort()));
  grpc::Status status = CallStatus();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
  auto info = ErrorInfoOf(status);
  EXPECT_EQ(info.reason(), "VENDOR_UNREACHABLE");
  EXPECT_EQ(info.metadata().at("request_sent"), "false");
}

TEST_F(VendorErrorsTest, CallerDeadlineBoundsTheVendorCall) {
  ScriptedResponse response;
  response.kind = ScriptedResponse::Kind::kHold;
  response.body = R"({"token": {"uid": "u1"}})";
  vendor_.RespondWith(response);
  grpc::Status status = CallStatus(/*timeout_ms=*/300);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_EQ(vendor_.RequestCount(), 1u);
  vendor_.ReleaseHeld();
}

TEST_F(VendorErrorsTest, TheApiKeyNeverLeaksThroughAnErrorBody) {
  VendorReplies(401, absl::StrCat(R"({"message": "invalid key )", kApiKey, R"("})"));
  grpc::Status status = CallStatus();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(status.error_message().find(kApiKey), std::string::npos);
  EXPECT_EQ(status.error_details().find(kApiKey), std::string::npos);
  EXPECT_NE(ErrorInfoOf(status).metadata().at("vendor_body").find("[redacted]"), std::string::npos);
}

}  // namespace
}  // namespace inspection::testing
