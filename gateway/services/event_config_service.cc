#include "gateway/services/event_config_service.h"

#include "adapters/vendor/event_config_mapper.h"

namespace inspection::services {

UnaryEndpoint<v1::UpdateWebhookConfigRequest, v1::UpdateWebhookConfigResponse>
UpdateWebhookConfigEndpoint() {
  return {routes::RouteId::kUpdateWebhookConfig,
          [](const v1::UpdateWebhookConfigRequest& r) {
            return validation::ValidateUpdateWebhookConfig(r);
          },
          [](const v1::UpdateWebhookConfigRequest& r) {
            return vendor::EncodeUpdateWebhookConfigRequest(r);
          },
          [](const nlohmann::json& j, const v1::UpdateWebhookConfigRequest& r,
             v1::UpdateWebhookConfigResponse* out, vendor::DecodeReport* report) {
            return vendor::DecodeUpdateWebhookConfigResponse(j, out, report);
          }};
}

UnaryEndpoint<v1::UpdateEventConfigRequest, v1::UpdateEventConfigResponse>
UpdateEventConfigEndpoint() {
  return {routes::RouteId::kUpdateEventConfig,
          [](const v1::UpdateEventConfigRequest& r) {
            return validation::ValidateUpdateEventConfig(r);
          },
          [](const v1::UpdateEventConfigRequest& r) {
            return vendor::EncodeUpdateEventConfigRequest(r);
          },
          [](const nlohmann::json& j, const v1::UpdateEventConfigRequest& r,
             v1::UpdateEventConfigResponse* out, vendor::DecodeReport* report) {
            return vendor::DecodeUpdateEventConfigResponse(j, out, report);
          }};
}

EventConfigServiceImpl::EventConfigServiceImpl(const ServiceDeps& deps)
    : deps_(deps),
      get_webhook_config_{
          routes::RouteId::kGetWebhookConfig,
          [](const v1::GetWebhookConfigRequest& r) { return validation::Violations{}; },
          [this](const v1::GetWebhookConfigRequest& r) { return vendor::VendorRequest{}; },
          [this](const nlohmann::json& j, const v1::GetWebhookConfigRequest& r,
                 v1::GetWebhookConfigResponse* out, vendor::DecodeReport* report) {
            return vendor::DecodeGetWebhookConfigResponse(j, out, report);
          }},
      update_webhook_config_(UpdateWebhookConfigEndpoint()),
      list_event_configs_{
          routes::RouteId::kListEventConfigs,
          [](const v1::ListEventConfigsRequest& r) { return validation::Violations{}; },
          [this](const v1::ListEventConfigsRequest& r) { return vendor::VendorRequest{}; },
          [this](const nlohmann::json& j, const v1::ListEventConfigsRequest& r,
                 v1::ListEventConfigsResponse* out, vendor::DecodeReport* report) {
            return vendor::DecodeListEventConfigsResponse(j, out, report);
          }},
      update_event_config_(UpdateEventConfigEndpoint()),
      test_webhook_{
          routes::RouteId::kTestWebhook,
          [](const v1::TestWebhookRequest& r) { return validation::ValidateTestWebhook(r); },
          [this](const v1::TestWebhookRequest& r) {
            return vendor::EncodeTestWebhookRequest(r, deps_.mapper_options);
          },
          [this](const nlohmann::json& j, const v1::TestWebhookRequest& r,
                 v1::TestWebhookResponse* out, vendor::DecodeReport* report) {
            return vendor::DecodeTestWebhookResponse(j, out, report);
          }} {}

grpc::ServerUnaryReactor* EventConfigServiceImpl::GetWebhookConfig(
    grpc::CallbackServerContext* context, const v1::GetWebhookConfigRequest* request,
    v1::GetWebhookConfigResponse* response) {
  return RunUnary(context, request, response, deps_, get_webhook_config_);
}

grpc::ServerUnaryReactor* EventConfigServiceImpl::UpdateWebhookConfig(
    grpc::CallbackServerContext* context, const v1::UpdateWebhookConfigRequest* request,
    v1::UpdateWebhookConfigResponse* response) {
  return RunUnary(context, request, response, deps_, update_webhook_config_);
}

grpc::ServerUnaryReactor* EventConfigServiceImpl::ListEventConfigs(
    grpc::CallbackServerContext* context, const v1::ListEventConfigsRequest* request,
    v1::ListEventConfigsResponse* response) {
  return RunUnary(context, request, response, deps_, list_event_configs_);
}

grpc::ServerUnaryReactor* EventConfigServiceImpl::UpdateEventConfig(
    grpc::CallbackServerContext* context, const v1::UpdateEventConfigRequest* request,
    v1::UpdateEventConfigResponse* response) {
  return RunUnary(context, request, response, deps_, update_event_config_);
}

grpc::ServerUnaryReactor* EventConfigServiceImpl::TestWebhook(grpc::CallbackServerContext* context,
                                                              const v1::TestWebhookRequest* request,
                                                              v1::TestWebhookResponse* response) {
  return RunUnary(context, request, response, deps_, test_webhook_);
}

}  // namespace inspection::services
