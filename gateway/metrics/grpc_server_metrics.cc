#include "gateway/metrics/grpc_server_metrics.h"

#include <atomic>
#include <chrono>
#include <string_view>
#include <utility>

#include <grpcpp/support/interceptor.h>

namespace inspection::metrics {
namespace {

using grpc::experimental::InterceptionHookPoints;

GrpcType TypeOf(grpc::experimental::ServerRpcInfo::Type type) {
  switch (type) {
    case grpc::experimental::ServerRpcInfo::Type::UNARY:
      return GrpcType::kUnary;
    case grpc::experimental::ServerRpcInfo::Type::CLIENT_STREAMING:
      return GrpcType::kClientStream;
    case grpc::experimental::ServerRpcInfo::Type::SERVER_STREAMING:
      return GrpcType::kServerStream;
    case grpc::experimental::ServerRpcInfo::Type::BIDI_STREAMING:
      return GrpcType::kBidiStream;
  }
  return GrpcType::kBidiStream;
}

// One per call; gRPC creates it when the call is matched and deletes it when the call is
// done. Intercept() may run concurrently for a read batch and a write batch of the same
// streaming call, so the only mutable state is atomic.
class MetricsInterceptor final : public grpc::experimental::Interceptor {
 public:
  // `stream` is set for the server-streaming RPCs counted in inspection_stream_subscribers.
  MetricsInterceptor(GrpcMethodMetrics& metrics, StreamRpcMetrics* stream, InFlightCalls* in_flight)
      : metrics_(metrics),
        stream_(stream),
        in_flight_(in_flight),
        start_(std::chrono::steady_clock::now()) {
    metrics_.RecordStarted();
    if (stream_ != nullptr) stream_->SubscriberStarted();
    if (in_flight_ != nullptr) in_flight_->Started();
  }

  ~MetricsInterceptor() override {
    if (!handled_.exchange(true)) {
      metrics_.RecordHandled(grpc::StatusCode::CANCELLED, Elapsed());
    }
    if (stream_ != nullptr) stream_->SubscriberEnded();
    if (in_flight_ != nullptr) in_flight_->Finished();
  }

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    // A failed read (the client half-closed, or the call died) also reaches
    // POST_RECV_MESSAGE, with no message: only real messages count.
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_MESSAGE) &&
        methods->GetRecvMessage() != nullptr) {
      metrics_.RecordMsgReceived();
    }
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_MESSAGE)) {
      metrics_.RecordMsgSent();
    }
    // For a unary call the response message and the status travel in the same batch, so
    // both hook points can be set at once; the message was counted above.
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS) &&
        !handled_.exchange(true)) {
      metrics_.RecordHandled(methods->GetSendStatus().error_code(), Elapsed());
    }
    methods->Proceed();
  }

 private:
  std::chrono::nanoseconds Elapsed() const { return std::chrono::steady_clock::now() - start_; }

  GrpcMethodMetrics& metrics_;
  StreamRpcMetrics* const stream_;
  InFlightCalls* const in_flight_;
  const std::chrono::steady_clock::time_point start_;
  std::atomic<bool> handled_{false};
};

}  // namespace

void InFlightCalls::Started() {
  absl::MutexLock lock(&mu_);
  ++count_;
}

void InFlightCalls::Finished() {
  absl::MutexLock lock(&mu_);
  --count_;
}

int64_t InFlightCalls::count() const {
  absl::MutexLock lock(&mu_);
  return count_;
}

bool InFlightCalls::WaitForNone(absl::Time deadline) const {
  absl::MutexLock lock(&mu_);
  const auto none = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return count_ <= 0; };
  return mu_.AwaitWithDeadline(absl::Condition(&none), deadline);
}

GrpcServerMetricsInterceptorFactory::GrpcServerMetricsInterceptorFactory(
    std::shared_ptr<GatewayMetrics> metrics, std::shared_ptr<InFlightCalls> in_flight)
    : metrics_(std::move(metrics)), in_flight_(std::move(in_flight)) {}

grpc::experimental::Interceptor* GrpcServerMetricsInterceptorFactory::CreateServerInterceptor(
    grpc::experimental::ServerRpcInfo* info) {
  const char* method = info->method();
  GrpcMethodMetrics& handles = metrics_->ForGrpcMethod(
      method == nullptr ? std::string_view() : std::string_view(method), TypeOf(info->type()));
  StreamRpcMetrics* stream = nullptr;
  if (info->type() == grpc::experimental::ServerRpcInfo::Type::SERVER_STREAMING &&
      method != nullptr) {
    const std::string_view full(method);
    const size_t slash = full.rfind('/');
    stream =
        metrics_->FindStreamRpc(slash == std::string_view::npos ? full : full.substr(slash + 1));
  }
  return new MetricsInterceptor(handles, stream, in_flight_.get());
}

}  // namespace inspection::metrics
