#ifndef ADAPTERS_VENDOR_IMAGE_MAPPER_H_
#define ADAPTERS_VENDOR_IMAGE_MAPPER_H_

#include "absl/status/status.h"
#include "adapters/vendor/json_codec.h"
#include "adapters/vendor/vendor_request.h"
#include "inspection/v1/image.pb.h"
#include "nlohmann/json.hpp"

namespace inspection::vendor {

// POST /apiV1/remarketing/removeBackground (its encoding is code; the other image RPCs
// use the generic mapping, vendor_mapping.h, but for SegmentParts' decoding below). The spec spells
// two keys twice (manualTopLeftPositionRatio/...Ratios, wheelBox/wheelsBox): `options` says which
// spelling(s) are sent.
VendorRequest EncodeRemoveBackgroundRequest(const v1::RemoveBackgroundRequest& request,
                                            const MapperOptions& options);

// POST /apiV1/part/image's answer: each part's vendor code is also decoded into `part`
// (codes.h). The request uses the generic mapping.
absl::Status DecodeSegmentPartsResponse(const nlohmann::json& body,
                                        v1::SegmentPartsResponse* response, DecodeReport* report);

}  // namespace inspection::vendor

#endif  // ADAPTERS_VENDOR_IMAGE_MAPPER_H_
