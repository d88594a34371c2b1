#include "gateway/services/token_service.h"

#include <chrono>

#include "gateway/logging/log.h"
#include "gateway/token_watch/token_watch.h"

namespace inspection::services {

TokenServiceImpl::TokenServiceImpl(const ServiceDeps& deps)
    : StreamsOnly(deps, "inspection.v1.TokenService"), deps_(deps) {}

grpc::ServerWriteReactor<v1::WatchTokenStatusResponse>* TokenServiceImpl::WatchTokenStatus(
    grpc::CallbackServerContext* context, const v1::WatchTokenStatusRequest* request) {
  std::shared_ptr<void> slot;
  if (auto denied = AdmitStream(*context, deps_, "/inspection.v1.TokenService/WatchTokenStatus",
                                request->SpaceUsedLong(), &slot);
      denied.has_value()) {
    return new FailedStream<v1::WatchTokenStatusResponse>(denied->ToGrpcStatus());
  }
  upstream::CallOptions call;
  if (auto error = CallOptionsFor(*context, deps_, /*request_id=*/"", &call); error.has_value()) {
    return new FailedStream<v1::WatchTokenStatusResponse>(error->ToGrpcStatus());
  }
  auto poller = deps_.token_pollers.find(call.account);
  if (poller == deps_.token_pollers.end() || poller->second == nullptr) {
    return new FailedStream<v1::WatchTokenStatusResponse>(
        grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "WatchTokenStatus is not available"));
  }
  // The stream's start and end lines (the uid is the filter).
  const std::string uid = request->uid().substr(0, 128);
  const std::string account = call.account.empty() ? "default" : call.account;
  const std::string trace_id = TraceFor(*context).TraceIdHex();
  const std::string peer = context->peer();
  logging::Info("stream opened", {{"method", "/inspection.v1.TokenService/WatchTokenStatus"},
                                  {"peer", peer},
                                  {"caller", CallerIdentity(*context)},
                                  {"account", account},
                                  {"filter", "uid=" + uid},
                                  {"trace_id", trace_id}});
  const auto opened = std::chrono::steady_clock::now();
  auto on_finish = [uid, account, trace_id, peer, opened](const grpc::Status& status,
                                                          uint64_t sent) {
    logging::Info("stream ended",
                  {{"method", "/inspection.v1.TokenService/WatchTokenStatus"},
                   {"peer", peer},
                   {"account", account},
                   {"grpc_code", static_cast<int>(status.error_code())},
                   {"reason", status.ok()                                          ? "completed"
                              : status.error_code() == grpc::StatusCode::CANCELLED ? "cancelled"
                                                                                   : "error"},
                   {"events_sent", sent},
                   {"duration_ms", std::chrono::duration<double, std::milli>(
                                       std::chrono::steady_clock::now() - opened)
                                       .count()},
                   {"trace_id", trace_id}});
  };
  return token_watch::NewWatchTokenStatusReactor(poller->second, context, request, std::move(slot),
                                                 std::move(on_finish));
}

}  // namespace inspection::services
