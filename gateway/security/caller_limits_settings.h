// The settings of the per-caller limits (CallerLimitsOptions), declared beside them.

#ifndef GATEWAY_SECURITY_CALLER_LIMITS_SETTINGS_H_
#define GATEWAY_SECURITY_CALLER_LIMITS_SETTINGS_H_

#include "gateway/security/caller_limits.h"
#include "gateway/settings/setting.h"

namespace inspection::security {

// The per-caller limits' settings.
settings::Schema<CallerLimitsOptions> CallerLimitsSchema();

}  // namespace inspection::security

#endif  // GATEWAY_SECURITY_CALLER_LIMITS_SETTINGS_H_
