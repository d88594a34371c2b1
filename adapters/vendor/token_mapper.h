#ifndef ADAPTERS_VENDOR_TOKEN_MAPPER_H_
#define ADAPTERS_VENDOR_TOKEN_MAPPER_H_

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "adapters/vendor/json_codec.h"
#include "adapters/vendor/vendor_request.h"
#include "inspection/v1/token.pb.h"
#include "nlohmann/json.hpp"

namespace inspection::vendor {

// POST /apiV1/tokenmanager/token body. Fills what the spec fixes and the caller may
// leave unset: cost/report/downloadRoi false, tradeinVehicle true, clientType
// "customer", gender/sendingType/creatorUserId null. Assumes a validated request.
VendorRequest EncodeCreateTokenRequest(const v1::CreateTokenRequest& request);

// `{ token, webApiVersion }` -> response; computes customer_url and device_id.
// `webapp_url` has no trailing slash. InvalidArgument when the body is not an object.
absl::Status DecodeCreateTokenResponse(const nlohmann::json& body, std::string_view webapp_url,
                                       std::string_view locale, v1::CreateTokenResponse* response,
                                       DecodeReport* report);

// GET /apiV1/tokenmanager/test?deviceId=<uid>-pwa (the answer uses the generic mapping).
VendorRequest EncodeGetTokenStatusRequest(const v1::GetTokenStatusRequest& request);

// `<uid>-pwa`.
std::string DeviceIdForUid(std::string_view uid);
// `{webapp_url}/<locale>/services/<uid>`.
std::string CustomerUrl(std::string_view webapp_url, std::string_view locale, std::string_view uid);
// The vendor spelling of a locale (`nl-BE`), empty for LOCALE_UNSPECIFIED.
std::string LocaleCode(v1::Locale locale);

}  // namespace inspection::vendor

#endif  // ADAPTERS_VENDOR_TOKEN_MAPPER_H_
