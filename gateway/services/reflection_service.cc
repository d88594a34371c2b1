#include "gateway/services/reflection_service.h"

#include <set>
#include <utility>

#include <google/protobuf/descriptor.pb.h>

#include "grpc/reflection/v1/reflection.grpc.pb.h"
#include "grpc/reflection/v1alpha/reflection.grpc.pb.h"

namespace inspection::services {

ReflectionCatalog::ReflectionCatalog(std::vector<std::string> services)
    : services_(std::move(services)), pool_(google::protobuf::DescriptorPool::generated_pool()) {}

const std::string& ReflectionCatalog::Serialized(
    const google::protobuf::FileDescriptor* file) const {
  absl::MutexLock lock(&mu_);
  auto it = serialized_.find(file);
  if (it == serialized_.end()) {
    google::protobuf::FileDescriptorProto proto;
    file->CopyTo(&proto);
    it = serialized_.emplace(file, proto.SerializeAsString()).first;
  }
  // Entries are never removed or changed: the reference stays valid.
  return it->second;
}

std::vector<std::string> ReflectionCatalog::FileWithDependencies(
    const google::protobuf::FileDescriptor* file) const {
  std::vector<std::string> out;
  std::set<const google::protobuf::FileDescriptor*> seen;
  std::vector<const google::protobuf::FileDescriptor*> todo = {file};
  while (!todo.empty()) {
    const google::protobuf::FileDescriptor* next = todo.back();
    todo.pop_back();
    if (!seen.insert(next).second) continue;
    out.push_back(Serialized(next));
    // Reversed, so that the first import is sent first.
    for (int i = next->dependency_count() - 1; i >= 0; --i) todo.push_back(next->dependency(i));
  }
  return out;
}

namespace {

// The answer to one reflection request; the same code for v1 and v1alpha, whose messages
// are field for field the same.
template <class Request, class Response>
void Answer(const ReflectionCatalog& catalog, const Request& request, Response* response) {
  response->set_valid_host(request.host());
  *response->mutable_original_request() = request;
  const google::protobuf::DescriptorPool& pool = catalog.pool();
  const google::protobuf::FileDescriptor* file = nullptr;
  grpc::Status error;
  switch (request.message_request_case()) {
    case Request::kListServices:
      for (const std::string& name : catalog.services()) {
        response->mutable_list_services_response()->add_service()->set_name(name);
      }
      return;
    case Request::kFileByFilename:
      file = pool.FindFileByName(request.file_by_filename());
      if (file == nullptr) error = grpc::Status(grpc::StatusCode::NOT_FOUND, "File not found.");
      break;
    case Request::kFileContainingSymbol:
      file = pool.FindFileContainingSymbol(request.file_containing_symbol());
      if (file == nullptr) error = grpc::Status(grpc::StatusCode::NOT_FOUND, "Symbol not found.");
      break;
    case Request::kFileContainingExtension: {
      const auto& wanted = request.file_containing_extension();
      const google::protobuf::Descriptor* type =
          pool.FindMessageTypeByName(wanted.containing_type());
      if (type == nullptr) {
        error = grpc::Status(grpc::StatusCode::NOT_FOUND, "Type not found.");
        break;
      }
      const google::protobuf::FieldDescriptor* extension =
          pool.FindExtensionByNumber(type, wanted.extension_number());
      if (extension == nullptr) {
        error = grpc::Status(grpc::StatusCode::NOT_FOUND, "Extension not found.");
        break;
      }
      file = extension->file();
      break;
    }
    case Request::kAllExtensionNumbersOfType: {
      const google::protobuf::Descriptor* type =
          pool.FindMessageTypeByName(request.all_extension_numbers_of_type());
      if (type == nullptr) {
        error = grpc::Status(grpc::StatusCode::NOT_FOUND, "Type not found.");
        break;
      }
      std::vector<const google::protobuf::FieldDescriptor*> extensions;
      pool.FindAllExtensions(type, &extensions);
      auto* numbers = response->mutable_all_extension_numbers_response();
      numbers->set_base_type_name(type->full_name());
      for (const auto* extension : extensions) numbers->add_extension_number(extension->number());
      return;
    }
    default:
      error = grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "");
      break;
  }
  if (!error.ok()) {
    response->mutable_error_response()->set_error_code(error.error_code());
    response->mutable_error_response()->set_error_message(error.error_message());
    return;
  }
  for (std::string& bytes : catalog.FileWithDependencies(file)) {
    response->mutable_file_descriptor_response()->add_file_descriptor_proto(std::move(bytes));
  }
}

// A stream refused before it started.
template <class Request, class Response>
class RefusedBidi final : public grpc::ServerBidiReactor<Request, Response> {
 public:
  explicit RefusedBidi(grpc::Status status) { this->Finish(std::move(status)); }
  void OnDone() override { delete this; }
};

// One reflection stream: read a request, write its answer, read the next; OK once the
// client has sent its last request, CANCELLED when it went away.
template <class Request, class Response>
class ReflectionReactor final : public grpc::ServerBidiReactor<Request, Response> {
 public:
  ReflectionReactor(const ReflectionCatalog* catalog, std::shared_ptr<void> slot)
      : catalog_(catalog), slot_(std::move(slot)) {
    this->StartRead(&request_);
  }
  void OnReadDone(bool ok) override {
    if (!ok) {
      this->Finish(grpc::Status::OK);
      return;
    }
    response_.Clear();
    Answer(*catalog_, request_, &response_);
    this->StartWrite(&response_);
  }
  void OnWriteDone(bool ok) override {
    if (!ok) {
      this->Finish(
          grpc::Status(grpc::StatusCode::CANCELLED, "the reflection stream was cancelled"));
      return;
    }
    this->StartRead(&request_);
  }
  void OnDone() override { delete this; }  // releases the stream slot

 private:
  const ReflectionCatalog* const catalog_;
  const std::shared_ptr<void> slot_;
  Request request_;
  Response response_;
};

// ServerReflection of one API version: `Base` is its generated CallbackService.
template <class Request, class Response, class Base>
class ReflectionServiceImpl final : public Base {
 public:
  ReflectionServiceImpl(const AdmissionDeps& deps, const ReflectionCatalog* catalog,
                        const char* method)
      : deps_(deps), catalog_(catalog), method_(method) {}

  grpc::ServerBidiReactor<Request, Response>* ServerReflectionInfo(
      grpc::CallbackServerContext* context) override {
    std::shared_ptr<void> slot;
    if (auto refused = AdmitStream(*context, deps_, method_, /*request_bytes=*/0, &slot);
        refused.has_value()) {
      return new RefusedBidi<Request, Response>(refused->ToGrpcStatus());
    }
    return new ReflectionReactor<Request, Response>(catalog_, std::move(slot));
  }

 private:
  const AdmissionDeps& deps_;
  const ReflectionCatalog* const catalog_;
  const char* const method_;
};

}  // namespace

ReflectionService::ReflectionService(const AdmissionDeps& deps, std::vector<std::string> services)
    : catalog_(std::move(services)) {
  namespace v1 = grpc::reflection::v1;
  namespace v1alpha = grpc::reflection::v1alpha;
  v1_ = std::make_unique<
      ReflectionServiceImpl<v1::ServerReflectionRequest, v1::ServerReflectionResponse,
                            v1::ServerReflection::CallbackService>>(deps, &catalog_, kV1Method);
  v1alpha_ = std::make_unique<
      ReflectionServiceImpl<v1alpha::ServerReflectionRequest, v1alpha::ServerReflectionResponse,
                            v1alpha::ServerReflection::CallbackService>>(deps, &catalog_,
                                                                         kV1AlphaMethod);
}

ReflectionService::~ReflectionService() = default;

std::vector<grpc::Service*> ReflectionService::grpc_services() const {
  return {v1_.get(), v1alpha_.get()};
}

}  // namespace inspection::services
