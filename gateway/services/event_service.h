#ifndef GATEWAY_SERVICES_EVENT_SERVICE_H_
#define GATEWAY_SERVICES_EVENT_SERVICE_H_

#include <grpcpp/grpcpp.h>

#include "gateway/services/unary_call.h"
#include "inspection/v1/event.grpc.pb.h"

namespace inspection::services {

// inspection.v1.EventService: vendor events from the event log as gRPC streams.
// Subscribe is registered raw: its reactor writes each event's shared, serialized-once bytes
// (streaming::EventStreamReactor); clients see SubscribeResponse as declared.
class EventServiceImpl final
    : public v1::EventService::WithRawCallbackMethod_Subscribe<v1::EventService::CallbackService> {
 public:
  // The admission of its streams and the hub they follow; both must outlive the service.
  EventServiceImpl(const AdmissionDeps& admission, const StreamDeps& streams)
      : admission_(admission), streams_(streams) {}

  // `request` holds a serialized SubscribeRequest.
  grpc::ServerWriteReactor<grpc::ByteBuffer>* Subscribe(grpc::CallbackServerContext* context,
                                                        const grpc::ByteBuffer* request) override;

 private:
  const AdmissionDeps& admission_;
  const StreamDeps& streams_;
};

// Checks a SubscribeRequest: known enum values, well-formed cursor.
validation::Violations ValidateSubscribe(const v1::SubscribeRequest& request);

}  // namespace inspection::services

#endif  // GATEWAY_SERVICES_EVENT_SERVICE_H_
