#ifndef ADAPTERS_VENDOR_BOUNDED_JSON_H_
#define ADAPTERS_VENDOR_BOUNDED_JSON_H_

#include <cstdint>

#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace inspection::vendor {

// How much structure a JSON document from outside may have: a webhook body (the webhook
// receiver's defaults, below) or a vendor answer (the vendor client: depth only). Checked
// while parsing, so a body past a limit costs no more than the limit: 8 MiB of `[[[[...` is
// refused at depth 65, not turned into a DOM of hundreds of megabytes. The depth also keeps
// the recursive code that walks a document later (nlohmann's dump, for one) off the end of
// its thread's stack.
struct JsonLimits {
  int max_depth = 64;             // nested objects and arrays; the top-level object is 1
  int64_t max_elements = 100000;  // values of any kind (object members and array items)
};

enum class BoundedParseResult {
  kOk,
  kInvalid,          // not JSON
  kTooDeep,          // nesting over max_depth
  kTooManyElements,  // more than max_elements values
};

// Parses `text` into `out` (nlohmann's DOM builder, driven through its SAX interface),
// stopping at the first limit passed. Never throws. On anything but kOk, `out` is
// unspecified.
BoundedParseResult ParseBoundedJson(absl::string_view text, const JsonLimits& limits,
                                    nlohmann::json* out);

}  // namespace inspection::vendor

#endif  // ADAPTERS_VENDOR_BOUNDED_JSON_H_
