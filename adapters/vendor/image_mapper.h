#ifndef ADAPTERS_VENDOR_IMAGE_MAPPER_H_
#define ADAPTERS_VENDOR_IMAGE_MAPPER_H_

#include "absl/status/status.h"
#include "adapters/vendor/json_codec.h"
#include "adapters/vendor/vendor_request.h"
#include "inspection/v1/image.pb.h"
#include "nlohmann/json.hpp"

namespace inspection::vendor {

// POST /apiV1/remarketing/removeBackground. The spec spells two keys twice
// (manualTopLeftPositionRatio/...Ratios, wheelBox/wheelsBox): `options` says which
// spelling(s) are sent.
VendorRequest EncodeRemoveBackgroundRequest(const v1::RemoveBackgroundRequest& request,
                                            const MapperOptions& options);
absl::Status DecodeRemoveBackgroundResponse(const nlohmann::json& body,
                                            v1::RemoveBackgroundResponse* response,
                                            DecodeReport* report);

// POST /apiV1/quality/image and /apiV1/quality/image/list. The list endpoint's
// capitalised reason keys (`Dark`) decode into the same fields as `dark`.
VendorRequest EncodeAssessQualityRequest(const v1::AssessQualityRequest& request);
absl::Status DecodeAssessQualityResponse(const nlohmann::json& body,
                                         v1::AssessQualityResponse* response, DecodeReport* report);
VendorRequest EncodeAssessQualityBatchRequest(const v1::AssessQualityBatchRequest& request);
absl::Status DecodeAssessQualityBatchResponse(const nlohmann::json& body,
                                              v1::AssessQualityBatchResponse* response,
                                              DecodeReport* report);

// POST /apiV1/seg/image.
VendorRequest EncodeSegmentVehicleRequest(const v1::SegmentVehicleRequest& request);
absl::Status DecodeSegmentVehicleResponse(const nlohmann::json& body,
                                          v1::SegmentVehicleResponse* response,
                                          DecodeReport* report);

// POST /apiV1/part/image. Each part's code is decoded into `part` (codes.h).
VendorRequest EncodeSegmentPartsRequest(const v1::SegmentPartsRequest& request);
absl::Status DecodeSegmentPartsResponse(const nlohmann::json& body,
                                        v1::SegmentPartsResponse* response, DecodeReport* report);

}  // namespace inspection::vendor

#endif  // ADAPTERS_VENDOR_IMAGE_MAPPER_H_
