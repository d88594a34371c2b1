// The server's options from the process configuration. The settings themselves are filled
// by the loader straight into config.server (each component declares its keys beside its
// options); this adds only what is not a setting of the server: the secrets, the named
// vendor accounts, reflection's "auto", the version for spans.
#ifndef INSPECTION_GATEWAY_APP_SERVER_OPTIONS_H_
#define INSPECTION_GATEWAY_APP_SERVER_OPTIONS_H_

#include "gateway/config/config.h"
#include "gateway/server/gateway_server.h"

namespace inspection::app {

// Everything but what the process injects (observer, transport, event log object). The
// webhook receiver gets a key only when the default webhook key is set.
server::GatewayServerOptions ServerOptions(const config::GatewayConfig& config);

}  // namespace inspection::app

#endif  // INSPECTION_GATEWAY_APP_SERVER_OPTIONS_H_
