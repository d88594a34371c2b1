#include "gateway/token_watch/token_watch.h"

#include <utility>
#include <vector>

#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "adapters/vendor/request_validation.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"

namespace inspection::token_watch {

namespace {

// The same values as gateway/errors (ErrorInfo.domain, reason of request validation). This
// library does not link gateway_core, so they are spelled here; keep them in step.
constexpr char kErrorDomain[] = "inspection-gateway";
constexpr char kReasonInvalidRequest[] = "INVALID_REQUEST";

}  // namespace

grpc::Status ValidateWatchUid(const std::string& uid) {
  // The same rules as GetTokenStatus: one definition, in gateway/validation.
  v1::GetTokenStatusRequest request;
  request.set_uid(uid);
  const validation::Violations violations = validation::ValidateRequest(request);
  if (violations.empty()) return grpc::Status::OK;

  const std::string message =
      violations.size() == 1
          ? absl::StrCat("invalid request: ", violations[0].field, ": ", violations[0].description)
          : absl::StrCat("invalid request: ", violations.size(),
                         " field violations (see BadRequest details)");
  google::rpc::Status status;
  status.set_code(grpc::StatusCode::INVALID_ARGUMENT);
  status.set_message(message);
  google::rpc::ErrorInfo info;
  info.set_reason(kReasonInvalidRequest);
  info.set_domain(kErrorDomain);
  status.add_details()->PackFrom(info);
  google::rpc::BadRequest bad_request;
  for (const validation::FieldViolation& problem : violations) {
    auto* violation = bad_request.add_field_violations();
    violation->set_field(problem.field);
    violation->set_description(problem.description);
  }
  status.add_details()->PackFrom(bad_request);
  return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, message, status.SerializeAsString());
}

WatchTokenStatusReactor::WatchTokenStatusReactor(TokenStatusPoller* poller, const std::string& uid,
                                                 std::shared_ptr<void> guard, OnFinish on_finish)
    : guard_(std::move(guard)), on_finish_(std::move(on_finish)) {
  if (grpc::Status invalid = ValidateWatchUid(uid); !invalid.ok()) {
    {
      absl::MutexLock lock(&mu_);
      finished_ = true;
    }
    Finish(std::move(invalid));
    return;
  }
  grpc::Status failed;
  {
    // Held across Watch so that a callback arriving on another thread right after
    // registration waits until watch_ is set. (Watch never calls back before returning,
    // so this cannot deadlock.)
    absl::MutexLock lock(&mu_);
    absl::StatusOr<std::shared_ptr<TokenWatch>> watch = poller->Watch(
        uid, [this](const v1::GetTokenStatusResponse& status) { OnStatus(status); },
        [this](grpc::Status status) { OnEnd(std::move(status)); });
    if (watch.ok()) {
      watch_ = *std::move(watch);
    } else {
      // Poller shut down: no callback will come.
      finished_ = true;
      failed = grpc::Status(grpc::StatusCode::UNAVAILABLE, std::string(watch.status().message()));
    }
  }
  if (!failed.ok()) Finish(std::move(failed));
}

void WatchTokenStatusReactor::OnStatus(const v1::GetTokenStatusResponse& status) {
  Next next;
  {
    absl::MutexLock lock(&mu_);
    if (cancelled_ || finished_) return;
    v1::WatchTokenStatusResponse message;
    if (status.has_token()) *message.mutable_token() = status.token();
    if (status.has_web_api_version()) message.set_web_api_version(status.web_api_version());
    pending_ = std::move(message);  // replaces an older pending status: latest wins
    next = NextLocked();
  }
  Perform(next);
}

void WatchTokenStatusReactor::OnEnd(grpc::Status status) {
  Next next;
  {
    absl::MutexLock lock(&mu_);
    end_ = std::move(status);
    next = NextLocked();
  }
  Perform(next);
}

void WatchTokenStatusReactor::OnWriteDone(bool ok) {
  Next next;
  std::shared_ptr<TokenWatch> to_cancel;
  {
    absl::MutexLock lock(&mu_);
    write_in_flight_ = false;
    if (ok) ++sent_;
    if (!ok) {
      // The stream is broken (client gone, deadline): stop writing and end the watch; its
      // on_end (CANCELLED) then finishes the call, unless it has ended already.
      cancelled_ = true;
      pending_.reset();
      to_cancel = watch_;
    }
    next = NextLocked();
  }
  Perform(next);
  if (to_cancel != nullptr) to_cancel->Cancel();
}

void WatchTokenStatusReactor::OnCancel() {
  std::shared_ptr<TokenWatch> to_cancel;
  {
    absl::MutexLock lock(&mu_);
    cancelled_ = true;
    pending_.reset();
    to_cancel = watch_;
  }
  // Releases the poller's watcher now (the last one stops the uid's polling); on_end then
  // finishes the call. gRPC needs Finish even for a cancelled call before OnDone.
  if (to_cancel != nullptr) to_cancel->Cancel();
}

void WatchTokenStatusReactor::OnDone() { delete this; }

WatchTokenStatusReactor::Next WatchTokenStatusReactor::NextLocked() {
  if (finished_ || write_in_flight_) return Next::kNothing;
  if (pending_.has_value() && !cancelled_) {
    writing_ = *std::move(pending_);
    pending_.reset();
    write_in_flight_ = true;
    return Next::kWrite;
  }
  if (end_.has_value()) {
    finished_ = true;
    return Next::kFinish;
  }
  return Next::kNothing;
}

void WatchTokenStatusReactor::Perform(Next next) {
  switch (next) {
    case Next::kNothing:
      return;
    case Next::kWrite:
      // writing_ is stable until OnWriteDone: NextLocked only refills it with no write in
      // flight.
      StartWrite(&writing_);
      return;
    case Next::kFinish: {
      grpc::Status status;
      uint64_t sent = 0;
      {
        absl::MutexLock lock(&mu_);
        status = *end_;
        sent = sent_;
      }
      if (on_finish_) on_finish_(status, sent);
      // After Finish, OnDone may delete this object at any moment: touch nothing after it.
      Finish(std::move(status));
      return;
    }
  }
}

grpc::ServerWriteReactor<v1::WatchTokenStatusResponse>* NewWatchTokenStatusReactor(
    TokenStatusPoller* poller, grpc::CallbackServerContext* context,
    const v1::WatchTokenStatusRequest* request, std::shared_ptr<void> guard,
    WatchTokenStatusReactor::OnFinish on_finish) {
  return new WatchTokenStatusReactor(poller, request->uid(), std::move(guard),
                                     std::move(on_finish));
}

}  // namespace inspection::token_watch
