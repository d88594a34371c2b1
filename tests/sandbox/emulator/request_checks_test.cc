#include "sandbox/emulator/request_checks.h"

#include <string>
#include <tuple>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace inspection::sandbox {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using json = nlohmann::json;

std::vector<std::string> Fields(const validation::Violations& violations) {
  std::vector<std::string> fields;
  for (const auto& violation : violations) fields.push_back(violation.field);
  return fields;
}

json ValidTokenRequest() {
  return json::parse(R"({
    "options": {"shootInspect": true, "fastTrack": false, "cost": false, "report": false,
                "downloadRoi": false},
    "tradeIn": {"tradeinVehicle": true, "immat": "AB-123-CD", "sendingType": null},
    "customer": {"clientType": "customer", "email": "<EMAIL>", "firstname": "<FIRST_NAME>",
                 "lastname": "<LAST_NAME>", "gender": null, "phone": "<PHONE>", "locale": "nl-BE"},
    "creatorUserId": null,
    "validity": 90
  })");
}

TEST(VendorFieldPathTest, SpellsProtoPathsAsTheVendorsJsonKeys) {
  const auto* token = v1::CreateTokenRequest::descriptor();
  EXPECT_EQ(VendorFieldPath(token, "trade_in.sending_type"), "tradeIn.sendingType");
  EXPECT_EQ(VendorFieldPath(token, "options.download_roi"), "options.downloadRoi");
  EXPECT_EQ(VendorFieldPath(token, "creator_user_id"), "creatorUserId");
  EXPECT_EQ(VendorFieldPath(token, "customer.phone"), "customer.phone");
  EXPECT_EQ(VendorFieldPath(v1::SegmentPartsRequest::descriptor(), "urls[2]"), "urls[2]");
  EXPECT_EQ(VendorFieldPath(v1::RemoveBackgroundRequest::descriptor(),
                            "manual_top_left_position_ratio[1]"),
            "manualTopLeftPositionRatio[1]");
  // A raw sibling is the vendor's own field.
  EXPECT_EQ(VendorFieldPath(v1::UpdateEventConfigRequest::descriptor(), "event_name_raw"),
            "eventName");
  EXPECT_EQ(VendorFieldPath(v1::UpdateWebhookConfigRequest::descriptor(), "webhook_url_v2"),
            "webhookUrlV2");
  EXPECT_EQ(VendorFieldPath(token, "no_such.field"), "no_such.field");
}

TEST(CheckCreateTokenTest, AcceptsAValidRequestAndFillsTheTypedOne) {
  v1::CreateTokenRequest typed;
  EXPECT_THAT(CheckCreateToken(ValidTokenRequest(), &typed), IsEmpty());
  EXPECT_EQ(typed.validity(), 90);
  EXPECT_EQ(typed.trade_in().sending_type(), v1::SENDING_TYPE_NONE);
  EXPECT_EQ(typed.customer().locale(), v1::LOCALE_NL_BE);
  EXPECT_FALSE(typed.has_creator_user_id());
}

TEST(CheckCreateTokenTest, ReportsEachBrokenFieldOnceInVendorSpelling) {
  json request = ValidTokenRequest();
  request["options"]["cost"] = 0;  // the wrong type and not false: one violation
  request["tradeIn"]["vin"] = "SHORT";
  request["customer"]["locale"] = "pt";
  v1::CreateTokenRequest typed;
  const validation::Violations violations = CheckCreateToken(request, &typed);
  EXPECT_THAT(Fields(violations), ElementsAre("options.cost", "customer.locale", "tradeIn.vin"));
  for (const auto& violation : violations) {
    EXPECT_THAT(violation.description, Not(HasSubstr("trade_in"))) << violation.field;
  }
  EXPECT_THAT(violations[2].description, HasSubstr("tradeIn.vin must be exactly 17"));
  EXPECT_THAT(violations[1].description, HasSubstr("en, fr, de, nl-BE, it, es, sv, no"));
}

TEST(CheckCreateTokenTest, FixedValuesMustBeLiteralWhenPresent) {
  for (const auto& [pointer, value, field] :
       std::vector<std::tuple<std::string, json, std::string>>{
           {"/options/report", true, "options.report"},
           {"/options/downloadRoi", "false", "options.downloadRoi"},
           {"/tradeIn/tradeinVehicle", 1, "tradeIn.tradeinVehicle"},
           {"/customer/clientType", "Customer", "customer.clientType"}}) {
    json request = ValidTokenRequest();
    request[json::json_pointer(pointer)] = value;
    v1::CreateTokenRequest typed;
    EXPECT_THAT(Fields(CheckCreateToken(request, &typed)), ElementsAre(field)) << pointer;
  }
}

TEST(CheckCreateTokenTest, SendingTypeMustBePresentButMayBeNull) {
  json request = ValidTokenRequest();
  request["tradeIn"].erase("sendingType");
  v1::CreateTokenRequest typed;
  EXPECT_THAT(Fields(CheckCreateToken(request, &typed)), ElementsAre("tradeIn.sendingType"));
  request["tradeIn"]["sendingType"] = 1;
  EXPECT_THAT(CheckCreateToken(request, &typed), IsEmpty());
  EXPECT_EQ(typed.trade_in().sending_type(), v1::SENDING_TYPE_SMS);
  request["tradeIn"]["sendingType"] = 3;
  const auto violations = CheckCreateToken(request, &typed);
  ASSERT_THAT(Fields(violations), ElementsAre("tradeIn.sendingType"));
  EXPECT_THAT(violations[0].description, HasSubstr("0, 1, 2, null"));
}

TEST(CheckCreateTokenTest, ToleratesUnknownKeysAndRefusesNonObjects) {
  json request = ValidTokenRequest();
  request["newTopLevel"] = 1;
  request["customer"]["nickname"] = "J";
  v1::CreateTokenRequest typed;
  EXPECT_THAT(CheckCreateToken(request, &typed), IsEmpty());
  EXPECT_THAT(Fields(CheckCreateToken(json::array(), &typed)), ElementsAre("body"));
  EXPECT_THAT(Fields(CheckCreateToken(json("text"), &typed)), ElementsAre("body"));
  json nested = ValidTokenRequest();
  nested["options"] = 5;
  EXPECT_THAT(Fields(CheckCreateToken(nested, &typed)), ElementsAre("options"));
}

TEST(CheckEventsTest, EventNamesMustBeTheSpecsAndWebhookABoolean) {
  v1::UpdateEventConfigRequest update;
  EXPECT_THAT(CheckUpdateEventConfig({{"eventName", "createReport"}, {"webhook", true}}, &update),
              IsEmpty());
  EXPECT_EQ(update.event_name(), v1::EVENT_NAME_CREATE_REPORT);
  EXPECT_THAT(Fields(CheckUpdateEventConfig({{"eventName", "other"}, {"webhook", true}}, &update)),
              ElementsAre("eventName"));
  EXPECT_THAT(Fields(CheckUpdateEventConfig({{"eventName", 3}, {"webhook", true}}, &update)),
              ElementsAre("eventName"));
  EXPECT_THAT(
      Fields(CheckUpdateEventConfig({{"eventName", "newDamage"}, {"webhook", "on"}}, &update)),
      ElementsAre("webhook"));
  EXPECT_THAT(Fields(CheckUpdateEventConfig({{"eventName", "newDamage"}}, &update)),
              ElementsAre("webhook"));

  v1::TestWebhookRequest test;
  EXPECT_THAT(CheckTestWebhook({{"eventName", "chaseUpVehicle"}, {"inspectionId", "abc"}}, &test),
              IsEmpty());
  EXPECT_EQ(test.event_name(), v1::EVENT_NAME_CHASE_UP_VEHICLE);
  EXPECT_TRUE(test.event_name_raw().empty());
  EXPECT_EQ(test.inspection_id(), "abc");
  EXPECT_THAT(Fields(CheckTestWebhook(json::object(), &test)), ElementsAre("eventName"));
  EXPECT_THAT(
      Fields(CheckTestWebhook({{"eventName", "newInspection"}, {"inspectionId", "a/b"}}, &test)),
      ElementsAre("inspectionId"));
  EXPECT_EQ(KnownEventNames().size(), 8u);
  EXPECT_TRUE(IsKnownEventName("tradeinVehicle"));
  EXPECT_FALSE(IsKnownEventName("TradeinVehicle"));
}

TEST(CheckQueryTest, SearchParametersFollowTheRules) {
  v1::SearchInspectionsRequest search;
  EXPECT_THAT(CheckSearchInspections({{"username", "a"}, {"limit", "1000"}}, &search), IsEmpty());
  EXPECT_EQ(search.limit(), 1000);
  EXPECT_FALSE(search.has_page());
  EXPECT_THAT(Fields(CheckSearchInspections({{"username", "a"}, {"limit", "1001"}}, &search)),
              ElementsAre("limit"));
  EXPECT_THAT(Fields(CheckSearchInspections({{"licensePlate", "X"}, {"page", "1x"}}, &search)),
              ElementsAre("page"));
  EXPECT_THAT(Fields(CheckSearchInspections({{"page", "0"}}, &search)),
              ElementsAre("licensePlate", "page"));
}

TEST(CheckQueryTest, DeviceIdIsTheUidFollowedByPwa) {
  std::string uid;
  EXPECT_THAT(CheckDeviceId(nullptr, &uid), ::testing::SizeIs(1));
  const std::string plain = "abc";
  EXPECT_THAT(Fields(CheckDeviceId(&plain, &uid)), ElementsAre("deviceId"));
  const std::string bare_suffix = "-pwa";
  EXPECT_THAT(Fields(CheckDeviceId(&bare_suffix, &uid)), ElementsAre("deviceId"));
  const std::string slash = "a/b-pwa";
  EXPECT_THAT(Fields(CheckDeviceId(&slash, &uid)), ElementsAre("deviceId"));
  const std::string good = "1b2c-pwa";
  EXPECT_THAT(CheckDeviceId(&good, &uid), IsEmpty());
  EXPECT_EQ(uid, "1b2c");
  EXPECT_THAT(Fields(CheckDamagesReportId("a?b")), ElementsAre("inspectionId"));
  EXPECT_THAT(CheckDamagesReportId("AbC123"), IsEmpty());
}

TEST(CheckImagesTest, UrlsAreRequiredAndWellFormed) {
  v1::AssessQualityRequest quality;
  EXPECT_THAT(Fields(CheckAssessQuality(json::object(), &quality)), ElementsAre("url"));
  EXPECT_THAT(Fields(CheckAssessQuality(json{{"url", 5}}, &quality)), ElementsAre("url"));
  v1::SegmentVehicleRequest segment;
  EXPECT_THAT(
      Fields(CheckSegmentVehicle({{"urls", {"https://a.example/x.jpg", "nope"}}}, &segment)),
      ElementsAre("urls[1]"));
  v1::DetectDamageRequest damage;
  EXPECT_THAT(CheckDetectDamage({{"urls", {"https://a.example/x.jpg"}}}, &damage), IsEmpty());
  EXPECT_EQ(damage.urls_size(), 1);
  v1::RemoveBackgroundRequest background;
  // Either spelling of the position key is read.
  EXPECT_THAT(CheckRemoveBackground({{"url", "https://a.example/x.jpg"},
                                     {"manualPositioning", true},
                                     {"manualTopLeftPositionRatios", {0.1, 0.2}}},
                                    &background),
              IsEmpty());
  EXPECT_EQ(background.manual_top_left_position_ratio_size(), 2);
  EXPECT_THAT(Fields(CheckRemoveBackground(
                  {{"url", "https://a.example/x.jpg"}, {"wheelBox", {1, 2, 3}}}, &background)),
              ElementsAre("wheelBox"));
}

}  // namespace
}  // namespace inspection::sandbox
