#include "adapters/eventlog/sqlite/sqlite_event_log.h"

#include <sqlite3.h>
#include <sys/statvfs.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "adapters/eventlog/sqlite/sqlite_support.h"

namespace inspection::eventlog {
namespace {

// 1: the first version. 2: events.account (the vendor account; '' = the default one).
constexpr int kSchemaVersion = 2;
constexpr char kCursorPrefix[] = "s:";
// Idle read connections kept open; more are opened under load and closed when returned.
constexpr size_t kMaxIdleReaders = 8;

using sqlite::BindText;
using sqlite::ColumnInt64OrZero;
using sqlite::ColumnString;
using sqlite::Db;
using sqlite::OpenErrorCode;
using sqlite::ScopedReset;
using sqlite::StepToDone;
using sqlite::Stmt;

constexpr char kComponent[] = "sqlite event log";

absl::Status SqliteError(sqlite3* db, int rc, const char* what,
                         absl::StatusCode code = absl::StatusCode::kUnavailable) {
  return sqlite::Error(kComponent, db, rc, what, code);
}

absl::Status Prepare(sqlite3* db, const char* sql, Stmt* out) {
  return sqlite::Prepare(kComponent, db, sql, out);
}

absl::StatusOr<Db> OpenConnection(const std::string& path, int flags, absl::Duration busy_timeout) {
  return sqlite::OpenConnection(kComponent, path, flags, busy_timeout);
}

absl::Status Exec(sqlite3* db, const char* sql, const char* what) {
  return sqlite::Exec(kComponent, db, sql, what);
}

// Creates the current schema in a new file. In a file of an older version every statement
// is a no-op (the tables exist, schema_version is kept) and MigrateSchema upgrades it.
constexpr char kSchemaSql[] = R"sql(
CREATE TABLE IF NOT EXISTS events(
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  event_name TEXT NOT NULL,
  inspection_id TEXT NOT NULL,
  token_id TEXT NOT NULL,
  vehicle_id TEXT NOT NULL,
  payload TEXT NOT NULL,
  content_hash TEXT NOT NULL UNIQUE,
  received_at_ms INTEGER NOT NULL,
  account TEXT NOT NULL DEFAULT '');
CREATE INDEX IF NOT EXISTS events_by_received_at ON events(received_at_ms);
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
INSERT OR IGNORE INTO meta(key, value) VALUES('schema_version', 2), ('removed_up_to', 0);
)sql";

// True when table `table` has a column `column` (PRAGMA table_info).
absl::StatusOr<bool> HasColumn(sqlite3* db, const char* table, const std::string& column) {
  Stmt info;
  const std::string sql = absl::StrCat("PRAGMA table_info(", table, ")");
  if (absl::Status s = Prepare(db, sql.c_str(), &info); !s.ok()) return s;
  ScopedReset reset(info.get());
  int rc;
  while ((rc = sqlite3_step(info.get())) == SQLITE_ROW) {
    if (ColumnString(info.get(), 1) == column) return true;  // column 1: the name
  }
  if (rc != SQLITE_DONE) return SqliteError(db, rc, "table_info", OpenErrorCode(rc));
  return false;
}

// Upgrades a file of schema `*version` (older than kSchemaVersion) in place and sets
// `*version` to kSchemaVersion. Runs inside the opening transaction, so a failure (or a
// crash) leaves the file as it was, and two processes never migrate at once.
absl::Status MigrateSchema(sqlite3* db, int64_t* version) {
  if (*version == 1) {
    // 1 -> 2: events.account. The rows of version 1 are the default account's (''). The
    // column check makes this safe to repeat on a file whose column already exists.
    absl::StatusOr<bool> has_account = HasColumn(db, "events", "account");
    if (!has_account.ok()) return has_account.status();
    if (!*has_account) {
      if (absl::Status s =
              Exec(db, "ALTER TABLE events ADD COLUMN account TEXT NOT NULL DEFAULT ''",
                   "add column events.account");
          !s.ok()) {
        return s;
      }
    }
    *version = 2;
  }
  const std::string update =
      absl::StrCat("UPDATE meta SET value = ", *version, " WHERE key = 'schema_version'");
  return Exec(db, update.c_str(), "update schema version");
}

}  // namespace

// ---------------------------------------------------------------------------
// Requests to the writer thread.
// ---------------------------------------------------------------------------

struct SqliteEventLog::Request {
  enum class Kind { kAppend, kRetentionChunk, kProbe };

  explicit Request(Kind k) : kind(k) {}

  const Kind kind;
  // kAppend.
  const NewEvent* event = nullptr;
  AppendResult append_result;
  int64_t seq = 0;
  // kRetentionChunk. `excess`: events over max_events still to remove, -1 until counted
  // (by the first chunk); updated when the chunk commits.
  int64_t cutoff_ms = std::numeric_limits<int64_t>::min();
  int64_t excess = -1;
  int64_t removed = 0;

  // Written by the writer thread before `done`, read by the caller after it.
  absl::Status status;
  bool done = false;  // guarded by SqliteEventLog::mu_
  // Signalled with `done`. One per request rather than mu_.Await(Condition(&done)):
  // absl::Mutex evaluates every awaited condition on each unlock, which costs O(queued
  // appends) per unlock when hundreds of webhooks wait for the same commit.
  absl::CondVar done_cv;
};

// ---------------------------------------------------------------------------
// The writer connection: used by the opening thread, then only by the writer thread.
// ---------------------------------------------------------------------------

class SqliteEventLog::Writer {
 public:
  static absl::StatusOr<std::unique_ptr<Writer>> Open(const std::string& path,
                                                      const SqliteEventLogOptions& options);

  sqlite3* db() const { return db_.get(); }

  absl::Status Begin() {
    const int rc = StepToDone(begin_.get());
    return rc == SQLITE_DONE ? absl::OkStatus() : SqliteError(db(), rc, "begin");
  }
  absl::Status Commit() {
    const int rc = StepToDone(commit_.get());
    return rc == SQLITE_DONE ? absl::OkStatus() : SqliteError(db(), rc, "commit");
  }
  // Rolls back whatever is open. Some errors (SQLITE_FULL, SQLITE_IOERR) already rolled
  // the transaction back, hence the autocommit check.
  void Rollback() {
    if (sqlite3_get_autocommit(db()) == 0) StepToDone(rollback_.get());
  }

  Db db_;
  Stmt begin_, commit_, rollback_;
  Stmt retire_hash_, insert_, find_by_hash_;
  Stmt count_, delete_oldest_, delete_older_than_, raise_removed_up_to_;
};

absl::StatusOr<std::unique_ptr<SqliteEventLog::Writer>> SqliteEventLog::Writer::Open(
    const std::string& path, const SqliteEventLogOptions& options) {
  auto writer = std::make_unique<Writer>();
  absl::StatusOr<Db> db =
      OpenConnection(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, options.busy_timeout);
  if (!db.ok()) return db.status();
  writer->db_ = std::move(*db);
  sqlite3* raw = writer->db();
  // A write-protected file is opened read-only without an error; say so now rather than
  // at the first append.
  if (sqlite3_db_readonly(raw, "main") == 1) {
    return absl::FailedPreconditionError(absl::StrCat("sqlite event log: ", path, " is read-only"));
  }
  {
    Stmt mode;
    if (absl::Status s = Prepare(raw, "PRAGMA journal_mode=WAL", &mode); !s.ok()) return s;
    ScopedReset reset(mode.get());
    const int rc = sqlite3_step(mode.get());
    if (rc != SQLITE_ROW) return SqliteError(raw, rc, "journal_mode=WAL", OpenErrorCode(rc));
    if (ColumnString(mode.get(), 0) != "wal") {
      return absl::FailedPreconditionError(
          absl::StrCat("sqlite event log: ", path, " cannot use WAL mode"));
    }
  }
  // synchronous=FULL: every commit fsyncs the WAL, so an acknowledged append survives a
  // power loss, not only a process crash. journal_size_limit: truncate the WAL back after
  // checkpoints instead of keeping its peak size on disk.
  if (absl::Status s =
          Exec(raw, "PRAGMA synchronous=FULL; PRAGMA journal_size_limit=67108864;", "pragmas");
      !s.ok()) {
    return s;
  }
  if (options.max_page_count > 0) {
    const std::string pragma = absl::StrCat("PRAGMA max_page_count=", options.max_page_count);
    if (absl::Status s = Exec(raw, pragma.c_str(), "max_page_count"); !s.ok()) return s;
  }
  // IMMEDIATE: two processes opening a new file at once create the schema one after the
  // other, not both.
  if (absl::Status s = Exec(raw, "BEGIN IMMEDIATE", "begin schema"); !s.ok()) return s;
  absl::Status schema = Exec(raw, kSchemaSql, "create schema");
  int64_t version = 0;
  if (schema.ok()) {
    Stmt select;
    schema = Prepare(raw, "SELECT value FROM meta WHERE key = 'schema_version'", &select);
    if (schema.ok()) {
      ScopedReset reset(select.get());
      const int rc = sqlite3_step(select.get());
      if (rc == SQLITE_ROW) {
        version = sqlite3_column_int64(select.get(), 0);
      } else {
        schema = SqliteError(raw, rc, "read schema version", OpenErrorCode(rc));
      }
    }
  }
  // An older file is upgraded; a newer one (written by a later version) is refused below.
  if (schema.ok() && version >= 1 && version < kSchemaVersion) {
    schema = MigrateSchema(raw, &version);
  }
  if (schema.ok()) schema = Exec(raw, "COMMIT", "commit schema");
  if (!schema.ok()) {
    writer->Rollback();
    return schema;
  }
  if (version != kSchemaVersion) {
    return absl::FailedPreconditionError(absl::StrCat("sqlite event log: ", path,
                                                      " has schema version ", version,
                                                      ", expected ", kSchemaVersion));
  }

  struct {
    Stmt* stmt;
    const char* sql;
  } const statements[] = {
      {&writer->begin_, "BEGIN IMMEDIATE"},
      {&writer->commit_, "COMMIT"},
      {&writer->rollback_, "ROLLBACK"},
      // A stored event with this hash received a whole dedupe window (or more) before the
      // new one no longer makes it a duplicate: its hash is set aside (suffixed with its seq, so it
      // stays unique and is never equal to a real hash), and the new event is stored.
      {&writer->retire_hash_,
       "UPDATE events SET content_hash = content_hash || ':before-window:' || seq "
       "WHERE content_hash = ?1 AND received_at_ms <= ?2"},
      // RETURNING yields no row when the content hash is already stored.
      {&writer->insert_,
       "INSERT INTO events(event_name, inspection_id, token_id, vehicle_id, payload, "
       "content_hash, received_at_ms, account) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) "
       "ON CONFLICT(content_hash) DO NOTHING RETURNING seq"},
      {&writer->find_by_hash_, "SELECT seq FROM events WHERE content_hash = ?1"},
      {&writer->count_, "SELECT COUNT(*) FROM events"},
      {&writer->delete_oldest_,
       "DELETE FROM events WHERE seq IN (SELECT seq FROM events ORDER BY seq LIMIT ?1) "
       "RETURNING seq"},
      {&writer->delete_older_than_,
       "DELETE FROM events WHERE seq IN (SELECT seq FROM events WHERE received_at_ms < ?1 "
       "ORDER BY received_at_ms LIMIT ?2) RETURNING seq"},
      {&writer->raise_removed_up_to_,
       "UPDATE meta SET value = MAX(value, ?1) WHERE key = 'removed_up_to'"},
  };
  for (const auto& statement : statements) {
    if (absl::Status s = Prepare(raw, statement.sql, statement.stmt); !s.ok()) return s;
  }
  return writer;
}

// ---------------------------------------------------------------------------
// A read connection: used by one thread at a time (it is taken out of the pool).
// ---------------------------------------------------------------------------

class SqliteEventLog::Reader {
 public:
  static absl::StatusOr<std::unique_ptr<Reader>> Open(const std::string& path,
                                                      const SqliteEventLogOptions& options) {
    auto reader = std::make_unique<Reader>();
    absl::StatusOr<Db> db = OpenConnection(path, SQLITE_OPEN_READWRITE, options.busy_timeout);
    if (!db.ok()) return db.status();
    reader->db_ = std::move(*db);
    sqlite3* raw = reader->db_.get();
    // A reader never writes; query_only turns a bug that tries into an error.
    if (absl::Status s = Exec(raw, "PRAGMA query_only=1", "query_only"); !s.ok()) return s;
    struct {
      Stmt* stmt;
      const char* sql;
    } const statements[] = {
        {&reader->begin_, "BEGIN"},
        {&reader->commit_, "COMMIT"},
        {&reader->removed_up_to_, "SELECT value FROM meta WHERE key = 'removed_up_to'"},
        {&reader->read_after_,
         "SELECT seq, event_name, inspection_id, token_id, vehicle_id, payload, content_hash, "
         "received_at_ms, account FROM events WHERE seq > ?1 ORDER BY seq LIMIT ?2"},
        {&reader->last_seq_, "SELECT MAX(seq) FROM events"},
        {&reader->high_seq_, "SELECT seq FROM sqlite_sequence WHERE name = 'events'"},
        {&reader->state_,
         "SELECT (SELECT MAX(seq) FROM events), "
         "(SELECT seq FROM sqlite_sequence WHERE name = 'events')"},
    };
    for (const auto& statement : statements) {
      if (absl::Status s = Prepare(raw, statement.sql, statement.stmt); !s.ok()) return s;
    }
    return reader;
  }

  sqlite3* db() const { return db_.get(); }

  // Runs a one-row query of integer columns; NULL reads as 0, no row as all zeros.
  absl::Status QueryInts(sqlite3_stmt* stmt, int64_t* first, int64_t* second = nullptr) {
    ScopedReset reset(stmt);
    const int rc = sqlite3_step(stmt);
    if (rc == SQLITE_ROW) {
      *first = ColumnInt64OrZero(stmt, 0);
      if (second != nullptr) *second = ColumnInt64OrZero(stmt, 1);
      return absl::OkStatus();
    }
    if (rc == SQLITE_DONE) {
      *first = 0;
      if (second != nullptr) *second = 0;
      return absl::OkStatus();
    }
    return SqliteError(db(), rc, "read");
  }

  void EndTransaction() {
    if (sqlite3_get_autocommit(db()) == 0) StepToDone(commit_.get());
  }

  Db db_;
  Stmt begin_, commit_, removed_up_to_, read_after_, last_seq_, high_seq_, state_;
};

// ---------------------------------------------------------------------------
// SqliteEventLog
// ---------------------------------------------------------------------------

std::string SqliteEventLog::CursorFor(int64_t seq) { return absl::StrCat(kCursorPrefix, seq); }

absl::StatusOr<int64_t> SqliteEventLog::ParseCursor(const std::string& cursor) {
  if (cursor.empty()) return 0;
  const size_t prefix = sizeof(kCursorPrefix) - 1;
  const auto invalid = [] {
    return absl::InvalidArgumentError(
        "malformed event log cursor: expected \"s:<seq>\" as returned by this log");
  };
  // 19 digits hold every int64; canonical form only, so a cursor has one spelling.
  if (cursor.size() <= prefix || cursor.size() > prefix + 19 ||
      cursor.compare(0, prefix, kCursorPrefix) != 0 ||
      (cursor.size() > prefix + 1 && cursor[prefix] == '0')) {
    return invalid();
  }
  int64_t seq = 0;
  for (size_t i = prefix; i < cursor.size(); ++i) {
    const char c = cursor[i];
    if (c < '0' || c > '9') return invalid();
    const int digit = c - '0';
    if (seq > (std::numeric_limits<int64_t>::max() - digit) / 10) return invalid();
    seq = seq * 10 + digit;
  }
  return seq;
}

absl::StatusOr<std::unique_ptr<SqliteEventLog>> SqliteEventLog::Open(
    const std::string& path, RetentionPolicy retention, SqliteEventLogOptions options) {
  options.max_batch = std::max(options.max_batch, 1);
  options.retention_chunk = std::max(options.retention_chunk, 1);
  absl::StatusOr<std::unique_ptr<Writer>> writer = Writer::Open(path, options);
  if (!writer.ok()) return writer.status();
  std::unique_ptr<SqliteEventLog> log(
      new SqliteEventLog(path, retention, options, std::move(*writer)));
  // Open one reader now, so a file that cannot be read fails here, and start
  // WaitForAppend from the current high-water mark.
  absl::StatusOr<int64_t> high = log->ReadHighSeq();
  if (!high.ok()) return high.status();
  absl::MutexLock lock(&log->mu_);
  log->known_high_seq_ = *high;
  return log;
}

SqliteEventLog::SqliteEventLog(std::string path, RetentionPolicy retention,
                               SqliteEventLogOptions options, std::unique_ptr<Writer> writer)
    : path_(std::move(path)),
      retention_(retention),
      options_(options),
      writer_(std::move(writer)),
      writer_thread_([this] { WriterLoop(); }) {}

SqliteEventLog::~SqliteEventLog() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    append_cv_.SignalAll();
  }
  // The writer finishes what is queued before it exits.
  writer_thread_.join();
}

std::string SqliteEventLog::Describe() const { return absl::StrCat("sqlite:", path_); }

SqliteEventLog::Stats SqliteEventLog::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

void SqliteEventLog::Submit(Request* request) {
  absl::MutexLock lock(&mu_);
  if (stopping_) {
    request->status = absl::UnavailableError("sqlite event log: closing");
    return;
  }
  queue_.push_back(request);
  if (request->kind == Request::Kind::kAppend) ++stats_.queued;
  while (!request->done) request->done_cv.Wait(&mu_);
}

bool SqliteEventLog::HasWorkOrStopping() const { return !queue_.empty() || stopping_; }

void SqliteEventLog::WriterLoop() {
  for (;;) {
    std::vector<Request*> work;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(this, &SqliteEventLog::HasWorkOrStopping));
      if (queue_.empty()) return;  // stopping, and everything queued is done
      // Everything that queued up while the previous transaction was being written goes
      // into the next one: no timer, so a lone append waits for one commit only.
      if (queue_.front()->kind != Request::Kind::kAppend) {
        work.push_back(queue_.front());
        queue_.pop_front();
      } else {
        while (!queue_.empty() && queue_.front()->kind == Request::Kind::kAppend &&
               work.size() < static_cast<size_t>(options_.max_batch)) {
          work.push_back(queue_.front());
          queue_.pop_front();
        }
        stats_.queued -= static_cast<int64_t>(work.size());
        stats_.in_flight = static_cast<int64_t>(work.size());
      }
    }
    const bool appends = work.front()->kind == Request::Kind::kAppend;
    bool committed = false;
    if (appends) {
      committed = ExecuteAppends(work);
    } else {
      Execute(work.front());
    }
    absl::MutexLock lock(&mu_);
    if (appends) {
      stats_.in_flight = 0;
      for (Request* request : work) {
        if (!request->status.ok()) continue;
        if (request->append_result.duplicate) {
          ++stats_.duplicates;
        } else {
          ++stats_.appended;
          known_high_seq_ = std::max(known_high_seq_, request->seq);
        }
      }
      if (committed) {
        ++stats_.transactions;
        stats_.largest_batch = std::max(stats_.largest_batch, static_cast<int64_t>(work.size()));
      } else {
        ++stats_.failed_batches;
      }
      append_cv_.SignalAll();
    }
    // Once mu_ is released, a caller may return and destroy its request: signalling it
    // here, still under mu_, is the last use.
    for (Request* request : work) {
      request->done = true;
      request->done_cv.Signal();
    }
  }
}

bool SqliteEventLog::ExecuteAppends(const std::vector<Request*>& batch) {
  Writer& w = *writer_;
  absl::Status failure = w.Begin();
  for (size_t i = 0; failure.ok() && i < batch.size(); ++i) {
    Request* request = batch[i];
    const NewEvent& event = *request->event;
    sqlite3_stmt* insert = w.insert_.get();
    if (!BindText(insert, 1, event.event_name) || !BindText(insert, 2, event.inspection_id) ||
        !BindText(insert, 3, event.token_id) || !BindText(insert, 4, event.vehicle_id) ||
        !BindText(insert, 5, event.payload) || !BindText(insert, 6, event.content_hash) ||
        sqlite3_bind_int64(insert, 7, event.received_at_ms) != SQLITE_OK ||
        !BindText(insert, 8, event.account)) {
      // Only a field beyond SQLite's size limit gets here; nothing was written for it, so
      // the rest of the batch goes on.
      request->status = absl::InvalidArgumentError(
          absl::StrCat("sqlite event log: event not storable: ", sqlite3_errmsg(w.db())));
      continue;
    }
    {
      sqlite3_stmt* retire = w.retire_hash_.get();
      ScopedReset reset(retire);
      const int64_t window_ms = static_cast<int64_t>(retention_.dedupe_window.count()) * 1000;
      if (!BindText(retire, 1, event.content_hash) ||
          sqlite3_bind_int64(retire, 2, event.received_at_ms - window_ms) != SQLITE_OK) {
        failure = SqliteError(w.db(), SQLITE_ERROR, "bind retire");
        break;
      }
      const int rc = sqlite3_step(retire);
      if (rc != SQLITE_DONE) {
        failure = SqliteError(w.db(), rc, "retire hash");
        break;
      }
    }
    int64_t seq = 0;
    bool inserted = false;
    {
      ScopedReset reset(insert);
      int rc = sqlite3_step(insert);
      if (rc == SQLITE_ROW) {
        seq = sqlite3_column_int64(insert, 0);
        inserted = true;
        rc = sqlite3_step(insert);  // finishes the statement
      }
      if (rc != SQLITE_DONE) {
        failure = SqliteError(w.db(), rc, "insert");
        break;
      }
    }
    if (!inserted) {
      // The hash is stored, by an earlier transaction or earlier in this one (this
      // connection sees its own uncommitted rows).
      sqlite3_stmt* find = w.find_by_hash_.get();
      ScopedReset reset(find);
      BindText(find, 1, event.content_hash);
      const int rc = sqlite3_step(find);
      if (rc != SQLITE_ROW) {
        failure = rc == SQLITE_DONE
                      ? absl::InternalError("sqlite event log: duplicate hash not found")
                      : SqliteError(w.db(), rc, "find duplicate");
        break;
      }
      seq = sqlite3_column_int64(find, 0);
    }
    request->seq = seq;
    request->append_result.cursor = CursorFor(seq);
    request->append_result.duplicate = !inserted;
  }
  if (failure.ok()) failure = w.Commit();
  if (failure.ok()) return true;
  w.Rollback();
  // Nothing of this transaction is stored: every caller in it must retry (the receiver
  // answers 503 and the vendor redelivers).
  const absl::Status unavailable = absl::UnavailableError(failure.message());
  for (Request* request : batch) {
    if (request->status.ok()) {
      request->status = unavailable;
      request->append_result = AppendResult{};
    }
  }
  return false;
}

void SqliteEventLog::Execute(Request* request) {
  Writer& w = *writer_;
  if (request->kind == Request::Kind::kProbe) {
    absl::Status status = w.Begin();
    w.Rollback();
    if (status.ok()) {
      struct statvfs fs;
      if (statvfs(path_.c_str(), &fs) != 0) {
        status = absl::UnavailableError(
            absl::StrCat("sqlite event log: statvfs ", path_, ": ", std::strerror(errno)));
      } else if (fs.f_frsize > 0 && options_.min_free_bytes > 0 &&
                 fs.f_bavail < (static_cast<uint64_t>(options_.min_free_bytes) + fs.f_frsize - 1) /
                                   fs.f_frsize) {
        status = absl::UnavailableError(
            absl::StrCat("sqlite event log: file system of ", path_, " is full"));
      }
    }
    request->status = status;
    return;
  }

  // kRetentionChunk: the oldest events over max_events, then events older than the
  // cutoff, at most retention_chunk in all, and removed_up_to, in one transaction.
  absl::Status status = w.Begin();
  int64_t excess = request->excess;
  int64_t removed = 0;
  int64_t max_removed_seq = 0;
  const auto delete_rows = [&](sqlite3_stmt* stmt) {
    ScopedReset reset(stmt);
    int rc;
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
      ++removed;
      max_removed_seq = std::max<int64_t>(max_removed_seq, sqlite3_column_int64(stmt, 0));
    }
    return rc == SQLITE_DONE ? absl::OkStatus() : SqliteError(w.db(), rc, "retention delete");
  };
  if (status.ok() && excess < 0) {
    excess = 0;
    if (retention_.max_events > 0) {
      ScopedReset reset(w.count_.get());
      const int rc = sqlite3_step(w.count_.get());
      if (rc == SQLITE_ROW) {
        excess =
            std::max<int64_t>(0, sqlite3_column_int64(w.count_.get(), 0) - retention_.max_events);
      } else {
        status = SqliteError(w.db(), rc, "count events");
      }
    }
  }
  if (status.ok() && excess > 0) {
    sqlite3_bind_int64(w.delete_oldest_.get(), 1,
                       std::min<int64_t>(excess, options_.retention_chunk));
    status = delete_rows(w.delete_oldest_.get());
    excess -= removed;
  }
  if (status.ok() && removed < options_.retention_chunk &&
      request->cutoff_ms != std::numeric_limits<int64_t>::min()) {
    sqlite3_bind_int64(w.delete_older_than_.get(), 1, request->cutoff_ms);
    sqlite3_bind_int64(w.delete_older_than_.get(), 2, options_.retention_chunk - removed);
    status = delete_rows(w.delete_older_than_.get());
  }
  if (status.ok() && max_removed_seq > 0) {
    sqlite3_bind_int64(w.raise_removed_up_to_.get(), 1, max_removed_seq);
    const int rc = StepToDone(w.raise_removed_up_to_.get());
    if (rc != SQLITE_DONE) status = SqliteError(w.db(), rc, "update removed_up_to");
  }
  if (status.ok()) status = w.Commit();
  if (!status.ok()) {
    w.Rollback();
    request->status = status;
    return;
  }
  request->excess = excess;
  request->removed = removed;
}

absl::StatusOr<AppendResult> SqliteEventLog::Append(const NewEvent& event) {
  if (event.content_hash.empty()) {
    return absl::InvalidArgumentError("sqlite event log: event without content_hash");
  }
  Request request(Request::Kind::kAppend);
  request.event = &event;
  Submit(&request);
  if (!request.status.ok()) return request.status;
  return request.append_result;
}

absl::StatusOr<int64_t> SqliteEventLog::ApplyRetention(absl::Time now) {
  int64_t cutoff_ms = std::numeric_limits<int64_t>::min();
  const int64_t max_age_s = retention_.max_age.count();
  const int64_t now_ms = absl::ToUnixMillis(now);
  // A non-positive age is no age limit; so is one so large it reaches before 1970.
  if (max_age_s > 0 && max_age_s < now_ms / 1000) cutoff_ms = now_ms - max_age_s * 1000;
  if (cutoff_ms == std::numeric_limits<int64_t>::min() && retention_.max_events <= 0) return 0;

  int64_t total = 0;
  int64_t excess = -1;
  for (;;) {
    Request request(Request::Kind::kRetentionChunk);
    request.cutoff_ms = cutoff_ms;
    request.excess = excess;
    Submit(&request);
    if (!request.status.ok()) return request.status;
    total += request.removed;
    excess = request.excess;
    if (request.removed < options_.retention_chunk) return total;
  }
}

absl::Status SqliteEventLog::CheckWritable() {
  Request request(Request::Kind::kProbe);
  Submit(&request);
  return request.status;
}

absl::StatusOr<std::unique_ptr<SqliteEventLog::Reader>> SqliteEventLog::AcquireReader() {
  {
    absl::MutexLock lock(&pool_mu_);
    if (!idle_readers_.empty()) {
      std::unique_ptr<Reader> reader = std::move(idle_readers_.back());
      idle_readers_.pop_back();
      return reader;
    }
  }
  return Reader::Open(path_, options_);
}

void SqliteEventLog::ReleaseReader(std::unique_ptr<Reader> reader) {
  absl::MutexLock lock(&pool_mu_);
  if (idle_readers_.size() < kMaxIdleReaders) idle_readers_.push_back(std::move(reader));
}

absl::StatusOr<std::vector<StoredEvent>> SqliteEventLog::ReadAfter(const std::string& after,
                                                                   size_t limit) {
  absl::StatusOr<int64_t> after_seq = ParseCursor(after);
  if (!after_seq.ok()) return after_seq.status();
  absl::StatusOr<std::unique_ptr<Reader>> acquired = AcquireReader();
  if (!acquired.ok()) return acquired.status();
  std::unique_ptr<Reader> reader = std::move(*acquired);

  // One read transaction for the removed_up_to check and the rows: otherwise retention
  // could remove events between the two and the reader would skip them silently.
  std::vector<StoredEvent> events;
  absl::Status status;
  if (const int rc = StepToDone(reader->begin_.get()); rc != SQLITE_DONE) {
    status = SqliteError(reader->db(), rc, "begin read");
  }
  int64_t removed_up_to = 0;
  if (status.ok()) status = reader->QueryInts(reader->removed_up_to_.get(), &removed_up_to);
  if (status.ok() && !after.empty() && *after_seq < removed_up_to) {
    status = absl::OutOfRangeError(
        absl::StrCat("event log cursor ", after, " is older than retention (events up to ",
                     CursorFor(removed_up_to), " were removed); resync"));
  }
  if (status.ok()) {
    sqlite3_stmt* select = reader->read_after_.get();
    ScopedReset reset(select);
    sqlite3_bind_int64(select, 1, *after_seq);
    sqlite3_bind_int64(
        select, 2,
        static_cast<int64_t>(std::min<uint64_t>(limit, std::numeric_limits<int64_t>::max())));
    int rc;
    while ((rc = sqlite3_step(select)) == SQLITE_ROW) {
      StoredEvent stored;
      stored.cursor = CursorFor(sqlite3_column_int64(select, 0));
      stored.event.event_name = ColumnString(select, 1);
      stored.event.inspection_id = ColumnString(select, 2);
      stored.event.token_id = ColumnString(select, 3);
      stored.event.vehicle_id = ColumnString(select, 4);
      stored.event.payload = ColumnString(select, 5);
      stored.event.content_hash = ColumnString(select, 6);
      stored.event.received_at_ms = sqlite3_column_int64(select, 7);
      stored.event.account = ColumnString(select, 8);
      events.push_back(std::move(stored));
    }
    if (rc != SQLITE_DONE) status = SqliteError(reader->db(), rc, "read events");
  }
  reader->EndTransaction();
  // A connection that failed is dropped rather than pooled; the next read opens a new one.
  if (status.ok() || status.code() == absl::StatusCode::kOutOfRange) {
    ReleaseReader(std::move(reader));
  }
  if (!status.ok()) return status;
  return events;
}

absl::StatusOr<std::string> SqliteEventLog::LastCursor() {
  absl::StatusOr<std::unique_ptr<Reader>> reader = AcquireReader();
  if (!reader.ok()) return reader.status();
  int64_t last = 0;
  absl::Status status = (*reader)->QueryInts((*reader)->last_seq_.get(), &last);
  if (!status.ok()) return status;
  ReleaseReader(std::move(*reader));
  return last == 0 ? std::string() : CursorFor(last);
}

absl::StatusOr<int64_t> SqliteEventLog::ReadHighSeq() {
  absl::StatusOr<std::unique_ptr<Reader>> reader = AcquireReader();
  if (!reader.ok()) return reader.status();
  int64_t high = 0;
  absl::Status status = (*reader)->QueryInts((*reader)->high_seq_.get(), &high);
  if (!status.ok()) return status;
  ReleaseReader(std::move(*reader));
  return high;
}

void SqliteEventLog::WaitForAppend(const std::string& after, std::chrono::milliseconds timeout) {
  const absl::Time deadline = absl::Now() + absl::FromChrono(timeout);
  absl::StatusOr<int64_t> after_seq = ParseCursor(after);
  if (!after_seq.ok()) return;
  int64_t target = *after_seq;
  if (after.empty()) {
    // "": an event after it exists iff the log is not empty. If it is empty, wait for a
    // seq beyond the high-water mark (retention may have emptied a log that had events).
    absl::StatusOr<std::unique_ptr<Reader>> reader = AcquireReader();
    int64_t last = 0, high = 0;
    absl::Status status = reader.status();
    if (status.ok()) status = (*reader)->QueryInts((*reader)->state_.get(), &last, &high);
    if (status.ok()) {
      ReleaseReader(std::move(*reader));
      if (last > 0) return;
      target = high;
    } else {
      absl::MutexLock lock(&mu_);
      target = known_high_seq_;
    }
  }

  mu_.Lock();
  while (known_high_seq_ <= target && !stopping_) {
    const absl::Time now = absl::Now();
    if (now >= deadline) break;
    if (!polling_ && now >= next_poll_) {
      // Appends by other handles or processes signal nothing here: look at the file. One
      // waiter polls for all, so many waiters cost one query per interval.
      polling_ = true;
      mu_.Unlock();
      absl::StatusOr<int64_t> high = ReadHighSeq();
      mu_.Lock();
      polling_ = false;
      next_poll_ = absl::Now() + options_.poll_interval;
      if (high.ok()) known_high_seq_ = std::max(known_high_seq_, *high);
      append_cv_.SignalAll();
      continue;
    }
    append_cv_.WaitWithDeadline(&mu_, polling_ ? deadline : std::min(deadline, next_poll_));
  }
  mu_.Unlock();
}

absl::StatusOr<std::unique_ptr<EventLog>> OpenSqliteEventLog(const std::string& path,
                                                             RetentionPolicy retention) {
  absl::StatusOr<std::unique_ptr<SqliteEventLog>> log = SqliteEventLog::Open(path, retention);
  if (!log.ok()) return log.status();
  return std::unique_ptr<EventLog>(std::move(*log));
}

}  // namespace inspection::eventlog
