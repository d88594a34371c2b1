// The settings of the endpoints (endpoint_overrides.cc) and of request validation.

#ifndef GATEWAY_SERVICES_ENDPOINT_SETTINGS_H_
#define GATEWAY_SERVICES_ENDPOINT_SETTINGS_H_

#include "adapters/vendor/request_validation.h"
#include "adapters/vendor/vendor_request.h"
#include "gateway/settings/setting.h"

namespace inspection::services {

// The assumptions the endpoints make about the vendor where the spec is silent (key
// spellings, where TestWebhook's parameters go, where DetectDamage's inspection id is).
settings::Schema<vendor::MapperOptions> MapperSchema();

// The request limits checked before any vendor call.
settings::Schema<validation::ValidationLimits> ValidationSchema();

}  // namespace inspection::services

#endif  // GATEWAY_SERVICES_ENDPOINT_SETTINGS_H_
