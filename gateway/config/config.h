// Configuration of the inspection-gateway process.
//
// Sources, lowest to highest precedence:
//   built-in defaults < config file (--config / INSPECTION_CONFIG) < environment < flags.
//
// Every setting has one config-file key (sections nest: upstream.timeout_ms is
// {"upstream": {"timeout_ms": ...}}), and is derived from it:
//   flag: "--" + key with '.' and '_' turned into '-'        --upstream-timeout-ms
//   env:  "INSPECTION_" + key upper-cased, '.' turned to '_'   INSPECTION_UPSTREAM_TIMEOUT_MS
// Each key is declared once, by the component whose options it fills (its *_settings.h, composed
// by server::ServerSchema(); the process's own keys in config.cc). That table drives file
// parsing, env and flag parsing, validation, the dump and the --help text: adding a setting is
// one field in the component's options plus one row in its settings file.
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
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "adapters/vendor/vendor_request.h"
#include "gateway/config/secret.h"
#include "gateway/logging/log.h"
#include "gateway/server/server_options.h"

namespace inspection::config {

// Whether a feature is on: "auto" decides by the mode (see the key).
enum class Toggle { kAuto, kOn, kOff };

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
  // Every setting of the server, filled directly by each component's declared keys
  // (server::ServerSchema(): the components' *_settings.h). Starts at the components' own
  // defaults. The secrets below are not in it: app::ServerOptions adds them.
  server::GatewayServerOptions server;

  // The process's own settings (declared in config.cc):
  // Run the vendor emulator in-process as the upstream; the vendor URL, the web
  // application's address and the API key then come from it.
  bool sandbox = false;
  // The file holding the vendor API key; trailing whitespace is trimmed. A relative path is
  // relative to the working directory.
  std::string api_key_file;
  // The vendor API key (required, non-empty): from `api_key_file` or, when that is not set,
  // env INSPECTION_API_KEY. Never printed: use Reveal() only where it is sent.
  Secret api_key;
  // The named vendor accounts next to the default one (sorted by name). A later source
  // replaces the whole object. Their secrets are read from their files like api_key; their
  // webhook paths are unique and differ from the default one, and no two accounts (the
  // default one included) share a webhook key.
  std::vector<VendorAccountConfig> accounts;
  // gRPC server reflection: auto is on with the sandbox, off otherwise.
  Toggle reflection = Toggle::kAuto;
  // Lines below this level are dropped.
  logging::Level log_level = logging::Level::kInfo;
  // How long in-flight RPCs get after SIGTERM.
  absl::Duration shutdown_grace = absl::Milliseconds(10000);
  // The gateway's public webhook URL; when set, the gateway registers it (and the webhook
  // key) at the vendor on start-up and enables register_webhook_events.
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
  // The AUTH password of the Redis Sentinels of a redis+sentinel:// URL (file
  // redis.sentinel_password_file or env INSPECTION_REDIS_SENTINEL_PASSWORD); the data
  // servers' password is the URL's.
  std::string redis_sentinel_password_file;
  Secret redis_sentinel_password;

  // Not settings: what the command line asked for.
  // The config file that was read (--config or INSPECTION_CONFIG); empty if none.
  std::string config_file;
  // --print-config was given: the caller should print DumpConfig() and exit 0.
  bool print_config = false;
  // Settings that work together but probably not as meant: each a sentence naming the keys,
  // for the caller to log as a warning (the binary writes them to stderr). Not errors.
  std::vector<std::string> warnings;
};

// Looks up an environment variable; std::nullopt when unset. Injected so tests need no real env.
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;

// Reads env through ::getenv.
std::optional<std::string> GetEnvFromProcess(const std::string& name);

// The names of the environment variables set, for LoadConfig's check of unknown
// INSPECTION_* names. Injected like EnvLookup.
using EnvNames = std::function<std::vector<std::string>()>;

// Every name in the process's environment.
std::vector<std::string> GetEnvNamesFromProcess();

// Builds the configuration from `args` (argv[1..]), the file named by --config (or env
// INSPECTION_CONFIG), env looked up through `getenv`, and the defaults; then validates it and
// reads the API key.
//
// Flags take `--name=value` or `--name value`; boolean flags (--print-config, --sandbox,
// --cache-enabled) take no separate value: `--name` alone is true, `--name=false` false, and
// a non-flag argument right after one is an error saying so.
// `--help` / `-h` anywhere: returns absl::CancelledError(UsageText()); test for it with
// IsHelpRequest(). Every other failure is an InvalidArgumentError naming the key or flag.
//
// With `env_names`, every INSPECTION_* variable set (non-empty) must be a setting's, a
// secret's or INSPECTION_CONFIG: anything else (a typo that would be ignored) is an error
// naming it, never its value. Kubernetes's service links (INSPECTION_X_SERVICE_HOST... for a
// Service named inspection-x) and INSPECTION_GATEWAY_* (the repository's tooling) pass. The
// binary passes GetEnvNamesFromProcess; without `env_names` nothing is checked.
absl::StatusOr<GatewayConfig> LoadConfig(const std::vector<std::string>& args,
                                         const EnvLookup& getenv, const EnvNames& env_names);
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
