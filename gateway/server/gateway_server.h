#ifndef GATEWAY_SERVER_GATEWAY_SERVER_H_
#define GATEWAY_SERVER_GATEWAY_SERVER_H_

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "gateway/idempotency/idempotency_store.h"
#include "gateway/metrics/admin_server.h"
#include "gateway/metrics/grpc_server_metrics.h"
#include "gateway/server/event_pipeline.h"
#include "gateway/server/grpc_server.h"
#include "gateway/server/server_metrics.h"
#include "gateway/server/server_options.h"
#include "gateway/server/vendor_stub.h"
#include "gateway/timers/scheduler.h"

namespace inspection::server {

// The composition root: builds the decorated vendor stub (vendor_stub.h), the event
// pipeline (event_pipeline.h), the services and the gRPC server (grpc_server.h) and the
// admin endpoint; owns them all and orders their start and shutdown.
class GatewayServer {
 public:
  // Builds and starts serving. Fails when the address cannot be bound or the
  // transport cannot be created.
  static absl::StatusOr<std::unique_ptr<GatewayServer>> Start(GatewayServerOptions options);
  ~GatewayServer();

  GatewayServer(const GatewayServer&) = delete;
  GatewayServer& operator=(const GatewayServer&) = delete;

  int grpc_port() const { return grpc_port_; }
  // The webhook receiver's port; 0 when it is not running (no webhook key).
  int webhook_port() const { return events_.receiver == nullptr ? 0 : events_.receiver->port(); }
  const webhooks::WebhookReceiver* receiver() const { return events_.receiver.get(); }
  streaming::EventHub& hub() { return *events_.hub; }
  // Server streams open now (each holds a slot of streams.max_total until it is done).
  size_t open_streams() const { return stream_slots_ == nullptr ? 0 : stream_slots_->open(); }
  // The request pipeline every RPC goes through.
  upstream::VendorCaller& vendor() { return *vendor_.caching; }
  // What the services use (the pipeline, idempotency, observer): for calls through the
  // call core from outside a service (webhook registration at start-up).
  const services::ServiceDeps& deps() const { return deps_; }
  // The WatchTokenStatus poller, circuit breaker and retry budget of a vendor account
  // ("" = the default one). The account must exist.
  const token_watch::TokenStatusPoller& token_poller(const std::string& account = "") const {
    return *vendor_.Account(account).poller;
  }
  resilience::CircuitBreaker& circuit_breaker(const std::string& account = "") {
    return *vendor_.Account(account).breaker;
  }
  resilience::RetryBudgetStats retry_budget_stats(const std::string& account = "") const {
    return vendor_.Account(account).budget->Stats();
  }
  // The admin endpoint's port; 0 when it is off.
  int admin_port() const { return admin_ == nullptr ? 0 : admin_->port(); }
  const pipeline::CachingCaller& cache() const { return *vendor_.caching; }
  eventlog::EventLog& event_log() { return *events_.log; }
  // The reconciler; null when reconciliation is off.
  reconcile::Reconciler* reconciler() { return events_.reconciler.get(); }
  // Whether streams are fed by polling alone (webhook.mode poll, or no webhook key).
  bool webhook_less() const { return events_.webhook_less; }

  // Stops accepting calls, reports NOT_SERVING, lets in-flight calls finish for up to
  // `grace`, then fails the ones still waiting on the vendor with UNAVAILABLE.
  // Idempotent; also run by the destructor with a zero grace.
  void Shutdown(std::chrono::milliseconds grace);

 private:
  explicit GatewayServer(GatewayServerOptions options);
  // The span exporter when tracing.otlp_endpoint is set, or the injected sink.
  absl::Status MakeSpanSink();
  // Registers what is read into the metrics on each scrape (the transport's buffered bytes:
  // a gauge of bytes the transport counts as they come and go).
  void InstallCollectHook();
  // Shutdown's first half: no new webhooks, streams, polls or keyed calls (each subsystem
  // stops taking work; what it holds is written or ended with a resumable status).
  void StopIntake();
  // Fills deps_: each account's token poller, the idempotency store, the stream limits,
  // the per-caller limits and the authorization policy.
  absl::Status WireServiceDeps();
  // The admin endpoint (/metrics, /healthz, /readyz) unless admin_port is -1.
  absl::Status StartAdmin();
  // Keeps EventService's health status in step with the event log.
  void StartHealthChecks();

  GatewayServerOptions options_;
  std::shared_ptr<http::HttpTransport> transport_;
  // Every component's series, created whether or not the component runs (the families
  // exist at zero).
  std::unique_ptr<ServerMetrics> metrics_;
  std::unique_ptr<timers::TimerThreadScheduler> scheduler_;
  // The OTLP span exporter; null when tracing.otlp_endpoint is not set.
  std::unique_ptr<tracing::OtlpExporter> exporter_;
  tracing::SpanSink* spans_ = nullptr;  // exporter_ or the injected sink
  VendorStub vendor_;
  EventPipeline events_;
  std::unique_ptr<pipeline::IdempotencyStore> idempotency_;
  std::unique_ptr<logging::LineRateLimiter> refused_call_lines_;
  std::unique_ptr<services::RpcObserver> metrics_observer_;
  std::unique_ptr<security::AuthzPolicyWatcher> authz_;
  std::shared_ptr<security::CallerLimiter> limiter_;
  std::shared_ptr<streaming::StreamSlots> stream_slots_;
  services::ServiceDeps deps_;
  std::unique_ptr<services::Endpoints> endpoints_;  // every route's, reading deps_
  // Registered with the server, destroyed after it.
  GrpcServices grpc_services_;
  // Calls in flight, so that Shutdown does not wait for idle client connections.
  std::shared_ptr<metrics::InFlightCalls> in_flight_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<metrics::AdminServer> admin_;
  int grpc_port_ = 0;
  bool shut_down_ = false;

  absl::Mutex health_mu_;
  bool health_stop_ ABSL_GUARDED_BY(health_mu_) = false;
  std::thread health_thread_;
};

}  // namespace inspection::server

#endif  // GATEWAY_SERVER_GATEWAY_SERVER_H_
