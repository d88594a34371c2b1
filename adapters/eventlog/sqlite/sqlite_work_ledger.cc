// The SQLite backend of WorkLedger (adapters/eventlog/work_ledger.h).
#include <sqlite3.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "adapters/eventlog/sqlite/sqlite_support.h"
#include "adapters/eventlog/work_ledger.h"

namespace inspection::eventlog {
namespace {

using sqlite::BindText;
using sqlite::ColumnString;
using sqlite::ScopedReset;
using sqlite::StepToDone;
using sqlite::Stmt;

constexpr char kComponent[] = "sqlite work ledger";

constexpr char kSchemaSql[] = R"sql(
CREATE TABLE IF NOT EXISTS work(
  kind INTEGER NOT NULL,
  account TEXT NOT NULL,
  id TEXT NOT NULL,
  started_at_ms INTEGER NOT NULL,
  next_poll_at_ms INTEGER NOT NULL,
  attempts INTEGER NOT NULL DEFAULT 0,
  owner TEXT NOT NULL DEFAULT '',
  lease_until_ms INTEGER NOT NULL DEFAULT 0,
  resolved INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY(kind, account, id)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS work_due ON work(resolved, next_poll_at_ms);
CREATE INDEX IF NOT EXISTS work_started ON work(started_at_ms);
)sql";

class SqliteWorkLedger final : public WorkLedger {
 public:
  explicit SqliteWorkLedger(sqlite::Db db) : db_(std::move(db)) {}

  absl::Status PrepareAll() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    sqlite3* db = db_.get();
    const std::pair<Stmt*, const char*> statements[] = {
        {&insert_,
         "INSERT OR IGNORE INTO work(kind, account, id, started_at_ms, next_poll_at_ms) "
         "VALUES(?1, ?2, ?3, ?4, ?5)"},
        {&resolve_, "UPDATE work SET resolved = 1 WHERE kind = ?1 AND account = ?2 AND id = ?3"},
        {&due_,
         "SELECT kind, account, id, started_at_ms, next_poll_at_ms, attempts FROM work "
         "WHERE resolved = 0 AND next_poll_at_ms <= ?1 AND lease_until_ms <= ?1 "
         "ORDER BY attempts, MAX(next_poll_at_ms, lease_until_ms) LIMIT ?2"},
        {&claim_,
         "UPDATE work SET owner = ?4, lease_until_ms = ?5 "
         "WHERE kind = ?1 AND account = ?2 AND id = ?3"},
        {&reschedule_,
         "UPDATE work SET attempts = attempts + 1, next_poll_at_ms = ?5, owner = '', "
         "lease_until_ms = 0 "
         "WHERE kind = ?1 AND account = ?2 AND id = ?3 AND owner = ?4 AND resolved = 0"},
        {&count_,
         "SELECT COUNT(*) FROM work WHERE resolved = 0 "
         "AND MAX(next_poll_at_ms, lease_until_ms) <= ?1"},
        {&trim_, "DELETE FROM work WHERE started_at_ms < ?1"},
        {&begin_, "BEGIN IMMEDIATE"},
        {&commit_, "COMMIT"},
        {&rollback_, "ROLLBACK"},
    };
    for (const auto& [stmt, sql] : statements) {
      if (absl::Status s = sqlite::Prepare(kComponent, db, sql, stmt); !s.ok()) return s;
    }
    return absl::OkStatus();
  }

  absl::Status Record(const WorkItem& item) override {
    absl::MutexLock lock(&mu_);
    sqlite3_stmt* stmt = insert_.get();
    BindKey(stmt, item.kind, item.account, item.id);
    sqlite3_bind_int64(stmt, 4, item.started_at_ms);
    sqlite3_bind_int64(stmt, 5, item.next_poll_at_ms);
    return Done(StepToDone(stmt), "record");
  }

  absl::Status Resolve(WorkKind kind, const std::string& account, const std::string& id) override {
    absl::MutexLock lock(&mu_);
    sqlite3_stmt* stmt = resolve_.get();
    BindKey(stmt, kind, account, id);
    return Done(StepToDone(stmt), "resolve");
  }

  absl::StatusOr<std::vector<WorkItem>> ClaimDue(int64_t now_ms, size_t limit,
                                                 const std::string& owner,
                                                 int64_t lease_ms) override {
    absl::MutexLock lock(&mu_);
    // One write transaction: two replicas on one file never claim the same item.
    if (absl::Status s = Done(StepToDone(begin_.get()), "begin"); !s.ok()) return s;
    std::vector<WorkItem> claimed;
    absl::Status status = [&]() -> absl::Status {
      {
        sqlite3_stmt* stmt = due_.get();
        ScopedReset reset(stmt);
        sqlite3_bind_int64(stmt, 1, now_ms);
        sqlite3_bind_int64(stmt, 2, static_cast<int64_t>(limit));
        int rc;
        while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
          WorkItem item;
          item.kind = static_cast<WorkKind>(sqlite3_column_int(stmt, 0));
          item.account = ColumnString(stmt, 1);
          item.id = ColumnString(stmt, 2);
          item.started_at_ms = sqlite3_column_int64(stmt, 3);
          item.next_poll_at_ms = sqlite3_column_int64(stmt, 4);
          item.attempts = sqlite3_column_int(stmt, 5);
          claimed.push_back(std::move(item));
        }
        if (rc != SQLITE_DONE) return sqlite::Error(kComponent, db_.get(), rc, "select due");
      }
      for (const WorkItem& item : claimed) {
        sqlite3_stmt* stmt = claim_.get();
        BindKey(stmt, item.kind, item.account, item.id);
        BindText(stmt, 4, owner);
        sqlite3_bind_int64(stmt, 5, now_ms + lease_ms);
        if (absl::Status s = Done(StepToDone(stmt), "claim"); !s.ok()) return s;
      }
      return Done(StepToDone(commit_.get()), "commit");
    }();
    if (!status.ok()) {
      StepToDone(rollback_.get());
      return status;
    }
    return claimed;
  }

  absl::Status Reschedule(const WorkItem& item, const std::string& owner,
                          int64_t next_poll_at_ms) override {
    absl::MutexLock lock(&mu_);
    sqlite3_stmt* stmt = reschedule_.get();
    BindKey(stmt, item.kind, item.account, item.id);
    BindText(stmt, 4, owner);
    sqlite3_bind_int64(stmt, 5, next_poll_at_ms);
    if (absl::Status s = Done(StepToDone(stmt), "reschedule"); !s.ok()) return s;
    if (sqlite3_changes(db_.get()) == 0) {
      return absl::FailedPreconditionError(
          "work ledger: the item is not held by this owner any more (its lease ended, or it "
          "was resolved)");
    }
    return absl::OkStatus();
  }

  absl::StatusOr<int64_t> CountPending(int64_t due_by_ms) override {
    absl::MutexLock lock(&mu_);
    sqlite3_stmt* stmt = count_.get();
    ScopedReset reset(stmt);
    sqlite3_bind_int64(stmt, 1, due_by_ms);
    const int rc = sqlite3_step(stmt);
    if (rc != SQLITE_ROW) return sqlite::Error(kComponent, db_.get(), rc, "count");
    return sqlite3_column_int64(stmt, 0);
  }

  absl::StatusOr<int64_t> Trim(int64_t started_before_ms) override {
    absl::MutexLock lock(&mu_);
    sqlite3_stmt* stmt = trim_.get();
    sqlite3_bind_int64(stmt, 1, started_before_ms);
    if (absl::Status s = Done(StepToDone(stmt), "trim"); !s.ok()) return s;
    return static_cast<int64_t>(sqlite3_changes(db_.get()));
  }

 private:
  static void BindKey(sqlite3_stmt* stmt, WorkKind kind, const std::string& account,
                      const std::string& id) {
    sqlite3_bind_int(stmt, 1, static_cast<int>(kind));
    BindText(stmt, 2, account);
    BindText(stmt, 3, id);
  }

  absl::Status Done(int rc, const char* what) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (rc == SQLITE_DONE || rc == SQLITE_OK) return absl::OkStatus();
    return sqlite::Error(kComponent, db_.get(), rc, what, sqlite::OpenErrorCode(rc));
  }

  absl::Mutex mu_;
  sqlite::Db db_ ABSL_GUARDED_BY(mu_);
  Stmt insert_ ABSL_GUARDED_BY(mu_);
  Stmt resolve_ ABSL_GUARDED_BY(mu_);
  Stmt due_ ABSL_GUARDED_BY(mu_);
  Stmt claim_ ABSL_GUARDED_BY(mu_);
  Stmt reschedule_ ABSL_GUARDED_BY(mu_);
  Stmt count_ ABSL_GUARDED_BY(mu_);
  Stmt trim_ ABSL_GUARDED_BY(mu_);
  Stmt begin_ ABSL_GUARDED_BY(mu_);
  Stmt commit_ ABSL_GUARDED_BY(mu_);
  Stmt rollback_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

absl::StatusOr<std::unique_ptr<WorkLedger>> OpenSqliteWorkLedger(const std::string& path,
                                                                 absl::Duration busy_timeout) {
  absl::StatusOr<sqlite::Db> db = sqlite::OpenConnection(
      kComponent, path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, busy_timeout);
  if (!db.ok()) return db.status();
  sqlite3* raw = db->get();
  for (const auto& [sql, what] :
       {std::pair{"PRAGMA journal_mode=WAL", "journal_mode"},
        std::pair{"PRAGMA synchronous=FULL", "synchronous"}, std::pair{kSchemaSql, "schema"}}) {
    if (absl::Status s = sqlite::Exec(kComponent, raw, sql, what); !s.ok()) return s;
  }
  auto ledger = std::make_unique<SqliteWorkLedger>(*std::move(db));
  if (absl::Status s = ledger->PrepareAll(); !s.ok()) return s;
  return ledger;
}

}  // namespace inspection::eventlog
