#include "adapters/vendor/codes.h"

#include <array>
#include <string>
#include <string_view>
#include <utility>

namespace inspection::vendor {
namespace {

using Entry = std::pair<std::string_view, std::string_view>;

// Tables are constexpr arrays of string_views: no dynamic initialisation, and a linear
// scan of a few dozen entries is as fast as a hash lookup at this size.

constexpr std::array<Entry, 27> kFamilies = {{
    {"PRT", "door"},
    {"PRC", "bumper"},
    {"AIL", "wing / quarter panel"},
    {"CLR", "grille"},
    {"PHR", "headlamp"},
    {"PLI", "licence plate"},
    {"VTR", "side window"},
    {"RTR", "side mirror"},
    {"BDC", "sill"},
    {"CPT", "hood"},
    {"PGN", "door handle"},
    {"ROU", "wheel"},
    {"JNA", "alloy rim"},
    {"JNB", "two-tone rim"},
    {"PRB", "windscreen"},
    {"CST", "quarter glass"},
    {"OPT", "lamp unit"},
    {"ABR", "fog light"},
    {"TRP", "fuel door"},
    {"TPR", "charging flap"},
    {"CFR", "boot / tailgate"},
    {"JUP", "skirt / valance"},
    {"TOI", "roof"},
    {"ENJ", "hubcap"},
    {"PNE", "tyre"},
    {"INS", "badge"},
    {"JNT", "steel rim"},
}};

// The suffix is matched as the whole remainder after the family, so `AVD` can never be
// read as `D`: this is the "longest suffix wins" rule of codes.md without ordering.
constexpr std::array<Entry, 12> kLocations = {{
    {"AV", "front"},
    {"AR", "rear"},
    {"D", "right"},
    {"G", "left"},
    {"AVD", "front right"},
    {"AVG", "front left"},
    {"ARD", "rear right"},
    {"ARG", "rear left"},
    {"ARM", "rear middle"},
    {"T", "top"},
    {"B", "underside"},
    {"AU", "other"},
}};

constexpr std::array<std::string_view, 18> kAngles = {
    "front",
    "front, close inspection",
    "front three-quarter, driver side",
    "front three-quarter driver, close",
    "side, driver",
    "side driver, front close",
    "side driver, back close",
    "back three-quarter, driver side",
    "back three-quarter driver, close",
    "back",
    "back, close inspection",
    "back three-quarter, passenger side",
    "back three-quarter passenger, close",
    "side, passenger",
    "side passenger, back close",
    "side passenger, front close",
    "front three-quarter, passenger side",
    "front three-quarter passenger, close",
};

constexpr std::array<Entry, 6> kSeverities = {{
    {"SEV0", "unknown"},
    {"SEV1", "polish"},
    {"SEV2", "quick repair"},
    {"SEV3", "paint"},
    {"SEV4", "panel work and paint"},
    {"SEV5", "replace"},
}};

template <size_t N>
std::string_view Find(const std::array<Entry, N>& table, std::string_view key) {
  for (const Entry& entry : table) {
    if (entry.first == key) return entry.second;
  }
  return {};
}

constexpr size_t kFamilyLength = 3;

}  // namespace

inspection::v1::PartCode DecodePartCode(std::string_view code) {
  inspection::v1::PartCode part;
  part.set_code(std::string(code));
  if (code.size() < kFamilyLength) return part;
  const std::string_view family = code.substr(0, kFamilyLength);
  const std::string_view family_name = Find(kFamilies, family);
  if (family_name.empty()) return part;
  part.set_family(std::string(family));
  part.set_family_name(std::string(family_name));

  const std::string_view suffix = code.substr(kFamilyLength);
  const std::string_view location_name = Find(kLocations, suffix);
  if (!location_name.empty()) {
    part.set_location(std::string(suffix));
    part.set_location_name(std::string(location_name));
  }
  return part;
}

std::string_view AngleCodeName(int code) {
  if (code < 0 || code >= static_cast<int>(kAngles.size())) return {};
  return kAngles[code];
}

std::string_view SeverityName(std::string_view severity) { return Find(kSeverities, severity); }

}  // namespace inspection::vendor
