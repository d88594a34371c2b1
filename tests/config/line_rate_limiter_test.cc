// LineRateLimiter with a fake clock: a burst, a steady rate, and the count of what was
// suppressed handed to the next line written.
#include "gateway/logging/line_rate_limiter.h"

#include <gtest/gtest.h>

namespace inspection::logging {
namespace {

TEST(LineRateLimiterTest, LetsABurstThroughThenTheRateAndCountsTheRest) {
  absl::Time now = absl::FromUnixSeconds(1000);
  LineRateLimiter limiter(3, [&now] { return now; });
  uint64_t suppressed = 99;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(limiter.Admit(&suppressed));
    EXPECT_EQ(suppressed, 0u);
  }
  for (int i = 0; i < 10; ++i) EXPECT_FALSE(limiter.Admit(&suppressed));
  now += absl::Milliseconds(340);  // one line's worth at 3/s
  ASSERT_TRUE(limiter.Admit(&suppressed));
  EXPECT_EQ(suppressed, 10u);
  EXPECT_FALSE(limiter.Admit(&suppressed));
  now += absl::Seconds(100);  // refills to the burst, not beyond
  int admitted = 0;
  for (int i = 0; i < 10; ++i) admitted += limiter.Admit(&suppressed) ? 1 : 0;
  EXPECT_EQ(admitted, 3);
}

TEST(LineRateLimiterTest, ZeroSuppressesEverything) {
  LineRateLimiter limiter(0);
  uint64_t suppressed = 0;
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(limiter.Admit(&suppressed));
}

TEST(LineRateLimiterTest, AClockGoingBackDoesNotMintLines) {
  absl::Time now = absl::FromUnixSeconds(1000);
  LineRateLimiter limiter(1, [&now] { return now; });
  uint64_t suppressed = 0;
  ASSERT_TRUE(limiter.Admit(&suppressed));
  now -= absl::Seconds(30);
  EXPECT_FALSE(limiter.Admit(&suppressed));
}

}  // namespace
}  // namespace inspection::logging
