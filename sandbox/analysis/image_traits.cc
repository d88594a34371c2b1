#include "sandbox/analysis/image_traits.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "sandbox/analysis/licence_plate.h"

namespace inspection::sandbox::analysis_internal {
namespace {

constexpr double kPi = 3.14159265358979323846;

bool Has(const std::string& url, const char* marker) {
  return url.find(marker) != std::string::npos;
}

constexpr std::array<v1::ImageAngle, 8> kAngles = {
    v1::IMAGE_ANGLE_FRONT,          v1::IMAGE_ANGLE_FRONT_T34_DRIVER,
    v1::IMAGE_ANGLE_SIDE_DRIVER,    v1::IMAGE_ANGLE_BACK_T34_DRIVER,
    v1::IMAGE_ANGLE_BACK,           v1::IMAGE_ANGLE_BACK_T34_PASSENGER,
    v1::IMAGE_ANGLE_SIDE_PASSENGER, v1::IMAGE_ANGLE_FRONT_T34_PASSENGER,
};

// Angle codes (reference/codes.md) of the distant and close shots of each of the eight
// viewpoints, in kAngles order. A close side shot is either the front or the back half
// of that side, so it has two codes.
constexpr std::array<int, 8> kDistantCode = {0, 2, 4, 7, 9, 11, 13, 16};
constexpr std::array<int, 8> kCloseCode = {1, 3, 5, 8, 10, 12, 15, 17};
constexpr std::array<int, 8> kOtherCloseCode = {1, 3, 6, 8, 10, 12, 14, 17};

struct PixelSize {
  int width;
  int height;
};
// The spec recommends resizing to 512 px before quality checks.
constexpr std::array<PixelSize, 5> kSizes = {PixelSize{512, 384}, PixelSize{512, 341},
                                             PixelSize{512, 288}, PixelSize{384, 512},
                                             PixelSize{512, 512}};

// `pattern`: 'L' an upper-case letter, 'D' a digit, anything else itself.
bool Matches(const std::string& pattern, const std::string& text) {
  if (pattern.size() != text.size()) return false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char p = pattern[i];
    const char c = text[i];
    if (p == 'L') {
      if (c < 'A' || c > 'Z') return false;
    } else if (p == 'D') {
      if (c < '0' || c > '9') return false;
    } else if (p != c) {
      return false;
    }
  }
  return true;
}

int ToGrid(double fraction) {
  const double clamped = std::clamp(fraction, 0.0, 1.0);
  return static_cast<int>(std::lround(clamped * kGrid));
}

}  // namespace

ImageTraits TraitsFor(const std::string& url) {
  ImageTraits traits;
  HashStream stream = HashStream::For("traits", url);
  // Every draw is made whatever the markers say, so a marker changes only what it forces
  // and the other fields of a URL stay what its hash gives.
  const int type_pick = stream.Weighted({45, 25, 10, 10, 10});
  const int vehicle_type_pick = stream.Weighted({45, 25, 10, 10});
  const int compliance_pick = stream.Weighted({45, 35, 20});
  traits.angle_index = stream.Below(static_cast<int>(kAngles.size()));
  const int cut_roll = stream.Below(100);
  const int rotation_pick = stream.Weighted({85, 5, 5, 5});
  const PixelSize size = kSizes[stream.Below(static_cast<int>(kSizes.size()))];
  const bool back_half = stream.Below(2) == 1;

  traits.corrupted = Has(url, "corrupted");
  traits.blurry = Has(url, "blurry");
  const bool forced_not_good = traits.blurry || Has(url, "not_good");
  const bool forced_exploitable = !forced_not_good && Has(url, "exploitable");
  const bool forced_good = !forced_not_good && !forced_exploitable && Has(url, "good");

  if (Has(url, "error500")) {
    traits.status = 500;
    traits.image_status = "Internal server error while analysing the image";
  } else if (Has(url, "error400")) {
    traits.status = 400;
    traits.image_status = "The image could not be downloaded from the given URL";
  } else if (traits.corrupted) {
    traits.status = 400;
    traits.image_status = "The image file is corrupted and could not be decoded";
  }

  constexpr std::array<v1::ImageType, 5> kTypes = {
      v1::IMAGE_TYPE_DISTANT, v1::IMAGE_TYPE_CLOSE, v1::IMAGE_TYPE_INTERIOR,
      v1::IMAGE_TYPE_CARGO_AREA, v1::IMAGE_TYPE_NOT_A_CAR};
  if (traits.corrupted || Has(url, "not_a_car")) {
    // Nothing can be recognised in an unreadable file either.
    traits.type = v1::IMAGE_TYPE_NOT_A_CAR;
  } else if (forced_good || forced_exploitable) {
    // A usable compliance needs a vehicle in view: the marker wins over the hash.
    traits.type = kTypes[vehicle_type_pick];
  } else {
    traits.type = kTypes[type_pick];
  }

  constexpr std::array<v1::ImageQualityCompliance, 3> kCompliances = {
      v1::IMAGE_QUALITY_COMPLIANCE_GOOD, v1::IMAGE_QUALITY_COMPLIANCE_EXPLOITABLE,
      v1::IMAGE_QUALITY_COMPLIANCE_NOT_GOOD};
  if (traits.type == v1::IMAGE_TYPE_NOT_A_CAR || forced_not_good) {
    traits.compliance = v1::IMAGE_QUALITY_COMPLIANCE_NOT_GOOD;
  } else if (forced_exploitable) {
    traits.compliance = v1::IMAGE_QUALITY_COMPLIANCE_EXPLOITABLE;
  } else if (forced_good) {
    traits.compliance = v1::IMAGE_QUALITY_COMPLIANCE_GOOD;
  } else {
    traits.compliance = kCompliances[compliance_pick];
  }

  traits.angle = kAngles[traits.angle_index];
  // Close-ups are usually cut by the frame; distant shots usually are not.
  int not_cut_share = 50;
  int cut_share = 30;
  if (traits.type == v1::IMAGE_TYPE_DISTANT) {
    not_cut_share = 60;
    cut_share = 20;
  } else if (traits.type == v1::IMAGE_TYPE_CLOSE) {
    not_cut_share = 15;
    cut_share = 70;
  }
  if (cut_roll < not_cut_share) {
    traits.cut = v1::IMAGE_CUT_NOT_CUT;
  } else if (cut_roll < not_cut_share + cut_share) {
    traits.cut = v1::IMAGE_CUT_CUT;
  } else {
    traits.cut = v1::IMAGE_CUT_BORDER;
  }

  constexpr std::array<v1::ImageRotation, 4> kRotations = {
      v1::IMAGE_ROTATION_NONE, v1::IMAGE_ROTATION_90_CLOCKWISE, v1::IMAGE_ROTATION_180,
      v1::IMAGE_ROTATION_90_COUNTERCLOCKWISE};
  traits.rotation = kRotations[rotation_pick];
  traits.width = size.width;
  traits.height = size.height;

  if (traits.status == 200) {
    if (traits.type == v1::IMAGE_TYPE_DISTANT) {
      traits.angle_code = kDistantCode[traits.angle_index];
    } else if (traits.type == v1::IMAGE_TYPE_CLOSE) {
      traits.angle_code =
          back_half ? kOtherCloseCode[traits.angle_index] : kCloseCode[traits.angle_index];
    }
  }
  return traits;
}

bool ShowsVehicle(const ImageTraits& traits) {
  return traits.status == 200 && traits.type != v1::IMAGE_TYPE_NOT_A_CAR;
}

GridPolygon RingIn(HashStream& stream, int count, double x0, double y0, double x1, double y1) {
  count = std::max(count, 3);
  const double step = 2 * kPi / count;
  const double phase = stream.Between(0, step);
  std::vector<double> ux(count);
  std::vector<double> uy(count);
  for (int i = 0; i < count; ++i) {
    // Jitter stays within a quarter step, so angles keep increasing: the ring is a simple
    // (star-shaped) polygon, drawable as a mask.
    const double theta = phase + step * i + stream.Between(-0.25, 0.25) * step;
    const double radius = stream.Between(0.8, 1.0);
    ux[i] = radius * std::cos(theta);
    uy[i] = radius * std::sin(theta);
  }
  const auto [min_ux, max_ux] = std::minmax_element(ux.begin(), ux.end());
  const auto [min_uy, max_uy] = std::minmax_element(uy.begin(), uy.end());
  const double span_x = *max_ux - *min_ux;
  const double span_y = *max_uy - *min_uy;

  GridPolygon polygon;
  polygon.points.reserve(count);
  polygon.min_x = polygon.min_y = kGrid;
  polygon.max_x = polygon.max_y = 0;
  for (int i = 0; i < count; ++i) {
    // Stretched so that the ring spans the target box exactly, then clipped to the frame.
    const double fx = span_x > 0 ? (ux[i] - *min_ux) / span_x : 0.5;
    const double fy = span_y > 0 ? (uy[i] - *min_uy) / span_y : 0.5;
    const GridPoint point{ToGrid(x0 + fx * (x1 - x0)), ToGrid(y0 + fy * (y1 - y0))};
    polygon.points.push_back(point);
    polygon.min_x = std::min(polygon.min_x, point.x);
    polygon.max_x = std::max(polygon.max_x, point.x);
    polygon.min_y = std::min(polygon.min_y, point.y);
    polygon.max_y = std::max(polygon.max_y, point.y);
  }
  return polygon;
}

GridPolygon SilhouetteFor(const std::string& url, const ImageTraits& traits) {
  if (!ShowsVehicle(traits)) return {};
  HashStream stream = HashStream::For("silhouette", url);
  const int count = stream.IntIn(8, 16);
  double x0 = stream.Between(0.04, 0.2);
  double x1 = stream.Between(0.8, 0.96);
  const double y0 = stream.Between(0.15, 0.4);
  const double y1 = stream.Between(0.65, 0.92);
  const bool cut_left = stream.Below(2) == 0;
  const double overflow = stream.Between(0.05, 0.35);
  switch (traits.cut) {
    case v1::IMAGE_CUT_BORDER:  // fits exactly: touches both side edges
      x0 = 0.0;
      x1 = 1.0;
      break;
    case v1::IMAGE_CUT_CUT:  // runs out of the frame on one side
      if (cut_left) {
        x0 = -overflow;
      } else {
        x1 = 1.0 + overflow;
      }
      break;
    default:
      break;
  }
  return RingIn(stream, count, x0, y0, x1, y1);
}

PlateReading VehicleFor(const std::vector<std::string>& urls) {
  static constexpr std::array<const char*, 5> kRegions = {"FR", "DE", "BE", "IT", "ES"};
  PlateReading reading;
  // One vehicle, one plate: the same reading the rest of the sandbox uses (a plate the
  // URL carries, else one derived from it), so a plate seen here can be searched for.
  reading.immat = PlateForImages(urls);
  reading.region = RegionOfPlate(reading.immat);
  if (reading.region.empty()) {
    HashStream stream = HashStream::For("vehicle", JoinKey(urls));
    reading.region = kRegions[stream.Weighted({40, 20, 15, 15, 10})];
  }
  return reading;
}

std::string RegionOfPlate(const std::string& immat) {
  if (Matches("LL-DDD-LL", immat)) return "FR";
  if (Matches("D-LLL-DDD", immat)) return "BE";
  if (Matches("LL DDD LL", immat)) return "IT";
  // A plate given in a URL (licence_plate.h) cannot hold a space: '-' stands for it.
  if (Matches("DDDD LLL", immat) || Matches("DDDD-LLL", immat)) return "ES";
  // German: 1-3 letters (district), '-', 1-2 letters, ' ' (or '-'), 1-4 digits.
  for (int district = 1; district <= 3; ++district) {
    for (int letters = 1; letters <= 2; ++letters) {
      for (int digits = 1; digits <= 4; ++digits) {
        for (const char separator : {' ', '-'}) {
          const std::string pattern = std::string(district, 'L') + '-' + std::string(letters, 'L') +
                                      separator + std::string(digits, 'D');
          if (Matches(pattern, immat)) return "DE";
        }
      }
    }
  }
  return "";
}

}  // namespace inspection::sandbox::analysis_internal
