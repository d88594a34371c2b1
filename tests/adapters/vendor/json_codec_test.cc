#include "adapters/vendor/json_codec.h"

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor.pb.h>
#include <google/protobuf/dynamic_message.h>
#include <google/protobuf/text_format.h>
#include <google/protobuf/util/message_differencer.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "inspection/v1/common.pb.h"
#include "inspection/v1/damage.pb.h"
#include "inspection/v1/event_config.pb.h"
#include "inspection/v1/image.pb.h"
#include "inspection/v1/inspection.pb.h"
#include "inspection/v1/token.pb.h"

namespace inspection::vendor {
namespace {

using ::google::protobuf::Message;
using ::google::protobuf::TextFormat;
using ::google::protobuf::util::MessageDifferencer;
using ::nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;

namespace v1 = ::inspection::v1;

json Parse(const std::string& text) {
  json parsed = json::parse(text, nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(parsed.is_discarded()) << "test JSON does not parse: " << text;
  return parsed;
}

template <typename T>
T ParseProto(const std::string& text) {
  T message;
  EXPECT_TRUE(TextFormat::ParseFromString(text, &message)) << text;
  return message;
}

::testing::AssertionResult ProtoEquals(const Message& expected, const Message& actual) {
  std::string diff;
  MessageDifferencer differencer;
  differencer.ReportDifferencesToString(&diff);
  if (differencer.Compare(expected, actual)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << diff << "actual:\n" << actual.DebugString();
}

bool ReportIsEmpty(const DecodeReport& report) {
  return report.unknown_paths.empty() && report.type_mismatch_paths.empty() &&
         report.unknown_enum_paths.empty();
}

std::string Describe(const DecodeReport& report) {
  std::string out;
  for (const auto& path : report.unknown_paths) out += " unknown:" + path;
  for (const auto& path : report.type_mismatch_paths) out += " mismatch:" + path;
  for (const auto& path : report.unknown_enum_paths) out += " enum:" + path;
  return out;
}

// ---------------------------------------------------------------------------
// Sample shapes from the vendor spec.
// ---------------------------------------------------------------------------

constexpr char kQualityListCapitalised[] = R"json({
  "id": "q-1", "status": 200,
  "data": [{
    "classification": {
      "imageQualityCompliance": "exploitable", "quality": 0.71, "angle": "Front t34 Driver",
      "cut": "not cut", "rotation": "0", "type": "distant",
      "reason": {"blur": 0.02, "compression": 0.1, "corrupted": 0, "Dark": 0.3, "Dirt": 0.4,
                 "Flare": 0.05, "Reflection": 0.6, "screen": 0, "Shadow": 0.7,
                 "Sticker": 0.01, "Wet": 0.2, "obstacle": 0.03, "height": 512, "width": 384}
    },
    "status": 200, "url": "https://img.example/1.jpg"
  }]
})json";

constexpr char kQualityListLowerCase[] = R"json({
  "id": "q-1", "status": 200,
  "data": [{
    "classification": {
      "imageQualityCompliance": "exploitable", "quality": 0.71, "angle": "Front t34 Driver",
      "cut": "not cut", "rotation": "0", "type": "distant",
      "reason": {"blur": 0.02, "compression": 0.1, "corrupted": 0, "dark": 0.3, "dirt": 0.4,
                 "flare": 0.05, "reflection": 0.6, "screen": 0, "shadow": 0.7,
                 "sticker": 0.01, "wet": 0.2, "obstacle": 0.03, "height": 512, "width": 384}
    },
    "status": 200, "url": "https://img.example/1.jpg"
  }]
})json";

constexpr char kQualityListProto[] = R"pb(
  id: "q-1"
  status: 200
  data {
    classification {
      image_quality_compliance: IMAGE_QUALITY_COMPLIANCE_EXPLOITABLE
      image_quality_compliance_raw: "exploitable"
      quality: 0.71
      angle: IMAGE_ANGLE_FRONT_T34_DRIVER
      angle_raw: "Front t34 Driver"
      cut: IMAGE_CUT_NOT_CUT
      cut_raw: "not cut"
      rotation: IMAGE_ROTATION_NONE
      rotation_raw: "0"
      type: IMAGE_TYPE_DISTANT
      type_raw: "distant"
      reason {
        blur: 0.02
        compression: 0.1
        corrupted: 0
        dark: 0.3
        dirt: 0.4
        flare: 0.05
        reflection: 0.6
        screen: 0
        shadow: 0.7
        sticker: 0.01
        wet: 0.2
        obstacle: 0.03
        height: 512
        width: 384
      }
    }
    status: 200
    url: "https://img.example/1.jpg"
  })pb";

constexpr char kQualitySingle[] = R"json({
  "id": "q-2", "status": 200,
  "data": [{
    "classification": {
      "imageQualityCompliance": "good", "quality": 0.93, "angle": "Side Passenger",
      "cut": "border", "rotation": "90_CLOCKWISE", "type": "close",
      "reason": {"blur": 0.01, "compression": 0.0, "corrupted": 0.0, "dark": 0.1, "dirt": 0.0,
                 "flare": 0.0, "reflection": 0.2, "screen": 0.0, "shadow": 0.1,
                 "sticker": 0.0, "wet": 0.0, "snow": 0.0, "obstacle": 0.0,
                 "height": 512, "width": 512}
    },
    "status": 200, "url": "https://img.example/2.jpg"
  }]
})json";

constexpr char kPartsResult[] = R"json({
  "id": "p-1", "status": 200,
  "data": {
    "vehicle": {"region": "FR", "immat": "AB-123-CD"},
    "detectionList": [{
      "id": "img-1", "imageStatus": "", "status": 200, "url": "https://img.example/3.jpg",
      "detections": {"partsData": [
        {"type": "ROUAVD", "centerX": 0.21, "centerY": 0.64, "width": 0.12, "height": 0.2,
         "contour": [[0.15, 0.55], [0.27, 0.55], [0.27, 0.74], [0.15, 0.74]],
         "wheelType": "Jante_AL"},
        {"type": "CPT", "centerX": 0.5, "centerY": 0.4, "width": 0.3, "height": 0.1,
         "contour": [[0.35, 0.35], [0.65, 0.35], [0.5, 0.45]]}
      ]}
    }, {
      "id": "img-2", "imageStatus": "no vehicle found", "status": 400,
      "url": "https://img.example/4.jpg", "detections": {}
    }]
  }
})json";

constexpr char kSilhouetteResult[] = R"json({
  "id": "s-1", "status": 200,
  "data": {"detectionList": [{
    "id": "img-1", "imageStatus": "", "status": 200, "url": "https://img.example/5.jpg",
    "detections": {"carData": {
      "contour": [[[0.1, 0.2], [0.9, 0.2], [0.9, 0.8]], [[0.4, 0.4], [0.5, 0.5], [0.4, 0.5]]],
      "height": 0.6, "width": 0.8, "centerY": 0.5, "centerX": 0.5}}
  }]}
})json";

constexpr char kTokenCreation[] = R"json({
  "token": {
    "expired": false, "id": "tok-rec-1", "createdAt": "2024-03-01T10:00:00.000Z",
    "updatedAt": "2024-03-01T10:00:00.000Z", "tradeinVehicle": true, "tradeinStatus": 0,
    "tradeinStatusUpdatedAt": "2024-03-01T10:00:00.000Z", "sendingType": 0,
    "vehiclePtr": {"id": "veh-1"}, "uid": "u-123", "expiresIn": "2024-05-30T10:00:00.000Z",
    "options": {"fastTrack": true, "shootInspect": true, "cost": false, "report": false,
                "downloadRoi": false, "loadInspection": false},
    "APITokenPtr": {"id": "api-1"}
  },
  "webApiVersion": "v2.5"
})json";

constexpr char kTokenStatus[] = R"json({
  "token": {
    "expired": false, "id": "tok-rec-1", "createdAt": "2024-03-01T10:00:00.000Z",
    "updatedAt": "2024-03-02T10:00:00.000Z", "tradeinVehicle": true, "tradeinStatus": 3,
    "tradeinStatusUpdatedAt": "2024-03-02T10:00:00.000Z", "sendingType": null,
    "vehiclePtr": {"id": "veh-1"}, "uid": "u-123", "expiresIn": "2024-05-30T10:00:00.000Z",
    "options": {"fastTrack": true, "shootInspect": true, "cost": false, "report": false,
                "downloadRoi": false, "loadInspection": false, "thirdParty": false},
    "APITokenPtr": {"id": "api-1"},
    "inspectionPtr": {"id": "insp-1", "type": 4, "percentDamage": null},
    "customerPtr": {"id": "cust-1"}, "creatorUserPtr": {"id": "user-1"},
    "deviceId": "u-123-pwa"
  },
  "webApiVersion": "v2"
})json";

constexpr char kSearchResult[] = R"json({
  "data": [{
    "id": "insp-1", "createdAt": "2024-03-02T10:00:00.000Z",
    "updatedAt": "2024-03-03T10:00:00.000Z", "detectionFinished": true,
    "detectionFinishedAt": "2024-03-03T09:00:00.000Z",
    "detectionStartedAt": "2024-03-03T08:59:00.000Z", "detectionStatus": false,
    "inspectionCreatedAt": "2024-03-02T10:00:00.000Z", "damageControl": 125000,
    "numberDamage": 4, "numberSevParts": 2, "originalNbDamage": 5, "fastTrackCompletion": 1,
    "user": {"username": "agent7"}, "type": 4,
    "vehicle": {"id": "veh-1", "createdAt": "2024-03-01T10:00:00.000Z",
                "updatedAt": "2024-03-01T10:00:00.000Z", "companyPtr": {"id": "co-1"},
                "immat": "AB-123-CD"},
    "isDeleted": false, "inspected": false, "picturesSelected": {},
    "thumbnailImagePtr": {"id": "img-9", "createdAt": "2024-03-02T10:00:00.000Z",
                          "updatedAt": "2024-03-02T10:00:00.000Z"},
    "modShootInspectEndDate": "2024-03-02T10:30:00.000Z", "globalState": "end-inspect",
    "thumbnailUrl": "https://img.example/thumb.jpg",
    "tradeInToken": {"uid": "u-123", "id": "tok-rec-1", "createdAt": "2024-03-01T10:00:00.000Z",
                     "updatedAt": "2024-03-02T10:00:00.000Z", "expired": false,
                     "tradeinVehicle": true, "tradeinStatus": 5,
                     "tradeinStatusUpdatedAt": "2024-03-03T10:00:00.000Z", "sendingType": 2,
                     "inspectionPtr": {"id": "insp-1"}, "deviceId": "u-123-pwa",
                     "expiresIn": "2024-05-30T10:00:00.000Z",
                     "options": {"fastTrack": false, "shootInspect": true}, "monitoring": []}
  }],
  "paginationInfo": {"totalInspections": 1, "totalPages": 1, "currentPage": 1, "range": "1-1"}
})json";

constexpr char kRemoveBackgroundResult[] =
    R"json({"id": "rb-1", "path": "https://img.example/out.png", "status": "success"})json";

// A configwebhook answer as the codec sees it: sealed first (the key never reaches it; see
// SealWebhookHeaderKey and mappers_test.cc).
constexpr char kWebhookConfigNulls[] = R"({"webhookUrl": null, "webhookUrlV2": null})";

constexpr char kEventConfig[] = R"json({
  "eventName": "createReport", "webhook": true, "companyEmail": false,
  "companyEmailAddress": null, "customerEmail": false, "customerSMS": true,
  "senderEmail": null, "senderName": "Garage"
})json";

constexpr char kTestWebhookResult[] = R"json({"status": "send"})json";

// ---------------------------------------------------------------------------
// Round trips JSON -> proto -> JSON over every sample shape.
// ---------------------------------------------------------------------------

struct RoundTripCase {
  const char* name;
  std::function<std::unique_ptr<Message>()> make;
  const char* json_text;
};

class RoundTripTest : public ::testing::TestWithParam<RoundTripCase> {};

TEST_P(RoundTripTest, DecodesWithoutDriftAndEncodesBackToTheSameJson) {
  const json input = Parse(GetParam().json_text);
  std::unique_ptr<Message> decoded = GetParam().make();
  DecodeReport report;
  ASSERT_TRUE(DecodeMessage(input, decoded.get(), &report).ok());
  EXPECT_TRUE(ReportIsEmpty(report)) << Describe(report);

  const json encoded = EncodeMessage(*decoded);
  EXPECT_EQ(encoded, input) << "encoded: " << encoded.dump() << "\ninput:   " << input.dump();

  // And back again: the proto survives its own encoding.
  std::unique_ptr<Message> again = GetParam().make();
  ASSERT_TRUE(DecodeMessage(encoded, again.get(), nullptr).ok());
  EXPECT_TRUE(ProtoEquals(*decoded, *again));
}

template <typename T>
std::function<std::unique_ptr<Message>()> Make() {
  return [] { return std::make_unique<T>(); };
}

INSTANTIATE_TEST_SUITE_P(
    SpecSamples, RoundTripTest,
    ::testing::Values(
        RoundTripCase{"QualityList", Make<v1::AssessQualityBatchResponse>(), kQualityListLowerCase},
        RoundTripCase{"QualitySingle", Make<v1::AssessQualityResponse>(), kQualitySingle},
        RoundTripCase{"Parts", Make<v1::SegmentPartsResponse>(), kPartsResult},
        RoundTripCase{"Silhouette", Make<v1::SegmentVehicleResponse>(), kSilhouetteResult},
        RoundTripCase{"TokenCreation", Make<v1::CreateTokenResponse>(), kTokenCreation},
        RoundTripCase{"TokenStatus", Make<v1::GetTokenStatusResponse>(), kTokenStatus},
        RoundTripCase{"Search", Make<v1::SearchInspectionsResponse>(), kSearchResult},
        RoundTripCase{"RemoveBackground", Make<v1::RemoveBackgroundResponse>(),
                      kRemoveBackgroundResult},
        RoundTripCase{"WebhookConfigNulls", Make<v1::WebhookConfig>(), kWebhookConfigNulls},
        RoundTripCase{"EventConfig", Make<v1::EventConfig>(), kEventConfig},
        RoundTripCase{"TestWebhook", Make<v1::TestWebhookResponse>(), kTestWebhookResult}),
    [](const ::testing::TestParamInfo<RoundTripCase>& info) { return info.param.name; });

// ---------------------------------------------------------------------------
// Image quality.
// ---------------------------------------------------------------------------

TEST(JsonCodecQualityTest, CapitalisedAndLowerCaseReasonKeysDecodeIntoTheSameFields) {
  const auto expected = ParseProto<v1::AssessQualityBatchResponse>(kQualityListProto);

  v1::AssessQualityBatchResponse capitalised;
  DecodeReport capitalised_report;
  ASSERT_TRUE(
      DecodeMessage(Parse(kQualityListCapitalised), &capitalised, &capitalised_report).ok());
  EXPECT_TRUE(ReportIsEmpty(capitalised_report)) << Describe(capitalised_report);
  EXPECT_TRUE(ProtoEquals(expected, capitalised));

  v1::AssessQualityBatchResponse lower_case;
  DecodeReport lower_case_report;
  ASSERT_TRUE(DecodeMessage(Parse(kQualityListLowerCase), &lower_case, &lower_case_report).ok());
  EXPECT_TRUE(ReportIsEmpty(lower_case_report)) << Describe(lower_case_report);
  EXPECT_TRUE(ProtoEquals(expected, lower_case));
}

TEST(JsonCodecQualityTest, AliasesAreWrittenBackWithTheJsonName) {
  v1::AssessQualityBatchResponse decoded;
  ASSERT_TRUE(DecodeMessage(Parse(kQualityListCapitalised), &decoded, nullptr).ok());
  const json reason = EncodeMessage(decoded)["data"][0]["classification"]["reason"];
  EXPECT_EQ(reason.value("dark", -1.0), 0.3);
  EXPECT_FALSE(reason.contains("Dark"));
  EXPECT_EQ(EncodeMessage(decoded), Parse(kQualityListLowerCase));
}

TEST(JsonCodecQualityTest, SecondSpellingOfTheSameFieldIsKeptAsUnknown) {
  // nlohmann::json iterates keys in sorted order, so `Dark` comes before `dark`.
  v1::QualityReason reason;
  DecodeReport report;
  ASSERT_TRUE(DecodeMessage(Parse(R"({"dark": 0.1, "Dark": 0.2})"), &reason, &report).ok());
  EXPECT_TRUE(ProtoEquals(ParseProto<v1::QualityReason>(R"pb(
                            dark: 0.2
                            unknown_fields {
                              fields {
                                key: "dark"
                                value { number_value: 0.1 }
                              }
                            })pb"),
                          reason));
  EXPECT_THAT(report.unknown_paths, ElementsAre("dark"));
}

TEST(JsonCodecQualityTest, UnknownComplianceKeepsRawValueAndIsReported) {
  json input = Parse(kQualitySingle);
  input["data"][0]["classification"]["imageQualityCompliance"] = "acceptable";
  v1::AssessQualityResponse decoded;
  DecodeReport report;
  ASSERT_TRUE(DecodeMessage(input, &decoded, &report).ok());

  const v1::QualityClassification& classification = decoded.data(0).classification();
  EXPECT_EQ(classification.image_quality_compliance(), v1::IMAGE_QUALITY_COMPLIANCE_UNSPECIFIED);
  EXPECT_EQ(classification.image_quality_compliance_raw(), "acceptable");
  EXPECT_FALSE(classification.has_unknown_fields());
  EXPECT_THAT(report.unknown_enum_paths,
              ElementsAre("data[0].classification.imageQualityCompliance"));
  EXPECT_THAT(report.unknown_paths, IsEmpty());
  EXPECT_THAT(report.type_mismatch_paths, IsEmpty());
  // The raw value goes back to the vendor unchanged.
  EXPECT_EQ(EncodeMessage(decoded), input);
}

TEST(JsonCodecQualityTest, KnownEnumAlwaysFillsItsRawSibling) {
  v1::QualityClassification classification;
  ASSERT_TRUE(
      DecodeMessage(Parse(R"({"angle": "Back", "cut": "cut"})"), &classification, nullptr).ok());
  EXPECT_EQ(classification.angle(), v1::IMAGE_ANGLE_BACK);
  EXPECT_EQ(classification.angle_raw(), "Back");
  EXPECT_EQ(classification.cut(), v1::IMAGE_CUT_CUT);
  EXPECT_EQ(classification.cut_raw(), "cut");
}

TEST(JsonCodecQualityTest, EnumWithoutRawIsWrittenFromItsVendorString) {
  v1::QualityClassification classification;
  classification.set_type(v1::IMAGE_TYPE_NOT_A_CAR);
  classification.set_rotation(v1::IMAGE_ROTATION_180);
  EXPECT_EQ(EncodeMessage(classification),
            Parse(R"({"type": "not_a_car", "rotation": "ROTATE_180"})"));
  // The raw sibling wins over its enum.
  classification.set_type_raw("van");
  EXPECT_EQ(EncodeMessage(classification)["type"], "van");
}

// ---------------------------------------------------------------------------
// Parts and silhouettes: polygons and tuples.
// ---------------------------------------------------------------------------

TEST(JsonCodecPartsTest, DecodesPolygonsAndWheelType) {
  v1::SegmentPartsResponse decoded;
  DecodeReport report;
  ASSERT_TRUE(DecodeMessage(Parse(kPartsResult), &decoded, &report).ok());
  EXPECT_TRUE(ReportIsEmpty(report)) << Describe(report);

  ASSERT_EQ(decoded.data().detection_list_size(), 2);
  EXPECT_EQ(decoded.data().vehicle().immat(), "AB-123-CD");
  const v1::PartsDetection& first = decoded.data().detection_list(0);
  ASSERT_EQ(first.detections().parts_data_size(), 2);
  EXPECT_TRUE(ProtoEquals(ParseProto<v1::VehiclePart>(R"pb(
                            type: "ROUAVD"
                            center_x: 0.21
                            center_y: 0.64
                            width: 0.12
                            height: 0.2
                            contour {
                              points { x: 0.15 y: 0.55 }
                              points { x: 0.27 y: 0.55 }
                              points { x: 0.27 y: 0.74 }
                              points { x: 0.15 y: 0.74 }
                            }
                            wheel_type: "Jante_AL")pb"),
                          first.detections().parts_data(0)));
  EXPECT_FALSE(first.detections().parts_data(1).has_wheel_type());
  EXPECT_FALSE(first.detections().parts_data(1).has_part());  // gateway_only: never decoded.
  EXPECT_EQ(decoded.data().detection_list(1).image_status(), "no vehicle found");
  EXPECT_EQ(decoded.data().detection_list(1).detections().parts_data_size(), 0);
}

TEST(JsonCodecPartsTest, EmptyRepeatedFieldIsOmittedWhenEncoding) {
  // A proto3 repeated field has no presence: `[]` and an absent key decode alike, and
  // both are written as an absent key.
  v1::PartsDetections detections;
  DecodeReport report;
  ASSERT_TRUE(DecodeMessage(Parse(R"({"partsData": []})"), &detections, &report).ok());
  EXPECT_TRUE(ReportIsEmpty(report));
  EXPECT_EQ(detections.parts_data_size(), 0);
  EXPECT_EQ(EncodeMessage(detections), json::object());
}

TEST(JsonCodecPartsTest, SilhouetteContourIsAListOfPolygons) {
  v1::SegmentVehicleResponse decoded;
  ASSERT_TRUE(DecodeMessage(Parse(kSilhouetteResult), &decoded, nullptr).ok());
  const v1::CarData& car = decoded.data().detection_list(0).detections().car_data();
  ASSERT_EQ(car.contour_size(), 2);
  EXPECT_EQ(car.contour(0).points_size(), 3);
  EXPECT_EQ(car.contour(1).points(1).x(), 0.5);
  EXPECT_EQ(car.center_x(), 0.5);
}

TEST(JsonCodecPartsTest, ThreeElementPointMakesTheWholeContourAMismatch) {
  v1::VehiclePart part;
  DecodeReport report;
  const json input = Parse(R"({"type": "PRTAVD", "contour": [[0.1, 0.2], [0.3, 0.4, 0.5]]})");
  ASSERT_TRUE(DecodeMessage(input, &part, &report).ok());
  EXPECT_FALSE(part.has_contour());  // Nothing half-filled.
  EXPECT_EQ(part.type(), "PRTAVD");
  EXPECT_THAT(report.type_mismatch_paths, ElementsAre("contour"));
  EXPECT_THAT(report.unknown_paths, IsEmpty());
  ASSERT_TRUE(part.unknown_fields().fields().contains("contour"));
  EXPECT_EQ(ValueToJson(part.unknown_fields().fields().at("contour")), input["contour"]);
  EXPECT_EQ(EncodeMessage(part), input);
}

TEST(JsonCodecPartsTest, BadPolygonInARepeatedContourKeepsTheWholeFieldRaw) {
  v1::CarData car;
  DecodeReport report;
  const json input =
      Parse(R"({"contour": [[[0.1, 0.2], [0.3, 0.4]], [[0.5, "x"]]], "height": 0.5})");
  ASSERT_TRUE(DecodeMessage(input, &car, &report).ok());
  EXPECT_EQ(car.contour_size(), 0);
  EXPECT_EQ(car.height(), 0.5);
  EXPECT_THAT(report.type_mismatch_paths, ElementsAre("contour"));
  EXPECT_EQ(EncodeMessage(car), input);
}

TEST(JsonCodecPartsTest, ShortOrNullTupleElementsAreMismatches) {
  for (const char* contour : {R"([[0.1]])", R"([[null, 0.2]])", R"([{"x": 1, "y": 2}])"}) {
    v1::VehiclePart part;
    DecodeReport report;
    json input = json::object();
    input["contour"] = Parse(contour);
    ASSERT_TRUE(DecodeMessage(input, &part, &report).ok());
    EXPECT_FALSE(part.has_contour()) << contour;
    EXPECT_THAT(report.type_mismatch_paths, ElementsAre("contour")) << contour;
  }
}

TEST(JsonCodecPartsTest, TopLevelTuple) {
  v1::Point point;
  ASSERT_TRUE(DecodeMessage(Parse("[0.25, 0.75]"), &point, nullptr).ok());
  EXPECT_TRUE(ProtoEquals(ParseProto<v1::Point>("x: 0.25 y: 0.75"), point));
  EXPECT_EQ(EncodeMessage(point), Parse("[0.25, 0.75]"));

  // Three elements do not fit a point and there is nowhere to keep them at the top.
  DecodeReport report;
  const absl::Status status = DecodeMessage(Parse("[1, 2, 3]"), &point, &report);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("inspection.v1.Point"));
  EXPECT_TRUE(ProtoEquals(v1::Point(), point));
}

TEST(JsonCodecPartsTest, DefaultPointIsWrittenWithBothCoordinates) {
  EXPECT_EQ(EncodeMessage(v1::Point()), Parse("[0.0, 0.0]"));
  EXPECT_EQ(EncodeMessage(v1::Polygon()), json::array());
}

TEST(JsonCodecPartsTest, GatewayOnlyPartIsNeitherDecodedNorEncoded) {
  v1::VehiclePart part;
  DecodeReport report;
  ASSERT_TRUE(
      DecodeMessage(Parse(R"({"type": "CPT", "part": {"code": "CPT"}})"), &part, &report).ok());
  EXPECT_FALSE(part.has_part());
  EXPECT_THAT(report.unknown_paths, ElementsAre("part"));
  EXPECT_TRUE(part.unknown_fields().fields().contains("part"));

  v1::VehiclePart computed;
  computed.set_type("CPT");
  computed.mutable_part()->set_family_name("hood");
  EXPECT_EQ(EncodeMessage(computed), Parse(R"({"type": "CPT"})"));
}

// ---------------------------------------------------------------------------
// Tokens.
// ---------------------------------------------------------------------------

TEST(JsonCodecTokenTest, DecodesApiTokenPtrAndCreationShape) {
  v1::CreateTokenResponse decoded;
  DecodeReport report;
  ASSERT_TRUE(DecodeMessage(Parse(kTokenCreation), &decoded, &report).ok());
  EXPECT_TRUE(ReportIsEmpty(report)) << Describe(report);
  EXPECT_EQ(decoded.token().api_token_ptr().id(), "api-1");
  EXPECT_EQ(decoded.token().vehicle_ptr().id(), "veh-1");
  EXPECT_TRUE(decoded.token().options().fast_track());
  EXPECT_TRUE(decoded.token().options().has_load_inspection());
  EXPECT_FALSE(decoded.token().options().load_inspection());
  EXPECT_EQ(decoded.web_api_version(), "v2.5");
  EXPECT_EQ(decoded.token().tradein_status(), v1::TRADEIN_STATUS_CREATED);
  EXPECT_EQ(decoded.token().tradein_status_raw(), 0);
}

TEST(JsonCodecTokenTest, StatusShapeKeepsNullPercentDamageAsAValue) {
  v1::GetTokenStatusResponse decoded;
  ASSERT_TRUE(DecodeMessage(Parse(kTokenStatus), &decoded, nullptr).ok());
  const v1::InspectionRef& inspection = decoded.token().inspection_ptr();
  EXPECT_EQ(inspection.type(), 4);
  ASSERT_TRUE(inspection.has_percent_damage());
  EXPECT_EQ(inspection.percent_damage().kind_case(), google::protobuf::Value::kNullValue);
  EXPECT_EQ(decoded.token().device_id(), "u-123-pwa");
  EXPECT_TRUE(decoded.token().options().has_third_party());
}

TEST(JsonCodecTokenTest, SendingTypeNullZeroAndAbsentAreThreeDifferentThings) {
  v1::Token null_token;
  ASSERT_TRUE(DecodeMessage(Parse(R"({"sendingType": null})"), &null_token, nullptr).ok());
  EXPECT_EQ(null_token.sending_type(), v1::SENDING_TYPE_NONE);
  EXPECT_FALSE(null_token.has_sending_type_raw());
  EXPECT_EQ(EncodeMessage(null_token), Parse(R"({"sendingType": null})"));

  v1::Token zero_token;
  ASSERT_TRUE(DecodeMessage(Parse(R"({"sendingType": 0})"), &zero_token, nullptr).ok());
  EXPECT_EQ(zero_token.sending_type(), v1::SENDING_TYPE_EMAIL);
  ASSERT_TRUE(zero_token.has_sending_type_raw());
  EXPECT_EQ(zero_token.sending_type_raw(), 0);
  EXPECT_EQ(EncodeMessage(zero_token), Parse(R"({"sendingType": 0})"));

  v1::Token absent_token;
  ASSERT_TRUE(DecodeMessage(Parse(R"({})"), &absent_token, nullptr).ok());
  EXPECT_EQ(absent_token.sending_type(), v1::SENDING_TYPE_UNSPECIFIED);
  EXPECT_EQ(EncodeMessage(absent_token), json::object());

  // Built by the gateway without a raw value: the enum's vendor number is sent.
  v1::Token built;
  built.set_sending_type(v1::SENDING_TYPE_EMAIL_AND_SMS);
  EXPECT_EQ(EncodeMessage(built), Parse(R"({"sendingType": 2})"));
}

TEST(JsonCodecTokenTest, KnownAndUnknownTradeinStatusKeepTheirRawNumber) {
  v1::Token known;
  DecodeReport known_report;
  ASSERT_TRUE(DecodeMessage(Parse(R"({"tradeinStatus": 3})"), &known, &known_report).ok());
  EXPECT_TRUE(ProtoEquals(ParseProto<v1::Token>(R"pb(
                            tradein_status: TRADEIN_STATUS_PICTURES_TAKEN
                            tradein_status_raw: 3
                          )pb"),
                          known));
  EXPECT_TRUE(ReportIsEmpty(known_report));

  v1::GetTokenStatusResponse unknown;
  DecodeReport unknown_report;
  const json input = Parse(R"({"token": {"tradeinStatus": 9}, "webApiVersion": "v3"})");
  ASSERT_TRUE(DecodeMessage(input, &unknown, &unknown_report).ok());
  EXPECT_TRUE(
      ProtoEquals(ParseProto<v1::GetTokenStatusResponse>(R"pb(
                    token { tradein_status: TRADEIN_STATUS_UNSPECIFIED tradein_status_raw: 9 }
                    web_api_version: "v3")pb"),
                  unknown));
  EXPECT_THAT(unknown_report.unknown_enum_paths, ElementsAre("token.tradeinStatus"));
  EXPECT_THAT(unknown_report.unknown_paths, IsEmpty());
  EXPECT_EQ(EncodeMessage(unknown), input);
}

TEST(JsonCodecTokenTest, IntegralFloatIsAnInteger) {
  v1::Token token;
  DecodeReport report;
  ASSERT_TRUE(DecodeMessage(Parse(R"({"tradeinStatus": 2.0, "inspectionPtr": {"type": 5.0}})"),
                            &token, &report)
                  .ok());
  EXPECT_TRUE(ReportIsEmpty(report)) << Describe(report);
  EXPECT_EQ(token.tradein_status(), v1::TRADEIN_STATUS_SHOOTING);
  EXPECT_EQ(token.inspection_ptr().type(), 5);
}

TEST(JsonCodecTokenTest, RawSiblingAndUnknownFieldsAreNotVendorKeys) {
  v1::Token token;
  DecodeReport report;
  ASSERT_TRUE(
      DecodeMessage(Parse(R"({"tradeinStatusRaw": 4, "unknownFields": {"a": 1}})"), &token, &report)
          .ok());
  EXPECT_FALSE(token.has_tradein_status_raw());
  EXPECT_THAT(report.unknown_paths, UnorderedElementsAre("tradeinStatusRaw", "unknownFields"));
  EXPECT_EQ(token.unknown_fields().fields_size(), 2);
}

TEST(JsonCodecTokenTest, GatewayOnlyFieldsAreNeitherDecodedNorEncoded) {
  v1::CreateTokenResponse response;
  response.mutable_token()->set_uid("u-1");
  response.set_customer_url("https://app.example/fr/services/u-1");
  response.set_device_id("u-1-pwa");
  EXPECT_EQ(EncodeMessage(response), Parse(R"({"token": {"uid": "u-1"}})"));

  v1::CreateTokenResponse decoded;
  DecodeReport report;
  ASSERT_TRUE(DecodeMessage(Parse(R"({"customerUrl": "https://evil.example", "deviceId": "x"})"),
                            &decoded, &report)
                  .ok());
  EXPECT_TRUE(decoded.customer_url().empty());
  EXPECT_TRUE(decoded.device_id().empty());
  EXPECT_THAT(report.unknown_paths, UnorderedElementsAre("customerUrl", "deviceId"));
}

TEST(JsonCodecTokenTest, CreationRequestWritesNullsAndVendorSpellings) {
  const auto request = ParseProto<v1::CreateTokenRequest>(R"pb(
    options { shoot_inspect: true fast_track: false cost: false report: false download_roi: false }
    trade_in { tradein_vehicle: true immat: "AB-123-CD" sending_type: SENDING_TYPE_NONE }
    customer {
      client_type: "customer"
      email: "<EMAIL>"
      firstname: "<FIRST_NAME>"
      lastname: "<LAST_NAME>"
      phone: "+33612345678"
      locale: LOCALE_NL_BE
    }
    validity: 90)pb");
  EXPECT_EQ(EncodeMessage(request), Parse(R"json({
    "options": {"shootInspect": true, "fastTrack": false, "cost": false, "report": false,
                "downloadRoi": false},
    "tradeIn": {"tradeinVehicle": true, "immat": "AB-123-CD", "sendingType": null},
    "customer": {"clientType": "customer", "email": "<EMAIL>", "firstname": "<FIRST_NAME>",
                 "lastname": "<LAST_NAME>", "gender": null, "phone": "+33612345678",
                 "locale": "nl-BE"},
    "creatorUserId": null,
    "validity": 90
  })json"));
}

// ---------------------------------------------------------------------------
// Unknown keys and type mismatches.
// ---------------------------------------------------------------------------

TEST(JsonCodecDriftTest, UnknownKeysAtSeveralDepthsAreKeptAndReported) {
  json input = Parse(kQualitySingle);
  input["requestId"] = "r-1";
  input["data"][0]["latencyMs"] = 12;
  input["data"][0]["classification"]["model"] = {{"name", "qc"}, {"version", 3}};
  input["data"][0]["classification"]["reason"]["Fog"] = 0.4;

  v1::AssessQualityResponse decoded;
  DecodeReport report;
  ASSERT_TRUE(DecodeMessage(input, &decoded, &report).ok());
  EXPECT_THAT(report.unknown_paths,
              UnorderedElementsAre("requestId", "data[0].latencyMs", "data[0].classification.model",
                                   "data[0].classification.reason.Fog"));
  EXPECT_THAT(report.type_mismatch_paths, IsEmpty());
  EXPECT_THAT(report.unknown_enum_paths, IsEmpty());

  EXPECT_EQ(StructToJson(decoded.unknown_fields()), Parse(R"({"requestId": "r-1"})"));
  EXPECT_EQ(StructToJson(decoded.data(0).unknown_fields()), Parse(R"({"latencyMs": 12})"));
  EXPECT_EQ(StructToJson(decoded.data(0).classification().unknown_fields()),
            Parse(R"({"model": {"name": "qc", "version": 3}})"));
  EXPECT_EQ(StructToJson(decoded.data(0).classification().reason().unknown_fields()),
            Parse(R"({"Fog": 0.4})"));
  // Typed fields next to them are unaffected.
  EXPECT_EQ(decoded.data(0).classification().reason().dark(), 0.1);
  EXPECT_EQ(EncodeMessage(decoded), input);
}

TEST(JsonCodecDriftTest, UnknownKeyInAMessageWithoutUnknownFieldsIsStillReported) {
  v1::Customer customer;
  DecodeReport report;
  ASSERT_TRUE(
      DecodeMessage(Parse(R"({"email": "a@b.c", "title": "Dr"})"), &customer, &report).ok());
  EXPECT_EQ(customer.email(), "a@b.c");
  EXPECT_THAT(report.unknown_paths, ElementsAre("title"));
}

TEST(JsonCodecDriftTest, TypeMismatchesAreKeptReportedAndLeaveTheFieldUnset) {
  json input = Parse(kQualitySingle);
  input["status"] = "200";                                         // string for int32
  input["data"][0]["classification"]["quality"] = "high";          // string for double
  input["data"][0]["classification"]["reason"]["blur"] = true;     // bool for double
  input["data"][0]["classification"]["reason"]["height"] = 512.5;  // non-integral
  input["data"][0]["classification"]["reason"]["width"] = 1e12;    // out of int32 range
  input["data"][0]["url"] = {"https://img.example/2.jpg"};         // array for string
  input["data"][0]["classification"]["angle"] = 3;                 // number for a string enum

  v1::AssessQualityResponse decoded;
  DecodeReport report;
  ASSERT_TRUE(DecodeMessage(input, &decoded, &report).ok());
  EXPECT_THAT(report.type_mismatch_paths,
              UnorderedElementsAre("status", "data[0].classification.quality",
                                   "data[0].classification.reason.blur",
                                   "data[0].classification.reason.height",
                                   "data[0].classification.reason.width", "data[0].url"));
  // A number where a string enum is expected is an unknown enum value: the string raw
  // sibling cannot hold it, so it is kept in unknown_fields.
  EXPECT_THAT(report.unknown_enum_paths, ElementsAre("data[0].classification.angle"));
  EXPECT_THAT(report.unknown_paths, IsEmpty());

  EXPECT_FALSE(decoded.has_status());
  const v1::QualityClassification& classification = decoded.data(0).classification();
  EXPECT_FALSE(classification.has_quality());
  EXPECT_FALSE(classification.reason().has_blur());
  EXPECT_FALSE(classification.reason().has_height());
  EXPECT_FALSE(classification.reason().has_width());
  EXPECT_FALSE(decoded.data(0).has_url());
  EXPECT_EQ(classification.angle(), v1::IMAGE_ANGLE_UNSPECIFIED);
  EXPECT_TRUE(classification.angle_raw().empty());
  EXPECT_EQ(StructToJson(decoded.unknown_fields()), Parse(R"({"status": "200"})"));
  EXPECT_EQ(StructToJson(classification.unknown_fields()),
            Parse(R"({"quality": "high", "angle": 3})"));
  EXPECT_EQ(StructToJson(classification.reason().unknown_fields()),
            Parse(R"({"blur": true, "height": 512.5, "width": 1e12})"));
  EXPECT_EQ(EncodeMessage(decoded), input);
}

TEST(JsonCodecDriftTest, NestedObjectThatIsNotAnObjectIsAMismatchNotAnError) {
  v1::AssessQualityResponse decoded;
  DecodeReport report;
  const json input = Parse(R"({"id": "q", "data": [{"classification": "oops", "status": 400}]})");
  ASSERT_TRUE(DecodeMessage(input, &decoded, &report).ok());
  EXPECT_FALSE(decoded.data(0).has_classification());
  EXPECT_EQ(decoded.data(0).status(), 400);
  EXPECT_THAT(report.type_mismatch_paths, ElementsAre("data[0].classification"));
  EXPECT_EQ(EncodeMessage(decoded), input);
}

TEST(JsonCodecDriftTest, OneBadElementMakesTheWholeRepeatedFieldAMismatch) {
  v1::AssessQualityResponse decoded;
  DecodeReport report;
  const json input = Parse(R"({"id": "q", "data": [{"status": 200, "newKey": 1}, 5]})");
  ASSERT_TRUE(DecodeMessage(input, &decoded, &report).ok());
  EXPECT_EQ(decoded.data_size(), 0);
  EXPECT_EQ(decoded.id(), "q");
  EXPECT_THAT(report.type_mismatch_paths, ElementsAre("data"));
  // The first element's unknown key is inside the raw value now, not reported apart.
  EXPECT_THAT(report.unknown_paths, IsEmpty());
  EXPECT_EQ(ValueToJson(decoded.unknown_fields().fields().at("data")), input["data"]);
  EXPECT_EQ(EncodeMessage(decoded), input);

  v1::AssessQualityBatchRequest request;
  DecodeReport request_report;
  ASSERT_TRUE(DecodeMessage(Parse(R"({"urls": ["a", 2]})"), &request, &request_report).ok());
  EXPECT_EQ(request.urls_size(), 0);
  EXPECT_THAT(request_report.type_mismatch_paths, ElementsAre("urls"));
}

TEST(JsonCodecDriftTest, NullLeavesFieldsUnsetWithoutReport) {
  v1::ImageQuality quality;
  DecodeReport report;
  ASSERT_TRUE(DecodeMessage(Parse(R"({"classification": null, "status": null, "url": null})"),
                            &quality, &report)
                  .ok());
  EXPECT_TRUE(ProtoEquals(v1::ImageQuality(), quality));
  EXPECT_TRUE(ReportIsEmpty(report)) << Describe(report);
}

TEST(JsonCodecDriftTest, ReportMayBeNull) {
  v1::AssessQualityResponse decoded;
  EXPECT_TRUE(DecodeMessage(Parse(R"({"x": 1, "status": "bad"})"), &decoded, nullptr).ok());
  EXPECT_EQ(decoded.unknown_fields().fields_size(), 2);
}

TEST(JsonCodecDriftTest, DecodeClearsTheMessageFirst) {
  v1::RemoveBackgroundResponse response;
  response.set_path("stale");
  ASSERT_TRUE(DecodeMessage(Parse(R"({"id": "fresh"})"), &response, nullptr).ok());
  EXPECT_TRUE(
      ProtoEquals(ParseProto<v1::RemoveBackgroundResponse>(R"pb(id: "fresh")pb"), response));
}

// ---------------------------------------------------------------------------
// Top-level shape.
// ---------------------------------------------------------------------------

TEST(JsonCodecShapeTest, TopLevelNonObjectIsInvalidArgument) {
  struct Case {
    json input;
    const char* actual;
  };
  for (const Case& c : {Case{json::array({1, 2}), "array"}, Case{json("text"), "string"},
                        Case{json(nullptr), "null"}, Case{json(42), "number"}}) {
    v1::GetTokenStatusResponse response;
    const absl::Status status = DecodeMessage(c.input, &response, nullptr);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.input;
    EXPECT_THAT(std::string(status.message()), HasSubstr("object")) << status;
    EXPECT_THAT(std::string(status.message()), HasSubstr(c.actual)) << status;
  }
}

TEST(JsonCodecShapeTest, ArrayShapedMessagesNeedAnArray) {
  v1::Polygon polygon;
  const absl::Status status = DecodeMessage(Parse(R"({"points": []})"), &polygon, nullptr);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("array"));
  EXPECT_THAT(std::string(status.message()), HasSubstr("object"));

  ASSERT_TRUE(DecodeMessage(Parse("[[0.1, 0.2], [0.3, 0.4]]"), &polygon, nullptr).ok());
  EXPECT_EQ(polygon.points_size(), 2);
  EXPECT_EQ(EncodeMessage(polygon), Parse("[[0.1, 0.2], [0.3, 0.4]]"));
}

// ---------------------------------------------------------------------------
// Webhook and event configuration.
// ---------------------------------------------------------------------------

TEST(JsonCodecConfigTest, WebhookConfigNullsDecodeUnsetAndEncodeBackToNulls) {
  v1::WebhookConfig config;
  DecodeReport report;
  ASSERT_TRUE(DecodeMessage(Parse(kWebhookConfigNulls), &config, &report).ok());
  EXPECT_TRUE(ProtoEquals(v1::WebhookConfig(), config));
  EXPECT_TRUE(ReportIsEmpty(report));
  EXPECT_EQ(EncodeMessage(v1::WebhookConfig()), Parse(kWebhookConfigNulls));

  config.set_webhook_url_v2("https://hooks.example/v2");
  EXPECT_EQ(EncodeMessage(config),
            Parse(R"({"webhookUrl": null, "webhookUrlV2": "https://hooks.example/v2"})"));
}

TEST(JsonCodecConfigTest, MismatchOnANullableFieldIsNotHiddenByItsNull) {
  v1::WebhookConfig config;
  DecodeReport report;
  const json input = Parse(R"({"webhookHeaderKey": null, "webhookUrl": 5, "webhookUrlV2": null})");
  ASSERT_TRUE(DecodeMessage(input, &config, &report).ok());
  EXPECT_FALSE(config.has_webhook_url());
  EXPECT_THAT(report.type_mismatch_paths, ElementsAre("webhookUrl"));
  EXPECT_EQ(EncodeMessage(config), input);
}

TEST(JsonCodecConfigTest, EventConfigCustomerSms) {
  v1::EventConfig config;
  DecodeReport report;
  ASSERT_TRUE(DecodeMessage(Parse(kEventConfig), &config, &report).ok());
  EXPECT_TRUE(ReportIsEmpty(report)) << Describe(report);
  EXPECT_TRUE(ProtoEquals(ParseProto<v1::EventConfig>(R"pb(
                            event_name: EVENT_NAME_CREATE_REPORT
                            event_name_raw: "createReport"
                            webhook: true
                            company_email: false
                            customer_email: false
                            customer_sms: true
                            sender_name: "Garage")pb"),
                          config));

  // `customerSms` is not the vendor's spelling.
  v1::EventConfig lower;
  DecodeReport lower_report;
  ASSERT_TRUE(DecodeMessage(Parse(R"({"customerSms": true})"), &lower, &lower_report).ok());
  EXPECT_FALSE(lower.has_customer_sms());
  EXPECT_THAT(lower_report.unknown_paths, ElementsAre("customerSms"));
}

TEST(JsonCodecConfigTest, InitialEventConfigListDecodesEachEntry) {
  const json list = Parse(R"json([
    {"eventName": "newInspection", "webhook": false, "companyEmail": false,
     "companyEmailAddress": null, "customerEmail": false, "customerSMS": false,
     "senderEmail": null, "senderName": null},
    {"eventName": "someFutureEvent", "webhook": false, "companyEmail": false,
     "companyEmailAddress": null, "customerEmail": false, "customerSMS": false,
     "senderEmail": null, "senderName": null}
  ])json");
  for (size_t i = 0; i < list.size(); ++i) {
    v1::EventConfig config;
    DecodeReport report;
    ASSERT_TRUE(DecodeMessage(list[i], &config, &report).ok());
    EXPECT_EQ(EncodeMessage(config), list[i]);
    if (i == 1) {
      EXPECT_EQ(config.event_name(), v1::EVENT_NAME_UNSPECIFIED);
      EXPECT_EQ(config.event_name_raw(), "someFutureEvent");
      EXPECT_THAT(report.unknown_enum_paths, ElementsAre("eventName"));
    }
  }
}

TEST(JsonCodecConfigTest, GatewayOnlyResponseFieldsAreNotEncoded) {
  v1::GetWebhookConfigResponse response;
  response.mutable_config()->set_webhook_url_v2("https://hooks.example/v2");
  EXPECT_EQ(EncodeMessage(response), json::object());
}

// ---------------------------------------------------------------------------
// Background removal aliases.
// ---------------------------------------------------------------------------

TEST(JsonCodecAliasTest, PluralSpellingsDecodeIntoTheSameFields) {
  v1::RemoveBackgroundRequest request;
  DecodeReport report;
  ASSERT_TRUE(DecodeMessage(Parse(R"({"url": "u", "manualTopLeftPositionRatios": [0.1, 0.2],
                                      "wheelsBox": [1, 2, 3, 4]})"),
                            &request, &report)
                  .ok());
  EXPECT_TRUE(ReportIsEmpty(report)) << Describe(report);
  EXPECT_THAT(request.manual_top_left_position_ratio(), ElementsAre(0.1, 0.2));
  EXPECT_THAT(request.wheel_box(), ElementsAre(1, 2, 3, 4));
  EXPECT_EQ(EncodeMessage(request), Parse(R"({"url": "u", "manualTopLeftPositionRatio": [0.1, 0.2],
                                              "wheelBox": [1.0, 2.0, 3.0, 4.0]})"));
}

// ---------------------------------------------------------------------------
// Value / Struct conversions.
// ---------------------------------------------------------------------------

TEST(JsonCodecValueTest, IntegralNumbersComeBackAsIntegers) {
  const json page = ValueToJson(JsonToValue(Parse(R"({"page": 1})")));
  ASSERT_TRUE(page["page"].is_number_integer()) << page;
  EXPECT_EQ(page.dump(), R"({"page":1})");

  EXPECT_TRUE(ValueToJson(JsonToValue(json(-7))).is_number_integer());
  EXPECT_TRUE(ValueToJson(JsonToValue(json(1.5))).is_number_float());
  // Beyond 2^53 a double is no longer an exact integer: it stays a double.
  google::protobuf::Value big;
  big.set_number_value(1e17);
  EXPECT_TRUE(ValueToJson(big).is_number_float());
  big.set_number_value(9007199254740992.0);
  EXPECT_TRUE(ValueToJson(big).is_number_integer());
}

TEST(JsonCodecValueTest, NestedValuesRoundTrip) {
  const json input = Parse(R"json({"a": [1, "two", true, null, {"b": [], "c": {}}],
                                     "d": -0.25, "e": "", "f": false})json");
  EXPECT_EQ(ValueToJson(JsonToValue(input)), input);
  EXPECT_EQ(StructToJson(JsonToStruct(input)), input);
  EXPECT_EQ(JsonToValue(json(nullptr)).kind_case(), google::protobuf::Value::kNullValue);
  EXPECT_EQ(ValueToJson(google::protobuf::Value()), json(nullptr));
}

TEST(JsonCodecValueTest, JsonToStructOfANonObjectIsEmpty) {
  EXPECT_EQ(JsonToStruct(json::array({1})).fields_size(), 0);
  EXPECT_EQ(JsonToStruct(json("x")).fields_size(), 0);
}

TEST(JsonCodecValueTest, VeryDeepJsonDoesNotExhaustTheStack) {
  // nlohmann parses (and destroys) iteratively, so a hostile body this deep reaches us.
  const int kDepth = 100000;
  const json deep = Parse(std::string(kDepth, '[') + std::string(kDepth, ']'));
  const google::protobuf::Value value = JsonToValue(deep);
  EXPECT_EQ(value.kind_case(), google::protobuf::Value::kListValue);
  EXPECT_TRUE(ValueToJson(value).is_array());
}

// A vendor answer nested 60 objects deep (well within upstream.max_json_depth) once
// became a Value 180 proto levels deep: serialized by the gateway, refused by its caller's
// parser (fuzz/corpus/vendor_codec/regress-deep-detect-damage). Now the caller parses it,
// with the first levels kept.
TEST(JsonCodecValueTest, ADeepValueStaysParseableByTheCaller) {
  std::string text;
  for (int i = 0; i < 60; ++i) text += R"({"a":)";
  text += "1" + std::string(60, '}');
  v1::DetectDamageResponse response;
  *response.mutable_body() = JsonToValue(Parse(text));

  v1::DetectDamageResponse parsed;
  ASSERT_TRUE(parsed.ParseFromString(response.SerializeAsString()));
  const google::protobuf::Value* level = &parsed.body();
  for (int i = 0; i < 20; ++i) {
    ASSERT_EQ(level->kind_case(), google::protobuf::Value::kStructValue) << "level " << i;
    level = &level->struct_value().fields().at("a");
  }
}

TEST(JsonCodecValueTest, TopLevelWellKnownTypes) {
  google::protobuf::Struct as_struct;
  ASSERT_TRUE(DecodeMessage(Parse(R"({"k": [1, 2]})"), &as_struct, nullptr).ok());
  EXPECT_EQ(EncodeMessage(as_struct), Parse(R"({"k": [1, 2]})"));
  EXPECT_EQ(DecodeMessage(json::array(), &as_struct, nullptr).code(),
            absl::StatusCode::kInvalidArgument);

  google::protobuf::Value as_value;
  ASSERT_TRUE(DecodeMessage(json("any"), &as_value, nullptr).ok());
  EXPECT_EQ(as_value.string_value(), "any");
}

// ---------------------------------------------------------------------------
// Rules no generated message exercises, on a message built at run time: an enum with
// no raw sibling in a message with unknown_fields, a repeated enum, a map field.
// ---------------------------------------------------------------------------

const google::protobuf::Descriptor* ProbeDescriptor() {
  // Lives for the whole process: the codec caches plans by descriptor address.
  static const google::protobuf::Descriptor* const descriptor = [] {
    auto* pool =
        new google::protobuf::DescriptorPool(google::protobuf::DescriptorPool::generated_pool());
    google::protobuf::FileDescriptorProto file;
    const bool parsed = TextFormat::ParseFromString(
        R"pb(
          name: "codec_probe.proto"
          package: "codectest"
          syntax: "proto3"
          dependency: "inspection/v1/common.proto"
          dependency: "google/protobuf/struct.proto"
          message_type {
            name: "Probe"
            field {
              name: "gender"
              number: 1
              type: TYPE_ENUM
              type_name: ".inspection.v1.Gender"
              label: LABEL_OPTIONAL
              json_name: "gender"
            }
            field {
              name: "locales"
              number: 2
              type: TYPE_ENUM
              type_name: ".inspection.v1.Locale"
              label: LABEL_REPEATED
              json_name: "locales"
            }
            field {
              name: "tags"
              number: 3
              type: TYPE_MESSAGE
              type_name: ".codectest.Probe.TagsEntry"
              label: LABEL_REPEATED
              json_name: "tags"
            }
            field {
              name: "unknown_fields"
              number: 1000
              type: TYPE_MESSAGE
              type_name: ".google.protobuf.Struct"
              label: LABEL_OPTIONAL
              json_name: "unknownFields"
            }
            field {
              name: "child"
              number: 4
              type: TYPE_MESSAGE
              type_name: ".codectest.Probe"
              label: LABEL_OPTIONAL
              json_name: "child"
            }
            nested_type {
              name: "TagsEntry"
              options { map_entry: true }
              field { name: "key" number: 1 type: TYPE_STRING label: LABEL_OPTIONAL }
              field { name: "value" number: 2 type: TYPE_STRING label: LABEL_OPTIONAL }
            }
          })pb",
        &file);
    EXPECT_TRUE(parsed);
    const google::protobuf::FileDescriptor* built = pool->BuildFile(file);
    EXPECT_NE(built, nullptr);
    return built == nullptr ? nullptr : built->message_type(0);
  }();
  return descriptor;
}

std::unique_ptr<Message> NewProbe() {
  // Not delegating to the generated factory, so unknown_fields is a DynamicMessage too.
  static auto* factory = new google::protobuf::DynamicMessageFactory();
  return std::unique_ptr<Message>(factory->GetPrototype(ProbeDescriptor())->New());
}

TEST(JsonCodecDynamicTest, UnknownEnumWithoutRawSiblingIsKeptInUnknownFields) {
  ASSERT_NE(ProbeDescriptor(), nullptr);
  std::unique_ptr<Message> probe = NewProbe();
  DecodeReport report;
  const json input = Parse(R"({"gender": "other"})");
  ASSERT_TRUE(DecodeMessage(input, probe.get(), &report).ok());
  EXPECT_THAT(report.unknown_enum_paths, ElementsAre("gender"));
  EXPECT_THAT(report.unknown_paths, IsEmpty());
  const auto* gender = ProbeDescriptor()->FindFieldByName("gender");
  EXPECT_EQ(probe->GetReflection()->GetEnumValue(*probe, gender), 0);
  // Unset gender is written as null (vendor_null on value 0), but the raw value kept
  // under the same key takes its place.
  EXPECT_EQ(EncodeMessage(*probe), input);

  std::unique_ptr<Message> women = NewProbe();
  ASSERT_TRUE(DecodeMessage(Parse(R"({"gender": "women"})"), women.get(), nullptr).ok());
  EXPECT_EQ(women->GetReflection()->GetEnumValue(*women, gender), 2);
  EXPECT_EQ(EncodeMessage(*NewProbe()), Parse(R"({"gender": null})"));
}

TEST(JsonCodecDynamicTest, RepeatedEnumWithAnUnknownValueIsKeptWhole) {
  ASSERT_NE(ProbeDescriptor(), nullptr);
  std::unique_ptr<Message> probe = NewProbe();
  DecodeReport report;
  ASSERT_TRUE(DecodeMessage(Parse(R"({"locales": ["fr", "xx"]})"), probe.get(), &report).ok());
  const auto* locales = ProbeDescriptor()->FindFieldByName("locales");
  EXPECT_EQ(probe->GetReflection()->FieldSize(*probe, locales), 0);
  EXPECT_THAT(report.unknown_enum_paths, ElementsAre("locales"));

  std::unique_ptr<Message> known = NewProbe();
  const json input = Parse(R"({"locales": ["fr", "nl-BE"]})");
  ASSERT_TRUE(DecodeMessage(input, known.get(), nullptr).ok());
  EXPECT_EQ(known->GetReflection()->FieldSize(*known, locales), 2);
  EXPECT_EQ(EncodeMessage(*known), Parse(R"({"locales": ["fr", "nl-BE"], "gender": null})"));
}

TEST(JsonCodecDynamicTest, RecursiveMessageType) {
  ASSERT_NE(ProbeDescriptor(), nullptr);
  std::unique_ptr<Message> probe = NewProbe();
  DecodeReport report;
  const json input =
      Parse(R"({"gender": "men", "child": {"gender": null, "child": {"gender": "women"}}})");
  ASSERT_TRUE(DecodeMessage(input, probe.get(), &report).ok());
  EXPECT_TRUE(ReportIsEmpty(report)) << Describe(report);
  EXPECT_EQ(EncodeMessage(*probe), input);
}

TEST(JsonCodecDynamicTest, MapFieldsAreNotVendorFields) {
  ASSERT_NE(ProbeDescriptor(), nullptr);
  std::unique_ptr<Message> probe = NewProbe();
  DecodeReport report;
  ASSERT_TRUE(DecodeMessage(Parse(R"({"tags": {"a": "b"}})"), probe.get(), &report).ok());
  EXPECT_THAT(report.unknown_paths, ElementsAre("tags"));
  EXPECT_EQ(EncodeMessage(*probe), Parse(R"({"tags": {"a": "b"}, "gender": null})"));
}

// ---------------------------------------------------------------------------
// Concurrency: the descriptor cache is built on first use from any thread.
// ---------------------------------------------------------------------------

TEST(JsonCodecConcurrencyTest, ConcurrentFirstUseFromManyThreads) {
  const json search = Parse(kSearchResult);
  const json parts = Parse(kPartsResult);
  std::vector<std::thread> threads;
  std::vector<int> failures(8, 0);
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        v1::SearchInspectionsResponse s;
        v1::SegmentPartsResponse p;
        if (!DecodeMessage(search, &s, nullptr).ok() || EncodeMessage(s) != search) {
          ++failures[t];
        }
        if (!DecodeMessage(parts, &p, nullptr).ok() || EncodeMessage(p) != parts) {
          ++failures[t];
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int t = 0; t < 8; ++t) EXPECT_EQ(failures[t], 0) << "thread " << t;
}

}  // namespace
}  // namespace inspection::vendor
