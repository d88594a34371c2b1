#include "gateway/version/version.h"

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "build_revision.h"  // generated into the build tree (cmake/build_revision.cmake)
#include "google/protobuf/stubs/common.h"

namespace inspection::version {

const char* Version() { return INSPECTION_GATEWAY_VERSION; }

const char* Revision() { return INSPECTION_GATEWAY_REVISION; }

std::string GrpcVersion() { return grpc::Version(); }

std::string ProtobufVersion() {
  return google::protobuf::internal::VersionString(GOOGLE_PROTOBUF_VERSION);
}

std::string VersionText() {
  return absl::StrCat("inspection-gateway ", Version(), " (revision ", Revision(), "; gRPC ",
                      GrpcVersion(), ", protobuf ", ProtobufVersion(), ")");
}

}  // namespace inspection::version
