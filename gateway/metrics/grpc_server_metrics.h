#ifndef GATEWAY_METRICS_GRPC_SERVER_METRICS_H_
#define GATEWAY_METRICS_GRPC_SERVER_METRICS_H_

#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <grpcpp/support/server_interceptor.h>
#include <grpcpp/support/status_code_enum.h>
#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gateway/metrics/metrics_scope.h"

namespace inspection::metrics {

// `grpc_type`, go-grpc-prometheus spelling: unary, client_stream, server_stream, bidi_stream.
enum class GrpcType { kUnary, kClientStream, kServerStream, kBidiStream };
inline constexpr size_t kNumGrpcTypes = 4;
std::string_view GrpcTypeLabel(GrpcType type);

// `grpc_code`: the 17 gRPC codes, spelled as go-grpc-prometheus does (Go's codes.Code
// String(): "OK", "Canceled", "InvalidArgument", ...) so stock dashboards work.
inline constexpr size_t kNumGrpcCodes = 17;
std::string_view GrpcCodeLabel(grpc::StatusCode code);

struct GrpcMethodSpec {
  std::string service;  // fully qualified, "inspection.v1.TokenService"
  std::string method;   // "CreateToken"
  GrpcType type = GrpcType::kUnary;
};

// go-grpc-prometheus server metrics of one gRPC method (or of the "other" bucket).
class GrpcMethodMetrics {
 public:
  // grpc_server_started_total.
  void RecordStarted();
  // grpc_server_handled_total{grpc_code} and grpc_server_handling_seconds. A code outside
  // 0..16 counts as Unknown.
  void RecordHandled(grpc::StatusCode code, std::chrono::nanoseconds elapsed);
  // grpc_server_msg_sent_total / grpc_server_msg_received_total.
  void RecordMsgSent();
  void RecordMsgReceived();

 private:
  friend class GrpcServerMetrics;
  prometheus::Counter* started_ = nullptr;
  std::array<prometheus::Counter*, kNumGrpcCodes> handled_{};
  prometheus::Histogram* handling_seconds_ = nullptr;
  prometheus::Counter* msg_sent_ = nullptr;
  prometheus::Counter* msg_received_ = nullptr;
};

// inspection_stream_subscribers{rpc}: call SubscriberStarted() when a stream starts
// delivering and SubscriberEnded() exactly once when it ends, whatever the reason.
class StreamRpcMetrics {
 public:
  void SubscriberStarted();
  void SubscriberEnded();

 private:
  friend class GrpcServerMetrics;
  prometheus::Gauge* subscribers_ = nullptr;
};

// The gRPC server's series: go-grpc-prometheus' families for every method the gateway
// serves (every (method, code) series exists from the start, like go-grpc-prometheus'
// InitializeMetrics()), and inspection_stream_subscribers for its server streams. Created
// once from the registry's scope with bounded label sets; the handles stay valid as long
// as this object lives. Thread-safe.
class GrpcServerMetrics {
 public:
  // `methods`: attributed by name, others go to the "other" bucket of their type.
  // `stream_rpcs`: the `rpc` label values of inspection_stream_subscribers. Label values
  // follow CheckLabelValues; InvalidArgument names the offending list and value.
  static absl::StatusOr<std::shared_ptr<GrpcServerMetrics>> Create(
      const MetricsScope& scope, const std::vector<GrpcMethodSpec>& methods,
      const std::vector<std::string>& stream_rpcs);

  // Handles of methods[index]; out of range -> the "other" bucket of kUnary.
  GrpcMethodMetrics& ForGrpcMethod(size_t index);
  // By full method name as gRPC reports it ("/inspection.v1.TokenService/CreateToken"): the
  // configured method (its configured type wins), else the "other" bucket of `type`
  // (grpc_service="other", grpc_method="other"). An ordered-map lookup, no allocation.
  GrpcMethodMetrics& ForGrpcMethod(std::string_view full_method, GrpcType type);
  // Handles of stream_rpcs[index]; out of range -> "other".
  StreamRpcMetrics& ForStreamRpc(size_t rpc_index);
  // Handles of the stream RPC named `rpc` (a method name, e.g. "Subscribe"); null when it
  // is not one of stream_rpcs.
  StreamRpcMetrics* FindStreamRpc(std::string_view rpc);

 private:
  GrpcServerMetrics() = default;
  void BuildMethods(const MetricsScope& scope, const std::vector<GrpcMethodSpec>& methods);
  void BuildStreams(const MetricsScope& scope, const std::vector<std::string>& rpcs);

  std::map<std::string, size_t, std::less<>> grpc_method_index_;  // "/svc/method" -> index
  std::vector<GrpcMethodMetrics> grpc_methods_;
  std::array<GrpcMethodMetrics, kNumGrpcTypes> grpc_other_;
  std::vector<StreamRpcMetrics> stream_rpcs_;  // + "other" last
  std::vector<std::string> stream_rpc_names_;
};

// A gRPC server interceptor factory that records the go-grpc-prometheus server metrics of
// GrpcServerMetrics for every RPC, with the sync, async and callback APIs alike:
//   grpc_server_started_total        when the call is matched to a method
//   grpc_server_msg_received_total   each request message received
//   grpc_server_msg_sent_total       each response message handed to gRPC for sending
//   grpc_server_handled_total{grpc_code} and grpc_server_handling_seconds
//                                    when the status is sent (time since started)
// A call that ends without the server sending a status (not expected with well-behaved
// handlers) is counted as Canceled when gRPC destroys its interceptors.
//
// Methods are attributed by their full name through GrpcServerMetrics::ForGrpcMethod(name,
// type): one lookup per call, in an immutable map. Methods not in the configured list (health
// checks, reflection, unimplemented names a client made up) are counted in the bounded "other"
// bucket (grpc_service="other", grpc_method="other", grpc_type from the call), never under their
// own name. To see health or reflection separately, list them in grpc_methods.
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
  explicit GrpcServerMetricsInterceptorFactory(std::shared_ptr<GrpcServerMetrics> metrics,
                                               std::shared_ptr<InFlightCalls> in_flight = nullptr);

  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override;

 private:
  const std::shared_ptr<GrpcServerMetrics> metrics_;
  const std::shared_ptr<InFlightCalls> in_flight_;
};

}  // namespace inspection::metrics

#endif  // GATEWAY_METRICS_GRPC_SERVER_METRICS_H_
