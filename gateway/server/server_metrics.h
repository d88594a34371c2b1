#ifndef GATEWAY_SERVER_SERVER_METRICS_H_
#define GATEWAY_SERVER_SERVER_METRICS_H_

// The components' series, each created by its component from the one registry's scope at
// start-up (docs/design.md §7). This struct only owns them for the server's lifetime; it
// records nothing and knows none of their label sets beyond what it hands them (the route
// table's labels, the configured accounts, the public methods).

#include <memory>

#include <prometheus/counter.h>
#include <prometheus/gauge.h>

#include "absl/status/statusor.h"
#include "gateway/metrics/grpc_server_metrics.h"
#include "gateway/metrics/metrics_registry.h"
#include "gateway/pipeline/pipeline_metrics.h"
#include "gateway/reconcile/reconcile_metrics.h"
#include "gateway/server/server_options.h"
#include "gateway/services/authz_metrics.h"
#include "gateway/streaming/hub_metrics.h"
#include "gateway/tracing/otlp_exporter.h"
#include "gateway/webhooks/webhook_metrics.h"

namespace inspection::server {

// The vendor transport's response byte budget, as gauges: what the answers being read hold
// now (read from the transport on each scrape) against upstream.max_buffered_response_bytes.
struct TransportMetrics {
  explicit TransportMetrics(const metrics::MetricsScope& scope);
  prometheus::Gauge& buffered_response_bytes;
  prometheus::Gauge& buffered_response_limit_bytes;
};

// The idempotency store's trouble (a Redis store): failures, and outcomes waiting to be
// saved (read from the store on each scrape).
struct IdempotencyStoreMetrics {
  explicit IdempotencyStoreMetrics(const metrics::MetricsScope& scope);
  prometheus::Counter& errors;
  prometheus::Gauge& unsaved_outcomes;
};

struct ServerMetrics {
  std::shared_ptr<metrics::MetricsRegistry> registry;
  std::shared_ptr<pipeline::PipelineMetrics> pipeline;
  std::shared_ptr<metrics::GrpcServerMetrics> grpc;
  std::unique_ptr<streaming::HubMetrics> hub;
  reconcile::ReconcileMetrics reconcile;
  tracing::OtlpExporterMetrics tracing;
  std::unique_ptr<webhooks::WebhookMetrics> webhook;
  std::unique_ptr<services::AuthzMetrics> authz;
  std::unique_ptr<TransportMetrics> transport;
  std::unique_ptr<IdempotencyStoreMetrics> idempotency;
};

// Every component's series, from bounded label sets: the route table's metric labels,
// "default" and the configured accounts (and their breakers' `upstream` labels), the public
// gRPC methods and the three stream RPCs. Fails on a label set a component refuses.
absl::StatusOr<std::unique_ptr<ServerMetrics>> MakeServerMetrics(
    const GatewayServerOptions& options);

}  // namespace inspection::server

#endif  // GATEWAY_SERVER_SERVER_METRICS_H_
