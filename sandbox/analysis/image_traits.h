#ifndef SANDBOX_ANALYSIS_IMAGE_TRAITS_H_
#define SANDBOX_ANALYSIS_IMAGE_TRAITS_H_

#include <string>
#include <vector>

#include "inspection/v1/image.pb.h"
#include "sandbox/analysis/hash_stream.h"

// Internal to sandbox/analysis: what the sandbox "sees" in one image, decided once from
// its URL and shared by every endpoint, so that the quality, silhouette, parts and damage
// results for one URL agree (a `cut` image has a silhouette clipped at the frame, a
// `close` shot gets a close-inspection angle code, a not_a_car image has no outline).
namespace inspection::sandbox::analysis_internal {

struct ImageTraits {
  // Per-image status: 400 and 500 only when a URL marker forces them (image_analysis.h),
  // so ordinary URLs are reliably analysable. `image_status` explains a non-200 status
  // and is empty otherwise.
  int status = 200;
  std::string image_status;
  bool corrupted = false;  // "corrupted" marker: an unreadable file
  bool blurry = false;     // "blurry" marker: blur confidence close to 1
  v1::ImageQualityCompliance compliance = v1::IMAGE_QUALITY_COMPLIANCE_GOOD;
  // 0..7 in the order of the vendor's angle list (IMAGE_ANGLE_FRONT is 0).
  int angle_index = 0;
  v1::ImageAngle angle = v1::IMAGE_ANGLE_FRONT;
  v1::ImageCut cut = v1::IMAGE_CUT_NOT_CUT;
  v1::ImageRotation rotation = v1::IMAGE_ROTATION_NONE;
  v1::ImageType type = v1::IMAGE_TYPE_DISTANT;
  // Pixel size of the (resized) image.
  int width = 512;
  int height = 384;
  // The numeric angle code 0..17 of the shot (reference/codes.md), -1 when the shot has
  // none (interior, cargo area, not a car, or not analysable).
  int angle_code = -1;
};

// The traits of the image at `url`: URL markers first, then the hash. Never fails.
ImageTraits TraitsFor(const std::string& url);

// Whether a vehicle outline and parts can be drawn: status 200 and a vehicle in view.
bool ShowsVehicle(const ImageTraits& traits);

// Contour points live on a grid of 1/kGrid, so a bounding box computed from them is exact
// and contains its points without rounding slack.
inline constexpr int kGrid = 10000;

struct GridPoint {
  int x = 0;
  int y = 0;
};

// A polygon on the grid with its bounding box (all values in [0, kGrid]).
struct GridPolygon {
  std::vector<GridPoint> points;
  int min_x = 0;
  int min_y = 0;
  int max_x = 0;
  int max_y = 0;
};

// A closed ring of `count` points (at least 3) spanning [x0, x1] x [y0, y1] (fractions of
// the image; parts outside [0, 1] are clipped to the frame), drawn from `stream`.
GridPolygon RingIn(HashStream& stream, int count, double x0, double y0, double x1, double y1);

// The vehicle's outline in the image at `url` (8 to 16 points); no points when
// !ShowsVehicle(traits). A `border` image touches both side edges, a `cut` one is clipped
// by one side of the frame, a `not cut` one keeps a margin.
GridPolygon SilhouetteFor(const std::string& url, const ImageTraits& traits);

// A licence plate read on the vehicle: the country code and the plate text.
struct PlateReading {
  std::string region;  // FR, DE, BE, IT or ES
  std::string immat;
};

// The vehicle photographed in `urls` (one vehicle per request): the plate is
// PlateForImages(urls) (licence_plate.h); the region is the one the plate's format
// belongs to, else one derived from the URLs.
PlateReading VehicleFor(const std::vector<std::string>& urls);

// The region whose plate format `immat` follows (`AB-123-CD` -> FR, `1-ABC-234` -> BE,
// `AB 123 CD` -> IT, `1234 BCD` or `1234-BCD` -> ES, `M-AB 1234` or `M-AB-1234` -> DE);
// empty when none.
std::string RegionOfPlate(const std::string& immat);

}  // namespace inspection::sandbox::analysis_internal

#endif  // SANDBOX_ANALYSIS_IMAGE_TRAITS_H_
