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
  EXPECT_TRUE(budget.TryTake(60));
  EXPECT_FALSE(budget.TryTake(41));  // nothing of it is taken
  EXPECT_EQ(budget.used(), 60u);
  EXPECT_TRUE(budget.TryTake(40));  // exactly the limit
  EXPECT_FALSE(budget.TryTake(1));
  budget.Give(100);
  EXPECT_EQ(budget.used(), 0u);
  EXPECT_FALSE(budget.TryTake(101));  // more than the whole budget, even when empty
}

TEST(ResponseBudgetTest, ZeroIsUnlimitedButStillCounted) {
  ResponseBudget budget(0);
  EXPECT_TRUE(budget.TryTake(size_t{1} << 40));
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

// Many threads racing for one budget never take more than it, and give back all of it.
TEST(ResponseBudgetTest, ConcurrentLeasesNeverOvershoot) {
  constexpr size_t kLimit = 1000;
  ResponseBudget budget(kLimit);
  std::atomic<bool> overshoot{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 20000; ++i) {
        ResponseBudgetLease lease(&budget);
        for (size_t size = 16; size <= 256 && lease.GrowTo(size); size *= 2) {
          if (budget.used() > kLimit) overshoot = true;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_FALSE(overshoot.load());
  EXPECT_EQ(budget.used(), 0u);
}

}  // namespace
}  // namespace inspection::http
