// What the gateway started at the vendor and still waits to hear about (issue 17): an
// inspection submitted for damage detection, a token created for a customer. Results
// normally arrive as webhooks; the ledger lets a reconciler find, after a restart or on
// another replica, the work whose result never came, and poll for it.
//
// The gateway's reconciler (gateway/reconcile) records into it and claims from it; both
// backends pass the shared suite in tests/adapters/eventlog/work_ledger_conformance.h.
#ifndef ADAPTERS_EVENTLOG_WORK_LEDGER_H_
#define ADAPTERS_EVENTLOG_WORK_LEDGER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace inspection::eventlog {

enum class WorkKind {
  kInspection = 1,  // DetectDamage / StreamDamageResults: waits for createReport
  kToken = 2,       // CreateToken: waits for the token's inspection to be reported
};

struct WorkItem {
  WorkKind kind = WorkKind::kInspection;
  std::string account;  // the vendor account ("" = the default one)
  std::string id;       // the inspection id, or the token uid
  int64_t started_at_ms = 0;
  int64_t next_poll_at_ms = 0;  // due for a poll from then on
  int attempts = 0;             // polls made so far
};

// Durable, and shared by the replicas that share the store. Thread-safe.
class WorkLedger {
 public:
  virtual ~WorkLedger() = default;

  // Records `item`, unless the same (kind, account, id) is recorded already: the first
  // record wins (a repeated submission is the same work). attempts starts at 0.
  virtual absl::Status Record(const WorkItem& item) = 0;

  // The result arrived: (kind, account, id) is never claimed again. OK when unknown.
  virtual absl::Status Resolve(WorkKind kind, const std::string& account,
                               const std::string& id) = 0;

  // Claims up to `limit` unresolved items due at `now_ms` (next_poll_at_ms <= now_ms) that
  // nobody holds (never claimed, released, or the lease ended), and leases them to `owner`
  // until now_ms + lease_ms. New work first: the fewest attempts first, and among equals
  // the longest due (counted from the end of an ended lease), so items polled again and
  // again cannot keep a new one waiting (issue 31). A held item is not claimed again before
  // its lease ends, not even by its holder: a replica that dies mid-poll leaves its items
  // to the others (or to itself, restarted) one lease later.
  virtual absl::StatusOr<std::vector<WorkItem>> ClaimDue(int64_t now_ms, size_t limit,
                                                         const std::string& owner,
                                                         int64_t lease_ms) = 0;

  // After a poll that found no result yet: one more attempt, due again at
  // `next_poll_at_ms`, claim released. FAILED_PRECONDITION when `owner` no longer holds
  // the item (its lease ended and another owner claimed it, or it was resolved).
  virtual absl::Status Reschedule(const WorkItem& item, const std::string& owner,
                                  int64_t next_poll_at_ms) = 0;

  // Unresolved items claimable by `due_by_ms` (INT64_MAX: all of them); one being polled
  // counts from the end of its lease.
  virtual absl::StatusOr<int64_t> CountPending(int64_t due_by_ms) = 0;

  // Forgets every item started before `started_before_ms`, resolved or not. Returns how
  // many went.
  virtual absl::StatusOr<int64_t> Trim(int64_t started_before_ms) = 0;
};

// The SQLite backend: table `work` in the file at `path` (created if missing), WAL mode,
// synchronous=FULL (a recorded item survives kill -9 and a power cut). FAILED_PRECONDITION
// for a file that is not a database or is damaged; UNAVAILABLE for I/O and lock timeouts.
absl::StatusOr<std::unique_ptr<WorkLedger>> OpenSqliteWorkLedger(
    const std::string& path, absl::Duration busy_timeout = absl::Seconds(5));

// The Redis backend, for replicas that share a Redis (the URL of the Redis event log:
// redis://[[user]:password@]host[:port][/db][?stream=name]). Keys `<stream>:work:items`
// (a hash: one field per item), `<stream>:work:due` and `<stream>:work:started` (sorted
// sets); every operation is one Lua script, so replicas never claim the same item (Trim:
// one per kRedisWorkLedgerTrimBatch items).
// Durability is the server's (AOF with fsync for a kill -9 of Redis itself).
// INVALID_ARGUMENT for a bad URL (never echoing the password); UNAVAILABLE when Redis
// cannot be reached.
absl::StatusOr<std::unique_ptr<WorkLedger>> OpenRedisWorkLedger(const std::string& url);

// The most items one Redis script of Trim forgets. A script blocks the server while it
// runs, and the event log shares it: Trim runs such scripts one after the other until
// nothing older is left, and the server serves other clients between them. A script of
// 1,000 items takes the server about 2 ms (RedisWorkLedgerTest's trim of 50,000: 51
// scripts, 2 ms each on average, where one script for all of them held it for 600 ms).
inline constexpr int64_t kRedisWorkLedgerTrimBatch = 1000;

}  // namespace inspection::eventlog

#endif  // ADAPTERS_EVENTLOG_WORK_LEDGER_H_
