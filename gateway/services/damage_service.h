#ifndef GATEWAY_SERVICES_DAMAGE_SERVICE_H_
#define GATEWAY_SERVICES_DAMAGE_SERVICE_H_

#include <grpcpp/grpcpp.h>

#include "gateway/services/generic_unary_service.h"
#include "gateway/services/unary_call.h"
#include "inspection/v1/damage.grpc.pb.h"

namespace inspection::services {

// inspection.v1.DamageService's stream, StreamDamageResults; DetectDamage is served by the
// generic unary handler (generic_unary_service.h), and the stream submits through the same
// endpoint. Thread-safe; `deps` must outlive the service. StreamDamageResults is registered raw:
// its reactor writes each event's shared, serialized-once bytes (streaming::EventStreamReactor);
// clients see StreamDamageResultsResponse as declared.
class DamageServiceImpl final
    : public StreamsOnly<v1::DamageService::WithRawCallbackMethod_StreamDamageResults<
          v1::DamageService::CallbackService>> {
 public:
  explicit DamageServiceImpl(const ServiceDeps& deps);

  // Submits like DetectDamage, then streams the inspection's events until createReport,
  // or until the report the gateway recovered by polling (Event.source), whichever first.
  // `request` holds a serialized StreamDamageResultsRequest.
  grpc::ServerWriteReactor<grpc::ByteBuffer>* StreamDamageResults(
      grpc::CallbackServerContext* context, const grpc::ByteBuffer* request) override;

 private:
  const ServiceDeps& deps_;
};

}  // namespace inspection::services

#endif  // GATEWAY_SERVICES_DAMAGE_SERVICE_H_
