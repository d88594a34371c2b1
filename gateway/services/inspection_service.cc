#include "gateway/services/inspection_service.h"

#include "adapters/vendor/inspection_mapper.h"

namespace inspection::services {

InspectionServiceImpl::InspectionServiceImpl(const ServiceDeps& deps)
    : deps_(deps),
      search_inspections_{routes::RouteId::kSearchInspections,
                          [this](const v1::SearchInspectionsRequest& r) {
                            return validation::ValidateSearchInspections(r, deps_.limits);
                          },
                          [this](const v1::SearchInspectionsRequest& r) {
                            return vendor::EncodeSearchInspectionsRequest(r);
                          },
                          [this](const nlohmann::json& j, const v1::SearchInspectionsRequest& r,
                                 v1::SearchInspectionsResponse* out, vendor::DecodeReport* report) {
                            return vendor::DecodeSearchInspectionsResponse(j, out, report);
                          }},
      get_damages_report_{routes::RouteId::kGetDamagesReport,
                          [](const v1::GetDamagesReportRequest& r) {
                            return validation::ValidateGetDamagesReport(r);
                          },
                          [this](const v1::GetDamagesReportRequest& r) {
                            return vendor::EncodeGetDamagesReportRequest(r);
                          },
                          [this](const nlohmann::json& j, const v1::GetDamagesReportRequest& r,
                                 v1::GetDamagesReportResponse* out, vendor::DecodeReport* report) {
                            return vendor::DecodeGetDamagesReportResponse(j, out);
                          }} {}

grpc::ServerUnaryReactor* InspectionServiceImpl::SearchInspections(
    grpc::CallbackServerContext* context, const v1::SearchInspectionsRequest* request,
    v1::SearchInspectionsResponse* response) {
  return RunUnary(context, request, response, deps_, search_inspections_);
}

grpc::ServerUnaryReactor* InspectionServiceImpl::GetDamagesReport(
    grpc::CallbackServerContext* context, const v1::GetDamagesReportRequest* request,
    v1::GetDamagesReportResponse* response) {
  return RunUnary(context, request, response, deps_, get_damages_report_);
}

}  // namespace inspection::services
