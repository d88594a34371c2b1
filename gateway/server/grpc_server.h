#ifndef GATEWAY_SERVER_GRPC_SERVER_H_
#define GATEWAY_SERVER_GRPC_SERVER_H_

// The gRPC side: the gateway's services (the public ones, gRPC health, server reflection)
// and the grpc::Server that serves them with the listener's credentials, limits and the
// metrics interceptor.

#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "gateway/metrics/grpc_server_metrics.h"
#include "gateway/server/server_options.h"
#include "gateway/services/health_service.h"
#include "gateway/services/reflection_service.h"
#include "gateway/services/unary_call.h"

namespace inspection::server {

// The public services' full names (inspection.v1.*).
const std::vector<std::string>& PublicServiceNames();

// Every RPC of the public services, for the gRPC metrics (bounded label values).
std::vector<metrics::GrpcMethodSpec> PublicMethods();

struct GrpcServices {
  std::vector<std::unique_ptr<grpc::Service>> public_services;
  // grpc.health.v1.Health, and server reflection when asked for (null otherwise): both
  // served by our code so that the authorization policy (and the stream limits) decide who
  // may call them like any RPC; gRPC's built-in ones never call into the gateway.
  std::unique_ptr<services::HealthService> health;
  std::unique_ptr<services::ReflectionService> reflection;

  // Every grpc::Service to register, public ones first.
  std::vector<grpc::Service*> all() const;
};

// The services, each given `deps` (which must outlive them).
GrpcServices MakeGrpcServices(const services::ServiceDeps& deps, bool reflection);

// Builds and starts the server on options.grpc_addr; `*port` is the bound port. Fails when
// the TLS files cannot be read or the address cannot be bound.
absl::StatusOr<std::unique_ptr<grpc::Server>> MakeGrpcServer(
    const GatewayServerOptions& options, const std::vector<grpc::Service*>& services,
    std::shared_ptr<metrics::GrpcServerMetrics> metrics,
    std::shared_ptr<metrics::InFlightCalls> in_flight, int* port);

}  // namespace inspection::server

#endif  // GATEWAY_SERVER_GRPC_SERVER_H_
