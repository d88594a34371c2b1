#include "gateway/app/server_options.h"

#include <string>
#include <utility>

#include "gateway/version/version.h"

namespace inspection::app {

server::GatewayServerOptions ServerOptions(const config::GatewayConfig& config) {
  // Every setting is already in place: the loader filled config.server through each
  // component's declared keys. What is added here is not a setting of the server: the
  // secrets, the named accounts, and what the process decides.
  server::GatewayServerOptions options = config.server;
  options.vendor.api_key = config.api_key.Reveal();
  options.redis.sentinel_password = config.redis_sentinel_password.Reveal();
  options.reflection = config.reflection == config::Toggle::kOn ||
                       (config.reflection == config::Toggle::kAuto && config.sandbox);
  options.tracing.service_version = std::string(version::Version());
  // The webhook receiver starts with the default account's key; without one it is not
  // started (and the gateway polls what it started).
  options.webhook.current_key = config.webhook_key.Reveal();
  options.webhook.previous_key =
      config.webhook_key.empty() ? std::string() : config.webhook_previous_key.Reveal();
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
  return options;
}

}  // namespace inspection::app
