#include "gateway/app/sandbox_mode.h"

#include <stdlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "adapters/vendor/event_mapper.h"

namespace inspection::server {
namespace {

// The key the sandbox sends in `x-api-key` with its webhooks to the gateway. A dev-only
// value like the sandbox's own API key; the webhook receiver (issue 4) will check it.
constexpr char kSandboxWebhookKey[] = "sandbox-webhook-key";

}  // namespace

absl::StatusOr<std::unique_ptr<sandbox::SandboxServer>> StartEmbeddedSandbox(
    config::GatewayConfig& config) {
  sandbox::SandboxOptions options;
  options.host = "127.0.0.1";
  options.port = 0;
  if (!config.api_key.empty()) options.api_keys = {config.api_key.Reveal()};
  auto started = sandbox::SandboxServer::Start(std::move(options));
  if (!started.ok()) return started.status();
  config.server.vendor.base_url = (*started)->BaseUrl();
  // The sandbox sends its webhooks with this key; the gateway's receiver accepts it.
  if (config.webhook_key.empty()) config.webhook_key = config::Secret(kSandboxWebhookKey);
  if (config.server.webapp_url.empty()) config.server.webapp_url = (*started)->WebappUrl();
  if (config.api_key.empty()) config.api_key = config::Secret(sandbox::kDefaultSandboxApiKey);
  return started;
}

absl::StatusOr<std::unique_ptr<TemporaryDirectory>> TemporaryDirectory::Create() {
  const char* tmpdir = std::getenv("TMPDIR");
  std::string pattern = absl::StrCat(tmpdir != nullptr && *tmpdir != '\0' ? tmpdir : "/tmp",
                                     "/inspection-gateway-sandbox-XXXXXX");
  if (::mkdtemp(pattern.data()) == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("cannot create a temporary directory ", pattern, ": ", std::strerror(errno)));
  }
  return std::unique_ptr<TemporaryDirectory>(new TemporaryDirectory(std::move(pattern)));
}

TemporaryDirectory::~TemporaryDirectory() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

absl::StatusOr<std::unique_ptr<TemporaryDirectory>> UseTemporaryEventLog(
    config::GatewayConfig& config) {
  if (config.server.event_log_url != GatewayServerOptions().event_log_url) return nullptr;
  absl::StatusOr<std::unique_ptr<TemporaryDirectory>> dir = TemporaryDirectory::Create();
  if (!dir.ok()) return dir.status();
  config.server.event_log_url = absl::StrCat("sqlite:", (*dir)->path(), "/events.db");
  return dir;
}

std::string GatewayWebhookUrl(const config::GatewayConfig& config, int webhook_port) {
  std::string host = config.server.webhook.host;
  // A wildcard listen address is reachable on loopback from the same machine.
  if (host == "0.0.0.0" || host == "::" || host.empty()) host = "127.0.0.1";
  if (host.find(':') != std::string::npos) host = absl::StrCat("[", host, "]");
  return absl::StrCat("http://", host, ":", webhook_port, config.server.webhook.path);
}

void PointSandboxWebhooksAtGateway(const config::GatewayConfig& config, int webhook_port,
                                   sandbox::SandboxServer& sandbox) {
  sandbox.ConfigureWebhook(GatewayWebhookUrl(config, webhook_port), config.webhook_key.Reveal(),
                           vendor::SpecEventNames());
}

std::string SandboxWelcome(const config::GatewayConfig& config, sandbox::SandboxServer& sandbox,
                           int grpc_port, int webhook_port, const std::string& grpcurl) {
  const std::string target = absl::StrCat("localhost:", grpc_port);
  const std::string admin = absl::StrCat(sandbox.BaseUrl(), "/_sandbox");
  std::string text =
      absl::StrCat("\ninspection-gateway is serving gRPC on ", target,
                   " in front of the embedded sandbox (vendor API ", sandbox.BaseUrl(),
                   ", admin API ", admin, "/).\nThe sandbox's webhooks are configured to go to ",
                   GatewayWebhookUrl(config, webhook_port), ".\nEvents are kept in ",
                   config.server.event_log_url,
                   " (a temporary directory is removed at exit; set event_log to keep them)."
                   "\n\nTry it (ready to paste):\n\n");
  const std::string commands =
      R"(# a self-inspection token (placeholders for the customer, no message sent)
grpcurl -plaintext -d '{"options": {"shoot_inspect": true, "fast_track": true}, "trade_in": {"immat": "DE-123-MO", "sending_type": "SENDING_TYPE_NONE"}, "customer": {"email": "<EMAIL>", "firstname": "<FIRST_NAME>", "lastname": "<LAST_NAME>", "phone": "<PHONE>", "locale": "LOCALE_EN"}, "creator_user_id": "demo-agent", "validity": 30}' TARGET inspection.v1.TokenService/CreateToken
# a quality check
grpcurl -plaintext -d '{"url": "https://images.example.com/demo/front.jpg"}' TARGET inspection.v1.ImageService/AssessQuality
# a damage detection (the sandbox reads the plate DE-123-MO in the first image URL)
grpcurl -plaintext -d '{"urls": ["https://images.example.com/demo/front.jpg?plate=DE-123-MO", "https://images.example.com/demo/rear.jpg"]}' TARGET inspection.v1.DamageService/DetectDamage
# a search by licence plate
grpcurl -plaintext -d '{"license_plate": "DE-123-MO", "page": 1, "limit": 10}' TARGET inspection.v1.InspectionService/SearchInspections
)";
  absl::StrAppend(
      &text, absl::StrReplaceAll(
                 commands, {{"TARGET", target}, {"grpcurl -plaintext", grpcurl + " -plaintext"}}));
  absl::StrAppend(&text, "\nPlay the customer on a token (UID = token.uid from CreateToken):\n",
                  "  curl -X POST ", admin, "/tokens/UID/open    (then start-shooting, ",
                  "finish-shooting, fast-track, complete, chase-up)\n", "and follow it: ", grpcurl,
                  " -plaintext -d '{\"uid\": \"UID\"}' ", target,
                  " inspection.v1.TokenService/GetTokenStatus\n\n");
  return text;
}

}  // namespace inspection::server
