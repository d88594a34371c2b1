// inspection-gateway: gRPC in front of the vehicle-inspection vendor's REST API.
// Reads the configuration, starts the server, waits for SIGTERM/SIGINT, drains.
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <tuple>

#include "absl/time/time.h"
#include "adapters/http/http_server.h"
#include "gateway/app/sandbox_mode.h"
#include "gateway/config/config.h"
#include "gateway/config/value_checks.h"
#include "gateway/logging/log.h"
#include "gateway/server/gateway_server.h"
#include "gateway/server/rpc_log_observer.h"
#include "gateway/server/webhook_registration.h"

namespace {

using inspection::config::GatewayConfig;

inspection::vendor::KeySpelling ToSpelling(inspection::config::KeySpelling spelling) {
  switch (spelling) {
    case inspection::config::KeySpelling::kSingular:
      return inspection::vendor::KeySpelling::kSingular;
    case inspection::config::KeySpelling::kPlural:
      return inspection::vendor::KeySpelling::kPlural;
    case inspection::config::KeySpelling::kBoth:
      return inspection::vendor::KeySpelling::kBoth;
  }
  return inspection::vendor::KeySpelling::kBoth;
}

inspection::server::GatewayServerOptions ServerOptions(const GatewayConfig& config) {
  inspection::server::GatewayServerOptions options;
  options.grpc_addr = config.grpc_addr;
  options.vendor.base_url = config.upstream_url;
  options.vendor.api_key = config.api_key.Reveal();
  options.vendor.max_attempt_timeout =
      std::chrono::milliseconds(absl::ToInt64Milliseconds(config.upstream.timeout));
  options.webapp_url = config.webapp_url;
  options.connect_timeout =
      std::chrono::milliseconds(absl::ToInt64Milliseconds(config.upstream.connect_timeout));
  options.max_connections = config.upstream.max_connections;
  options.mapper.position_ratio_key = ToSpelling(config.background_removal.position_ratio_key);
  options.mapper.wheel_box_key = ToSpelling(config.background_removal.wheel_box_key);
  options.mapper.test_webhook_params =
      config.test_webhook.params_in == inspection::config::ParamsIn::kBody
          ? inspection::vendor::ParamsPlacement::kBody
          : inspection::vendor::ParamsPlacement::kQuery;
  options.mapper.inspection_id_pointers = config.damage.inspection_id_pointers;
  options.limits.search_max_limit = config.search.max_limit;
  options.limits.max_urls = config.validation.max_urls;
  options.tls.cert_file = config.grpc.tls.cert_file;
  options.tls.key_file = config.grpc.tls.key_file;
  options.tls.client_ca_file = config.grpc.tls.client_ca_file;
  options.tls.refresh_interval = std::chrono::seconds(config.grpc.tls.refresh_interval_seconds);
  options.authz_policy_file = config.grpc.authz_policy_file;
  options.caller_limits.requests_per_second = config.grpc.per_caller_requests_per_second;
  options.caller_limits.burst = config.grpc.per_caller_burst;
  options.caller_limits.max_streams = config.grpc.per_caller_max_streams;
  options.authz_refresh_interval = std::chrono::seconds(config.grpc.authz_refresh_interval_seconds);
  options.grpc_limits.max_receive_message_bytes = config.grpc.max_receive_message_bytes;
  options.grpc_limits.max_concurrent_streams = config.grpc.max_concurrent_streams;
  options.grpc_limits.keepalive_min_client_interval_ms =
      static_cast<int>(absl::ToInt64Milliseconds(config.grpc.keepalive_min_client_interval));
  options.grpc_limits.keepalive_time_ms =
      static_cast<int>(absl::ToInt64Milliseconds(config.grpc.keepalive_time));
  options.grpc_limits.keepalive_timeout_ms =
      static_cast<int>(absl::ToInt64Milliseconds(config.grpc.keepalive_timeout));
  options.reflection =
      config.grpc.reflection == inspection::config::Toggle::kOn ||
      (config.grpc.reflection == inspection::config::Toggle::kAuto && config.sandbox);

  {
    const std::string& addr = config.admin_addr;  // validated HOST:PORT
    const size_t colon = addr.rfind(':');
    options.admin_host = addr.substr(0, colon);
    if (options.admin_host.size() > 1 && options.admin_host.front() == '[') {
      options.admin_host = options.admin_host.substr(1, options.admin_host.size() - 2);
    }
    options.admin_port = std::stoi(addr.substr(colon + 1));
  }
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
  options.idempotency_ttl = absl::Hours(config.idempotency_ttl_hours);
  options.idempotency_memory_max_bytes = static_cast<size_t>(config.idempotency_max_bytes);
  options.idempotency_store_url = config.idempotency_store;
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
  options.cache.image_analysis_ttl = config.cache.image_analysis_ttl;
  options.token_watch.interval = config.token_watch.interval;
  options.token_watch.max_backoff = config.token_watch.max_backoff;
  if (!config.webhook_key.empty()) {
    auto& webhook = options.webhook;
    const std::string& addr = config.webhook_addr;  // validated HOST:PORT
    const size_t colon = addr.rfind(':');
    webhook.host = addr.substr(0, colon);
    if (webhook.host.size() > 1 && webhook.host.front() == '[') {
      webhook.host = webhook.host.substr(1, webhook.host.size() - 2);
    }
    webhook.port = std::stoi(addr.substr(colon + 1));
    webhook.path = config.webhook.path;
    webhook.current_key = config.webhook_key.Reveal();
    webhook.previous_key = config.webhook_previous_key.Reveal();
    const inspection::config::WebhookOptions& w = config.webhook;
    inspection::http::HttpServerLimits& limits = webhook.limits;
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
  for (const inspection::config::VendorAccountConfig& account : config.accounts) {
    options.accounts.push_back({account.name, account.upstream_url, account.api_key.Reveal()});
    // The config refuses account webhook keys without the default one (which starts the
    // receiver); an account without a key receives no webhooks.
    if (!account.webhook_key.empty() && !config.webhook_key.empty()) {
      options.webhook.accounts.push_back({account.name, account.webhook_path,
                                          account.webhook_key.Reveal(),
                                          account.webhook_previous_key.Reveal()});
    }
  }
  return options;
}

}  // namespace

int main(int argc, char** argv) {
  // Block the shutdown signals before any thread starts, so every thread inherits the
  // mask and sigwait() below is the only place they are delivered.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  // A peer that closes a socket while we write to it must cost an error, not the process
  // (hiredis and parts of the HTTP servers write without MSG_NOSIGNAL).
  signal(SIGPIPE, SIG_IGN);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  // Every connection is a file: webhook.max_connections needs more than the usual 1024.
  inspection::http::RaiseOpenFileLimit();

  std::vector<std::string> args(argv + 1, argv + argc);
  auto config = inspection::config::LoadConfig(args, inspection::config::GetEnvFromProcess);
  if (!config.ok()) {
    if (inspection::config::IsHelpRequest(config.status())) {
      std::cout << inspection::config::UsageText();
      return 0;
    }
    std::cerr << "inspection-gateway: configuration error: " << config.status().message()
              << "\n(run with --help for the list of flags and keys)\n";
    return 2;
  }
  if (config->print_config) {
    std::cout << inspection::config::DumpConfig(*config) << "\n";
    return 0;
  }

  auto& logger = inspection::logging::DefaultLogger();
  logger.SetLevel(config->log.level);
  inspection::config::RegisterSecrets(*config, logger);

  // --sandbox: the vendor emulator runs in this process and becomes the upstream.
  std::unique_ptr<inspection::sandbox::SandboxServer> sandbox;
  if (config->sandbox) {
    auto started = inspection::server::StartEmbeddedSandbox(*config);
    if (!started.ok()) {
      logger.Error("sandbox start-up failed", {{"error", std::string(started.status().message())}});
      return 1;
    }
    sandbox = std::move(*started);
    inspection::config::RegisterSecrets(*config, logger);
  }

  inspection::server::RpcLogObserver observer(logger);
  auto options = ServerOptions(*config);
  options.observer = &observer;
  auto server = inspection::server::GatewayServer::Start(std::move(options));
  if (!server.ok()) {
    logger.Error("start-up failed", {{"error", std::string(server.status().message())}});
    return 1;
  }
  // register_webhook, for the default account and then each named one that sets it.
  std::vector<std::tuple<std::string, std::string, std::string>> registrations;
  if (!config->register_webhook.empty()) {
    registrations.emplace_back("", config->register_webhook, config->webhook_key.Reveal());
  }
  for (const auto& account : config->accounts) {
    if (account.register_webhook.empty()) continue;
    registrations.emplace_back(account.name, account.register_webhook,
                               account.webhook_key.Reveal());
  }
  for (const auto& [account, url, key] : registrations) {
    absl::Status registered = inspection::server::RegisterWebhookAtVendor(
        (*server)->deps(), url, key, config->register_webhook_events, std::chrono::seconds(10),
        account);
    if (!registered.ok()) {
      logger.Error("start-up failed", {{"error", std::string(registered.message())}});
      return 1;
    }
    logger.Info("webhook registered at the vendor",
                {{"account", account.empty() ? "default" : account},
                 {"url", url},
                 {"events", static_cast<int64_t>(config->register_webhook_events.size())}});
  }
  if (config->grpc.tls.cert_file.empty() &&
      !inspection::config::IsLoopbackHostPort(config->grpc_addr)) {
    logger.Warn(
        "the gRPC listener is plaintext on a non-loopback address: any process that reaches "
        "it holds the rights of every configured vendor account. Set grpc.tls.cert_file and "
        "grpc.tls.key_file (and grpc.tls.client_ca_file for mTLS), or terminate mTLS in a "
        "mesh sidecar in front of it",
        {{"grpc_addr", config->grpc_addr}});
  }
  if (config->grpc.authz_policy_file.empty() && !config->sandbox) {
    logger.Warn(
        "no authorization policy (grpc.authz_policy_file): every caller may call every RPC "
        "with every vendor account, UpdateWebhookConfig and CreateToken included");
  }
  if ((*server)->webhook_port() == 0) {
    logger.Warn(
        "no webhook key configured (webhook_key_file or INSPECTION_WEBHOOK_KEY): the "
        "webhook receiver is not started, streams only carry events stored by replicas");
  }
  logger.Info("inspection-gateway serving",
              {{"grpc_port", (*server)->grpc_port()},
               {"webhook_port", (*server)->webhook_port()},
               {"admin_port", (*server)->admin_port()},
               {"grpc_addr", config->grpc_addr},
               {"upstream_url", config->upstream_url},
               {"config", inspection::config::DumpConfig(
                              *config, inspection::config::DumpFormat::kSingleLine)}});

  if (sandbox != nullptr) {
    inspection::server::PointSandboxWebhooksAtGateway(*config, (*server)->webhook_port(), *sandbox);
    // `make run` passes the grpcurl it installed; otherwise assume it is on the PATH.
    const char* grpcurl = std::getenv("GRPCURL");
    std::cout << inspection::server::SandboxWelcome(
                     *config, *sandbox, (*server)->grpc_port(), (*server)->webhook_port(),
                     grpcurl != nullptr && *grpcurl != '\0' ? grpcurl : "grpcurl")
              << std::flush;
  }

  int signal_number = 0;
  sigwait(&signals, &signal_number);
  const auto grace = std::chrono::milliseconds(absl::ToInt64Milliseconds(config->shutdown.grace));
  logger.Info("shutting down",
              {{"signal", signal_number}, {"grace_ms", static_cast<int64_t>(grace.count())}});
  (*server)->Shutdown(grace);
  if (sandbox != nullptr) sandbox->Stop();
  logger.Info("stopped");
  return 0;
}
