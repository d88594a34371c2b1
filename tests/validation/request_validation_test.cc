#include "adapters/vendor/request_validation.h"
#include <google/protobuf/descriptor.pb.h>
#include "inspection/v1/vendor_options.pb.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace inspection::validation {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

std::vector<std::string> Fields(const Violations& violations) {
  std::vector<std::string> fields;
  for (const FieldViolation& v : violations) fields.push_back(v.field);
  return fields;
}

// ---------------------------------------------------------------------------
// Valid baselines, one per RPC.
// ---------------------------------------------------------------------------

v1::CreateTokenRequest ValidCreateToken() {
  v1::CreateTokenRequest request;
  v1::SelfInspectionOptions* options = request.mutable_options();
  options->set_shoot_inspect(true);
  options->set_fast_track(false);
  options->set_cost(false);
  options->set_report(false);
  options->set_download_roi(false);
  v1::TradeIn* trade_in = request.mutable_trade_in();
  trade_in->set_tradein_vehicle(true);
  trade_in->set_immat("AB-123-CD");
  trade_in->set_vin("VF1AB000123456789");
  trade_in->set_sending_type(v1::SENDING_TYPE_EMAIL);
  v1::Customer* customer = request.mutable_customer();
  customer->set_client_type("customer");
  customer->set_email("jane.doe@example.com");
  customer->set_firstname("Jane");
  customer->set_lastname("Doe");
  customer->set_gender(v1::GENDER_WOMEN);
  customer->set_phone("+33612345678");
  customer->set_locale(v1::LOCALE_FR);
  request.set_creator_user_id("user-42");
  request.set_validity(90);
  return request;
}

// The smallest valid request: optional fields unset, placeholders for the customer.
v1::CreateTokenRequest MinimalCreateToken() {
  v1::CreateTokenRequest request;
  request.mutable_options()->set_shoot_inspect(true);
  request.mutable_options()->set_fast_track(true);
  request.mutable_trade_in()->set_sending_type(v1::SENDING_TYPE_NONE);
  v1::Customer* customer = request.mutable_customer();
  customer->set_email("<EMAIL>");
  customer->set_firstname("<FIRST_NAME>");
  customer->set_lastname("<LAST_NAME>");
  customer->set_phone("<PHONE>");
  customer->set_locale(v1::LOCALE_EN);
  request.set_validity(1);
  return request;
}

v1::RemoveBackgroundRequest ValidRemoveBackground() {
  v1::RemoveBackgroundRequest request;
  request.set_url("https://images.example.com/car.jpg");
  request.set_url_background("https://images.example.com/showroom.jpg");
  request.set_manual_width_ratio(0.8);
  request.set_manual_positioning(true);
  request.add_manual_top_left_position_ratio(0.1);
  request.add_manual_top_left_position_ratio(0.2);
  for (double v : {0.1, 0.7, 0.4, 0.9}) request.add_wheel_box(v);
  request.set_blur_licence_plate(true);
  return request;
}

constexpr char kUrl[] = "https://images.example.com/front.jpg";
constexpr char kSecret[] = "s3cr3t key-Value";

TEST(ValidBaselineTest, EveryRpcAcceptsAValidRequest) {
  EXPECT_THAT(ValidateRequest(ValidCreateToken()), IsEmpty());
  EXPECT_THAT(ValidateRequest(MinimalCreateToken()), IsEmpty());

  v1::GetTokenStatusRequest status;
  status.set_uid("a1b2c3d4-e5f6");
  EXPECT_THAT(ValidateRequest(status), IsEmpty());

  EXPECT_THAT(ValidateRequest(ValidRemoveBackground()), IsEmpty());

  v1::AssessQualityRequest quality;
  quality.set_url(kUrl);
  EXPECT_THAT(ValidateRequest(quality), IsEmpty());

  v1::AssessQualityBatchRequest batch;
  batch.add_urls(kUrl);
  batch.add_urls("http://images.example.com/back.jpg");
  EXPECT_THAT(ValidateRequest(batch), IsEmpty());

  v1::SegmentVehicleRequest seg;
  seg.add_urls(kUrl);
  EXPECT_THAT(ValidateRequest(seg), IsEmpty());

  v1::SegmentPartsRequest parts;
  parts.add_urls(kUrl);
  EXPECT_THAT(ValidateRequest(parts), IsEmpty());

  v1::DetectDamageRequest damage;
  damage.add_urls(kUrl);
  damage.add_urls("https://images.example.com/side.jpg");
  EXPECT_THAT(ValidateRequest(damage), IsEmpty());

  v1::SearchInspectionsRequest search;
  search.set_license_plate("AB-123-CD");
  search.set_page(1);
  search.set_limit(20);
  EXPECT_THAT(ValidateRequest(search, ValidationLimits{}), IsEmpty());

  v1::GetDamagesReportRequest report;
  report.set_inspection_id("Xy12AbC9");
  EXPECT_THAT(ValidateRequest(report), IsEmpty());

  v1::UpdateWebhookConfigRequest webhook;
  webhook.set_webhook_url_v2("https://hooks.example.com/inspection");
  webhook.set_webhook_header_key("abc123-XYZ_key");
  EXPECT_THAT(ValidateRequest(webhook), IsEmpty());

  v1::UpdateEventConfigRequest event;
  event.set_event_name(v1::EVENT_NAME_CREATE_REPORT);
  event.set_webhook(true);
  EXPECT_THAT(ValidateRequest(event), IsEmpty());

  v1::TestWebhookRequest test;
  test.set_event_name_raw("someFutureEvent");
  test.set_inspection_id("Xy12AbC9");
  EXPECT_THAT(ValidateRequest(test), IsEmpty());
}

// ---------------------------------------------------------------------------
// CreateToken: options.
// ---------------------------------------------------------------------------

TEST(CreateTokenTest, MissingOptionsIsOneViolation) {
  v1::CreateTokenRequest request = ValidCreateToken();
  request.clear_options();
  Violations v = ValidateRequest(request);
  ASSERT_THAT(Fields(v), ElementsAre("options"));
  EXPECT_THAT(v[0].description, HasSubstr("required"));
}

TEST(CreateTokenTest, ShootInspectIsRequired) {
  v1::CreateTokenRequest request = ValidCreateToken();
  request.mutable_options()->clear_shoot_inspect();
  Violations v = ValidateRequest(request);
  ASSERT_THAT(Fields(v), ElementsAre("options.shoot_inspect"));
  EXPECT_THAT(v[0].description, HasSubstr("required"));
}

TEST(CreateTokenTest, ShootInspectFalseIsAccepted) {
  v1::CreateTokenRequest request = ValidCreateToken();
  request.mutable_options()->set_shoot_inspect(false);
  EXPECT_THAT(ValidateRequest(request), IsEmpty());
}

TEST(CreateTokenTest, FastTrackIsRequired) {
  v1::CreateTokenRequest request = ValidCreateToken();
  request.mutable_options()->clear_fast_track();
  Violations v = ValidateRequest(request);
  ASSERT_THAT(Fields(v), ElementsAre("options.fast_track"));
  EXPECT_THAT(v[0].description, HasSubstr("required"));
}

TEST(CreateTokenTest, CostTrueIsRejected) {
  v1::CreateTokenRequest request = ValidCreateToken();
  request.mutable_options()->set_cost(true);
  Violations v = ValidateRequest(request);
  ASSERT_THAT(Fields(v), ElementsAre("options.cost"));
  EXPECT_THAT(v[0].description, HasSubstr("must be false"));
}

TEST(CreateTokenTest, ReportTrueIsRejected) {
  v1::CreateTokenRequest request = ValidCreateToken();
  request.mutable_options()->set_report(true);
  Violations v = ValidateRequest(request);
  ASSERT_THAT(Fields(v), ElementsAre("options.report"));
  EXPECT_THAT(v[0].description, HasSubstr("must be false"));
}

TEST(CreateTokenTest, DownloadRoiTrueIsRejected) {
  v1::CreateTokenRequest request = ValidCreateToken();
  request.mutable_options()->set_download_roi(true);
  Violations v = ValidateRequest(request);
  ASSERT_THAT(Fields(v), ElementsAre("options.download_roi"));
  EXPECT_THAT(v[0].description, HasSubstr("must be false"));
}

TEST(CreateTokenTest, FixedFlagsUnsetAreAccepted) {
  v1::CreateTokenRequest request = ValidCreateToken();
  request.mutable_options()->clear_cost();
  request.mutable_options()->clear_report();
  request.mutable_options()->clear_download_roi();
  EXPECT_THAT(ValidateRequest(request), IsEmpty());
}

// ---------------------------------------------------------------------------
// CreateToken: trade_in.
// ---------------------------------------------------------------------------

TEST(CreateTokenTest, MissingTradeInIsOneViolation) {
  v1::CreateTokenRequest request = ValidCreateToken();
  request.clear_trade_in();
  Violations v = ValidateRequest(request);
  ASSERT_THAT(Fields(v), ElementsAre("trade_in"));
  EXPECT_THAT(v[0].description, HasSubstr("required"));
}

TEST(CreateTokenTest, TradeinVehicleFalseIsRejected) {
  v1::CreateTokenRequest request = ValidCreateToken();
  request.mutable_trade_in()->set_tradein_vehicle(false);
  Violations v = ValidateRequest(request);
  ASSERT_THAT(Fields(v), ElementsAre("trade_in.tradein_vehicle"));
  EXPECT_THAT(v[0].description, HasSubstr("must be true"));
}

TEST(CreateTokenTest, TradeinVehicleUnsetIsAccepted) {
  v1::CreateTokenRequest request = ValidCreateToken();
  request.mutable_trade_in()->clear_tradein_vehicle();
  EXPECT_THAT(ValidateRequest(request), IsEmpty());
}

TEST(CreateTokenTest, ImmatSetButEmptyIsRejected) {
  v1::CreateTokenRequest request = ValidCreateToken();
  request.mutable_trade_in()->set_immat("");
  Violations v = ValidateRequest(request);
  ASSERT_THAT(Fields(v), ElementsAre("trade_in.immat"));
  EXPECT_THAT(v[0].description, HasSubstr("must not be empty when set"));
}

TEST(CreateTokenTest, VinWithWrongLengthReportsTheLength) {
  v1::CreateTokenRequest request = ValidCreateToken();
  request.mutable_trade_in()->set_vin("VF1AB0001234567");  // 15
  Violations v = ValidateRequest(request);
  ASSERT_THAT(Fields(v), ElementsAre("trade_in.vin"));
  EXPECT_THAT(v[0].description, HasSubstr("17"));
  EXPECT_THAT(v[0].description, HasSubstr("has 15 characters"));

  request.mutable_trade_in()->set_vin("VF1AB00012345678901");  // 19
  v = ValidateRequest(request);
  ASSERT_THAT(Fields(v), ElementsAre("trade_in.vin"));
  EXPECT_THAT(v[0].description, HasSubstr("has 19 characters"));
}

TEST(CreateTokenTest, VinLengthCountsCharactersNotBytes) {
  v1::CreateTokenRequest request = ValidCreateToken();
  request.mutable_trade_in()->set_vin("VF1AB00012345678\xC3\xA9");  // 16 + 'é'
  Violations v = ValidateRequest(request);
  // Right length, wrong charset: only the charset violation.
  ASSERT_THAT(Fields(v), ElementsAre("trade_in.vin"));
  EXPECT_THAT(v[0].description, HasSubstr("letters and digits"));
}

TEST(CreateTokenTest, VinWithForbiddenCharacterIsRejected) {
  v1::CreateTokenRequest request = ValidCreateToken();
  request.mutable_trade_in()->set_vin("VF1AB-00123456789");  // 17 with a dash
  ASSERT_EQ(request.trade_in().vin().size(), 17u);
  Violations v = ValidateRequest(request);
  ASSERT_THAT(Fields(v), ElementsAre("trade_in.vin"));
  EXPECT_THAT(v[0].description, HasSubstr("letters and digits"));
}

TEST(CreateTokenTest, VinLowerCaseIsAccepted) {
  v1::CreateTokenRequest request = ValidCreateToken();
  request.mutable_trade_in()->set_vin("vf1ab000123456789");
  EXPECT_THAT(ValidateRequest(request), IsEmpty());
}

TEST(CreateTokenTest, SendingTypeUnspecifiedIsRejectedAndNamesNone) {
  v1::CreateTokenRequest request = ValidCreateToken();
  request.mutable_trade_in()->set_sending_type(v1::SENDING_TYPE_UNSPECIFIED);
  Violations v = ValidateRequest(request);
  ASSERT_THAT(Fields(v), ElementsAre("trade_in.sending_type"));
  EXPECT_THAT(v[0].description, HasSubstr("required"));
  EXPECT_THAT(v[0].description, HasSubstr("SENDING_TYPE_NONE"));
}

TEST(CreateTokenTest, SendingTypeNoneIsAccepted) {
  v1::CreateTokenRequest request = ValidCreateToken();
  request.mutable_trade_in()->set_sending_type(v1::SENDING_TYPE_NONE);
  EXPECT_THAT(ValidateRequest(request), IsEmpty());
}

TEST(CreateTokenTest, SendingTypeOutsideTheEnumIsRejected) {
  v1::CreateTokenRequest request = ValidCreateToken();
  request.mutable_trade_in()->set_sending_type(static_cast<v1::SendingType>(42));
  EXPECT_THAT(Fields(ValidateRequest(request)), ElementsAre("trade_in.sending_type"));
}

// ---------------------------------------------------------------------------
// CreateToken: customer.
// ---------------------------------------------------------------------------

TEST(CreateTokenTest, MissingCustomerIsOneViolation) {
  v1::CreateTokenRequest request = ValidCreateToken();
  request.clear_customer();
  Violations v = ValidateRequest(request);
  ASSERT_THAT(Fields(v), ElementsAre("customer"));
  EXPECT_THAT(v[0].description, HasSubstr("required"));
}

TEST(CreateTokenTest, ClientTypeMustBeCustomerOrEmpty) {
  v1::CreateTokenRequest request = ValidCreateToken();
  request.mutable_customer()->set_client_type("dealer");
  Violations v = ValidateRequest(request);
  ASSERT_THAT(Fields(v), ElementsAre("customer.client_type"));
  EXPECT_THAT(v[0].description, HasSubstr("\"customer\""));

  request.mutable_customer()->set_client_type("Customer");  // case-sensitive
  EXPECT_THAT(Fields(ValidateRequest(request)), ElementsAre("customer.client_type"));

  request.mutable_customer()->clear_client_type();
  EXPECT_THAT(ValidateRequest(request), IsEmpty());
}

TEST(CreateTokenTest, EmailIsRequired) {
  v1::CreateTokenRequest request = ValidCreateToken();
  request.mutable_customer()->clear_email();
  Violations v = ValidateRequest(request);
  ASSERT_THAT(Fields(v), ElementsAre("customer.email"));
  EXPECT_THAT(v[0].description, HasSubstr("required"));
  EXPECT_THAT(v[0].description, HasSubstr("<EMAIL>"));
}

TEST(CreateTokenTest, FirstnameIsRequired) {
  v1::CreateTokenRequest request = ValidCreateToken();
  request.mutable_customer()->set_firstname("   ");  // blank counts as missing
  Violations v = ValidateRequest(request);
  ASSERT_THAT(Fields(v), ElementsAre("customer.firstname"));
  EXPECT_THAT(v[0].description, HasSubstr("required"));
}

TEST(CreateTokenTest, LastnameIsRequired) {
  v1::CreateTokenRequest request = ValidCreateToken();
  request.mutable_customer()->clear_lastname();
  Violations v = ValidateRequest(request);
  ASSERT_THAT(Fields(v), ElementsAre("customer.lastname"));
  EXPECT_THAT(v[0].description, HasSubstr("required"));
}

TEST(CreateTokenTest, PhoneIsRequired) {
  v1::CreateTokenRequest request = ValidCreateToken();
  request.mutable_customer()->clear_phone();
  Violations v = ValidateRequest(request);
  ASSERT_THAT(Fields(v), ElementsAre("customer.phone"));
  EXPECT_THAT(v[0].description, HasSubstr("required"));
}

TEST(CreateTokenTest, EmailShapeIsChecked) {
  for (const char* bad :
       {"jane.example.com", "jane@@example.com", "a@b@c", "@example.com", "jane@", "<EMAIL"}) {
    v1::CreateTokenRequest request = ValidCreateToken();
    request.mutable_customer()->set_email(bad);
    Violations v = ValidateRequest(request);
    ASSERT_THAT(Fields(v), ElementsAre("customer.email")) << bad;
    EXPECT_THAT(v[0].description, HasSubstr("exactly one '@'")) << bad;
  }
}

TEST(CreateTokenTest, EmailPlaceholderIsAccepted) {
  v1::CreateTokenRequest request = ValidCreateToken();
  request.mutable_customer()->set_email("<EMAIL>");
  EXPECT_THAT(ValidateRequest(request), IsEmpty());
}

TEST(CreateTokenTest, PhoneWithCountryCodeIsAccepted) {
  for (const char* good : {"+33612345678", "0033612345678", "+33 6 12 34 56 78",
                           "+1 (555) 123-4567", "+32.470.12.34.56", "+4915112345678"}) {
    v1::CreateTokenRequest request = ValidCreateToken();
    request.mutable_customer()->set_phone(good);
    EXPECT_THAT(ValidateRequest(request), IsEmpty()) << good;
  }
}

TEST(CreateTokenTest, PhoneWithoutCountryCodeIsRejected) {
  for (const char* bad :
       {"0612345678", "06 12 34 56 78", "+0612345678", "33612345678", "+33 6 12 34 56 7x",
        "+ 33612345678", "+33612345678 ", "+123456", "+1234567890123456", "+33-"}) {
    v1::CreateTokenRequest request = ValidCreateToken();
    request.mutable_customer()->set_phone(bad);
    Violations v = ValidateRequest(request);
    ASSERT_THAT(Fields(v), ElementsAre("customer.phone")) << bad;
    EXPECT_THAT(v[0].description, HasSubstr("country code")) << bad;
  }
}

TEST(CreateTokenTest, PhoneDigitCountBoundaries) {
  v1::CreateTokenRequest request = ValidCreateToken();
  request.mutable_customer()->set_phone("+1234567");  // 7 digits
  EXPECT_THAT(ValidateRequest(request), IsEmpty());
  request.mutable_customer()->set_phone("+123456789012345");  // 15 digits
  EXPECT_THAT(ValidateRequest(request), IsEmpty());
  request.mutable_customer()->set_phone("00123456789012345");  // 00 + 15 digits
  EXPECT_THAT(ValidateRequest(request), IsEmpty());
}

TEST(CreateTokenTest, PhonePlaceholderIsAccepted) {
  v1::CreateTokenRequest request = ValidCreateToken();
  request.mutable_customer()->set_phone("<PHONE>");
  EXPECT_THAT(ValidateRequest(request), IsEmpty());
}

TEST(CreateTokenTest, LocaleIsRequiredAndListsAllowedValues) {
  v1::CreateTokenRequest request = ValidCreateToken();
  request.mutable_customer()->set_locale(v1::LOCALE_UNSPECIFIED);
  Violations v = ValidateRequest(request);
  ASSERT_THAT(Fields(v), ElementsAre("customer.locale"));
  EXPECT_THAT(v[0].description, HasSubstr("required"));
  EXPECT_THAT(v[0].description, HasSubstr("en, fr, de, nl-BE, it, es, sv or no"));
}

TEST(CreateTokenTest, LocaleOutsideTheEnumIsRejected) {
  v1::CreateTokenRequest request = ValidCreateToken();
  request.mutable_customer()->set_locale(static_cast<v1::Locale>(99));
  Violations v = ValidateRequest(request);
  ASSERT_THAT(Fields(v), ElementsAre("customer.locale"));
  EXPECT_THAT(v[0].description, HasSubstr("nl-BE"));
}

TEST(CreateTokenTest, EveryGenderIsAccepted) {
  for (v1::Gender gender : {v1::GENDER_UNSPECIFIED, v1::GENDER_MEN, v1::GENDER_WOMEN}) {
    v1::CreateTokenRequest request = ValidCreateToken();
    request.mutable_customer()->set_gender(gender);
    EXPECT_THAT(ValidateRequest(request), IsEmpty()) << gender;
  }
  v1::CreateTokenRequest request = ValidCreateToken();
  request.mutable_customer()->set_gender(static_cast<v1::Gender>(7));
  EXPECT_THAT(Fields(ValidateRequest(request)), ElementsAre("customer.gender"));
}

// ---------------------------------------------------------------------------
// CreateToken: top-level fields and combinations.
// ---------------------------------------------------------------------------

TEST(CreateTokenTest, CreatorUserIdSetButEmptyIsRejected) {
  v1::CreateTokenRequest request = ValidCreateToken();
  request.set_creator_user_id("");
  Violations v = ValidateRequest(request);
  ASSERT_THAT(Fields(v), ElementsAre("creator_user_id"));
  EXPECT_THAT(v[0].description, HasSubstr("must not be empty"));

  request.clear_creator_user_id();
  EXPECT_THAT(ValidateRequest(request), IsEmpty());
}

TEST(CreateTokenTest, ValidityZeroIsRejected) {
  v1::CreateTokenRequest request = ValidCreateToken();
  request.set_validity(0);
  Violations v = ValidateRequest(request);
  ASSERT_THAT(Fields(v), ElementsAre("validity"));
  EXPECT_THAT(v[0].description, HasSubstr("greater than 0"));
}

TEST(CreateTokenTest, ValidityNegativeIsRejected) {
  v1::CreateTokenRequest request = ValidCreateToken();
  request.set_validity(-5);
  Violations v = ValidateRequest(request);
  ASSERT_THAT(Fields(v), ElementsAre("validity"));
  EXPECT_THAT(v[0].description, HasSubstr("greater than 0"));
  EXPECT_THAT(v[0].description, HasSubstr("-5"));
}

TEST(CreateTokenTest, EmptyRequestReportsEachMissingPartInOrder) {
  EXPECT_THAT(Fields(ValidateRequest(v1::CreateTokenRequest())),
              ElementsAre("options", "trade_in", "customer", "validity"));
}

TEST(CreateTokenTest, SeveralProblemsAreReportedInFieldOrder) {
  v1::CreateTokenRequest request = ValidCreateToken();
  request.set_validity(0);
  request.mutable_customer()->set_locale(v1::LOCALE_UNSPECIFIED);
  request.mutable_customer()->set_phone("0612345678");
  request.mutable_customer()->clear_firstname();
  request.mutable_customer()->set_client_type("x");
  request.mutable_trade_in()->set_sending_type(v1::SENDING_TYPE_UNSPECIFIED);
  request.mutable_trade_in()->set_vin("SHORT");
  request.mutable_trade_in()->set_tradein_vehicle(false);
  request.mutable_options()->set_download_roi(true);
  request.mutable_options()->set_cost(true);
  request.mutable_options()->clear_fast_track();
  request.set_creator_user_id("");
  EXPECT_THAT(Fields(ValidateRequest(request)),
              ElementsAre("options.fast_track", "options.cost", "options.download_roi",
                          "trade_in.tradein_vehicle", "trade_in.vin", "trade_in.sending_type",
                          "customer.client_type", "customer.firstname", "customer.phone",
                          "customer.locale", "creator_user_id", "validity"));
}

TEST(CreateTokenTest, VinWithWrongLengthAndCharsetGivesTwoViolations) {
  v1::CreateTokenRequest request = ValidCreateToken();
  request.mutable_trade_in()->set_vin("AB-12");
  Violations v = ValidateRequest(request);
  ASSERT_THAT(Fields(v), ElementsAre("trade_in.vin", "trade_in.vin"));
  EXPECT_THAT(v[0].description, HasSubstr("has 5 characters"));
  EXPECT_THAT(v[1].description, HasSubstr("letters and digits"));
}

// ---------------------------------------------------------------------------
// GetTokenStatus.
// ---------------------------------------------------------------------------

TEST(GetTokenStatusTest, UidIsRequired) {
  Violations v = ValidateRequest(v1::GetTokenStatusRequest());
  ASSERT_THAT(Fields(v), ElementsAre("uid"));
  EXPECT_THAT(v[0].description, HasSubstr("required"));
}

TEST(GetTokenStatusTest, UidWithUrlCharactersIsRejected) {
  for (const char* bad : {"a/b", "a?b", "a#b", "a&b", "a b", "a\tb", "ab\n"}) {
    v1::GetTokenStatusRequest request;
    request.set_uid(bad);
    Violations v = ValidateRequest(request);
    ASSERT_THAT(Fields(v), ElementsAre("uid")) << bad;
    EXPECT_THAT(v[0].description, HasSubstr("must not contain")) << bad;
  }
}

TEST(GetTokenStatusTest, UidWithPwaSuffixIsRejected) {
  v1::GetTokenStatusRequest request;
  request.set_uid("a1b2c3-pwa");
  Violations v = ValidateRequest(request);
  ASSERT_THAT(Fields(v), ElementsAre("uid"));
  EXPECT_THAT(v[0].description, HasSubstr("appends -pwa"));
}

// ---------------------------------------------------------------------------
// RemoveBackground.
// ---------------------------------------------------------------------------

TEST(RemoveBackgroundTest, UrlIsRequiredAndWellFormed) {
  v1::RemoveBackgroundRequest request = ValidRemoveBackground();
  request.clear_url();
  Violations v = ValidateRequest(request);
  ASSERT_THAT(Fields(v), ElementsAre("url"));
  EXPECT_THAT(v[0].description, HasSubstr("required"));

  request.set_url("ftp://images.example.com/car.jpg");
  v = ValidateRequest(request);
  ASSERT_THAT(Fields(v), ElementsAre("url"));
  EXPECT_THAT(v[0].description, HasSubstr("http"));
}

TEST(RemoveBackgroundTest, UrlBackgroundMustBeWellFormedWhenSet) {
  v1::RemoveBackgroundRequest request = ValidRemoveBackground();
  request.set_url_background("not a url");
  EXPECT_THAT(Fields(ValidateRequest(request)), ElementsAre("url_background"));
  request.set_url_background("");
  EXPECT_THAT(Fields(ValidateRequest(request)), ElementsAre("url_background"));
}

TEST(RemoveBackgroundTest, ColourFormats) {
  for (const char* good : {"#FFAA00", "ffaa00", "#fA0", "0F0"}) {
    v1::RemoveBackgroundRequest request = ValidRemoveBackground();
    request.clear_url_background();
    request.set_color_background(good);
    EXPECT_THAT(ValidateRequest(request), IsEmpty()) << good;
  }
  for (const char* bad : {"", "#", "red", "#FFAA0", "#GGGGGG", "##FFF", "#FFAA0011"}) {
    v1::RemoveBackgroundRequest request = ValidRemoveBackground();
    request.clear_url_background();
    request.set_color_background(bad);
    Violations v = ValidateRequest(request);
    ASSERT_THAT(Fields(v), ElementsAre("color_background")) << bad;
    EXPECT_THAT(v[0].description, HasSubstr("#RRGGBB")) << bad;
  }
}

TEST(RemoveBackgroundTest, UrlAndColourBackgroundAreExclusive) {
  v1::RemoveBackgroundRequest request = ValidRemoveBackground();
  request.set_color_background("#FFFFFF");
  Violations v = ValidateRequest(request);
  ASSERT_THAT(Fields(v), ElementsAre("color_background"));
  EXPECT_THAT(v[0].description, HasSubstr("only one of"));
}

TEST(RemoveBackgroundTest, WidthRatioMustBePositive) {
  for (double bad : {0.0, -0.5, std::nan(""), std::numeric_limits<double>::infinity()}) {
    v1::RemoveBackgroundRequest request = ValidRemoveBackground();
    request.set_manual_width_ratio(bad);
    Violations v = ValidateRequest(request);
    ASSERT_THAT(Fields(v), ElementsAre("manual_width_ratio")) << bad;
    EXPECT_THAT(v[0].description, HasSubstr("greater than 0")) << bad;
  }
}

TEST(RemoveBackgroundTest, PositionRatioNeedsTwoFiniteValues) {
  v1::RemoveBackgroundRequest request = ValidRemoveBackground();
  request.add_manual_top_left_position_ratio(0.3);
  Violations v = ValidateRequest(request);
  ASSERT_THAT(Fields(v), ElementsAre("manual_top_left_position_ratio"));
  EXPECT_THAT(v[0].description, HasSubstr("exactly 2"));

  request = ValidRemoveBackground();
  request.set_manual_top_left_position_ratio(1, std::nan(""));
  EXPECT_THAT(Fields(ValidateRequest(request)), ElementsAre("manual_top_left_position_ratio[1]"));
}

TEST(RemoveBackgroundTest, ManualPositioningRequiresPosition) {
  v1::RemoveBackgroundRequest request = ValidRemoveBackground();
  request.clear_manual_top_left_position_ratio();
  Violations v = ValidateRequest(request);
  ASSERT_THAT(Fields(v), ElementsAre("manual_top_left_position_ratio"));
  EXPECT_THAT(v[0].description, HasSubstr("manual_positioning"));

  request.set_manual_positioning(false);
  EXPECT_THAT(ValidateRequest(request), IsEmpty());
}

TEST(RemoveBackgroundTest, WheelBoxNeedsFourFiniteValues) {
  v1::RemoveBackgroundRequest request = ValidRemoveBackground();
  request.add_wheel_box(0.5);
  Violations v = ValidateRequest(request);
  ASSERT_THAT(Fields(v), ElementsAre("wheel_box"));
  EXPECT_THAT(v[0].description, HasSubstr("exactly 4"));

  request = ValidRemoveBackground();
  request.set_wheel_box(2, -std::numeric_limits<double>::infinity());
  EXPECT_THAT(Fields(ValidateRequest(request)), ElementsAre("wheel_box[2]"));

  request.clear_wheel_box();
  EXPECT_THAT(ValidateRequest(request), IsEmpty());
}

TEST(RemoveBackgroundTest, SeveralProblemsAreReportedInFieldOrder) {
  v1::RemoveBackgroundRequest request;
  request.set_url_background("https://");
  request.set_color_background("nope");
  request.set_manual_width_ratio(0);
  request.set_manual_positioning(true);
  request.add_wheel_box(1);
  EXPECT_THAT(Fields(ValidateRequest(request)),
              ElementsAre("url", "url_background", "color_background", "color_background",
                          "manual_width_ratio", "manual_top_left_position_ratio", "wheel_box"));
}

// ---------------------------------------------------------------------------
// Image URLs.
// ---------------------------------------------------------------------------

TEST(AssessQualityTest, UrlIsRequiredAndWellFormed) {
  v1::AssessQualityRequest request;
  Violations v = ValidateRequest(request);
  ASSERT_THAT(Fields(v), ElementsAre("url"));
  EXPECT_THAT(v[0].description, HasSubstr("required"));
  request.set_url("images.example.com/car.jpg");
  EXPECT_THAT(Fields(ValidateRequest(request)), ElementsAre("url"));
}

TEST(UrlListTest, EmptyListNeedsAtLeastOneUrl) {
  Violations v = ValidateRequest(v1::AssessQualityBatchRequest());
  ASSERT_THAT(Fields(v), ElementsAre("urls"));
  EXPECT_THAT(v[0].description, HasSubstr("at least one URL"));
  EXPECT_THAT(Fields(ValidateRequest(v1::SegmentVehicleRequest())), ElementsAre("urls"));
  EXPECT_THAT(Fields(ValidateRequest(v1::SegmentPartsRequest())), ElementsAre("urls"));
  EXPECT_THAT(Fields(ValidateRequest(v1::DetectDamageRequest())), ElementsAre("urls"));
}

TEST(UrlListTest, EachBadElementIsReportedWithItsIndex) {
  v1::AssessQualityBatchRequest batch;
  batch.add_urls(kUrl);
  batch.add_urls("");
  batch.add_urls(kUrl);
  batch.add_urls("https://user:pass@images.example.com/x.jpg");
  batch.add_urls("file:///etc/passwd");
  Violations v = ValidateRequest(batch);
  ASSERT_THAT(Fields(v), ElementsAre("urls[1]", "urls[3]", "urls[4]"));
  EXPECT_THAT(v[0].description, HasSubstr("empty"));
  EXPECT_THAT(v[1].description, HasSubstr("it contains user info"));
  EXPECT_THAT(v[2].description, HasSubstr("its scheme is not http or https"));
}

TEST(UrlListTest, MoreUrlsThanTheLimitAreOneViolationBeforeAnyUrlIsChecked) {
  ValidationLimits limits;
  limits.max_urls = 3;
  v1::DetectDamageRequest damage;
  for (int i = 0; i < 3; ++i) damage.add_urls(kUrl);
  EXPECT_THAT(ValidateRequest(damage, limits), IsEmpty());
  damage.add_urls("");  // the fourth, and bad: only the count is reported
  Violations v = ValidateRequest(damage, limits);
  ASSERT_THAT(Fields(v), ElementsAre("urls"));
  EXPECT_THAT(v[0].description, HasSubstr("urls has 4 URLs; at most 3"));
  EXPECT_THAT(v[0].description, HasSubstr("validation.max_urls"));
  v1::AssessQualityBatchRequest batch;
  v1::SegmentVehicleRequest vehicle;
  v1::SegmentPartsRequest parts;
  for (int i = 0; i < 4; ++i) {
    batch.add_urls(kUrl);
    vehicle.add_urls(kUrl);
    parts.add_urls(kUrl);
  }
  EXPECT_THAT(Fields(ValidateRequest(batch, limits)), ElementsAre("urls"));
  EXPECT_THAT(Fields(ValidateRequest(vehicle, limits)), ElementsAre("urls"));
  EXPECT_THAT(Fields(ValidateRequest(parts, limits)), ElementsAre("urls"));
  // The default limit is 100.
  for (int i = 0; i < 96; ++i) batch.add_urls(kUrl);
  EXPECT_THAT(ValidateRequest(batch), IsEmpty());
  batch.add_urls(kUrl);
  EXPECT_THAT(Fields(ValidateRequest(batch)), ElementsAre("urls"));
}

TEST(UrlListTest, AtMostTwentyViolationsAreListedThenHowManyMore) {
  ValidationLimits limits;
  limits.max_urls = 1000;
  v1::AssessQualityBatchRequest batch;
  for (int i = 0; i < 1000; ++i) batch.add_urls("");
  Violations v = ValidateRequest(batch, limits);
  ASSERT_EQ(v.size(), kMaxReportedViolations + 1);
  EXPECT_EQ(v[0].field, "urls[0]");
  EXPECT_EQ(v[19].field, "urls[19]");
  EXPECT_EQ(v[20].field, "");
  EXPECT_EQ(v[20].description, "and 980 more field violations not listed.");
}

TEST(UrlListTest, EveryListRpcChecksElements) {
  v1::SegmentVehicleRequest seg;
  seg.add_urls("https://a.example.com/1.jpg");
  seg.add_urls("https://a.example.com/2 3.jpg");
  EXPECT_THAT(Fields(ValidateRequest(seg)), ElementsAre("urls[1]"));

  v1::SegmentPartsRequest parts;
  parts.add_urls("http://");
  EXPECT_THAT(Fields(ValidateRequest(parts)), ElementsAre("urls[0]"));

  v1::DetectDamageRequest damage;
  damage.add_urls(kUrl);
  damage.add_urls(kUrl);
  damage.add_urls("mailto:a@b.c");
  EXPECT_THAT(Fields(ValidateRequest(damage)), ElementsAre("urls[2]"));
}

TEST(UrlTest, WellFormedUrls) {
  for (const char* good :
       {"http://example.com", "https://example.com/", "HTTPS://Example.COM/a.jpg",
        "http://localhost:8080/x", "https://[::1]/img.png", "https://[2001:db8::7]:443/a",
        "https://192.168.0.1/a.jpg?x=1&y=2#frag", "https://example.com./a",
        "https://s3.eu-west-1.amazonaws.com/b/k.jpg?X-Amz-Signature=abc%20def",
        "https://my_bucket.example.com?q"}) {
    EXPECT_TRUE(IsWellFormedHttpUrl(good)) << good;
  }
}

TEST(UrlTest, MalformedUrls) {
  for (const char* bad : {"",
                          "example.com",
                          "//example.com",
                          "ftp://example.com",
                          "http:/example.com",
                          "http://",
                          "http:///path",
                          "http://:80/",
                          "http://user@example.com/",
                          "https://a.com@evil.com/",
                          "http://example .com",
                          "http://example.com/a b",
                          "http://example.com/a\tb",
                          "http://example.com/\x7f",
                          "http://exa\xC3\xA9mple.com",
                          "http://[::1",
                          "http://[]/",
                          "http://[::1]x/",
                          "http://[example.com]/",
                          "http://example.com:/",
                          "http://example.com:0/",
                          "http://example.com:65536/",
                          "http://example.com:8a/",
                          "http://a..b/",
                          "http://./",
                          "http://a.com\\@b.com/",
                          " http://example.com",
                          "http://example.com\n"}) {
    EXPECT_FALSE(IsWellFormedHttpUrl(bad)) << bad;
  }
}

TEST(UrlTest, LengthLimit) {
  const std::string prefix = "https://example.com/";
  EXPECT_TRUE(IsWellFormedHttpUrl(prefix + std::string(2048 - prefix.size(), 'a')));
  EXPECT_FALSE(IsWellFormedHttpUrl(prefix + std::string(2049 - prefix.size(), 'a')));

  v1::AssessQualityRequest request;
  request.set_url(prefix + std::string(3000, 'a'));
  Violations v = ValidateRequest(request);
  ASSERT_THAT(Fields(v), ElementsAre("url"));
  EXPECT_THAT(v[0].description, HasSubstr("it is longer than 2048 characters"));
  EXPECT_LT(v[0].description.size(), 400u);  // the URL itself is not echoed
  EXPECT_THAT(v[0].description, Not(HasSubstr("aaaa")));
}

// ---------------------------------------------------------------------------
// SearchInspections.
// ---------------------------------------------------------------------------

TEST(SearchInspectionsTest, NeedsLicensePlateOrUsername) {
  v1::SearchInspectionsRequest request;
  Violations v = ValidateRequest(request, ValidationLimits{});
  ASSERT_THAT(Fields(v), ElementsAre("license_plate"));
  EXPECT_THAT(v[0].description, HasSubstr("license_plate or username"));

  request.set_username("agent.smith");
  EXPECT_THAT(ValidateRequest(request, ValidationLimits{}), IsEmpty());
}

TEST(SearchInspectionsTest, PageMustBeAtLeastOne) {
  v1::SearchInspectionsRequest request;
  request.set_license_plate("AB-123-CD");
  for (int bad : {0, -1}) {
    request.set_page(bad);
    Violations v = ValidateRequest(request, ValidationLimits{});
    ASSERT_THAT(Fields(v), ElementsAre("page")) << bad;
    EXPECT_THAT(v[0].description, HasSubstr("1 or greater"));
  }
  request.set_page(1);
  EXPECT_THAT(ValidateRequest(request, ValidationLimits{}), IsEmpty());
  request.set_page(1000000);
  EXPECT_THAT(ValidateRequest(request, ValidationLimits{}), IsEmpty());
}

TEST(SearchInspectionsTest, LimitRangeUsesConfiguredMaximum) {
  ValidationLimits limits;
  limits.search_max_limit = 50;
  v1::SearchInspectionsRequest request;
  request.set_license_plate("AB-123-CD");
  for (int good : {1, 50}) {
    request.set_limit(good);
    EXPECT_THAT(ValidateRequest(request, limits), IsEmpty()) << good;
  }
  for (int bad : {0, -3, 51}) {
    request.set_limit(bad);
    Violations v = ValidateRequest(request, limits);
    ASSERT_THAT(Fields(v), ElementsAre("limit")) << bad;
    EXPECT_THAT(v[0].description, HasSubstr("between 1 and 50"));
  }
  // The default maximum is 100.
  request.set_limit(100);
  EXPECT_THAT(ValidateRequest(request, ValidationLimits{}), IsEmpty());
  request.set_limit(101);
  EXPECT_THAT(Fields(ValidateRequest(request, ValidationLimits{})), ElementsAre("limit"));
}

TEST(SearchInspectionsTest, SeveralProblemsAreReportedInFieldOrder) {
  v1::SearchInspectionsRequest request;
  request.set_limit(0);
  request.set_page(0);
  EXPECT_THAT(Fields(ValidateRequest(request, ValidationLimits{})),
              ElementsAre("license_plate", "page", "limit"));
}

// ---------------------------------------------------------------------------
// GetDamagesReport.
// ---------------------------------------------------------------------------

TEST(GetDamagesReportTest, InspectionIdIsRequired) {
  Violations v = ValidateRequest(v1::GetDamagesReportRequest());
  ASSERT_THAT(Fields(v), ElementsAre("inspection_id"));
  EXPECT_THAT(v[0].description, HasSubstr("required"));
}

TEST(GetDamagesReportTest, InspectionIdMustBeAPathSegment) {
  for (const char* bad : {"a/b", "../x", "a?b", "a#b", "a b", ".", ".."}) {
    v1::GetDamagesReportRequest request;
    request.set_inspection_id(bad);
    Violations v = ValidateRequest(request);
    ASSERT_THAT(Fields(v), ElementsAre("inspection_id")) << bad;
    EXPECT_THAT(v[0].description, HasSubstr("vendor URL")) << bad;
  }
}

// ---------------------------------------------------------------------------
// UpdateWebhookConfig.
// ---------------------------------------------------------------------------

TEST(UpdateWebhookConfigTest, UrlIsRequiredAndWellFormed) {
  v1::UpdateWebhookConfigRequest request;
  Violations v = ValidateRequest(request);
  ASSERT_THAT(Fields(v), ElementsAre("webhook_url_v2"));
  EXPECT_THAT(v[0].description, HasSubstr("required"));
  request.set_webhook_url_v2("hooks.example.com");
  EXPECT_THAT(Fields(ValidateRequest(request)), ElementsAre("webhook_url_v2"));
}

TEST(UpdateWebhookConfigTest, HeaderKeyIsNeverEchoed) {
  v1::UpdateWebhookConfigRequest request;
  request.set_webhook_url_v2("https://hooks.example.com/in");
  request.set_webhook_header_key(kSecret);
  Violations v = ValidateRequest(request);
  ASSERT_THAT(Fields(v), ElementsAre("webhook_header_key"));
  EXPECT_THAT(v[0].description, HasSubstr("spaces"));
  EXPECT_THAT(v[0].description, Not(HasSubstr(kSecret)));
  EXPECT_THAT(v[0].description, Not(HasSubstr("s3cr3t")));
  EXPECT_THAT(v[0].description, Not(HasSubstr("key-Value")));
}

TEST(UpdateWebhookConfigTest, HeaderKeyRules) {
  v1::UpdateWebhookConfigRequest request;
  request.set_webhook_url_v2("https://hooks.example.com/in");
  request.set_webhook_header_key("");
  Violations v = ValidateRequest(request);
  ASSERT_THAT(Fields(v), ElementsAre("webhook_header_key"));
  EXPECT_THAT(v[0].description, HasSubstr("must not be empty"));

  for (const char* bad : {"abc\r\nX-Evil: 1", "tab\tkey", "key\x7f", "cl\xC3\xA9"}) {
    request.set_webhook_header_key(bad);
    EXPECT_THAT(Fields(ValidateRequest(request)), ElementsAre("webhook_header_key")) << bad;
  }
  request.clear_webhook_header_key();
  EXPECT_THAT(ValidateRequest(request), IsEmpty());
}

// ---------------------------------------------------------------------------
// UpdateEventConfig and TestWebhook.
// ---------------------------------------------------------------------------

TEST(UpdateEventConfigTest, EventNameIsRequired) {
  v1::UpdateEventConfigRequest request;
  request.set_webhook(true);
  Violations v = ValidateRequest(request);
  ASSERT_THAT(Fields(v), ElementsAre("event_name"));
  EXPECT_THAT(v[0].description, HasSubstr("event_name or event_name_raw"));

  request.set_event_name_raw("newInspection");
  EXPECT_THAT(ValidateRequest(request), IsEmpty());
}

TEST(UpdateEventConfigTest, BothEventNamesAreRejected) {
  v1::UpdateEventConfigRequest request;
  request.set_webhook(false);
  request.set_event_name(v1::EVENT_NAME_NEW_INSPECTION);
  request.set_event_name_raw("newInspection");
  Violations v = ValidateRequest(request);
  ASSERT_THAT(Fields(v), ElementsAre("event_name_raw"));
  EXPECT_THAT(v[0].description, HasSubstr("only one of"));
}

TEST(UpdateEventConfigTest, WebhookIsRequired) {
  v1::UpdateEventConfigRequest request;
  request.set_event_name(v1::EVENT_NAME_DELETE_INSPECTION);
  Violations v = ValidateRequest(request);
  ASSERT_THAT(Fields(v), ElementsAre("webhook"));
  EXPECT_THAT(v[0].description, HasSubstr("required"));

  EXPECT_THAT(Fields(ValidateRequest(v1::UpdateEventConfigRequest())),
              ElementsAre("event_name", "webhook"));
}

TEST(UpdateEventConfigTest, UnknownEnumNumberAndBadRawNameAreRejected) {
  v1::UpdateEventConfigRequest request;
  request.set_webhook(true);
  request.set_event_name(static_cast<v1::EventName>(77));
  EXPECT_THAT(Fields(ValidateRequest(request)), ElementsAre("event_name"));

  request.clear_event_name();
  request.set_event_name_raw("new Inspection");
  EXPECT_THAT(Fields(ValidateRequest(request)), ElementsAre("event_name_raw"));
}

TEST(TestWebhookTest, EventNameRules) {
  v1::TestWebhookRequest request;
  EXPECT_THAT(Fields(ValidateRequest(request)), ElementsAre("event_name"));
  request.set_event_name(v1::EVENT_NAME_TRADEIN_VEHICLE);
  EXPECT_THAT(ValidateRequest(request), IsEmpty());
  request.set_event_name_raw("tradeinVehicle");
  EXPECT_THAT(Fields(ValidateRequest(request)), ElementsAre("event_name_raw"));
}

TEST(TestWebhookTest, InspectionIdIsOptionalButChecked) {
  v1::TestWebhookRequest request;
  request.set_event_name(v1::EVENT_NAME_CREATE_REPORT);
  EXPECT_THAT(ValidateRequest(request), IsEmpty());
  for (const char* bad : {"a/b", "a?b", "a#b", "a b"}) {
    request.set_inspection_id(bad);
    EXPECT_THAT(Fields(ValidateRequest(request)), ElementsAre("inspection_id")) << bad;
  }
  request.clear_event_name();
  EXPECT_THAT(Fields(ValidateRequest(request)), ElementsAre("event_name", "inspection_id"));
}

// The rules of every request type of the API are sound: each on a field of the right type,
// each limit and check name known (a typo in a proto annotation would silently check
// nothing).
TEST(ValidationRulesTest, EveryRequestTypesRulesAreSound) {
  int with_rules = 0;
  for (const auto* file : {v1::CreateTokenRequest::descriptor()->file(),
                           v1::AssessQualityRequest::descriptor()->file(),
                           v1::DetectDamageRequest::descriptor()->file(),
                           v1::SearchInspectionsRequest::descriptor()->file(),
                           v1::UpdateEventConfigRequest::descriptor()->file()}) {
    for (int i = 0; i < file->message_type_count(); ++i) {
      const google::protobuf::Descriptor* message = file->message_type(i);
      EXPECT_THAT(RuleProblems(*message), IsEmpty()) << message->full_name();
      for (int f = 0; f < message->field_count(); ++f) {
        if (message->field(f)->options().HasExtension(v1::rules)) ++with_rules;
      }
    }
  }
  EXPECT_GE(with_rules, 20);
}

TEST(ValidationRulesTest, RuleProblemsFindsMisplacedRules) {
  // A message built at run time, whose rules are each on the wrong kind of field.
  google::protobuf::FileDescriptorProto file;
  file.set_name("bad_rules_test.proto");
  file.set_package("badrules");
  file.set_syntax("proto3");
  file.add_dependency("inspection/v1/vendor_options.proto");
  google::protobuf::DescriptorProto* message = file.add_message_type();
  message->set_name("Bad");
  auto add = [message](const char* name, int number,
                       google::protobuf::FieldDescriptorProto::Type type) {
    google::protobuf::FieldDescriptorProto* field = message->add_field();
    field->set_name(name);
    field->set_number(number);
    field->set_type(type);
    field->set_label(google::protobuf::FieldDescriptorProto::LABEL_OPTIONAL);
    return field->mutable_options()->MutableExtension(v1::rules);
  };
  add("number", 1, google::protobuf::FieldDescriptorProto::TYPE_INT32)->set_http_url(true);
  add("single", 2, google::protobuf::FieldDescriptorProto::TYPE_STRING)->set_min_items(1);
  add("limited", 3, google::protobuf::FieldDescriptorProto::TYPE_INT32)->set_max_limit("nope");
  add("checked", 4, google::protobuf::FieldDescriptorProto::TYPE_STRING)
      ->set_check("search.plate_or_username");
  add("unknown", 5, google::protobuf::FieldDescriptorProto::TYPE_STRING)->set_check("no.such");
  // A rule inside a nested message would check nothing.
  google::protobuf::DescriptorProto* inner = file.add_message_type();
  inner->set_name("Inner");
  google::protobuf::FieldDescriptorProto* inner_field = inner->add_field();
  inner_field->set_name("x");
  inner_field->set_number(1);
  inner_field->set_type(google::protobuf::FieldDescriptorProto::TYPE_STRING);
  inner_field->set_label(google::protobuf::FieldDescriptorProto::LABEL_OPTIONAL);
  inner_field->mutable_options()->MutableExtension(v1::rules)->set_required("x");
  google::protobuf::FieldDescriptorProto* nested = message->add_field();
  nested->set_name("inner");
  nested->set_number(6);
  nested->set_type(google::protobuf::FieldDescriptorProto::TYPE_MESSAGE);
  nested->set_type_name(".badrules.Inner");
  nested->set_label(google::protobuf::FieldDescriptorProto::LABEL_OPTIONAL);
  google::protobuf::DescriptorPool pool(google::protobuf::DescriptorPool::generated_pool());
  ASSERT_NE(v1::FieldRules::descriptor(), nullptr);
  const google::protobuf::FileDescriptor* built = pool.BuildFile(file);
  ASSERT_NE(built, nullptr);
  const std::vector<std::string> problems = RuleProblems(*built->message_type(0));
  EXPECT_THAT(problems, ElementsAre(HasSubstr("badrules.Inner.x: (rules) on a field of a nested"),
                                    HasSubstr("badrules.Bad.number: http_url"),
                                    HasSubstr("badrules.Bad.single: min_items"),
                                    HasSubstr("no limit is named nope"),
                                    HasSubstr("is for inspection.v1.SearchInspectionsRequest"),
                                    HasSubstr("no check is named no.such")));
  // A message without rules has nothing to report, and is valid.
  EXPECT_THAT(RuleProblems(*v1::TestWebhookResponse::descriptor()), IsEmpty());
  EXPECT_THAT(ValidateRequest(v1::TestWebhookResponse()), IsEmpty());
}

}  // namespace
}  // namespace inspection::validation
