// The settings of the vendor client (VendorClientOptions), declared beside it.

#ifndef GATEWAY_UPSTREAM_VENDOR_CLIENT_SETTINGS_H_
#define GATEWAY_UPSTREAM_VENDOR_CLIENT_SETTINGS_H_

#include "gateway/settings/setting.h"
#include "gateway/upstream/vendor_client.h"

namespace inspection::upstream {

// The key of the vendor's base URL, which the process names when the sandbox replaces it.
inline constexpr char kUpstreamUrlKey[] = "upstream_url";
// The key of one attempt's timeout, which the reconciler's lease rule names.
inline constexpr char kAttemptTimeoutKey[] = "upstream.timeout_ms";

// The vendor client's settings: the vendor's address, the attempt timeout and the limits
// of a vendor answer's JSON.
settings::Schema<VendorClientOptions> VendorClientSchema();

}  // namespace inspection::upstream

#endif  // GATEWAY_UPSTREAM_VENDOR_CLIENT_SETTINGS_H_
