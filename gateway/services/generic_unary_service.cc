#include "gateway/services/generic_unary_service.h"

#include "gateway/services/idempotent_call.h"

#include <memory>
#include <utility>

#include <grpcpp/impl/codegen/proto_utils.h>
#include <grpcpp/impl/codegen/server_callback_handlers.h>
#include <grpcpp/impl/rpc_service_method.h>
#include <grpcpp/support/proto_buffer_reader.h>
#include <grpcpp/support/proto_buffer_writer.h>

#include "absl/strings/str_cat.h"
#include "inspection/v1/vendor_options.pb.h"

namespace inspection::services {
namespace {

using google::protobuf::Message;

// One unary call in flight: its parsed request and its response, until it finishes. It
// finishes through the context's default reactor (whose reactions gRPC runs inline, with no
// thread hop) exactly once, and deletes itself right after: nothing touches it after a
// Finish. An idempotency waiter may finish it from another thread.
class UnaryCall final {
 public:
  // `reactor`: the context's DefaultReactor(), asked for once (each call of it constructs
  // the reactor anew, which would drop a Finish already made).
  UnaryCall(grpc::CallbackServerContext* context, grpc::ServerUnaryReactor* reactor,
            const ServiceDeps& deps, const Endpoint& endpoint, grpc::ByteBuffer* wire_response)
      : context_(context),
        reactor_(reactor),
        deps_(deps),
        endpoint_(endpoint),
        wire_response_(wire_response),
        response_(endpoint.response_prototype->New()) {}

  // Runs the call from its request bytes (`request_type`: the RPC's input type). The call
  // may be finished, and this object gone, when it returns.
  void Start(const grpc::ByteBuffer& wire_request, const Message& request_type);

 private:
  // Finishes (the response's bytes first when `status` is OK; FinishUnary sends `metadata`),
  // then deletes this.
  void Reply(const grpc::Status& status, const ResponseMetadata& metadata);
  // Refuses before any vendor call (RefuseUnary), then deletes this.
  void Refuse(const errors::ApiError& error) {
    RefuseUnary(context_, reactor_, deps_, record_, start_, error, request_metadata_);
    delete this;
  }
  // Idempotency (idempotent_call.h): goes on to CallVendorWith (with the key: the first
  // call with it), now or from the store's thread, or finishes (a replay, a refusal, the
  // store unavailable, a waiter once the first call ends). This may be gone on return.
  void BeginIdempotent(upstream::CallOptions call);
  // The vendor call, then Reply. `key`: the idempotency key this call leads, or "".
  void CallVendorWith(upstream::CallOptions call, std::string key);

  grpc::CallbackServerContext* const context_;
  grpc::ServerUnaryReactor* const reactor_;
  const ServiceDeps& deps_;
  const Endpoint& endpoint_;
  grpc::ByteBuffer* const wire_response_;
  std::shared_ptr<Message> request_;
  std::unique_ptr<Message> response_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  RpcRecord record_;
  // Sent with the answer (FinishUnary): in the headers on success, in the trailers on an
  // error.
  ResponseMetadata request_metadata_;
};

void UnaryCall::Reply(const grpc::Status& status, const ResponseMetadata& metadata) {
  grpc::Status finished = status;
  if (status.ok()) {
    bool own_buffer = false;
    finished =
        grpc::SerializationTraits<Message>::Serialize(*response_, wire_response_, &own_buffer);
  }
  FinishUnary(context_, reactor_, finished, metadata);
  delete this;
}

void UnaryCall::BeginIdempotent(upstream::CallOptions call) {
  // `finish` runs for a refusal or a replay now, and, possibly on another thread, for a
  // waiter: the metadata is added here, before Finish, never after.
  auto finish = [this](KeyedFinish finished) {
    if (finished.refused.has_value()) {
      Refuse(*finished.refused);
      return;
    }
    ResponseMetadata metadata = request_metadata_;
    if (finished.replayed) {
      metadata.emplace_back("idempotency-replayed", "true");
      record_.idempotency_replayed = true;
    }
    if (finished.replayed && finished.status.ok()) response_->ParseFromString(finished.response);
    record_.code = finished.status.error_code();
    NotifyFinished(deps_, record_, start_);
    Reply(finished.status, metadata);
  };
  const std::string account = call.account;
  BeginKeyedCall(
      deps_, account, record_.caller,
      IdempotencyKeyFor(*context_, endpoint_.idempotency_key(*request_)), *request_,
      context_->deadline(),
      [this, call = std::move(call)](std::string key) mutable {
        CallVendorWith(std::move(call), std::move(key));
      },
      finish);
}

void UnaryCall::CallVendorWith(upstream::CallOptions call, std::string key) {
  CallVendor(deps_, endpoint_, request_, response_.get(), context_->deadline(), std::move(call),
             std::move(key), record_, start_, [this](CallOutcome out) {
               ResponseMetadata metadata = request_metadata_;
               AddCacheMetadata(&metadata, out.cache, out.stale_cause);
               if (out.error.has_value() && out.error->retry_delay.has_value()) {
                 // gRPC clients with retry policies read this to back off too.
                 metadata.emplace_back("grpc-retry-pushback-ms",
                                       std::to_string(out.error->retry_delay->count()));
               }
               Reply(out.ToGrpcStatus(), metadata);
             });
}

void UnaryCall::Start(const grpc::ByteBuffer& wire_request, const Message& request_type) {
  record_.route = &routes::GetRoute(endpoint_.route);
  record_.request_id = RequestIdFor(*context_);
  record_.caller = CallerIdentity(*context_);
  record_.peer = context_->peer();
  record_.trace = TraceFor(*context_);
  if (auto account = SingleMetadata(*context_, "x-vendor-account"); account.has_value()) {
    record_.account = std::string(account->substr(0, 64));
  }
  request_metadata_ = {{"x-request-id", record_.request_id},
                       {"x-trace-id", record_.trace.TraceIdHex()}};

  request_.reset(request_type.New());
  // Taken from gRPC's holder (not const there) and cleared by parsing: the raw bytes are
  // freed now, not held until the call ends.
  grpc::ByteBuffer bytes;
  bytes.Swap(const_cast<grpc::ByteBuffer*>(&wire_request));
  const bool parsed = grpc::SerializationTraits<Message>::Deserialize(&bytes, request_.get()).ok();
  if (parsed && record_.route->audited) record_.resource = AuditResource(*request_);
  if (auto denied = AdmitCall(*context_, deps_, record_.route->grpc_method, &record_.trace);
      denied.has_value()) {
    Refuse(*denied);
    return;
  }
  if (!parsed) {
    Refuse(errors::ApiError::InvalidRequest(
        {{"", absl::StrCat("the request is not a serialized ", request_type.GetTypeName())}}));
    return;
  }
  if (validation::Violations violations = endpoint_.validate(*request_); !violations.empty()) {
    Refuse(errors::ApiError::InvalidRequest(std::move(violations)));
    return;
  }
  upstream::CallOptions call;
  if (auto error = CallOptionsFor(*context_, deps_, record_.request_id, &call); error.has_value()) {
    Refuse(*error);
    return;
  }
  call.trace = record_.trace;
  if (endpoint_.idempotency_key) {
    BeginIdempotent(std::move(call));
  } else {
    CallVendorWith(std::move(call), std::string());
  }
}

}  // namespace

grpc::internal::MethodHandler* NewGenericUnaryHandler(const ServiceDeps& deps,
                                                      const routes::Route& route) {
  const Message* request_type = google::protobuf::MessageFactory::generated_factory()->GetPrototype(
      route.method->input_type());
  const Endpoint* endpoint = &deps.endpoints->Get(route.id);
  return new grpc::internal::CallbackUnaryHandler<grpc::ByteBuffer, grpc::ByteBuffer>(
      [&deps, endpoint, request_type](grpc::CallbackServerContext* context,
                                      const grpc::ByteBuffer* request, grpc::ByteBuffer* response) {
        grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
        (new UnaryCall(context, reactor, deps, *endpoint, response))
            ->Start(*request, *request_type);
        return reactor;
      });
}

bool ServedByGenericUnaryService(const google::protobuf::MethodDescriptor& method) {
  if (method.server_streaming() || method.client_streaming()) return false;
  if (!method.options().HasExtension(v1::vendor_route)) return false;
  const google::protobuf::ServiceDescriptor* service = method.service();
  for (int i = 0; i < service->method_count(); ++i) {
    if (service->method(i)->server_streaming()) return false;
  }
  return true;
}

GenericUnaryService::GenericUnaryService(const ServiceDeps& deps) {
  for (const routes::Route& route : routes::AllRoutes()) {
    if (!ServedByGenericUnaryService(*route.method)) continue;
    names_.push_back(route.grpc_method);
    AddMethod(new grpc::internal::RpcServiceMethod(names_.back().c_str(),
                                                   grpc::internal::RpcMethod::NORMAL_RPC,
                                                   /*handler=*/nullptr));
    MarkMethodRawCallback(static_cast<int>(names_.size() - 1), NewGenericUnaryHandler(deps, route));
  }
}

}  // namespace inspection::services
