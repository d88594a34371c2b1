#ifndef GATEWAY_SERVER_SERVER_OPTIONS_H_
#define GATEWAY_SERVER_SERVER_OPTIONS_H_

// What GatewayServer (gateway_server.h) is built from: one struct of every subsystem's
// options, and the choice of the vendor HTTP client.

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "adapters/eventlog/event_log.h"
#include "adapters/http/http_transport.h"
#include "adapters/redis/redis_connection.h"
#include "adapters/vendor/request_validation.h"
#include "adapters/vendor/vendor_request.h"
#include "gateway/pipeline/caching_caller.h"
#include "gateway/pipeline/retrying_caller.h"
#include "gateway/reconcile/reconciler.h"
#include "gateway/security/caller_limits.h"
#include "gateway/services/unary_call.h"
#include "gateway/streaming/event_hub.h"
#include "gateway/streaming/stream_slots.h"
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

// Everything the gateway process is built from. The config loader fills it through each
// component's declared keys (server_settings.h); tests fill it directly.
// idempotency_store's value for "where the event log is": its Redis when event_log is a
// Redis URL (the same server or sentinels, credentials and db), else memory.
inline constexpr char kIdempotencyStoreEventLog[] = "event_log";

// The idempotency store URL `idempotency_store` stands for, given `event_log`.
std::string ResolveIdempotencyStoreUrl(const std::string& idempotency_store,
                                       const std::string& event_log);

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
  // Bound of the in-memory idempotency store, and of the outcomes a Redis one has not
  // saved yet (idempotency.max_bytes).
  size_t idempotency_memory_max_bytes = size_t{64} << 20;
  // A Redis idempotency store's begin threads and the begins that may wait for them
  // (idempotency.redis_threads, idempotency.max_queued_begins).
  int idempotency_redis_threads = 4;
  int idempotency_max_queued_begins = 1024;
  // "memory", "redis://...", "redis+sentinel://..." or kIdempotencyStoreEventLog (config key
  // idempotency_store).
  std::string idempotency_store_url = "memory";
  // What every Redis-backed store (event log, ledger, idempotency store) does with the
  // primary (redis.*): the sentinels' password, replicas an acknowledged write waits for.
  redis::RedisOptions redis;
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

// The client `options.http_client` stands for (kAuto resolved against the vendor URLs and
// the environment, read through `getenv`), with the reason in words for the start-up log.
struct HttpClientChoice {
  VendorHttpClient client = VendorHttpClient::kCurl;
  std::string reason;
};
HttpClientChoice ChooseHttpClient(const GatewayServerOptions& options,
                                  const char* (*getenv)(const char*) = nullptr);

}  // namespace inspection::server

#endif  // GATEWAY_SERVER_SERVER_OPTIONS_H_
