#ifndef GATEWAY_TOKEN_WATCH_TOKEN_WATCH_H_
#define GATEWAY_TOKEN_WATCH_TOKEN_WATCH_H_

#include <grpcpp/grpcpp.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "gateway/token_watch/token_status_poller.h"
#include "inspection/v1/token.grpc.pb.h"

namespace inspection::token_watch {

// The WatchTokenStatus uid rules, the same as GetTokenStatus's (the uid goes into the vendor
// URL as deviceId=<uid>-pwa): required; no '/', '?', '#', '&', spaces or control
// characters; not "." or ".."; no "-pwa" suffix. OK, or INVALID_ARGUMENT whose details are
// a google.rpc.Status with ErrorInfo (reason INVALID_REQUEST, domain inspection-gateway) and
// BadRequest (one field violation on "uid" per broken rule).
grpc::Status ValidateWatchUid(const std::string& uid);

// One WatchTokenStatus call: validates the uid (INVALID_ARGUMENT finishes at once), watches
// it on the poller and writes each status as WatchTokenStatusResponse{token,
// web_api_version}; finishes with the watch's end status (OK when the token expired or
// reached a final status, the vendor's error, UNAVAILABLE on gateway shutdown).
//
// One write in flight at a time. A status arriving while a write is in flight waits as the
// single pending message; a newer one replaces it (only the latest matters for a status, and
// a slow client then costs one message of memory, not a queue). So a client always ends up
// with the latest status, but may skip intermediate ones if it reads slower than they
// change. The final status is always written before Finish.
//
// Client cancellation (or deadline, or a failed write) cancels the watch, which releases the
// poller's watcher; the call then finishes with CANCELLED. Deletes itself in OnDone. Finish
// is called exactly once, never with a write in flight, and only after the watch has ended
// (or when there is no watch: invalid uid, poller shut down), so no poller callback can
// reach a deleted reactor.
class WatchTokenStatusReactor final
    : public grpc::ServerWriteReactor<v1::WatchTokenStatusResponse> {
 public:
  // `poller` must outlive the call (it does if it is shut down before the server).
  // Told, just before Finish, the status the watch ends with and how many status messages
  // were written (for the "stream ended" log line). Not called for an invalid uid.
  using OnFinish = std::function<void(const grpc::Status& status, uint64_t messages_sent)>;

  WatchTokenStatusReactor(TokenStatusPoller* poller, const std::string& uid,
                          std::shared_ptr<void> guard = nullptr, OnFinish on_finish = nullptr);

  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  enum class Next { kNothing, kWrite, kFinish };

  void OnStatus(const v1::GetTokenStatusResponse& status) ABSL_LOCKS_EXCLUDED(mu_);
  void OnEnd(grpc::Status status) ABSL_LOCKS_EXCLUDED(mu_);
  // Picks the next stream operation; the caller performs it after unlocking, so that no
  // gRPC operation is started with mu_ held (a reaction run inline would take mu_ again).
  Next NextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Perform(Next next) ABSL_LOCKS_EXCLUDED(mu_);

  std::shared_ptr<void> guard_;  // released when the stream is done
  const OnFinish on_finish_;
  absl::Mutex mu_;
  uint64_t sent_ ABSL_GUARDED_BY(mu_) = 0;
  std::shared_ptr<TokenWatch> watch_ ABSL_GUARDED_BY(mu_);
  bool write_in_flight_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;  // no more writes: client gone
  bool finished_ ABSL_GUARDED_BY(mu_) = false;   // Finish decided
  std::optional<v1::WatchTokenStatusResponse> pending_ ABSL_GUARDED_BY(mu_);
  std::optional<grpc::Status> end_ ABSL_GUARDED_BY(mu_);  // the watch's end, to finish with
  // The message being written. Only changed when no write is in flight.
  v1::WatchTokenStatusResponse writing_;
};

// What TokenServiceImpl::WatchTokenStatus returns:
//   return token_watch::NewWatchTokenStatusReactor(poller_, context, request);
// `context` is not used yet (kept for logging and metadata).
// `guard` is held until the stream is done (a per-caller stream slot; may be null).
grpc::ServerWriteReactor<v1::WatchTokenStatusResponse>* NewWatchTokenStatusReactor(
    TokenStatusPoller* poller, grpc::CallbackServerContext* context,
    const v1::WatchTokenStatusRequest* request, std::shared_ptr<void> guard = nullptr,
    WatchTokenStatusReactor::OnFinish on_finish = nullptr);

}  // namespace inspection::token_watch

#endif  // GATEWAY_TOKEN_WATCH_TOKEN_WATCH_H_
