#include "gateway/app/server_options.h"

#include <chrono>
#include <string>
#include <utility>

#include "absl/time/time.h"
#include "gateway/config/value_checks.h"
#include "gateway/version/version.h"

namespace inspection::app {

namespace {

// The vendor accounts' URLs and keys, the HTTP client and its limits, the codec's assumptions.
void CopyVendor(const config::GatewayConfig& config, server::GatewayServerOptions& options) {
  options.grpc_addr = config.grpc_addr;
  options.vendor.base_url = config.upstream_url;
  options.vendor.api_key = config.api_key.Reveal();
  options.vendor.max_attempt_timeout =
      std::chrono::milliseconds(absl::ToInt64Milliseconds(config.upstream.timeout));
  options.webapp_url = config.webapp_url;
  options.connect_timeout =
      std::chrono::milliseconds(absl::ToInt64Milliseconds(config.upstream.connect_timeout));
  options.max_connections = config.upstream.max_connections;
  options.upstream_ca_file = config.upstream.ca_file;
  options.http_client = config.upstream.http_client;
  options.vendor.max_json_depth = config.upstream.max_json_depth;
  options.vendor.max_json_elements = config.upstream.max_json_elements;
  options.max_response_bytes = static_cast<size_t>(config.upstream.max_response_bytes);
  options.max_response_head_bytes = static_cast<size_t>(config.upstream.max_response_head_bytes);
  options.max_response_header_count =
      static_cast<size_t>(config.upstream.max_response_header_count);
  options.max_buffered_response_bytes =
      static_cast<size_t>(config.upstream.max_buffered_response_bytes);
  options.guaranteed_response_bytes =
      static_cast<size_t>(config.upstream.guaranteed_response_bytes);
  options.mapper.position_ratio_key = config.background_removal.position_ratio_key;
  options.mapper.wheel_box_key = config.background_removal.wheel_box_key;
  options.mapper.test_webhook_params = config.test_webhook.params_in;
  options.mapper.inspection_id_pointers = config.damage.inspection_id_pointers;
  options.limits.search_max_limit = config.search.max_limit;
  options.limits.max_urls = config.validation.max_urls;
}

// The gRPC listener, its policy and limits, and the admin endpoint.
void CopyGrpc(const config::GatewayConfig& config, server::GatewayServerOptions& options) {
  options.tls.cert_file = config.grpc.tls.cert_file;
  options.tls.key_file = config.grpc.tls.key_file;
  options.tls.client_ca_file = config.grpc.tls.client_ca_file;
  options.tls.refresh_interval = std::chrono::seconds(config.grpc.tls.refresh_interval_seconds);
  options.authz_policy_file = config.grpc.authz_policy_file;
  options.caller_limits.requests_per_second = config.grpc.per_caller_requests_per_second;
  options.caller_limits.burst = config.grpc.per_caller_burst;
  options.caller_limits.max_streams = config.grpc.per_caller_max_streams;
  options.caller_limits.max_tracked_callers =
      static_cast<size_t>(config.grpc.per_caller_max_tracked_callers);
  options.authz_refresh_interval = std::chrono::seconds(config.grpc.authz_refresh_interval_seconds);
  options.health_check_interval = absl::ToChronoMilliseconds(config.grpc.health_check_interval);
  options.grpc_limits.max_receive_message_bytes = config.grpc.max_receive_message_bytes;
  options.grpc_limits.max_concurrent_streams = config.grpc.max_concurrent_streams;
  options.grpc_limits.keepalive_min_client_interval_ms =
      static_cast<int>(absl::ToInt64Milliseconds(config.grpc.keepalive_min_client_interval));
  options.grpc_limits.keepalive_time_ms =
      static_cast<int>(absl::ToInt64Milliseconds(config.grpc.keepalive_time));
  options.grpc_limits.keepalive_timeout_ms =
      static_cast<int>(absl::ToInt64Milliseconds(config.grpc.keepalive_timeout));
  options.reflection = config.grpc.reflection == config::Toggle::kOn ||
                       (config.grpc.reflection == config::Toggle::kAuto && config.sandbox);

  {
    config::HostAndPort admin = config::SplitHostPort(config.admin_addr);  // validated
    options.admin_host = std::move(admin.host);
    options.admin_port = admin.port;
  }
}

// The event log, the streams and idempotency.
void CopyEvents(const config::GatewayConfig& config, server::GatewayServerOptions& options) {
  options.event_log_url = config.event_log;
  options.retention.max_age = std::chrono::hours(config.event_log_retention.max_age_hours);
  options.retention.max_events = config.event_log_retention.max_events;
  options.retention.dedupe_window = std::chrono::hours(config.webhook.dedupe_window_hours);
  options.stream_queue.max_events = static_cast<size_t>(config.streams.queue_size);
  options.stream_queue.max_bytes = static_cast<size_t>(config.streams.queue_max_bytes);
  options.hub.catchup_events_per_turn = static_cast<size_t>(config.streams.catchup_events_per_turn);
  options.hub.catchup_idle_timeout =
      absl::ToChronoMilliseconds(config.streams.catchup_idle_timeout);
  options.stream_slots.max_per_connection = config.streams.max_per_connection;
  options.stream_slots.max_total = config.streams.max_total;
  options.stream_slots.max_request_bytes = static_cast<size_t>(config.streams.max_request_bytes);
  options.idempotency_ttl = absl::Hours(config.idempotency_ttl_hours);
  options.idempotency_memory_max_bytes = static_cast<size_t>(config.idempotency_max_bytes);
  options.idempotency_store_url = config.idempotency_store;
}

// Retries, the retry budget, the circuit breaker and the cache.
void CopyResilience(const config::GatewayConfig& config, server::GatewayServerOptions& options) {
  options.retry.backoff.base = config.retry.base;
  options.retry.backoff.cap = config.retry.cap;
  options.retry.backoff.max_attempts = config.retry.max_attempts;
  options.retry.min_attempt_time = config.retry.min_attempt;
  options.retry_budget.ratio = config.retry_budget.percent / 100.0;
  options.retry_budget.min_retries = config.retry_budget.min_retries;
  options.circuit_breaker.consecutive_failures = config.circuit_breaker.consecutive_failures;
  options.circuit_breaker.failure_ratio = config.circuit_breaker.failure_ratio_percent / 100.0;
  options.circuit_breaker.minimum_requests = config.circuit_breaker.minimum_requests;
  options.circuit_breaker.bucket_width =
      config.circuit_breaker.window / options.circuit_breaker.window_buckets;
  options.circuit_breaker.open_duration = config.circuit_breaker.open;
  options.circuit_breaker.max_open_duration = config.circuit_breaker.max_open;
  options.cache.enabled = config.cache.enabled;
  options.cache.max_bytes = static_cast<size_t>(config.cache.max_bytes);
  options.cache.stale_if_error = config.cache.stale_if_error;
  options.cache.image_analysis = config.cache.image_analysis;
  if (config.cache.image_analysis_ttl > absl::ZeroDuration()) {
    options.cache.image_analysis_ttl = config.cache.image_analysis_ttl;
  }
}

// Reconciliation, log rate, tracing, the webhook mode and the token watch.
void CopyReconcileAndTracing(const config::GatewayConfig& config,
                             server::GatewayServerOptions& options) {
  options.reconcile.enabled = config.reconcile.enabled;
  options.reconcile.reconciler.after = config.reconcile.after;
  options.reconcile.reconciler.interval = config.reconcile.interval;
  options.reconcile.reconciler.max_interval = config.reconcile.max_interval;
  options.reconcile.reconciler.max_polls_per_minute = config.reconcile.max_polls_per_minute;
  options.reconcile.reconciler.max_polls_per_item = config.reconcile.max_polls_per_item;
  options.reconcile.reconciler.lease = config.reconcile.lease;
  options.reconcile.reconciler.max_age = absl::Hours(config.reconcile.max_age_hours);
  options.reconcile.reconciler.ready_pointers = config.reconcile.ready_pointers;
  options.reconcile.reconciler.scan_interval = config.reconcile.scan_interval;
  options.reconcile.ledger_url = config.reconcile.ledger;
  options.rejected_log_lines_per_second = config.log.rejected_lines_per_second;
  options.tracing.endpoint = config.tracing.otlp_endpoint;
  options.tracing.max_queued_spans = static_cast<size_t>(config.tracing.max_queued_spans);
  options.tracing.max_batch_spans = static_cast<size_t>(config.tracing.max_batch_spans);
  options.tracing.export_interval = absl::ToChronoMilliseconds(config.tracing.export_interval);
  options.tracing.export_timeout = absl::ToChronoMilliseconds(config.tracing.export_timeout);
  options.tracing.service_version = std::string(version::Version());
  options.webhook_less = config.webhook_mode == config::WebhookMode::kPoll;
  options.token_watch.interval = config.token_watch.interval;
  options.token_watch.max_backoff = config.token_watch.max_backoff;
}

// The webhook receiver (when the default account has a key), the named vendor accounts and
// their webhooks.
void CopyWebhooks(const config::GatewayConfig& config, server::GatewayServerOptions& options) {
  if (!config.webhook_key.empty()) {
    auto& webhook = options.webhook;
    config::HostAndPort listen = config::SplitHostPort(config.webhook_addr);  // validated
    webhook.host = std::move(listen.host);
    webhook.port = listen.port;
    webhook.path = config.webhook.path;
    webhook.current_key = config.webhook_key.Reveal();
    webhook.previous_key = config.webhook_previous_key.Reveal();
    const config::WebhookSection& w = config.webhook;
    http::HttpServerLimits& limits = webhook.limits;
    limits.head_timeout = absl::ToChronoMilliseconds(w.head_timeout);
    limits.keep_alive_timeout = absl::ToChronoMilliseconds(w.keep_alive_timeout);
    limits.min_body_bytes_per_second = static_cast<uint64_t>(w.min_body_bytes_per_second);
    limits.body_grace = absl::ToChronoMilliseconds(w.body_grace);
    limits.write_timeout = absl::ToChronoMilliseconds(w.write_timeout);
    limits.max_head_bytes = static_cast<size_t>(w.max_head_bytes);
    limits.max_header_count = static_cast<size_t>(w.max_header_count);
    limits.max_body_bytes = static_cast<size_t>(w.max_body_bytes);
    limits.max_connections = static_cast<size_t>(w.max_connections);
    limits.max_connections_per_client = static_cast<size_t>(w.max_connections_per_client);
    limits.max_requests_in_flight = static_cast<size_t>(w.max_requests_in_flight);
    webhook.json_limits.max_depth = w.max_json_depth;
    webhook.json_limits.max_elements = w.max_json_elements;
    webhook.threads = w.threads;
    webhook.event_name_pointer = config.webhook.event_name_pointer;
    webhook.inspection_id_pointer = config.webhook.inspection_id_pointer;
    webhook.token_id_pointer = config.webhook.token_id_pointer;
    webhook.vehicle_id_pointer = config.webhook.vehicle_id_pointer;
  }
  for (const config::VendorAccountConfig& account : config.accounts) {
    options.accounts.push_back({account.name, account.upstream_url, account.api_key.Reveal()});
    // The config refuses account webhook keys without the default one (which starts the
    // receiver); an account without a key receives no webhooks.
    if (!account.webhook_key.empty() && !config.webhook_key.empty()) {
      options.webhook.accounts.push_back({account.name, account.webhook_path,
                                          account.webhook_key.Reveal(),
                                          account.webhook_previous_key.Reveal()});
    }
  }
}

}  // namespace

server::GatewayServerOptions ServerOptions(const config::GatewayConfig& config) {
  server::GatewayServerOptions options;
  CopyVendor(config, options);
  CopyGrpc(config, options);
  CopyEvents(config, options);
  CopyResilience(config, options);
  CopyReconcileAndTracing(config, options);
  CopyWebhooks(config, options);
  return options;
}

}  // namespace inspection::app
