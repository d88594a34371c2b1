#ifndef GATEWAY_WEBHOOKS_JSON_POINTER_H_
#define GATEWAY_WEBHOOKS_JSON_POINTER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace inspection::webhooks {

// An RFC 6901 JSON pointer ("/dataAPI/data/tokenId", "/items/0", "" for the whole
// document), parsed once at start-up and resolved per request without exceptions
// (nlohmann's json_pointer throws on syntax errors and on some lookups).
//
// Thread-safety: immutable after Parse(); Resolve() may be called concurrently.
class JsonPointer {
 public:
  // InvalidArgument when `text` is neither "" nor starts with '/', or holds a '~' not
  // followed by '0' or '1'.
  static absl::StatusOr<JsonPointer> Parse(const std::string& text);

  // The value `document` holds at this pointer, or nullptr when there is none: a missing
  // member, an array index that is not a canonical decimal ("01", "-", "+1") or is out of
  // range, or a step into a scalar. The result points into `document`.
  const nlohmann::json* Resolve(const nlohmann::json& document) const;

  // The correlation id at this pointer, as the webhook receiver stores it: a string as-is, an
  // integer in decimal (some payloads carry numeric ids), "" for anything else (absent, null,
  // fractional numbers, objects...).
  std::string IdAt(const nlohmann::json& document) const;

  // The pointer as configured, e.g. for error messages.
  const std::string& text() const { return text_; }

 private:
  JsonPointer(std::string text, std::vector<std::string> tokens)
      : text_(std::move(text)), tokens_(std::move(tokens)) {}

  std::string text_;
  std::vector<std::string> tokens_;  // unescaped reference tokens
};

}  // namespace inspection::webhooks

#endif  // GATEWAY_WEBHOOKS_JSON_POINTER_H_
