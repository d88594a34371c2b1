#ifndef GATEWAY_SERVICES_GENERIC_UNARY_SERVICE_H_
#define GATEWAY_SERVICES_GENERIC_UNARY_SERVICE_H_

#include <deque>
#include <string>
#include <string_view>

#include <google/protobuf/descriptor.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/codegen/server_callback_handlers.h>
#include <grpcpp/impl/service_type.h>

#include "gateway/routes/route_table.h"
#include "gateway/services/endpoints.h"
#include "gateway/services/unary_call.h"

namespace inspection::services {

// The generic unary handler of `route`'s RPC, for a grpc::Service to register as a raw
// callback method (gRPC owns it then). Each call:
//   parse the request (its type from the descriptor) -> admission (AdmitCall: repeated
//   metadata, the authorization policy, the caller's rate) -> validation (the endpoint's:
//   the `(rules)` annotations) -> call options (x-vendor-account, cache-control) ->
//   idempotency (a repeat replays, a concurrent duplicate waits) -> CallVendor (encode,
//   the decorated vendor stub, decode) -> finish with x-request-id, x-trace-id, x-cache,
//   grpc-retry-pushback-ms.
// The route's endpoint comes from `deps.endpoints`; `deps` must outlive the handler.
grpc::internal::MethodHandler* NewGenericUnaryHandler(const ServiceDeps& deps,
                                                      const routes::Route& route);

// Whether GenericUnaryService serves `method`: a unary RPC with a `vendor_route` annotation
// of a service without streams. The unary RPCs of a service with streams are served by the
// same handler through that service's StreamsOnly class (one gRPC service per name).
bool ServedByGenericUnaryService(const google::protobuf::MethodDescriptor& method);

// Every annotated unary RPC of a service without streams (routes::AllRoutes(), whatever
// file declares it): a grpc::Service built from the descriptors, its methods registered by
// their wire names with NewGenericUnaryHandler. Thread-safe; `deps` must outlive it.
class GenericUnaryService final : public grpc::Service {
 public:
  explicit GenericUnaryService(const ServiceDeps& deps);

 private:
  // gRPC keeps each method's name as a const char*.
  std::deque<std::string> names_;
};

// A generated callback service that implements only its streams: its unary RPCs are served
// by NewGenericUnaryHandler, like every other unary RPC. `service_name`: the service's full
// name ("inspection.v1.TokenService").
template <class Base>
class StreamsOnly : public Base {
 protected:
  StreamsOnly(const ServiceDeps& deps, std::string_view service_name) {
    const google::protobuf::ServiceDescriptor* service =
        google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(
            std::string(service_name));
    for (int i = 0; service != nullptr && i < service->method_count(); ++i) {
      const google::protobuf::MethodDescriptor* method = service->method(i);
      if (method->server_streaming()) continue;
      const routes::Route* route =
          routes::FindRouteByGrpcMethod("/" + service->full_name() + "/" + method->name());
      if (route != nullptr) this->MarkMethodRawCallback(i, NewGenericUnaryHandler(deps, *route));
    }
  }
};

}  // namespace inspection::services

#endif  // GATEWAY_SERVICES_GENERIC_UNARY_SERVICE_H_
