#ifndef GATEWAY_SERVER_GATEWAY_SERVER_H_
#define GATEWAY_SERVER_GATEWAY_SERVER_H_

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "adapters/eventlog/event_log.h"
#include "adapters/http/http_transport.h"
#include "adapters/vendor/request_validation.h"
#include "adapters/vendor/vendor_request.h"
#include "gateway/idempotency/idempotency_store.h"
#include "gateway/metrics/admin_server.h"
#include "gateway/metrics/gateway_metrics.h"
#include "gateway/metrics/grpc_server_metrics.h"
#include "gateway/pipeline/account_router.h"
#include "gateway/pipeline/caching_caller.h"
#include "gateway/pipeline/retrying_caller.h"
#include "gateway/reconcile/reconciler.h"
#include "gateway/routes/route_table.h"
#include "gateway/security/caller_limits.h"
#include "gateway/services/health_service.h"
#include "gateway/services/reflection_service.h"
#include "gateway/services/unary_call.h"
#include "gateway/streaming/event_hub.h"
#include "gateway/streaming/stream_slots.h"
#include "gateway/timers/scheduler.h"
#include "gateway/token_watch/token_status_poller.h"
#include "gateway/tracing/otlp_exporter.h"
#include "gateway/upstream/vendor_client.h"
#include "gateway/webhooks/webhook_receiver.h"

namespace inspection::server {

// A vendor account besides the default one (config `accounts`): calls select it with
// metadata `x-vendor-account: <name>`. Its webhooks are configured in
// GatewayServerOptions::webhook.accounts.
struct VendorAccountOptions {
  std::string name;      // [A-Za-z0-9._-]+, unique, not "default"
  std::string base_url;  // no trailing slash
  std::string api_key;   // sent as X-API-Key to base_url only
};

// Which HTTP client carries the vendor calls (config upstream.http_client).
enum class VendorHttpClient {
  // beast when every vendor base URL is http:// and no proxy variable (http_proxy,
  // all_proxy, either case) is set; curl otherwise.
  kAuto,
  // BeastTransport: HTTP/1.1 over a pool of kept-alive connections (TLS for https://), the
  // lowest overhead per call. No proxy, no HTTP/2.
  kBeast,
  // CurlTransport (libcurl): HTTP/2 over TLS where the vendor offers it (many calls on one
  // connection), libcurl's proxy variables.
  kCurl,
};

struct GatewayServerOptions;

// The client `options.http_client` stands for (kAuto resolved against the vendor URLs and
// the environment, read through `getenv`), with the reason in words for the start-up log.
struct HttpClientChoice {
  VendorHttpClient client = VendorHttpClient::kCurl;
  std::string reason;
};
HttpClientChoice ChooseHttpClient(const GatewayServerOptions& options,
                                  const char* (*getenv)(const char*) = nullptr);

// Everything the gateway process is built from; main() fills it from GatewayConfig,
// tests fill it directly.
// What one gRPC caller may make the server hold (config grpc.*).
struct GrpcServerLimits {
  // Largest request message; larger ones are refused by gRPC (RESOURCE_EXHAUSTED) before
  // they are parsed.
  int max_receive_message_bytes = 512 * 1024;
  // Streams (calls) open at once on one HTTP/2 connection.
  int max_concurrent_streams = 1000;
  // A client pinging more often than this (without data) gets GOAWAY after two strikes.
  int keepalive_min_client_interval_ms = 10000;
  // The server pings a connection idle this long, and closes it when no answer comes
  // within the timeout (a vanished client's streams end).
  int keepalive_time_ms = 60000;
  int keepalive_timeout_ms = 20000;
};

// TLS on the gRPC listener (config grpc.tls.*). Files are PEM, watched and reloaded
// every refresh interval without a restart (a rotated certificate is served from the next
// handshake on). No cert_file: plaintext.
struct GrpcTlsOptions {
  std::string cert_file;       // the server's certificate chain
  std::string key_file;        // its private key
  std::string client_ca_file;  // set: mTLS, every client must present a certificate it signs
  std::chrono::seconds refresh_interval{60};
  bool enabled() const { return !cert_file.empty(); }
};

// Recovering results whose webhook never came (config reconcile.*, webhook.mode): what
// the gateway started (damage submissions, tokens) is recorded in the work ledger and
// polled at the vendor when its webhook does not come (reconcile/reconciler.h).
struct ReconcileSettings {
  bool enabled = true;
  // after, interval, max_interval, budget, lease, max_age, ready_pointers, scan interval.
  // `webhook_less` and `owner` are set by the server.
  reconcile::ReconcilerOptions reconciler;
  // Where the work ledger lives: "sqlite:<path>" or "redis://..."; "" = beside the event
  // log (sqlite:<path> -> sqlite:<path>.work; a Redis event log's URL, keys
  // <stream>:work:*). An injected event log without an injected or configured ledger
  // turns reconciliation off.
  std::string ledger_url;
  std::shared_ptr<eventlog::WorkLedger> ledger;  // injected (tests, replicas in one process)
};

struct GatewayServerOptions {
  std::string grpc_addr = "0.0.0.0:50051";  // port 0: the OS picks one (see grpc_port())
  GrpcTlsOptions tls;
  // The authorization policy (security/authz_policy.h: gRPC's authz policy JSON), read now
  // and again every authz_refresh_interval. Empty: every caller may call everything.
  std::string authz_policy_file;
  std::chrono::seconds authz_refresh_interval{60};
  // Per-caller limits (grpc.per_caller.*): all 0 means none.
  security::CallerLimitsOptions caller_limits;
  GrpcServerLimits grpc_limits;
  // How often the gRPC health service's per-service status is brought up to date
  // (grpc.health_check_interval_ms): inspection.v1.EventService is NOT_SERVING while the
  // event log refuses writes.
  std::chrono::milliseconds health_check_interval{5000};
  // gRPC server reflection (grpc.reflection.v1 and v1alpha; services/reflection_service.h),
  // behind the authorization policy like every RPC.
  bool reflection = false;
  // The default vendor account (calls without `x-vendor-account`). Its attempt timeout,
  // deadline margin and clock apply to every account.
  upstream::VendorClientOptions vendor;
  // The named accounts; each gets its own client, circuit breaker, retry budget, token
  // poller and cache scope.
  std::vector<VendorAccountOptions> accounts;
  vendor::MapperOptions mapper;
  validation::ValidationLimits limits;
  std::string webapp_url;
  // Transport settings used when no transport is injected.
  VendorHttpClient http_client = VendorHttpClient::kAuto;
  std::chrono::milliseconds connect_timeout{2000};
  int max_connections = 1024;
  // PEM CAs trusted for an https:// vendor; empty: the system's bundle.
  std::string upstream_ca_file;
  // Largest answer (body; curl: head and body) one vendor call may read; larger fails it.
  size_t max_response_bytes = size_t{64} << 20;
  // Largest head (status line and headers) of one vendor answer; larger fails the call too.
  size_t max_response_head_bytes = size_t{64} << 10;
  // Header fields of one vendor answer (trailers and interim answers included); more fails
  // the call too.
  size_t max_response_header_count = 256;
  // Bodies all vendor calls being read may hold together (http/response_budget.h); a call
  // whose answer would cross it fails. 0: unlimited.
  size_t max_buffered_response_bytes = size_t{256} << 20;
  // Each answer's first bytes, which may use the whole budget; the bytes past them may hold
  // three quarters of it, so a few huge answers cannot refuse the small ones.
  size_t guaranteed_response_bytes = size_t{64} << 10;
  // Injected transport (tests); when null the server builds the one http_client names.
  std::shared_ptr<http::HttpTransport> transport;
  // Told about every finished RPC; null for none. Must outlive the server.
  services::RpcObserver* observer = nullptr;
  // Span export (tracing.*): off while tracing.endpoint is "". Every call carries W3C trace
  // context either way (traceparent to the vendor, trace_id on log lines, x-trace-id).
  tracing::OtlpExporterOptions tracing;
  // Injected span sink (tests): used instead of an exporter. Must outlive the server.
  tracing::SpanSink* span_sink = nullptr;
  // Lines per second about refused calls (log.rejected_lines_per_second), with a count of
  // the suppressed ones; the webhook receiver's rejected deliveries take
  // webhook.rejected_lines_per_second from this too.
  double rejected_log_lines_per_second = 10;

  // The event log: injected (tests, replicas in one process) or opened from the URL
  // ("sqlite:<path>" or "redis://...").
  std::shared_ptr<eventlog::EventLog> event_log;
  std::string event_log_url = "sqlite:inspection-events.db";
  eventlog::RetentionPolicy retention;
  streaming::EventHub::Options hub;
  // streams.queue_size, streams.queue_max_bytes.
  streaming::StreamQueueLimits stream_queue;
  // streams.max_per_connection, streams.max_total.
  streaming::StreamSlotOptions stream_slots;
  // The webhook receiver, started when webhook.current_key is set and webhook_less is off.
  webhooks::WebhookReceiverOptions webhook;
  // webhook.mode "poll": no webhook receiver; streams are fed by polling what this gateway
  // started (reconcile). Also the mode when no webhook key is set.
  bool webhook_less = false;
  ReconcileSettings reconcile;
  // WatchTokenStatus polling.
  token_watch::TokenStatusPollerOptions token_watch;
  // How long the first outcome of an idempotency key is kept.
  absl::Duration idempotency_ttl = absl::Hours(24);
  // Bound of the in-memory idempotency store (idempotency.max_bytes).
  size_t idempotency_memory_max_bytes = size_t{64} << 20;
  // "memory" or "redis://..." (config key idempotency_store).
  std::string idempotency_store_url = "memory";
  // Admin HTTP endpoint: /metrics, /healthz, /readyz. Port 0: any free port; -1: off.
  std::string admin_host = "0.0.0.0";
  int admin_port = 9464;
  // Retries and circuit breaking around every vendor call (one breaker and one budget
  // per vendor account, all with these settings).
  pipeline::RetryOptions retry;
  resilience::RetryBudgetConfig retry_budget;
  resilience::CircuitBreakerConfig circuit_breaker;
  // The response cache above the retry loop (metrics, clock and account scopes are
  // filled in by Start).
  pipeline::CachingOptions cache;
};

// Opens "sqlite:<path>" or "redis://..." (config key event_log).
absl::StatusOr<std::unique_ptr<eventlog::EventLog>> OpenEventLog(
    const std::string& url, const eventlog::RetentionPolicy& retention);
// The longest a reconciler poll's vendor call may take: its deadline, the timeout of the
// GET damagesReport or token status route (retries happen within it; upstream.timeout_ms
// only shortens each attempt). A lease must outlast it, or a second replica claims and
// polls an item whose poll is still in flight: config refuses a reconcile.lease_ms that
// is not longer.
// Inline (gateway_routes only): the config loader checks against it, and the config fuzzer
// builds that loader without the rest of the server.
inline absl::Duration ReconcilePollDeadline() {
  // The deadline BackgroundCall gives ReportFetch's and TokenFetch's calls.
  return absl::FromChrono(std::max(routes::GetRoute(routes::RouteId::kGetDamagesReport).timeout,
                                   routes::GetRoute(routes::RouteId::kGetTokenStatus).timeout));
}
// Opens the work ledger at `ledger_url`, or beside the event log at `event_log_url` when it
// is empty (ReconcileSettings::ledger_url).
absl::StatusOr<std::unique_ptr<eventlog::WorkLedger>> OpenWorkLedger(
    const std::string& ledger_url, const std::string& event_log_url);

// The composition root: builds transport -> vendor client -> services -> gRPC server
// (with the health service and server reflection), and owns them all.
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
  int webhook_port() const { return receiver_ == nullptr ? 0 : receiver_->port(); }
  const webhooks::WebhookReceiver* receiver() const { return receiver_.get(); }
  streaming::EventHub& hub() { return *hub_; }
  // Server streams open now (each holds a slot of streams.max_total until it is done).
  size_t open_streams() const { return stream_slots_ == nullptr ? 0 : stream_slots_->open(); }
  // The request pipeline every RPC goes through.
  upstream::VendorCaller& vendor() { return *pipeline_; }
  // What the services use (the pipeline, idempotency, observer): for calls through the
  // call core from outside a service (webhook registration at start-up).
  const services::ServiceDeps& deps() const { return deps_; }
  // The WatchTokenStatus poller, circuit breaker and retry budget of a vendor account
  // ("" = the default one). The account must exist.
  const token_watch::TokenStatusPoller& token_poller(const std::string& account = "") const {
    return *Account(account).poller;
  }
  resilience::CircuitBreaker& circuit_breaker(const std::string& account = "") {
    return *Account(account).breaker;
  }
  resilience::RetryBudgetStats retry_budget_stats(const std::string& account = "") const {
    return Account(account).budget->Stats();
  }
  // The admin endpoint's port; 0 when it is off.
  int admin_port() const { return admin_ == nullptr ? 0 : admin_->port(); }
  const pipeline::CachingCaller& cache() const { return *caching_; }
  eventlog::EventLog& event_log() { return *event_log_; }
  // The reconciler; null when reconciliation is off.
  reconcile::Reconciler* reconciler() { return reconciler_.get(); }
  // Whether streams are fed by polling alone (webhook.mode poll, or no webhook key).
  bool webhook_less() const { return webhook_less_; }

  // Stops accepting calls, reports NOT_SERVING, lets in-flight calls finish for up to
  // `grace`, then fails the ones still waiting on the vendor with UNAVAILABLE.
  // Idempotent; also run by the destructor with a zero grace.
  void Shutdown(std::chrono::milliseconds grace);

 private:
  // The part of the pipeline that is per vendor account: below the cache, which is
  // shared and scoped by each account's API key hash.
  struct AccountPipeline {
    std::string name;  // "" for the default account
    std::unique_ptr<upstream::VendorClient> client;
    std::unique_ptr<resilience::RetryBudget> budget;
    std::unique_ptr<resilience::CircuitBreaker> breaker;
    std::unique_ptr<pipeline::RetryingCaller> retrying;
    std::unique_ptr<token_watch::TokenStatusPoller> poller;
  };

  explicit GatewayServer(GatewayServerOptions options);
  // Builds client, budget, breaker and retry loop of one account; `upstream_index` is
  // its position in the metrics' `upstream` label values.
  absl::Status AddAccount(const std::string& name, upstream::VendorClientOptions vendor,
                          size_t upstream_index);
  const AccountPipeline& Account(const std::string& name) const;
  // Copies the webhook receiver's counters into the Prometheus metrics (per scrape).
  void SyncReceiverMetrics();
  // The same for the reconciler's.
  void SyncReconcileMetrics();
  // The same for the span exporter's.
  void SyncTracingMetrics();
  // Opens the ledger and starts the reconciler (ReconcileSettings).
  absl::Status StartReconciler();

  GatewayServerOptions options_;
  std::shared_ptr<http::HttpTransport> transport_;
  // The default account first, then the named ones in configuration order.
  std::vector<std::unique_ptr<AccountPipeline>> accounts_;
  std::unique_ptr<pipeline::AccountRouter> router_;
  // The outermost caller of the pipeline: cache -> account router -> retry loop and
  // breaker of the account -> its vendor client.
  upstream::VendorCaller* pipeline_ = nullptr;
  std::shared_ptr<eventlog::EventLog> event_log_;
  std::unique_ptr<streaming::EventHub> hub_;
  std::unique_ptr<webhooks::WebhookReceiver> receiver_;
  std::unique_ptr<timers::TimerThreadScheduler> scheduler_;
  std::unique_ptr<pipeline::IdempotencyStore> idempotency_;
  std::unique_ptr<pipeline::CachingCaller> caching_;
  // The OTLP span exporter; null when tracing.otlp_endpoint is not set.
  std::unique_ptr<tracing::OtlpExporter> exporter_;
  tracing::SpanSink* spans_ = nullptr;  // exporter_ or the injected sink
  std::unique_ptr<logging::LineRateLimiter> refused_call_lines_;
  absl::Mutex tracing_metrics_mu_;
  tracing::OtlpExporter::Stats tracing_reported_ ABSL_GUARDED_BY(tracing_metrics_mu_);
  // Receiver counters already copied into the metrics (see SyncReceiverMetrics).
  absl::Mutex receiver_metrics_mu_;
  webhooks::WebhookReceiverStats receiver_reported_ ABSL_GUARDED_BY(receiver_metrics_mu_);
  http::HttpServerStats receiver_http_reported_ ABSL_GUARDED_BY(receiver_metrics_mu_);
  std::shared_ptr<eventlog::WorkLedger> ledger_;
  std::unique_ptr<reconcile::Reconciler> reconciler_;
  bool webhook_less_ = false;
  // Keeps EventService's health status in step with the event log (StartHealthChecks).
  void StartHealthChecks();
  absl::Mutex health_mu_;
  bool health_stop_ ABSL_GUARDED_BY(health_mu_) = false;
  std::thread health_thread_;
  absl::Mutex reconcile_metrics_mu_;
  reconcile::Reconciler::Stats reconcile_reported_ ABSL_GUARDED_BY(reconcile_metrics_mu_);
  std::shared_ptr<metrics::GatewayMetrics> metrics_;
  std::unique_ptr<metrics::AdminServer> admin_;
  std::unique_ptr<services::RpcObserver> metrics_observer_;
  std::unique_ptr<security::AuthzPolicyWatcher> authz_;
  std::shared_ptr<security::CallerLimiter> limiter_;
  std::shared_ptr<streaming::StreamSlots> stream_slots_;
  services::ServiceDeps deps_;
  std::vector<std::unique_ptr<grpc::Service>> services_;
  // grpc.health.v1.Health, and server reflection when options.reflection is on (null
  // otherwise): registered after services_, destroyed after the server.
  std::unique_ptr<services::HealthService> health_;
  std::unique_ptr<services::ReflectionService> reflection_;
  // Calls in flight, so that Shutdown does not wait for idle client connections.
  std::shared_ptr<metrics::InFlightCalls> in_flight_;
  std::unique_ptr<grpc::Server> server_;
  int grpc_port_ = 0;
  bool shut_down_ = false;
};

}  // namespace inspection::server

#endif  // GATEWAY_SERVER_GATEWAY_SERVER_H_
