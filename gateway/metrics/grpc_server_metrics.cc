#include "gateway/metrics/grpc_server_metrics.h"

#include <set>

#include "absl/strings/str_cat.h"

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
    std::shared_ptr<GrpcServerMetrics> metrics, std::shared_ptr<InFlightCalls> in_flight)
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

// --- GrpcServerMetrics -----------------------------------------------------------------------

namespace {

constexpr std::array<std::string_view, kNumGrpcTypes> kGrpcTypeLabels = {
    "unary", "client_stream", "server_stream", "bidi_stream"};
// Go's codes.Code.String(), which is what go-grpc-prometheus puts in grpc_code; dashboards
// and alerts written for it match on these exact strings (note "Canceled").
constexpr std::array<std::string_view, kNumGrpcCodes> kGrpcCodeLabels = {
    "OK",       "Canceled",       "Unknown",          "InvalidArgument",   "DeadlineExceeded",
    "NotFound", "AlreadyExists",  "PermissionDenied", "ResourceExhausted", "FailedPrecondition",
    "Aborted",  "OutOfRange",     "Unimplemented",    "Internal",          "Unavailable",
    "DataLoss", "Unauthenticated"};

absl::Status CheckMethods(const std::vector<GrpcMethodSpec>& methods) {
  std::set<std::string> full_names;
  for (const GrpcMethodSpec& spec : methods) {
    if (absl::Status s = CheckLabelValues("grpc_methods.service", {spec.service}); !s.ok()) {
      return s;
    }
    if (absl::Status s = CheckLabelValues("grpc_methods.method", {spec.method}); !s.ok()) {
      return s;
    }
    if (static_cast<size_t>(spec.type) >= kNumGrpcTypes) {
      return absl::InvalidArgumentError(
          absl::StrCat("grpc_methods: bad type for ", spec.service, "/", spec.method));
    }
    if (!full_names.insert(absl::StrCat("/", spec.service, "/", spec.method)).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("grpc_methods: duplicate method ", spec.service, "/", spec.method));
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::string_view GrpcTypeLabel(GrpcType type) {
  const size_t i = static_cast<size_t>(type);
  return i < kNumGrpcTypes ? kGrpcTypeLabels[i] : kOtherLabel;
}

std::string_view GrpcCodeLabel(grpc::StatusCode code) {
  const auto index = static_cast<size_t>(code);
  return index < kNumGrpcCodes ? kGrpcCodeLabels[index] : kGrpcCodeLabels[2];  // Unknown
}

void GrpcMethodMetrics::RecordStarted() { started_->Increment(); }

void GrpcMethodMetrics::RecordHandled(grpc::StatusCode code, std::chrono::nanoseconds elapsed) {
  const auto index = static_cast<size_t>(code);
  handled_[index < kNumGrpcCodes ? index : 2]->Increment();  // 2: Unknown
  handling_seconds_->Observe(Seconds(elapsed));
}

void GrpcMethodMetrics::RecordMsgSent() { msg_sent_->Increment(); }
void GrpcMethodMetrics::RecordMsgReceived() { msg_received_->Increment(); }

void StreamRpcMetrics::SubscriberStarted() { subscribers_->Increment(); }
void StreamRpcMetrics::SubscriberEnded() { subscribers_->Decrement(); }

absl::StatusOr<std::shared_ptr<GrpcServerMetrics>> GrpcServerMetrics::Create(
    const MetricsScope& scope, const std::vector<GrpcMethodSpec>& methods,
    const std::vector<std::string>& stream_rpcs) {
  if (absl::Status s = CheckLabelValues("stream_rpcs", stream_rpcs); !s.ok()) return s;
  if (absl::Status s = CheckMethods(methods); !s.ok()) return s;
  std::shared_ptr<GrpcServerMetrics> metrics(new GrpcServerMetrics());
  absl::Status built = Registering([&] {
    metrics->BuildMethods(scope, methods);
    metrics->BuildStreams(scope, stream_rpcs);
  });
  if (!built.ok()) return built;
  return metrics;
}

void GrpcServerMetrics::BuildMethods(const MetricsScope& scope,
                                     const std::vector<GrpcMethodSpec>& methods) {
  // go-grpc-prometheus names and help texts.
  auto& started = scope.CounterFamily("grpc_server_started_total",
                                      "Total number of RPCs started on the server.");
  auto& handled = scope.CounterFamily(
      "grpc_server_handled_total",
      "Total number of RPCs completed on the server, regardless of success or failure.");
  auto& handling = scope.HistogramFamily(
      "grpc_server_handling_seconds",
      "Histogram of response latency (seconds) of gRPC that had been application-level handled "
      "by the server.");
  auto& msg_sent = scope.CounterFamily("grpc_server_msg_sent_total",
                                       "Total number of gRPC stream messages sent by the server.");
  auto& msg_received =
      scope.CounterFamily("grpc_server_msg_received_total",
                          "Total number of RPC stream messages received on the server.");
  auto make = [&](std::string_view service, std::string_view method, GrpcType type) {
    const prometheus::Labels labels = {{"grpc_type", std::string(GrpcTypeLabel(type))},
                                       {"grpc_service", std::string(service)},
                                       {"grpc_method", std::string(method)}};
    GrpcMethodMetrics m;
    m.started_ = &started.Add(labels);
    for (size_t code = 0; code < kNumGrpcCodes; ++code) {
      prometheus::Labels with_code = labels;
      with_code.emplace("grpc_code", std::string(kGrpcCodeLabels[code]));
      m.handled_[code] = &handled.Add(with_code);
    }
    m.handling_seconds_ = &handling.Add(labels, LatencyBuckets());
    m.msg_sent_ = &msg_sent.Add(labels);
    m.msg_received_ = &msg_received.Add(labels);
    return m;
  };
  grpc_methods_.reserve(methods.size());
  for (const GrpcMethodSpec& spec : methods) {
    grpc_method_index_.emplace(absl::StrCat("/", spec.service, "/", spec.method),
                               grpc_methods_.size());
    grpc_methods_.push_back(make(spec.service, spec.method, spec.type));
  }
  for (size_t t = 0; t < kNumGrpcTypes; ++t) {
    grpc_other_[t] = make(kOtherLabel, kOtherLabel, static_cast<GrpcType>(t));
  }
}

void GrpcServerMetrics::BuildStreams(const MetricsScope& scope,
                                     const std::vector<std::string>& rpcs) {
  auto& subscribers = scope.GaugeFamily("inspection_stream_subscribers",
                                        "Server streams currently delivering events, by RPC.");
  stream_rpcs_.reserve(rpcs.size() + 1);
  stream_rpc_names_ = rpcs;
  for (const std::string& rpc : rpcs) {
    StreamRpcMetrics m;
    m.subscribers_ = &subscribers.Add({{"rpc", rpc}});
    stream_rpcs_.push_back(m);
  }
  StreamRpcMetrics other;
  other.subscribers_ = &subscribers.Add({{"rpc", std::string(kOtherLabel)}});
  stream_rpcs_.push_back(other);
}

GrpcMethodMetrics& GrpcServerMetrics::ForGrpcMethod(size_t index) {
  if (index < grpc_methods_.size()) return grpc_methods_[index];
  return grpc_other_[static_cast<size_t>(GrpcType::kUnary)];
}

GrpcMethodMetrics& GrpcServerMetrics::ForGrpcMethod(std::string_view full_method, GrpcType type) {
  const auto it = grpc_method_index_.find(full_method);
  if (it != grpc_method_index_.end()) return grpc_methods_[it->second];
  const size_t t = static_cast<size_t>(type);
  return grpc_other_[t < kNumGrpcTypes ? t : static_cast<size_t>(GrpcType::kBidiStream)];
}

StreamRpcMetrics* GrpcServerMetrics::FindStreamRpc(std::string_view rpc) {
  for (size_t i = 0; i < stream_rpc_names_.size(); ++i) {
    if (stream_rpc_names_[i] == rpc) return &stream_rpcs_[i];
  }
  return nullptr;
}

StreamRpcMetrics& GrpcServerMetrics::ForStreamRpc(size_t rpc_index) {
  const size_t other = stream_rpcs_.size() - 1;
  return stream_rpcs_[rpc_index < other ? rpc_index : other];
}

}  // namespace inspection::metrics
