// Fuzz target: a webhook body as the receiver reads it (gateway/webhooks/webhook_receiver.cc,
// Handle): the bounded JSON parser (adapters/vendor/bounded_json.*) with the receiver's
// default depth and element limits, then the event name and the ids through the receiver's
// default RFC 6901 pointers (JsonPointer::Resolve and IdAt, gateway/webhooks/json_pointer.*).
// Each input is parsed twice: with the defaults, and with tight limits (depth 4, 32 values)
// so that short inputs cross both limits.
//
// Oracle beyond the sanitizers: nlohmann's own parser. A body it accepts must be accepted
// (kOk, the same document) when it is within the limits, and refused as too deep / too
// large only when it really is; a body it refuses must be kInvalid or over a limit.

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "adapters/vendor/bounded_json.h"
#include "gateway/webhooks/json_pointer.h"
#include "gateway/webhooks/webhook_receiver.h"
#include "nlohmann/json.hpp"

namespace {

using inspection::vendor::BoundedParseResult;
using inspection::vendor::JsonLimits;
using inspection::webhooks::JsonPointer;
using nlohmann::json;

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "webhook_json_fuzzer: %s\n", what);
  std::abort();
}

// Nesting depth (the top-level container is 1; a scalar 0) and the count of values, as
// JsonLimits counts them. Iterative: nlohmann's own parser accepts any depth.
void Measure(const json& root, int* depth, int64_t* elements) {
  std::vector<std::pair<const json*, int>> stack = {{&root, 0}};
  while (!stack.empty()) {
    const auto [value, level] = stack.back();
    stack.pop_back();
    ++*elements;
    if (!value->is_structured()) continue;
    if (level + 1 > *depth) *depth = level + 1;
    for (const json& item : *value) stack.emplace_back(&item, level + 1);
  }
}

void Check(const std::string& text, const JsonLimits& limits, const json& reference,
           const std::vector<JsonPointer>& pointers) {
  json document;
  const BoundedParseResult result = inspection::vendor::ParseBoundedJson(text, limits, &document);
  if (reference.is_discarded()) {
    if (result == BoundedParseResult::kOk) Fail("kOk for a body nlohmann refuses");
    return;
  }
  int depth = 0;
  int64_t elements = 0;
  if (result == BoundedParseResult::kOk) {
    Measure(document, &depth, &elements);
    if (depth > limits.max_depth) Fail("kOk for a body deeper than max_depth");
    if (elements > limits.max_elements) Fail("kOk for a body with more than max_elements values");
    if (document != reference) Fail("kOk with a document other than nlohmann's");
  } else if (result == BoundedParseResult::kInvalid) {
    Fail("kInvalid for a body nlohmann accepts");
  } else {
    Measure(reference, &depth, &elements);
    if (result == BoundedParseResult::kTooDeep && depth <= limits.max_depth) {
      Fail("kTooDeep for a body within max_depth");
    }
    if (result == BoundedParseResult::kTooManyElements && elements <= limits.max_elements) {
      Fail("kTooManyElements for a body within max_elements");
    }
    return;
  }
  if (!document.is_object()) return;  // 400 bad_json
  const json* name = pointers[0].Resolve(document);
  if (name == nullptr || !name->is_string() || name->get_ref<const std::string&>().empty()) {
    return;  // 400 no_event_name
  }
  for (size_t i = 1; i < pointers.size(); ++i) (void)pointers[i].IdAt(document);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const inspection::webhooks::WebhookReceiverOptions* const defaults =
      new inspection::webhooks::WebhookReceiverOptions();
  static const std::vector<JsonPointer>* const pointers = [] {
    auto* list = new std::vector<JsonPointer>();
    for (const std::string* text : {&defaults->event_name_pointer, &defaults->inspection_id_pointer,
                                    &defaults->token_id_pointer, &defaults->vehicle_id_pointer}) {
      absl::StatusOr<JsonPointer> pointer = JsonPointer::Parse(*text);
      if (!pointer.ok()) Fail("a default pointer does not parse");
      list->push_back(*std::move(pointer));
    }
    // Deeper pointers, as an operator might configure them (README, webhook pointers).
    for (const char* text : {"/data/0/tokenId", "/dataAPI/data/inspectionId", "/a~1b/~0c"}) {
      list->push_back(*JsonPointer::Parse(text));
    }
    return list;
  }();
  const std::string text(reinterpret_cast<const char*>(data), size);
  const json reference = json::parse(text, nullptr, /*allow_exceptions=*/false);
  Check(text, defaults->json_limits, reference, *pointers);
  Check(text, JsonLimits{.max_depth = 4, .max_elements = 32}, reference, *pointers);
  return 0;
}
