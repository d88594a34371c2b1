#include "adapters/vendor/bounded_json.h"

#include <cstddef>
#include <exception>
#include <string>

namespace inspection::vendor {
namespace {

using nlohmann::json;

// nlohmann's own SAX-to-DOM builder, with every event counted first: a value past
// max_elements, or a container past max_depth, stops the parse (returning false from a
// SAX event ends sax_parse at once).
class BoundedDomBuilder {
 public:
  BoundedDomBuilder(json* out, const JsonLimits& limits)
      : dom_(*out, /*allow_exceptions=*/false), limits_(limits) {}

  BoundedParseResult result() const { return result_; }

  bool null() { return Value() && dom_.null(); }
  bool boolean(bool value) { return Value() && dom_.boolean(value); }
  bool number_integer(json::number_integer_t value) {
    return Value() && dom_.number_integer(value);
  }
  bool number_unsigned(json::number_unsigned_t value) {
    return Value() && dom_.number_unsigned(value);
  }
  bool number_float(json::number_float_t value, const std::string& text) {
    return Value() && dom_.number_float(value, text);
  }
  bool string(std::string& value) { return Value() && dom_.string(value); }
  bool binary(json::binary_t& value) { return Value() && dom_.binary(value); }
  bool start_object(std::size_t size) { return Open() && dom_.start_object(size); }
  bool key(std::string& name) { return dom_.key(name); }
  bool end_object() {
    --depth_;
    return dom_.end_object();
  }
  bool start_array(std::size_t size) { return Open() && dom_.start_array(size); }
  bool end_array() {
    --depth_;
    return dom_.end_array();
  }
  bool parse_error(std::size_t position, const std::string& token,
                   const nlohmann::detail::exception& error) {
    result_ = BoundedParseResult::kInvalid;
    return dom_.parse_error(position, token, error);
  }

 private:
  bool Value() {
    if (++elements_ > limits_.max_elements) {
      result_ = BoundedParseResult::kTooManyElements;
      return false;
    }
    return true;
  }

  bool Open() {
    if (!Value()) return false;
    if (++depth_ > limits_.max_depth) {
      result_ = BoundedParseResult::kTooDeep;
      return false;
    }
    return true;
  }

  nlohmann::detail::json_sax_dom_parser<json> dom_;
  const JsonLimits limits_;
  int depth_ = 0;
  int64_t elements_ = 0;
  BoundedParseResult result_ = BoundedParseResult::kOk;
};

}  // namespace

BoundedParseResult ParseBoundedJson(absl::string_view text, const JsonLimits& limits, json* out) {
  *out = json();
  BoundedDomBuilder builder(out, limits);
  bool complete = false;
  try {
    complete = json::sax_parse(text.begin(), text.end(), &builder);
  } catch (const std::exception&) {
    return BoundedParseResult::kInvalid;  // not reached with allow_exceptions=false
  }
  if (builder.result() != BoundedParseResult::kOk) return builder.result();
  return complete ? BoundedParseResult::kOk : BoundedParseResult::kInvalid;
}

}  // namespace inspection::vendor
