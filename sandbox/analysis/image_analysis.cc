#include "sandbox/analysis/image_analysis.h"

#include <algorithm>
#include <array>
#include <numeric>
#include <utility>

#include "adapters/vendor/json_codec.h"
#include "inspection/v1/image.pb.h"
#include "sandbox/analysis/hash_stream.h"
#include "sandbox/analysis/image_traits.h"

namespace inspection::sandbox {
namespace {

using ::inspection::sandbox::analysis_internal::GridPolygon;
using ::inspection::sandbox::analysis_internal::HashStream;
using ::inspection::sandbox::analysis_internal::ImageTraits;
using ::inspection::sandbox::analysis_internal::JoinKey;
using ::inspection::sandbox::analysis_internal::kGrid;
using ::inspection::sandbox::analysis_internal::ObjectId;
using ::inspection::sandbox::analysis_internal::Round4;
using ::inspection::sandbox::analysis_internal::ShowsVehicle;
using ::inspection::sandbox::analysis_internal::SilhouetteFor;
using ::inspection::sandbox::analysis_internal::TraitsFor;
using ::nlohmann::json;

// ---------------------------------------------------------------------------
// Quality.
// ---------------------------------------------------------------------------

// The reason members that describe something in the picture that can hide damage; an
// exploitable or not_good image owes its compliance to one or two of them.
enum Issue { kBlur, kDark, kDirt, kFlare, kReflection, kShadow, kSticker, kWet, kObstacle };
constexpr int kIssueCount = 9;

// Mostly near 0: the typical confidence of a feature that is not there.
double Faint(HashStream& stream) {
  const double u = stream.Uniform();
  return 0.25 * u * u;
}

v1::QualityClassification ClassificationFor(const std::string& url, const ImageTraits& traits) {
  HashStream stream = HashStream::For("quality", url);
  std::array<double, kIssueCount> issues{};
  for (double& value : issues) value = Faint(stream);
  const double compression = Faint(stream);
  const double screen = Faint(stream) * 0.4;
  const double corrupted_noise = stream.Between(0.0, 0.02);
  const bool has_snow = stream.Below(3) == 0;  // the spec: `snow` is not always present
  const double snow = Faint(stream);
  const int first = stream.Below(kIssueCount);
  const int second = stream.Below(kIssueCount);
  const double moderate = stream.Between(0.35, 0.65);
  const double moderate2 = stream.Between(0.3, 0.55);
  const double high = stream.Between(0.7, 0.99);
  const double blur_when_blurry = stream.Between(0.85, 0.99);
  const double quality_u = stream.Uniform();

  // Quality and the reasons follow the compliance, so a client reading them sees why.
  double quality = 0;
  switch (traits.compliance) {
    case v1::IMAGE_QUALITY_COMPLIANCE_GOOD:
      quality = 0.75 + 0.23 * quality_u;
      break;
    case v1::IMAGE_QUALITY_COMPLIANCE_EXPLOITABLE:
      issues[first] = moderate;
      if (second != first) issues[second] = std::max(issues[second], moderate2 * 0.8);
      quality = 0.45 + 0.29 * quality_u;
      break;
    default:
      // A not_a_car image is not_good for want of a vehicle, not of a visible defect.
      if (traits.type != v1::IMAGE_TYPE_NOT_A_CAR) issues[first] = high;
      if (second != first) issues[second] = std::max(issues[second], moderate2);
      quality = 0.05 + 0.39 * quality_u;
      break;
  }
  if (traits.blurry) issues[kBlur] = blur_when_blurry;
  if (traits.corrupted) quality = 0;

  v1::QualityClassification classification;
  // `_raw` siblings stay empty: the codec then writes each enum's vendor spelling.
  classification.set_image_quality_compliance(traits.compliance);
  classification.set_quality(Round4(quality));
  classification.set_angle(traits.angle);
  classification.set_cut(traits.cut);
  classification.set_rotation(traits.rotation);
  classification.set_type(traits.type);
  v1::QualityReason* reason = classification.mutable_reason();
  reason->set_blur(Round4(issues[kBlur]));
  reason->set_compression(Round4(compression));
  reason->set_corrupted(traits.corrupted ? 1.0 : Round4(corrupted_noise));
  reason->set_dark(Round4(issues[kDark]));
  reason->set_dirt(Round4(issues[kDirt]));
  reason->set_flare(Round4(issues[kFlare]));
  reason->set_reflection(Round4(issues[kReflection]));
  reason->set_screen(Round4(screen));
  reason->set_shadow(Round4(issues[kShadow]));
  reason->set_sticker(Round4(issues[kSticker]));
  reason->set_wet(Round4(issues[kWet]));
  if (has_snow) reason->set_snow(Round4(snow));
  reason->set_obstacle(Round4(issues[kObstacle]));
  reason->set_height(traits.height);
  reason->set_width(traits.width);
  return classification;
}

v1::ImageQuality QualityItemFor(const std::string& url) {
  const ImageTraits traits = TraitsFor(url);
  v1::ImageQuality item;
  item.set_status(traits.status);
  item.set_url(url);
  // A corrupted file is still classified (that is how the spec says it is flagged); an
  // image that failed for another reason has nothing to classify.
  if (traits.status == 200 || traits.corrupted) {
    *item.mutable_classification() = ClassificationFor(url, traits);
  }
  return item;
}

// The list endpoint's sample spells these reason keys with a capital; the gateway's
// codec reads them as aliases of the lower-case fields.
void CapitaliseReasonKeys(json& item) {
  static constexpr std::array<std::pair<const char*, const char*>, 7> kKeys = {{
      {"dark", "Dark"},
      {"dirt", "Dirt"},
      {"flare", "Flare"},
      {"reflection", "Reflection"},
      {"shadow", "Shadow"},
      {"sticker", "Sticker"},
      {"wet", "Wet"},
  }};
  if (!item.is_object()) return;
  auto classification = item.find("classification");
  if (classification == item.end() || !classification->is_object()) return;
  auto reason = classification->find("reason");
  if (reason == classification->end() || !reason->is_object()) return;
  for (const auto& [lower, upper] : kKeys) {
    auto it = reason->find(lower);
    if (it == reason->end()) continue;
    json value = std::move(*it);
    reason->erase(it);
    (*reason)[upper] = std::move(value);
  }
}

// ---------------------------------------------------------------------------
// Silhouette and parts.
// ---------------------------------------------------------------------------

void FillPolygon(const GridPolygon& grid, v1::Polygon* polygon) {
  for (const auto& point : grid.points) {
    v1::Point* out = polygon->add_points();
    out->set_x(static_cast<double>(point.x) / kGrid);
    out->set_y(static_cast<double>(point.y) / kGrid);
  }
}

// Box values computed from the grid polygon itself, so the box contains it exactly.
struct Box {
  double center_x;
  double center_y;
  double width;
  double height;
};

Box BoxOf(const GridPolygon& grid) {
  return Box{static_cast<double>(grid.min_x + grid.max_x) / (2.0 * kGrid),
             static_cast<double>(grid.min_y + grid.max_y) / (2.0 * kGrid),
             static_cast<double>(grid.max_x - grid.min_x) / kGrid,
             static_cast<double>(grid.max_y - grid.min_y) / kGrid};
}

// The part codes the spec shows in its samples.
constexpr std::array<const char*, 19> kObservedParts = {
    "CPT",   "PRTAVD", "PRCAV",  "ROUAVD", "ROUARD", "PRBAV",  "PRTARD",
    "CLRAV", "PHRAVD", "PHRAVG", "AILARD", "PLIAV",  "VTRAVD", "VTRARD",
    "BDCD",  "RTRD",   "INS",    "PGNAVD", "PGNARD"};

void FillParts(const std::string& url, const GridPolygon& car, v1::PartsDetections* out) {
  HashStream stream = HashStream::For("parts", url);
  const double car_x0 = static_cast<double>(car.min_x) / kGrid;
  const double car_x1 = static_cast<double>(car.max_x) / kGrid;
  const double car_y0 = static_cast<double>(car.min_y) / kGrid;
  const double car_y1 = static_cast<double>(car.max_y) / kGrid;
  const double car_width = car_x1 - car_x0;
  const double car_height = car_y1 - car_y0;

  std::array<int, kObservedParts.size()> order;
  std::iota(order.begin(), order.end(), 0);
  for (int i = static_cast<int>(order.size()) - 1; i > 0; --i) {  // Fisher-Yates
    std::swap(order[i], order[stream.Below(i + 1)]);
  }
  const int count = stream.IntIn(3, 8);
  for (int i = 0; i < count; ++i) {
    const std::string code = kObservedParts[order[i]];
    const double width = car_width * stream.Between(0.1, 0.35);
    const double height = car_height * stream.Between(0.1, 0.4);
    // Inside the car's box (which is inside the frame), so fractions stay in [0, 1].
    const double center_x = stream.Between(car_x0 + width / 2, car_x1 - width / 2);
    const double center_y = stream.Between(car_y0 + height / 2, car_y1 - height / 2);
    const int points = stream.IntIn(4, 8);
    const GridPolygon grid =
        analysis_internal::RingIn(stream, points, center_x - width / 2, center_y - height / 2,
                                  center_x + width / 2, center_y + height / 2);
    const bool steel = stream.Below(4) == 0;
    const Box box = BoxOf(grid);
    v1::VehiclePart* part = out->add_parts_data();
    part->set_type(code);
    part->set_center_x(box.center_x);
    part->set_center_y(box.center_y);
    part->set_width(box.width);
    part->set_height(box.height);
    FillPolygon(grid, part->mutable_contour());
    if (code.rfind("ROU", 0) == 0) part->set_wheel_type(steel ? "Jante_TOLE" : "Jante_AL");
  }
}

// Makes sure `json[key]` is an array: the codec leaves empty lists out, the vendor sends [].
void EnsureArray(json& object, const char* key) {
  if (!object.is_object()) return;
  auto it = object.find(key);
  if (it == object.end() || !it->is_array()) object[key] = json::array();
}

bool IsSent(const json& request, const char* key) {
  if (!request.is_object()) return false;
  auto it = request.find(key);
  if (it == request.end() || it->is_null()) return false;
  if (const auto* text = it->get_ptr<const json::string_t*>()) return !text->empty();
  return true;
}

}  // namespace

uint64_t StableHash(const std::string& text) {
  uint64_t hash = 14695981039346656037ULL;  // FNV-1a 64 offset basis
  for (const char c : text) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 1099511628211ULL;  // FNV-1a 64 prime
  }
  return hash;
}

json AnalyzeQuality(const std::string& url) {
  v1::AssessQualityResponse response;
  response.set_id(ObjectId("quality/image\n" + url));
  response.set_status(200);
  *response.add_data() = QualityItemFor(url);
  return vendor::EncodeMessage(response);
}

json AnalyzeQualityBatch(const std::vector<std::string>& urls) {
  v1::AssessQualityBatchResponse response;
  response.set_id(ObjectId("quality/image/list\n" + JoinKey(urls)));
  response.set_status(200);
  for (const std::string& url : urls) *response.add_data() = QualityItemFor(url);
  json body = vendor::EncodeMessage(response);
  EnsureArray(body, "data");
  for (json& item : body["data"]) CapitaliseReasonKeys(item);
  return body;
}

json SegmentVehicle(const std::vector<std::string>& urls) {
  const std::string key = JoinKey(urls);
  v1::SegmentVehicleResponse response;
  response.set_id(ObjectId("seg/image\n" + key));
  response.set_status(200);
  v1::SilhouetteData* data = response.mutable_data();
  for (size_t i = 0; i < urls.size(); ++i) {
    const std::string& url = urls[i];
    const ImageTraits traits = TraitsFor(url);
    v1::SilhouetteDetection* item = data->add_detection_list();
    item->set_id(ObjectId(JoinKey({"seg/image/item", key, std::to_string(i)})));
    item->set_image_status(traits.image_status);  // "" when OK: the spec shows it present
    item->set_status(traits.status);
    item->set_url(url);
    if (traits.status != 200) continue;  // a failed image has no detections
    v1::SilhouetteDetections* detections = item->mutable_detections();
    if (!ShowsVehicle(traits)) continue;  // no vehicle: detections is {}
    const GridPolygon grid = SilhouetteFor(url, traits);
    const Box box = BoxOf(grid);
    v1::CarData* car = detections->mutable_car_data();
    FillPolygon(grid, car->add_contour());
    car->set_height(box.height);
    car->set_width(box.width);
    car->set_center_y(box.center_y);
    car->set_center_x(box.center_x);
  }
  json body = vendor::EncodeMessage(response);
  EnsureArray(body["data"], "detectionList");
  return body;
}

json SegmentParts(const std::vector<std::string>& urls) {
  const std::string key = JoinKey(urls);
  v1::SegmentPartsResponse response;
  response.set_id(ObjectId("part/image\n" + key));
  response.set_status(200);
  v1::PartsData* data = response.mutable_data();
  const analysis_internal::PlateReading vehicle = analysis_internal::VehicleFor(urls);
  data->mutable_vehicle()->set_region(vehicle.region);
  data->mutable_vehicle()->set_immat(vehicle.immat);
  std::vector<size_t> without_vehicle;
  for (size_t i = 0; i < urls.size(); ++i) {
    const std::string& url = urls[i];
    const ImageTraits traits = TraitsFor(url);
    v1::PartsDetection* item = data->add_detection_list();
    item->set_id(ObjectId(JoinKey({"part/image/item", key, std::to_string(i)})));
    item->set_image_status(traits.image_status);
    item->set_status(traits.status);
    item->set_url(url);
    if (traits.status != 200) continue;
    v1::PartsDetections* detections = item->mutable_detections();
    if (!ShowsVehicle(traits)) {
      without_vehicle.push_back(i);
      continue;
    }
    FillParts(url, SilhouetteFor(url, traits), detections);
  }
  json body = vendor::EncodeMessage(response);
  json& list = body["data"]["detectionList"];
  if (!list.is_array()) list = json::array();
  // No vehicle, no parts: an empty list rather than a missing key.
  for (size_t i : without_vehicle) {
    if (i < list.size()) EnsureArray(list[i]["detections"], "partsData");
  }
  return body;
}

json RemoveBackground(const json& request, const std::string& cdn_base) {
  // The id depends on every input. Both spellings of the two doubly-spelled keys count
  // as the same parameter, so the same request gets the same id whichever is used.
  json canonical = json::object();
  if (request.is_object()) {
    for (auto it = request.begin(); it != request.end(); ++it) {
      std::string name = it.key();
      if (name == "manualTopLeftPositionRatios") name = "manualTopLeftPositionRatio";
      if (name == "wheelsBox") name = "wheelBox";
      canonical[name] = it.value();
    }
  } else {
    canonical = request;
  }
  // `replace` rather than the default strict handler: invalid UTF-8 must not throw.
  const std::string text = canonical.dump(-1, ' ', false, json::error_handler_t::replace);

  std::string base = cdn_base;
  while (!base.empty() && base.back() == '/') base.pop_back();
  // Transparent PNG unless a background (colour or image) is sent, then JPEG.
  const bool opaque = IsSent(request, "urlBackground") || IsSent(request, "colorBackground");
  v1::RemoveBackgroundResponse response;
  response.set_id(ObjectId("remarketing/removeBackground\n" + text));
  response.set_path(base + "/" + response.id() + (opaque ? ".jpg" : ".png"));
  response.set_status("success");
  return vendor::EncodeMessage(response);
}

}  // namespace inspection::sandbox
