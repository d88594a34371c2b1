#ifndef GATEWAY_SERVICES_EVENT_SERVICE_H_
#define GATEWAY_SERVICES_EVENT_SERVICE_H_

#include <grpcpp/grpcpp.h>

#include "gateway/services/unary_call.h"
#include "inspection/v1/event.grpc.pb.h"

namespace inspection::services {

// inspection.v1.EventService: vendor events from the event log as gRPC streams.
class EventServiceImpl final : public v1::EventService::CallbackService {
 public:
  explicit EventServiceImpl(const ServiceDeps& deps) : deps_(deps) {}

  grpc::ServerWriteReactor<v1::SubscribeResponse>* Subscribe(
      grpc::CallbackServerContext* context, const v1::SubscribeRequest* request) override;

 private:
  const ServiceDeps& deps_;
};

// Checks a SubscribeRequest: known enum values, well-formed cursor.
validation::Violations ValidateSubscribe(const v1::SubscribeRequest& request);

}  // namespace inspection::services

#endif  // GATEWAY_SERVICES_EVENT_SERVICE_H_
