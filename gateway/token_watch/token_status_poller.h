#ifndef GATEWAY_TOKEN_WATCH_TOKEN_STATUS_POLLER_H_
#define GATEWAY_TOKEN_WATCH_TOKEN_STATUS_POLLER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gateway/timers/scheduler.h"
#include "grpcpp/support/status.h"
#include "inspection/v1/token.pb.h"

namespace inspection::token_watch {

// One poll's answer: the token's status, or the error exactly as the GetTokenStatus RPC
// answers it (code, message and google.rpc.Status details, made once by the call core), so a
// watch that ends on a vendor error ends with what the unary RPC would have said; nothing is
// re-encoded on the way.
class PollResult {
 public:
  // NOLINTNEXTLINE(google-explicit-constructor): a status is a result
  PollResult(v1::GetTokenStatusResponse response) : response_(std::move(response)) {}
  // An error; an OK status here (a fetch that forgot its answer) reads as INTERNAL.
  // NOLINTNEXTLINE(google-explicit-constructor): an error is a result
  PollResult(grpc::Status error)
      : status_(error.ok() ? grpc::Status(grpc::StatusCode::INTERNAL,
                                          "the token status fetch answered OK without a status")
                           : std::move(error)) {}

  bool ok() const { return status_.ok(); }
  const grpc::Status& status() const { return status_; }
  // The token's status; only when ok().
  const v1::GetTokenStatusResponse& operator*() const& { return response_; }
  v1::GetTokenStatusResponse& operator*() & { return response_; }
  v1::GetTokenStatusResponse&& operator*() && { return std::move(response_); }

 private:
  grpc::Status status_;
  v1::GetTokenStatusResponse response_;
};

// Asks the vendor for a token's status (GET tokenmanager/test?deviceId=<uid>-pwa).
// Asynchronous: must call `done` exactly once, on any thread, possibly before returning.
// Errors carry gRPC codes (see IsTransientPollError). If `done` is destroyed without being
// called the poller counts it as an UNKNOWN (transient) error, so a lost callback does not
// stop the token's polling for good.
using FetchStatus =
    std::function<void(const std::string& uid, absl::AnyInvocable<void(PollResult) &&> done)>;

struct TokenStatusPollerOptions {
  // Time from the end of one poll to the start of the next, after a success. At least 1 ms
  // (smaller values are raised to 1 ms).
  absl::Duration interval = absl::Seconds(2);
  // Backoff after consecutive transient errors: interval, 2x, 4x... capped at max_backoff
  // (raised to `interval` if smaller). With the defaults: 2, 4, 8, 16, 30, 30... seconds.
  absl::Duration max_backoff = absl::Seconds(30);
  // After this many consecutive transient errors the watchers end with the last error.
  // 0 = never: the poller keeps retrying at max_backoff; each watcher's own deadline bounds
  // its wait. Retrying here costs the vendor one call per max_backoff per token, where ending
  // the streams would make every client reconnect and restart polling at `interval`.
  int max_consecutive_errors = 0;
  // The watch ends (status delivered, then OK) when the token reaches one of these
  // statuses, as token.proto documents for WatchTokenStatus, or when token.expired is true.
  // Not 6 (chased up): a chase-up can come before the customer completes.
  std::vector<v1::TradeinStatus> final_statuses = {v1::TRADEIN_STATUS_COMPLETED};
  // Optional: maps each computed error backoff to the delay actually used (for example full
  // jitter: a uniform value in [0, d]). Empty = no jitter, so backoffs are exactly the
  // documented sequence. Success intervals are never jittered. Called under the poller's
  // lock: must be fast and must not call the poller.
  std::function<absl::Duration(absl::Duration)> backoff_jitter;
};

// True for errors worth polling again after a backoff: UNAVAILABLE, DEADLINE_EXCEEDED,
// RESOURCE_EXHAUSTED, ABORTED, INTERNAL, UNKNOWN, DATA_LOSS, CANCELLED (vendor down,
// overloaded, timeouts, malformed answers, lost callbacks). False for errors that another
// poll would only repeat: INVALID_ARGUMENT, NOT_FOUND, ALREADY_EXISTS, PERMISSION_DENIED,
// UNAUTHENTICATED, FAILED_PRECONDITION, OUT_OF_RANGE, UNIMPLEMENTED; those end the
// token's watchers at once with the error. (OK is not an error: false.)
bool IsTransientPollError(const grpc::Status& status);

// The delay before the next poll after `consecutive_errors` (>= 1) transient errors in a
// row, before jitter: min(interval * 2^(consecutive_errors - 1), max_backoff).
absl::Duration BackoffDelay(const TokenStatusPollerOptions& options, int consecutive_errors);

namespace internal {
class PollerCore;
}  // namespace internal

// One registered watch. Returned by TokenStatusPoller::Watch.
class TokenWatch {
 public:
  virtual ~TokenWatch() = default;

  // Ends the watch with CANCELLED, unless it has ended already. on_end runs on this thread
  // before Cancel returns, unless another thread is delivering a status to this watch at
  // that moment: then on_end runs on that thread right after that status. Idempotent; safe
  // to call from inside the watch's own callbacks.
  virtual void Cancel() = 0;
  virtual const std::string& uid() const = 0;
};

// Turns the vendor's polling-only token status into streams of changes: one poll loop per
// watched token uid, shared by all its watchers.
//
// Per uid:
// - The first watcher starts the loop: a poll right away (on the scheduler), then one poll
//   `interval` after the previous one completed, so polls of one uid never overlap.
//   Transient errors back off (BackoffDelay); a success resets the backoff.
// - A watcher that joins a uid whose status is already known gets that cached status
//   without any upstream call; otherwise it gets the result of the poll in progress or the
//   next one.
// - "Changed" means the delivered message differs: any field of `token` or
//   `web_api_version` (compared field by field with MessageDifferencer, so map order in
//   Struct fields does not count). The response-level unknown_fields are not compared (they
//   are not streamed). updated_at changing alone therefore counts as a change.
// - The loop stops when the uid has no watchers left (a poll in flight completes first and
//   its result is dropped), and when the watch ends for all: token expired or in a final
//   status (status delivered, then on_end(OK)), a non-transient error (on_end(error)),
//   max_consecutive_errors transient errors (on_end(last error)). A later Watch of the
//   same uid starts a new loop.
//
// Callbacks of one watch: on_status(first status), then on_status(each change), then
// on_end(status) exactly once; never two at a time, never after on_end, never with an
// internal lock held, never on the thread calling Watch before it returns. They run on the
// scheduler's thread, on the thread that completed a fetch, or in Cancel/Shutdown. Keep them
// short (they delay the other watchers of that poll). Statuses are never reordered: a
// watcher only ever sees newer statuses.
//
// Thread-safety: all methods may be called from any thread. `scheduler` must outlive the
// poller; `fetch` may complete after the poller is destroyed (the result is dropped).
class TokenStatusPoller {
 public:
  using StatusCallback = absl::AnyInvocable<void(const v1::GetTokenStatusResponse&)>;
  using EndCallback = absl::AnyInvocable<void(grpc::Status) &&>;

  struct Stats {
    uint64_t polls_issued = 0;  // fetches started, all uids, since construction
    uint64_t poll_errors = 0;   // fetches that completed with an error
    size_t active_uids = 0;     // uids with a poll loop (incl. one finishing its last poll)
    size_t watchers = 0;        // watches registered and not ended
  };

  TokenStatusPoller(TokenStatusPollerOptions options, FetchStatus fetch,
                    timers::Scheduler* scheduler);
  // Shutdown().
  ~TokenStatusPoller();
  TokenStatusPoller(const TokenStatusPoller&) = delete;
  TokenStatusPoller& operator=(const TokenStatusPoller&) = delete;

  // Watches `uid` (not validated here: see ValidateWatchUid). UNAVAILABLE after Shutdown;
  // then no callback is ever called.
  absl::StatusOr<std::shared_ptr<TokenWatch>> Watch(const std::string& uid,
                                                    StatusCallback on_status, EndCallback on_end);

  // Stops all polling and ends every watch with UNAVAILABLE "gateway shutting down", on
  // this thread. Later Watch calls fail. Idempotent. Call it before shutting down the gRPC
  // server so that open WatchTokenStatus streams finish.
  void Shutdown();

  Stats stats() const;

 private:
  // Shared with pending timer tasks and fetch callbacks, which may outlive this object.
  std::shared_ptr<internal::PollerCore> core_;
};

}  // namespace inspection::token_watch

#endif  // GATEWAY_TOKEN_WATCH_TOKEN_STATUS_POLLER_H_
