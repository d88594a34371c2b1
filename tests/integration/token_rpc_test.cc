// TokenService against a scripted fake vendor: exact upstream request, decoded response.
#include "tests/integration/gateway_fixture.h"

namespace inspection::testing {
namespace {

class TokenRpcTest : public GatewayTest {};

TEST_F(TokenRpcTest, CreateTokenSendsTheSpecBodyAndReturnsTheCustomerUrl) {
  VendorReplies(200, R"({
    "token": {
      "expired": false, "id": "tok_1", "createdAt": "2024-03-01T10:00:00.000Z",
      "updatedAt": "2024-03-01T10:00:00.000Z", "tradeinVehicle": true, "tradeinStatus": 0,
      "tradeinStatusUpdatedAt": "2024-03-01T10:00:00.000Z", "sendingType": null,
      "vehiclePtr": {"id": "veh_1"}, "uid": "Zx81kQ", "expiresIn": "2024-05-30T10:00:00.000Z",
      "options": {"fastTrack": false, "shootInspect": true, "cost": false, "report": false,
                  "downloadRoi": false, "loadInspection": false},
      "APITokenPtr": {"id": "api_1"}
    },
    "webApiVersion": "v2.5"
  })");

  v1::CreateTokenResponse response;
  grpc::Status status = token_->CreateToken(Context().get(), PlaceholderTokenRequest(), &response);
  ASSERT_TRUE(status.ok()) << status.error_message();

  auto sent = OnlyRequest();
  EXPECT_EQ(sent.method, "POST");
  EXPECT_EQ(sent.path, "/apiV1/tokenmanager/token");
  EXPECT_EQ(sent.query, "");
  ASSERT_NE(sent.Header("x-api-key"), nullptr);
  EXPECT_EQ(*sent.Header("x-api-key"), kApiKey);
  ASSERT_NE(sent.Header("content-type"), nullptr);
  EXPECT_EQ(*sent.Header("content-type"), "application/json");
  EXPECT_EQ(Json(sent.body), Json(R"({
    "options": {"shootInspect": true, "fastTrack": false, "cost": false, "report": false,
                "downloadRoi": false},
    "tradeIn": {"tradeinVehicle": true, "immat": "AB-123-CD", "vin": "VF1AB000123456789",
                "sendingType": null},
    "customer": {"clientType": "customer", "email": "<EMAIL>", "firstname": "<FIRST_NAME>",
                 "lastname": "<LAST_NAME>", "gender": null, "phone": "<PHONE>",
                 "locale": "nl-BE"},
    "creatorUserId": null,
    "validity": 90
  })"));

  ExpectProtoEq(response, Parse<v1::CreateTokenResponse>(R"pb(
                  token {
                    expired: false
                    id: "tok_1"
                    created_at: "2024-03-01T10:00:00.000Z"
                    updated_at: "2024-03-01T10:00:00.000Z"
                    tradein_vehicle: true
                    tradein_status: TRADEIN_STATUS_CREATED
                    tradein_status_raw: 0
                    tradein_status_updated_at: "2024-03-01T10:00:00.000Z"
                    sending_type: SENDING_TYPE_NONE
                    vehicle_ptr { id: "veh_1" }
                    uid: "Zx81kQ"
                    expires_in: "2024-05-30T10:00:00.000Z"
                    options {
                      fast_track: false
                      shoot_inspect: true
                      cost: false
                      report: false
                      download_roi: false
                      load_inspection: false
                    }
                    api_token_ptr { id: "api_1" }
                  }
                  web_api_version: "v2.5"
                  customer_url: "https://webapp.example.test/nl-BE/services/Zx81kQ"
                  device_id: "Zx81kQ-pwa"
                )pb"));
}

TEST_F(TokenRpcTest, CreateTokenSendsSendingTypeZeroForEmail) {
  VendorReplies(200, R"({"token": {"uid": "u1", "sendingType": 0}, "webApiVersion": "v2.5"})");
  auto request = PlaceholderTokenRequest();
  request.mutable_trade_in()->set_sending_type(v1::SENDING_TYPE_EMAIL);
  request.mutable_customer()->set_gender(v1::GENDER_WOMEN);
  request.set_creator_user_id("agent-7");
  v1::CreateTokenResponse response;
  ASSERT_TRUE(token_->CreateToken(Context().get(), request, &response).ok());
  auto body = Json(OnlyRequest().body);
  EXPECT_EQ(body["tradeIn"]["sendingType"], 0);
  EXPECT_EQ(body["customer"]["gender"], "women");
  EXPECT_EQ(body["creatorUserId"], "agent-7");
  EXPECT_EQ(response.token().sending_type(), v1::SENDING_TYPE_EMAIL);
  EXPECT_EQ(response.token().sending_type_raw(), 0);
}

TEST_F(TokenRpcTest, InvalidTokenRequestIsRejectedBeforeTheVendorIsCalled) {
  auto request = PlaceholderTokenRequest();
  request.mutable_options()->set_cost(true);
  request.mutable_customer()->set_phone("0612345678");
  request.set_validity(0);
  v1::CreateTokenResponse response;
  grpc::Status status = token_->CreateToken(Context().get(), request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  auto bad_request = BadRequestOf(status);
  std::vector<std::string> fields;
  for (const auto& violation : bad_request.field_violations()) fields.push_back(violation.field());
  EXPECT_EQ(fields, (std::vector<std::string>{"options.cost", "customer.phone", "validity"}));
  EXPECT_EQ(ErrorInfoOf(status).reason(), "INVALID_REQUEST");
  EXPECT_EQ(vendor_.RequestCount(), 0u);
}

TEST_F(TokenRpcTest, GetTokenStatusBuildsTheDeviceId) {
  VendorReplies(200, R"({
    "token": {
      "expired": false, "id": "tok_1", "tradeinVehicle": true, "tradeinStatus": 3,
      "sendingType": 2, "uid": "Zx81kQ", "deviceId": "Zx81kQ-pwa",
      "options": {"fastTrack": true, "shootInspect": true, "cost": false, "report": false,
                  "downloadRoi": false, "loadInspection": false, "thirdParty": false},
      "inspectionPtr": {"id": "insp_1", "type": 4, "percentDamage": null},
      "customerPtr": {"id": "cus_1"}, "creatorUserPtr": {"id": "usr_1"}
    },
    "webApiVersion": "v2"
  })");
  v1::GetTokenStatusRequest request;
  request.set_uid("Zx81kQ");
  v1::GetTokenStatusResponse response;
  grpc::Status status = token_->GetTokenStatus(Context().get(), request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();

  auto sent = OnlyRequest();
  EXPECT_EQ(sent.method, "GET");
  EXPECT_EQ(sent.path, "/apiV1/tokenmanager/test");
  EXPECT_EQ(sent.query, "deviceId=Zx81kQ-pwa");
  EXPECT_EQ(sent.body, "");
  EXPECT_EQ(sent.Header("content-type"), nullptr);
  ASSERT_NE(sent.Header("x-api-key"), nullptr);
  EXPECT_EQ(*sent.Header("x-api-key"), kApiKey);

  ExpectProtoEq(response, Parse<v1::GetTokenStatusResponse>(R"pb(
                  token {
                    expired: false
                    id: "tok_1"
                    tradein_vehicle: true
                    tradein_status: TRADEIN_STATUS_PICTURES_TAKEN
                    tradein_status_raw: 3
                    sending_type: SENDING_TYPE_EMAIL_AND_SMS
                    sending_type_raw: 2
                    uid: "Zx81kQ"
                    device_id: "Zx81kQ-pwa"
                    options {
                      fast_track: true
                      shoot_inspect: true
                      cost: false
                      report: false
                      download_roi: false
                      load_inspection: false
                      third_party: false
                    }
                    inspection_ptr {
                      id: "insp_1"
                      type: 4
                      percent_damage { null_value: NULL_VALUE }
                    }
                    customer_ptr { id: "cus_1" }
                    creator_user_ptr { id: "usr_1" }
                  }
                  web_api_version: "v2"
                )pb"));
}

TEST_F(TokenRpcTest, UnknownStatusAndUnknownFieldsAreKept) {
  VendorReplies(200, R"({"token": {"uid": "u1", "tradeinStatus": 9, "loyalty": {"tier": "gold"}},
                         "webApiVersion": "v3", "serverTime": "2024-01-01T00:00:00Z"})");
  v1::GetTokenStatusRequest request;
  request.set_uid("u1");
  v1::GetTokenStatusResponse response;
  ASSERT_TRUE(token_->GetTokenStatus(Context().get(), request, &response).ok());
  EXPECT_EQ(response.token().tradein_status(), v1::TRADEIN_STATUS_UNSPECIFIED);
  EXPECT_EQ(response.token().tradein_status_raw(), 9);
  EXPECT_EQ(response.token()
                .unknown_fields()
                .fields()
                .at("loyalty")
                .struct_value()
                .fields()
                .at("tier")
                .string_value(),
            "gold");
  EXPECT_EQ(response.unknown_fields().fields().at("serverTime").string_value(),
            "2024-01-01T00:00:00Z");
}

}  // namespace
}  // namespace inspection::testing
