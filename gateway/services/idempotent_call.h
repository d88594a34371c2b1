#ifndef GATEWAY_SERVICES_IDEMPOTENT_CALL_H_
#define GATEWAY_SERVICES_IDEMPOTENT_CALL_H_

// Idempotency keys, the whole protocol in one place (docs/design.md §3): the calls that take
// a key (CreateToken, DetectDamage and StreamDamageResults' submission; an RPC whose request
// has a gateway-only `idempotency_key` field) begin with BeginKeyedCall, and CallVendor
// records a leader's outcome with CompleteKeyedCall. It wraps the call core, not the vendor
// stub: what a repeat must get back is the RPC's own outcome (the gRPC status and the
// response message as the first caller got it), which the vendor stub never sees.

#include <functional>
#include <optional>
#include <string>

#include <google/protobuf/message.h>
#include <grpcpp/support/status.h>

#include "gateway/errors/api_error.h"
#include "gateway/services/unary_call.h"

namespace inspection::services {

// How a keyed call ends without calling the vendor.
struct KeyedFinish {
  // Refused before anything else: the key is not 1 to kMaxIdempotencyKeyLength visible
  // ASCII characters, or it was used with other parameters (INVALID_ARGUMENT, field
  // idempotency_key). `status` and `response` are then unused.
  std::optional<errors::ApiError> refused;
  // Otherwise the outcome to answer with: the first call's (its status and, when OK, its
  // serialized response), UNAVAILABLE when the store cannot be read, or ABORTED for a call
  // that waited for a first one that never finished (retry with the same key).
  grpc::Status status;
  std::string response;
  // The first call's outcome, replayed (not UNAVAILABLE, not ABORTED): the caller says so
  // with `idempotency-replayed: true`.
  bool replayed = false;
};

enum class KeyedStart {
  kProceed,   // call the vendor: the call has no key, or it is the first with its key
  kFinished,  // `finish` ran, or runs once the first call ends (any thread): do not call
};

// `raw_key`: the caller's key (IdempotencyKeyFor: the request's field, else the metadata),
// "" for none; `caller`: its certificate identity, which scopes the key
// (ScopedIdempotencyKey). Without a store or a key: kProceed with `*key` empty. Otherwise
// Begin on the store with the request's fingerprint: kProceed with `*key` set (the leader:
// pass it to CallVendor, which completes it), or kFinished after calling `finish` now
// (a replay, a refusal, the store unavailable) or later (a waiter). `caller` and `request`
// are read before the store is asked, never after: `finish` may end the call that owns them
// (the unary handler deletes itself) before BeginKeyedCall returns.
KeyedStart BeginKeyedCall(const CallDeps& deps, const std::string& account,
                          const std::string& caller, const std::string& raw_key,
                          const google::protobuf::Message& request, std::string* key,
                          std::function<void(KeyedFinish)> finish);

// The leader's outcome under `key` (from BeginKeyedCall): remembered for the repeats and
// handed to the waiters; when nothing reached the vendor (`vendor_not_reached`), handed to
// the waiters and forgotten, so that a retry with the same key calls the vendor. The outcome
// is kept as the caller got it: `error`'s grpc::Status (ApiError::ToGrpcStatus, details
// included), or OK with `response` serialized. No-op for an empty key.
void CompleteKeyedCall(const CallDeps& deps, const std::string& account, const std::string& key,
                       const std::optional<errors::ApiError>& error,
                       const google::protobuf::Message& response, bool vendor_not_reached);

}  // namespace inspection::services

#endif  // GATEWAY_SERVICES_IDEMPOTENT_CALL_H_
