#include "gateway/services/health_service.h"

#include <memory>
#include <optional>
#include <utility>

namespace inspection::services {

using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

// One Watch stream: writes the latest status it was given, one write at a time.
class HealthService::WatchReactor final : public grpc::ServerWriteReactor<HealthCheckResponse> {
 public:
  WatchReactor(HealthService* service, std::string watched, std::shared_ptr<void> slot)
      : service_(service), watched_(std::move(watched)), slot_(std::move(slot)) {}

  const std::string& watched() const { return watched_; }

  // Sends `status` unless it is the last one sent or queued (a status that changed and
  // changed back while a write was in flight is not sent twice).
  void Send(ServingStatus status) {
    absl::MutexLock lock(&mu_);
    if (finishing_) return;
    if (writing_) {
      pending_ = status;
      return;
    }
    if (sent_.has_value() && *sent_ == status) return;
    WriteLocked(status);
  }

  // Ends the stream with `status` once what was sent is written.
  void End(grpc::Status status) {
    absl::MutexLock lock(&mu_);
    if (finishing_) return;
    end_with_ = std::move(status);
    if (!writing_) FinishLocked(*end_with_);
  }

  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    if (!ok || cancelled_) {
      FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "the health watch was cancelled"));
      return;
    }
    if (pending_.has_value()) {
      const ServingStatus next = *pending_;
      pending_.reset();
      if (!sent_.has_value() || *sent_ != next) {
        WriteLocked(next);
        return;
      }
    }
    if (end_with_.has_value()) FinishLocked(*end_with_);
  }

  void OnCancel() override {
    absl::MutexLock lock(&mu_);
    cancelled_ = true;
    // With a write in flight, OnWriteDone finishes (every RPC is finished exactly once,
    // after its last write completed).
    if (!writing_) {
      FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "the health watch was cancelled"));
    }
  }

  void OnDone() override {
    service_->Forget(this);
    delete this;  // releases the stream slot
  }

 private:
  void WriteLocked(ServingStatus status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    response_.set_status(status);
    sent_ = status;
    writing_ = true;
    StartWrite(&response_);
  }
  void FinishLocked(const grpc::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finishing_) return;
    finishing_ = true;
    Finish(status);
  }

  HealthService* const service_;
  const std::string watched_;
  const std::shared_ptr<void> slot_;
  absl::Mutex mu_;
  HealthCheckResponse response_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool finishing_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<ServingStatus> sent_ ABSL_GUARDED_BY(mu_);
  std::optional<ServingStatus> pending_ ABSL_GUARDED_BY(mu_);
  std::optional<grpc::Status> end_with_ ABSL_GUARDED_BY(mu_);
};

HealthService::HealthService(const AdmissionDeps& deps) : deps_(deps) {
  serving_.emplace("", true);
}

HealthService::~HealthService() = default;

HealthService::ServingStatus HealthService::StatusLocked(const std::string& service) const {
  const auto it = serving_.find(service);
  if (it == serving_.end()) return HealthCheckResponse::SERVICE_UNKNOWN;
  return it->second ? HealthCheckResponse::SERVING : HealthCheckResponse::NOT_SERVING;
}

void HealthService::SetServingStatus(const std::string& service, bool serving) {
  absl::MutexLock lock(&mu_);
  if (shut_down_) return;
  serving_[service] = serving;
  const auto it = watchers_.find(service);
  if (it == watchers_.end()) return;
  const ServingStatus status = StatusLocked(service);
  for (WatchReactor* watch : it->second) watch->Send(status);
}

void HealthService::Shutdown() {
  absl::MutexLock lock(&mu_);
  if (shut_down_) return;
  shut_down_ = true;
  for (auto& [service, serving] : serving_) serving = false;
  const grpc::Status ending(grpc::StatusCode::UNAVAILABLE,
                            "the gateway is shutting down; watch another replica");
  for (const auto& [service, watches] : watchers_) {
    for (WatchReactor* watch : watches) {
      watch->Send(HealthCheckResponse::NOT_SERVING);
      watch->End(ending);
    }
  }
}

size_t HealthService::watches() const {
  absl::MutexLock lock(&mu_);
  return watches_;
}

void HealthService::Forget(WatchReactor* watch) {
  absl::MutexLock lock(&mu_);
  const auto it = watchers_.find(watch->watched());
  if (it == watchers_.end() || it->second.erase(watch) == 0) return;
  --watches_;
  if (it->second.empty()) watchers_.erase(it);
}

grpc::ServerUnaryReactor* HealthService::Check(grpc::CallbackServerContext* context,
                                               const HealthCheckRequest* request,
                                               HealthCheckResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (auto refused = AdmitHealthCheck(*context, deps_, kCheckMethod); refused.has_value()) {
    reactor->Finish(refused->ToGrpcStatus());
    return reactor;
  }
  ServingStatus status;
  {
    absl::MutexLock lock(&mu_);
    status = StatusLocked(request->service());
  }
  if (status == HealthCheckResponse::SERVICE_UNKNOWN) {
    reactor->Finish(grpc::Status(grpc::StatusCode::NOT_FOUND, "service name unknown"));
    return reactor;
  }
  response->set_status(status);
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerWriteReactor<HealthCheckResponse>* HealthService::Watch(
    grpc::CallbackServerContext* context, const HealthCheckRequest* request) {
  std::shared_ptr<void> slot;
  if (auto refused =
          AdmitHealthCheck(*context, deps_, kWatchMethod, &slot, request->SpaceUsedLong());
      refused.has_value()) {
    return new FailedStream<HealthCheckResponse>(refused->ToGrpcStatus());
  }
  auto* watch = new WatchReactor(this, request->service(), std::move(slot));
  absl::MutexLock lock(&mu_);
  if (shut_down_) {
    // Called between Shutdown and the end of the server: told so, and ended.
    watch->Send(HealthCheckResponse::NOT_SERVING);
    watch->End(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                            "the gateway is shutting down; watch another replica"));
    return watch;
  }
  watchers_[watch->watched()].insert(watch);
  ++watches_;
  watch->Send(StatusLocked(watch->watched()));
  return watch;
}

}  // namespace inspection::services
