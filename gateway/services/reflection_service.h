#ifndef GATEWAY_SERVICES_REFLECTION_SERVICE_H_
#define GATEWAY_SERVICES_REFLECTION_SERVICE_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include <google/protobuf/descriptor.h>
#include <grpcpp/grpcpp.h>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "gateway/services/unary_call.h"

namespace inspection::services {

// What server reflection describes: the services it lists and, from the generated
// descriptor pool (every .proto linked into the binary), each file with the files it
// depends on. Thread-safe; files are serialized once.
class ReflectionCatalog {
 public:
  explicit ReflectionCatalog(std::vector<std::string> services);

  const std::vector<std::string>& services() const { return services_; }
  const google::protobuf::DescriptorPool& pool() const { return *pool_; }
  // `file` and, depth first, every file it imports (each once, `file` first), serialized
  // as FileDescriptorProto: what a client needs to build the file's descriptors.
  std::vector<std::string> FileWithDependencies(const google::protobuf::FileDescriptor* file) const;

 private:
  const std::string& Serialized(const google::protobuf::FileDescriptor* file) const;

  const std::vector<std::string> services_;
  const google::protobuf::DescriptorPool* const pool_;
  mutable absl::Mutex mu_;
  // Bounded by the files linked into the binary.
  mutable std::map<const google::protobuf::FileDescriptor*, std::string> serialized_
      ABSL_GUARDED_BY(mu_);
};

// gRPC server reflection (grpc.reflection.v1.ServerReflection, what grpcurl asks first,
// and grpc.reflection.v1alpha.ServerReflection, what gRPC's own plugin serves and older
// clients ask), served by the gateway instead of gRPC's plugin (libgrpc++_reflection),
// whose calls never reach our code: each stream is first admitted by AdmitStream, so the
// authorization policy decides who may describe the API (PERMISSION_DENIED, reason
// PERMISSION_DENIED_BY_POLICY), the caller's rate applies, and the stream holds a stream
// slot while open. An admitted caller gets what gRPC's plugin answers: list_services,
// file_by_filename, file_containing_symbol, file_containing_extension and
// all_extension_numbers_of_type, NOT_FOUND as an error_response for what the pool does not
// have. One request is answered at a time, in order.
class ReflectionService {
 public:
  static constexpr char kV1Method[] = "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo";
  static constexpr char kV1AlphaMethod[] =
      "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo";
  static constexpr char kV1ServiceName[] = "grpc.reflection.v1.ServerReflection";
  static constexpr char kV1AlphaServiceName[] = "grpc.reflection.v1alpha.ServerReflection";

  // `services`: the full names list_services answers (every service the server registers,
  // these two included). `deps` must outlive the service.
  ReflectionService(const AdmissionDeps& deps, std::vector<std::string> services);
  ~ReflectionService();

  // The two gRPC services to register; they must outlive the server's calls.
  std::vector<grpc::Service*> grpc_services() const;

 private:
  ReflectionCatalog catalog_;
  std::unique_ptr<grpc::Service> v1_;
  std::unique_ptr<grpc::Service> v1alpha_;
};

}  // namespace inspection::services

#endif  // GATEWAY_SERVICES_REFLECTION_SERVICE_H_
