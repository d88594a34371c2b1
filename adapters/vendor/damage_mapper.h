#ifndef ADAPTERS_VENDOR_DAMAGE_MAPPER_H_
#define ADAPTERS_VENDOR_DAMAGE_MAPPER_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "adapters/vendor/json_codec.h"
#include "adapters/vendor/vendor_request.h"
#include "inspection/v1/damage.pb.h"
#include "nlohmann/json.hpp"

namespace inspection::vendor {

// POST /apiV1/damage/vehicle (the request uses the generic mapping, vendor_mapping.h). The
// spec does not show this response: the body is kept whole as a Value (any JSON,
// or null when the vendor sent an empty body), and the inspection id is the first
// string (or number) found at one of `options.inspection_id_pointers`.
absl::Status DecodeDetectDamageResponse(const nlohmann::json& body, const MapperOptions& options,
                                        v1::DetectDamageResponse* response);

// The first JSON pointer of `pointers` that resolves to a non-empty string or an
// integer in `body`, as a string; empty when none does. Malformed pointers are skipped.
std::string FindIdByPointers(const nlohmann::json& body, const std::vector<std::string>& pointers);

}  // namespace inspection::vendor

#endif  // ADAPTERS_VENDOR_DAMAGE_MAPPER_H_
