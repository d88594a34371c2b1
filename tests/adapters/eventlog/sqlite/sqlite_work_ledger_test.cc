// The WorkLedger contract on SQLite, plus what only a file can show.
#include <fstream>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "adapters/eventlog/work_ledger.h"
#include "tests/adapters/eventlog/work_ledger_conformance.h"
#include "tests/support/temp_dir.h"

namespace inspection::eventlog {
namespace {

using ::inspection::eventlog::testing::WorkLedgerConformanceTest;
using ::inspection::testing::TempDir;

std::unique_ptr<WorkLedger> OpenIn(const std::string& scratch) {
  auto ledger = OpenSqliteWorkLedger(scratch + "/work.db");
  EXPECT_TRUE(ledger.ok()) << ledger.status();
  return ledger.ok() ? std::move(*ledger) : nullptr;
}

INSTANTIATE_TEST_SUITE_P(Sqlite, WorkLedgerConformanceTest, ::testing::Values(&OpenIn));

TEST(SqliteWorkLedgerTest, AFileThatIsNotADatabaseIsAFailedPrecondition) {
  TempDir dir;
  std::ofstream(dir.File("work.db")) << "not a database, not at all, just some text\n";
  auto ledger = OpenSqliteWorkLedger(dir.File("work.db"));
  ASSERT_FALSE(ledger.ok());
  EXPECT_EQ(ledger.status().code(), absl::StatusCode::kFailedPrecondition) << ledger.status();
  EXPECT_NE(ledger.status().message().find("sqlite work ledger"), std::string::npos);
}

TEST(SqliteWorkLedgerTest, TwoHandlesOnOneFileNeverClaimTheSameItem) {
  TempDir dir;
  auto a = OpenSqliteWorkLedger(dir.File("work.db"));
  auto b = OpenSqliteWorkLedger(dir.File("work.db"));
  ASSERT_TRUE(a.ok() && b.ok());
  for (int i = 0; i < 50; ++i) {
    WorkItem item;
    item.id = "i" + std::to_string(i);
    item.started_at_ms = 1;
    item.next_poll_at_ms = 1;
    ASSERT_TRUE((*a)->Record(item).ok());
  }
  auto from_a = (*a)->ClaimDue(10, 30, "a", 1000);
  auto from_b = (*b)->ClaimDue(10, 30, "b", 1000);
  ASSERT_TRUE(from_a.ok() && from_b.ok());
  EXPECT_EQ(from_a->size(), 30u);
  EXPECT_EQ(from_b->size(), 20u);
  for (const WorkItem& x : *from_a) {
    for (const WorkItem& y : *from_b) EXPECT_NE(x.id, y.id);
  }
}

}  // namespace
}  // namespace inspection::eventlog
