#include "gateway/services/idempotent_call.h"

#include <utility>

namespace inspection::services {

KeyedStart BeginKeyedCall(const CallDeps& deps, const std::string& account,
                          const std::string& caller, const std::string& raw_key,
                          const google::protobuf::Message& request, std::string* key,
                          std::function<void(KeyedFinish)> finish) {
  key->clear();
  if (deps.idempotency == nullptr || raw_key.empty()) return KeyedStart::kProceed;
  if (auto invalid = CheckIdempotencyKey(raw_key); invalid.has_value()) {
    finish({std::move(invalid), grpc::Status::OK, std::string(), false});
    return KeyedStart::kFinished;
  }
  *key = ScopedIdempotencyKey(caller, raw_key);
  // For a replay now and, possibly on another thread, for a waiter. ABORTED is the store
  // telling a waiter that the first call never finished (retry), not a replayed outcome.
  auto on_outcome = [finish](const pipeline::IdempotentOutcome& outcome) {
    finish({std::nullopt, outcome.status, outcome.response,
            outcome.status.error_code() != grpc::StatusCode::ABORTED});
  };
  pipeline::IdempotentOutcome replay;
  switch (
      deps.idempotency->Begin(account, *key, RequestFingerprint(request), &replay, on_outcome)) {
    case pipeline::IdempotencyStore::Decision::kLead:
      return KeyedStart::kProceed;
    case pipeline::IdempotencyStore::Decision::kReplay:
      on_outcome(replay);
      return KeyedStart::kFinished;
    case pipeline::IdempotencyStore::Decision::kWait:
      return KeyedStart::kFinished;
    case pipeline::IdempotencyStore::Decision::kMismatch:
      finish({errors::ApiError::InvalidRequest(
                  {{"idempotency_key",
                    "was already used with different parameters; use a new key for a new "
                    "operation"}}),
              grpc::Status::OK, std::string(), false});
      return KeyedStart::kFinished;
    case pipeline::IdempotencyStore::Decision::kUnavailable:
      finish({std::nullopt, replay.status, std::string(), false});
      return KeyedStart::kFinished;
  }
  return KeyedStart::kProceed;
}

void CompleteKeyedCall(const CallDeps& deps, const std::string& account, const std::string& key,
                       const std::optional<errors::ApiError>& error,
                       const google::protobuf::Message& response, bool vendor_not_reached) {
  if (key.empty() || deps.idempotency == nullptr) return;
  // A repeat gets back what the first caller got: the gRPC status, details included.
  const grpc::Status status = error.has_value() ? error->ToGrpcStatus() : grpc::Status::OK;
  pipeline::IdempotentOutcome outcome{status,
                                      status.ok() ? response.SerializeAsString() : std::string()};
  if (vendor_not_reached) {
    deps.idempotency->Abandon(account, key, outcome);
  } else {
    deps.idempotency->Complete(account, key, std::move(outcome));
  }
}

}  // namespace inspection::services
