#ifndef ADAPTERS_VENDOR_VENDOR_REQUEST_H_
#define ADAPTERS_VENDOR_VENDOR_REQUEST_H_

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "nlohmann/json.hpp"

namespace inspection::vendor {

// The resource-specific parts of one vendor REST call; the route table supplies the
// method and path template, the vendor client the base URL, headers and timeout.
struct VendorRequest {
  // Values for the `{name}` placeholders of the route's path template (raw; the
  // client percent-encodes them).
  std::vector<std::pair<std::string, std::string>> path_params;
  // Query parameters in order (raw; the client percent-encodes them).
  std::vector<std::pair<std::string, std::string>> query;
  // JSON body; sent with Content-Type: application/json when present.
  std::optional<nlohmann::json> body;
};

// Which spelling of a key the spec gives twice (`manualTopLeftPositionRatio` in the
// field table, `...Ratios` in the examples) is sent. kBoth sends both, so a vendor
// that reads either spelling gets the value.
enum class KeySpelling { kSingular, kPlural, kBoth };

// Where TestWebhook's eventName/inspectionId go: the spec does not show it.
enum class ParamsPlacement { kQuery, kBody };

// The assumptions the spec leaves open, made configurable (see GatewayConfig).
struct MapperOptions {
  KeySpelling position_ratio_key = KeySpelling::kBoth;
  KeySpelling wheel_box_key = KeySpelling::kBoth;
  ParamsPlacement test_webhook_params = ParamsPlacement::kQuery;
  // RFC 6901 pointers tried in order to find the inspection id in DetectDamage's
  // undocumented response.
  std::vector<std::string> inspection_id_pointers = {"/inspectionId", "/data/inspectionId",
                                                     "/inspection/id", "/id"};
};

}  // namespace inspection::vendor

#endif  // ADAPTERS_VENDOR_VENDOR_REQUEST_H_
