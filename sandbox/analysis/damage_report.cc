// DamageReportData (image_analysis.h): the damages found on one vehicle, in the shape of
// the spec's createReport payload (`dataAPI.data`).
#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "sandbox/analysis/hash_stream.h"
#include "sandbox/analysis/image_analysis.h"
#include "sandbox/analysis/image_traits.h"

namespace inspection::sandbox {
namespace {

using ::inspection::sandbox::analysis_internal::HashStream;
using ::inspection::sandbox::analysis_internal::ImageTraits;
using ::inspection::sandbox::analysis_internal::JoinKey;
using ::inspection::sandbox::analysis_internal::Round4;
using ::inspection::sandbox::analysis_internal::TraitsFor;
using ::nlohmann::json;

// Parts visible from each of the eight viewpoints (ImageTraits::angle_index order), so a
// damage is only reported where the camera could see it. Driver side is the left (G),
// passenger side the right (D), as reference/codes.md says. Every code decodes with
// vendor::DecodePartCode, and the spec's createReport examples (PRCAR, CLRAV, JNAARG)
// are among them.
const std::array<std::vector<const char*>, 8>& PartsByViewpoint() {
  static const auto* const kParts = new std::array<std::vector<const char*>, 8>{{
      {"PRCAV", "CPT", "CLRAV", "PHRAVD", "PHRAVG", "PRBAV"},
      {"PRCAV", "CPT", "PHRAVG", "AILAVG", "PRTAVG", "JNAAVG"},
      {"PRTAVG", "PRTARG", "AILAVG", "AILARG", "JNAAVG", "JNAARG", "BDCG", "RTRG"},
      {"PRCAR", "CFRAR", "OPTARG", "AILARG", "PRTARG", "JNAARG"},
      {"PRCAR", "CFRAR", "OPTARD", "OPTARG"},
      {"PRCAR", "CFRAR", "OPTARD", "AILARD", "PRTARD", "JNAARD"},
      {"PRTAVD", "PRTARD", "AILAVD", "AILARD", "JNAAVD", "JNAARD", "BDCD", "RTRD"},
      {"PRCAV", "CPT", "PHRAVD", "AILAVD", "PRTAVD", "JNAAVD"},
  }};
  return *kParts;
}

bool FamilyIs(const std::string& part, const char* family) { return part.rfind(family, 0) == 0; }

// A damage type that fits the part: rims get rim scratches, glass and lamps break,
// panels get scratched or dented.
std::string DamageTypeFor(const std::string& part, HashStream& stream) {
  const int roll = stream.Below(100);
  if (FamilyIs(part, "JNA")) return roll < 85 ? "scratch_rim" : "broken_part";
  if (FamilyIs(part, "PRB")) return "broken_part";
  if (FamilyIs(part, "PHR") || FamilyIs(part, "OPT") || FamilyIs(part, "RTR")) {
    return roll < 50 ? "broken_part" : "scratch";
  }
  if (FamilyIs(part, "CLR")) return roll < 40 ? "broken_part" : "scratch";
  if (FamilyIs(part, "PRC")) {
    if (roll < 40) return "scratch";
    if (roll < 70) return "scratch_rubbing";
    return roll < 85 ? "dent" : "broken_part";
  }
  if (roll < 40) return "scratch";
  return roll < 65 ? "scratch_rubbing" : "dent";
}

// SEV1 polish .. SEV5 replace (reference/codes.md), as the damage type suggests.
int SeverityFor(const std::string& type, HashStream& stream) {
  if (type == "scratch") return 1 + stream.Weighted({35, 40, 25});
  if (type == "scratch_rubbing") return 1 + stream.Weighted({50, 50});
  if (type == "scratch_rim") return 2 + stream.Weighted({60, 40});
  if (type == "dent") return 3 + stream.Weighted({55, 45});
  return 4 + stream.Weighted({30, 70});  // broken_part
}

// Repair cost of one damage of severity `level` (1..5), in the report's currency.
int CostFor(int level, HashStream& stream) {
  static constexpr std::array<int, 6> kBase = {0, 60, 120, 240, 420, 780};
  return kBase[std::clamp(level, 1, 5)] + 10 * stream.Below(5);
}

std::string SeverityCode(int level) { return "SEV" + std::to_string(level); }

// The vendor hands out time-limited signed storage URLs; these only look like them.
std::string Signed(const std::string& url, HashStream& stream) {
  const char separator = url.find('?') == std::string::npos ? '?' : '&';
  return url + separator + "X-Amz-Expires=3600&X-Amz-Signature=" + stream.Hex(64);
}

// The file name of the image: the last path segment, without query or fragment.
std::string ImageName(const std::string& url, size_t index) {
  std::string path = url.substr(0, url.find_first_of("?#"));
  const size_t slash = path.rfind('/');
  std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  if (name.empty() || slash == std::string::npos) {
    name = "image_" + std::to_string(index + 1) + ".jpg";
  }
  return name;
}

std::string WithoutTrailingSlashes(std::string text) {
  while (!text.empty() && text.back() == '/') text.pop_back();
  return text;
}

json LocalisedText(const std::string& text) {
  return json::array({json{{"locale", "en"}, {"text", text}}});
}

struct DamageBox {
  double center_x;
  double center_y;
  double width;
  double height;
};

DamageBox DrawBox(HashStream& stream) {
  DamageBox box;
  box.width = Round4(stream.Between(0.03, 0.2));
  box.height = Round4(stream.Between(0.03, 0.15));
  box.center_x = Round4(stream.Between(0.12, 0.88));
  box.center_y = Round4(stream.Between(0.2, 0.85));
  return box;
}

json RoiJson(const DamageBox& box, const std::string& image_id, const std::string& image_url) {
  return json{{"height", box.height},    {"width", box.width},  {"centerX", box.center_x},
              {"centerY", box.center_y}, {"imageId", image_id}, {"imageUrl", image_url}};
}

// The damage's box in pixels, [x1, y1, x2, y2], as the detection's `location`.
json PixelLocation(const DamageBox& box, const ImageTraits& traits) {
  auto pixel = [](double fraction, int size) {
    return static_cast<int>(std::lround(std::clamp(fraction, 0.0, 1.0) * size));
  };
  return json::array({pixel(box.center_x - box.width / 2, traits.width),
                      pixel(box.center_y - box.height / 2, traits.height),
                      pixel(box.center_x + box.width / 2, traits.width),
                      pixel(box.center_y + box.height / 2, traits.height)});
}

struct PartTotal {
  int cost = 0;
  int worst = 0;
};

json CustomFormResults(const std::string& key) {
  HashStream stream = HashStream::For("damage/form", key);
  const std::string screen_id = stream.Hex(24);
  const int mileage = 5000 + 1000 * stream.Below(180);
  const bool warning_lights = stream.Below(5) == 0;
  const int keys = stream.Below(4) == 0 ? 1 : 2;
  json inputs = json::array();
  auto add = [&](const std::string& question, const std::string& answer, int cost) {
    inputs.push_back(json{{"order", static_cast<int>(inputs.size()) + 1},
                          {"blockId", stream.Hex(24)},
                          {"question", LocalisedText(question)},
                          {"answer", LocalisedText(answer)},
                          {"cost", cost}});
  };
  add("What is the mileage of the vehicle?", std::to_string(mileage) + " km", 0);
  add("Is a warning light on in the dashboard?", warning_lights ? "Yes" : "No",
      warning_lights ? 150 : 0);
  add("How many keys come with the vehicle?", std::to_string(keys), keys == 1 ? 200 : 0);
  return json::array({json{{"screenId", screen_id},
                           {"title", LocalisedText("Vehicle condition")},
                           {"inputs", std::move(inputs)}}});
}

// The report's per-part totals: summed cost and worst severity of each damaged part.
json SeverityList(const std::map<std::string, PartTotal>& totals) {
  json severity = json::array();
  for (const auto& [part, total] : totals) {
    severity.push_back(json{{"cost", total.cost},
                            {"severity", SeverityCode(total.worst)},
                            {"severityType", "sum"},
                            {"location", part}});
  }
  return severity;
}

// The plate the caller knows wins; otherwise the one "read" on the photos.
json VehicleJson(const DamageReportInput& input) {
  const analysis_internal::PlateReading reading = analysis_internal::VehicleFor(input.urls);
  if (input.licence_plate.empty()) {
    return json{{"region", reading.region},
                {"immat", reading.immat},
                {"detectedLicensePlate", reading.immat}};
  }
  const std::string region = analysis_internal::RegionOfPlate(input.licence_plate);
  return json{{"region", region.empty() ? reading.region : region},
              {"immat", input.licence_plate},
              {"detectedLicensePlate", input.licence_plate}};
}

}  // namespace

json DamageReportData(const DamageReportInput& input) {
  const std::string report_key = JoinKey({input.inspection_id, JoinKey(input.urls)});
  HashStream report_stream = HashStream::For("damage/report", report_key);
  // uids are unique within the report: consecutive from a report-specific start.
  int next_uid = report_stream.IntIn(100000, 899999);
  const bool add_manual = report_stream.Below(5) == 0;
  const int manual_pick = report_stream.Below(1 << 20);

  json damages = json::object();
  json detection_list = json::array();
  json inspection_images = json::array();
  std::map<std::string, PartTotal> totals;
  int damage_number = 0;

  auto record = [&](const std::string& part, json damage, int level, HashStream& stream) {
    PartTotal& total = totals[part];
    total.cost += CostFor(level, stream);
    total.worst = std::max(total.worst, level);
    damages[part].push_back(std::move(damage));
    ++damage_number;
  };

  struct Shot {
    std::string image_id;
    std::string signed_url;
    int viewpoint;
  };
  std::vector<Shot> shots_with_angle;

  for (size_t i = 0; i < input.urls.size(); ++i) {
    const std::string& url = input.urls[i];
    const ImageTraits traits = TraitsFor(url);
    HashStream stream =
        HashStream::For("damage/image", JoinKey({input.inspection_id, url, std::to_string(i)}));
    const std::string image_id = stream.Hex(24);
    const std::string signed_url = Signed(url, stream);

    json entry = json{{"url", signed_url}, {"status", traits.status}, {"id", image_id}};
    json image =
        json{{"name", ImageName(url, i)}, {"url", signed_url}, {"shootingDate", input.now_iso}};
    // Interior, cargo-area, not-a-car and failed images have no angle and no damages.
    json found = nullptr;
    if (traits.angle_code >= 0) {
      entry["angle"] = traits.angle_code;
      image["angle"] = traits.angle_code;
      shots_with_angle.push_back(Shot{image_id, signed_url, traits.angle_index});
      const std::vector<const char*>& pool = PartsByViewpoint()[traits.angle_index];
      const int count = stream.Weighted({30, 35, 25, 10});
      for (int k = 0; k < count; ++k) {
        const std::string part = pool[stream.Below(static_cast<int>(pool.size()))];
        const std::string type = DamageTypeFor(part, stream);
        const int level = SeverityFor(type, stream);
        const DamageBox box = DrawBox(stream);
        const int uid = next_uid++;
        if (!found.is_object()) found = json::object();
        found[part].push_back(json{{"location", PixelLocation(box, traits)},
                                   {"part", part},
                                   {"uid", uid},
                                   {"height", box.height},
                                   {"width", box.width},
                                   {"centerX", box.center_x},
                                   {"centerY", box.center_y},
                                   {"isAuto", true},
                                   {"type", type}});
        json roi = RoiJson(box, image_id, signed_url);
        roi["cropStorageObjectName"] =
            "crops/" + input.inspection_id + "/" + image_id + "_" + std::to_string(uid) + ".jpg";
        json damage = json{{"uid", uid},
                           {"isAuto", true},
                           {"severity", SeverityCode(level)},
                           {"size", Round4(box.width * box.height)},  // share of the image
                           {"part", part},
                           {"type", type},
                           {"rois", json::array({std::move(roi)})}};
        record(part, std::move(damage), level, stream);
      }
    }
    entry["detections"] = json{{"damages", std::move(found)}};
    detection_list.push_back(std::move(entry));
    inspection_images.push_back(std::move(image));
  }

  // Sometimes the reviewer added a damage by hand: it has no size and no crop, and no
  // detection in detectionList (the model did not find it).
  if (add_manual && !shots_with_angle.empty()) {
    const Shot& shot = shots_with_angle[manual_pick % shots_with_angle.size()];
    const std::vector<const char*>& pool = PartsByViewpoint()[shot.viewpoint];
    const std::string part = pool[report_stream.Below(static_cast<int>(pool.size()))];
    const std::string type = DamageTypeFor(part, report_stream);
    const int level = SeverityFor(type, report_stream);
    const DamageBox box = DrawBox(report_stream);
    json damage = json{{"uid", next_uid++},
                       {"isAuto", false},
                       {"severity", SeverityCode(level)},
                       {"part", part},
                       {"type", type},
                       {"rois", json::array({RoiJson(box, shot.image_id, shot.signed_url)})}};
    record(part, std::move(damage), level, report_stream);
  }

  json severity = SeverityList(totals);
  json vehicle = VehicleJson(input);

  HashStream token_stream =
      HashStream::For("damage/report-token", JoinKey({input.inspection_id, input.token_uid}));
  const std::string report_url = WithoutTrailingSlashes(input.report_base_url) + "/" +
                                 input.inspection_id + "?token=" + token_stream.Hex(32);

  return json{{"damages", std::move(damages)},
              {"vehicle", std::move(vehicle)},
              {"damageNumber", damage_number},
              {"detectionList", std::move(detection_list)},
              {"reportUrl", report_url},
              {"reportUrlWithoutCosts", report_url + "&costs=false"},
              {"customFormResults", CustomFormResults(report_key)},
              {"tokenId", input.token_uid},
              {"severity", std::move(severity)},
              {"inspectionImages", std::move(inspection_images)}};
}

}  // namespace inspection::sandbox
