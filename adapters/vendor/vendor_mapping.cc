#include "adapters/vendor/vendor_mapping.h"

#include <optional>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"

namespace inspection::vendor {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

// A scalar JSON value as query or path text: a string as it is, a number or bool as JSON
// writes it (a double with all its digits); nullopt for null, an array or an object.
std::optional<std::string> ScalarText(const nlohmann::json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_number() || value.is_boolean()) return value.dump();
  return std::nullopt;
}

// Appends the paths of `item` to `report` under "[i].".
void MergeReport(const DecodeReport& item, size_t index, DecodeReport* report) {
  if (report == nullptr) return;
  const std::string prefix = absl::StrCat("[", index, "].");
  for (const auto& path : item.unknown_paths) report->unknown_paths.push_back(prefix + path);
  for (const auto& path : item.type_mismatch_paths) {
    report->type_mismatch_paths.push_back(prefix + path);
  }
  for (const auto& path : item.unknown_enum_paths) {
    report->unknown_enum_paths.push_back(prefix + path);
  }
}

absl::Status DecodeList(const nlohmann::json& body, Message* response, const FieldDescriptor* field,
                        DecodeReport* report) {
  if (!body.is_array()) {
    return absl::InvalidArgumentError(absl::StrCat("expected a JSON array of ",
                                                   field->message_type()->name(), " for ",
                                                   field->name(), ", got ", body.type_name()));
  }
  const Reflection* reflection = response->GetReflection();
  for (size_t i = 0; i < body.size(); ++i) {
    DecodeReport item_report;
    absl::Status status =
        DecodeMessage(body[i], reflection->AddMessage(response, field), &item_report);
    if (!status.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("[", i, "]: ", status.message()));
    }
    MergeReport(item_report, i, report);
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<std::string> PathParameters(const std::string& path) {
  std::vector<std::string> names;
  for (size_t open = path.find('{'); open != std::string::npos; open = path.find('{', open)) {
    const size_t close = path.find('}', open);
    if (close == std::string::npos) break;
    names.push_back(path.substr(open + 1, close - open - 1));
    open = close;
  }
  return names;
}

const FieldDescriptor* VendorBodyField(const google::protobuf::Descriptor& message) {
  for (int i = 0; i < message.field_count(); ++i) {
    if (message.field(i)->options().GetExtension(v1::vendor_body)) return message.field(i);
  }
  return nullptr;
}

VendorRequest EncodeRequest(const v1::VendorRoute& route, const Message& request) {
  VendorRequest out;
  const google::protobuf::Descriptor* descriptor = request.GetDescriptor();
  const std::vector<std::string> path_names = PathParameters(route.path());
  // A GET of nothing (GetWebhookConfig, ListEventConfigs): no JSON to build per call.
  if (route.method() == v1::VENDOR_HTTP_METHOD_GET && path_names.empty() &&
      request.ByteSizeLong() == 0) {
    return out;
  }
  // The codec's spelling of every value (enum spellings, `_raw` siblings, unset fields left
  // out), so that a value reads the same in a path, a query and a body.
  nlohmann::json encoded = EncodeMessage(request);
  if (!encoded.is_object()) encoded = nlohmann::json::object();  // a tuple or bare list
  std::set<std::string> in_path;
  for (const std::string& name : path_names) {
    const auto value = encoded.find(name);
    out.path_params.emplace_back(
        name, value == encoded.end() ? std::string() : ScalarText(*value).value_or(""));
    in_path.insert(name);
  }
  if (route.method() == v1::VENDOR_HTTP_METHOD_GET) {
    // Field-number order, as the vendor's examples list them.
    for (int i = 0; i < descriptor->field_count(); ++i) {
      const std::string& key = descriptor->field(i)->json_name();
      const auto value = encoded.find(key);
      if (value == encoded.end() || in_path.count(key) > 0) continue;
      if (std::optional<std::string> text = ScalarText(*value); text.has_value()) {
        out.query.emplace_back(key, std::move(*text));
      }
    }
    return out;
  }
  for (const std::string& key : in_path) encoded.erase(key);
  out.body = std::move(encoded);
  return out;
}

absl::Status DecodeResponse(const nlohmann::json& body, Message* response, DecodeReport* report) {
  response->Clear();
  const FieldDescriptor* field = VendorBodyField(*response->GetDescriptor());
  if (field == nullptr) return DecodeMessage(body, response, report);
  absl::Status status;
  if (field->is_repeated() && field->message_type() != nullptr) {
    status = DecodeList(body, response, field, report);
  } else if (field->message_type() != nullptr &&
             field->message_type()->full_name() == "google.protobuf.Value") {
    response->GetReflection()->MutableMessage(response, field)->CopyFrom(JsonToValue(body));
  } else if (field->message_type() != nullptr) {
    status =
        DecodeMessage(body, response->GetReflection()->MutableMessage(response, field), report);
  } else {
    status = absl::InvalidArgumentError(
        absl::StrCat(field->full_name(), ": vendor_body needs a message field"));
  }
  if (!status.ok()) response->Clear();  // never half-filled
  return status;
}

}  // namespace inspection::vendor
