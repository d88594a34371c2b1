#ifndef GATEWAY_SERVICES_INSPECTION_SERVICE_H_
#define GATEWAY_SERVICES_INSPECTION_SERVICE_H_

#include <grpcpp/grpcpp.h>

#include "gateway/services/unary_call.h"
#include "inspection/v1/inspection.grpc.pb.h"

namespace inspection::services {

// inspection.v1.InspectionService: each RPC is one vendor call, described by its UnaryEndpoint
// (route, validation, request encoding, response decoding). Thread-safe; `deps` must
// outlive the service.
class InspectionServiceImpl final : public v1::InspectionService::CallbackService {
 public:
  explicit InspectionServiceImpl(const ServiceDeps& deps);

  grpc::ServerUnaryReactor* SearchInspections(grpc::CallbackServerContext* context,
                                              const v1::SearchInspectionsRequest* request,
                                              v1::SearchInspectionsResponse* response) override;
  grpc::ServerUnaryReactor* GetDamagesReport(grpc::CallbackServerContext* context,
                                             const v1::GetDamagesReportRequest* request,
                                             v1::GetDamagesReportResponse* response) override;

 private:
  const ServiceDeps& deps_;
  const UnaryEndpoint<v1::SearchInspectionsRequest, v1::SearchInspectionsResponse>
      search_inspections_;
  const UnaryEndpoint<v1::GetDamagesReportRequest, v1::GetDamagesReportResponse>
      get_damages_report_;
};

}  // namespace inspection::services

#endif  // GATEWAY_SERVICES_INSPECTION_SERVICE_H_
