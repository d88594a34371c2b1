#include "gateway/services/idempotent_call.h"

#include <utility>

namespace inspection::services {

void BeginKeyedCall(const CallDeps& deps, const std::string& account, const std::string& caller,
                    const std::string& raw_key, const google::protobuf::Message& request,
                    std::chrono::system_clock::time_point deadline,
                    absl::AnyInvocable<void(std::string key) &&> proceed,
                    std::function<void(KeyedFinish)> finish) {
  if (deps.idempotency == nullptr || raw_key.empty()) {
    std::move(proceed)(std::string());
    return;
  }
  if (auto invalid = CheckIdempotencyKey(raw_key); invalid.has_value()) {
    finish({std::move(invalid), grpc::Status::OK, std::string(), false});
    return;
  }
  std::string key = ScopedIdempotencyKey(caller, raw_key);
  // For a replay now and, possibly on another thread, for a waiter. The store's own answers
  // (ABORTED: the first call never finished; UNAVAILABLE: shutting down, unreachable;
  // DEADLINE_EXCEEDED) are not replayed outcomes.
  auto on_outcome = [finish](const pipeline::IdempotentOutcome& outcome) {
    finish({std::nullopt, outcome.status, outcome.response, !outcome.from_store});
  };
  auto decided = [finish, on_outcome, key, proceed = std::move(proceed)](
                     pipeline::IdempotencyStore::Decision decision,
                     pipeline::IdempotentOutcome replay) mutable {
    switch (decision) {
      case pipeline::IdempotencyStore::Decision::kLead:
        std::move(proceed)(std::move(key));
        return;
      case pipeline::IdempotencyStore::Decision::kReplay:
        on_outcome(replay);
        return;
      case pipeline::IdempotencyStore::Decision::kWait:
        return;
      case pipeline::IdempotencyStore::Decision::kMismatch:
        finish({errors::ApiError::InvalidRequest(
                    {{"idempotency_key",
                      "was already used with different parameters; use a new key for a new "
                      "operation"}}),
                grpc::Status::OK, std::string(), false});
        return;
      case pipeline::IdempotencyStore::Decision::kUnavailable:
        finish({std::nullopt, replay.status, std::string(), false});
        return;
    }
  };
  const std::string fingerprint = RequestFingerprint(request);
  deps.idempotency->BeginAsync(account, key, fingerprint, absl::FromChrono(deadline),
                               std::move(decided), on_outcome);
}

void CompleteKeyedCall(const CallDeps& deps, const std::string& account, const std::string& key,
                       const std::optional<errors::ApiError>& error,
                       const google::protobuf::Message& response, bool vendor_not_reached,
                       absl::AnyInvocable<void() &&> then) {
  if (key.empty() || deps.idempotency == nullptr) {
    if (then) std::move(then)();
    return;
  }
  // A repeat gets back what the first caller got: the gRPC status, details included.
  const grpc::Status status = error.has_value() ? error->ToGrpcStatus() : grpc::Status::OK;
  pipeline::IdempotentOutcome outcome{status,
                                      status.ok() ? response.SerializeAsString() : std::string()};
  if (vendor_not_reached) {
    deps.idempotency->Abandon(account, key, outcome);
    if (then) std::move(then)();
  } else {
    deps.idempotency->Complete(account, key, std::move(outcome), std::move(then));
  }
}

}  // namespace inspection::services
