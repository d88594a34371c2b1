// DamageReportData: the createReport payload's `dataAPI.data` in the spec's full shape,
// consistent with itself (counts, uids, severities) and with the other analysis results.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "adapters/vendor/codes.h"
#include "sandbox/analysis/image_analysis.h"

namespace inspection::sandbox {
namespace {

using nlohmann::json;

std::vector<std::string> Urls(int report, int count) {
  std::vector<std::string> urls;
  for (int i = 0; i < count; ++i) {
    urls.push_back("https://images.example.test/reports/" + std::to_string(report) + "/shot-" +
                   std::to_string(i) + ".jpg");
  }
  return urls;
}

DamageReportInput InputFor(int report, int count = 8) {
  DamageReportInput input;
  input.inspection_id = "insp" + std::to_string(report);
  input.token_uid = "tok" + std::to_string(report);
  input.vehicle_id = "veh" + std::to_string(report);
  input.urls = Urls(report, count);
  input.report_base_url = "https://hub.example.test/report";
  input.now_iso = "2024-05-01T10:00:00.000Z";
  return input;
}

bool IsHex(const std::string& text, size_t length) {
  if (text.size() != length) return false;
  for (char c : text) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

bool InUnit(const json& value) {
  return value.is_number() && value.get<double>() >= 0.0 && value.get<double>() <= 1.0;
}

bool IsPartCode(const std::string& code) { return !vendor::DecodePartCode(code).family().empty(); }

void ExpectLocalised(const json& texts) {
  ASSERT_TRUE(texts.is_array());
  ASSERT_FALSE(texts.empty());
  for (const json& text : texts) {
    EXPECT_TRUE(text["locale"].is_string());
    EXPECT_TRUE(text["text"].is_string());
  }
}

// Checks every structural promise of one report.
void CheckReport(const DamageReportInput& input, const json& data) {
  static const std::set<std::string> kTypes = {"scratch", "scratch_rubbing", "scratch_rim",
                                               "broken_part", "dent"};
  static const std::set<std::string> kSeverities = {"SEV1", "SEV2", "SEV3", "SEV4", "SEV5"};
  std::map<int, json> by_uid;
  for (const char* key :
       {"damages", "vehicle", "damageNumber", "detectionList", "reportUrl", "reportUrlWithoutCosts",
        "customFormResults", "tokenId", "severity", "inspectionImages"}) {
    EXPECT_TRUE(data.contains(key)) << key;
  }
  if (::testing::Test::HasFailure()) return;

  // damages
  EXPECT_TRUE(data["damages"].is_object());
  int damage_objects = 0;
  std::map<std::string, std::string> worst;
  for (auto it = data["damages"].begin(); it != data["damages"].end(); ++it) {
    EXPECT_TRUE(IsPartCode(it.key())) << it.key();
    ASSERT_TRUE(it.value().is_array());
    EXPECT_FALSE(it.value().empty());
    for (const json& damage : it.value()) {
      ++damage_objects;
      ASSERT_TRUE(damage["uid"].is_number_integer());
      EXPECT_TRUE(by_uid.emplace(damage["uid"].get<int>(), damage).second) << "duplicate uid";
      ASSERT_TRUE(damage["isAuto"].is_boolean());
      const bool automatic = damage["isAuto"].get<bool>();
      EXPECT_TRUE(kSeverities.count(damage["severity"].get<std::string>()));
      EXPECT_EQ(damage.contains("size"), automatic);  // absent on manual damages
      if (automatic) {
        EXPECT_TRUE(damage["size"].is_number());
      }
      EXPECT_EQ(damage["part"], it.key());
      EXPECT_TRUE(kTypes.count(damage["type"].get<std::string>())) << damage["type"];
      ASSERT_TRUE(damage["rois"].is_array());
      ASSERT_FALSE(damage["rois"].empty());
      for (const json& roi : damage["rois"]) {
        EXPECT_EQ(roi.contains("cropStorageObjectName"), automatic);
        for (const char* key : {"height", "width", "centerX", "centerY"}) {
          EXPECT_TRUE(InUnit(roi[key])) << key;
        }
        EXPECT_TRUE(IsHex(roi["imageId"].get<std::string>(), 24));
        EXPECT_TRUE(roi["imageUrl"].is_string());
      }
      std::string& part_worst = worst[it.key()];
      part_worst = std::max(part_worst, damage["severity"].get<std::string>());
    }
  }
  EXPECT_EQ(data["damageNumber"], damage_objects);

  // vehicle
  for (const char* key : {"region", "immat", "detectedLicensePlate"}) {
    EXPECT_TRUE(data["vehicle"][key].is_string()) << key;
  }

  // detectionList and inspectionImages, one per URL in order
  ASSERT_EQ(data["detectionList"].size(), input.urls.size());
  ASSERT_EQ(data["inspectionImages"].size(), input.urls.size());
  std::set<std::string> image_ids;
  for (size_t i = 0; i < input.urls.size(); ++i) {
    const json& entry = data["detectionList"][i];
    const char separator = input.urls[i].find('?') == std::string::npos ? '?' : '&';
    const std::string prefix = input.urls[i] + separator + "X-Amz-Expires=3600&X-Amz-Signature=";
    const std::string url = entry["url"].get<std::string>();
    ASSERT_EQ(url.rfind(prefix, 0), 0u) << url;
    EXPECT_TRUE(IsHex(url.substr(prefix.size()), 64)) << url;
    EXPECT_TRUE(entry["status"].is_number_integer());
    EXPECT_TRUE(IsHex(entry["id"].get<std::string>(), 24));
    image_ids.insert(entry["id"].get<std::string>());
    if (entry.contains("angle")) {
      ASSERT_TRUE(entry["angle"].is_number_integer());
      EXPECT_GE(entry["angle"].get<int>(), 0);
      EXPECT_LE(entry["angle"].get<int>(), 17);
    }
    const json& found = entry["detections"]["damages"];
    EXPECT_TRUE(entry["detections"].contains("damages"));
    EXPECT_TRUE(found.is_null() || found.is_object());
    if (found.is_object()) {
      EXPECT_TRUE(entry.contains("angle"));
      EXPECT_EQ(entry["status"], 200);
      EXPECT_FALSE(found.empty());
      for (auto it = found.begin(); it != found.end(); ++it) {
        EXPECT_TRUE(IsPartCode(it.key())) << it.key();
        for (const json& detection : it.value()) {
          ASSERT_TRUE(detection["location"].is_array());
          EXPECT_EQ(detection["location"].size(), 4u);
          for (const json& pixel : detection["location"]) EXPECT_TRUE(pixel.is_number_integer());
          EXPECT_EQ(detection["part"], it.key());
          for (const char* key : {"height", "width", "centerX", "centerY"}) {
            EXPECT_TRUE(InUnit(detection[key])) << key;
          }
          EXPECT_EQ(detection["isAuto"], true);
          // The detection is one of the report's damages, seen on this image.
          auto damage = by_uid.find(detection["uid"].get<int>());
          ASSERT_NE(damage, by_uid.end());
          EXPECT_EQ(damage->second["type"], detection["type"]);
          EXPECT_EQ(damage->second["part"], detection["part"]);
          EXPECT_EQ(damage->second["rois"][0]["imageId"], entry["id"]);
          EXPECT_EQ(damage->second["rois"][0]["imageUrl"], entry["url"]);
        }
      }
    }
    const json& image = data["inspectionImages"][i];
    EXPECT_TRUE(image["name"].is_string());
    EXPECT_FALSE(image["name"].get<std::string>().empty());
    EXPECT_EQ(image["url"], entry["url"]);
    EXPECT_EQ(image["shootingDate"], input.now_iso);
    EXPECT_EQ(image.contains("angle"), entry.contains("angle"));
    if (image.contains("angle")) {
      EXPECT_EQ(image["angle"], entry["angle"]);
    }
  }
  EXPECT_EQ(image_ids.size(), input.urls.size());
  // Every automatic damage was detected on some image; manual ones on none.
  for (const auto& [uid, damage] : by_uid) {
    EXPECT_TRUE(image_ids.count(damage["rois"][0]["imageId"].get<std::string>()));
  }

  // reportUrl
  const std::string report_prefix = input.report_base_url + "/" + input.inspection_id + "?token=";
  const std::string report_url = data["reportUrl"].get<std::string>();
  ASSERT_EQ(report_url.rfind(report_prefix, 0), 0u) << report_url;
  EXPECT_TRUE(IsHex(report_url.substr(report_prefix.size()), 32));
  EXPECT_EQ(data["reportUrlWithoutCosts"], report_url + "&costs=false");

  // customFormResults
  ASSERT_TRUE(data["customFormResults"].is_array());
  ASSERT_FALSE(data["customFormResults"].empty());
  for (const json& screen : data["customFormResults"]) {
    EXPECT_TRUE(screen["screenId"].is_string());
    ExpectLocalised(screen["title"]);
    ASSERT_TRUE(screen["inputs"].is_array());
    int order = 0;
    for (const json& form_input : screen["inputs"]) {
      EXPECT_EQ(form_input["order"], ++order);
      EXPECT_TRUE(form_input["blockId"].is_string());
      ExpectLocalised(form_input["question"]);
      ExpectLocalised(form_input["answer"]);
      EXPECT_TRUE(form_input["cost"].is_number());
    }
  }

  EXPECT_EQ(data["tokenId"], input.token_uid);

  // severity: one entry per damaged part, with the worst severity found on it
  ASSERT_TRUE(data["severity"].is_array());
  std::set<std::string> locations;
  for (const json& entry : data["severity"]) {
    const std::string location = entry["location"].get<std::string>();
    EXPECT_TRUE(locations.insert(location).second) << "duplicate " << location;
    EXPECT_EQ(entry["severityType"], "sum");
    EXPECT_TRUE(entry["cost"].is_number());
    EXPECT_GT(entry["cost"].get<double>(), 0);
    EXPECT_EQ(entry["severity"], worst[location]) << location;
  }
  EXPECT_EQ(locations.size(), worst.size());
}

TEST(DamageReportTest, HasTheSpecShapeAndAddsUp) {
  for (int report = 0; report < 150; ++report) {
    const DamageReportInput input = InputFor(report, 1 + report % 10);
    CheckReport(input, DamageReportData(input));
    if (::testing::Test::HasFailure()) {
      ADD_FAILURE() << "report " << report << ": " << DamageReportData(input).dump(2);
      return;
    }
  }
}

TEST(DamageReportTest, CoversAnglesSeveritiesTypesAndManualDamages) {
  std::set<int> angles;
  std::set<std::string> severities, types, parts;
  bool angle_absent = false;
  bool manual = false;
  bool no_damage_image = false;
  for (int report = 0; report < 300; ++report) {
    const json data = DamageReportData(InputFor(report));
    for (const json& entry : data["detectionList"]) {
      if (entry.contains("angle")) {
        angles.insert(entry["angle"].get<int>());
      } else {
        angle_absent = true;
      }
      if (entry["detections"]["damages"].is_null()) no_damage_image = true;
    }
    for (auto it = data["damages"].begin(); it != data["damages"].end(); ++it) {
      parts.insert(it.key());
      for (const json& damage : it.value()) {
        severities.insert(damage["severity"].get<std::string>());
        types.insert(damage["type"].get<std::string>());
        if (!damage["isAuto"].get<bool>()) manual = true;
      }
    }
  }
  EXPECT_EQ(angles.size(), 18u);
  EXPECT_TRUE(angle_absent);
  EXPECT_TRUE(no_damage_image);
  EXPECT_TRUE(manual);
  EXPECT_EQ(severities, (std::set<std::string>{"SEV1", "SEV2", "SEV3", "SEV4", "SEV5"}));
  EXPECT_EQ(types, (std::set<std::string>{"scratch", "scratch_rubbing", "scratch_rim",
                                          "broken_part", "dent"}));
  // The spec's createReport examples occur.
  for (const char* code : {"PRCAR", "CLRAV", "JNAARG"}) EXPECT_TRUE(parts.count(code)) << code;
}

TEST(DamageReportTest, DeterministicFromUrlsAndInspectionId) {
  const DamageReportInput input = InputFor(7);
  EXPECT_EQ(DamageReportData(input).dump(), DamageReportData(input).dump());
  DamageReportInput other = input;
  other.inspection_id = "insp-other";
  EXPECT_NE(DamageReportData(input)["detectionList"][0]["id"],
            DamageReportData(other)["detectionList"][0]["id"]);
  DamageReportInput fewer = input;
  fewer.urls.pop_back();
  EXPECT_NE(DamageReportData(input).dump(), DamageReportData(fewer).dump());
}

TEST(DamageReportTest, LicencePlateFromInputElseTheDetectedOne) {
  DamageReportInput input = InputFor(3);
  const json detected = DamageReportData(input)["vehicle"];
  // Without a plate from the caller, the vehicle is the one the parts endpoint reads.
  const json parts_vehicle = SegmentParts(input.urls)["data"]["vehicle"];
  EXPECT_EQ(detected["immat"], parts_vehicle["immat"]);
  EXPECT_EQ(detected["region"], parts_vehicle["region"]);
  EXPECT_EQ(detected["detectedLicensePlate"], detected["immat"]);

  input.licence_plate = "AB-123-CD";
  const json given = DamageReportData(input)["vehicle"];
  EXPECT_EQ(given["immat"], "AB-123-CD");
  EXPECT_EQ(given["detectedLicensePlate"], "AB-123-CD");
  EXPECT_EQ(given["region"], "FR");
  input.licence_plate = "1234 BCD";
  EXPECT_EQ(DamageReportData(input)["vehicle"]["region"], "ES");
}

TEST(DamageReportTest, MarkedImagesHaveTheirStatusAndNoDamages) {
  DamageReportInput input = InputFor(11, 2);
  input.urls.push_back("https://img.test/error500/front.jpg");
  input.urls.push_back("https://img.test/error400/back.jpg?size=large");
  input.urls.push_back("https://img.test/not_a_car.jpg");
  const json data = DamageReportData(input);
  CheckReport(input, data);
  const json& list = data["detectionList"];
  EXPECT_EQ(list[2]["status"], 500);
  EXPECT_EQ(list[3]["status"], 400);
  EXPECT_EQ(list[4]["status"], 200);
  for (int i : {2, 3, 4}) {
    EXPECT_FALSE(list[i].contains("angle"));
    EXPECT_TRUE(list[i]["detections"]["damages"].is_null());
  }
  // A URL with a query gets the signature appended with '&'.
  EXPECT_EQ(list[3]["url"].get<std::string>().rfind(
                "https://img.test/error400/back.jpg?size=large&X-Amz-Expires=3600", 0),
            0u);
}

TEST(DamageReportTest, EmptyInputStillHasEveryKey) {
  DamageReportInput input;
  const json data = DamageReportData(input);
  CheckReport(input, data);
  EXPECT_EQ(data["damageNumber"], 0);
  EXPECT_EQ(data["damages"], json::object());
  EXPECT_EQ(data["detectionList"], json::array());
  EXPECT_EQ(data["severity"], json::array());
  EXPECT_EQ(data["tokenId"], "");
}

}  // namespace
}  // namespace inspection::sandbox
