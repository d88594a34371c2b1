#include "adapters/eventlog/sqlite/sqlite_support.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"

namespace inspection::eventlog::sqlite {

absl::Status Error(const char* component, sqlite3* db, int rc, const char* what,
                   absl::StatusCode code) {
  // sqlite3_errmsg describes the most recent failure on `db`, which is this one; the path
  // may appear in it, which is not a secret.
  std::string message = absl::StrCat(component, ": ", what, ": ", sqlite3_errstr(rc));
  if (db != nullptr) absl::StrAppend(&message, " (", sqlite3_errmsg(db), ")");
  return absl::Status(code, message);
}

// Errors that mean "this file is not ours / is damaged": no retry fixes them.
absl::StatusCode OpenErrorCode(int rc) {
  switch (rc & 0xff) {
    case SQLITE_NOTADB:
    case SQLITE_CORRUPT:
    case SQLITE_READONLY:
      return absl::StatusCode::kFailedPrecondition;
    default:
      return absl::StatusCode::kUnavailable;
  }
}

absl::Status Prepare(const char* component, sqlite3* db, const char* sql, Stmt* out) {
  sqlite3_stmt* stmt = nullptr;
  const int rc = sqlite3_prepare_v3(db, sql, -1, SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
  if (rc != SQLITE_OK) {
    sqlite3_finalize(stmt);
    return Error(component, db, rc, "prepare", OpenErrorCode(rc));
  }
  out->reset(stmt);
  return absl::OkStatus();
}

absl::StatusOr<Db> OpenConnection(const char* component, const std::string& path, int flags,
                                  absl::Duration busy_timeout) {
  sqlite3* raw = nullptr;
  const int rc = sqlite3_open_v2(path.c_str(), &raw, flags | SQLITE_OPEN_NOMUTEX, nullptr);
  Db db(raw);  // sqlite3_open_v2 allocates a handle even when it fails
  if (rc != SQLITE_OK) return Error(component, db.get(), rc, "open", OpenErrorCode(rc));
  sqlite3_extended_result_codes(db.get(), 1);
  const int64_t ms = absl::ToInt64Milliseconds(busy_timeout);
  sqlite3_busy_timeout(
      db.get(), static_cast<int>(std::clamp<int64_t>(ms, 0, std::numeric_limits<int>::max())));
  return db;
}

absl::Status Exec(const char* component, sqlite3* db, const char* sql, const char* what) {
  const int rc = sqlite3_exec(db, sql, nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) return Error(component, db, rc, what, OpenErrorCode(rc));
  return absl::OkStatus();
}

// Steps a statement that returns no row (or whose rows do not matter) to completion.
int StepToDone(sqlite3_stmt* stmt) {
  ScopedReset reset(stmt);
  int rc;
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
  }
  return rc;
}

bool BindText(sqlite3_stmt* stmt, int index, const std::string& value) {
  // SQLITE_STATIC: `value` outlives the step; every use rebinds every parameter.
  return sqlite3_bind_text64(stmt, index, value.data(), value.size(), SQLITE_STATIC, SQLITE_UTF8) ==
         SQLITE_OK;
}

std::string ColumnString(sqlite3_stmt* stmt, int column) {
  const unsigned char* text = sqlite3_column_text(stmt, column);
  if (text == nullptr) return std::string();
  return std::string(reinterpret_cast<const char*>(text),
                     static_cast<size_t>(sqlite3_column_bytes(stmt, column)));
}

// Keeps a column that may be NULL (MAX() of nothing, a missing sqlite_sequence row) as 0.
int64_t ColumnInt64OrZero(sqlite3_stmt* stmt, int column) {
  return sqlite3_column_type(stmt, column) == SQLITE_NULL ? 0 : sqlite3_column_int64(stmt, column);
}

}  // namespace inspection::eventlog::sqlite
