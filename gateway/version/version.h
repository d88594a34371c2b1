// Which build this is: the project version (CMake project(VERSION), SemVer; CHANGELOG.md),
// the git revision it was built from, and the gRPC and protobuf libraries it runs on.
// Printed by `inspection-gateway --version`, exported as the inspection_gateway_build_info
// gauge.
#ifndef GATEWAY_VERSION_VERSION_H_
#define GATEWAY_VERSION_VERSION_H_

#include <string>

namespace inspection::version {

// "0.8.0".
const char* Version();
// The short git revision ("3f2a9c1b0d4e", "-dirty" when built from uncommitted changes;
// "unknown" outside a git checkout).
const char* Revision();
std::string GrpcVersion();
std::string ProtobufVersion();
// "inspection-gateway 0.8.0 (revision 3f2a9c1b0d4e; gRPC 1.51.1, protobuf 3.21.12)".
std::string VersionText();

}  // namespace inspection::version

#endif  // GATEWAY_VERSION_VERSION_H_
