#include "adapters/vendor/inspection_mapper.h"

#include "absl/strings/str_cat.h"

namespace inspection::vendor {

VendorRequest EncodeSearchInspectionsRequest(const v1::SearchInspectionsRequest& request) {
  VendorRequest out;
  if (!request.license_plate().empty())
    out.query.emplace_back("licensePlate", request.license_plate());
  if (!request.username().empty()) out.query.emplace_back("username", request.username());
  if (request.has_page()) out.query.emplace_back("page", absl::StrCat(request.page()));
  if (request.has_limit()) out.query.emplace_back("limit", absl::StrCat(request.limit()));
  return out;
}

absl::Status DecodeSearchInspectionsResponse(const nlohmann::json& body,
                                             v1::SearchInspectionsResponse* response,
                                             DecodeReport* report) {
  return DecodeMessage(body, response, report);
}

VendorRequest EncodeGetDamagesReportRequest(const v1::GetDamagesReportRequest& request) {
  VendorRequest out;
  out.path_params.emplace_back("inspectionId", request.inspection_id());
  return out;
}

absl::Status DecodeGetDamagesReportResponse(const nlohmann::json& body,
                                            v1::GetDamagesReportResponse* response) {
  response->Clear();
  *response->mutable_report() = JsonToValue(body);
  return absl::OkStatus();
}

}  // namespace inspection::vendor
