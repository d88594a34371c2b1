#include "gateway/resilience/retry_wait.h"

#include <optional>

#include "gtest/gtest.h"

namespace inspection::resilience {
namespace {

using absl::Milliseconds;
using absl::Seconds;

RetryWaitDecision Decide(std::optional<absl::Duration> retry_after, absl::Duration backoff,
                         absl::Duration time_remaining,
                         absl::Duration min_attempt_time = Milliseconds(50)) {
  RetryWaitInputs inputs;
  inputs.retry_after = retry_after;
  inputs.backoff = backoff;
  inputs.time_remaining = time_remaining;
  inputs.min_attempt_time = min_attempt_time;
  return DecideRetryWait(inputs);
}

TEST(DecideRetryWaitTest, DefaultMinimumAttemptTimeIs50Ms) {
  EXPECT_EQ(RetryWaitInputs{}.min_attempt_time, Milliseconds(50));
  EXPECT_EQ(RetryWaitInputs{}.time_remaining, absl::InfiniteDuration());
}

TEST(DecideRetryWaitTest, NoRetryAfterAndBackoffFitsWaitsTheBackoff) {
  const RetryWaitDecision decision = Decide(std::nullopt, Milliseconds(100), Seconds(1));
  EXPECT_TRUE(decision.retry);
  EXPECT_EQ(decision.delay, Milliseconds(100));
}

TEST(DecideRetryWaitTest, RetryAfterLongerThanBackoffIsHonouredWhenItFits) {
  const RetryWaitDecision decision = Decide(Seconds(2), Milliseconds(100), Seconds(5));
  EXPECT_TRUE(decision.retry);
  EXPECT_EQ(decision.delay, Seconds(2));
}

TEST(DecideRetryWaitTest, BackoffLongerThanRetryAfterWins) {
  const RetryWaitDecision decision = Decide(Milliseconds(10), Milliseconds(100), Seconds(5));
  EXPECT_TRUE(decision.retry);
  EXPECT_EQ(decision.delay, Milliseconds(100));
}

TEST(DecideRetryWaitTest, RetryAfterBeyondTheDeadlineGivesUpAndReportsIt) {
  const RetryWaitDecision decision = Decide(Seconds(3), Milliseconds(100), Seconds(2));
  EXPECT_FALSE(decision.retry);
  EXPECT_EQ(decision.delay, Seconds(3));  // passed back as RetryInfo / pushback
}

TEST(DecideRetryWaitTest, RetryAfterThatLeavesNoTimeForTheAttemptGivesUp) {
  // The wait itself fits, but the attempt after it would have 20 ms < 50 ms.
  const RetryWaitDecision decision = Decide(Milliseconds(980), Milliseconds(25), Seconds(1));
  EXPECT_FALSE(decision.retry);
  EXPECT_EQ(decision.delay, Milliseconds(980));
}

TEST(DecideRetryWaitTest, BackoffThatDoesNotFitGivesUpWithTheBackoffAsPushback) {
  const RetryWaitDecision decision = Decide(std::nullopt, Milliseconds(400), Milliseconds(420));
  EXPECT_FALSE(decision.retry);
  EXPECT_EQ(decision.delay, Milliseconds(400));
}

TEST(DecideRetryWaitTest, ExactFitIsAllowedOneMicrosecondLessIsNot) {
  EXPECT_TRUE(Decide(Milliseconds(950), Milliseconds(10), Seconds(1)).retry);
  EXPECT_FALSE(
      Decide(Milliseconds(950), Milliseconds(10), Seconds(1) - absl::Microseconds(1)).retry);
}

TEST(DecideRetryWaitTest, NoAttemptStartsWithLessThanTheMinimumLeft) {
  EXPECT_FALSE(Decide(std::nullopt, absl::ZeroDuration(), Milliseconds(49)).retry);
  EXPECT_TRUE(Decide(std::nullopt, absl::ZeroDuration(), Milliseconds(50)).retry);
  EXPECT_FALSE(Decide(std::nullopt, Milliseconds(5), Milliseconds(-10)).retry);  // past
  EXPECT_FALSE(Decide(std::nullopt, Milliseconds(5), Milliseconds(100), Milliseconds(200)).retry);
}

TEST(DecideRetryWaitTest, NoDeadlineHonoursAnyFiniteRetryAfter) {
  const RetryWaitDecision decision =
      Decide(absl::Hours(1), Milliseconds(25), absl::InfiniteDuration());
  EXPECT_TRUE(decision.retry);
  EXPECT_EQ(decision.delay, absl::Hours(1));
  EXPECT_FALSE(Decide(absl::InfiniteDuration(), Milliseconds(25), absl::InfiniteDuration()).retry);
}

TEST(DecideRetryWaitTest, NegativeRetryAfterCountsAsZero) {
  // An HTTP-date already in the past.
  const RetryWaitDecision decision = Decide(Seconds(-30), Milliseconds(25), Seconds(1));
  EXPECT_TRUE(decision.retry);
  EXPECT_EQ(decision.delay, Milliseconds(25));
}

TEST(DecideRetryWaitTest, ZeroRetryAfterMeansRetryAfterTheBackoff) {
  const RetryWaitDecision decision = Decide(absl::ZeroDuration(), Milliseconds(25), Seconds(1));
  EXPECT_TRUE(decision.retry);
  EXPECT_EQ(decision.delay, Milliseconds(25));
}

}  // namespace
}  // namespace inspection::resilience
