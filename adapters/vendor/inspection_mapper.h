#ifndef ADAPTERS_VENDOR_INSPECTION_MAPPER_H_
#define ADAPTERS_VENDOR_INSPECTION_MAPPER_H_

#include "absl/status/status.h"
#include "adapters/vendor/json_codec.h"
#include "adapters/vendor/vendor_request.h"
#include "inspection/v1/inspection.pb.h"
#include "nlohmann/json.hpp"

namespace inspection::vendor {

// GET /apiv1/inspection/search?licensePlate=&username=&page=&limit= (only the
// parameters that are set are sent).
VendorRequest EncodeSearchInspectionsRequest(const v1::SearchInspectionsRequest& request);
absl::Status DecodeSearchInspectionsResponse(const nlohmann::json& body,
                                             v1::SearchInspectionsResponse* response,
                                             DecodeReport* report);

// GET /apiv1/inspection/apiV1_sdk/inspection/damagesReport/<inspectionId>. The report's
// fields are not shown by the spec: the body is kept whole as a Value.
VendorRequest EncodeGetDamagesReportRequest(const v1::GetDamagesReportRequest& request);
absl::Status DecodeGetDamagesReportResponse(const nlohmann::json& body,
                                            v1::GetDamagesReportResponse* response);

}  // namespace inspection::vendor

#endif  // ADAPTERS_VENDOR_INSPECTION_MAPPER_H_
