#include "gateway/services/damage_service.h"

#include "adapters/vendor/damage_mapper.h"

namespace inspection::services {

DamageServiceImpl::DamageServiceImpl(const ServiceDeps& deps)
    : deps_(deps),
      detect_damage_{
          routes::RouteId::kDetectDamage,
          [](const v1::DetectDamageRequest& r) { return validation::ValidateDetectDamage(r); },
          [this](const v1::DetectDamageRequest& r) { return vendor::EncodeDetectDamageRequest(r); },
          [this](const nlohmann::json& j, const v1::DetectDamageRequest& r,
                 v1::DetectDamageResponse* out, vendor::DecodeReport* report) {
            return vendor::DecodeDetectDamageResponse(j, deps_.mapper_options, out);
          }} {}

grpc::ServerUnaryReactor* DamageServiceImpl::DetectDamage(grpc::CallbackServerContext* context,
                                                          const v1::DetectDamageRequest* request,
                                                          v1::DetectDamageResponse* response) {
  return RunUnary(context, request, response, deps_, detect_damage_);
}

}  // namespace inspection::services
