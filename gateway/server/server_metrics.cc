#include "gateway/server/server_metrics.h"

#include <string>
#include <utility>
#include <vector>

#include "gateway/routes/route_table.h"
#include "gateway/server/grpc_server.h"
#include "gateway/server/vendor_stub.h"

namespace inspection::server {

TransportMetrics::TransportMetrics(const metrics::MetricsScope& scope)
    : buffered_response_bytes(
          scope.Gauge("inspection_upstream_buffered_response_bytes",
                      "Bytes of answer bodies the vendor calls being read hold now (bounded by "
                      "upstream.max_buffered_response_bytes).")),
      buffered_response_limit_bytes(
          scope.Gauge("inspection_upstream_buffered_response_limit_bytes",
                      "upstream.max_buffered_response_bytes: what the answers being read may "
                      "hold together (0: unlimited).")) {}

IdempotencyStoreMetrics::IdempotencyStoreMetrics(const metrics::MetricsScope& scope)
    : errors(scope.Counter(
          "inspection_idempotency_store_errors_total",
          "Failures of the Redis idempotency store (idempotency_store): a keyed call answered "
          "UNAVAILABLE because Redis did not answer or a replica did not confirm its key, an "
          "outcome whose save failed (retried), a failed poll. Each is logged (rate-limited).")),
      unsaved_outcomes(scope.Gauge(
          "inspection_idempotency_unsaved_outcomes",
          "Outcomes of keyed calls (CreateToken, DetectDamage) answered but not yet saved in "
          "the Redis idempotency store: retried with backoff; their keys stay claimed, so a "
          "repeat on another replica gets ABORTED meanwhile, never a second vendor call.")) {}

absl::StatusOr<std::unique_ptr<ServerMetrics>> MakeServerMetrics(
    const GatewayServerOptions& options) {
  auto out = std::make_unique<ServerMetrics>();
  out->registry = std::make_shared<metrics::MetricsRegistry>();
  const metrics::MetricsScope scope = out->registry->scope();
  pipeline::PipelineMetricsConfig config;
  for (const routes::Route& route : routes::AllRoutes())
    config.routes.emplace_back(route.metric_label);
  config.accounts = {std::string(metrics::kDefaultAccountLabel)};
  config.upstreams = {"vendor"};
  for (const VendorAccountOptions& account : options.accounts) {
    config.accounts.push_back(account.name);
    config.upstreams.push_back(UpstreamLabel(account.name));
  }
  auto pipeline = pipeline::PipelineMetrics::Create(scope, config);
  if (!pipeline.ok()) return pipeline.status();
  out->pipeline = *std::move(pipeline);
  auto grpc = metrics::GrpcServerMetrics::Create(
      scope, PublicMethods(), {"Subscribe", "StreamDamageResults", "WatchTokenStatus"});
  if (!grpc.ok()) return grpc.status();
  out->grpc = *std::move(grpc);
  absl::Status built = metrics::Registering([&] {
    out->hub = std::make_unique<streaming::HubMetrics>(scope);
    out->reconcile = reconcile::ReconcileMetrics::Create(scope);
    out->tracing = tracing::OtlpExporterMetrics::Create(scope);
    out->webhook = std::make_unique<webhooks::WebhookMetrics>(scope);
    out->authz = std::make_unique<services::AuthzMetrics>(scope);
    out->transport = std::make_unique<TransportMetrics>(scope);
    out->idempotency = std::make_unique<IdempotencyStoreMetrics>(scope);
  });
  if (!built.ok()) return built;
  out->transport->buffered_response_limit_bytes.Set(
      static_cast<double>(options.max_buffered_response_bytes));
  return out;
}

}  // namespace inspection::server
