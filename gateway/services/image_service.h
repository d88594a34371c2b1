#ifndef GATEWAY_SERVICES_IMAGE_SERVICE_H_
#define GATEWAY_SERVICES_IMAGE_SERVICE_H_

#include <grpcpp/grpcpp.h>

#include "gateway/services/unary_call.h"
#include "inspection/v1/image.grpc.pb.h"

namespace inspection::services {

// inspection.v1.ImageService: each RPC is one vendor call, described by its UnaryEndpoint
// (route, validation, request encoding, response decoding). Thread-safe; `deps` must
// outlive the service.
class ImageServiceImpl final : public v1::ImageService::CallbackService {
 public:
  explicit ImageServiceImpl(const ServiceDeps& deps);

  grpc::ServerUnaryReactor* RemoveBackground(grpc::CallbackServerContext* context,
                                             const v1::RemoveBackgroundRequest* request,
                                             v1::RemoveBackgroundResponse* response) override;
  grpc::ServerUnaryReactor* AssessQuality(grpc::CallbackServerContext* context,
                                          const v1::AssessQualityRequest* request,
                                          v1::AssessQualityResponse* response) override;
  grpc::ServerUnaryReactor* AssessQualityBatch(grpc::CallbackServerContext* context,
                                               const v1::AssessQualityBatchRequest* request,
                                               v1::AssessQualityBatchResponse* response) override;
  grpc::ServerUnaryReactor* SegmentVehicle(grpc::CallbackServerContext* context,
                                           const v1::SegmentVehicleRequest* request,
                                           v1::SegmentVehicleResponse* response) override;
  grpc::ServerUnaryReactor* SegmentParts(grpc::CallbackServerContext* context,
                                         const v1::SegmentPartsRequest* request,
                                         v1::SegmentPartsResponse* response) override;

 private:
  const ServiceDeps& deps_;
  const UnaryEndpoint<v1::RemoveBackgroundRequest, v1::RemoveBackgroundResponse> remove_background_;
  const UnaryEndpoint<v1::AssessQualityRequest, v1::AssessQualityResponse> assess_quality_;
  const UnaryEndpoint<v1::AssessQualityBatchRequest, v1::AssessQualityBatchResponse>
      assess_quality_batch_;
  const UnaryEndpoint<v1::SegmentVehicleRequest, v1::SegmentVehicleResponse> segment_vehicle_;
  const UnaryEndpoint<v1::SegmentPartsRequest, v1::SegmentPartsResponse> segment_parts_;
};

}  // namespace inspection::services

#endif  // GATEWAY_SERVICES_IMAGE_SERVICE_H_
