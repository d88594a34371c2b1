#include "sandbox/emulator/request_checks.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <functional>
#include <utility>
#include <vector>

#include "adapters/vendor/event_mapper.h"
#include "adapters/vendor/json_codec.h"
#include "inspection/v1/vendor_options.pb.h"

namespace inspection::sandbox {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::EnumDescriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using nlohmann::json;
using validation::FieldViolation;
using validation::Violations;

// The gateway's own validation of a request type (its `(rules)` annotations), as the
// sandbox's typed check.
template <class Request>
Violations ValidateTyped(const Request& request) {
  return validation::ValidateRequest(request);
}

constexpr char kBodyField[] = "body";

// A field of `type` by its vendor JSON key: its json_name or one of its vendor_alias
// spellings (the codec accepts both).
const FieldDescriptor* FieldByJsonKey(const Descriptor* type, const std::string& key) {
  if (type == nullptr) return nullptr;
  for (int i = 0; i < type->field_count(); ++i) {
    const FieldDescriptor* field = type->field(i);
    if (field->json_name() == key) return field;
    const auto& options = field->options();
    for (int a = 0; a < options.ExtensionSize(v1::vendor_alias); ++a) {
      if (options.GetExtension(v1::vendor_alias, a) == key) return field;
    }
  }
  return nullptr;
}

// Splits `a.b[2].c` into {"a", "b[2]", "c"}.
std::vector<std::string> SplitPath(const std::string& path) {
  std::vector<std::string> segments;
  std::string current;
  for (char c : path) {
    if (c == '.') {
      segments.push_back(std::move(current));
      current.clear();
    } else {
      current.push_back(c);
    }
  }
  segments.push_back(std::move(current));
  return segments;
}

// `b[2]` -> {"b", "[2]"}.
std::pair<std::string, std::string> SplitIndex(const std::string& segment) {
  const size_t bracket = segment.find('[');
  if (bracket == std::string::npos) return {segment, ""};
  return {segment.substr(0, bracket), segment.substr(bracket)};
}

// The field a vendor JSON path (`customer.locale`, `urls`) designates, or nullptr.
const FieldDescriptor* ResolveJsonPath(const Descriptor* type, const std::string& json_path) {
  const FieldDescriptor* field = nullptr;
  for (const std::string& segment : SplitPath(json_path)) {
    if (field != nullptr) {
      type = field->message_type();
      if (type == nullptr) return nullptr;
    }
    field = FieldByJsonKey(type, SplitIndex(segment).first);
    if (field == nullptr) return nullptr;
  }
  return field;
}

// The vendor spellings of an enum's values: `en, fr, ...`, `0, 1, 2, null`.
std::string EnumSpellings(const EnumDescriptor* type) {
  std::string out;
  for (int i = 0; i < type->value_count(); ++i) {
    const auto& options = type->value(i)->options();
    std::string spelled;
    if (options.HasExtension(v1::vendor_string)) {
      spelled = options.GetExtension(v1::vendor_string);
    } else if (options.HasExtension(v1::vendor_number)) {
      spelled = std::to_string(options.GetExtension(v1::vendor_number));
    } else if (options.GetExtension(v1::vendor_null)) {
      spelled = "null";
    } else {
      continue;  // UNSPECIFIED: not a vendor value
    }
    if (!out.empty()) out += ", ";
    out += spelled;
  }
  return out;
}

// What a field expects, in JSON terms, for a type-mismatch message.
std::string ExpectedJson(const FieldDescriptor* field) {
  std::string element;
  switch (field->cpp_type()) {
    case FieldDescriptor::CPPTYPE_BOOL:
      element = "a boolean";
      break;
    case FieldDescriptor::CPPTYPE_INT32:
    case FieldDescriptor::CPPTYPE_INT64:
    case FieldDescriptor::CPPTYPE_UINT32:
    case FieldDescriptor::CPPTYPE_UINT64:
      element = "an integer";
      break;
    case FieldDescriptor::CPPTYPE_DOUBLE:
    case FieldDescriptor::CPPTYPE_FLOAT:
      element = "a number";
      break;
    case FieldDescriptor::CPPTYPE_STRING:
      element = "a string";
      break;
    case FieldDescriptor::CPPTYPE_ENUM:
      element = "one of " + EnumSpellings(field->enum_type());
      break;
    case FieldDescriptor::CPPTYPE_MESSAGE:
      element = "an object";
      break;
  }
  return field->is_repeated() ? "an array of " + element.substr(element.find(' ') + 1) + "s"
                              : element;
}

// Decodes `body` into `message`; JSON type mismatches and unknown enum values become
// violations (the typed rules would otherwise report a misleading "required").
Violations DecodeVendorJson(const json& body, Message* message) {
  Violations out;
  if (!body.is_object()) {
    out.push_back({kBodyField, "The request body must be a JSON object."});
    return out;
  }
  vendor::DecodeReport report;
  if (!vendor::DecodeMessage(body, message, &report).ok()) {
    out.push_back({kBodyField, "The request body must be a JSON object."});
    return out;
  }
  const Descriptor* type = message->GetDescriptor();
  for (const std::string& path : report.type_mismatch_paths) {
    const FieldDescriptor* field = ResolveJsonPath(type, path);
    out.push_back({path, field != nullptr ? path + " must be " + ExpectedJson(field) + "."
                                          : path + " has the wrong JSON type."});
  }
  for (const std::string& path : report.unknown_enum_paths) {
    const FieldDescriptor* field = ResolveJsonPath(type, path);
    out.push_back({path, field != nullptr && field->enum_type() != nullptr
                             ? path + " must be one of " + EnumSpellings(field->enum_type()) + "."
                             : path + " is not an allowed value."});
  }
  return out;
}

// Replaces every occurrence of `from` in `text` with `to`.
std::string ReplaceAll(std::string text, const std::string& from, const std::string& to) {
  if (from.empty() || from == to) return text;
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
  return text;
}

// The typed rules' violations in vendor spelling: the field path, and the same path where
// the description quotes it.
Violations ToVendorSpelling(const Descriptor* type, Violations violations) {
  for (FieldViolation& violation : violations) {
    const std::string vendor_path = VendorFieldPath(type, violation.field);
    violation.description = ReplaceAll(violation.description, violation.field, vendor_path);
    violation.field = vendor_path;
  }
  return violations;
}

bool Covers(const std::string& reported, const std::string& field) {
  if (reported == field) return true;
  if (field.size() <= reported.size() || field.compare(0, reported.size(), reported) != 0) {
    return false;
  }
  const char next = field[reported.size()];
  return next == '.' || next == '[';
}

// `first` then those of `second` about a field `first` does not already report (or
// contain): the JSON-level message is the more precise one.
Violations Merge(Violations first, const Violations& second) {
  const size_t reported = first.size();
  for (const FieldViolation& violation : second) {
    bool covered = false;
    for (size_t i = 0; i < reported && !covered; ++i) {
      covered = Covers(first[i].field, violation.field) || first[i].field == kBodyField;
    }
    if (!covered) first.push_back(violation);
  }
  return first;
}

// The common path: JSON-level violations (precomputed), decode, typed rule.
template <class Request>
Violations CheckTyped(const json& body, Request* request, Violations json_level,
                      const std::function<Violations(const Request&)>& rule) {
  Violations decoded = DecodeVendorJson(body, request);
  Violations all = Merge(std::move(json_level), decoded);
  for (const FieldViolation& violation : all) {
    if (violation.field == kBodyField) return all;  // nothing typed to check
  }
  return Merge(std::move(all), ToVendorSpelling(Request::descriptor(), rule(*request)));
}

// `json[key]` when `json` is an object holding it, else nullptr.
const json* Member(const json& object, const char* key) {
  if (!object.is_object()) return nullptr;
  auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

void CheckFixedBoolean(const json& parent, const char* parent_name, const char* key, bool fixed,
                       Violations* out) {
  const json* value = Member(parent, key);
  if (value == nullptr) return;
  if (!value->is_boolean() || value->get<bool>() != fixed) {
    const std::string path = std::string(parent_name) + "." + key;
    out->push_back({path, path + " must be " + (fixed ? "true" : "false") +
                              " (the only value the API accepts)."});
  }
}

std::string EventNameList() {
  std::string out;
  for (const std::string& name : KnownEventNames()) {
    if (!out.empty()) out += ", ";
    out += name;
  }
  return out;
}

// eventName: present, a string, one of the spec's names.
void CheckEventNameJson(const json& params, Violations* out) {
  const json* name = Member(params, "eventName");
  if (name == nullptr || name->is_null()) {
    out->push_back({"eventName", "eventName is required: one of " + EventNameList() + "."});
  } else if (!name->is_string() || !IsKnownEventName(name->get<std::string>())) {
    out->push_back({"eventName", "eventName must be one of " + EventNameList() + "."});
  }
}

// The codec fills both the enum and its raw sibling for a known name; the typed rule
// wants exactly one of them.
template <class Request>
void NormaliseEventName(Request* request) {
  if (request->event_name() != v1::EVENT_NAME_UNSPECIFIED) request->clear_event_name_raw();
}

Violations CheckUrlsRequest(const json& body, Message* request,
                            const std::function<Violations()>& rule) {
  Violations decoded = DecodeVendorJson(body, request);
  for (const FieldViolation& violation : decoded) {
    if (violation.field == kBodyField) return decoded;
  }
  return Merge(std::move(decoded), ToVendorSpelling(request->GetDescriptor(), rule()));
}

// A strictly decimal int32, for query parameters.
bool ParseInt32(const std::string& text, int* out) {
  if (text.empty() || text.size() > 11) return false;
  char* end = nullptr;
  errno = 0;
  const long value = std::strtol(text.c_str(), &end, 10);
  if (errno != 0 || end != text.c_str() + text.size() || value < INT_MIN || value > INT_MAX) {
    return false;
  }
  *out = static_cast<int>(value);
  return true;
}

}  // namespace

Violations CheckRequest(const json& body, Message* request) {
  Violations all = DecodeVendorJson(body, request);
  for (const FieldViolation& violation : all) {
    if (violation.field == kBodyField) return all;  // nothing typed to check
  }
  return Merge(std::move(all),
               ToVendorSpelling(request->GetDescriptor(), validation::ValidateRequest(*request)));
}

const std::vector<std::string>& KnownEventNames() { return vendor::SpecEventNames(); }

bool IsKnownEventName(const std::string& name) {
  const auto& names = KnownEventNames();
  return std::find(names.begin(), names.end(), name) != names.end();
}

std::string VendorFieldPath(const Descriptor* type, const std::string& proto_path) {
  std::string out;
  for (const std::string& segment : SplitPath(proto_path)) {
    auto [name, index] = SplitIndex(segment);
    const FieldDescriptor* field = nullptr;
    if (type != nullptr) {
      // `x_raw` carries the vendor's raw value of `x`: the vendor knows only `x`.
      if (name.size() > 4 && name.compare(name.size() - 4, 4, "_raw") == 0) {
        field = type->FindFieldByName(name.substr(0, name.size() - 4));
      }
      if (field == nullptr) field = type->FindFieldByName(name);
    }
    if (!out.empty()) out += '.';
    out += (field != nullptr ? field->json_name() : name) + index;
    type = field != nullptr ? field->message_type() : nullptr;
  }
  return out;
}

Violations CheckCreateToken(const json& body, v1::CreateTokenRequest* request) {
  Violations json_level;
  if (const json* options = Member(body, "options")) {
    CheckFixedBoolean(*options, "options", "cost", false, &json_level);
    CheckFixedBoolean(*options, "options", "report", false, &json_level);
    CheckFixedBoolean(*options, "options", "downloadRoi", false, &json_level);
  }
  if (const json* trade_in = Member(body, "tradeIn");
      trade_in != nullptr && trade_in->is_object()) {
    CheckFixedBoolean(*trade_in, "tradeIn", "tradeinVehicle", true, &json_level);
    if (Member(*trade_in, "sendingType") == nullptr) {
      json_level.push_back({"tradeIn.sendingType",
                            "tradeIn.sendingType is required: 0 (e-mail), 1 (SMS), 2 (both) or "
                            "null (create the token and send no message)."});
    }
  }
  if (const json* customer = Member(body, "customer")) {
    if (const json* client_type = Member(*customer, "clientType");
        client_type != nullptr && *client_type != "customer") {
      json_level.push_back({"customer.clientType",
                            "customer.clientType must be \"customer\" (the only value the API "
                            "accepts)."});
    }
  }
  return CheckTyped<v1::CreateTokenRequest>(body, request, std::move(json_level),
                                            ValidateTyped<v1::CreateTokenRequest>);
}

Violations CheckRemoveBackground(const json& body, v1::RemoveBackgroundRequest* request) {
  return CheckRequest(body, request);
}

Violations CheckAssessQuality(const json& body, v1::AssessQualityRequest* request) {
  return CheckRequest(body, request);
}

Violations CheckAssessQualityBatch(const json& body, v1::AssessQualityBatchRequest* request) {
  return CheckUrlsRequest(body, request,
                          [request] { return validation::ValidateRequest(*request); });
}

Violations CheckSegmentVehicle(const json& body, v1::SegmentVehicleRequest* request) {
  return CheckUrlsRequest(body, request,
                          [request] { return validation::ValidateRequest(*request); });
}

Violations CheckSegmentParts(const json& body, v1::SegmentPartsRequest* request) {
  return CheckUrlsRequest(body, request,
                          [request] { return validation::ValidateRequest(*request); });
}

Violations CheckDetectDamage(const json& body, v1::DetectDamageRequest* request) {
  return CheckUrlsRequest(body, request,
                          [request] { return validation::ValidateRequest(*request); });
}

Violations CheckUpdateWebhookConfig(const json& body, v1::UpdateWebhookConfigRequest* request) {
  return CheckRequest(body, request);
}

Violations CheckUpdateEventConfig(const json& body, v1::UpdateEventConfigRequest* request) {
  Violations json_level;
  if (body.is_object()) CheckEventNameJson(body, &json_level);
  return CheckTyped<v1::UpdateEventConfigRequest>(body, request, std::move(json_level),
                                                  [](const v1::UpdateEventConfigRequest& typed) {
                                                    v1::UpdateEventConfigRequest normalised = typed;
                                                    NormaliseEventName(&normalised);
                                                    return validation::ValidateRequest(normalised);
                                                  });
}

Violations CheckTestWebhook(const json& params, v1::TestWebhookRequest* request) {
  Violations json_level;
  if (params.is_object()) CheckEventNameJson(params, &json_level);
  Violations all = CheckTyped<v1::TestWebhookRequest>(
      params, request, std::move(json_level), [](const v1::TestWebhookRequest& typed) {
        v1::TestWebhookRequest normalised = typed;
        NormaliseEventName(&normalised);
        return validation::ValidateRequest(normalised);
      });
  NormaliseEventName(request);
  return all;
}

Violations CheckSearchInspections(const std::map<std::string, std::string>& query,
                                  v1::SearchInspectionsRequest* request) {
  request->Clear();
  Violations json_level;
  if (auto it = query.find("licensePlate"); it != query.end()) {
    request->set_license_plate(it->second);
  }
  if (auto it = query.find("username"); it != query.end()) request->set_username(it->second);
  for (const char* key : {"page", "limit"}) {
    auto it = query.find(key);
    if (it == query.end()) continue;
    int value = 0;
    if (!ParseInt32(it->second, &value)) {
      json_level.push_back({key, std::string(key) + " must be an integer."});
      continue;
    }
    if (std::string(key) == "page") {
      request->set_page(value);
    } else {
      request->set_limit(value);
    }
  }
  validation::ValidationLimits limits;
  limits.search_max_limit = kSearchMaxLimit;
  return Merge(std::move(json_level),
               ToVendorSpelling(v1::SearchInspectionsRequest::descriptor(),
                                validation::ValidateRequest(*request, limits)));
}

Violations CheckDeviceId(const std::string* device_id, std::string* uid) {
  constexpr char kSuffix[] = "-pwa";
  constexpr size_t kSuffixLength = sizeof(kSuffix) - 1;
  if (device_id == nullptr || device_id->empty()) {
    return {{"deviceId", "deviceId is required: the token uid followed by -pwa."}};
  }
  if (device_id->size() <= kSuffixLength ||
      device_id->compare(device_id->size() - kSuffixLength, kSuffixLength, kSuffix) != 0) {
    return {{"deviceId", "deviceId must be the token uid followed by -pwa (<uid>-pwa)."}};
  }
  *uid = device_id->substr(0, device_id->size() - kSuffixLength);
  v1::GetTokenStatusRequest typed;
  typed.set_uid(*uid);
  Violations out;
  for (FieldViolation violation : validation::ValidateRequest(typed)) {
    // The rule is about the uid inside deviceId; "-pwa" is checked above.
    violation.description = ReplaceAll(violation.description, "uid", "the uid in deviceId");
    violation.field = "deviceId";
    out.push_back(std::move(violation));
  }
  return out;
}

Violations CheckDamagesReportId(const std::string& inspection_id) {
  v1::GetDamagesReportRequest typed;
  typed.set_inspection_id(inspection_id);
  return ToVendorSpelling(v1::GetDamagesReportRequest::descriptor(),
                          validation::ValidateRequest(typed));
}

}  // namespace inspection::sandbox
