#ifndef ADAPTERS_REDIS_REDIS_STATUS_H_
#define ADAPTERS_REDIS_REDIS_STATUS_H_

// What a Redis-backed store's error means beyond its code, for callers that do not talk to
// Redis themselves (the webhook receiver): header-only, no hiredis.

#include "absl/status/status.h"

namespace inspection::redis {

// The payload (absl::Status::GetPayload) that marks RedisConnection::WaitForReplicas'
// Unavailable: the write is on the primary but fewer replicas than required
// (redis.min_replicas_acked) confirmed it in time. The write may survive a failover or
// not; the caller must not acknowledge it (repeating it is safe).
inline constexpr char kNotReplicatedPayloadUrl[] = "type.inspection-gateway/redis.not_replicated";

inline bool IsNotReplicated(const absl::Status& status) {
  return status.GetPayload(kNotReplicatedPayloadUrl).has_value();
}

}  // namespace inspection::redis

#endif  // ADAPTERS_REDIS_REDIS_STATUS_H_
