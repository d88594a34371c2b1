// The contract of WorkLedger (adapters/eventlog/work_ledger.h), as a suite every backend
// runs: a backend's test instantiates it with a factory that opens a ledger on fresh (or,
// for Reopen, the same) storage.
#ifndef TESTS_ADAPTERS_EVENTLOG_WORK_LEDGER_CONFORMANCE_H_
#define TESTS_ADAPTERS_EVENTLOG_WORK_LEDGER_CONFORMANCE_H_

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "adapters/eventlog/work_ledger.h"
#include "tests/support/temp_dir.h"

namespace inspection::eventlog::testing {

// Opens the ledger of one test's storage: `scratch` is a directory of that test (a file in
// it for SQLite; a key prefix made from it for a server). The same `scratch` opens the same
// ledger again.
using WorkLedgerFactory = std::function<std::unique_ptr<WorkLedger>(const std::string& scratch)>;

class WorkLedgerConformanceTest : public ::testing::TestWithParam<WorkLedgerFactory> {
 protected:
  void SetUp() override {
    ASSERT_FALSE(scratch_.path().empty());
    ledger_ = Open();
    ASSERT_NE(ledger_, nullptr);
  }

  std::unique_ptr<WorkLedger> Open() { return GetParam()(scratch_.path()); }

  static WorkItem Inspection(const std::string& id, int64_t started, int64_t due,
                             const std::string& account = "") {
    WorkItem item;
    item.kind = WorkKind::kInspection;
    item.account = account;
    item.id = id;
    item.started_at_ms = started;
    item.next_poll_at_ms = due;
    return item;
  }

  static std::vector<std::string> Ids(const std::vector<WorkItem>& items) {
    std::vector<std::string> ids;
    for (const WorkItem& item : items) ids.push_back(item.id);
    return ids;
  }

  ::inspection::testing::TempDir scratch_;
  std::unique_ptr<WorkLedger> ledger_;
};

TEST_P(WorkLedgerConformanceTest, AnItemIsClaimedOnceDueOldestFirst) {
  ASSERT_TRUE(ledger_->Record(Inspection("b", 100, 2000)).ok());
  ASSERT_TRUE(ledger_->Record(Inspection("a", 100, 1000)).ok());
  auto early = ledger_->ClaimDue(999, 10, "r1", 500);
  ASSERT_TRUE(early.ok()) << early.status();
  EXPECT_TRUE(early->empty());
  auto due = ledger_->ClaimDue(2000, 10, "r1", 500);
  ASSERT_TRUE(due.ok()) << due.status();
  EXPECT_THAT(Ids(*due), ::testing::ElementsAre("a", "b"));
  EXPECT_EQ((*due)[0].started_at_ms, 100);
  EXPECT_EQ((*due)[0].attempts, 0);
}

// New work first (issue 31): items polled fewer times are claimed before those polled more
// often, however long the latter have been due; among equals the longest due goes first.
TEST_P(WorkLedgerConformanceTest, FewestAttemptsAreClaimedFirstThenTheLongestDue) {
  ASSERT_TRUE(ledger_->Record(Inspection("twice", 100, 1000)).ok());
  ASSERT_TRUE(ledger_->Record(Inspection("once", 100, 1000)).ok());
  // "twice" polled twice (due again at 1300), "once" once (due again at 1500).
  auto first = ledger_->ClaimDue(1000, 10, "r1", 1);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_EQ(first->size(), 2u);
  for (const WorkItem& item : *first) {
    ASSERT_TRUE(ledger_->Reschedule(item, "r1", item.id == "twice" ? 1200 : 1500).ok());
  }
  auto second = ledger_->ClaimDue(1200, 10, "r1", 1);
  ASSERT_TRUE(second.ok()) << second.status();
  ASSERT_THAT(Ids(*second), ::testing::ElementsAre("twice"));
  ASSERT_TRUE(ledger_->Reschedule((*second)[0], "r1", 1300).ok());
  // Never polled: due at 2500 and 2000, and one not due yet.
  ASSERT_TRUE(ledger_->Record(Inspection("new-later", 2000, 2500)).ok());
  ASSERT_TRUE(ledger_->Record(Inspection("new-earlier", 2000, 2000)).ok());
  ASSERT_TRUE(ledger_->Record(Inspection("new-not-due", 2000, 3001)).ok());

  EXPECT_EQ(*ledger_->CountPending(3000), 4) << "the order changes nothing of what is due";
  auto two = ledger_->ClaimDue(3000, 2, "r2", 500);
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_THAT(Ids(*two), ::testing::ElementsAre("new-earlier", "new-later"));
  auto rest = ledger_->ClaimDue(3000, 10, "r2", 1000);
  ASSERT_TRUE(rest.ok()) << rest.status();
  EXPECT_THAT(Ids(*rest), ::testing::ElementsAre("once", "twice"));
  ASSERT_EQ(rest->size(), 2u);
  EXPECT_EQ((*rest)[0].attempts, 1);
  EXPECT_EQ((*rest)[1].attempts, 2);
  // Leases that ended (r2 died mid-poll) keep their items' places: no attempt was counted.
  auto again = ledger_->ClaimDue(4000, 10, "r3", 500);
  ASSERT_TRUE(again.ok()) << again.status();
  ASSERT_EQ(again->size(), 5u);
  EXPECT_EQ((*again)[0].id, "new-not-due") << "never polled, due since 3001";
  EXPECT_EQ((*again)[3].id, "once");
  EXPECT_EQ((*again)[4].id, "twice");
}

TEST_P(WorkLedgerConformanceTest, ARepeatedRecordKeepsTheFirst) {
  ASSERT_TRUE(ledger_->Record(Inspection("a", 100, 1000)).ok());
  ASSERT_TRUE(ledger_->Record(Inspection("a", 500, 9000)).ok());
  auto due = ledger_->ClaimDue(1000, 10, "r1", 500);
  ASSERT_TRUE(due.ok()) << due.status();
  ASSERT_EQ(due->size(), 1u);
  EXPECT_EQ((*due)[0].started_at_ms, 100);
}

TEST_P(WorkLedgerConformanceTest, TheSameIdOfAnotherAccountOrKindIsOtherWork) {
  ASSERT_TRUE(ledger_->Record(Inspection("a", 100, 1000)).ok());
  ASSERT_TRUE(ledger_->Record(Inspection("a", 100, 1000, "preprod")).ok());
  WorkItem token = Inspection("a", 100, 1000);
  token.kind = WorkKind::kToken;
  ASSERT_TRUE(ledger_->Record(token).ok());
  ASSERT_TRUE(ledger_->Resolve(WorkKind::kInspection, "", "a").ok());
  auto due = ledger_->ClaimDue(1000, 10, "r1", 500);
  ASSERT_TRUE(due.ok()) << due.status();
  ASSERT_EQ(due->size(), 2u);
  for (const WorkItem& item : *due) {
    EXPECT_TRUE(item.account == "preprod" || item.kind == WorkKind::kToken);
  }
}

TEST_P(WorkLedgerConformanceTest, AClaimHoldsOtherOwnersOffUntilItsLeaseEnds) {
  ASSERT_TRUE(ledger_->Record(Inspection("a", 100, 1000)).ok());
  auto first = ledger_->ClaimDue(1000, 10, "r1", 500);
  ASSERT_TRUE(first.ok());
  ASSERT_EQ(first->size(), 1u);
  auto other = ledger_->ClaimDue(1499, 10, "r2", 500);
  ASSERT_TRUE(other.ok());
  EXPECT_TRUE(other->empty()) << "r1's lease runs until 1500";
  auto again = ledger_->ClaimDue(1499, 10, "r1", 500);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->empty()) << "not even its holder claims it twice";
  auto taken = ledger_->ClaimDue(1500, 10, "r2", 500);
  ASSERT_TRUE(taken.ok());
  EXPECT_EQ(taken->size(), 1u) << "r1's lease ended: r2 takes over";
  // r1 comes back too late: its reschedule is refused, r2's stands.
  EXPECT_EQ(ledger_->Reschedule((*first)[0], "r1", 5000).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(ledger_->Reschedule((*taken)[0], "r2", 5000).ok());
}

TEST_P(WorkLedgerConformanceTest, ARescheduleCountsTheAttemptAndReleasesTheClaim) {
  ASSERT_TRUE(ledger_->Record(Inspection("a", 100, 1000)).ok());
  auto claimed = ledger_->ClaimDue(1000, 10, "r1", 60000);
  ASSERT_TRUE(claimed.ok());
  ASSERT_EQ(claimed->size(), 1u);
  ASSERT_TRUE(ledger_->Reschedule((*claimed)[0], "r1", 3000).ok());
  auto not_yet = ledger_->ClaimDue(2999, 10, "r2", 500);
  ASSERT_TRUE(not_yet.ok());
  EXPECT_TRUE(not_yet->empty());
  auto due = ledger_->ClaimDue(3000, 10, "r2", 500);
  ASSERT_TRUE(due.ok());
  ASSERT_EQ(due->size(), 1u) << "released: another owner may claim it at once when due";
  EXPECT_EQ((*due)[0].attempts, 1);
  EXPECT_EQ((*due)[0].next_poll_at_ms, 3000);
}

TEST_P(WorkLedgerConformanceTest, AResolvedItemIsNeverClaimedAndItsHolderCannotReschedule) {
  ASSERT_TRUE(ledger_->Record(Inspection("a", 100, 1000)).ok());
  auto claimed = ledger_->ClaimDue(1000, 10, "r1", 500);
  ASSERT_TRUE(claimed.ok());
  ASSERT_TRUE(ledger_->Resolve(WorkKind::kInspection, "", "a").ok());
  EXPECT_EQ(ledger_->Reschedule((*claimed)[0], "r1", 2000).code(),
            absl::StatusCode::kFailedPrecondition);
  auto later = ledger_->ClaimDue(100000, 10, "r2", 500);
  ASSERT_TRUE(later.ok());
  EXPECT_TRUE(later->empty());
  EXPECT_TRUE(ledger_->Resolve(WorkKind::kInspection, "", "unknown").ok());
}

TEST_P(WorkLedgerConformanceTest, ClaimDueTakesAtMostTheLimit) {
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(ledger_->Record(Inspection("i" + std::to_string(i), 100, 1000 + i)).ok());
  }
  auto some = ledger_->ClaimDue(5000, 2, "r1", 500);
  ASSERT_TRUE(some.ok());
  EXPECT_THAT(Ids(*some), ::testing::ElementsAre("i0", "i1"));
  auto rest = ledger_->ClaimDue(5000, 10, "r2", 500);
  ASSERT_TRUE(rest.ok());
  EXPECT_THAT(Ids(*rest), ::testing::ElementsAre("i2", "i3", "i4"));
}

TEST_P(WorkLedgerConformanceTest, CountsPendingAndTrimsByStartTime) {
  ASSERT_TRUE(ledger_->Record(Inspection("old", 100, 1000)).ok());
  ASSERT_TRUE(ledger_->Record(Inspection("new", 5000, 9000)).ok());
  ASSERT_TRUE(ledger_->Record(Inspection("done", 5000, 1000)).ok());
  ASSERT_TRUE(ledger_->Resolve(WorkKind::kInspection, "", "done").ok());
  EXPECT_EQ(*ledger_->CountPending(1000), 1);
  EXPECT_EQ(*ledger_->CountPending(std::numeric_limits<int64_t>::max()), 2);
  // "old", being polled (leased until 61000), counts only from then on; "new" from 9000.
  ASSERT_EQ(ledger_->ClaimDue(1000, 10, "r1", 60000)->size(), 1u);
  EXPECT_EQ(*ledger_->CountPending(8999), 0);
  EXPECT_EQ(*ledger_->CountPending(60999), 1);
  EXPECT_EQ(*ledger_->CountPending(61000), 2);
  auto trimmed = ledger_->Trim(5000);
  ASSERT_TRUE(trimmed.ok()) << trimmed.status();
  EXPECT_EQ(*trimmed, 1);
  EXPECT_EQ(*ledger_->CountPending(std::numeric_limits<int64_t>::max()), 1);
}

TEST_P(WorkLedgerConformanceTest, RecordedWorkOutlivesTheLedgerObject) {
  ASSERT_TRUE(ledger_->Record(Inspection("a", 100, 1000, "prod")).ok());
  ledger_.reset();
  std::unique_ptr<WorkLedger> reopened = Open();
  ASSERT_NE(reopened, nullptr);
  auto due = reopened->ClaimDue(1000, 10, "r1", 500);
  ASSERT_TRUE(due.ok()) << due.status();
  ASSERT_EQ(due->size(), 1u);
  EXPECT_EQ((*due)[0].account, "prod");
  EXPECT_EQ((*due)[0].id, "a");
}

// Two ledgers on one store, as two replicas (or two processes on one SQLite file) are.
TEST_P(WorkLedgerConformanceTest, TwoLedgersOnOneStoreNeverClaimTheSameItem) {
  std::unique_ptr<WorkLedger> other = Open();
  ASSERT_NE(other, nullptr);
  for (int i = 0; i < 50; ++i) {
    ASSERT_TRUE(ledger_->Record(Inspection("i" + std::to_string(i), 1, 1)).ok());
  }
  auto from_a = ledger_->ClaimDue(10, 30, "a", 1000);
  auto from_b = other->ClaimDue(10, 30, "b", 1000);
  ASSERT_TRUE(from_a.ok() && from_b.ok());
  EXPECT_EQ(from_a->size(), 30u);
  EXPECT_EQ(from_b->size(), 20u);
  for (const WorkItem& x : *from_a) {
    for (const WorkItem& y : *from_b) EXPECT_NE(x.id, y.id);
  }
}

}  // namespace inspection::eventlog::testing

#endif  // TESTS_ADAPTERS_EVENTLOG_WORK_LEDGER_CONFORMANCE_H_
