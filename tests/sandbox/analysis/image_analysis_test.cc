// The sandbox's deterministic image analysis: determinism, the URL markers, coverage of
// every value the spec lists, geometry, and that every body decodes cleanly with the
// gateway's own codec into the typed responses.
#include "sandbox/analysis/image_analysis.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "adapters/vendor/codes.h"
#include "adapters/vendor/image_mapper.h"
#include "adapters/vendor/json_codec.h"
#include "adapters/vendor/vendor_mapping.h"
#include "inspection/v1/image.pb.h"

namespace inspection::sandbox {
namespace {

using nlohmann::json;

constexpr int kManyUrls = 2000;

// Ordinary URLs: none contains a marker.
std::string PlainUrl(int i) {
  return "https://images.example.test/vehicles/" + std::to_string(i) + "/photo.jpg";
}

std::vector<std::string> PlainUrls(int count, int first = 0) {
  std::vector<std::string> urls;
  for (int i = 0; i < count; ++i) urls.push_back(PlainUrl(first + i));
  return urls;
}

const std::vector<std::string>& MarkedUrls() {
  static const auto* const kUrls = new std::vector<std::string>{
      "https://img.test/a/not_a_car.jpg", "https://img.test/a/corrupted.jpg",
      "https://img.test/a/error500.jpg",  "https://img.test/a/error400.jpg",
      "https://img.test/a/good.jpg",      "https://img.test/a/exploitable.jpg",
      "https://img.test/a/blurry.jpg",    "https://img.test/a/not_good.jpg"};
  return *kUrls;
}

std::string Joined(const std::vector<std::string>& paths) {
  std::string out;
  for (const std::string& path : paths) out += path + " ";
  return out;
}

// Decodes `body` with the gateway's codec and expects nothing to be kept aside.
template <typename Message>
Message DecodeClean(const json& body) {
  Message message;
  vendor::DecodeReport report;
  const absl::Status status = vendor::DecodeMessage(body, &message, &report);
  EXPECT_TRUE(status.ok()) << status.ToString() << "\n" << body.dump();
  EXPECT_TRUE(report.unknown_paths.empty()) << Joined(report.unknown_paths) << body.dump();
  EXPECT_TRUE(report.type_mismatch_paths.empty())
      << Joined(report.type_mismatch_paths) << body.dump();
  EXPECT_TRUE(report.unknown_enum_paths.empty())
      << Joined(report.unknown_enum_paths) << body.dump();
  return message;
}

bool IsHex(const std::string& text, size_t length) {
  if (text.size() != length) return false;
  for (char c : text) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

bool InUnit(double value) { return value >= 0.0 && value <= 1.0; }

const json& Item(const json& body) { return body["data"][0]; }

// Every point of `polygon` lies in the box (center, size), up to rounding of doubles.
void ExpectBoxContains(double center_x, double center_y, double width, double height,
                       const v1::Polygon& polygon) {
  constexpr double kSlack = 1e-9;
  EXPECT_TRUE(InUnit(center_x - width / 2 + kSlack) && InUnit(center_x + width / 2 - kSlack));
  EXPECT_TRUE(InUnit(center_y - height / 2 + kSlack) && InUnit(center_y + height / 2 - kSlack));
  for (const v1::Point& point : polygon.points()) {
    EXPECT_TRUE(InUnit(point.x()) && InUnit(point.y())) << point.ShortDebugString();
    EXPECT_GE(point.x(), center_x - width / 2 - kSlack);
    EXPECT_LE(point.x(), center_x + width / 2 + kSlack);
    EXPECT_GE(point.y(), center_y - height / 2 - kSlack);
    EXPECT_LE(point.y(), center_y + height / 2 + kSlack);
  }
}

// ---------------------------------------------------------------------------
// Hash and determinism.
// ---------------------------------------------------------------------------

TEST(StableHashTest, IsFnv1a64) {
  EXPECT_EQ(StableHash(""), 0xcbf29ce484222325ULL);
  EXPECT_EQ(StableHash("a"), 0xaf63dc4c8601ec8cULL);
  EXPECT_EQ(StableHash("foobar"), 0x85944171f73967e8ULL);
}

TEST(DeterminismTest, SameInputGivesByteIdenticalJson) {
  for (int i = 0; i < 50; ++i) {
    const std::string url = PlainUrl(i);
    EXPECT_EQ(AnalyzeQuality(url).dump(), AnalyzeQuality(url).dump());
  }
  const std::vector<std::string> urls = PlainUrls(8);
  EXPECT_EQ(AnalyzeQualityBatch(urls).dump(), AnalyzeQualityBatch(urls).dump());
  EXPECT_EQ(SegmentVehicle(urls).dump(), SegmentVehicle(urls).dump());
  EXPECT_EQ(SegmentParts(urls).dump(), SegmentParts(urls).dump());
  const json request = {{"url", PlainUrl(1)}, {"colorBackground", "#ffffff"}};
  EXPECT_EQ(RemoveBackground(request, "https://cdn.test").dump(),
            RemoveBackground(request, "https://cdn.test").dump());
}

TEST(DeterminismTest, DifferentUrlsGiveDifferentIds) {
  std::set<std::string> quality_ids;
  std::set<std::string> seg_ids;
  std::set<std::string> part_ids;
  for (int i = 0; i < kManyUrls; ++i) {
    const std::string id = AnalyzeQuality(PlainUrl(i))["id"].get<std::string>();
    EXPECT_TRUE(IsHex(id, 24)) << id;
    quality_ids.insert(id);
    if (i < 300) {
      seg_ids.insert(SegmentVehicle({PlainUrl(i)})["id"].get<std::string>());
      part_ids.insert(SegmentParts({PlainUrl(i)})["id"].get<std::string>());
    }
  }
  EXPECT_EQ(quality_ids.size(), static_cast<size_t>(kManyUrls));
  EXPECT_EQ(seg_ids.size(), 300u);
  EXPECT_EQ(part_ids.size(), 300u);
  // The id covers the whole request: order matters, and so does each endpoint.
  EXPECT_NE(SegmentVehicle({PlainUrl(1), PlainUrl(2)})["id"],
            SegmentVehicle({PlainUrl(2), PlainUrl(1)})["id"]);
  EXPECT_NE(SegmentVehicle({PlainUrl(1)})["id"], SegmentParts({PlainUrl(1)})["id"]);
  EXPECT_NE(AnalyzeQualityBatch({PlainUrl(1)})["id"], AnalyzeQuality(PlainUrl(1))["id"]);
}

// ---------------------------------------------------------------------------
// URL markers.
// ---------------------------------------------------------------------------

TEST(MarkerTest, NotACar) {
  const json item = Item(AnalyzeQuality("https://img.test/x/not_a_car/1.jpg"));
  EXPECT_EQ(item["status"], 200);
  EXPECT_EQ(item["classification"]["type"], "not_a_car");
  EXPECT_EQ(item["classification"]["imageQualityCompliance"], "not_good");
  const json seg = SegmentVehicle({"https://img.test/x/not_a_car/1.jpg"});
  const json& seg_item = seg["data"]["detectionList"][0];
  EXPECT_EQ(seg_item["status"], 200);
  EXPECT_EQ(seg_item["imageStatus"], "");
  EXPECT_EQ(seg_item["detections"], json::object());
  const json parts = SegmentParts({"https://img.test/x/not_a_car/1.jpg"});
  EXPECT_EQ(parts["data"]["detectionList"][0]["detections"], json({{"partsData", json::array()}}));
}

TEST(MarkerTest, Corrupted) {
  const std::string url = "https://img.test/x/corrupted.jpg";
  const json item = Item(AnalyzeQuality(url));
  EXPECT_EQ(item["status"], 400);
  EXPECT_EQ(item["classification"]["reason"]["corrupted"], 1.0);
  EXPECT_EQ(item["classification"]["imageQualityCompliance"], "not_good");
  EXPECT_EQ(item["classification"]["quality"], 0.0);
  for (const json& body : {SegmentVehicle({url}), SegmentParts({url})}) {
    const json& detection = body["data"]["detectionList"][0];
    EXPECT_EQ(detection["status"], 400);
    EXPECT_FALSE(detection["imageStatus"].get<std::string>().empty());
    EXPECT_FALSE(detection.contains("detections"));
  }
}

TEST(MarkerTest, ErrorStatuses) {
  for (const auto& [marker, status] :
       std::vector<std::pair<std::string, int>>{{"error500", 500}, {"error400", 400}}) {
    const std::string url = "https://img.test/" + marker + "/front.jpg";
    const json item = Item(AnalyzeQuality(url));
    EXPECT_EQ(item["status"], status);
    EXPECT_EQ(item["url"], url);
    EXPECT_FALSE(item.contains("classification"));
    for (const json& body : {SegmentVehicle({url}), SegmentParts({url})}) {
      const json& detection = body["data"]["detectionList"][0];
      EXPECT_EQ(detection["status"], status);
      EXPECT_FALSE(detection["imageStatus"].get<std::string>().empty());
      EXPECT_FALSE(detection.contains("detections"));
    }
  }
  // error500 wins over the other status markers.
  EXPECT_EQ(Item(AnalyzeQuality("https://img.test/error400/error500/corrupted.jpg"))["status"],
            500);
}

TEST(MarkerTest, ComplianceMarkersWinOverTheHash) {
  for (int i = 0; i < 200; ++i) {
    const std::string n = std::to_string(i);
    const json good = Item(AnalyzeQuality("https://img.test/good/" + n + ".jpg"));
    EXPECT_EQ(good["classification"]["imageQualityCompliance"], "good");
    EXPECT_NE(good["classification"]["type"], "not_a_car");
    EXPECT_GE(good["classification"]["quality"].get<double>(), 0.75);
    const json fair = Item(AnalyzeQuality("https://img.test/exploitable/" + n + ".jpg"));
    EXPECT_EQ(fair["classification"]["imageQualityCompliance"], "exploitable");
    EXPECT_NE(fair["classification"]["type"], "not_a_car");
    const json blurry = Item(AnalyzeQuality("https://img.test/blurry/" + n + ".jpg"));
    EXPECT_EQ(blurry["classification"]["imageQualityCompliance"], "not_good");
    EXPECT_GE(blurry["classification"]["reason"]["blur"].get<double>(), 0.85);
    const json bad = Item(AnalyzeQuality("https://img.test/not_good/" + n + ".jpg"));
    EXPECT_EQ(bad["classification"]["imageQualityCompliance"], "not_good");
    EXPECT_EQ(Item(AnalyzeQuality("https://img.test/good/not_a_car/" + n +
                                  ".jpg"))["classification"]["imageQualityCompliance"],
              "not_good");
  }
}

TEST(MarkerTest, OrdinaryUrlsAreAlwaysAnalysed) {
  const json body = AnalyzeQualityBatch(PlainUrls(kManyUrls));
  for (const json& item : body["data"]) {
    EXPECT_EQ(item["status"], 200);
    EXPECT_LT(item["classification"]["reason"]["corrupted"].get<double>(), 0.05);
  }
}

// ---------------------------------------------------------------------------
// Quality: coverage and consistency.
// ---------------------------------------------------------------------------

TEST(QualityTest, EveryListedValueOccursAndValuesAreInRange) {
  std::set<std::string> compliances, angles, cuts, rotations, types, sizes;
  int with_snow = 0;
  for (int i = 0; i < kManyUrls; ++i) {
    const json item = Item(AnalyzeQuality(PlainUrl(i)));
    ASSERT_EQ(item["url"], PlainUrl(i));
    const json& c = item["classification"];
    compliances.insert(c["imageQualityCompliance"].get<std::string>());
    angles.insert(c["angle"].get<std::string>());
    cuts.insert(c["cut"].get<std::string>());
    rotations.insert(c["rotation"].get<std::string>());
    types.insert(c["type"].get<std::string>());
    EXPECT_TRUE(InUnit(c["quality"].get<double>()));
    if (c["type"] == "not_a_car") {
      EXPECT_EQ(c["imageQualityCompliance"], "not_good");
    }
    const json& reason = c["reason"];
    for (const char* key : {"blur", "compression", "corrupted", "dark", "dirt", "flare",
                            "reflection", "screen", "shadow", "sticker", "wet", "obstacle"}) {
      ASSERT_TRUE(reason.contains(key)) << key;
      EXPECT_TRUE(InUnit(reason[key].get<double>())) << key;
    }
    if (reason.contains("snow")) {
      ++with_snow;
      EXPECT_TRUE(InUnit(reason["snow"].get<double>()));
    }
    ASSERT_TRUE(reason["height"].is_number_integer());
    ASSERT_TRUE(reason["width"].is_number_integer());
    sizes.insert(reason["width"].dump() + "x" + reason["height"].dump());
  }
  EXPECT_EQ(compliances, (std::set<std::string>{"not_good", "exploitable", "good"}));
  EXPECT_EQ(angles, (std::set<std::string>{"Front", "Front t34 Driver", "Side Driver",
                                           "Back t34 Driver", "Back", "Back t34 Passenger",
                                           "Side Passenger", "Front t34 Passenger"}));
  EXPECT_EQ(cuts, (std::set<std::string>{"not cut", "cut", "border"}));
  EXPECT_EQ(rotations,
            (std::set<std::string>{"0", "90_CLOCKWISE", "ROTATE_180", "90_COUNTERCLOCKWISE"}));
  EXPECT_EQ(types,
            (std::set<std::string>{"distant", "close", "interior", "not_a_car", "cargo_area"}));
  EXPECT_GT(with_snow, 0);
  EXPECT_LT(with_snow, kManyUrls);  // not every response has `snow`
  EXPECT_GT(sizes.size(), 1u);
}

TEST(QualityTest, BatchCapitalisesTheListSampleKeysAndKeepsOrder) {
  std::vector<std::string> urls = PlainUrls(20);
  urls.push_back("https://img.test/error500.jpg");
  urls.push_back("https://img.test/corrupted.jpg");
  const json batch = AnalyzeQualityBatch(urls);
  EXPECT_EQ(batch["status"], 200);
  ASSERT_EQ(batch["data"].size(), urls.size());
  for (size_t i = 0; i < urls.size(); ++i) {
    const json& item = batch["data"][i];
    EXPECT_EQ(item["url"], urls[i]);
    json single = Item(AnalyzeQuality(urls[i]));
    if (!single.contains("classification")) {
      EXPECT_EQ(item, single);
      continue;
    }
    const json& reason = item["classification"]["reason"];
    for (const char* key : {"Dark", "Dirt", "Flare", "Reflection", "Shadow", "Sticker", "Wet"}) {
      EXPECT_TRUE(reason.contains(key)) << key;
      std::string lower = key;
      lower[0] = static_cast<char>(lower[0] - 'A' + 'a');
      EXPECT_FALSE(reason.contains(lower)) << lower;
      // The same analysis as the single endpoint, spelled the list's way.
      EXPECT_EQ(reason[key], single["classification"]["reason"][lower]);
    }
    for (const char* key :
         {"blur", "compression", "corrupted", "height", "obstacle", "screen", "width"}) {
      EXPECT_TRUE(reason.contains(key)) << key;
    }
  }
  // The capitalised keys are aliases: the typed result equals the single endpoint's.
  const auto decoded = DecodeClean<v1::AssessQualityBatchResponse>(batch);
  ASSERT_EQ(decoded.data_size(), static_cast<int>(urls.size()));
  for (size_t i = 0; i < urls.size(); ++i) {
    const auto single = DecodeClean<v1::AssessQualityResponse>(AnalyzeQuality(urls[i]));
    EXPECT_EQ(decoded.data(static_cast<int>(i)).SerializeAsString(),
              single.data(0).SerializeAsString());
  }
  EXPECT_EQ(AnalyzeQualityBatch({})["data"], json::array());
}

// ---------------------------------------------------------------------------
// The gateway's codec reads every body without keeping anything aside.
// ---------------------------------------------------------------------------

TEST(CodecTest, EveryResultDecodesCleanlyIntoTheTypedResponse) {
  std::vector<std::string> urls = PlainUrls(300);
  urls.insert(urls.end(), MarkedUrls().begin(), MarkedUrls().end());
  for (const std::string& url : urls) {
    const json body = AnalyzeQuality(url);
    const auto decoded = DecodeClean<v1::AssessQualityResponse>(body);
    ASSERT_EQ(decoded.data_size(), 1);
    // Nothing is lost either: the typed message encodes back to the same body.
    EXPECT_EQ(vendor::EncodeMessage(decoded), body);
  }
  for (size_t first = 0; first < urls.size(); first += 7) {
    const std::vector<std::string> chunk(urls.begin() + first,
                                         urls.begin() + std::min(urls.size(), first + 7));
    const json seg = SegmentVehicle(chunk);
    const auto seg_decoded = DecodeClean<v1::SegmentVehicleResponse>(seg);
    EXPECT_EQ(seg_decoded.data().detection_list_size(), static_cast<int>(chunk.size()));
    EXPECT_EQ(vendor::EncodeMessage(seg_decoded), seg);
    v1::SegmentPartsResponse parts;
    vendor::DecodeReport report;
    ASSERT_TRUE(vendor::DecodeSegmentPartsResponse(SegmentParts(chunk), &parts, &report).ok());
    EXPECT_TRUE(report.unknown_paths.empty() && report.type_mismatch_paths.empty() &&
                report.unknown_enum_paths.empty());
    EXPECT_EQ(parts.data().detection_list_size(), static_cast<int>(chunk.size()));
    DecodeClean<v1::AssessQualityBatchResponse>(AnalyzeQualityBatch(chunk));
  }
  DecodeClean<v1::SegmentVehicleResponse>(SegmentVehicle({}));
  DecodeClean<v1::SegmentPartsResponse>(SegmentParts({}));
  const auto background = DecodeClean<v1::RemoveBackgroundResponse>(
      RemoveBackground({{"url", PlainUrl(3)}}, "https://cdn.test"));
  EXPECT_EQ(background.status(), "success");
}

// ---------------------------------------------------------------------------
// Silhouette.
// ---------------------------------------------------------------------------

TEST(SilhouetteTest, OnePolygonInsideItsBoxAgreeingWithTheQualityCut) {
  const std::vector<std::string> urls = PlainUrls(600);
  const auto response = DecodeClean<v1::SegmentVehicleResponse>(SegmentVehicle(urls));
  EXPECT_EQ(response.status(), 200);
  EXPECT_TRUE(IsHex(response.id(), 24));
  ASSERT_EQ(response.data().detection_list_size(), static_cast<int>(urls.size()));
  std::set<std::string> item_ids;
  int with_car = 0;
  for (int i = 0; i < response.data().detection_list_size(); ++i) {
    const v1::SilhouetteDetection& item = response.data().detection_list(i);
    item_ids.insert(item.id());
    EXPECT_EQ(item.url(), urls[i]);
    EXPECT_EQ(item.status(), 200);
    EXPECT_TRUE(item.has_image_status());
    EXPECT_EQ(item.image_status(), "");
    const json quality = Item(AnalyzeQuality(urls[i]))["classification"];
    if (quality["type"] == "not_a_car") {
      EXPECT_FALSE(item.detections().has_car_data());
      continue;
    }
    ++with_car;
    const v1::CarData& car = item.detections().car_data();
    ASSERT_EQ(car.contour_size(), 1);
    EXPECT_GE(car.contour(0).points_size(), 8);
    EXPECT_LE(car.contour(0).points_size(), 16);
    ExpectBoxContains(car.center_x(), car.center_y(), car.width(), car.height(), car.contour(0));
    const double left = car.center_x() - car.width() / 2;
    const double right = car.center_x() + car.width() / 2;
    if (quality["cut"] == "border") {
      EXPECT_NEAR(left, 0.0, 1e-9);
      EXPECT_NEAR(right, 1.0, 1e-9);
    } else if (quality["cut"] == "cut") {
      EXPECT_TRUE(std::fabs(left) < 1e-9 || std::fabs(right - 1.0) < 1e-9);
    } else {
      EXPECT_GT(left, 0.0);
      EXPECT_LT(right, 1.0);
    }
  }
  EXPECT_GT(with_car, 400);
  EXPECT_EQ(item_ids.size(), urls.size());
  EXPECT_EQ(SegmentVehicle({})["data"]["detectionList"], json::array());
}

// ---------------------------------------------------------------------------
// Parts.
// ---------------------------------------------------------------------------

TEST(PartsTest, ObservedCodesInsideTheirBoxesWithWheelTypesOnWheels) {
  const std::set<std::string> observed = {"CPT",    "PRTAVD", "PRCAV",  "ROUAVD", "ROUARD",
                                          "PRBAV",  "PRTARD", "CLRAV",  "PHRAVD", "PHRAVG",
                                          "AILARD", "PLIAV",  "VTRAVD", "VTRARD", "BDCD",
                                          "RTRD",   "INS",    "PGNAVD", "PGNARD"};
  const std::vector<std::string> urls = PlainUrls(400);
  v1::SegmentPartsResponse response;
  vendor::DecodeReport report;
  ASSERT_TRUE(vendor::DecodeSegmentPartsResponse(SegmentParts(urls), &response, &report).ok());
  EXPECT_TRUE(IsHex(response.id(), 24));
  EXPECT_TRUE((std::set<std::string>{"FR", "DE", "BE", "IT", "ES"})
                  .count(response.data().vehicle().region()));
  EXPECT_FALSE(response.data().vehicle().immat().empty());
  std::set<std::string> seen_codes;
  std::set<std::string> wheel_types;
  for (int i = 0; i < response.data().detection_list_size(); ++i) {
    const v1::PartsDetection& item = response.data().detection_list(i);
    EXPECT_EQ(item.url(), urls[i]);
    EXPECT_EQ(item.status(), 200);
    EXPECT_EQ(item.image_status(), "");
    const json quality = Item(AnalyzeQuality(urls[i]))["classification"];
    const int count = item.detections().parts_data_size();
    if (quality["type"] == "not_a_car") {
      EXPECT_EQ(count, 0);
      continue;
    }
    EXPECT_GE(count, 3);
    EXPECT_LE(count, 8);
    std::set<std::string> codes_here;
    for (const v1::VehiclePart& part : item.detections().parts_data()) {
      EXPECT_TRUE(observed.count(part.type())) << part.type();
      EXPECT_TRUE(codes_here.insert(part.type()).second) << "duplicate " << part.type();
      seen_codes.insert(part.type());
      EXPECT_FALSE(part.part().family().empty()) << part.type();  // decoded by the gateway
      EXPECT_GE(part.contour().points_size(), 4);
      ExpectBoxContains(part.center_x(), part.center_y(), part.width(), part.height(),
                        part.contour());
      const bool wheel = part.type().rfind("ROU", 0) == 0;
      EXPECT_EQ(part.has_wheel_type(), wheel) << part.type();
      if (wheel) wheel_types.insert(part.wheel_type());
    }
  }
  EXPECT_EQ(seen_codes, observed);
  EXPECT_EQ(wheel_types, (std::set<std::string>{"Jante_AL", "Jante_TOLE"}));
  // The vehicle is the request's: the same URLs give the same plate.
  EXPECT_EQ(SegmentParts(urls)["data"]["vehicle"], SegmentParts(urls)["data"]["vehicle"]);
  EXPECT_EQ(SegmentParts({})["data"]["detectionList"], json::array());
}

// ---------------------------------------------------------------------------
// Background removal.
// ---------------------------------------------------------------------------

TEST(RemoveBackgroundTest, PngWhenTransparentJpgWithABackground) {
  const std::string url = PlainUrl(7);
  const json transparent = RemoveBackground({{"url", url}}, "https://cdn.test/out");
  const json coloured =
      RemoveBackground({{"url", url}, {"colorBackground", "#00ff00"}}, "https://cdn.test/out");
  const json placed = RemoveBackground(
      {{"url", url}, {"urlBackground", "https://img.test/studio.jpg"}, {"autoCenter", true}},
      "https://cdn.test/out");
  for (const auto& [body, extension] : std::vector<std::pair<json, std::string>>{
           {transparent, ".png"}, {coloured, ".jpg"}, {placed, ".jpg"}}) {
    const std::string id = body["id"].get<std::string>();
    EXPECT_TRUE(IsHex(id, 24));
    EXPECT_EQ(body["path"], "https://cdn.test/out/" + id + extension);
    EXPECT_EQ(body["status"], "success");
  }
  EXPECT_NE(transparent["id"], coloured["id"]);
  EXPECT_NE(coloured["id"], placed["id"]);
  // Empty or null backgrounds are not backgrounds; a trailing slash is not doubled.
  const json empty = RemoveBackground(
      {{"url", url}, {"colorBackground", ""}, {"urlBackground", nullptr}}, "https://cdn.test/");
  EXPECT_EQ(empty["path"], "https://cdn.test/" + empty["id"].get<std::string>() + ".png");
}

TEST(RemoveBackgroundTest, BothSpellingsAreTheSameInput) {
  const json base = {{"url", PlainUrl(1)},
                     {"urlBackground", "https://img.test/bg.jpg"},
                     {"manualPositioning", true}};
  json singular = base;
  singular["manualTopLeftPositionRatio"] = {0.1, 0.2};
  singular["wheelBox"] = {0.1, 0.6, 0.9, 0.8};
  json plural = base;
  plural["manualTopLeftPositionRatios"] = {0.1, 0.2};
  plural["wheelsBox"] = {0.1, 0.6, 0.9, 0.8};
  json moved = plural;
  moved["manualTopLeftPositionRatios"] = {0.3, 0.2};
  json other_box = singular;
  other_box["wheelBox"] = {0.1, 0.6, 0.9, 0.85};
  const std::string cdn = "https://cdn.test";
  EXPECT_EQ(RemoveBackground(singular, cdn), RemoveBackground(plural, cdn));
  EXPECT_NE(RemoveBackground(singular, cdn)["id"], RemoveBackground(base, cdn)["id"]);
  EXPECT_NE(RemoveBackground(plural, cdn)["id"], RemoveBackground(moved, cdn)["id"]);
  EXPECT_NE(RemoveBackground(singular, cdn)["id"], RemoveBackground(other_box, cdn)["id"]);
}

TEST(RemoveBackgroundTest, NeverThrowsOnOddRequests) {
  const std::string invalid_utf8 = "https://img.test/\xff\xfe.jpg";
  for (const json& request : {json(nullptr), json::array({1, 2}), json("text"), json(42),
                              json::parse("{", nullptr, false), json({{"url", invalid_utf8}}),
                              json({{"url", 3}, {"colorBackground", 12}})}) {
    json body;
    EXPECT_NO_THROW(body = RemoveBackground(request, ""));
    EXPECT_EQ(body["status"], "success");
    EXPECT_TRUE(IsHex(body["id"].get<std::string>(), 24));
  }
  EXPECT_NE(RemoveBackground(json({{"url", invalid_utf8}}), "")["id"],
            RemoveBackground(json({{"url", "https://img.test/a.jpg"}}), "")["id"]);
}

}  // namespace
}  // namespace inspection::sandbox
