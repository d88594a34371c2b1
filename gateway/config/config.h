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

#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gateway/config/secret.h"
#include "gateway/logging/log.h"

namespace inspection::config {

// Which spelling(s) of a vendor JSON key the gateway sends, where the vendor documentation and
// its examples disagree.
enum class KeySpelling {
  kSingular,  // config value "singular"
  kPlural,    // config value "plural"
  kBoth,      // config value "both": send both spellings with the same value
};

// Where TestWebhook's eventName and inspectionId go in the vendor request.
enum class ParamsIn {
  kQuery,  // config value "query"
  kBody,   // config value "body" (JSON body)
};

struct UpstreamOptions {
  // upstream.timeout_ms (default 30000, > 0): upper bound on one vendor attempt. Each
  // route has its own timeout (gateway/routes/route_table.cc); longer ones are clamped.
  absl::Duration timeout = absl::Milliseconds(30000);
  // upstream.connect_timeout_ms (default 2000, > 0): TCP + TLS connect timeout.
  absl::Duration connect_timeout = absl::Milliseconds(2000);
  // upstream.max_connections (default 1024, >= 1): cap on open connections to the vendor.
  int max_connections = 1024;
};

struct BackgroundRemovalOptions {
  // background_removal.position_ratio_key (default "both"): manualTopLeftPositionRatio
  // (singular) and/or manualTopLeftPositionRatios (plural).
  KeySpelling position_ratio_key = KeySpelling::kBoth;
  // background_removal.wheel_box_key (default "both"): wheelBox (singular) and/or wheelsBox
  // (plural).
  KeySpelling wheel_box_key = KeySpelling::kBoth;
};

struct TestWebhookOptions {
  // test_webhook.params_in (default "query"): where TestWebhook's eventName and inspectionId
  // go; the vendor spec does not show it.
  ParamsIn params_in = ParamsIn::kQuery;
};

struct DamageOptions {
  // damage.inspection_id_pointers (default ["/inspectionId", "/data/inspectionId",
  // "/inspection/id", "/id"]): RFC 6901 pointers tried in order to find the inspection id in a
  // damage-detection webhook body. At least one; each starts with '/'.
  std::vector<std::string> inspection_id_pointers = {"/inspectionId", "/data/inspectionId",
                                                     "/inspection/id", "/id"};
};

struct SearchOptions {
  // search.max_limit (default 100, >= 1): largest page size a search may request.
  int max_limit = 100;
};

// validation.*: bounds on requests, checked before any vendor call.
struct ValidationOptions {
  int max_urls = 100;  // URLs per call in the list RPCs
};

// Whether a feature is on: "auto" decides by the mode (see the key).
enum class Toggle { kAuto, kOn, kOff };

// grpc.tls.*: TLS (and mTLS) on the gRPC listener, from PEM files reloaded without restart.
struct GrpcTlsConfig {
  std::string cert_file;
  std::string key_file;
  std::string client_ca_file;
  int refresh_interval_seconds = 60;
};

// grpc.*: the gRPC listener's limits, TLS, and reflection.
struct GrpcOptions {
  GrpcTlsConfig tls;
  std::string authz_policy_file;  // the authorization policy; empty: none
  int authz_refresh_interval_seconds = 60;
  // grpc.per_caller.*: limits per caller identity (or address), local to the replica.
  int per_caller_requests_per_second = 0;  // 0: off
  int per_caller_burst = 0;                // 0: one second's worth
  int per_caller_max_streams = 0;          // 0: off
  int max_receive_message_bytes = 512 * 1024;
  int max_concurrent_streams = 1000;
  absl::Duration keepalive_min_client_interval = absl::Milliseconds(10000);
  absl::Duration keepalive_time = absl::Milliseconds(60000);
  absl::Duration keepalive_timeout = absl::Milliseconds(20000);
  Toggle reflection = Toggle::kAuto;  // auto: on with --sandbox, else off
};

struct LogOptions {
  // log.level (default "info"; "debug" | "info" | "warn" | "error"): lines below are dropped.
  logging::Level level = logging::Level::kInfo;
};

struct ShutdownOptions {
  // shutdown.grace_ms (default 10000, >= 0): how long in-flight RPCs get after SIGTERM.
  absl::Duration grace = absl::Milliseconds(10000);
};

// webhook.*: the vendor-facing webhook receiver, the one Internet-facing port. Every
// resource a client can make it hold has a limit here (README, "Webhook ingress limits").
struct WebhookOptions {
  std::string path = "/webhooks/v2";
  int max_body_bytes = 8 << 20;
  absl::Duration head_timeout = absl::Milliseconds(10000);
  absl::Duration keep_alive_timeout = absl::Milliseconds(75000);
  int64_t min_body_bytes_per_second = 1024;
  absl::Duration body_grace = absl::Milliseconds(5000);
  absl::Duration write_timeout = absl::Milliseconds(10000);
  int max_head_bytes = 16 * 1024;
  int max_header_count = 100;
  int max_connections = 10000;
  int max_connections_per_client = 256;
  int max_requests_in_flight = 128;
  int max_json_depth = 64;
  int max_json_elements = 100000;
  // Deliveries with the same content within this window are one event (stored once).
  int dedupe_window_hours = 48;
  int threads = 16;
  // RFC 6901 pointers into the webhook body (defaults fit the spec's createReport body).
  std::string event_name_pointer = "/event";
  std::string inspection_id_pointer = "/inspectionId";
  std::string token_id_pointer = "/tokenId";
  std::string vehicle_id_pointer = "/vehicleId";
};

// event_log_*: retention of the event log.
struct EventLogRetention {
  int max_age_hours = 168;
  int max_events = 1000000;
};

// streams.*: server-streaming RPCs.
struct StreamOptions {
  int queue_size = 1000;  // events buffered per subscriber before it is dropped
  int64_t queue_max_bytes = int64_t{4} << 20;  // memory of those events, per stream
  int catchup_events_per_turn = 256;
  absl::Duration catchup_idle_timeout = absl::Milliseconds(30000);
  int max_per_connection = 500;  // 0: no limit
  int max_total = 10000;         // 0: no limit
};

// token_watch.*: WatchTokenStatus polling.
struct TokenWatchOptions {
  absl::Duration interval = absl::Milliseconds(2000);
  absl::Duration max_backoff = absl::Milliseconds(30000);
};

// retry.*: the retry loop around every vendor call (safe and idempotent routes only).
struct RetryConfig {
  absl::Duration base = absl::Milliseconds(25);         // first backoff ceiling (full jitter)
  absl::Duration cap = absl::Milliseconds(1000);        // largest backoff ceiling
  int max_attempts = 3;                                 // attempts per call, the first included
  absl::Duration min_attempt = absl::Milliseconds(50);  // no attempt with less time left
};

// retry_budget.*: retries in flight at most percent% of requests in flight, at least min.
struct RetryBudgetOptions {
  int percent = 20;
  int min_retries = 3;
};

// circuit_breaker.*: one breaker per vendor account.
struct CircuitBreakerOptions {
  int consecutive_failures = 5;
  int failure_ratio_percent = 50;
  int minimum_requests = 20;
  absl::Duration window = absl::Milliseconds(10000);
  absl::Duration open = absl::Milliseconds(5000);
  absl::Duration max_open = absl::Milliseconds(60000);
};

// cache.*: the response cache.
struct CacheConfig {
  bool enabled = true;
  int64_t max_bytes = int64_t{64} << 20;
  absl::Duration stale_if_error = absl::Milliseconds(300000);
  bool image_analysis = true;
  absl::Duration image_analysis_ttl = absl::Milliseconds(600000);
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
  std::string grpc_addr = "0.0.0.0:50051";
  // webhook_addr (default "0.0.0.0:8080"; --webhook-addr): webhook receiver listen address.
  std::string webhook_addr = "0.0.0.0:8080";
  // admin_addr (default "0.0.0.0:9464"; --admin-addr): metrics/admin listen address.
  std::string admin_addr = "0.0.0.0:9464";

  UpstreamOptions upstream;
  BackgroundRemovalOptions background_removal;
  TestWebhookOptions test_webhook;
  DamageOptions damage;
  SearchOptions search;
  ValidationOptions validation;
  GrpcOptions grpc;
  LogOptions log;
  ShutdownOptions shutdown;

  WebhookOptions webhook;
  // event_log (default "sqlite:inspection-events.db"): "sqlite:<path>" or
  // "redis://[:password@]host:port[/db][?stream=name]" (replicas share it).
  std::string event_log = "sqlite:inspection-events.db";
  EventLogRetention event_log_retention;
  StreamOptions streams;
  TokenWatchOptions token_watch;
  // idempotency.ttl_hours (default 24): how long CreateToken/DetectDamage idempotency keys
  // remember their first outcome (in memory).
  int idempotency_ttl_hours = 24;
  // idempotency.max_bytes (default 64 MiB): memory the in-memory store may hold.
  int64_t idempotency_max_bytes = int64_t{64} << 20;
  // idempotency_store (default "memory"): "memory" or "redis://..." (shared by replicas).
  std::string idempotency_store = "memory";
  RetryConfig retry;
  RetryBudgetOptions retry_budget;
  CircuitBreakerOptions circuit_breaker;
  CacheConfig cache;
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
