#ifndef GATEWAY_SERVER_WEBHOOK_REGISTRATION_H_
#define GATEWAY_SERVER_WEBHOOK_REGISTRATION_H_

#include <chrono>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gateway/services/unary_call.h"

namespace inspection::server {

// `--register-webhook=<public URL>`: sets the gateway's webhook URL and header key at
// the vendor (PUT configwebhook) and enables webhook delivery of `events` (PUT
// configevent, one call each), waiting for each answer up to `timeout`. Blocking: for
// start-up only. The first failure is returned with the vendor's reason; the key never
// appears in it. `account` names the vendor account to register at ("" = the default
// one; a named account registers its own webhook path with its own key). The calls go
// through the call core (services::CallEndpoint) with origin "startup".
absl::Status RegisterWebhookAtVendor(const services::CallDeps& deps, const std::string& url,
                                     const std::string& header_key,
                                     const std::vector<std::string>& events,
                                     std::chrono::milliseconds timeout,
                                     const std::string& account = "");

}  // namespace inspection::server

#endif  // GATEWAY_SERVER_WEBHOOK_REGISTRATION_H_
