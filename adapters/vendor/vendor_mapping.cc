#include "adapters/vendor/vendor_mapping.h"

#include <set>
#include <utility>

#include "absl/strings/str_cat.h"

namespace inspection::vendor {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

// The `{name}` placeholders of a path template, in order.
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

const FieldDescriptor* FieldByJsonName(const google::protobuf::Descriptor& message,
                                       const std::string& name) {
  for (int i = 0; i < message.field_count(); ++i) {
    if (message.field(i)->json_name() == name) return message.field(i);
  }
  return nullptr;
}

// Whether a singular field is set: HasField for a field with presence, not the default
// otherwise (proto3 HasField says exactly that for scalars).
bool IsSet(const Message& message, const FieldDescriptor* field) {
  return message.GetReflection()->HasField(message, field);
}

// A scalar field's value as query or path text; nullopt for a field that is not a scalar.
std::optional<std::string> ScalarText(const Message& message, const FieldDescriptor* field) {
  const Reflection* reflection = message.GetReflection();
  switch (field->cpp_type()) {
    case FieldDescriptor::CPPTYPE_STRING:
      return reflection->GetString(message, field);
    case FieldDescriptor::CPPTYPE_INT32:
      return absl::StrCat(reflection->GetInt32(message, field));
    case FieldDescriptor::CPPTYPE_INT64:
      return absl::StrCat(reflection->GetInt64(message, field));
    case FieldDescriptor::CPPTYPE_UINT32:
      return absl::StrCat(reflection->GetUInt32(message, field));
    case FieldDescriptor::CPPTYPE_UINT64:
      return absl::StrCat(reflection->GetUInt64(message, field));
    case FieldDescriptor::CPPTYPE_BOOL:
      return reflection->GetBool(message, field) ? "true" : "false";
    case FieldDescriptor::CPPTYPE_DOUBLE:
      return absl::StrCat(reflection->GetDouble(message, field));
    case FieldDescriptor::CPPTYPE_FLOAT:
      return absl::StrCat(reflection->GetFloat(message, field));
    case FieldDescriptor::CPPTYPE_ENUM: {
      const auto* value = reflection->GetEnum(message, field);
      const std::string& spelling = value->options().GetExtension(v1::vendor_string);
      return spelling.empty() ? value->name() : spelling;
    }
    default:
      return std::nullopt;
  }
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

const FieldDescriptor* VendorBodyField(const google::protobuf::Descriptor& message) {
  for (int i = 0; i < message.field_count(); ++i) {
    if (message.field(i)->options().GetExtension(v1::vendor_body)) return message.field(i);
  }
  return nullptr;
}

VendorRequest EncodeRequest(const v1::VendorRoute& route, const Message& request) {
  VendorRequest out;
  const google::protobuf::Descriptor* descriptor = request.GetDescriptor();
  std::set<const FieldDescriptor*> in_path;
  for (const std::string& name : PathParameters(route.path())) {
    const FieldDescriptor* field = FieldByJsonName(*descriptor, name);
    if (field == nullptr || field->is_repeated()) continue;  // caught by route_table_test
    std::optional<std::string> text = ScalarText(request, field);
    out.path_params.emplace_back(name, text.value_or(""));
    in_path.insert(field);
  }
  if (route.method() == v1::VENDOR_HTTP_METHOD_GET) {
    for (int i = 0; i < descriptor->field_count(); ++i) {
      const FieldDescriptor* field = descriptor->field(i);
      if (field->is_repeated() || in_path.count(field) > 0 ||
          field->options().GetExtension(v1::gateway_only) || !IsSet(request, field)) {
        continue;
      }
      if (std::optional<std::string> text = ScalarText(request, field); text.has_value()) {
        out.query.emplace_back(field->json_name(), std::move(*text));
      }
    }
    return out;
  }
  nlohmann::json body = EncodeMessage(request);
  for (const FieldDescriptor* field : in_path) body.erase(field->json_name());
  out.body = std::move(body);
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
