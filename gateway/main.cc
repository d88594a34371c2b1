// inspection-gateway: gRPC in front of the vehicle-inspection vendor's REST API.
// Reads the configuration, starts the server, waits for SIGTERM/SIGINT, drains.
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <tuple>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "adapters/http/http_server.h"
#include "adapters/http/response_budget.h"
#include "gateway/app/sandbox_mode.h"
#include "gateway/app/server_options.h"
#include "gateway/config/config.h"
#include "gateway/logging/log.h"
#include "gateway/server/gateway_server.h"
#include "gateway/server/rpc_log_observer.h"
#include "gateway/server/webhook_registration.h"
#include "gateway/settings/value_checks.h"
#include "gateway/version/version.h"

namespace {

using inspection::config::GatewayConfig;
using inspection::logging::Logger;
using inspection::server::GatewayServer;

// register_webhook, for the default account and then each named one that sets it; false
// (logged) when a registration fails.
bool RegisterWebhooks(const GatewayConfig& config, GatewayServer& server, Logger& logger) {
  std::vector<std::tuple<std::string, std::string, std::string>> registrations;
  if (!config.register_webhook.empty()) {
    registrations.emplace_back("", config.register_webhook, config.webhook_key.Reveal());
  }
  for (const auto& account : config.accounts) {
    if (account.register_webhook.empty()) continue;
    registrations.emplace_back(account.name, account.register_webhook,
                               account.webhook_key.Reveal());
  }
  for (const auto& [account, url, key] : registrations) {
    absl::Status registered = inspection::server::RegisterWebhookAtVendor(
        server.deps(), url, key, config.register_webhook_events, std::chrono::seconds(10), account);
    if (!registered.ok()) {
      logger.Error("start-up failed", {{"error", std::string(registered.message())}});
      return false;
    }
    logger.Info("webhook registered at the vendor",
                {{"account", account.empty() ? "default" : account},
                 {"url", url},
                 {"events", static_cast<int64_t>(config.register_webhook_events.size())}});
  }
  return true;
}

// Settings that work but that an operator should hear about.
void WarnAboutRiskySettings(const GatewayConfig& config, GatewayServer& server, Logger& logger) {
  if (config.server.tls.cert_file.empty() &&
      !inspection::settings::IsLoopbackHostPort(config.server.grpc_addr)) {
    logger.Warn(
        "the gRPC listener is plaintext on a non-loopback address: any process that reaches "
        "it holds the rights of every configured vendor account. Set grpc.tls.cert_file and "
        "grpc.tls.key_file (and grpc.tls.client_ca_file for mTLS), or terminate mTLS in a "
        "mesh sidecar in front of it",
        {{"grpc_addr", config.server.grpc_addr}});
  }
  if (config.server.authz_policy_file.empty() && !config.sandbox) {
    logger.Warn(
        "no authorization policy (grpc.authz_policy_file): every caller may call every RPC "
        "with every vendor account, UpdateWebhookConfig and CreateToken included");
  }
  if (const size_t largest = inspection::http::ResponseBudget::LargestAnswer(
          config.server.max_buffered_response_bytes, config.server.guaranteed_response_bytes);
      config.server.max_response_bytes > largest) {
    logger.Warn(
        "upstream.max_response_bytes is more than one answer can hold of "
        "upstream.max_buffered_response_bytes (three quarters of it plus "
        "upstream.guaranteed_response_bytes): an answer between the two always fails with "
        "VENDOR_CONNECTION_LOST instead of VENDOR_RESPONSE_TOO_LARGE. Raise the budget or lower "
        "the per-answer limit",
        {{"max_response_bytes", static_cast<int64_t>(config.server.max_response_bytes)},
         {"largest_answer_in_budget", static_cast<int64_t>(largest)}});
  }
  if (server.webhook_less()) {
    logger.Warn(
        "webhook-less mode (webhook.mode poll, or no webhook key configured): no webhook "
        "receiver; streams carry what this gateway started, polled at the vendor "
        "(reconcile.*), and what other replicas store");
  }
}

}  // namespace

int main(int argc, char** argv) {
  // Debian's Abseil is built with the mutex deadlock detector on: every lock records a
  // stack trace in a global graph, which cost more CPU than the gateway's own work on a
  // call. The lock order is checked by the tests (ThreadSanitizer-clean design, lock
  // annotations), not at run time in production.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  // A peer that closes a socket while we write to it must cost an error, not the process
  // (hiredis and parts of the HTTP servers write without MSG_NOSIGNAL).
  signal(SIGPIPE, SIG_IGN);
  // Every connection is a file: webhook.max_connections needs more than the usual 1024.
  inspection::http::RaiseOpenFileLimit();

  std::vector<std::string> args(argv + 1, argv + argc);
  auto config = inspection::config::LoadConfig(args, inspection::config::GetEnvFromProcess,
                                               inspection::config::GetEnvNamesFromProcess);
  if (!config.ok()) {
    if (inspection::config::IsHelpRequest(config.status())) {
      std::cout << inspection::config::UsageText();
      return 0;
    }
    if (inspection::config::IsVersionRequest(config.status())) {
      std::cout << inspection::version::VersionText() << "\n";
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
  // Block the shutdown signals before any thread starts, so every thread inherits the
  // mask and sigwait() below is the only place they are delivered. Not before the
  // configuration is loaded (it starts no thread): until then SIGINT and SIGTERM end the
  // process as usual, whatever a file read does.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  auto& logger = inspection::logging::DefaultLogger();
  logger.SetLevel(config->log_level);
  inspection::config::RegisterSecrets(*config, logger);
  for (const std::string& warning : config->warnings) {
    logger.Warn("configuration warning", {{"warning", warning}});
  }

  // --sandbox: the vendor emulator runs in this process and becomes the upstream.
  std::unique_ptr<inspection::sandbox::SandboxServer> sandbox;
  // --sandbox keeps its event log in a temporary directory (unless event_log is set),
  // removed at exit after the server: declared first, destroyed last.
  std::unique_ptr<inspection::server::TemporaryDirectory> sandbox_events;
  if (config->sandbox) {
    auto events = inspection::server::UseTemporaryEventLog(*config);
    if (!events.ok()) {
      logger.Error("sandbox start-up failed", {{"error", std::string(events.status().message())}});
      return 1;
    }
    sandbox_events = *std::move(events);
    auto started = inspection::server::StartEmbeddedSandbox(*config);
    if (!started.ok()) {
      logger.Error("sandbox start-up failed", {{"error", std::string(started.status().message())}});
      return 1;
    }
    sandbox = std::move(*started);
    inspection::config::RegisterSecrets(*config, logger);
  }

  inspection::server::RpcLogObserver observer(logger);
  auto options = inspection::app::ServerOptions(*config);
  options.observer = &observer;
  auto server = inspection::server::GatewayServer::Start(std::move(options));
  if (!server.ok()) {
    logger.Error("start-up failed", {{"error", std::string(server.status().message())}});
    return 1;
  }
  if (!RegisterWebhooks(*config, **server, logger)) return 1;
  WarnAboutRiskySettings(*config, **server, logger);
  logger.Info("inspection-gateway serving",
              {{"version", inspection::version::Version()},
               {"revision", inspection::version::Revision()},
               {"grpc_port", (*server)->grpc_port()},
               {"webhook_port", (*server)->webhook_port()},
               {"admin_port", (*server)->admin_port()},
               {"grpc_addr", config->server.grpc_addr},
               {"upstream_url", config->server.vendor.base_url},
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
  const auto grace = std::chrono::milliseconds(absl::ToInt64Milliseconds(config->shutdown_grace));
  logger.Info("shutting down",
              {{"signal", signal_number}, {"grace_ms", static_cast<int64_t>(grace.count())}});
  (*server)->Shutdown(grace);
  if (sandbox != nullptr) sandbox->Stop();
  logger.Info("stopped");
  return 0;
}
