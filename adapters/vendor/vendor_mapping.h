#ifndef ADAPTERS_VENDOR_VENDOR_MAPPING_H_
#define ADAPTERS_VENDOR_VENDOR_MAPPING_H_

#include <string>
#include <vector>

#include <google/protobuf/message.h>

#include "absl/status/status.h"
#include "adapters/vendor/json_codec.h"
#include "adapters/vendor/vendor_request.h"
#include "inspection/v1/vendor_options.pb.h"
#include "nlohmann/json.hpp"

namespace inspection::vendor {

// How an RPC with no code of its own becomes a vendor call and back: the generic mapping
// the gateway's unary handler uses, read from the route annotation and the messages'
// descriptors alone (json_codec.h does the JSON). The few RPCs that need more keep hooks in
// gateway/services/endpoint_overrides.cc.

// The vendor request of `request` for `route`, every value spelled as the JSON codec spells
// it (EncodeMessage: enum spellings, `_raw` siblings, unset fields left out):
// - each `{name}` of route.path() takes the request's value under JSON key `name` (a
//   string, number or bool; the route table refuses a path parameter whose field is not a
//   singular scalar with the rules `required` and `url_segment`);
// - GET: every other scalar value goes into the query string as key=value, in
//   field-number order (gateway_only fields never);
// - POST and PUT: the JSON body is the whole request (EncodeMessage) less its path keys.
VendorRequest EncodeRequest(const v1::VendorRoute& route, const google::protobuf::Message& request);

// Fills `response` (cleared first) from the vendor's 2xx JSON: into its `(vendor_body)` field
// when it has one (a message from an object, a list of messages from an array, a
// google.protobuf.Value from anything), otherwise DecodeMessage into the response itself.
// InvalidArgument when the JSON does not have that shape; the response is then empty.
absl::Status DecodeResponse(const nlohmann::json& body, google::protobuf::Message* response,
                            DecodeReport* report);

// The names of the `{name}` placeholders of a path template, in order ("/a/{id}/b" -> {"id"});
// an unclosed '{' ends the list.
std::vector<std::string> PathParameters(const std::string& path);

// The `(vendor_body)` field of `message`, or null.
const google::protobuf::FieldDescriptor* VendorBodyField(
    const google::protobuf::Descriptor& message);

}  // namespace inspection::vendor

#endif  // ADAPTERS_VENDOR_VENDOR_MAPPING_H_
