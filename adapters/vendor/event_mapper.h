#ifndef ADAPTERS_VENDOR_EVENT_MAPPER_H_
#define ADAPTERS_VENDOR_EVENT_MAPPER_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "adapters/vendor/json_codec.h"
#include "inspection/v1/event.pb.h"
#include "nlohmann/json.hpp"

namespace inspection::vendor {

// The createReport webhook body -> CreateReport: the generic codec, plus `damages`
// (an object keyed by part code, which protobuf holds as a map), decoded part codes,
// and angle names. Lossless like every decoder: what is not modelled stays in the
// messages' unknown_fields. InvalidArgument when `body` is not an object.
absl::Status DecodeCreateReport(const nlohmann::json& body, v1::CreateReport* report,
                                DecodeReport* drift);

// The EventName for a vendor event name; EVENT_NAME_UNSPECIFIED when unknown.
v1::EventName EventNameFromString(const std::string& name);

// Every event name the spec lists, in the EventName enum's order: the `vendor_string` of
// each value (the one place they are spelled). The webhook receiver's known names, the
// sandbox's event configuration and `--sandbox`'s registrations use it.
const std::vector<std::string>& SpecEventNames();

}  // namespace inspection::vendor

#endif  // ADAPTERS_VENDOR_EVENT_MAPPER_H_
