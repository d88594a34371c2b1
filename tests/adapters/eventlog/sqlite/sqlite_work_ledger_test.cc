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

}  // namespace
}  // namespace inspection::eventlog
