#include "gateway/resilience/retry_budget.h"

#include <atomic>
#include <cmath>
#include <memory>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace inspection::resilience {
namespace {

std::unique_ptr<RetryBudget> MakeBudget(double ratio = 0.2, int64_t min_retries = 3) {
  RetryBudgetConfig config;
  config.ratio = ratio;
  config.min_retries = min_retries;
  absl::StatusOr<std::unique_ptr<RetryBudget>> budget = RetryBudget::Create(config);
  EXPECT_TRUE(budget.ok()) << budget.status();
  return std::move(*budget);
}

void StartRequests(RetryBudget& budget, int n) {
  for (int i = 0; i < n; ++i) budget.RequestStarted();
}

// How many retries the budget grants, one after the other, before the first refusal.
int64_t GrantUntilRefused(RetryBudget& budget) {
  int64_t granted = 0;
  while (budget.TryStartRetry()) {
    ++granted;
    if (granted > 1'000'000) break;  // a broken budget must fail the test, not hang it
  }
  return granted;
}

int64_t RetriesAllowedAt(int requests_in_flight, double ratio = 0.2, int64_t min_retries = 3) {
  std::unique_ptr<RetryBudget> budget = MakeBudget(ratio, min_retries);
  StartRequests(*budget, requests_in_flight);
  return GrantUntilRefused(*budget);
}

TEST(RetryBudgetTest, DefaultsAreTwentyPercentAndThree) {
  const RetryBudgetConfig config;
  EXPECT_EQ(config.ratio, 0.2);
  EXPECT_EQ(config.min_retries, 3);
}

TEST(RetryBudgetTest, RejectsInvalidConfig) {
  RetryBudgetConfig config;
  config.ratio = -0.1;
  EXPECT_EQ(RetryBudget::Create(config).status().code(), absl::StatusCode::kInvalidArgument);
  config.ratio = std::nan("");
  EXPECT_EQ(RetryBudget::Create(config).status().code(), absl::StatusCode::kInvalidArgument);
  config.ratio = 0.2;
  config.min_retries = -1;
  EXPECT_EQ(RetryBudget::Create(config).status().code(), absl::StatusCode::kInvalidArgument);
  config.min_retries = 0;
  config.ratio = 0;  // "no retries beyond the minimum" is a valid choice
  EXPECT_TRUE(RetryBudget::Create(config).ok());
}

TEST(RetryBudgetTest, ArithmeticAtSeveralInFlightLevels) {
  // retries_in_flight < max(3, 0.2 * requests_in_flight)
  EXPECT_EQ(RetriesAllowedAt(0), 3);  // the minimum keeps an idle gateway retrying
  EXPECT_EQ(RetriesAllowedAt(1), 3);
  EXPECT_EQ(RetriesAllowedAt(10), 3);  // 2 < 3
  EXPECT_EQ(RetriesAllowedAt(15), 3);  // 3 = 3
  EXPECT_EQ(RetriesAllowedAt(16), 4);  // 3.2: the 4th starts at 3 < 3.2
  EXPECT_EQ(RetriesAllowedAt(20), 4);
  EXPECT_EQ(RetriesAllowedAt(50), 10);
  EXPECT_EQ(RetriesAllowedAt(100), 20);
  EXPECT_EQ(RetriesAllowedAt(101), 21);  // 20.2
  EXPECT_EQ(RetriesAllowedAt(1000), 200);
}

TEST(RetryBudgetTest, OtherRatiosAndMinimums) {
  EXPECT_EQ(RetriesAllowedAt(10, 0.5, 0), 5);
  EXPECT_EQ(RetriesAllowedAt(0, 0.5, 0), 0);
  EXPECT_EQ(RetriesAllowedAt(100, 0.0, 2), 2);
  EXPECT_EQ(RetriesAllowedAt(10, 1.0, 0), 10);
}

TEST(RetryBudgetTest, BoundaryIsExactWhereTheProductWouldRoundUp) {
  // 0.07 * 100 == 7.000000000000001 in doubles; the limit is still exactly 7.
  ASSERT_GT(0.07 * 100, 7.0);
  EXPECT_EQ(RetriesAllowedAt(100, 0.07, 0), 7);
}

TEST(RetryBudgetTest, CountsExhaustionAndStartedRetries) {
  std::unique_ptr<RetryBudget> budget = MakeBudget();
  StartRequests(*budget, 10);
  EXPECT_TRUE(budget->TryStartRetry());
  EXPECT_TRUE(budget->TryStartRetry());
  EXPECT_TRUE(budget->TryStartRetry());
  EXPECT_FALSE(budget->TryStartRetry());
  EXPECT_FALSE(budget->TryStartRetry());
  RetryBudgetStats stats = budget->Stats();
  EXPECT_EQ(stats.requests_in_flight, 10);
  EXPECT_EQ(stats.retries_in_flight, 3);
  EXPECT_EQ(stats.retries_started, 3);
  EXPECT_EQ(stats.budget_exhausted, 2);

  budget->RetryFinished();
  EXPECT_TRUE(budget->TryStartRetry());  // the freed slot is usable again
  EXPECT_FALSE(budget->TryStartRetry());
  stats = budget->Stats();
  EXPECT_EQ(stats.retries_in_flight, 3);
  EXPECT_EQ(stats.retries_started, 4);
  EXPECT_EQ(stats.budget_exhausted, 3);
}

TEST(RetryBudgetTest, BudgetShrinksAsRequestsFinish) {
  std::unique_ptr<RetryBudget> budget = MakeBudget();
  StartRequests(*budget, 50);
  EXPECT_EQ(GrantUntilRefused(*budget), 10);
  for (int i = 0; i < 40; ++i) budget->RequestFinished();  // limit now max(3, 2) = 3
  EXPECT_FALSE(budget->TryStartRetry());
  for (int i = 0; i < 7; ++i) budget->RetryFinished();  // 3 in flight: still full
  EXPECT_FALSE(budget->TryStartRetry());
  budget->RetryFinished();  // 2 in flight
  EXPECT_TRUE(budget->TryStartRetry());
  EXPECT_FALSE(budget->TryStartRetry());
}

TEST(RetryBudgetTest, UnbalancedFinishesDoNotGoNegative) {
  std::unique_ptr<RetryBudget> budget = MakeBudget();
  budget->RequestFinished();
  budget->RetryFinished();
  RetryBudgetStats stats = budget->Stats();
  EXPECT_EQ(stats.requests_in_flight, 0);
  EXPECT_EQ(stats.retries_in_flight, 0);
  EXPECT_EQ(GrantUntilRefused(*budget), 3);  // not 4: no phantom slot was created
}

TEST(RetryBudgetTest, ConcurrentRetriesNeverExceedTheLimit) {
  // A limit below the thread count, so that the threads really compete for slots.
  std::unique_ptr<RetryBudget> budget = MakeBudget(0.2, 2);
  StartRequests(*budget, 5);  // limit max(2, 1) = 2
  std::atomic<int> in_flight{0};
  std::atomic<int> max_seen{0};
  constexpr int kThreads = 4;
  constexpr int kTriesPerThread = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kTriesPerThread; ++i) {
        if (!budget->TryStartRetry()) continue;
        const int now = ++in_flight;
        int seen = max_seen.load();
        while (now > seen && !max_seen.compare_exchange_weak(seen, now)) {
        }
        std::this_thread::yield();  // hold the slot a little
        --in_flight;
        budget->RetryFinished();
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  const RetryBudgetStats stats = budget->Stats();
  EXPECT_LE(max_seen.load(), 2);
  EXPECT_EQ(stats.retries_in_flight, 0);
  EXPECT_EQ(stats.retries_started + stats.budget_exhausted, kThreads * kTriesPerThread);
}

}  // namespace
}  // namespace inspection::resilience
