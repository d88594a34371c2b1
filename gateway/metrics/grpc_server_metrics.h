#ifndef GATEWAY_METRICS_GRPC_SERVER_METRICS_H_
#define GATEWAY_METRICS_GRPC_SERVER_METRICS_H_

#include <cstdint>
#include <memory>

#include <grpcpp/support/server_interceptor.h>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gateway/metrics/gateway_metrics.h"

namespace inspection::metrics {

// A gRPC server interceptor factory that records the go-grpc-prometheus server metrics of
// GatewayMetrics for every RPC, with the sync, async and callback APIs alike:
//   grpc_server_started_total        when the call is matched to a method
//   grpc_server_msg_received_total   each request message received
//   grpc_server_msg_sent_total       each response message handed to gRPC for sending
//   grpc_server_handled_total{grpc_code} and grpc_server_handling_seconds
//                                    when the status is sent (time since started)
// A call that ends without the server sending a status (not expected with well-behaved
// handlers) is counted as Canceled when gRPC destroys its interceptors.
//
// Methods are attributed by their full name through GatewayMetrics::ForGrpcMethod(name,
// type): one lookup per call, in an immutable map. Methods not in
// GatewayMetricsConfig::grpc_methods (health checks, reflection, unimplemented names a
// client made up) are counted in the bounded "other" bucket (grpc_service="other",
// grpc_method="other", grpc_type from the call), never under their own name. To see health
// or reflection separately, list them in grpc_methods.
//
// Install it (SetInterceptorCreators replaces earlier creators: pass every factory at once):
//   std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> f;
//   f.push_back(std::make_unique<GrpcServerMetricsInterceptorFactory>(metrics));
//   builder.experimental().SetInterceptorCreators(std::move(f));
//
// Thread-safe. The factory keeps `metrics` alive; the server owns the factory and outlives
// its calls, so the interceptors can use the handles directly.
// The calls a server has matched and not yet finished (an interceptor lives exactly as
// long as its call). Lets a shutdown tell "calls still running" from "only idle client
// connections left". Thread-safe.
class InFlightCalls {
 public:
  void Started();
  void Finished();
  int64_t count() const;
  // True once no call is in flight; false when `deadline` passed first.
  bool WaitForNone(absl::Time deadline) const;

 private:
  mutable absl::Mutex mu_;
  int64_t count_ ABSL_GUARDED_BY(mu_) = 0;
};

class GrpcServerMetricsInterceptorFactory final
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  // `in_flight`, when set, counts every call from its match to its end.
  explicit GrpcServerMetricsInterceptorFactory(std::shared_ptr<GatewayMetrics> metrics,
                                               std::shared_ptr<InFlightCalls> in_flight = nullptr);

  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override;

 private:
  const std::shared_ptr<GatewayMetrics> metrics_;
  const std::shared_ptr<InFlightCalls> in_flight_;
};

}  // namespace inspection::metrics

#endif  // GATEWAY_METRICS_GRPC_SERVER_METRICS_H_
