#ifndef ADAPTERS_VENDOR_JSON_CODEC_H_
#define ADAPTERS_VENDOR_JSON_CODEC_H_

#include <string>
#include <vector>

#include <google/protobuf/message.h>
#include <google/protobuf/struct.pb.h>

#include "absl/status/status.h"
#include "nlohmann/json.hpp"

namespace inspection::vendor {

// Reflection-driven translation between the vendor's JSON and our protos, steered by
// the annotations in proto/inspection/v1/vendor_options.proto. The per-resource
// mappers (token_mapper.h, ...) call it and add each resource's quirks.
//
// Decoding never loses data: a key with no typed field, or a value whose JSON type
// does not fit its field, is kept in the message's `unknown_fields` Struct and its
// path reported; an enum value we do not know keeps its raw value in the `x_raw`
// sibling. Nothing here throws.

// What a decode kept aside, for the "vendor drift" metric and logs.
struct DecodeReport {
  // JSON paths (`data[0].classification.newKey`) of values kept in unknown_fields.
  std::vector<std::string> unknown_paths;
  // JSON paths of values whose JSON type did not match the field (also kept).
  std::vector<std::string> type_mismatch_paths;
  // JSON paths of enum values we do not know (kept in their `_raw` sibling).
  std::vector<std::string> unknown_enum_paths;
};

// Decodes `json` into `message` (cleared first). Fails with InvalidArgument only when
// `json` itself does not have the message's shape (an object; an array for
// vendor_tuple / vendor_bare_list messages). `report` may be null.
absl::Status DecodeMessage(const nlohmann::json& json, google::protobuf::Message* message,
                           DecodeReport* report);

// Encodes `message` into the vendor's JSON. Fields marked gateway_only are left out;
// `_raw` siblings win over their enum; unknown_fields are merged back in.
nlohmann::json EncodeMessage(const google::protobuf::Message& message);

// google.protobuf.Value / Struct <-> JSON, losslessly (numbers become doubles, as
// protobuf's Value holds them).
google::protobuf::Value JsonToValue(const nlohmann::json& json);
nlohmann::json ValueToJson(const google::protobuf::Value& value);
google::protobuf::Struct JsonToStruct(const nlohmann::json& object);  // object only
nlohmann::json StructToJson(const google::protobuf::Struct& value);

}  // namespace inspection::vendor

#endif  // ADAPTERS_VENDOR_JSON_CODEC_H_
