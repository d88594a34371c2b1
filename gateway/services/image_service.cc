#include "gateway/services/image_service.h"

#include "adapters/vendor/image_mapper.h"

namespace inspection::services {

ImageServiceImpl::ImageServiceImpl(const ServiceDeps& deps)
    : deps_(deps),
      remove_background_{routes::RouteId::kRemoveBackground,
                         [](const v1::RemoveBackgroundRequest& r) {
                           return validation::ValidateRemoveBackground(r);
                         },
                         [this](const v1::RemoveBackgroundRequest& r) {
                           return vendor::EncodeRemoveBackgroundRequest(r, deps_.mapper_options);
                         },
                         [this](const nlohmann::json& j, const v1::RemoveBackgroundRequest& r,
                                v1::RemoveBackgroundResponse* out, vendor::DecodeReport* report) {
                           return vendor::DecodeRemoveBackgroundResponse(j, out, report);
                         }},
      assess_quality_{
          routes::RouteId::kAssessQuality,
          [](const v1::AssessQualityRequest& r) { return validation::ValidateAssessQuality(r); },
          [this](const v1::AssessQualityRequest& r) {
            return vendor::EncodeAssessQualityRequest(r);
          },
          [this](const nlohmann::json& j, const v1::AssessQualityRequest& r,
                 v1::AssessQualityResponse* out, vendor::DecodeReport* report) {
            return vendor::DecodeAssessQualityResponse(j, out, report);
          }},
      assess_quality_batch_{
          routes::RouteId::kAssessQualityBatch,
          [this](const v1::AssessQualityBatchRequest& r) {
            return validation::ValidateAssessQualityBatch(r, deps_.limits);
          },
          [this](const v1::AssessQualityBatchRequest& r) {
            return vendor::EncodeAssessQualityBatchRequest(r);
          },
          [this](const nlohmann::json& j, const v1::AssessQualityBatchRequest& r,
                 v1::AssessQualityBatchResponse* out, vendor::DecodeReport* report) {
            return vendor::DecodeAssessQualityBatchResponse(j, out, report);
          }},
      segment_vehicle_{routes::RouteId::kSegmentVehicle,
                       [this](const v1::SegmentVehicleRequest& r) {
                         return validation::ValidateSegmentVehicle(r, deps_.limits);
                       },
                       [this](const v1::SegmentVehicleRequest& r) {
                         return vendor::EncodeSegmentVehicleRequest(r);
                       },
                       [this](const nlohmann::json& j, const v1::SegmentVehicleRequest& r,
                              v1::SegmentVehicleResponse* out, vendor::DecodeReport* report) {
                         return vendor::DecodeSegmentVehicleResponse(j, out, report);
                       }},
      segment_parts_{
          routes::RouteId::kSegmentParts,
          [this](const v1::SegmentPartsRequest& r) {
            return validation::ValidateSegmentParts(r, deps_.limits);
          },
          [this](const v1::SegmentPartsRequest& r) { return vendor::EncodeSegmentPartsRequest(r); },
          [this](const nlohmann::json& j, const v1::SegmentPartsRequest& r,
                 v1::SegmentPartsResponse* out, vendor::DecodeReport* report) {
            return vendor::DecodeSegmentPartsResponse(j, out, report);
          }} {}

grpc::ServerUnaryReactor* ImageServiceImpl::RemoveBackground(
    grpc::CallbackServerContext* context, const v1::RemoveBackgroundRequest* request,
    v1::RemoveBackgroundResponse* response) {
  return RunUnary(context, request, response, deps_, remove_background_);
}

grpc::ServerUnaryReactor* ImageServiceImpl::AssessQuality(grpc::CallbackServerContext* context,
                                                          const v1::AssessQualityRequest* request,
                                                          v1::AssessQualityResponse* response) {
  return RunUnary(context, request, response, deps_, assess_quality_);
}

grpc::ServerUnaryReactor* ImageServiceImpl::AssessQualityBatch(
    grpc::CallbackServerContext* context, const v1::AssessQualityBatchRequest* request,
    v1::AssessQualityBatchResponse* response) {
  return RunUnary(context, request, response, deps_, assess_quality_batch_);
}

grpc::ServerUnaryReactor* ImageServiceImpl::SegmentVehicle(grpc::CallbackServerContext* context,
                                                           const v1::SegmentVehicleRequest* request,
                                                           v1::SegmentVehicleResponse* response) {
  return RunUnary(context, request, response, deps_, segment_vehicle_);
}

grpc::ServerUnaryReactor* ImageServiceImpl::SegmentParts(grpc::CallbackServerContext* context,
                                                         const v1::SegmentPartsRequest* request,
                                                         v1::SegmentPartsResponse* response) {
  return RunUnary(context, request, response, deps_, segment_parts_);
}

}  // namespace inspection::services
