#ifndef GATEWAY_APP_SANDBOX_MODE_H_
#define GATEWAY_APP_SANDBOX_MODE_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "gateway/config/config.h"
#include "sandbox/emulator/sandbox_server.h"

namespace inspection::server {

// `inspection-gateway --sandbox`: starts the vendor emulator in-process on a free
// loopback port and fills `config` from it (upstream_url, webapp_url, and the API key
// when none was configured).
absl::StatusOr<std::unique_ptr<sandbox::SandboxServer>> StartEmbeddedSandbox(
    config::GatewayConfig& config);

// A temporary directory, removed with everything in it when the object goes.
class TemporaryDirectory {
 public:
  // mkdtemp under $TMPDIR (else /tmp), named inspection-gateway-sandbox-XXXXXX.
  static absl::StatusOr<std::unique_ptr<TemporaryDirectory>> Create();
  ~TemporaryDirectory();
  TemporaryDirectory(const TemporaryDirectory&) = delete;
  TemporaryDirectory& operator=(const TemporaryDirectory&) = delete;
  const std::string& path() const { return path_; }

 private:
  explicit TemporaryDirectory(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

// --sandbox without `event_log` (still its default, sqlite:inspection-events.db in the
// working directory): the event log, and the work ledger beside it, go to a temporary
// directory instead, removed when the process ends. Null when `event_log` was set.
absl::StatusOr<std::unique_ptr<TemporaryDirectory>> UseTemporaryEventLog(
    config::GatewayConfig& config);

// The gateway's own webhook endpoint as the sandbox should call it
// (`http://<webhook_addr host, 0.0.0.0 -> 127.0.0.1>:<webhook_port><webhook.path>`).
std::string GatewayWebhookUrl(const config::GatewayConfig& config, int webhook_port);

// Points the sandbox's webhook config at the gateway's webhook endpoint (with the
// gateway's webhook key) and enables every event, as an operator would with
// UpdateWebhookConfig/UpdateEventConfig.
void PointSandboxWebhooksAtGateway(const config::GatewayConfig& config, int webhook_port,
                                   sandbox::SandboxServer& sandbox);

// The text printed once serving: where things are, and ready-to-paste grpcurl commands
// for a token, a quality check, a damage detection and a search, plus the admin calls
// that play the customer. `grpcurl` is the command printed (a full path when the tool is
// not on the user's PATH, as after `make run`).
std::string SandboxWelcome(const config::GatewayConfig& config, sandbox::SandboxServer& sandbox,
                           int grpc_port, int webhook_port, const std::string& grpcurl);

}  // namespace inspection::server

#endif  // GATEWAY_APP_SANDBOX_MODE_H_
