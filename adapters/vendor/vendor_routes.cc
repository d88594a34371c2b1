#include "adapters/vendor/vendor_routes.h"

#include <cstdio>
#include <cstdlib>
#include <iterator>

#include "inspection/v1/damage.pb.h"
#include "inspection/v1/event.pb.h"
#include "inspection/v1/event_config.pb.h"
#include "inspection/v1/image.pb.h"
#include "inspection/v1/inspection.pb.h"
#include "inspection/v1/token.pb.h"

namespace inspection::vendor {

namespace {

struct ExtraFiles {
  std::vector<const google::protobuf::FileDescriptor*> files;
  bool read = false;  // ApiMethods() has been built: registering now would be lost
};

ExtraFiles& Extra() {
  static auto* const extra = new ExtraFiles();
  return *extra;
}

}  // namespace

void RegisterApiFile(const google::protobuf::FileDescriptor* file) {
  if (Extra().read) {
    std::fprintf(stderr, "RegisterApiFile(%s) after ApiMethods() was built\n",
                 file->name().c_str());
    std::abort();
  }
  Extra().files.push_back(file);
}

const std::vector<const google::protobuf::MethodDescriptor*>& ApiMethods() {
  static const auto* const methods = [] {
    // One message of each file with services: naming it links the file into the binary
    // (static libraries drop unreferenced objects) and registers its descriptors.
    const google::protobuf::FileDescriptor* files[] = {
        v1::CreateTokenRequest::descriptor()->file(),
        v1::AssessQualityRequest::descriptor()->file(),
        v1::DetectDamageRequest::descriptor()->file(),
        v1::SearchInspectionsRequest::descriptor()->file(),
        v1::GetWebhookConfigRequest::descriptor()->file(),
        v1::SubscribeRequest::descriptor()->file(),
    };
    auto* out = new std::vector<const google::protobuf::MethodDescriptor*>();
    std::vector<const google::protobuf::FileDescriptor*> all(std::begin(files), std::end(files));
    Extra().read = true;
    all.insert(all.end(), Extra().files.begin(), Extra().files.end());
    for (const google::protobuf::FileDescriptor* file : all) {
      for (int s = 0; s < file->service_count(); ++s) {
        const google::protobuf::ServiceDescriptor* service = file->service(s);
        for (int m = 0; m < service->method_count(); ++m) out->push_back(service->method(m));
      }
    }
    return out;
  }();
  return *methods;
}

const v1::VendorRoute* VendorRouteOf(const google::protobuf::MethodDescriptor& method) {
  if (!method.options().HasExtension(v1::vendor_route)) return nullptr;
  return &method.options().GetExtension(v1::vendor_route);
}

const google::protobuf::MethodDescriptor* FindApiMethod(const std::string& full_name) {
  for (const google::protobuf::MethodDescriptor* method : ApiMethods()) {
    if (method->full_name() == full_name) return method;
  }
  return nullptr;
}

std::string GrpcPath(const google::protobuf::MethodDescriptor& method) {
  return "/" + method.service()->full_name() + "/" + method.name();
}

std::string HttpMethodName(v1::VendorHttpMethod method) {
  switch (method) {
    case v1::VENDOR_HTTP_METHOD_GET:
      return "GET";
    case v1::VENDOR_HTTP_METHOD_POST:
      return "POST";
    case v1::VENDOR_HTTP_METHOD_PUT:
      return "PUT";
    default:
      return "";
  }
}

}  // namespace inspection::vendor
