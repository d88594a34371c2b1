#ifndef SANDBOX_ANALYSIS_IMAGE_ANALYSIS_H_
#define SANDBOX_ANALYSIS_IMAGE_ANALYSIS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace inspection::sandbox {

// Deterministic stand-ins for the vendor's image models: every result is derived from
// a hash of the image URL (and the request's parameters), so the same URL always gets
// the same answer, and different URLs cover every value the spec lists. All functions
// return the vendor's JSON body exactly as the spec shapes it (the gateway's mappers
// decode it), with box values and contour points as fractions in [0, 1].
//
// URL conventions tests can rely on (a substring anywhere in the URL forces a case):
//   "not_a_car"  -> type not_a_car, compliance not_good
//   "corrupted"  -> reason.corrupted 1.0, compliance not_good, per-image status 400
//   "error500"   -> per-image status 500 with an imageStatus message
//   "error400"   -> per-image status 400 with an imageStatus message
//   "good"       -> compliance good;  "exploitable" -> exploitable;  "blurry" -> not_good
//                   (and reason.blur >= 0.85); "not_good" -> not_good (it contains "good")
// Otherwise every field is picked from the hash. Precedence: error500 > error400 >
// corrupted for the status; not_a_car, corrupted, blurry, not_good > exploitable > good
// for the compliance. Statuses 400 and 500 come only from markers: an ordinary URL is
// always analysed (200). What a marked image looks like in each result:
//   - quality: a corrupted item keeps its classification (type not_a_car, quality 0);
//     other failed items have no classification;
//   - silhouette and parts: a failed item has its imageStatus text and no `detections`;
//     an OK item has imageStatus "" and, with no vehicle in view (not_a_car),
//     `detections: {}` (silhouette) or `detections: {partsData: []}` (parts);
//   - damage report: detectionList `status` follows the markers; images without an angle
//     (interior, cargo_area, not_a_car, failed) have no `angle` and `damages: null`.

// POST /apiV1/quality/image: `{id, status: 200, data: [item]}` with lower-case reason keys.
nlohmann::json AnalyzeQuality(const std::string& url);
// POST /apiV1/quality/image/list: one item per URL, in order; reason keys `Dark`,
// `Dirt`, `Flare`, `Reflection`, `Shadow`, `Sticker`, `Wet` capitalised as in the
// spec's list sample.
nlohmann::json AnalyzeQualityBatch(const std::vector<std::string>& urls);
// POST /apiV1/seg/image: `{id, status, data: {detectionList: [...]}}` with carData.
nlohmann::json SegmentVehicle(const std::vector<std::string>& urls);
// POST /apiV1/part/image: `{id, status, data: {vehicle, detectionList}}` with partsData
// using the spec's observed part codes (wheelType on ROU* parts).
nlohmann::json SegmentParts(const std::vector<std::string>& urls);
// POST /apiV1/remarketing/removeBackground: `{id, path, status: "success"}`. The path is
// `<cdn_base>/<id>.png` when neither urlBackground nor colorBackground is given
// (transparent PNG), `.jpg` otherwise (JPEG with a colour or on a background). A key counts
// as given when present, not null and not "". The id depends on every key of the request;
// the two spellings of manualTopLeftPositionRatio(s) and wheelBox/wheelsBox count as one.
nlohmann::json RemoveBackground(const nlohmann::json& request, const std::string& cdn_base);

// The damages found on a vehicle photographed in `urls` (damage detection), for the
// createReport payload's `dataAPI.data` and the damages report: the full shape of the
// spec's createReport section (damages keyed by part code, detectionList with angle
// codes 0..17, severity list, inspectionImages, vehicle with detectedLicensePlate,
// damageNumber, reportUrl, reportUrlWithoutCosts, customFormResults, tokenId).
struct DamageReportInput {
  std::string inspection_id;
  std::string token_uid;  // empty for API inspections
  std::string vehicle_id;
  std::string licence_plate;
  std::vector<std::string> urls;
  std::string report_base_url;  // reportUrl = <report_base_url>/<inspection_id>?token=...
  std::string now_iso;          // shootingDate of the images
};
nlohmann::json DamageReportData(const DamageReportInput& input);

// Stable 64-bit hash of a string (FNV-1a), exposed so other sandbox parts derive ids
// and choices the same way.
uint64_t StableHash(const std::string& text);

}  // namespace inspection::sandbox

#endif  // SANDBOX_ANALYSIS_IMAGE_ANALYSIS_H_
