// For the metrics tests: every component's series created from one registry, as the
// server's MakeServerMetrics does, behind one handle so that a test can record into any
// family and read the exposition back. Test-only: the gateway itself has no such class.
#ifndef TESTS_METRICS_ALL_METRICS_H_
#define TESTS_METRICS_ALL_METRICS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gateway/metrics/grpc_server_metrics.h"
#include "gateway/metrics/metrics_registry.h"
#include "gateway/pipeline/pipeline_metrics.h"
#include "gateway/reconcile/reconcile_metrics.h"
#include "gateway/server/server_metrics.h"
#include "gateway/services/authz_metrics.h"
#include "gateway/streaming/hub_metrics.h"
#include "gateway/tracing/otlp_exporter.h"
#include "gateway/webhooks/webhook_metrics.h"

namespace inspection::metrics {

using pipeline::CircuitState;
using pipeline::CircuitStateGaugeValue;
using pipeline::CircuitStateLabel;
using pipeline::kNumStatusClasses;
using pipeline::RetryReason;
using pipeline::RouteMetrics;
using pipeline::StatusClass;
using pipeline::StatusClassLabel;
using pipeline::StatusClassOf;
using pipeline::UpstreamMetrics;
using streaming::StreamDropReason;
using streaming::StreamDropReasonLabel;

// The label sets of every component, as the server hands them out.
struct AllMetricsConfig {
  std::vector<std::string> routes;
  std::vector<GrpcMethodSpec> grpc_methods;
  std::vector<std::string> accounts;
  std::vector<std::string> upstreams;
  std::vector<std::string> stream_rpcs;
};

class AllMetrics {
 public:
  static absl::StatusOr<std::shared_ptr<AllMetrics>> Create(const AllMetricsConfig& config) {
    auto out = std::make_shared<AllMetrics>();
    out->registry_ = std::make_shared<MetricsRegistry>();
    const MetricsScope scope = out->registry_->scope();
    auto pipeline = pipeline::PipelineMetrics::Create(
        scope, {config.routes, config.accounts, config.upstreams});
    if (!pipeline.ok()) return pipeline.status();
    out->pipeline_ = *std::move(pipeline);
    auto grpc = GrpcServerMetrics::Create(scope, config.grpc_methods, config.stream_rpcs);
    if (!grpc.ok()) return grpc.status();
    out->grpc_ = *std::move(grpc);
    absl::Status built = Registering([&] {
      out->hub_ = std::make_unique<streaming::HubMetrics>(scope);
      out->reconcile_ = reconcile::ReconcileMetrics::Create(scope);
      out->tracing_ = tracing::OtlpExporterMetrics::Create(scope);
      out->webhook_ = std::make_unique<webhooks::WebhookMetrics>(scope);
      out->authz_ = std::make_unique<services::AuthzMetrics>(scope);
      out->transport_ = std::make_unique<server::TransportMetrics>(scope);
    });
    if (!built.ok()) return built;
    return out;
  }

  std::shared_ptr<MetricsRegistry> registry() const { return registry_; }
  std::vector<prometheus::MetricFamily> Collect() const { return registry_->Collect(); }
  MetricsScope scope() const { return registry_->scope(); }
  webhooks::WebhookMetrics& webhook() { return *webhook_; }
  GrpcServerMetrics& grpc() { return *grpc_; }
  std::shared_ptr<GrpcServerMetrics> grpc_shared() { return grpc_; }

  RouteMetrics& ForRoute(size_t route, size_t account = 0) {
    return pipeline_->ForRoute(route, account);
  }
  RouteMetrics& ForRouteLabel(std::string_view label, size_t account = 0) {
    return pipeline_->ForRouteLabel(label, account);
  }
  size_t AccountIndex(std::string_view account) const { return pipeline_->AccountIndex(account); }
  size_t route_count() const { return pipeline_->route_count(); }
  UpstreamMetrics& ForUpstream(size_t index) { return pipeline_->ForUpstream(index); }
  void RecordCacheEvictions(uint64_t count) { pipeline_->RecordCacheEvictions(count); }
  void SetCacheBytes(uint64_t bytes) { pipeline_->SetCacheBytes(bytes); }
  GrpcMethodMetrics& ForGrpcMethod(size_t index) { return grpc_->ForGrpcMethod(index); }
  GrpcMethodMetrics& ForGrpcMethod(std::string_view name, GrpcType type) {
    return grpc_->ForGrpcMethod(name, type);
  }
  StreamRpcMetrics& ForStreamRpc(size_t index) { return grpc_->ForStreamRpc(index); }
  void RecordFanoutLag(std::chrono::nanoseconds lag) { hub_->RecordFanoutLag(lag); }
  void SetCatchingUpSubscribers(size_t count) { hub_->SetCatchingUpSubscribers(count); }
  void RecordDroppedSubscriber(StreamDropReason reason) { hub_->RecordDroppedSubscriber(reason); }
  void RecordAuthzDenied(std::string_view method) { authz_->RecordDenied(method); }
  void SetUpstreamBufferedResponseBytes(uint64_t bytes) {
    transport_->buffered_response_bytes.Set(static_cast<double>(bytes));
  }
  void SetUpstreamBufferedResponseLimitBytes(uint64_t bytes) {
    transport_->buffered_response_limit_bytes.Set(static_cast<double>(bytes));
  }

 private:
  std::shared_ptr<MetricsRegistry> registry_;
  std::shared_ptr<pipeline::PipelineMetrics> pipeline_;
  std::shared_ptr<GrpcServerMetrics> grpc_;
  std::unique_ptr<streaming::HubMetrics> hub_;
  reconcile::ReconcileMetrics reconcile_;
  tracing::OtlpExporterMetrics tracing_;
  std::unique_ptr<webhooks::WebhookMetrics> webhook_;
  std::unique_ptr<services::AuthzMetrics> authz_;
  std::unique_ptr<server::TransportMetrics> transport_;
};

}  // namespace inspection::metrics

#endif  // TESTS_METRICS_ALL_METRICS_H_
