// EventConfigService against a scripted fake vendor.
#include "absl/strings/str_cat.h"
#include "adapters/vendor/event_config_mapper.h"
#include "tests/integration/gateway_fixture.h"

namespace inspection::testing {
namespace {

class EventConfigRpcTest : public GatewayTest {};

TEST_F(EventConfigRpcTest, GetWebhookConfigKeepsNullsUnset) {
  VendorReplies(200, R"({"webhookHeaderKey": null, "webhookUrl": null, "webhookUrlV2": null})");
  v1::GetWebhookConfigResponse response;
  grpc::Status status =
      event_config_->GetWebhookConfig(Context().get(), v1::GetWebhookConfigRequest(), &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  auto sent = OnlyRequest();
  EXPECT_EQ(sent.method, "GET");
  EXPECT_EQ(sent.path, "/apiV1/eventmanager/configwebhook");
  EXPECT_EQ(sent.body, "");
  ASSERT_NE(sent.Header("x-api-key"), nullptr);
  ExpectProtoEq(response, Parse<v1::GetWebhookConfigResponse>("config {}"));
  EXPECT_FALSE(response.config().has_webhook_url_v2());
}

TEST_F(EventConfigRpcTest, UpdateWebhookConfigPutsTheDestination) {
  VendorReplies(200, R"({"webhookHeaderKey": "whk-123", "webhookUrl": null,
                         "webhookUrlV2": "https://hooks.example.test/v2"})");
  v1::UpdateWebhookConfigRequest request;
  request.set_webhook_url_v2("https://hooks.example.test/v2");
  request.set_webhook_header_key("whk-123");
  v1::UpdateWebhookConfigResponse response;
  grpc::Status status = event_config_->UpdateWebhookConfig(Context().get(), request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  auto sent = OnlyRequest();
  EXPECT_EQ(sent.method, "PUT");
  EXPECT_EQ(sent.path, "/apiV1/eventmanager/configwebhook");
  EXPECT_EQ(*sent.Header("content-type"), "application/json");
  EXPECT_EQ(Json(sent.body), Json(R"({"webhookUrlV2": "https://hooks.example.test/v2",
                                     "webhookHeaderKey": "whk-123"})"));
  // The key the caller just set is not echoed back: its fingerprint is.
  ExpectProtoEq(response, Parse<v1::UpdateWebhookConfigResponse>(absl::StrCat(
                              R"pb(config { webhook_header_key_set: true
                                            webhook_url_v2: "https://hooks.example.test/v2"
                                            webhook_header_key_sha256_prefix: ")pb",
                              vendor::WebhookKeySha256Prefix("whk-123"), R"pb(" })pb")));
}

// The vendor's webhookHeaderKey is the secret the receiver authenticates deliveries with:
// whoever reads it can forge events. No answer carries it, cached or not, and no unknown
// field smuggles it out.
TEST_F(EventConfigRpcTest, GetWebhookConfigNeverReturnsTheKeyNotEvenFromTheCache) {
  VendorReplies(200, R"({"webhookHeaderKey": "whk-secret-9f8e", "webhookUrl": null,
                         "webhookUrlV2": "https://hooks.example.test/v2"})");
  for (int i = 0; i < 2; ++i) {  // the second answer comes from the cache
    v1::GetWebhookConfigResponse response;
    grpc::Status status =
        event_config_->GetWebhookConfig(Context().get(), v1::GetWebhookConfigRequest(), &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_TRUE(response.config().webhook_header_key_set());
    EXPECT_EQ(response.config().webhook_header_key_sha256_prefix(),
              vendor::WebhookKeySha256Prefix("whk-secret-9f8e"));
    EXPECT_EQ(response.config().webhook_header_key_sha256_prefix().size(), 12u);
    EXPECT_FALSE(response.config().has_unknown_fields()) << response.ShortDebugString();
    EXPECT_EQ(response.SerializeAsString().find("whk-secret"), std::string::npos);
  }
  EXPECT_EQ(vendor_.RequestCount(), 1u);
}

TEST_F(EventConfigRpcTest, ListEventConfigsKeepsUnknownEventNames) {
  VendorReplies(200, R"([
    {"eventName": "createReport", "webhook": true, "companyEmail": false,
     "companyEmailAddress": null, "customerEmail": false, "customerSMS": false,
     "senderEmail": null, "senderName": null},
    {"eventName": "futureEvent", "webhook": false, "companyEmail": true,
     "companyEmailAddress": "ops@example.test", "customerEmail": false, "customerSMS": true,
     "senderEmail": "noreply@example.test", "senderName": "Ops"}])");
  v1::ListEventConfigsResponse response;
  grpc::Status status =
      event_config_->ListEventConfigs(Context().get(), v1::ListEventConfigsRequest(), &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(OnlyRequest().path, "/apiV1/eventmanager/configevent");
  ExpectProtoEq(response, Parse<v1::ListEventConfigsResponse>(R"pb(
                  event_configs {
                    event_name: EVENT_NAME_CREATE_REPORT
                    event_name_raw: "createReport"
                    webhook: true
                    company_email: false
                    customer_email: false
                    customer_sms: false
                  }
                  event_configs {
                    event_name: EVENT_NAME_UNSPECIFIED
                    event_name_raw: "futureEvent"
                    webhook: false
                    company_email: true
                    company_email_address: "ops@example.test"
                    customer_email: false
                    customer_sms: true
                    sender_email: "noreply@example.test"
                    sender_name: "Ops"
                  }
                )pb"));
}

TEST_F(EventConfigRpcTest, ListEventConfigsRejectsANonArrayBody) {
  VendorReplies(200, R"({"eventName": "createReport"})");
  v1::ListEventConfigsResponse response;
  grpc::Status status =
      event_config_->ListEventConfigs(Context().get(), v1::ListEventConfigsRequest(), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(ErrorInfoOf(status).reason(), "VENDOR_UNEXPECTED_RESPONSE");
  EXPECT_EQ(ErrorInfoOf(status).metadata().at("vendor_body"), R"({"eventName": "createReport"})");
}

TEST_F(EventConfigRpcTest, UpdateEventConfigPutsNameAndFlag) {
  VendorReplies(200, R"({"eventName": "createReport", "webhook": true, "companyEmail": false,
                         "companyEmailAddress": null, "customerEmail": false,
                         "customerSMS": false, "senderEmail": null, "senderName": null})");
  v1::UpdateEventConfigRequest request;
  request.set_event_name(v1::EVENT_NAME_CREATE_REPORT);
  request.set_webhook(true);
  v1::UpdateEventConfigResponse response;
  grpc::Status status = event_config_->UpdateEventConfig(Context().get(), request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  auto sent = OnlyRequest();
  EXPECT_EQ(sent.method, "PUT");
  EXPECT_EQ(sent.path, "/apiV1/eventmanager/configevent");
  EXPECT_EQ(Json(sent.body), Json(R"({"eventName": "createReport", "webhook": true})"));
  EXPECT_EQ(response.config().event_name(), v1::EVENT_NAME_CREATE_REPORT);
  EXPECT_TRUE(response.config().webhook());
}

TEST_F(EventConfigRpcTest, UpdateEventConfigSendsARawNameVerbatim) {
  VendorReplies(200, R"({"eventName": "futureEvent", "webhook": false})");
  v1::UpdateEventConfigRequest request;
  request.set_event_name_raw("futureEvent");
  request.set_webhook(false);
  v1::UpdateEventConfigResponse response;
  ASSERT_TRUE(event_config_->UpdateEventConfig(Context().get(), request, &response).ok());
  EXPECT_EQ(Json(OnlyRequest().body), Json(R"({"eventName": "futureEvent", "webhook": false})"));
}

TEST_F(EventConfigRpcTest, TestWebhookSendsParametersInTheQueryByDefault) {
  VendorReplies(200, R"({"status": "send"})");
  v1::TestWebhookRequest request;
  request.set_event_name(v1::EVENT_NAME_DETECTION_FINISHED);
  request.set_inspection_id("insp_9");
  v1::TestWebhookResponse response;
  grpc::Status status = event_config_->TestWebhook(Context().get(), request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  auto sent = OnlyRequest();
  EXPECT_EQ(sent.method, "GET");
  EXPECT_EQ(sent.path, "/apiV1/eventmanager/testwebhook");
  EXPECT_EQ(sent.query, "eventName=detectionFinished&inspectionId=insp_9");
  EXPECT_EQ(sent.body, "");
  ExpectProtoEq(response, Parse<v1::TestWebhookResponse>(R"pb(status: "send")pb"));
}

TEST_F(EventConfigRpcTest, TestWebhookParametersCanGoInTheBody) {
  StartGateway(vendor_.BaseUrl(), [](server::GatewayServerOptions& options) {
    options.mapper.test_webhook_params = vendor::ParamsPlacement::kBody;
  });
  VendorReplies(200, R"({"status": "send"})");
  v1::TestWebhookRequest request;
  request.set_event_name(v1::EVENT_NAME_NEW_INSPECTION);
  v1::TestWebhookResponse response;
  ASSERT_TRUE(event_config_->TestWebhook(Context().get(), request, &response).ok());
  auto sent = OnlyRequest();
  EXPECT_EQ(sent.method, "GET");
  EXPECT_EQ(sent.query, "");
  ASSERT_NE(sent.Header("content-type"), nullptr);
  EXPECT_EQ(*sent.Header("content-type"), "application/json");
  // cpp-httplib (the fake) does not read bodies of GET requests, so the body itself is
  // checked in event_config_mapper_test; here its length proves it was sent.
  ASSERT_NE(sent.Header("content-length"), nullptr);
  EXPECT_EQ(*sent.Header("content-length"),
            std::to_string(std::string(R"({"eventName":"newInspection"})").size()));
}

}  // namespace
}  // namespace inspection::testing
