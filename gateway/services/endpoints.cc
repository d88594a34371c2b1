#include "gateway/services/endpoints.h"

#include <utility>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

#include "adapters/vendor/request_validation.h"
#include "adapters/vendor/vendor_mapping.h"
#include "adapters/vendor/vendor_routes.h"

namespace inspection::services {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;

Endpoint GenericEndpoint(const routes::Route& route, const EndpointOptions& options) {
  const google::protobuf::MethodDescriptor* method = route.method;
  const v1::VendorRoute* annotation = vendor::VendorRouteOf(*method);
  Endpoint endpoint;
  endpoint.route = route.id;
  endpoint.response_prototype =
      google::protobuf::MessageFactory::generated_factory()->GetPrototype(method->output_type());
  endpoint.validate = [&options](const Message& request) {
    return validation::ValidateRequest(request, options.limits);
  };
  endpoint.encode = [annotation](const Message& request) {
    return vendor::EncodeRequest(*annotation, request);
  };
  endpoint.decode = [](const nlohmann::json& body, const Message&, Message* response,
                       vendor::DecodeReport* report) {
    return vendor::DecodeResponse(body, response, report);
  };
  const FieldDescriptor* key = method->input_type()->FindFieldByName("idempotency_key");
  if (key != nullptr && key->cpp_type() == FieldDescriptor::CPPTYPE_STRING && !key->is_repeated()) {
    endpoint.idempotency_key = [key](const Message& request) {
      return request.GetReflection()->GetString(request, key);
    };
  }
  return endpoint;
}

}  // namespace

Endpoints::Endpoints(EndpointOptions options) : options_(std::move(options)) {
  for (const routes::Route& route : routes::AllRoutes()) {
    endpoints_.push_back(GenericEndpoint(route, options_));
  }
  ApplyEndpointOverrides(options_, endpoints_);
}

}  // namespace inspection::services
