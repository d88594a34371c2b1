// Tests of the SQLite event log: the shared conformance suite, then what only SQLite has
// (files, reopening, group commit, a full or locked database, a crash of the process).
//
// This file has its own main(): run with --child-append=<path>,<threads> the binary is the
// child process of the crash-safety test instead of a test runner. Since main() is defined
// here, the linker never pulls gtest_main's main() out of libgtest_main.a.

#include "adapters/eventlog/sqlite/sqlite_event_log.h"

#include <signal.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <numeric>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "adapters/hashing/sha256.h"
#include "tests/adapters/eventlog/event_log_conformance.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"
#include "tests/support/wait.h"

namespace inspection::eventlog {
namespace {

using ::inspection::eventlog::testing::EventLogConformanceTest;
using ::inspection::eventlog::testing::EventLogFactory;
using ::inspection::eventlog::testing::MakeAccountEvent;
using ::inspection::eventlog::testing::MakeEvent;
using ::inspection::testing::Subprocess;
using ::inspection::testing::WaitUntil;
using namespace std::chrono_literals;

using inspection::testing::TempDir;

// ---------------------------------------------------------------------------
// The conformance suite.
// ---------------------------------------------------------------------------

class SqliteFactory : public EventLogFactory {
 public:
  std::unique_ptr<EventLog> Create(RetentionPolicy retention) override {
    dir_ = std::make_unique<TempDir>();
    path_ = dir_->path() + "/events.db";
    return Reopen(retention);
  }
  std::unique_ptr<EventLog> Reopen(RetentionPolicy retention) override {
    absl::StatusOr<std::unique_ptr<EventLog>> log = OpenSqliteEventLog(path_, retention);
    if (!log.ok()) {
      ADD_FAILURE() << log.status();
      return nullptr;
    }
    return std::move(*log);
  }
  // Called after each test, once its logs are closed.
  void RemoveDirectory() { dir_.reset(); }

 private:
  std::unique_ptr<TempDir> dir_;
  std::string path_;
};

SqliteFactory* Factory() {
  static SqliteFactory* const factory = new SqliteFactory();
  return factory;
}

class RemoveFactoryDirectory : public ::testing::EmptyTestEventListener {
  void OnTestEnd(const ::testing::TestInfo&) override { Factory()->RemoveDirectory(); }
};

INSTANTIATE_TEST_SUITE_P(Sqlite, EventLogConformanceTest, ::testing::Values(Factory()));

}  // namespace

namespace testing {
// Names the parameter "sqlite" instead of a pointer value, which ctest's
// gtest_discover_tests would otherwise put into the test names (different in every build).
void PrintTo(EventLogFactory* factory, std::ostream* out) { *out << "sqlite"; }
}  // namespace testing

namespace {

// ---------------------------------------------------------------------------
// Helpers.
// ---------------------------------------------------------------------------

// Another connection holding the database's write lock (as another process would), until
// Release().
class WriteLockHolder {
 public:
  explicit WriteLockHolder(const std::string& path) {
    if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE, nullptr) == SQLITE_OK) {
      sqlite3_busy_timeout(db_, 10000);
      locked_ = sqlite3_exec(db_, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) == SQLITE_OK;
    }
  }
  ~WriteLockHolder() { Release(); }

  bool locked() const { return locked_; }
  void Release() {
    if (db_ == nullptr) return;
    if (locked_) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    sqlite3_close_v2(db_);
    db_ = nullptr;
  }

 private:
  sqlite3* db_ = nullptr;
  bool locked_ = false;
};

class SqliteEventLogTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_FALSE(dir_.path().empty()); }

  std::unique_ptr<SqliteEventLog> Open(RetentionPolicy retention = {},
                                       SqliteEventLogOptions options = {}) {
    absl::StatusOr<std::unique_ptr<SqliteEventLog>> log =
        SqliteEventLog::Open(path_, retention, options);
    EXPECT_TRUE(log.ok()) << log.status();
    return log.ok() ? std::move(*log) : nullptr;
  }

  TempDir dir_;
  const std::string path_ = dir_.path() + "/events.db";
};

int64_t SeqOf(const std::string& cursor) { return SqliteEventLog::ParseCursor(cursor).value(); }

// ---------------------------------------------------------------------------
// Cursors, opening, describing.
// ---------------------------------------------------------------------------

TEST(SqliteCursorTest, IsThePrefixedCanonicalDecimalSeq) {
  EXPECT_EQ(SqliteEventLog::CursorFor(42), "s:42");
  EXPECT_EQ(*SqliteEventLog::ParseCursor("s:42"), 42);
  EXPECT_EQ(*SqliteEventLog::ParseCursor("s:0"), 0);
  EXPECT_EQ(*SqliteEventLog::ParseCursor(""), 0);
  EXPECT_EQ(*SqliteEventLog::ParseCursor("s:9223372036854775807"), INT64_MAX);
  for (const char* malformed : {"42", "s:", "s:-1", "s:+1", "s:01", "s: 1", "s:1 ", "s:1a", "x:1",
                                "S:1", "s:9223372036854775808", "s:99999999999999999999"}) {
    EXPECT_EQ(SqliteEventLog::ParseCursor(malformed).status().code(),
              absl::StatusCode::kInvalidArgument)
        << malformed;
  }
}

TEST_F(SqliteEventLogTest, MalformedCursorsAreInvalidArgumentAndValidOnesAreNot) {
  auto log = Open();
  ASSERT_NE(log, nullptr);
  EXPECT_EQ(log->ReadAfter("s:01", 10).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(log->ReadAfter("1", 10).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(log->ReadAfter("s:0", 10).ok());
  // A cursor beyond the end is not an error: nothing is after it yet.
  auto beyond = log->ReadAfter("s:1000", 10);
  ASSERT_TRUE(beyond.ok()) << beyond.status();
  EXPECT_TRUE(beyond->empty());
}

TEST_F(SqliteEventLogTest, DescribesItselfAsSqliteAndThePath) {
  auto log = Open();
  ASSERT_NE(log, nullptr);
  EXPECT_EQ(log->Describe(), "sqlite:" + path_);
}

TEST_F(SqliteEventLogTest, OpeningInAMissingDirectoryIsUnavailable) {
  auto log = SqliteEventLog::Open(dir_.path() + "/missing/events.db", {});
  EXPECT_EQ(log.status().code(), absl::StatusCode::kUnavailable) << log.status();
}

TEST_F(SqliteEventLogTest, OpeningAFileThatIsNotADatabaseIsFailedPrecondition) {
  std::ofstream(path_) << std::string(8192, 'x');
  auto log = SqliteEventLog::Open(path_, {});
  EXPECT_EQ(log.status().code(), absl::StatusCode::kFailedPrecondition) << log.status();
}

TEST_F(SqliteEventLogTest, AnEventWithoutContentHashIsInvalidArgument) {
  auto log = Open();
  ASSERT_NE(log, nullptr);
  NewEvent event = MakeEvent("e", "1");
  event.content_hash.clear();
  EXPECT_EQ(log->Append(event).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(*log->LastCursor(), "");
}

TEST_F(SqliteEventLogTest, PayloadsAreStoredByteExact) {
  auto log = Open();
  ASSERT_NE(log, nullptr);
  NewEvent event = MakeEvent("e", "bytes");
  event.payload = std::string("{\"a\":\"\0\xff\xfe\"}", 11);  // NUL and invalid UTF-8
  event.content_hash = hashing::Sha256Hex(event.payload);
  ASSERT_TRUE(log->Append(event).ok());
  auto read = log->ReadAfter("", 10);
  ASSERT_TRUE(read.ok());
  ASSERT_EQ(read->size(), 1u);
  EXPECT_EQ((*read)[0].event.payload, event.payload);
}

// ---------------------------------------------------------------------------
// Reopening: everything, the duplicate keys and removed_up_to survive.
// ---------------------------------------------------------------------------

TEST_F(SqliteEventLogTest, ReopenKeepsEveryEventAndTheDuplicateKeys) {
  std::vector<std::string> cursors;
  {
    auto log = Open();
    ASSERT_NE(log, nullptr);
    for (int i = 0; i < 3; ++i) {
      auto appended = log->Append(MakeEvent("createReport", std::to_string(i), 1700000000000 + i));
      ASSERT_TRUE(appended.ok()) << appended.status();
      cursors.push_back(appended->cursor);
    }
  }
  auto log = Open();
  ASSERT_NE(log, nullptr);
  auto all = log->ReadAfter("", 10);
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 3u);
  for (int i = 0; i < 3; ++i) {
    const NewEvent expected = MakeEvent("createReport", std::to_string(i), 1700000000000 + i);
    EXPECT_EQ((*all)[i].cursor, cursors[i]);
    EXPECT_EQ((*all)[i].event.payload, expected.payload);
    EXPECT_EQ((*all)[i].event.inspection_id, expected.inspection_id);
    EXPECT_EQ((*all)[i].event.received_at_ms, expected.received_at_ms);
  }
  EXPECT_EQ(*log->LastCursor(), cursors.back());
  auto again = log->Append(MakeEvent("createReport", "1", 1700000000001));
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->duplicate);
  EXPECT_EQ(again->cursor, cursors[1]);
  auto next = log->Append(MakeEvent("createReport", "3"));
  ASSERT_TRUE(next.ok());
  EXPECT_FALSE(next->duplicate);
  EXPECT_GT(SeqOf(next->cursor), SeqOf(cursors.back()));
}

TEST_F(SqliteEventLogTest, RemovedUpToAndSequenceSurviveReopenAfterRetentionEmptiedTheLog) {
  RetentionPolicy retention;
  retention.max_age = std::chrono::hours(1);
  const int64_t base = 1700000000000;
  std::vector<std::string> cursors;
  {
    auto log = Open(retention);
    ASSERT_NE(log, nullptr);
    for (int i = 0; i < 4; ++i) {
      cursors.push_back(log->Append(MakeEvent("e", std::to_string(i), base + i))->cursor);
    }
    auto removed = log->ApplyRetention(absl::FromUnixMillis(base + 2 * 3600 * 1000));
    ASSERT_TRUE(removed.ok()) << removed.status();
    EXPECT_EQ(*removed, 4);
    EXPECT_EQ(*log->LastCursor(), "");
  }
  auto log = Open(retention);
  ASSERT_NE(log, nullptr);
  EXPECT_EQ(log->ReadAfter(cursors[1], 10).status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(log->ReadAfter(cursors[2], 10).status().code(), absl::StatusCode::kOutOfRange);
  // After the newest removed event nothing was lost.
  auto after_last = log->ReadAfter(cursors[3], 10);
  ASSERT_TRUE(after_last.ok()) << after_last.status();
  EXPECT_TRUE(after_last->empty());
  EXPECT_TRUE(log->ReadAfter("", 10).ok());
  // AUTOINCREMENT: a new event never gets a removed event's sequence number, so an old
  // cursor can never point into new events.
  auto appended = log->Append(MakeEvent("e", "new", base + 3 * 3600 * 1000));
  ASSERT_TRUE(appended.ok());
  EXPECT_GT(SeqOf(appended->cursor), SeqOf(cursors[3]));
  auto read = log->ReadAfter(cursors[3], 10);
  ASSERT_TRUE(read.ok());
  ASSERT_EQ(read->size(), 1u);
  EXPECT_EQ((*read)[0].cursor, appended->cursor);
}

// ---------------------------------------------------------------------------
// Upgrading a file of the previous version (schema 1: no account column).
// ---------------------------------------------------------------------------

// A plain connection to write a file the way an older version did, or look into one.
class RawDb {
 public:
  explicit RawDb(const std::string& path) {
    if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) !=
        SQLITE_OK) {
      ADD_FAILURE() << "open " << path << ": " << sqlite3_errmsg(db_);
    }
    sqlite3_busy_timeout(db_, 10000);
  }
  ~RawDb() { sqlite3_close_v2(db_); }
  RawDb(const RawDb&) = delete;
  RawDb& operator=(const RawDb&) = delete;

  void Exec(const std::string& sql) {
    char* error = nullptr;
    if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &error) != SQLITE_OK) {
      ADD_FAILURE() << sql << ": " << (error != nullptr ? error : "?");
    }
    sqlite3_free(error);
  }
  // Runs `sql` with `params` bound as text (?1, ?2, ...); every row, each column as text
  // ("NULL" for NULL).
  std::vector<std::vector<std::string>> Query(const std::string& sql,
                                              const std::vector<std::string>& params = {}) {
    std::vector<std::vector<std::string>> rows;
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &stmt, nullptr) != SQLITE_OK) {
      ADD_FAILURE() << sql << ": " << sqlite3_errmsg(db_);
      return rows;
    }
    for (size_t i = 0; i < params.size(); ++i) {
      sqlite3_bind_text(stmt, static_cast<int>(i + 1), params[i].c_str(),
                        static_cast<int>(params[i].size()), SQLITE_TRANSIENT);
    }
    int rc;
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
      std::vector<std::string> row;
      for (int c = 0; c < sqlite3_column_count(stmt); ++c) {
        const unsigned char* text = sqlite3_column_text(stmt, c);
        row.push_back(text == nullptr ? "NULL" : reinterpret_cast<const char*>(text));
      }
      rows.push_back(std::move(row));
    }
    if (rc != SQLITE_DONE) ADD_FAILURE() << sql << ": " << sqlite3_errmsg(db_);
    sqlite3_finalize(stmt);
    return rows;
  }

 private:
  sqlite3* db_ = nullptr;
};

// The schema exactly as version 1 created it (written out here, not taken from the
// backend, so that changes to the backend's schema cannot change what is tested).
constexpr char kSchemaVersion1Sql[] = R"sql(
PRAGMA journal_mode=WAL;
CREATE TABLE IF NOT EXISTS events(
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  event_name TEXT NOT NULL,
  inspection_id TEXT NOT NULL,
  token_id TEXT NOT NULL,
  vehicle_id TEXT NOT NULL,
  payload TEXT NOT NULL,
  content_hash TEXT NOT NULL UNIQUE,
  received_at_ms INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS events_by_received_at ON events(received_at_ms);
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
INSERT OR IGNORE INTO meta(key, value) VALUES('schema_version', 1), ('removed_up_to', 0);
)sql";

// Creates a version 1 file at `path` holding `event`, inserted the way version 1 did.
void WriteVersion1File(const std::string& path, const NewEvent& event) {
  RawDb db(path);
  db.Exec(kSchemaVersion1Sql);
  db.Query(
      "INSERT INTO events(event_name, inspection_id, token_id, vehicle_id, payload, "
      "content_hash, received_at_ms) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7)",
      {event.event_name, event.inspection_id, event.token_id, event.vehicle_id, event.payload,
       event.content_hash, std::to_string(event.received_at_ms)});
}

TEST_F(SqliteEventLogTest, AVersion1FileIsUpgradedOnOpenAndKeepsItsEventsAsTheDefaultAccount) {
  const NewEvent old_event = MakeEvent("createReport", "old", 1690000000000);
  WriteVersion1File(path_, old_event);
  {
    RawDb db(path_);
    ASSERT_EQ(db.Query("SELECT COUNT(*) FROM pragma_table_info('events') WHERE name = 'account'"),
              (std::vector<std::vector<std::string>>{{"0"}}));
  }

  absl::StatusOr<std::unique_ptr<EventLog>> opened = OpenSqliteEventLog(path_, {});
  ASSERT_TRUE(opened.ok()) << opened.status();
  std::unique_ptr<EventLog> log = std::move(*opened);
  auto read = log->ReadAfter("", 10);
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->size(), 1u);
  const StoredEvent& old_stored = (*read)[0];
  EXPECT_EQ(old_stored.cursor, "s:1");
  EXPECT_EQ(old_stored.event.account, "");
  EXPECT_EQ(old_stored.event.event_name, old_event.event_name);
  EXPECT_EQ(old_stored.event.inspection_id, old_event.inspection_id);
  EXPECT_EQ(old_stored.event.token_id, old_event.token_id);
  EXPECT_EQ(old_stored.event.vehicle_id, old_event.vehicle_id);
  EXPECT_EQ(old_stored.event.payload, old_event.payload);
  EXPECT_EQ(old_stored.event.content_hash, old_event.content_hash);
  EXPECT_EQ(old_stored.event.received_at_ms, old_event.received_at_ms);
  EXPECT_EQ(*log->LastCursor(), "s:1");

  // New events carry their account; the old event's duplicate key still works; the same
  // body for another account (its hash covers the account) is a new event.
  const NewEvent north = MakeAccountEvent("fleet-north", "createReport", "new");
  auto appended = log->Append(north);
  ASSERT_TRUE(appended.ok()) << appended.status();
  EXPECT_FALSE(appended->duplicate);
  EXPECT_GT(SeqOf(appended->cursor), 1);
  auto redelivered = log->Append(old_event);
  ASSERT_TRUE(redelivered.ok()) << redelivered.status();
  EXPECT_TRUE(redelivered->duplicate);
  EXPECT_EQ(redelivered->cursor, "s:1");
  const NewEvent same_body = MakeAccountEvent("fleet-north", "createReport", "old", 1690000000000);
  auto other_account = log->Append(same_body);
  ASSERT_TRUE(other_account.ok()) << other_account.status();
  EXPECT_FALSE(other_account->duplicate);

  const auto check_all = [&](EventLog* reader) {
    auto all = reader->ReadAfter("", 10);
    ASSERT_TRUE(all.ok()) << all.status();
    ASSERT_EQ(all->size(), 3u);
    EXPECT_EQ((*all)[0].cursor, "s:1");
    EXPECT_EQ((*all)[0].event.account, "");
    EXPECT_EQ((*all)[1].cursor, appended->cursor);
    EXPECT_EQ((*all)[1].event.account, "fleet-north");
    EXPECT_EQ((*all)[1].event.payload, north.payload);
    EXPECT_EQ((*all)[2].cursor, other_account->cursor);
    EXPECT_EQ((*all)[2].event.account, "fleet-north");
    EXPECT_EQ((*all)[2].event.payload, old_event.payload);
  };
  check_all(log.get());
  log.reset();

  {
    // The file is at version 2 now, with the column as a new file has it.
    RawDb db(path_);
    EXPECT_EQ(db.Query("SELECT value FROM meta WHERE key = 'schema_version'"),
              (std::vector<std::vector<std::string>>{{"2"}}));
    EXPECT_EQ(db.Query("SELECT type, \"notnull\", dflt_value FROM pragma_table_info('events') "
                       "WHERE name = 'account'"),
              (std::vector<std::vector<std::string>>{{"TEXT", "1", "''"}}));
  }
  // Opening the upgraded file again changes nothing.
  auto reopened = Open();
  ASSERT_NE(reopened, nullptr);
  check_all(reopened.get());
}

TEST_F(SqliteEventLogTest, TwoHandlesOpeningAVersion1FileAtOnceBothSucceed) {
  const NewEvent old_event = MakeEvent("createReport", "old");
  WriteVersion1File(path_, old_event);
  absl::StatusOr<std::unique_ptr<SqliteEventLog>> first, second;
  std::thread other([&] { second = SqliteEventLog::Open(path_, {}); });
  first = SqliteEventLog::Open(path_, {});
  other.join();
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(second.ok()) << second.status();
  for (SqliteEventLog* log : {first->get(), second->get()}) {
    auto all = log->ReadAfter("", 10);
    ASSERT_TRUE(all.ok()) << all.status();
    ASSERT_EQ(all->size(), 1u);
    EXPECT_EQ((*all)[0].event.account, "");
    EXPECT_EQ((*all)[0].event.payload, old_event.payload);
  }
  auto appended = (*second)->Append(MakeAccountEvent("south", "e", "1"));
  ASSERT_TRUE(appended.ok()) << appended.status();
  auto read = (*first)->ReadAfter("s:1", 10);
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->size(), 1u);
  EXPECT_EQ((*read)[0].event.account, "south");
}

TEST_F(SqliteEventLogTest, AFileOfANewerSchemaVersionIsFailedPreconditionAndLeftAlone) {
  { ASSERT_NE(Open(), nullptr); }
  {
    RawDb db(path_);
    db.Exec("UPDATE meta SET value = 3 WHERE key = 'schema_version'");
  }
  auto log = SqliteEventLog::Open(path_, {});
  EXPECT_EQ(log.status().code(), absl::StatusCode::kFailedPrecondition) << log.status();
  RawDb db(path_);
  EXPECT_EQ(db.Query("SELECT value FROM meta WHERE key = 'schema_version'"),
            (std::vector<std::vector<std::string>>{{"3"}}));
}

// ---------------------------------------------------------------------------
// Retention.
// ---------------------------------------------------------------------------

TEST_F(SqliteEventLogTest, RetentionRemovesInChunksAndRaisesRemovedUpToWithEach) {
  RetentionPolicy retention;
  retention.max_events = 1;
  SqliteEventLogOptions options;
  options.retention_chunk = 3;
  auto log = Open(retention, options);
  ASSERT_NE(log, nullptr);
  std::vector<std::string> cursors;
  for (int i = 0; i < 10; ++i) {
    cursors.push_back(log->Append(MakeEvent("e", std::to_string(i)))->cursor);
  }
  auto removed = log->ApplyRetention(absl::FromUnixMillis(1700000000000));
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(*removed, 9);
  auto kept = log->ReadAfter("", 100);
  ASSERT_TRUE(kept.ok());
  ASSERT_EQ(kept->size(), 1u);
  EXPECT_EQ((*kept)[0].cursor, cursors[9]);
  EXPECT_EQ(log->ReadAfter(cursors[7], 10).status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_TRUE(log->ReadAfter(cursors[8], 10).ok());
  EXPECT_EQ(*log->ApplyRetention(absl::FromUnixMillis(1700000000000)), 0);
}

TEST_F(SqliteEventLogTest, AgeRetentionOfAnOutOfOrderEventMakesEarlierCursorsOutOfRange) {
  RetentionPolicy retention;
  retention.max_age = std::chrono::hours(1);
  auto log = Open(retention);
  ASSERT_NE(log, nullptr);
  const int64_t now = 1700000000000;
  // seq 1 is recent, seq 2 carries an old timestamp.
  const std::string recent = log->Append(MakeEvent("e", "recent", now))->cursor;
  const std::string old = log->Append(MakeEvent("e", "old", now - 2 * 3600 * 1000))->cursor;
  EXPECT_EQ(*log->ApplyRetention(absl::FromUnixMillis(now)), 1);
  auto all = log->ReadAfter("", 10);
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 1u);
  EXPECT_EQ((*all)[0].cursor, recent);
  // A reader after `recent` would miss `old`: that is a gap, so OUT_OF_RANGE.
  EXPECT_EQ(log->ReadAfter(recent, 10).status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_TRUE(log->ReadAfter(old, 10).ok());
}

TEST_F(SqliteEventLogTest, NonPositiveLimitsRemoveNothing) {
  RetentionPolicy retention;
  retention.max_age = std::chrono::seconds(0);
  retention.max_events = 0;
  auto log = Open(retention);
  ASSERT_NE(log, nullptr);
  ASSERT_TRUE(log->Append(MakeEvent("e", "1", 0)).ok());
  EXPECT_EQ(*log->ApplyRetention(absl::FromUnixMillis(1700000000000)), 0);
  EXPECT_EQ(log->ReadAfter("", 10)->size(), 1u);
}

// ---------------------------------------------------------------------------
// Group commit.
// ---------------------------------------------------------------------------

TEST_F(SqliteEventLogTest, ConcurrentAppendersShareTransactions) {
  auto log = Open();
  ASSERT_NE(log, nullptr);
  constexpr int kThreads = 16, kEach = 40;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        if (!log->Append(MakeEvent("e", std::to_string(t) + "-" + std::to_string(i))).ok()) {
          ++failures;
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
  const SqliteEventLog::Stats stats = log->stats();
  EXPECT_EQ(stats.appended, kThreads * kEach);
  EXPECT_EQ(stats.failed_batches, 0);
  EXPECT_LT(stats.transactions, stats.appended);
  EXPECT_GT(stats.largest_batch, 1);
  EXPECT_EQ(log->ReadAfter("", 10000)->size(), static_cast<size_t>(kThreads * kEach));
}

// Makes the writer's next transaction contain exactly the appends of `queued`: a first
// append is taken by the writer, which then waits for the write lock held by `lock`, while
// the others queue behind it. Returns the first append's thread; the caller releases the
// lock.
class QueuedBehindALock {
 public:
  QueuedBehindALock(SqliteEventLog* log, const std::string& path, std::vector<NewEvent> queued)
      : log_(log), lock_(path), queued_(std::move(queued)), results_(queued_.size()) {}
  ~QueuedBehindALock() { Join(); }

  // False when the setup could not be reached within the deadline.
  bool Start(const NewEvent& first) {
    if (!lock_.locked()) return false;
    first_thread_ = std::thread([this, first] { first_result_ = log_->Append(first); });
    if (!WaitUntil([&] { return log_->stats().in_flight == 1; }, 10s)) return false;
    for (size_t i = 0; i < queued_.size(); ++i) {
      threads_.emplace_back([this, i] { results_[i] = log_->Append(queued_[i]); });
    }
    return WaitUntil([&] { return log_->stats().queued == static_cast<int64_t>(queued_.size()); },
                     10s);
  }
  void ReleaseLock() { lock_.Release(); }
  void Join() {
    if (first_thread_.joinable()) first_thread_.join();
    for (auto& thread : threads_) thread.join();
    threads_.clear();
  }
  const absl::StatusOr<AppendResult>& first_result() const { return first_result_; }
  const std::vector<absl::StatusOr<AppendResult>>& results() const { return results_; }

 private:
  SqliteEventLog* const log_;
  WriteLockHolder lock_;
  std::vector<NewEvent> queued_;
  std::thread first_thread_;
  std::vector<std::thread> threads_;
  absl::StatusOr<AppendResult> first_result_;
  std::vector<absl::StatusOr<AppendResult>> results_;
};

TEST_F(SqliteEventLogTest, AppendsQueuedDuringACommitGoInOneTransactionAndStillDedupe) {
  SqliteEventLogOptions options;
  options.busy_timeout = absl::Seconds(30);  // the writer waits for the test's lock
  auto log = Open({}, options);
  ASSERT_NE(log, nullptr);
  std::vector<NewEvent> queued;
  for (int i = 0; i < 15; ++i)
    queued.push_back(MakeEvent("e", i % 5 == 0 ? "same" : std::to_string(i)));
  QueuedBehindALock setup(log.get(), path_, queued);
  ASSERT_TRUE(setup.Start(MakeEvent("e", "first")));
  setup.ReleaseLock();
  setup.Join();
  ASSERT_TRUE(setup.first_result().ok()) << setup.first_result().status();
  std::string same_cursor;
  int duplicates = 0;
  for (size_t i = 0; i < queued.size(); ++i) {
    const auto& result = setup.results()[i];
    ASSERT_TRUE(result.ok()) << result.status();
    if (i % 5 != 0) {
      EXPECT_FALSE(result->duplicate);
      continue;
    }
    // Three identical payloads in one transaction: one stored, two duplicates of it.
    if (same_cursor.empty()) same_cursor = result->cursor;
    EXPECT_EQ(result->cursor, same_cursor);
    duplicates += result->duplicate ? 1 : 0;
  }
  EXPECT_EQ(duplicates, 2);
  const SqliteEventLog::Stats stats = log->stats();
  EXPECT_EQ(stats.transactions, 2);
  EXPECT_EQ(stats.largest_batch, 15);
  EXPECT_EQ(stats.appended, 1 + 13);
  EXPECT_EQ(stats.duplicates, 2);
  EXPECT_EQ(log->ReadAfter("", 100)->size(), 14u);
}

// ---------------------------------------------------------------------------
// Unavailable: a full database, a lock held too long.
// ---------------------------------------------------------------------------

TEST_F(SqliteEventLogTest, AFullDatabaseFailsTheWholeTransactionUnavailableAndWritesNothing) {
  SqliteEventLogOptions options;
  options.busy_timeout = absl::Seconds(30);
  options.max_page_count = 64;  // 256 KiB with 4 KiB pages
  auto log = Open({}, options);
  ASSERT_NE(log, nullptr);
  NewEvent huge = MakeEvent("e", "huge");
  huge.payload = R"({"blob":")" + std::string(512 * 1024, 'x') + R"("})";
  huge.content_hash = hashing::Sha256Hex(huge.payload);
  // One transaction: a small event, the one that does not fit, another small event.
  QueuedBehindALock setup(log.get(), path_,
                          {MakeEvent("e", "before"), huge, MakeEvent("e", "after")});
  ASSERT_TRUE(setup.Start(MakeEvent("e", "first")));
  setup.ReleaseLock();
  setup.Join();
  ASSERT_TRUE(setup.first_result().ok()) << setup.first_result().status();
  for (const auto& result : setup.results()) {
    EXPECT_EQ(result.status().code(), absl::StatusCode::kUnavailable) << result.status();
  }
  EXPECT_EQ(log->stats().failed_batches, 1);
  auto stored = log->ReadAfter("", 100);
  ASSERT_TRUE(stored.ok());
  ASSERT_EQ(stored->size(), 1u);
  EXPECT_EQ((*stored)[0].cursor, setup.first_result()->cursor);
  // The failure was the transaction's, not the log's: the small events can be stored
  // (they are not duplicates: nothing of them was kept).
  auto before = log->Append(MakeEvent("e", "before"));
  ASSERT_TRUE(before.ok()) << before.status();
  EXPECT_FALSE(before->duplicate);
  EXPECT_TRUE(log->CheckWritable().ok());
  // And the file says the same after reopening.
  log.reset();
  log = Open();
  ASSERT_NE(log, nullptr);
  EXPECT_EQ(log->ReadAfter("", 100)->size(), 2u);
}

TEST_F(SqliteEventLogTest, AWriteLockHeldBeyondBusyTimeoutIsUnavailableUntilReleased) {
  SqliteEventLogOptions options;
  options.busy_timeout = absl::Milliseconds(100);
  auto log = Open({}, options);
  ASSERT_NE(log, nullptr);
  WriteLockHolder lock(path_);
  ASSERT_TRUE(lock.locked());
  EXPECT_EQ(log->Append(MakeEvent("e", "1")).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(log->CheckWritable().code(), absl::StatusCode::kUnavailable);
  // Reads are not blocked by a writer (WAL).
  EXPECT_TRUE(log->ReadAfter("", 10).ok());
  lock.Release();
  EXPECT_TRUE(log->CheckWritable().ok());
  auto appended = log->Append(MakeEvent("e", "1"));
  ASSERT_TRUE(appended.ok()) << appended.status();
  EXPECT_FALSE(appended->duplicate);
}

TEST_F(SqliteEventLogTest, CheckWritableFailsWhenTheFileSystemIsAlmostFull) {
  SqliteEventLogOptions options;
  options.min_free_bytes = std::numeric_limits<int64_t>::max();  // more than any disk has
  auto log = Open({}, options);
  ASSERT_NE(log, nullptr);
  EXPECT_EQ(log->CheckWritable().code(), absl::StatusCode::kUnavailable);
}

// ---------------------------------------------------------------------------
// Several handles, WaitForAppend.
// ---------------------------------------------------------------------------

TEST_F(SqliteEventLogTest, TwoHandlesAppendingConcurrentlyStoreEachEventOnce) {
  auto first = Open();
  auto second = Open();
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);
  constexpr int kThreadsPerHandle = 4, kEach = 25;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (EventLog* log :
       {static_cast<EventLog*>(first.get()), static_cast<EventLog*>(second.get())}) {
    for (int t = 0; t < kThreadsPerHandle; ++t) {
      // Both handles append the same events: each is stored once, whichever wins.
      threads.emplace_back([&, log, t] {
        for (int i = 0; i < kEach; ++i) {
          if (!log->Append(MakeEvent("e", std::to_string(t) + "-" + std::to_string(i))).ok()) {
            ++failures;
          }
        }
      });
    }
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(first->ReadAfter("", 1000)->size(), static_cast<size_t>(kThreadsPerHandle * kEach));
  EXPECT_EQ(first->stats().appended + second->stats().appended, kThreadsPerHandle * kEach);
}

// Runs WaitForAppend(after, 30 s) on a thread and reports whether it has returned.
class Waiter {
 public:
  Waiter(EventLog* log, std::string after)
      : thread_([this, log, after] {
          log->WaitForAppend(after, 30s);
          returned_ = true;
        }) {}
  ~Waiter() { thread_.join(); }
  bool returned() const { return returned_; }

 private:
  std::atomic<bool> returned_{false};
  std::thread thread_;
};

TEST_F(SqliteEventLogTest, WaitForAppendIsWokenByAnAppendThroughTheSameHandle) {
  SqliteEventLogOptions options;
  options.poll_interval = absl::Hours(1);  // only the writer's signal can wake the waiter
  auto log = Open({}, options);
  ASSERT_NE(log, nullptr);
  const std::string before = log->Append(MakeEvent("e", "0"))->cursor;
  Waiter waiter(log.get(), before);
  ASSERT_TRUE(log->Append(MakeEvent("e", "1")).ok());
  EXPECT_TRUE(WaitUntil([&] { return waiter.returned(); }, 10s));
}

TEST_F(SqliteEventLogTest, WaitForAppendNoticesAnotherHandlesAppendByPolling) {
  SqliteEventLogOptions options;
  options.poll_interval = absl::Milliseconds(20);
  auto waiting = Open({}, options);
  auto writing = Open();
  ASSERT_NE(waiting, nullptr);
  ASSERT_NE(writing, nullptr);
  Waiter waiter(waiting.get(), "");
  ASSERT_TRUE(writing->Append(MakeEvent("e", "1")).ok());
  EXPECT_TRUE(WaitUntil([&] { return waiter.returned(); }, 10s));
  EXPECT_EQ(waiting->ReadAfter("", 10)->size(), 1u);
}

TEST_F(SqliteEventLogTest, WaitForAppendReturnsAtTheTimeoutOrAtOnceWhenEventsExist) {
  auto log = Open();
  ASSERT_NE(log, nullptr);
  const auto start = std::chrono::steady_clock::now();
  log->WaitForAppend("", 30ms);  // empty log: waits out the timeout
  EXPECT_GE(std::chrono::steady_clock::now() - start, 30ms);
  const std::string cursor = log->Append(MakeEvent("e", "1"))->cursor;
  log->WaitForAppend("s:0", 60s);  // both return at once: an event exists after them
  log->WaitForAppend("", 60s);
  log->WaitForAppend("garbage", 60s);  // malformed: returns at once
  log->WaitForAppend(cursor, 1ms);
}

// ---------------------------------------------------------------------------
// Crash safety: acknowledged appends survive kill -9.
// ---------------------------------------------------------------------------

constexpr char kChildFlag[] = "--child-append=";

NewEvent CrashEvent(int thread, int i) {
  return MakeEvent("crash", std::to_string(thread) + "-" + std::to_string(i), 1700000000000 + i);
}

// The child: appends from `threads` threads without end and prints "acked <thread> <i>
// <cursor>" right after each Append returned OK, until the parent kills it.
int RunAppendChild(const std::string& spec) {
  // Never outlive the test process, whatever happens to it.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  const size_t comma = spec.rfind(',');
  if (comma == std::string::npos) return 2;
  const std::string path = spec.substr(0, comma);
  const int threads = std::atoi(spec.c_str() + comma + 1);
  auto log = OpenSqliteEventLog(path, {});
  if (!log.ok()) {
    std::fprintf(stderr, "open: %s\n", log.status().ToString().c_str());
    return 1;
  }
  std::vector<std::thread> appenders;
  for (int t = 0; t < threads; ++t) {
    appenders.emplace_back([&, t] {
      for (int i = 0; i < 1000000; ++i) {
        auto appended = (*log)->Append(CrashEvent(t, i));
        if (!appended.ok()) {
          std::fprintf(stderr, "append: %s\n", appended.status().ToString().c_str());
          return;
        }
        // One write(2) per line: the line reaches the pipe whole and at once, so the
        // parent never sees a cursor the child has not been given yet.
        const std::string line =
            "acked " + std::to_string(t) + " " + std::to_string(i) + " " + appended->cursor + "\n";
        if (write(STDOUT_FILENO, line.data(), line.size()) < 0) return;
      }
    });
  }
  for (auto& appender : appenders) appender.join();
  for (;;) pause();
}

std::string SelfExecutable() {
  std::error_code error;
  return std::filesystem::read_symlink("/proc/self/exe", error).string();
}

TEST_F(SqliteEventLogTest, AcknowledgedAppendsSurviveKillNine) {
  constexpr int kThreads = 4;
  constexpr int kAcksBeforeKill = 300;
  Subprocess child({SelfExecutable(), kChildFlag + path_ + "," + std::to_string(kThreads)});
  ASSERT_GT(child.pid(), 0);
  for (int n = 0; n < kAcksBeforeKill; ++n) {
    const std::string line =
        child.WaitForLine([](const std::string& l) { return l.rfind("acked ", 0) == 0; }, 30s);
    ASSERT_FALSE(line.empty()) << "child output:\n" << child.output();
  }
  // The child is still appending: the kill lands in the middle of transactions.
  EXPECT_EQ(child.Stop(SIGKILL, 10s), 128 + SIGKILL);

  // Every complete line, including those printed after the first kAcksBeforeKill.
  std::string output = child.output();
  output.erase(output.rfind('\n') + 1);
  std::vector<std::vector<std::string>> acks;  // thread, i, cursor
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream fields(line);
    std::string word, thread, i, cursor;
    if (fields >> word >> thread >> i >> cursor && word == "acked") {
      acks.push_back({thread, i, cursor});
    }
  }
  ASSERT_GE(acks.size(), static_cast<size_t>(kAcksBeforeKill));

  auto log = Open();
  ASSERT_NE(log, nullptr);
  auto stored = log->ReadAfter("", 10000000);
  ASSERT_TRUE(stored.ok()) << stored.status();
  std::map<std::string, const NewEvent*> by_cursor;
  for (const StoredEvent& event : *stored) {
    // Nothing half-written: every stored row is a whole event.
    EXPECT_EQ(event.event.content_hash, hashing::Sha256Hex(event.event.payload)) << event.cursor;
    by_cursor[event.cursor] = &event.event;
  }
  std::vector<int64_t> last_seq(kThreads, 0);
  std::vector<int> next_i(kThreads, 0);
  for (const auto& ack : acks) {
    const int thread = std::stoi(ack[0]);
    const int i = std::stoi(ack[1]);
    ASSERT_LT(thread, kThreads);
    auto found = by_cursor.find(ack[2]);
    ASSERT_NE(found, by_cursor.end()) << "acknowledged event lost: " << ack[2];
    EXPECT_EQ(found->second->payload, CrashEvent(thread, i).payload) << ack[2];
    // Each thread's events were acknowledged one after the other, in log order.
    EXPECT_EQ(i, next_i[thread]++);
    EXPECT_GT(SeqOf(ack[2]), last_seq[thread]);
    last_seq[thread] = SeqOf(ack[2]);
  }
  // At most one unacknowledged append per thread may have been committed.
  EXPECT_LE(stored->size(), acks.size() + kThreads);
}

// ---------------------------------------------------------------------------
// Throughput (not run by default: ./eventlog_sqlite_tests --gtest_also_run_disabled_tests
// --gtest_filter='*Throughput*'). Prints figures; asserts only correctness.
// ---------------------------------------------------------------------------

TEST_F(SqliteEventLogTest, DISABLED_Throughput) {
  auto log = Open();
  ASSERT_NE(log, nullptr);
  using Clock = std::chrono::steady_clock;
  std::vector<double> latencies_us;
  for (int i = 0; i < 300; ++i) {
    const auto start = Clock::now();
    ASSERT_TRUE(log->Append(MakeEvent("single", std::to_string(i))).ok());
    latencies_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
  }
  std::sort(latencies_us.begin(), latencies_us.end());
  std::printf("single thread: p50 %.0f us, p99 %.0f us, mean %.0f us\n",
              latencies_us[latencies_us.size() / 2], latencies_us[latencies_us.size() * 99 / 100],
              std::accumulate(latencies_us.begin(), latencies_us.end(), 0.0) / latencies_us.size());
  // Commits are bound by fsync latency, so throughput grows with the appends in flight.
  for (const int threads : {16, 64}) {
    constexpr int kTotal = 5056;  // divisible by 16 and 64
    std::vector<std::thread> appenders;
    std::atomic<int> failures{0};
    const SqliteEventLog::Stats before = log->stats();
    const auto start = Clock::now();
    for (int t = 0; t < threads; ++t) {
      appenders.emplace_back([&, t] {
        for (int i = 0; i < kTotal / threads; ++i) {
          const std::string suffix =
              std::to_string(threads) + "-" + std::to_string(t) + "-" + std::to_string(i);
          if (!log->Append(MakeEvent("bench", suffix)).ok()) ++failures;
        }
      });
    }
    for (auto& appender : appenders) appender.join();
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    const int64_t transactions = log->stats().transactions - before.transactions;
    EXPECT_EQ(failures.load(), 0);
    std::printf(
        "%d threads: %d appends in %.3f s = %.0f appends/s, %lld transactions (%.1f each)\n",
        threads, kTotal, seconds, kTotal / seconds, static_cast<long long>(transactions),
        static_cast<double>(kTotal) / transactions);
  }
}

}  // namespace
}  // namespace inspection::eventlog

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind(inspection::eventlog::kChildFlag, 0) == 0) {
      return inspection::eventlog::RunAppendChild(
          arg.substr(sizeof(inspection::eventlog::kChildFlag) - 1));
    }
  }
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::UnitTest::GetInstance()->listeners().Append(
      new inspection::eventlog::RemoveFactoryDirectory());
  return RUN_ALL_TESTS();
}
