#ifndef GATEWAY_SERVICES_EVENT_CONFIG_SERVICE_H_
#define GATEWAY_SERVICES_EVENT_CONFIG_SERVICE_H_

#include <grpcpp/grpcpp.h>

#include "gateway/services/unary_call.h"
#include "inspection/v1/event_config.grpc.pb.h"

namespace inspection::services {

// The writes webhook registration at start-up also makes (server/webhook_registration.cc).
UnaryEndpoint<v1::UpdateWebhookConfigRequest, v1::UpdateWebhookConfigResponse>
UpdateWebhookConfigEndpoint();
UnaryEndpoint<v1::UpdateEventConfigRequest, v1::UpdateEventConfigResponse>
UpdateEventConfigEndpoint();

// inspection.v1.EventConfigService: each RPC is one vendor call, described by its UnaryEndpoint
// (route, validation, request encoding, response decoding). Thread-safe; `deps` must
// outlive the service.
class EventConfigServiceImpl final : public v1::EventConfigService::CallbackService {
 public:
  explicit EventConfigServiceImpl(const ServiceDeps& deps);

  grpc::ServerUnaryReactor* GetWebhookConfig(grpc::CallbackServerContext* context,
                                             const v1::GetWebhookConfigRequest* request,
                                             v1::GetWebhookConfigResponse* response) override;
  grpc::ServerUnaryReactor* UpdateWebhookConfig(grpc::CallbackServerContext* context,
                                                const v1::UpdateWebhookConfigRequest* request,
                                                v1::UpdateWebhookConfigResponse* response) override;
  grpc::ServerUnaryReactor* ListEventConfigs(grpc::CallbackServerContext* context,
                                             const v1::ListEventConfigsRequest* request,
                                             v1::ListEventConfigsResponse* response) override;
  grpc::ServerUnaryReactor* UpdateEventConfig(grpc::CallbackServerContext* context,
                                              const v1::UpdateEventConfigRequest* request,
                                              v1::UpdateEventConfigResponse* response) override;
  grpc::ServerUnaryReactor* TestWebhook(grpc::CallbackServerContext* context,
                                        const v1::TestWebhookRequest* request,
                                        v1::TestWebhookResponse* response) override;

 private:
  const ServiceDeps& deps_;
  const UnaryEndpoint<v1::GetWebhookConfigRequest, v1::GetWebhookConfigResponse>
      get_webhook_config_;
  const UnaryEndpoint<v1::UpdateWebhookConfigRequest, v1::UpdateWebhookConfigResponse>
      update_webhook_config_;
  const UnaryEndpoint<v1::ListEventConfigsRequest, v1::ListEventConfigsResponse>
      list_event_configs_;
  const UnaryEndpoint<v1::UpdateEventConfigRequest, v1::UpdateEventConfigResponse>
      update_event_config_;
  const UnaryEndpoint<v1::TestWebhookRequest, v1::TestWebhookResponse> test_webhook_;
};

}  // namespace inspection::services

#endif  // GATEWAY_SERVICES_EVENT_CONFIG_SERVICE_H_
