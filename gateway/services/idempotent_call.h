#ifndef GATEWAY_SERVICES_IDEMPOTENT_CALL_H_
#define GATEWAY_SERVICES_IDEMPOTENT_CALL_H_

// Idempotency keys, the whole protocol in one place (docs/design.md §3): the calls that take
// a key (CreateToken, DetectDamage and StreamDamageResults' submission; an RPC whose request
// has a gateway-only `idempotency_key` field) begin with BeginKeyedCall, and CallVendor
// records a leader's outcome with CompleteKeyedCall. It wraps the call core, not the vendor
// stub: what a repeat must get back is the RPC's own outcome (the gRPC status and the
// response message as the first caller got it), which the vendor stub never sees.

#include <chrono>
#include <functional>
#include <optional>
#include <string>

#include <google/protobuf/message.h>
#include <grpcpp/support/status.h>

#include "absl/functional/any_invocable.h"
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

// `raw_key`: the caller's key (IdempotencyKeyFor: the request's field, else the metadata),
// "" for none; `caller`: its certificate identity, which scopes the key
// (ScopedIdempotencyKey). Without a store or a key: `proceed("")` at once. Otherwise asks the
// store (BeginAsync, never blocking this thread: a Redis store answers from its own threads)
// with the request's fingerprint and `deadline` (the call's), then either `proceed(key)`
// (the leader: pass the key to CallVendor, which completes it) or `finish` (a replay, a
// refusal, the store unavailable, or a waiter once the first call ends); exactly one of
// them, once, on this thread or another. `caller` and `request` are read before the store
// is asked, never after: the call that owns them may end before BeginKeyedCall returns.
void BeginKeyedCall(const CallDeps& deps, const std::string& account, const std::string& caller,
                    const std::string& raw_key, const google::protobuf::Message& request,
                    std::chrono::system_clock::time_point deadline,
                    absl::AnyInvocable<void(std::string key) &&> proceed,
                    std::function<void(KeyedFinish)> finish);

// The leader's outcome under `key` (from BeginKeyedCall): remembered for the repeats and
// handed to the waiters; when nothing reached the vendor (`vendor_not_reached`), handed to
// the waiters and forgotten, so that a retry with the same key calls the vendor. The outcome
// is kept as the caller got it: `error`'s grpc::Status (ApiError::ToGrpcStatus, details
// included), or OK with `response` serialized. `then` (may be null) is called once the
// outcome is saved (IdempotencyStore::Complete: the leader answers only then; after the first
// attempt when the store cannot save it), at once for an empty key or an abandoned one; on
// this thread or the store's. `response` is read before CompleteKeyedCall returns.
void CompleteKeyedCall(const CallDeps& deps, const std::string& account, const std::string& key,
                       const std::optional<errors::ApiError>& error,
                       const google::protobuf::Message& response, bool vendor_not_reached,
                       absl::AnyInvocable<void() &&> then = nullptr);

}  // namespace inspection::services

#endif  // GATEWAY_SERVICES_IDEMPOTENT_CALL_H_
