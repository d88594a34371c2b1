#include "gateway/services/event_service.h"

#include "absl/strings/str_cat.h"
#include "adapters/vendor/event_config_mapper.h"
#include "gateway/streaming/event_stream.h"

namespace inspection::services {

// What one std::set<std::string> node costs beyond the name's characters: the node (three
// pointers, a colour), the std::string, the allocator's header.
constexpr size_t kSetNodeBytes = 96;

validation::Violations ValidateSubscribe(const v1::SubscribeRequest& request) {
  validation::Violations violations;
  for (int i = 0; i < request.event_names_size(); ++i) {
    if (request.event_names(i) == v1::EVENT_NAME_UNSPECIFIED ||
        !v1::EventName_IsValid(request.event_names(i))) {
      violations.push_back({absl::StrCat("event_names[", i, "]"),
                            "must be a known event name (use event_names_raw for others)"});
    }
  }
  for (int i = 0; i < request.event_names_raw_size(); ++i) {
    if (request.event_names_raw(i).empty()) {
      violations.push_back({absl::StrCat("event_names_raw[", i, "]"), "must not be empty"});
    }
  }
  if (!request.after_cursor().empty()) {
    if (!eventlog::CompareCursors(request.after_cursor(), request.after_cursor()).ok()) {
      violations.push_back({"after_cursor", "is not a cursor returned by this gateway"});
    } else if (request.from_start()) {
      violations.push_back({"from_start", "set only one of after_cursor and from_start"});
    }
  }
  return violations;
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* EventServiceImpl::Subscribe(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* raw_request) {
  auto* reactor =
      new streaming::EventStreamReactor<v1::SubscribeResponse>(streams_.hub, streams_.stream_queue);
  std::shared_ptr<void> slot;
  if (auto denied = AdmitStream(*context, admission_, "/inspection.v1.EventService/Subscribe",
                                raw_request->Length(), &slot);
      denied.has_value()) {
    reactor->End(denied->ToGrpcStatus(), /*as_is=*/true);
    return reactor;
  }
  reactor->HoldUntilDone(std::move(slot));
  v1::SubscribeRequest parsed;
  if (!streaming::ParseRawRequest(*raw_request, &parsed)) {
    reactor->End(errors::ApiError::InvalidRequest(
                     {{"", "the request is not a serialized inspection.v1.SubscribeRequest"}})
                     .ToGrpcStatus(),
                 /*as_is=*/true);
    return reactor;
  }
  const v1::SubscribeRequest* request = &parsed;
  validation::Violations violations = ValidateSubscribe(*request);
  if (!violations.empty()) {
    reactor->End(errors::ApiError::InvalidRequest(std::move(violations)).ToGrpcStatus(),
                 /*as_is=*/true);
    return reactor;
  }
  // The stream carries one vendor account's events (x-vendor-account; default: "").
  upstream::CallOptions call;
  if (auto error = CallOptionsFor(*context, admission_, /*request_id=*/"", &call);
      error.has_value()) {
    reactor->End(error->ToGrpcStatus(), /*as_is=*/true);
    return reactor;
  }
  reactor->SetLogContext({"/inspection.v1.EventService/Subscribe", context->peer(),
                          CallerIdentity(*context), call.account, TraceFor(*context).TraceIdHex()});
  streaming::EventFilter filter;
  filter.account = call.account;
  for (int name : request->event_names()) {
    filter.names.insert(vendor::EventNameString(static_cast<v1::EventName>(name), /*raw=*/""));
  }
  for (const std::string& raw : request->event_names_raw()) filter.names.insert(raw);
  filter.inspection_id = request->inspection_id();
  filter.token_uid = request->token_uid();
  // What the stream keeps: gRPC's copy of the request, and the filter, whose names cost a
  // set node each (2,000 two-byte names made 8 KiB on the wire hold 180 KB).
  size_t held = raw_request->Length() + filter.inspection_id.size() + filter.token_uid.size();
  for (const std::string& name : filter.names) held += name.size() + kSetNodeBytes;
  if (auto refused = RefuseLargeStreamRequest(admission_, held); refused.has_value()) {
    reactor->End(refused->ToGrpcStatus(), /*as_is=*/true);
    return reactor;
  }
  reactor->Attach(std::move(filter), request->after_cursor(), request->from_start());
  return reactor;
}

}  // namespace inspection::services
