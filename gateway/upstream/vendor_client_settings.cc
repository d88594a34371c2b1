#include "gateway/upstream/vendor_client_settings.h"

#include <ratio>

namespace inspection::upstream {

using settings::kDayMs;

settings::Schema<VendorClientOptions> VendorClientSchema() {
  return {{
      settings::String<VendorClientOptions>(
          kUpstreamUrlKey, [](auto& o) -> auto& { return o.base_url; }, settings::BaseUrl, "URL",
          "Base URL of the vendor REST API (absolute http(s); a trailing '/' is dropped).",
          /*required=*/true),
      settings::Duration<std::milli, VendorClientOptions>(
          kAttemptTimeoutKey, [](auto& o) -> auto& { return o.max_attempt_timeout; }, 1, kDayMs,
          "MS",
          "Upper bound on one vendor attempt; each route has its own timeout (5-30 s) and "
          "routes above this bound are clamped to it."),
      settings::Integer<VendorClientOptions>(
          "upstream.max_json_depth", [](auto& o) -> auto& { return o.max_json_depth; }, 1, 10000,
          "N",
          "Nesting of objects and arrays in a vendor answer; deeper: the call fails with "
          "VENDOR_MALFORMED_RESPONSE (checked while parsing)."),
      settings::Integer<VendorClientOptions>(
          "upstream.max_json_elements", [](auto& o) -> auto& { return o.max_json_elements; }, 1,
          int64_t{1} << 40, "N",
          "JSON values (objects, arrays and scalars, each one) in a vendor answer, counted while "
          "parsing; more: the call fails with VENDOR_RESPONSE_TOO_LARGE (RESOURCE_EXHAUSTED, not "
          "retried). Decoded, a value costs up to about 320 bytes (the JSON tree and its "
          "protobuf copy), which upstream.max_response_bytes, counting text, does not see: the "
          "default is about 80 MB per answer at worst."),
  }};
}

}  // namespace inspection::upstream
