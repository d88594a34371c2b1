// The per-resource mappers: each request encoder against the spec's JSON, and the quirks
// each resource adds on top of the generic codec.
#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

#include "adapters/vendor/damage_mapper.h"
#include "adapters/vendor/event_config_mapper.h"
#include "adapters/vendor/event_mapper.h"
#include "adapters/vendor/image_mapper.h"
#include "adapters/vendor/token_mapper.h"
#include "adapters/vendor/vendor_mapping.h"
#include "adapters/vendor/vendor_routes.h"
#include "inspection/v1/inspection.pb.h"

namespace inspection::vendor {
namespace {

// The route annotation of an RPC of the API, as the generic mapping reads it.
const v1::VendorRoute& RouteOf(const std::string& rpc) {
  return *VendorRouteOf(*FindApiMethod(rpc));
}

// The spec's event names, spelled once (EventName's vendor_string annotations): every name
// maps back to its enum value.
TEST(SpecEventNamesTest, AreTheSpecsEightNamesFromTheEnumAnnotations) {
  EXPECT_EQ(SpecEventNames(),
            (std::vector<std::string>{"newInspection", "detectionFinished", "createReport",
                                      "shareUpdatedReport", "deleteInspection", "tradeinVehicle",
                                      "newDamage", "chaseUpVehicle"}));
  for (const std::string& name : SpecEventNames()) {
    EXPECT_NE(EventNameFromString(name), v1::EVENT_NAME_UNSPECIFIED) << name;
  }
}

using nlohmann::json;

template <class Message>
Message Parse(const std::string& text) {
  Message message;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &message)) << text;
  return message;
}

TEST(TokenMapperTest, FillsTheFixedFieldsAndNulls) {
  auto request = Parse<v1::CreateTokenRequest>(R"pb(
    options { shoot_inspect: true fast_track: true }
    trade_in { sending_type: SENDING_TYPE_SMS }
    customer {
      email: "a@b.test"
      firstname: "A"
      lastname: "B"
      phone: "+33612345678"
      locale: LOCALE_EN
    }
    validity: 30
  )pb");
  VendorRequest out = EncodeCreateTokenRequest(request);
  ASSERT_TRUE(out.body.has_value());
  EXPECT_EQ(*out.body, json::parse(R"({
    "options": {"shootInspect": true, "fastTrack": true, "cost": false, "report": false,
                "downloadRoi": false},
    "tradeIn": {"tradeinVehicle": true, "sendingType": 1},
    "customer": {"clientType": "customer", "email": "a@b.test", "firstname": "A",
                 "lastname": "B", "gender": null, "phone": "+33612345678", "locale": "en"},
    "creatorUserId": null, "validity": 30})"));
  EXPECT_TRUE(out.query.empty());
  EXPECT_TRUE(out.path_params.empty());
}

TEST(TokenMapperTest, CustomerUrlAndDeviceId) {
  EXPECT_EQ(CustomerUrl("https://app.test", "nl-BE", "u1"), "https://app.test/nl-BE/services/u1");
  EXPECT_EQ(DeviceIdForUid("u1"), "u1-pwa");
  EXPECT_EQ(LocaleCode(v1::LOCALE_NO), "no");
  EXPECT_EQ(LocaleCode(v1::LOCALE_UNSPECIFIED), "");
  v1::CreateTokenResponse response;
  ASSERT_TRUE(DecodeCreateTokenResponse(json::parse(R"({"token": {"uid": "u9"}})"),
                                        "https://app.test", "de", &response, nullptr)
                  .ok());
  EXPECT_EQ(response.customer_url(), "https://app.test/de/services/u9");
  EXPECT_EQ(response.device_id(), "u9-pwa");
}

TEST(TokenMapperTest, ATokenWithoutUidIsRejected) {
  v1::CreateTokenResponse response;
  EXPECT_EQ(DecodeCreateTokenResponse(json::parse(R"({"token": {"id": "t"}})"), "https://a.test",
                                      "en", &response, nullptr)
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(TokenMapperTest, StatusQueryUsesTheDeviceId) {
  v1::GetTokenStatusRequest request;
  request.set_uid("abc");
  VendorRequest out = EncodeGetTokenStatusRequest(request);
  ASSERT_EQ(out.query.size(), 1u);
  EXPECT_EQ(out.query[0], (std::pair<std::string, std::string>{"deviceId", "abc-pwa"}));
  EXPECT_FALSE(out.body.has_value());
}

TEST(ImageMapperTest, KeySpellings) {
  auto request = Parse<v1::RemoveBackgroundRequest>(R"pb(
    url: "https://i.test/a.jpg"
    manual_top_left_position_ratio: [ 0.5, 0.5 ]
    wheel_box: [ 1, 2, 3, 4 ]
  )pb");
  MapperOptions options;
  options.position_ratio_key = KeySpelling::kSingular;
  options.wheel_box_key = KeySpelling::kPlural;
  json body = *EncodeRemoveBackgroundRequest(request, options).body;
  EXPECT_TRUE(body.contains("manualTopLeftPositionRatio"));
  EXPECT_FALSE(body.contains("manualTopLeftPositionRatios"));
  EXPECT_FALSE(body.contains("wheelBox"));
  EXPECT_EQ(body["wheelsBox"], json::parse("[1.0, 2.0, 3.0, 4.0]"));
  options.position_ratio_key = KeySpelling::kBoth;
  body = *EncodeRemoveBackgroundRequest(request, options).body;
  EXPECT_EQ(body["manualTopLeftPositionRatio"], body["manualTopLeftPositionRatios"]);
}

TEST(ImageMapperTest, ColourBackgroundAndBlurFlags) {
  auto request = Parse<v1::RemoveBackgroundRequest>(
      R"pb(
        url: "https://i.test/a.jpg" color_background: "#FFFFFF" blur_face: true blur_logo: false
      )pb");
  EXPECT_EQ(*EncodeRemoveBackgroundRequest(request, MapperOptions()).body, json::parse(R"({
    "url": "https://i.test/a.jpg", "colorBackground": "#FFFFFF", "blurFace": true,
    "blurLogo": false})"));
}

TEST(ImageMapperTest, PartsGetDecodedCodes) {
  v1::SegmentPartsResponse response;
  ASSERT_TRUE(DecodeSegmentPartsResponse(json::parse(R"({"id": "p", "status": 200, "data": {
      "detectionList": [{"status": 200, "detections": {"partsData": [
        {"type": "JNAARG"}, {"type": "XYZ"}]}}]}})"),
                                         &response, nullptr)
                  .ok());
  const auto& parts = response.data().detection_list(0).detections().parts_data();
  EXPECT_EQ(parts[0].part().family(), "JNA");
  EXPECT_EQ(parts[0].part().location(), "ARG");
  EXPECT_EQ(parts[1].part().code(), "XYZ");
  EXPECT_EQ(parts[1].part().family(), "");
}

TEST(DamageMapperTest, InspectionIdPointers) {
  EXPECT_EQ(FindIdByPointers(json::parse(R"({"id": 42})"), {"/inspectionId", "/id"}), "42");
  EXPECT_EQ(FindIdByPointers(json::parse(R"({"inspectionId": ""})"), {"/inspectionId"}), "");
  EXPECT_EQ(FindIdByPointers(json::parse(R"(["a"])"), {"/0"}), "a");
  EXPECT_EQ(FindIdByPointers(json::parse(R"("text")"), {"/id"}), "");
  EXPECT_EQ(FindIdByPointers(json::parse(R"({"a": {"b": "x"}})"), {"bad pointer", "/a/b"}), "x");
  EXPECT_EQ(FindIdByPointers(json(nullptr), {"/id"}), "");
}

TEST(InspectionMapperTest, OnlySetParametersAreSent) {
  v1::SearchInspectionsRequest request;
  request.set_username("agent");
  VendorRequest out =
      EncodeRequest(RouteOf("inspection.v1.InspectionService.SearchInspections"), request);
  ASSERT_EQ(out.query.size(), 1u);
  EXPECT_EQ(out.query[0].first, "username");
  request.set_page(1);
  request.set_limit(50);
  request.set_license_plate("AB");
  out = EncodeRequest(RouteOf("inspection.v1.InspectionService.SearchInspections"), request);
  ASSERT_EQ(out.query.size(), 4u);
  EXPECT_EQ(out.query[0].first, "licensePlate");
  EXPECT_EQ(out.query[3], (std::pair<std::string, std::string>{"limit", "50"}));
}

TEST(EventConfigMapperTest, TestWebhookPlacement) {
  v1::TestWebhookRequest request;
  request.set_event_name(v1::EVENT_NAME_NEW_INSPECTION);
  request.set_inspection_id("i1");
  MapperOptions options;
  VendorRequest query = EncodeTestWebhookRequest(request, options);
  EXPECT_FALSE(query.body.has_value());
  ASSERT_EQ(query.query.size(), 2u);
  EXPECT_EQ(query.query[0], (std::pair<std::string, std::string>{"eventName", "newInspection"}));
  options.test_webhook_params = ParamsPlacement::kBody;
  VendorRequest body = EncodeTestWebhookRequest(request, options);
  EXPECT_TRUE(body.query.empty());
  EXPECT_EQ(*body.body, json::parse(R"({"eventName": "newInspection", "inspectionId": "i1"})"));
}

TEST(EventConfigMapperTest, RawEventNameWins) {
  EXPECT_EQ(EventNameString(v1::EVENT_NAME_CREATE_REPORT, ""), "createReport");
  EXPECT_EQ(EventNameString(v1::EVENT_NAME_CREATE_REPORT, "other"), "other");
  v1::UpdateEventConfigRequest request;
  request.set_event_name_raw("brandNew");
  request.set_webhook(true);
  EXPECT_EQ(
      *EncodeRequest(RouteOf("inspection.v1.EventConfigService.UpdateEventConfig"), request).body,
      json::parse(R"({"eventName": "brandNew", "webhook": true})"));
}

TEST(EventConfigMapperTest, ListMustBeAnArrayAndIsNeverHalfFilled) {
  v1::ListEventConfigsResponse response;
  EXPECT_FALSE(DecodeResponse(json::parse("{}"), &response, nullptr).ok());
  EXPECT_EQ(response.event_configs_size(), 0);
  EXPECT_FALSE(
      DecodeResponse(json::parse(R"([{"eventName": "createReport"}, 3])"), &response, nullptr)
          .ok());
  EXPECT_EQ(response.event_configs_size(), 0);
  DecodeReport report;
  ASSERT_TRUE(DecodeResponse(json::parse(R"([{"eventName": "createReport", "extra": 1}])"),
                             &response, &report)
                  .ok());
  ASSERT_EQ(report.unknown_paths.size(), 1u);
  EXPECT_EQ(report.unknown_paths[0], "[0].extra");
}

TEST(WebhookConfigMapperTest, UpdateBodyAndNullsBack) {
  v1::UpdateWebhookConfigRequest request;
  request.set_webhook_url_v2("https://h.test/v2");
  EXPECT_EQ(
      *EncodeRequest(RouteOf("inspection.v1.EventConfigService.UpdateWebhookConfig"), request).body,
      json::parse(R"({"webhookUrlV2": "https://h.test/v2"})"));
  v1::GetWebhookConfigResponse response;
  ASSERT_TRUE(
      DecodeGetWebhookConfigResponse(json::parse(R"({"webhookHeaderKey": null, "webhookUrl": null,
                                  "webhookUrlV2": null})"),
                                     &response, nullptr)
          .ok());
  EXPECT_TRUE(response.has_config());
  EXPECT_FALSE(response.config().webhook_header_key_set());
  EXPECT_FALSE(response.config().has_unknown_fields());
  EXPECT_EQ(EncodeMessage(response.config()),
            json::parse(R"({"webhookUrl": null, "webhookUrlV2": null})"));
}

TEST(WebhookConfigMapperTest, TheKeyIsSealedIntoItsFingerprintAndNeverDecoded) {
  const json vendor_answer = json::parse(
      R"({"webhookHeaderKey": "whk-secret", "webhookUrl": null, "webhookUrlV2": "https://h/v2"})");
  v1::GetWebhookConfigResponse get;
  DecodeReport report;
  ASSERT_TRUE(DecodeGetWebhookConfigResponse(vendor_answer, &get, &report).ok());
  EXPECT_TRUE(get.config().webhook_header_key_set());
  // SHA-256("whk-secret") starts with these 12 hex digits.
  EXPECT_EQ(get.config().webhook_header_key_sha256_prefix(), WebhookKeySha256Prefix("whk-secret"));
  EXPECT_EQ(WebhookKeySha256Prefix("abc"), "ba7816bf8f01");
  EXPECT_EQ(get.SerializeAsString().find("whk-secret"), std::string::npos);
  EXPECT_TRUE(report.unknown_paths.empty());
  v1::UpdateWebhookConfigResponse update;
  ASSERT_TRUE(DecodeUpdateWebhookConfigResponse(vendor_answer, &update, nullptr).ok());
  EXPECT_EQ(update.config().webhook_header_key_sha256_prefix(),
            get.config().webhook_header_key_sha256_prefix());

  // Sealing is what the vendor client does to the body before anything keeps it; twice is
  // once.
  json body = vendor_answer;
  SealWebhookHeaderKey(&body);
  SealWebhookHeaderKey(&body);
  EXPECT_EQ(body, json::parse(R"({"webhookHeaderKeySha256Prefix": ")" +
                              WebhookKeySha256Prefix("whk-secret") +
                              R"(", "webhookUrl": null, "webhookUrlV2": "https://h/v2"})"));
  json no_key = json::parse(R"({"webhookHeaderKey": null})");
  SealWebhookHeaderKey(&no_key);
  EXPECT_EQ(no_key, json::parse(R"({"webhookHeaderKeySha256Prefix": null})"));
}

TEST(GenericMappingTest, PathParameterFromTheFieldOfThatJsonName) {
  v1::GetDamagesReportRequest request;
  request.set_inspection_id("insp 7");
  VendorRequest out =
      EncodeRequest(RouteOf("inspection.v1.InspectionService.GetDamagesReport"), request);
  ASSERT_EQ(out.path_params.size(), 1u);
  EXPECT_EQ(out.path_params[0], (std::pair<std::string, std::string>{"inspectionId", "insp 7"}));
  EXPECT_TRUE(out.query.empty()) << "a path field is not sent twice";
  EXPECT_FALSE(out.body.has_value()) << "a GET has no body";
}

TEST(GenericMappingTest, PostBodyIsTheWholeRequestLessGatewayOnlyFields) {
  v1::DetectDamageRequest request;
  request.add_urls("https://img.test/1.jpg");
  request.set_idempotency_key("k-1");
  VendorRequest out = EncodeRequest(RouteOf("inspection.v1.DamageService.DetectDamage"), request);
  ASSERT_TRUE(out.body.has_value());
  EXPECT_EQ(*out.body, json::parse(R"({"urls": ["https://img.test/1.jpg"]})"));
  EXPECT_TRUE(out.query.empty());
}

TEST(GenericMappingTest, VendorBodyFieldTakesTheWholeAnswer) {
  v1::GetDamagesReportResponse report;
  ASSERT_TRUE(DecodeResponse(json::parse(R"({"damages": [1, 2]})"), &report, nullptr).ok());
  EXPECT_EQ(report.report().struct_value().fields().at("damages").list_value().values_size(), 2);
  v1::UpdateEventConfigResponse config;
  ASSERT_TRUE(DecodeResponse(json::parse(R"({"eventName": "createReport", "webhook": true})"),
                             &config, nullptr)
                  .ok());
  EXPECT_TRUE(config.config().webhook());
  // Without a vendor_body field the answer is the response's own fields.
  v1::TestWebhookResponse test;
  ASSERT_TRUE(DecodeResponse(json::parse(R"({"status": "sent"})"), &test, nullptr).ok());
  EXPECT_EQ(test.status(), "sent");
  EXPECT_EQ(VendorBodyField(*v1::TestWebhookResponse::descriptor()), nullptr);
}

TEST(GenericMappingTest, AVendorBodyFieldIsNeverAJsonKey) {
  // The codec skips it both ways: encoding the response gives no "config" key.
  v1::UpdateEventConfigResponse config;
  config.mutable_config()->set_webhook(true);
  EXPECT_FALSE(EncodeMessage(config).contains("config"));
}

}  // namespace
}  // namespace inspection::vendor
