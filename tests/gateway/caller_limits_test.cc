// Per-caller limits: a token bucket of calls and a count of open streams per caller, on a
// fake clock so the arithmetic is exact.
#include "gateway/security/caller_limits.h"

#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace inspection::security {
namespace {

class CallerLimiterTest : public ::testing::Test {
 protected:
  std::shared_ptr<CallerLimiter> Make(double rps, int burst, int streams, size_t tracked = 100) {
    CallerLimitsOptions options;
    options.requests_per_second = rps;
    options.burst = burst;
    options.max_streams = streams;
    options.max_tracked_callers = tracked;
    options.clock = [this] { return now_; };
    return std::make_shared<CallerLimiter>(options);
  }
  absl::Time now_ = absl::FromUnixSeconds(1700000000);
};

TEST_F(CallerLimiterTest, ABurstThenTheRateAndTheExactWaitForTheNextToken) {
  auto limiter = Make(/*rps=*/2, /*burst=*/3, /*streams=*/0);
  absl::Duration wait;
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(limiter->TryCall("a", &wait)) << i;
  EXPECT_FALSE(limiter->TryCall("a", &wait));
  EXPECT_EQ(wait, absl::Milliseconds(500));
  now_ += absl::Milliseconds(250);
  EXPECT_FALSE(limiter->TryCall("a", &wait));
  EXPECT_EQ(wait, absl::Milliseconds(250));
  now_ += absl::Milliseconds(250);
  EXPECT_TRUE(limiter->TryCall("a", &wait));
  // Another caller has its own bucket.
  EXPECT_TRUE(limiter->TryCall("b", &wait));
  // The bucket never holds more than the burst, however long the caller was away.
  now_ += absl::Hours(1);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(limiter->TryCall("a", &wait));
  EXPECT_FALSE(limiter->TryCall("a", &wait));
}

TEST_F(CallerLimiterTest, NoRateMeansNoLimitAndBurstDefaultsToOneSecond) {
  absl::Duration wait;
  auto unlimited = Make(0, 0, 0);
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(unlimited->TryCall("a", &wait));
  auto five = Make(5, 0, 0);
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(five->TryCall("a", &wait));
  EXPECT_FALSE(five->TryCall("a", &wait));
}

TEST_F(CallerLimiterTest, StreamsAreCountedUntilTheirGuardGoes) {
  auto limiter = Make(0, 0, /*streams=*/2);
  std::shared_ptr<void> first = limiter->TryOpenStream("a");
  std::shared_ptr<void> second = limiter->TryOpenStream("a");
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(limiter->TryOpenStream("a"), nullptr);
  EXPECT_NE(limiter->TryOpenStream("b"), nullptr);
  first.reset();
  EXPECT_NE(limiter->TryOpenStream("a"), nullptr);
}

TEST_F(CallerLimiterTest, TrackedCallersAreBoundedByForgettingIdleOnes) {
  auto limiter = Make(/*rps=*/1, /*burst=*/1, /*streams=*/1, /*tracked=*/10);
  absl::Duration wait;
  std::shared_ptr<void> held = limiter->TryOpenStream("holder");
  for (int i = 0; i < 50; ++i) limiter->TryCall("caller-" + std::to_string(i), &wait);
  now_ += absl::Seconds(2);  // every bucket full again
  EXPECT_TRUE(limiter->TryCall("one-more", &wait));
  EXPECT_LE(limiter->tracked_callers(), 10u);
  // The caller holding a stream is not forgotten: its count still stands.
  EXPECT_EQ(limiter->TryOpenStream("holder"), nullptr);
}

// Issue 31 (review): the table grew past max_tracked_callers whenever no tracked caller
// was at its starting state (every bucket drained), and each new caller then scanned the
// whole table. Now the least recently used caller holding no stream is forgotten, at once.
TEST_F(CallerLimiterTest, TrackedCallersStayBoundedWhenEveryBucketIsDrained) {
  auto limiter = Make(/*rps=*/1, /*burst=*/1, /*streams=*/1, /*tracked=*/10);
  absl::Duration wait;
  for (int i = 0; i < 1000; ++i) {
    ASSERT_TRUE(limiter->TryCall("caller-" + std::to_string(i), &wait)) << i;
    ASSERT_LE(limiter->tracked_callers(), 10u) << i;
  }
  // A caller used recently is kept with its drained bucket...
  EXPECT_TRUE(limiter->TryCall("keep", &wait));
  for (int i = 0; i < 9; ++i) limiter->TryCall("new-" + std::to_string(i), &wait);
  EXPECT_FALSE(limiter->TryCall("keep", &wait)) << "forgotten while among the 10 most recent";
  // ...and forgotten once ten others were used after it: it starts again with a full bucket.
  for (int i = 9; i < 19; ++i) limiter->TryCall("new-" + std::to_string(i), &wait);
  EXPECT_TRUE(limiter->TryCall("keep", &wait));
  EXPECT_EQ(limiter->tracked_callers(), 10u);
}

TEST_F(CallerLimiterTest, CallersHoldingStreamsAreNeverForgotten) {
  auto limiter = Make(/*rps=*/1, /*burst=*/1, /*streams=*/1, /*tracked=*/10);
  absl::Duration wait;
  std::vector<std::shared_ptr<void>> held;
  for (int i = 0; i < 20; ++i) {
    held.push_back(limiter->TryOpenStream("holder-" + std::to_string(i)));
    ASSERT_NE(held.back(), nullptr);
  }
  for (int i = 0; i < 100; ++i) limiter->TryCall("passer-" + std::to_string(i), &wait);
  // The 20 holders and at most the bound of others.
  EXPECT_LE(limiter->tracked_callers(), 30u);
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(limiter->TryOpenStream("holder-" + std::to_string(i)), nullptr) << i;
  }
  // A stream closed makes its caller forgettable again, and the table shrinks to the bound.
  held.clear();
  for (int i = 0; i < 100; ++i) limiter->TryCall("later-" + std::to_string(i), &wait);
  EXPECT_EQ(limiter->tracked_callers(), 10u);
}

}  // namespace
}  // namespace inspection::security
