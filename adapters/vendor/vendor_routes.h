#ifndef ADAPTERS_VENDOR_VENDOR_ROUTES_H_
#define ADAPTERS_VENDOR_VENDOR_ROUTES_H_

#include <string>
#include <vector>

#include <google/protobuf/descriptor.h>

#include "inspection/v1/vendor_options.pb.h"

namespace inspection::vendor {

// The route annotations of the public API (inspection.v1, vendor_options.proto), read from
// the generated descriptors: the one place each RPC's vendor endpoint is declared. The
// gateway's route table and the sandbox's router are built from them.

// Every RPC of every inspection.v1 service, in file then declaration order, then those of
// files added with RegisterApiFile.
const std::vector<const google::protobuf::MethodDescriptor*>& ApiMethods();

// Adds the services of `file` to ApiMethods(): for a test's own proto, whose annotated RPCs
// the gateway then routes and serves like the API's (tests/generic_unary).
// Must run before anything reads ApiMethods() (the route table is built once); aborts
// otherwise.
void RegisterApiFile(const google::protobuf::FileDescriptor* file);

// The RPC's vendor_route annotation, or null when it has none.
const v1::VendorRoute* VendorRouteOf(const google::protobuf::MethodDescriptor& method);

// "inspection.v1.TokenService.CreateToken" -> the method; null when there is none.
const google::protobuf::MethodDescriptor* FindApiMethod(const std::string& full_name);

// "/inspection.v1.TokenService/CreateToken": the method's name on the wire.
std::string GrpcPath(const google::protobuf::MethodDescriptor& method);

// "GET", "POST", "PUT"; "" for an unspecified method.
std::string HttpMethodName(v1::VendorHttpMethod method);

}  // namespace inspection::vendor

#endif  // ADAPTERS_VENDOR_VENDOR_ROUTES_H_
