// The settings of the webhook receiver (WebhookReceiverOptions), declared beside it.

#ifndef GATEWAY_WEBHOOKS_WEBHOOK_RECEIVER_SETTINGS_H_
#define GATEWAY_WEBHOOKS_WEBHOOK_RECEIVER_SETTINGS_H_

#include "gateway/settings/setting.h"
#include "gateway/webhooks/webhook_receiver.h"

namespace inspection::webhooks {

// The key of the default account's webhook path, which the process compares with the
// named accounts' paths.
inline constexpr char kPathKey[] = "webhook.path";

// The webhook receiver's settings: its address, path, the limits of the one Internet-facing
// port, and where a delivery's fields are.
settings::Schema<WebhookReceiverOptions> WebhookReceiverSchema();

}  // namespace inspection::webhooks

#endif  // GATEWAY_WEBHOOKS_WEBHOOK_RECEIVER_SETTINGS_H_
