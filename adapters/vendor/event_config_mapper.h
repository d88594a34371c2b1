#ifndef ADAPTERS_VENDOR_EVENT_CONFIG_MAPPER_H_
#define ADAPTERS_VENDOR_EVENT_CONFIG_MAPPER_H_

#include <string>

#include "absl/status/status.h"
#include "adapters/vendor/json_codec.h"
#include "adapters/vendor/vendor_request.h"
#include "inspection/v1/event_config.pb.h"
#include "nlohmann/json.hpp"

namespace inspection::vendor {

// The webhook header key in a configwebhook answer is a secret: replaces
// `"webhookHeaderKey": "<key>"` by `"webhookHeaderKeySha256Prefix": "<12 hex digits>"`
// (null for no key). Does nothing to a body without the key (already sealed, or not an
// object). The vendor client seals these answers as they arrive; the decoders below seal
// again, so an unsealed body never reaches a caller either.
void SealWebhookHeaderKey(nlohmann::json* body);

// The first 12 hex digits of the SHA-256 of `key`.
std::string WebhookKeySha256Prefix(const std::string& key);

// GET /apiV1/eventmanager/configwebhook: `{ webhookHeaderKey, webhookUrl, webhookUrlV2 }`,
// nulls before configuration (left unset here). The key comes out as
// webhook_header_key_set and webhook_header_key_sha256_prefix, never itself.
absl::Status DecodeGetWebhookConfigResponse(const nlohmann::json& body,
                                            v1::GetWebhookConfigResponse* response,
                                            DecodeReport* report);

// PUT /apiV1/eventmanager/configwebhook answers as GET does (its request uses the generic
// mapping, vendor_mapping.h).
absl::Status DecodeUpdateWebhookConfigResponse(const nlohmann::json& body,
                                               v1::UpdateWebhookConfigResponse* response,
                                               DecodeReport* report);

// GET /apiV1/eventmanager/testwebhook with eventName and inspectionId in the query
// string or a JSON body, per `options.test_webhook_params` (the spec does not show
// where they go).
VendorRequest EncodeTestWebhookRequest(const v1::TestWebhookRequest& request,
                                       const MapperOptions& options);

// The vendor spelling of an event name: `raw` when non-empty, else the enum's.
std::string EventNameString(v1::EventName name, const std::string& raw);

}  // namespace inspection::vendor

#endif  // ADAPTERS_VENDOR_EVENT_CONFIG_MAPPER_H_
