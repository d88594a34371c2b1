#include "gateway/services/damage_service.h"

#include "gateway/services/idempotent_call.h"

#include <functional>
#include <optional>
#include <string>
#include <utility>

#include "gateway/services/endpoints.h"
#include "gateway/streaming/event_stream.h"

namespace inspection::services {
namespace {

using DamageStreamReactor = streaming::EventStreamReactor<v1::StreamDamageResultsResponse>;

// Sends the submission, then follows the events of the inspection it names, from `start`.
// A submission that names no inspection (no id at damage.inspection_id_pointers) ends the
// stream with INSPECTION_ID_NOT_FOUND after it: an EventFilter with an empty inspection id
// matches every inspection of the account, so it must never be attached here. Used by the
// first call and by every replay of its idempotency key alike.
void FollowSubmission(const DamageStreamReactor::Handle& handle,
                      v1::StreamDamageResultsResponse first, const std::string& account,
                      const std::string& start, bool from_start) {
  const std::string inspection_id = first.submitted().inspection_id();
  handle.Send(first);
  if (inspection_id.empty()) {
    errors::ApiError error;
    error.code = absl::StatusCode::kFailedPrecondition;
    error.reason = std::string(errors::kReasonInspectionIdNotFound);
    error.message =
        "the damage detection was submitted, but its response has no inspection id at the "
        "configured pointers (damage.inspection_id_pointers): its events cannot be followed";
    handle.End(error.ToGrpcStatus(), /*as_is=*/true);
    return;
  }
  streaming::EventFilter filter;
  filter.inspection_id = inspection_id;
  filter.account = account;  // the account the inspection was submitted to
  handle.Attach(std::move(filter), start, from_start);
}

// What a repeat of an idempotency key does with the first submission's outcome: ends with
// its error, or follows that inspection's retained events from the oldest (the replay may
// come long after the submission). Runs for a replay now and, for a waiter, when the first
// call completes: possibly after this call was cancelled and gRPC freed its context, so it
// reaches the call only through the handle.
std::function<void(const pipeline::IdempotentOutcome&)> ReplayFollower(
    DamageStreamReactor::Handle handle, std::string account) {
  return [handle, account = std::move(account)](const pipeline::IdempotentOutcome& outcome) {
    if (!outcome.status.ok()) {
      handle.End(outcome.status, /*as_is=*/true);
      return;
    }
    v1::StreamDamageResultsResponse first;
    if (!first.mutable_submitted()->ParseFromString(outcome.response)) {
      // Never follow what cannot be read (an empty filter would follow every inspection).
      errors::ApiError error;
      error.code = absl::StatusCode::kInternal;
      error.reason = std::string(errors::kReasonInternal);
      error.message =
          "the first outcome stored for this idempotency key cannot be read back; use a new "
          "key to submit again";
      handle.End(error.ToGrpcStatus(), /*as_is=*/true);
      return;
    }
    handle.AddInitialMetadata("idempotency-replayed", "true");
    FollowSubmission(handle, std::move(first), account, /*start=*/"", /*from_start=*/true);
  };
}

// Parses a StreamDamageResults request into the submission it asks for; or why it is
// refused: not a serialized request, too large beyond its URLs, or invalid URLs.
std::optional<grpc::Status> ReadStreamRequest(const ServiceDeps& deps, const grpc::ByteBuffer& raw,
                                              v1::StreamDamageResultsRequest* request,
                                              v1::DetectDamageRequest* submit) {
  if (!streaming::ParseRawRequest(raw, request)) {
    return errors::ApiError::InvalidRequest(
               {{"", "the request is not a serialized inspection.v1.StreamDamageResultsRequest"}})
        .ToGrpcStatus();
  }
  // gRPC holds the raw request while the stream is open: its URLs are bounded by validation,
  // everything else (the key, unknown fields) by streams.max_request_bytes.
  size_t url_bytes = 0;
  for (const std::string& url : request->urls()) url_bytes += url.size();
  const size_t raw_bytes = raw.Length();
  if (auto refused =
          RefuseLargeStreamRequest(deps, raw_bytes > url_bytes ? raw_bytes - url_bytes : 0);
      refused.has_value()) {
    return refused->ToGrpcStatus();
  }
  *submit->mutable_urls() = request->urls();
  validation::Violations violations =
      deps.endpoints->Get(routes::RouteId::kDetectDamage).validate(*submit);
  if (!violations.empty()) {
    return errors::ApiError::InvalidRequest(std::move(violations)).ToGrpcStatus();
  }
  return std::nullopt;
}

}  // namespace

DamageServiceImpl::DamageServiceImpl(const ServiceDeps& deps)
    : StreamsOnly(deps, "inspection.v1.DamageService"), deps_(deps) {}

grpc::ServerWriteReactor<grpc::ByteBuffer>* DamageServiceImpl::StreamDamageResults(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* raw_request) {
  using Reactor = DamageStreamReactor;
  auto* reactor = new Reactor(
      deps_.hub, deps_.stream_queue,
      // createReport is the last event of a damage detection: the report exists. A report
      // recovered by polling (its webhook was lost) ends it as well; Event.source says which.
      streaming::EndsDamageResults);

  std::shared_ptr<void> slot;
  if (auto denied = AdmitStream(*context, deps_, "/inspection.v1.DamageService/StreamDamageResults",
                                /*request_bytes=*/0, &slot);
      denied.has_value()) {
    reactor->End(denied->ToGrpcStatus(), /*as_is=*/true);
    return reactor;
  }
  reactor->HoldUntilDone(std::move(slot));
  v1::StreamDamageResultsRequest parsed;
  v1::DetectDamageRequest submit;
  if (auto refused = ReadStreamRequest(deps_, *raw_request, &parsed, &submit);
      refused.has_value()) {
    reactor->End(*refused, /*as_is=*/true);
    return reactor;
  }
  const v1::StreamDamageResultsRequest* request = &parsed;
  const std::string request_id = RequestIdFor(*context);
  context->AddInitialMetadata("x-request-id", request_id);
  const tracing::TraceContext trace = TraceFor(*context);
  context->AddInitialMetadata("x-trace-id", trace.TraceIdHex());
  upstream::CallOptions call;
  if (auto error = CallOptionsFor(*context, deps_, request_id, &call); error.has_value()) {
    reactor->End(error->ToGrpcStatus(), /*as_is=*/true);
    return reactor;
  }
  call.trace = trace;
  reactor->SetLogContext({"/inspection.v1.DamageService/StreamDamageResults", context->peer(),
                          CallerIdentity(*context), call.account, trace.TraceIdHex()});
  Reactor::Handle handle = reactor->handle();
  // Through the call core, like DetectDamage: the same log line, metrics, error mapping
  // and idempotency bookkeeping. Everything it needs is taken from the context now: with an
  // idempotency key it runs later, from the store's thread, and the stream may be gone.
  RpcRecord record;
  record.origin = "stream";
  record.request_id = request_id;
  record.caller = CallerIdentity(*context);
  record.peer = context->peer();
  record.trace = trace;
  record.account = call.account;
  record.resource = AuditResource(submit);
  const std::string account = call.account;
  const std::chrono::system_clock::time_point deadline = context->deadline();
  auto submission = std::make_shared<const v1::DetectDamageRequest>(std::move(submit));
  auto submit_call = [this, handle, account, deadline, submission, call = std::move(call),
                      record = std::move(record)](std::string key) mutable {
    // Events that arrive while the submission is in flight are already after this point,
    // so none about the new inspection can be missed.
    const std::string start = deps_.hub->TailCursor();
    CallEndpoint<v1::DetectDamageRequest, v1::DetectDamageResponse>(
        deps_, deps_.endpoints->Get(routes::RouteId::kDetectDamage), submission, deadline,
        std::move(call), std::move(key), std::move(record), std::chrono::steady_clock::now(),
        [handle, start, account](EndpointResult<v1::DetectDamageResponse> out) {
          if (!out.ok()) {
            handle.End(out.ToGrpcStatus(), /*as_is=*/true);
            return;
          }
          v1::StreamDamageResultsResponse first;
          first.mutable_submitted()->Swap(&out.response);
          // An empty start (no event yet) means from the beginning: nothing older exists.
          FollowSubmission(handle, std::move(first), account, start,
                           /*from_start=*/start.empty());
        });
  };
  if (deps_.idempotency == nullptr) {
    submit_call(std::string());
    return reactor;
  }
  // Idempotency, shared with DetectDamage (same operation, same fingerprint): a repeat
  // replays the first submission and follows that inspection's retained events.
  // The reactor's context, for the replayed metadata a follower adds.
  reactor->SetContext(context);
  auto follow = ReplayFollower(handle, account);
  auto finish = [handle, follow](KeyedFinish finished) {
    if (finished.refused.has_value()) {
      handle.End(finished.refused->ToGrpcStatus(), /*as_is=*/true);
    } else if (!finished.replayed) {
      handle.End(finished.status, /*as_is=*/true);
    } else {
      follow({finished.status, std::move(finished.response)});
    }
  };
  BeginKeyedCall(deps_, account, CallerIdentity(*context),
                 IdempotencyKeyFor(*context, request->idempotency_key()), *submission, deadline,
                 std::move(submit_call), finish);
  return reactor;
}

}  // namespace inspection::services
