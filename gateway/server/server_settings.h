// Every setting of the gateway server: the keys of GatewayServerOptions' own fields (the
// listeners, the vendor HTTP client, the gRPC limits, the event log, the idempotency store)
// and each component's schema, declared beside that component's options and composed here
// in --help order. The config loader (gateway/config) fills a GatewayServerOptions from the
// file, env and flags through this table; nothing copies a setting by hand.

#ifndef GATEWAY_SERVER_SERVER_SETTINGS_H_
#define GATEWAY_SERVER_SERVER_SETTINGS_H_

#include "gateway/server/server_options.h"
#include "gateway/settings/setting.h"

namespace inspection::server {

settings::Schema<GatewayServerOptions> ServerSchema();

}  // namespace inspection::server

#endif  // GATEWAY_SERVER_SERVER_SETTINGS_H_
