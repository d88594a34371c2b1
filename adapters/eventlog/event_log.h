#ifndef ADAPTERS_EVENTLOG_EVENT_LOG_H_
#define ADAPTERS_EVENTLOG_EVENT_LOG_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace inspection::eventlog {

// The name of the one event the gateway appends itself: a damages report recovered by
// polling (gateway/reconcile), payload {"source": "reconcile", ...}. Never a vendor's name.
inline constexpr char kDamagesReportEventName[] = "damagesReport";

// A vendor event as the webhook receiver hands it to the log.
struct NewEvent {
  // The vendor account the event came from (its webhook path); "" is the default
  // account. Subscribers only see their own account's events.
  std::string account;
  std::string event_name;  // raw, as the vendor sent it ("createReport", or unknown names)
  std::string inspection_id;
  std::string token_id;
  std::string vehicle_id;
  std::string payload;  // the webhook body, JSON text exactly as received
  // The duplicate key (non-empty): lower-case hex SHA-256, computed by the caller, of
  // everything that makes two deliveries the same event. It must cover the account as
  // well as the payload, so that two accounts delivering byte-identical bodies are two
  // events: e.g. the hash of the payload alone for the default account (the key events
  // stored before accounts existed have) and of the account and the payload for the
  // others. The backends store and compare it as an opaque string and never recompute
  // it from the other fields.
  std::string content_hash;
  int64_t received_at_ms = 0;  // Unix milliseconds
};

struct StoredEvent {
  std::string cursor;  // opaque; totally orders the log
  NewEvent event;
};

struct AppendResult {
  std::string cursor;
  // True when an event with the same content_hash was received within the dedupe window
  // and is retained: nothing was written and `cursor` is that event's.
  bool duplicate = false;
};

struct RetentionPolicy {
  std::chrono::seconds max_age{std::chrono::hours(24 * 7)};
  int64_t max_events = 1000000;
  // Independent of retention: an event is a duplicate of a retained one with the same
  // content_hash only when that one was received (received_at_ms) less than this before
  // it. A byte-identical delivery after the window (a second TestWebhook, a re-run) is a
  // new event.
  std::chrono::seconds dedupe_window{std::chrono::hours(48)};
};

// The durable, totally ordered log of vendor events, shared by every replica that
// points at the same store. Backends: SQLite (one process; default) and Redis Streams
// (replicas). Thread-safe: every method may be called concurrently.
class EventLog {
 public:
  virtual ~EventLog() = default;

  // Stores `event` (every field, the account included) durably before returning (the
  // receiver acknowledges the webhook only after this), unless an event with the same
  // content_hash, received within the dedupe window before it, is retained, whatever its
  // account (hence content_hash covers it).
  // Unavailable when the store cannot take it (the receiver then answers 503).
  virtual absl::StatusOr<AppendResult> Append(const NewEvent& event) = 0;

  // Up to `limit` events strictly after `after`, in log order; "" reads from the oldest
  // retained event. OutOfRange when retention removed events after `after` (the
  // caller must resync); InvalidArgument when `after` is not a cursor of this backend.
  // Only events that would survive the store's failover are returned (Redis: the replicas
  // an append waits for hold them), so a reader never hands out an event a failover then
  // loses; Unavailable (retry) when that cannot be confirmed now.
  virtual absl::StatusOr<std::vector<StoredEvent>> ReadAfter(const std::string& after,
                                                             size_t limit) = 0;

  // Cursor of the newest event; "" when the log is empty.
  virtual absl::StatusOr<std::string> LastCursor() = 0;

  // Returns when an event after `after` may exist (another replica's appends included)
  // or `timeout` passed; spurious returns are allowed. Used by the fan-out tailer.
  virtual void WaitForAppend(const std::string& after, std::chrono::milliseconds timeout) = 0;

  // Removes what the retention policy no longer keeps; returns how many events.
  virtual absl::StatusOr<int64_t> ApplyRetention(absl::Time now) = 0;

  // OK when an append would be accepted now (the readiness check).
  virtual absl::Status CheckWritable() = 0;

  // Human-readable backend description without secrets ("sqlite:/var/lib/x.db").
  virtual std::string Describe() const = 0;
};

// SQLite in WAL mode at `path` (created if missing). Appends that arrive together are
// committed in one transaction (group commit) with synchronous=FULL, so every
// acknowledged event survives a crash of the process or the machine. A file written by
// the previous version (no account column) is upgraded when opened; its events keep
// their cursors and read back with account "".
absl::StatusOr<std::unique_ptr<EventLog>> OpenSqliteEventLog(const std::string& path,
                                                             RetentionPolicy retention);

// Redis Streams at `url`: redis://[:password@]host:port[/db][?stream=name] (stream
// default "inspection:events"). Duplicate detection and the append are one atomic
// script, so replicas never store an event twice. The account is the entry field
// "account"; entries written by the previous version lack it and read as account "".
absl::StatusOr<std::unique_ptr<EventLog>> OpenRedisEventLog(const std::string& url,
                                                            RetentionPolicy retention);

// Orders two cursors of the same backend: <0, 0, >0. "" sorts before every cursor.
// Knows both formats: SQLite "s:<seq>" and Redis stream ids "<ms>-<seq>".
// InvalidArgument for anything else, or for cursors of different backends.
absl::StatusOr<int> CompareCursors(const std::string& a, const std::string& b);

}  // namespace inspection::eventlog

#endif  // ADAPTERS_EVENTLOG_EVENT_LOG_H_
