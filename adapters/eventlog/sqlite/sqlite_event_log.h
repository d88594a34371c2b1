#ifndef ADAPTERS_EVENTLOG_SQLITE_SQLITE_EVENT_LOG_H_
#define ADAPTERS_EVENTLOG_SQLITE_SQLITE_EVENT_LOG_H_

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "adapters/eventlog/event_log.h"

struct sqlite3;

namespace inspection::eventlog {

// Tuning of SqliteEventLog. The defaults are what OpenSqliteEventLog uses.
struct SqliteEventLogOptions {
  // How long a write (or a read during WAL recovery) waits for a lock held by another
  // connection (another handle or process on the same file) before failing Unavailable.
  absl::Duration busy_timeout = absl::Seconds(5);
  // How often WaitForAppend looks for appends made through other handles or processes
  // (appends through this handle wake it at once).
  absl::Duration poll_interval = absl::Milliseconds(50);
  // Most appends committed in one transaction; more queued appends go in the next one.
  int max_batch = 1024;
  // Most events ApplyRetention removes per transaction; appends are committed between
  // two such transactions, so a large cleanup never stalls webhooks for long.
  int retention_chunk = 10000;
  // CheckWritable fails when the file system holding the database has less free space
  // (statvfs f_bavail: what unprivileged processes may still use).
  int64_t min_free_bytes = 1 << 20;
  // When > 0, PRAGMA max_page_count for the writer: the database cannot grow beyond this
  // many pages (writes then fail with SQLITE_FULL). For tests that need a full disk.
  int64_t max_page_count = 0;
};

// The SQLite backend of EventLog; see event_log.h for the contract.
//
// Storage: one file in WAL mode with synchronous=FULL. Table `events` (seq INTEGER
// PRIMARY KEY AUTOINCREMENT, so a sequence number is never reused, even after retention
// removed every event; content_hash UNIQUE is the duplicate key, compared as an opaque
// string; account TEXT NOT NULL DEFAULT '', the vendor account) and table `meta`
// (`schema_version`, and `removed_up_to`: the highest seq ever removed by retention).
//
// Schema versions: 1 had no `account` column; 2 (current) added it. Open upgrades a
// version 1 file in place (ALTER TABLE events ADD COLUMN account ..., in the opening
// transaction), keeping its events, which read back with account "" (the default
// account). A version 2 file cannot be opened by version 1 code (it refuses any version
// but its own), so there is no downgrade.
//
// Cursors are "s:<seq>", seq in canonical decimal (no sign, no leading zero), e.g. "s:42".
// Anything else is InvalidArgument. Seqs increase but are not dense: an append found to
// be a duplicate consumes one (SQLite assigns the rowid before the conflict check).
// ReadAfter(after) is OutOfRange iff after's seq is below `removed_up_to`, i.e. an event
// after `after` has been removed; "" never is.
//
// Writes (Append, ApplyRetention, CheckWritable's probe) run on one writer thread with
// its own connection. Appends that are queued together are committed in one transaction
// (group commit): each caller blocks until the transaction holding its event committed.
// If the transaction fails (disk full, lock held by another process beyond busy_timeout)
// it is rolled back and every append in it fails Unavailable. Two identical payloads in
// one transaction are deduplicated like any others (the second is a duplicate).
//
// Reads (ReadAfter, LastCursor, WaitForAppend's poll) use a small pool of read
// connections; WAL lets them run while the writer commits, and each read sees every
// transaction committed before it started, by any handle or process.
//
// WaitForAppend is woken at once by commits through this handle and, for appends by other
// handles or processes, polls the AUTOINCREMENT high-water mark (sqlite_sequence) at most
// once per `poll_interval` per handle (shared by all its waiters), so such appends are
// noticed within about one interval.
//
// Thread-safe: every method may be called concurrently. The destructor commits what is
// queued, stops the writer and closes the connections; no method may still be running.
class SqliteEventLog final : public EventLog {
 public:
  // Counters of the writer, for tests and metrics.
  struct Stats {
    int64_t transactions = 0;    // append transactions committed
    int64_t appended = 0;        // events written by those transactions
    int64_t duplicates = 0;      // appends answered duplicate=true
    int64_t failed_batches = 0;  // append transactions rolled back
    int64_t largest_batch = 0;   // most appends in one transaction so far
    int64_t queued = 0;          // appends waiting for the writer now
    int64_t in_flight = 0;       // appends in the transaction being written now
  };

  // Opens (creating if missing) the database at `path`, upgrading a file of an older
  // schema version (see above). Unavailable when the file cannot be opened or locked;
  // FailedPrecondition when it is not a database of this schema (or of a newer version)
  // or is read-only.
  static absl::StatusOr<std::unique_ptr<SqliteEventLog>> Open(const std::string& path,
                                                              RetentionPolicy retention,
                                                              SqliteEventLogOptions options = {});

  ~SqliteEventLog() override;
  SqliteEventLog(const SqliteEventLog&) = delete;
  SqliteEventLog& operator=(const SqliteEventLog&) = delete;

  // InvalidArgument when `event.content_hash` is empty (it is the duplicate key).
  absl::StatusOr<AppendResult> Append(const NewEvent& event) override;
  absl::StatusOr<std::vector<StoredEvent>> ReadAfter(const std::string& after,
                                                     size_t limit) override;
  absl::StatusOr<std::string> LastCursor() override;
  // A malformed `after` returns at once.
  void WaitForAppend(const std::string& after, std::chrono::milliseconds timeout) override;
  // Removes events received before `now - max_age` and all but the newest `max_events`
  // (a limit <= 0 is no limit), `retention_chunk` events per transaction, each one also
  // raising removed_up_to. On an error the chunks already committed stay removed.
  absl::StatusOr<int64_t> ApplyRetention(absl::Time now) override;
  // Checks, on the writer thread (so behind queued appends): the writer is running, the
  // write lock can be taken within busy_timeout (BEGIN IMMEDIATE; ROLLBACK), and the file
  // system has at least min_free_bytes free. Does not write anything, so a disk that
  // fills up between the check and an append still fails that append Unavailable.
  absl::Status CheckWritable() override;
  // "sqlite:<path>".
  std::string Describe() const override;

  Stats stats() const;

  // "s:<seq>"; exposed for tests.
  static std::string CursorFor(int64_t seq);
  // The seq of a cursor (0 for ""); InvalidArgument when malformed.
  static absl::StatusOr<int64_t> ParseCursor(const std::string& cursor);

 private:
  struct Request;
  class Reader;
  class Writer;

  SqliteEventLog(std::string path, RetentionPolicy retention, SqliteEventLogOptions options,
                 std::unique_ptr<Writer> writer);

  // Queues `request` for the writer thread and blocks until it has been executed.
  void Submit(Request* request);
  bool HasWorkOrStopping() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void WriterLoop();
  // Executes a run of appends in one transaction and fills in their results; false when
  // the transaction was rolled back.
  bool ExecuteAppends(const std::vector<Request*>& batch);
  // Executes a retention chunk or a CheckWritable probe.
  void Execute(Request* request);

  // A read connection from the pool (opened when the pool is empty), and back.
  absl::StatusOr<std::unique_ptr<Reader>> AcquireReader();
  void ReleaseReader(std::unique_ptr<Reader> reader);
  // The AUTOINCREMENT high-water mark: the highest seq ever assigned (0 if none).
  absl::StatusOr<int64_t> ReadHighSeq();

  const std::string path_;
  const RetentionPolicy retention_;
  const SqliteEventLogOptions options_;
  // Used only by the writer thread once it runs.
  const std::unique_ptr<Writer> writer_;

  mutable absl::Mutex mu_;
  std::deque<Request*> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  Stats stats_ ABSL_GUARDED_BY(mu_);
  // Highest seq known to be committed (through this handle, or seen by a poll).
  int64_t known_high_seq_ ABSL_GUARDED_BY(mu_) = 0;
  // WaitForAppend's shared poll: one waiter polls at a time, at most once per interval.
  bool polling_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time next_poll_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  // Signalled when known_high_seq_ grows, a poll ends, or the log is stopping.
  absl::CondVar append_cv_;

  absl::Mutex pool_mu_;
  std::vector<std::unique_ptr<Reader>> idle_readers_ ABSL_GUARDED_BY(pool_mu_);

  std::thread writer_thread_;
};

}  // namespace inspection::eventlog

#endif  // ADAPTERS_EVENTLOG_SQLITE_SQLITE_EVENT_LOG_H_
