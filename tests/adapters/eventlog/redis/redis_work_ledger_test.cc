// The WorkLedger contract on Redis (a redis-server started by the test), and what only a
// server can show.
#include <atomic>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "adapters/eventlog/work_ledger.h"
#include "tests/adapters/eventlog/work_ledger_conformance.h"
#include "tests/support/shared_redis_server.h"

namespace inspection::eventlog {
namespace {

using ::inspection::eventlog::testing::WorkLedgerConformanceTest;
using ::inspection::testing::shared_redis_server;

// One key prefix per test: the scratch directory's name is unique.
std::unique_ptr<WorkLedger> OpenIn(const std::string& scratch) {
  const std::string prefix = "work-test-" + scratch.substr(scratch.rfind('/') + 1);
  auto ledger = OpenRedisWorkLedger(shared_redis_server->Url("/0?stream=" + prefix));
  EXPECT_TRUE(ledger.ok()) << ledger.status();
  return ledger.ok() ? std::move(*ledger) : nullptr;
}

INSTANTIATE_TEST_SUITE_P(Redis, WorkLedgerConformanceTest, ::testing::Values(&OpenIn));

TEST(RedisWorkLedgerTest, AnUnreachableRedisIsUnavailableAndABadUrlInvalid) {
  auto down = OpenRedisWorkLedger("redis://127.0.0.1:1/0");
  ASSERT_FALSE(down.ok());
  EXPECT_EQ(down.status().code(), absl::StatusCode::kUnavailable) << down.status();
  auto bad = OpenRedisWorkLedger("redis://:s3cret@/0");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message().find("s3cret"), std::string::npos);
}

}  // namespace
}  // namespace inspection::eventlog
