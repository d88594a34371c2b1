#include "gateway/services/damage_service.h"

#include "adapters/vendor/damage_mapper.h"
#include "gateway/streaming/event_stream.h"

namespace inspection::services {

DamageServiceImpl::DamageServiceImpl(const ServiceDeps& deps)
    : deps_(deps),
      detect_damage_{
          routes::RouteId::kDetectDamage,
          [this](const v1::DetectDamageRequest& r) {
            return validation::ValidateDetectDamage(r, deps_.limits);
          },
          [this](const v1::DetectDamageRequest& r) { return vendor::EncodeDetectDamageRequest(r); },
          [this](const nlohmann::json& j, const v1::DetectDamageRequest& r,
                 v1::DetectDamageResponse* out, vendor::DecodeReport* report) {
            return vendor::DecodeDetectDamageResponse(j, deps_.mapper_options, out);
          },
          [](const v1::DetectDamageRequest& r) { return r.idempotency_key(); }} {}

grpc::ServerUnaryReactor* DamageServiceImpl::DetectDamage(grpc::CallbackServerContext* context,
                                                          const v1::DetectDamageRequest* request,
                                                          v1::DetectDamageResponse* response) {
  return RunUnary(context, request, response, deps_, detect_damage_);
}

grpc::ServerWriteReactor<v1::StreamDamageResultsResponse>* DamageServiceImpl::StreamDamageResults(
    grpc::CallbackServerContext* context, const v1::StreamDamageResultsRequest* request) {
  using Reactor = streaming::EventStreamReactor<v1::StreamDamageResultsResponse>;
  auto* reactor = new Reactor(
      deps_.hub, deps_.stream_queue_size,
      [](const v1::Event& event, v1::StreamDamageResultsResponse* out) {
        *out->mutable_event() = event;
      },
      // createReport is the last event of a damage detection: the report exists.
      [](const v1::Event& event) { return event.event_name() == v1::EVENT_NAME_CREATE_REPORT; });

  std::shared_ptr<void> slot;
  if (auto denied =
          AdmitStream(*context, deps_, "/inspection.v1.DamageService/StreamDamageResults", &slot);
      denied.has_value()) {
    reactor->End(denied->ToGrpcStatus(), /*as_is=*/true);
    return reactor;
  }
  reactor->HoldUntilDone(std::move(slot));
  v1::DetectDamageRequest submit;
  *submit.mutable_urls() = request->urls();
  validation::Violations violations = validation::ValidateDetectDamage(submit, deps_.limits);
  if (!violations.empty()) {
    reactor->End(errors::ApiError::InvalidRequest(std::move(violations)).ToGrpcStatus(),
                 /*as_is=*/true);
    return reactor;
  }
  const std::string request_id = RequestIdFor(*context);
  context->AddInitialMetadata("x-request-id", request_id);
  upstream::CallOptions call;
  if (auto error = CallOptionsFor(*context, deps_, request_id, &call); error.has_value()) {
    reactor->End(error->ToGrpcStatus(), /*as_is=*/true);
    return reactor;
  }
  // Events that arrive while the submission is in flight are already after this point,
  // so none about the new inspection can be missed.
  const std::string start = deps_.hub->TailCursor();
  Reactor::Handle handle = reactor->handle();
  // Encoded before the call: the callback below takes `submit` by move.
  vendor::VendorRequest vendor_request = detect_damage_.encode(submit);
  deps_.vendor->Call(
      routes::RouteId::kDetectDamage, vendor_request, context->deadline(), call,
      [this, handle, start, account = call.account,
       submit = std::move(submit)](upstream::VendorResult result) {
        if (!result.ok()) {
          handle.End(result.error->ToGrpcStatus(), /*as_is=*/true);
          return;
        }
        v1::StreamDamageResultsResponse first;
        v1::DetectDamageResponse* submitted = first.mutable_submitted();
        vendor::DecodeReport drift;
        if (absl::Status decoded = detect_damage_.decode(result.body, submit, submitted, &drift);
            !decoded.ok()) {
          handle.End(errors::ApiError::FromBadVendorBody(
                         routes::GetRoute(routes::RouteId::kDetectDamage), result.response,
                         errors::kReasonVendorUnexpectedResponse, std::string(decoded.message()))
                         .ToGrpcStatus(),
                     /*as_is=*/true);
          return;
        }
        const std::string inspection_id = submitted->inspection_id();
        handle.Send(std::move(first));
        if (inspection_id.empty()) {
          errors::ApiError error;
          error.code = absl::StatusCode::kFailedPrecondition;
          error.reason = "INSPECTION_ID_NOT_FOUND";
          error.message =
              "the damage detection was submitted, but its response has no inspection id at "
              "the configured pointers (damage.inspection_id_pointers): its events cannot be "
              "followed";
          handle.End(error.ToGrpcStatus(), /*as_is=*/true);
          return;
        }
        streaming::EventFilter filter;
        filter.inspection_id = inspection_id;
        filter.account = account;  // the account the inspection was submitted to
        // An empty start (no event yet) means from the beginning: nothing older exists.
        handle.Attach(std::move(filter), start, /*from_start=*/start.empty());
      });
  return reactor;
}

}  // namespace inspection::services
