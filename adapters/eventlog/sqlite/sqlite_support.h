// What the SQLite stores (the event log, the work ledger) share: handle ownership, statement
// reset on scope exit, error mapping, and a few typed bind/column helpers. Errors name the
// store they come from (`component`, e.g. "sqlite event log").
#ifndef ADAPTERS_EVENTLOG_SQLITE_SQLITE_SUPPORT_H_
#define ADAPTERS_EVENTLOG_SQLITE_SQLITE_SUPPORT_H_

#include <sqlite3.h>

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace inspection::eventlog::sqlite {

struct StmtDeleter {
  void operator()(sqlite3_stmt* stmt) const { sqlite3_finalize(stmt); }
};
using Stmt = std::unique_ptr<sqlite3_stmt, StmtDeleter>;

struct DbDeleter {
  void operator()(sqlite3* db) const { sqlite3_close_v2(db); }
};
using Db = std::unique_ptr<sqlite3, DbDeleter>;

// Resets a statement on scope exit. A statement that is stepped but not reset keeps its
// read transaction open, which would stop WAL checkpoints from ever completing and make
// ROLLBACK fail; so every use of a statement goes through one of these.
class ScopedReset {
 public:
  explicit ScopedReset(sqlite3_stmt* stmt) : stmt_(stmt) {}
  ~ScopedReset() { sqlite3_reset(stmt_); }
  ScopedReset(const ScopedReset&) = delete;
  ScopedReset& operator=(const ScopedReset&) = delete;

 private:
  sqlite3_stmt* const stmt_;
};

// "<component>: <what>: <sqlite's text> (<the handle's last message>)" with `code`.
absl::Status Error(const char* component, sqlite3* db, int rc, const char* what,
                   absl::StatusCode code = absl::StatusCode::kUnavailable);

// Errors that mean "this file is not ours / is damaged" (no retry fixes them):
// FAILED_PRECONDITION; anything else UNAVAILABLE.
absl::StatusCode OpenErrorCode(int rc);

// A persistent prepared statement.
absl::Status Prepare(const char* component, sqlite3* db, const char* sql, Stmt* out);

// Opens `path` with `flags` (no SQLite mutex: the caller serialises), extended result
// codes on, and `busy_timeout` for locks held by other connections.
absl::StatusOr<Db> OpenConnection(const char* component, const std::string& path, int flags,
                                  absl::Duration busy_timeout);

absl::Status Exec(const char* component, sqlite3* db, const char* sql, const char* what);

// Steps a statement that returns no row (or whose rows do not matter) to completion.
int StepToDone(sqlite3_stmt* stmt);

// Binds `value` without copying: it must outlive the step.
bool BindText(sqlite3_stmt* stmt, int index, const std::string& value);

std::string ColumnString(sqlite3_stmt* stmt, int column);

// Keeps a column that may be NULL (MAX() of nothing, a missing row) as 0.
int64_t ColumnInt64OrZero(sqlite3_stmt* stmt, int column);

}  // namespace inspection::eventlog::sqlite

#endif  // ADAPTERS_EVENTLOG_SQLITE_SQLITE_SUPPORT_H_
