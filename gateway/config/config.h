// Configuration of the inspection-gateway process.
//
// Sources, lowest to highest precedence:
//   built-in defaults < config file (--config / INSPECTION_CONFIG) < environment < flags.
//
// Every setting has one config-file key (sections nest: "upstream.timeout_ms" is
// {"upstream": {"timeout_ms": ...}}), and is derived from it:
//   flag: "--" + key with '.' and '_' turned into '-'        --upstream-timeout-ms
//   env:  "INSPECTION_" + key upper-cased, '.' turned to '_'   INSPECTION_UPSTREAM_TIMEOUT_MS
// All of them are described by one table in config.cc, which drives file parsing, env and flag
// parsing, validation, the dump and the --help text: adding a setting is one field here plus one
// row there.
//
// Flag and env values are text: integers in decimal; lists as comma-separated items or as a
// JSON array ("[\"/a\",\"/b,c\"]"). An env variable set to the empty string counts as unset.
//
// Secrets come only from a file or the environment, never from the config file or a flag: the
// vendor API key is read from the file named by `api_key_file` or, when none is configured, from
// env INSPECTION_API_KEY.
//
// Errors are absl::InvalidArgumentError whose message names the offending key in config-file
// spelling (and the flag, env variable or file it came from). Messages never contain a secret.

#ifndef INSPECTION_GATEWAY_CONFIG_CONFIG_H_
#define INSPECTION_GATEWAY_CONFIG_CONFIG_H_

#include <chrono>
#include <cmath>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "adapters/vendor/vendor_request.h"
#include "gateway/config/secret.h"
#include "gateway/logging/log.h"
#include "gateway/server/gateway_server.h"

namespace inspection::config {

// The components' own defaults. Every setting a component uses starts from the value that
// component declares in its options struct (GatewayServerOptions and what it holds), so a
// default is written once; the config only adds the key, its bounds and its documentation.
// Settings that belong to the process alone (log level, shutdown grace, sandbox, addresses of
// the vendor) are declared here.
const server::GatewayServerOptions& ComponentDefaults();

// upstream.*: the vendor leg.
struct UpstreamSection {
  // upstream.timeout_ms (default 30000, > 0): upper bound on one vendor attempt. Each
  // route has its own timeout (its vendor_route annotation); longer ones are clamped.
  absl::Duration timeout = absl::FromChrono(ComponentDefaults().vendor.max_attempt_timeout);
  // upstream.connect_timeout_ms (default 2000, > 0): TCP + TLS connect timeout.
  absl::Duration connect_timeout = absl::FromChrono(ComponentDefaults().connect_timeout);
  // upstream.max_connections (default 1024, >= 1): cap on open connections to the vendor.
  int max_connections = ComponentDefaults().max_connections;
  // upstream.ca_file (default ""): PEM CAs trusted for an https:// vendor; "": the system's.
  std::string ca_file = ComponentDefaults().upstream_ca_file;
  // upstream.http_client (default "auto"): the HTTP client of vendor calls, beast or curl
  // (server::VendorHttpClient); auto picks beast for http:// vendors without a proxy.
  server::VendorHttpClient http_client = ComponentDefaults().http_client;
  // upstream.max_json_depth (default 512, 1-10000): deepest nesting of objects and arrays
  // accepted in a vendor answer; deeper: VENDOR_MALFORMED_RESPONSE.
  int max_json_depth = ComponentDefaults().vendor.max_json_depth;
  // upstream.max_json_elements (default 250,000, >= 1): most JSON values in a vendor
  // answer; more: VENDOR_RESPONSE_TOO_LARGE.
  int64_t max_json_elements = ComponentDefaults().vendor.max_json_elements;
  // upstream.max_response_bytes (default 64 MiB, >= 1024): the largest answer one vendor
  // call may read; larger: VENDOR_RESPONSE_TOO_LARGE, not retried.
  int64_t max_response_bytes = static_cast<int64_t>(ComponentDefaults().max_response_bytes);
  // upstream.max_response_head_bytes (default 64 KiB): the largest head (status line and
  // headers) of a vendor answer; larger: VENDOR_RESPONSE_TOO_LARGE.
  int64_t max_response_head_bytes =
      static_cast<int64_t>(ComponentDefaults().max_response_head_bytes);
  // upstream.max_response_header_count (default 256): header fields of a vendor answer
  // (trailers and interim answers included); more: VENDOR_RESPONSE_TOO_LARGE.
  int64_t max_response_header_count =
      static_cast<int64_t>(ComponentDefaults().max_response_header_count);
  // upstream.max_buffered_response_bytes (default 256 MiB, 0 = unlimited): the bodies all
  // vendor calls being read may hold together; a call whose answer would cross it fails.
  int64_t max_buffered_response_bytes =
      static_cast<int64_t>(ComponentDefaults().max_buffered_response_bytes);
  // upstream.guaranteed_response_bytes (default 64 KiB, 0 = none): each answer's first bytes
  // may use the whole budget above; the bytes past them three quarters of it.
  int64_t guaranteed_response_bytes =
      static_cast<int64_t>(ComponentDefaults().guaranteed_response_bytes);
};

struct BackgroundRemovalSection {
  // background_removal.position_ratio_key (default "both"): manualTopLeftPositionRatio
  // (singular) and/or manualTopLeftPositionRatios (plural).
  vendor::KeySpelling position_ratio_key = ComponentDefaults().mapper.position_ratio_key;
  // background_removal.wheel_box_key (default "both"): wheelBox (singular) and/or wheelsBox
  // (plural).
  vendor::KeySpelling wheel_box_key = ComponentDefaults().mapper.wheel_box_key;
};

struct TestWebhookSection {
  // test_webhook.params_in (default "query"): where TestWebhook's eventName and inspectionId
  // go; the vendor spec does not show it.
  vendor::ParamsPlacement params_in = ComponentDefaults().mapper.test_webhook_params;
};

struct DamageSection {
  // damage.inspection_id_pointers (default ["/inspectionId", "/data/inspectionId",
  // "/inspection/id", "/id"]): RFC 6901 pointers tried in order to find the inspection id in a
  // damage-detection webhook body. At least one; each starts with '/'.
  std::vector<std::string> inspection_id_pointers =
      ComponentDefaults().mapper.inspection_id_pointers;
};

struct SearchSection {
  // search.max_limit (default 100, >= 1): largest page size a search may request.
  int max_limit = ComponentDefaults().limits.search_max_limit;
};

// validation.*: bounds on requests, checked before any vendor call.
struct ValidationSection {
  int max_urls = ComponentDefaults().limits.max_urls;  // URLs per call in the list RPCs
};

// Whether a feature is on: "auto" decides by the mode (see the key).
enum class Toggle { kAuto, kOn, kOff };

// grpc.tls.*: TLS (and mTLS) on the gRPC listener, from PEM files reloaded without restart.
struct GrpcTlsSection {
  std::string cert_file;
  std::string key_file;
  std::string client_ca_file;
  int refresh_interval_seconds = static_cast<int>(ComponentDefaults().tls.refresh_interval.count());
};

// grpc.*: the gRPC listener's limits, TLS, and reflection.
struct GrpcSection {
  GrpcTlsSection tls;
  std::string authz_policy_file;  // the authorization policy; empty: none
  int authz_refresh_interval_seconds =
      static_cast<int>(ComponentDefaults().authz_refresh_interval.count());
  absl::Duration health_check_interval =
      absl::FromChrono(ComponentDefaults().health_check_interval);
  // grpc.per_caller.*: limits per caller identity (or address), local to the replica; 0: off
  // (burst 0: one second's worth).
  int per_caller_requests_per_second =
      static_cast<int>(ComponentDefaults().caller_limits.requests_per_second);
  int per_caller_burst = ComponentDefaults().caller_limits.burst;
  int per_caller_max_streams = ComponentDefaults().caller_limits.max_streams;
  int64_t per_caller_max_tracked_callers =
      static_cast<int64_t>(ComponentDefaults().caller_limits.max_tracked_callers);
  int max_receive_message_bytes = ComponentDefaults().grpc_limits.max_receive_message_bytes;
  int max_concurrent_streams = ComponentDefaults().grpc_limits.max_concurrent_streams;
  absl::Duration keepalive_min_client_interval =
      absl::Milliseconds(ComponentDefaults().grpc_limits.keepalive_min_client_interval_ms);
  absl::Duration keepalive_time =
      absl::Milliseconds(ComponentDefaults().grpc_limits.keepalive_time_ms);
  absl::Duration keepalive_timeout =
      absl::Milliseconds(ComponentDefaults().grpc_limits.keepalive_timeout_ms);
  Toggle reflection = Toggle::kAuto;  // auto: on with --sandbox, else off
};

struct LogSection {
  // log.level (default "info"; "debug" | "info" | "warn" | "error"): lines below are dropped.
  logging::Level level = logging::Level::kInfo;
  // log.rejected_lines_per_second (default 10; 0: none): lines about refused calls and
  // rejected webhook deliveries, whose number outside input decides.
  int rejected_lines_per_second =
      static_cast<int>(ComponentDefaults().rejected_log_lines_per_second);
};

struct ShutdownSection {
  // shutdown.grace_ms (default 10000, >= 0): how long in-flight RPCs get after SIGTERM.
  absl::Duration grace = absl::Milliseconds(10000);
};

// webhook.*: the vendor-facing webhook receiver, the one Internet-facing port. Every
// resource a client can make it hold has a limit here (README, "Webhook ingress limits").
struct WebhookSection {
  std::string path = ComponentDefaults().webhook.path;
  int max_body_bytes = static_cast<int>(ComponentDefaults().webhook.limits.max_body_bytes);
  absl::Duration head_timeout = absl::FromChrono(ComponentDefaults().webhook.limits.head_timeout);
  absl::Duration keep_alive_timeout =
      absl::FromChrono(ComponentDefaults().webhook.limits.keep_alive_timeout);
  int64_t min_body_bytes_per_second =
      static_cast<int64_t>(ComponentDefaults().webhook.limits.min_body_bytes_per_second);
  absl::Duration body_grace = absl::FromChrono(ComponentDefaults().webhook.limits.body_grace);
  absl::Duration write_timeout = absl::FromChrono(ComponentDefaults().webhook.limits.write_timeout);
  int max_head_bytes = static_cast<int>(ComponentDefaults().webhook.limits.max_head_bytes);
  int max_header_count = static_cast<int>(ComponentDefaults().webhook.limits.max_header_count);
  int max_connections = static_cast<int>(ComponentDefaults().webhook.limits.max_connections);
  int max_connections_per_client =
      static_cast<int>(ComponentDefaults().webhook.limits.max_connections_per_client);
  int max_requests_in_flight =
      static_cast<int>(ComponentDefaults().webhook.limits.max_requests_in_flight);
  int max_json_depth = ComponentDefaults().webhook.json_limits.max_depth;
  int max_json_elements = static_cast<int>(ComponentDefaults().webhook.json_limits.max_elements);
  // Deliveries with the same content within this window are one event (stored once).
  int dedupe_window_hours = static_cast<int>(
      std::chrono::duration_cast<std::chrono::hours>(ComponentDefaults().retention.dedupe_window)
          .count());
  int threads = ComponentDefaults().webhook.threads;
  // RFC 6901 pointers into the webhook body (defaults fit the spec's createReport body).
  std::string event_name_pointer = ComponentDefaults().webhook.event_name_pointer;
  std::string inspection_id_pointer = ComponentDefaults().webhook.inspection_id_pointer;
  std::string token_id_pointer = ComponentDefaults().webhook.token_id_pointer;
  std::string vehicle_id_pointer = ComponentDefaults().webhook.vehicle_id_pointer;
};

// event_log_retention.*: retention of the event log.
struct EventLogRetentionSection {
  int max_age_hours = static_cast<int>(
      std::chrono::duration_cast<std::chrono::hours>(ComponentDefaults().retention.max_age)
          .count());
  int max_events = static_cast<int>(ComponentDefaults().retention.max_events);
};

// streams.*: server-streaming RPCs.
struct StreamsSection {
  // Events buffered per subscriber before it is dropped, and their memory, per stream.
  int queue_size = static_cast<int>(ComponentDefaults().stream_queue.max_events);
  int64_t queue_max_bytes = static_cast<int64_t>(ComponentDefaults().stream_queue.max_bytes);
  int catchup_events_per_turn = static_cast<int>(ComponentDefaults().hub.catchup_events_per_turn);
  absl::Duration catchup_idle_timeout =
      absl::FromChrono(ComponentDefaults().hub.catchup_idle_timeout);
  int max_per_connection = ComponentDefaults().stream_slots.max_per_connection;  // 0: no limit
  int max_total = ComponentDefaults().stream_slots.max_total;                    // 0: no limit
  // The largest request a server stream holds for its life (StreamDamageResults: beyond its
  // URLs); larger: INVALID_ARGUMENT.
  int64_t max_request_bytes =
      static_cast<int64_t>(ComponentDefaults().stream_slots.max_request_bytes);
};

// token_watch.*: WatchTokenStatus polling.
struct TokenWatchSection {
  absl::Duration interval = ComponentDefaults().token_watch.interval;
  absl::Duration max_backoff = ComponentDefaults().token_watch.max_backoff;
};

// reconcile.*: recovering damage results whose webhook never came, and webhook-less mode
// (README, "Lost webhooks and webhook-less mode").
struct ReconcileSection {
  bool enabled = ComponentDefaults().reconcile.enabled;
  absl::Duration after = ComponentDefaults().reconcile.reconciler.after;
  absl::Duration interval = ComponentDefaults().reconcile.reconciler.interval;
  absl::Duration max_interval = ComponentDefaults().reconcile.reconciler.max_interval;
  int max_polls_per_minute = ComponentDefaults().reconcile.reconciler.max_polls_per_minute;
  int max_polls_per_item = ComponentDefaults().reconcile.reconciler.max_polls_per_item;
  absl::Duration lease = ComponentDefaults().reconcile.reconciler.lease;
  int max_age_hours =
      static_cast<int>(absl::ToInt64Hours(ComponentDefaults().reconcile.reconciler.max_age));
  std::vector<std::string> ready_pointers = ComponentDefaults().reconcile.reconciler.ready_pointers;
  absl::Duration scan_interval = ComponentDefaults().reconcile.reconciler.scan_interval;
  // "" = beside the event log.
  std::string ledger = ComponentDefaults().reconcile.ledger_url;
};

// tracing.*: exporting spans over OTLP/HTTP JSON (gateway/tracing/otlp_exporter.h). Trace
// context (traceparent to the vendor, trace_id on log lines) works without it.
struct TracingSection {
  // "" (default): spans are not exported.
  std::string otlp_endpoint = ComponentDefaults().tracing.endpoint;
  int max_queued_spans = static_cast<int>(ComponentDefaults().tracing.max_queued_spans);
  int max_batch_spans = static_cast<int>(ComponentDefaults().tracing.max_batch_spans);
  absl::Duration export_interval = absl::FromChrono(ComponentDefaults().tracing.export_interval);
  absl::Duration export_timeout = absl::FromChrono(ComponentDefaults().tracing.export_timeout);
};

// webhook.mode: where stream events come from.
enum class WebhookMode {
  kWebhook,  // the vendor's webhooks (the receiver runs when a webhook key is set)
  kPoll,     // no receiver: polling what this gateway started (reconcile.*)
};

// retry.*: the retry loop around every vendor call (safe and idempotent routes only).
struct RetrySection {
  absl::Duration base =
      ComponentDefaults().retry.backoff.base;  // first backoff ceiling (full jitter)
  absl::Duration cap = ComponentDefaults().retry.backoff.cap;         // largest backoff ceiling
  int max_attempts = ComponentDefaults().retry.backoff.max_attempts;  // the first included
  absl::Duration min_attempt = ComponentDefaults().retry.min_attempt_time;  // no shorter attempt
};

// retry_budget.*: retries in flight at most percent% of requests in flight, at least min.
struct RetryBudgetSection {
  int percent = static_cast<int>(std::lround(ComponentDefaults().retry_budget.ratio * 100));
  int min_retries = static_cast<int>(ComponentDefaults().retry_budget.min_retries);
};

// circuit_breaker.*: one breaker per vendor account.
struct CircuitBreakerSection {
  int consecutive_failures = ComponentDefaults().circuit_breaker.consecutive_failures;
  int failure_ratio_percent =
      static_cast<int>(std::lround(ComponentDefaults().circuit_breaker.failure_ratio * 100));
  int minimum_requests = ComponentDefaults().circuit_breaker.minimum_requests;
  absl::Duration window = ComponentDefaults().circuit_breaker.bucket_width *
                          ComponentDefaults().circuit_breaker.window_buckets;
  absl::Duration open = ComponentDefaults().circuit_breaker.open_duration;
  absl::Duration max_open = ComponentDefaults().circuit_breaker.max_open_duration;
};

// cache.*: the response cache.
struct CacheSection {
  bool enabled = ComponentDefaults().cache.enabled;
  int64_t max_bytes = static_cast<int64_t>(ComponentDefaults().cache.max_bytes);
  absl::Duration stale_if_error = ComponentDefaults().cache.stale_if_error;
  bool image_analysis = ComponentDefaults().cache.image_analysis;
  // 0: each image-analysis RPC's own cache_ttl_ms (its vendor_route annotation).
  absl::Duration image_analysis_ttl =
      ComponentDefaults().cache.image_analysis_ttl.value_or(absl::ZeroDuration());
};

// accounts.<name>: a named vendor account (production and pre-production, say), selected
// per call with gRPC metadata `x-vendor-account: <name>`. The default account (upstream_url,
// api_key_file, webhook_key_file) is used when a call names none.
struct VendorAccountConfig {
  // 1..64 of [A-Za-z0-9._-]; not "default" (reserved).
  std::string name;
  // Required; absolute http(s), normalised like upstream_url (NormalizeBaseUrl).
  std::string upstream_url;
  // Required: the file holding the account's vendor API key (only from a file).
  std::string api_key_file;
  // Read from api_key_file, trailing whitespace trimmed; non-empty.
  Secret api_key;
  // Optional: the file holding the x-api-key the vendor sends with this account's webhooks.
  std::string webhook_key_file;
  Secret webhook_key;
  // Optional, only together with webhook_key_file: the previous key, during a rotation.
  std::string webhook_previous_key_file;
  Secret webhook_previous_key;
  // Default "/webhooks/v2/<name>"; an absolute path like webhook.path.
  std::string webhook_path;
  // Optional: the public webhook URL registered at this account on start-up (same rules as
  // register_webhook); "" when not set.
  std::string register_webhook;
};

struct GatewayConfig {
  // sandbox (default false, flag --sandbox): run the vendor emulator in-process as the
  // upstream; upstream_url, webapp_url and the API key then come from it.
  bool sandbox = false;
  // upstream_url (required; --upstream-url): base URL of the vendor REST API, absolute
  // http(s), stored without a trailing '/'.
  std::string upstream_url;
  // api_key_file (default none; --api-key-file): file holding the vendor API key; trailing
  // whitespace is trimmed. A relative path is relative to the working directory.
  std::string api_key_file;
  // The vendor API key (required, non-empty): from `api_key_file` or, when that is not set,
  // env INSPECTION_API_KEY. Never printed: use Reveal() only where it is sent.
  Secret api_key;
  // accounts (default none; --accounts, env INSPECTION_ACCOUNTS as JSON object text): the named
  // vendor accounts next to the default one. A later source replaces the whole object. Their
  // secrets are read from their files like api_key; their webhook paths are unique and differ
  // from webhook.path, and no two accounts (the default one included) share a webhook key.
  std::vector<VendorAccountConfig> accounts;  // sorted by name; empty by default
  // webapp_url (required; --webapp-url): base address of the customer web application,
  // absolute http(s), stored without a trailing '/'.
  std::string webapp_url;
  // grpc_addr (default "0.0.0.0:50051"; --grpc-addr): gRPC listen address, HOST:PORT.
  std::string grpc_addr = ComponentDefaults().grpc_addr;
  // webhook_addr (default "0.0.0.0:8080"; --webhook-addr): webhook receiver listen address.
  std::string webhook_addr =
      absl::StrCat(ComponentDefaults().webhook.host, ":", ComponentDefaults().webhook.port);
  // admin_addr (default "0.0.0.0:9464"; --admin-addr): metrics/admin listen address.
  std::string admin_addr =
      absl::StrCat(ComponentDefaults().admin_host, ":", ComponentDefaults().admin_port);

  UpstreamSection upstream;
  BackgroundRemovalSection background_removal;
  TestWebhookSection test_webhook;
  DamageSection damage;
  SearchSection search;
  ValidationSection validation;
  GrpcSection grpc;
  LogSection log;
  ShutdownSection shutdown;

  WebhookSection webhook;
  // event_log (default "sqlite:inspection-events.db"): "sqlite:<path>" or
  // "redis://[:password@]host:port[/db][?stream=name]" (replicas share it).
  std::string event_log = ComponentDefaults().event_log_url;
  EventLogRetentionSection event_log_retention;
  StreamsSection streams;
  TokenWatchSection token_watch;
  ReconcileSection reconcile;
  TracingSection tracing;
  // webhook.mode (default "webhook"): "poll" runs no webhook receiver; streams are then fed
  // by polling. Without a webhook key the gateway polls in either mode.
  WebhookMode webhook_mode =
      ComponentDefaults().webhook_less ? WebhookMode::kPoll : WebhookMode::kWebhook;
  // idempotency.ttl_hours (default 24): how long CreateToken/DetectDamage idempotency keys
  // remember their first outcome (in memory).
  int idempotency_ttl_hours =
      static_cast<int>(absl::ToInt64Hours(ComponentDefaults().idempotency_ttl));
  // idempotency.max_bytes (default 64 MiB): memory the in-memory store may hold.
  int64_t idempotency_max_bytes =
      static_cast<int64_t>(ComponentDefaults().idempotency_memory_max_bytes);
  // idempotency_store (default "memory"): "memory" or "redis://..." (shared by replicas).
  std::string idempotency_store = ComponentDefaults().idempotency_store_url;
  RetrySection retry;
  RetryBudgetSection retry_budget;
  CircuitBreakerSection circuit_breaker;
  CacheSection cache;
  // register_webhook (default none): the gateway's public webhook URL; when set, the
  // gateway registers it (and the webhook key) at the vendor on start-up and enables
  // register_webhook_events.
  std::string register_webhook;
  std::vector<std::string> register_webhook_events = {
      "newInspection",    "detectionFinished", "createReport",  "shareUpdatedReport",
      "deleteInspection", "tradeinVehicle",    "chaseUpVehicle"};
  // The key the vendor sends in `x-api-key` with each webhook (file or env
  // INSPECTION_WEBHOOK_KEY), and the previous one during a rotation. Without a key the
  // webhook receiver is not started.
  std::string webhook_key_file;
  Secret webhook_key;
  std::string webhook_previous_key_file;
  Secret webhook_previous_key;

  // Not settings: what the command line asked for.
  // The config file that was read (--config or INSPECTION_CONFIG); empty if none.
  std::string config_file;
  // --print-config was given: the caller should print DumpConfig() and exit 0.
  bool print_config = false;
};

// Looks up an environment variable; std::nullopt when unset. Injected so tests need no real env.
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;

// Reads env through ::getenv.
std::optional<std::string> GetEnvFromProcess(const std::string& name);

// Builds the configuration from `args` (argv[1..]), the file named by --config (or env
// INSPECTION_CONFIG), env looked up through `getenv`, and the defaults; then validates it and
// reads the API key.
//
// Flags take `--name=value` or `--name value`; boolean flags (--print-config) take no value.
// `--help` / `-h` anywhere: returns absl::CancelledError(UsageText()); test for it with
// IsHelpRequest(). Every other failure is an InvalidArgumentError naming the key or flag.
absl::StatusOr<GatewayConfig> LoadConfig(const std::vector<std::string>& args,
                                         const EnvLookup& getenv);

// True if `status` is LoadConfig's answer to --help: print status.message() to stdout, exit 0.
bool IsHelpRequest(const absl::Status& status);
// True if `status` is LoadConfig's answer to --version (anywhere on the command line, like
// --help): print version::VersionText() to stdout, exit 0.
bool IsVersionRequest(const absl::Status& status);

// The --help text: every flag with its config-file key, env variable and default.
std::string UsageText();

enum class DumpFormat { kMultiLine, kSingleLine };

// The effective configuration as JSON, shaped like a config file; secrets show "[redacted]"
// ("[unset]" when empty). kMultiLine for --print-config, kSingleLine for a log field.
std::string DumpConfig(const GatewayConfig& config, DumpFormat format = DumpFormat::kMultiLine);

// Single-line dump; also what gtest prints for a GatewayConfig.
std::ostream& operator<<(std::ostream& os, const GatewayConfig& config);

// Registers every secret of `config` with `logger` for redaction. Call once at start-up.
void RegisterSecrets(const GatewayConfig& config,
                     logging::Logger& logger = logging::DefaultLogger());

}  // namespace inspection::config

#endif  // INSPECTION_GATEWAY_CONFIG_CONFIG_H_
