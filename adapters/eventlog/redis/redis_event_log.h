#ifndef ADAPTERS_EVENTLOG_REDIS_REDIS_EVENT_LOG_H_
#define ADAPTERS_EVENTLOG_REDIS_REDIS_EVENT_LOG_H_

// The Redis Streams backend of eventlog::EventLog (OpenRedisEventLog in event_log.h is
// this with the default options).
//
// Layout, for a stream named S (one Redis key each; S must not collide with other data):
//   S                      the stream; entry ID "<ms>-<seq>" is the cursor; fields
//                          event_name, inspection_id, token_id, vehicle_id, payload,
//                          content_hash, received_at_ms, account (always written, ""
//                          for the default account; entries written before it existed
//                          lack it and read as account "")
//   S:dedupe:<hash>        ID of the retained event with that content_hash (the
//                          caller's duplicate key, used as is: it covers the account)
//   S:removed_up_to        highest ID that retention removed (for OUT_OF_RANGE)
//   S:writable-probe       written by CheckWritable() (expires after 10 s)
// A standalone Redis server (redis://, the primary's address) or the primary that Redis
// Sentinel names (redis+sentinel://, followed through failovers: adapters/redis). There is
// no Cluster redirection. The scripts touch the dedupe keys without declaring them, so a
// future Cluster port needs a hash-tagged stream name ("{name}").
//
// Append is one Lua script (dedupe GET, XADD, SET of the dedupe key), so replicas
// appending the same content at once store it exactly once. Durability: Append returns
// only after RedisOptions::min_replicas_acked replicas have the entry (WAIT; a duplicate
// refreshes its dedupe key's TTL, a write, so that the WAIT also covers the first copy),
// else Unavailable carrying redis::kNotReplicatedPayloadUrl (the entry is on the primary
// and may survive; appending it again is safe). So a primary that dies loses no append
// that was answered OK as long as a confirming replica is promoted (Sentinel promotes the
// most up-to-date one). Against a whole-set restart run Redis with `appendonly yes` and
// `appendfsync always` (or everysec: up to a second). With no persistence (the tests) a
// restart of every node loses events and the log restarts empty; readers cannot detect
// this from their cursors.
//
// Retention: by count (exact) and by age, where age is `now - received_at_ms` (the
// gateway's clock, like `now`), not the entry ID (Redis's clock). Both remove a prefix
// of the stream: an event is removed by age when it and every older event are too old,
// so skew between replicas can only delay a removal. A max_age or max_events <= 0 means
// no such limit (as for SQLite). Removal, the dedupe keys of the
// removed events and S:removed_up_to change in one script. Dedupe keys also expire
// after twice max_age as a backstop for events removed by other means (XTRIM by hand).
//
// Connections: short commands use a pool (one connection per concurrent caller, idle
// ones kept); WaitForAppend's blocking XREAD uses a separate pool, so a long wait never
// holds a connection an append needs. Every connect and command has a timeout, so a
// dead or frozen Redis gives Unavailable after that long instead of hanging; a lost
// connection is dropped and the next call opens a new one (a connection found closed
// by the server, e.g. after a restart, is retried once at once, which is safe because
// every operation here is idempotent: a repeated append finds its own dedupe key).
// Unavailable on a timeout means "outcome unknown": the command may still run.

#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "adapters/eventlog/event_log.h"
#include "adapters/eventlog/work_ledger.h"
#include "adapters/redis/redis_connection.h"

namespace inspection::eventlog {

struct RedisEventLogOptions {
  absl::Duration connect_timeout = absl::Seconds(2);
  absl::Duration command_timeout = absl::Seconds(2);
  // Idle connections kept per pool; more are opened when more callers run at once.
  size_t max_idle_connections = 32;
  // Entries one retention script examines; bounds how long one script blocks Redis
  // (ApplyRetention runs it until nothing more is due).
  int retention_batch = 1000;
  // The sentinels' password and what an acknowledged append waits for (the timeouts are
  // the two above).
  redis::RedisOptions redis;
};

// Opens the log at `url` (see event_log.h for the URL form) and checks that the server
// answers (connect, AUTH, SELECT, PING). InvalidArgument for a bad URL or
// retention_batch, Unavailable when Redis cannot be reached now (the caller may retry),
// PermissionDenied when AUTH is refused. The log is thread-safe; its destructor closes
// every connection and must not run concurrently with a call.
absl::StatusOr<std::unique_ptr<EventLog>> OpenRedisEventLogWithOptions(
    const std::string& url, RetentionPolicy retention, RedisEventLogOptions options);

// OpenRedisWorkLedger (work_ledger.h) with the sentinels' password and the acknowledgement
// settings: Record returns only once `redis.min_replicas_acked` replicas have the item.
absl::StatusOr<std::unique_ptr<WorkLedger>> OpenRedisWorkLedgerWithOptions(
    const std::string& url, const redis::RedisOptions& redis);

}  // namespace inspection::eventlog

#endif  // ADAPTERS_EVENTLOG_REDIS_REDIS_EVENT_LOG_H_
