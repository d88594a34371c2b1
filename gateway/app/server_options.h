// The server's options from the process configuration: the one place where a config key
// reaches the component that uses it. Each setting starts from its component's default
// (config::ComponentDefaults), so this only copies, converting units where the config counts
// differently (percent, milliseconds, HOST:PORT).
#ifndef INSPECTION_GATEWAY_APP_SERVER_OPTIONS_H_
#define INSPECTION_GATEWAY_APP_SERVER_OPTIONS_H_

#include "gateway/config/config.h"
#include "gateway/server/gateway_server.h"

namespace inspection::app {

// Everything but what the process injects (observer, transport, event log object). The
// webhook receiver is configured only when the default webhook key is set.
server::GatewayServerOptions ServerOptions(const config::GatewayConfig& config);

}  // namespace inspection::app

#endif  // INSPECTION_GATEWAY_APP_SERVER_OPTIONS_H_
