#ifndef ADAPTERS_VENDOR_VENDOR_MAPPING_H_
#define ADAPTERS_VENDOR_VENDOR_MAPPING_H_

#include <string>

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

// The vendor request of `request` for `route`:
// - each `{name}` of route.path() takes the value of the request field whose json_name is
//   `name` (a string, integer or bool field);
// - GET: every other set scalar field goes into the query string as json_name=value, in
//   field-number order (a field with presence when it is set, one without when it is not
//   its default; gateway_only fields never; an enum as its vendor_string);
// - POST and PUT: the JSON body is the whole request (EncodeMessage) less its path fields.
VendorRequest EncodeRequest(const v1::VendorRoute& route, const google::protobuf::Message& request);

// Fills `response` (cleared first) from the vendor's 2xx JSON: into its `(vendor_body)` field
// when it has one (a message from an object, a list of messages from an array, a
// google.protobuf.Value from anything), otherwise DecodeMessage into the response itself.
// InvalidArgument when the JSON does not have that shape; the response is then empty.
absl::Status DecodeResponse(const nlohmann::json& body, google::protobuf::Message* response,
                            DecodeReport* report);

// The `(vendor_body)` field of `message`, or null.
const google::protobuf::FieldDescriptor* VendorBodyField(
    const google::protobuf::Descriptor& message);

}  // namespace inspection::vendor

#endif  // ADAPTERS_VENDOR_VENDOR_MAPPING_H_
