#include "adapters/http/response_budget.h"

#include <atomic>
#include <cstddef>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

namespace inspection::http {
namespace {

TEST(ResponseBudgetTest, TakesWhatFitsAndRefusesTheRestWhole) {
  ResponseBudget budget(100);
  EXPECT_TRUE(budget.TryTake(0, 60));
  EXPECT_FALSE(budget.TryTake(0, 41));  // nothing of it is taken
  EXPECT_EQ(budget.used(), 60u);
  EXPECT_TRUE(budget.TryTake(0, 40));  // exactly the limit
  EXPECT_FALSE(budget.TryTake(0, 1));
  budget.Give(0, 100);
  EXPECT_EQ(budget.used(), 0u);
  EXPECT_FALSE(budget.TryTake(0, 101));  // more than the whole budget, even when empty
}

TEST(ResponseBudgetTest, ZeroIsUnlimitedButStillCounted) {
  ResponseBudget budget(0);
  EXPECT_TRUE(budget.TryTake(0, size_t{1} << 40));
  EXPECT_EQ(budget.used(), size_t{1} << 40);
}

TEST(ResponseBudgetTest, ALeaseGrowsGivesBackAndMoves) {
  ResponseBudget budget(100);
  {
    ResponseBudgetLease lease(&budget);
    EXPECT_TRUE(lease.GrowTo(30));
    EXPECT_TRUE(lease.GrowTo(20));  // never shrinks
    EXPECT_EQ(lease.held(), 30u);
    EXPECT_TRUE(lease.GrowTo(70));  // takes the 40 more only
    EXPECT_EQ(budget.used(), 70u);
    ResponseBudgetLease other(&budget);
    EXPECT_FALSE(other.GrowTo(31));  // refused: the other lease is unchanged
    EXPECT_EQ(other.held(), 0u);
    EXPECT_TRUE(other.GrowTo(30));

    ResponseBudgetLease moved(std::move(other));
    EXPECT_EQ(moved.held(), 30u);
    EXPECT_EQ(budget.used(), 100u);
    moved = ResponseBudgetLease(&budget);  // gives back what it held
    EXPECT_EQ(budget.used(), 70u);
    lease.Reset();
    EXPECT_EQ(budget.used(), 0u);
    EXPECT_TRUE(lease.GrowTo(10));
  }  // destruction gives back the rest
  EXPECT_EQ(budget.used(), 0u);

  ResponseBudgetLease unbound;
  EXPECT_TRUE(unbound.GrowTo(size_t{1} << 40));  // no budget: nothing to refuse
}

// Each answer's first `guaranteed` bytes may use the whole budget; the bytes past them only
// three quarters of it. Answers that grow without end stop at those three quarters, and the
// quarter left serves the next answers' first bytes: a small answer is still taken whole.
TEST(ResponseBudgetTest, HugeAnswersLeaveAQuarterForTheFirstBytesOfOthers) {
  ResponseBudget budget(/*limit=*/1000, /*guaranteed=*/50);
  EXPECT_EQ(budget.beyond_limit(), 750u);
  std::vector<ResponseBudgetLease> endless;
  for (int i = 0; i < 4; ++i) endless.emplace_back(&budget);
  // Four endless answers grow 10 bytes at a time, taking turns, until each is refused.
  for (bool grew = true; grew;) {
    grew = false;
    for (ResponseBudgetLease& lease : endless) grew |= lease.GrowTo(lease.held() + 10);
  }
  size_t endless_total = 0;
  for (ResponseBudgetLease& lease : endless) endless_total += lease.held();
  // 4 x 50 first bytes and 750 past them; the rest, 50 bytes, is refused to them.
  EXPECT_EQ(endless_total, 950u);
  EXPECT_EQ(budget.used_beyond(), 750u);
  // A small answer (40 bytes) still fits; past its own first 50 bytes it would not.
  ResponseBudgetLease small(&budget);
  EXPECT_TRUE(small.GrowTo(40));
  EXPECT_EQ(budget.used(), 990u);
  ResponseBudgetLease larger(&budget);
  EXPECT_FALSE(larger.GrowTo(60)) << "10 bytes past its first 50, over the three quarters";
  EXPECT_TRUE(larger.GrowTo(10));
  EXPECT_FALSE(larger.GrowTo(11)) << "the whole budget is held";
  EXPECT_EQ(budget.used(), 1000u);
  endless.clear();
  EXPECT_EQ(budget.used(), 50u);
  EXPECT_EQ(budget.used_beyond(), 0u);
  EXPECT_TRUE(larger.GrowTo(800)) << "once the huge ones are gone";
}

TEST(ResponseBudgetTest, TheLargestAnswerIsThreeQuartersPlusTheGuaranteedBytes) {
  EXPECT_EQ(ResponseBudget::LargestAnswer(1000, 50), 800u);
  EXPECT_EQ(ResponseBudget::LargestAnswer(1000, 500), 1000u);  // never past the limit
  EXPECT_EQ(ResponseBudget::LargestAnswer(1000, 0), 1000u);
  EXPECT_EQ(ResponseBudget::LargestAnswer(0, 50), SIZE_MAX);
  // What a lease can actually grow to, alone in the budget.
  ResponseBudget budget(1000, 50);
  ResponseBudgetLease lease(&budget);
  EXPECT_TRUE(lease.GrowTo(800));
  EXPECT_FALSE(lease.GrowTo(801));
}

TEST(ResponseBudgetTest, ARefusalSaysWhichBudgetAndItsQuarter) {
  EXPECT_EQ(ResponseBudget(8388608, 65536).RefusalDetail(),
            "answers being read at once exceed the transport's budget of 8388608 bytes (past "
            "each answer's first 65536 bytes, three quarters of it); this one was refused");
  EXPECT_EQ(ResponseBudget(1000, 0).RefusalDetail(),
            "answers being read at once exceed the transport's budget of 1000 bytes; this one "
            "was refused");
}

// Without a guaranteed part every byte competes for the whole limit.
TEST(ResponseBudgetTest, NoGuaranteedBytesMeansNoQuarterKept) {
  ResponseBudget budget(1000, 0);
  EXPECT_EQ(budget.beyond_limit(), 1000u);
  ResponseBudgetLease lease(&budget);
  EXPECT_TRUE(lease.GrowTo(1000));
  EXPECT_EQ(budget.used_beyond(), 1000u);
  ResponseBudgetLease other(&budget);
  EXPECT_FALSE(other.GrowTo(1));
}

// Many threads racing for one budget never take more than it, and give back all of it.
TEST(ResponseBudgetTest, ConcurrentLeasesNeverOvershoot) {
  constexpr size_t kLimit = 1000;
  ResponseBudget budget(kLimit, /*guaranteed=*/32);
  std::atomic<bool> overshoot{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 20000; ++i) {
        ResponseBudgetLease lease(&budget);
        for (size_t size = 16; size <= 256 && lease.GrowTo(size); size *= 2) {
          if (budget.used() > kLimit || budget.used_beyond() > budget.beyond_limit()) {
            overshoot = true;
          }
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_FALSE(overshoot.load());
  EXPECT_EQ(budget.used(), 0u);
  EXPECT_EQ(budget.used_beyond(), 0u);
}

}  // namespace
}  // namespace inspection::http
