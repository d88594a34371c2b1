// The settings of WatchTokenStatus polling (TokenStatusPollerOptions), declared beside it.

#ifndef GATEWAY_TOKEN_WATCH_TOKEN_WATCH_SETTINGS_H_
#define GATEWAY_TOKEN_WATCH_TOKEN_WATCH_SETTINGS_H_

#include "gateway/settings/setting.h"
#include "gateway/token_watch/token_status_poller.h"

namespace inspection::token_watch {

// How often a watched token is polled.
settings::Schema<TokenStatusPollerOptions> TokenStatusPollerSchema();

}  // namespace inspection::token_watch

#endif  // GATEWAY_TOKEN_WATCH_TOKEN_WATCH_SETTINGS_H_
