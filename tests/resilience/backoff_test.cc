#include "gateway/resilience/backoff.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace inspection::resilience {
namespace {

using absl::Milliseconds;

// Hands out `values` in order, then repeats the last one; counts calls.
class ScriptedRandom {
 public:
  explicit ScriptedRandom(std::vector<double> values) : values_(std::move(values)) {}
  RandomSource Source() {
    return [this] {
      const double value = values_[std::min(calls_, values_.size() - 1)];
      ++calls_;
      return value;
    };
  }
  size_t calls() const { return calls_; }

 private:
  std::vector<double> values_;
  size_t calls_ = 0;
};

BackoffPolicy MakePolicy(absl::Duration base, absl::Duration cap, int max_attempts) {
  BackoffConfig config;
  config.base = base;
  config.cap = cap;
  config.max_attempts = max_attempts;
  absl::StatusOr<BackoffPolicy> policy = BackoffPolicy::Create(config);
  EXPECT_TRUE(policy.ok()) << policy.status();
  return *policy;
}

std::vector<absl::Duration> Drain(BackoffSequence& sequence) {
  std::vector<absl::Duration> delays;
  while (std::optional<absl::Duration> delay = sequence.NextDelay()) delays.push_back(*delay);
  return delays;
}

TEST(BackoffPolicyTest, DefaultsAre25MsBaseOneSecondCapThreeAttempts) {
  const BackoffConfig config;
  EXPECT_EQ(config.base, Milliseconds(25));
  EXPECT_EQ(config.cap, absl::Seconds(1));
  EXPECT_EQ(config.max_attempts, 3);
  EXPECT_TRUE(BackoffPolicy::Create(config).ok());
}

TEST(BackoffPolicyTest, RejectsInvalidConfig) {
  const auto invalid = [](BackoffConfig config) {
    return BackoffPolicy::Create(config).status().code() == absl::StatusCode::kInvalidArgument;
  };
  BackoffConfig config;
  config.base = absl::ZeroDuration();
  EXPECT_TRUE(invalid(config));
  config = {};
  config.base = Milliseconds(-1);
  EXPECT_TRUE(invalid(config));
  config = {};
  config.cap = Milliseconds(10);  // below the 25 ms base
  EXPECT_TRUE(invalid(config));
  config = {};
  config.cap = absl::InfiniteDuration();
  EXPECT_TRUE(invalid(config));
  config = {};
  config.max_attempts = 0;
  EXPECT_TRUE(invalid(config));
  config = {};
  config.cap = config.base;  // a constant ceiling is fine
  config.max_attempts = 1;   // and so is "never retry"
  EXPECT_FALSE(invalid(config));
}

TEST(BackoffPolicyTest, CeilingDoublesFromBaseUpToCap) {
  const BackoffPolicy policy = MakePolicy(Milliseconds(25), absl::Seconds(1), 10);
  EXPECT_EQ(policy.Ceiling(0), Milliseconds(25));
  EXPECT_EQ(policy.Ceiling(1), Milliseconds(50));
  EXPECT_EQ(policy.Ceiling(2), Milliseconds(100));
  EXPECT_EQ(policy.Ceiling(5), Milliseconds(800));
  EXPECT_EQ(policy.Ceiling(6), absl::Seconds(1));
  EXPECT_EQ(policy.Ceiling(7), absl::Seconds(1));
  // No overflow of 2^retry, no saturation to an infinite duration.
  EXPECT_EQ(policy.Ceiling(1000), absl::Seconds(1));
  EXPECT_EQ(policy.Ceiling(std::numeric_limits<int>::max()), absl::Seconds(1));
  EXPECT_EQ(policy.Ceiling(-3), Milliseconds(25));
}

TEST(BackoffSequenceTest, HalfRandomGivesHalfTheCeilingCappedAt500Ms) {
  ScriptedRandom random({0.5});
  BackoffSequence sequence(MakePolicy(Milliseconds(25), absl::Seconds(1), 10), random.Source());
  const std::vector<absl::Duration> expected = {
      absl::Microseconds(12500), Milliseconds(25),  Milliseconds(50),
      Milliseconds(100),         Milliseconds(200), Milliseconds(400),
      Milliseconds(500),         Milliseconds(500), Milliseconds(500)};
  EXPECT_EQ(Drain(sequence), expected);
  EXPECT_EQ(sequence.retries(), 9);
}

TEST(BackoffSequenceTest, EachDelayScalesItsOwnCeilingByItsRandomValue) {
  // The Envoy-style assertion: "the second backoff is 24 ms".
  ScriptedRandom random({0.2, 0.48, 0.9, 0.0});
  BackoffSequence sequence(MakePolicy(Milliseconds(25), absl::Seconds(1), 5), random.Source());
  const std::vector<absl::Duration> expected = {Milliseconds(5), Milliseconds(24), Milliseconds(90),
                                                absl::ZeroDuration()};
  EXPECT_EQ(Drain(sequence), expected);
}

TEST(BackoffSequenceTest, CapThatIsNotAPowerOfTwoOfTheBaseIsHonoured) {
  ScriptedRandom random({0.5});
  BackoffSequence sequence(MakePolicy(Milliseconds(100), Milliseconds(250), 5), random.Source());
  const std::vector<absl::Duration> expected = {Milliseconds(50), Milliseconds(100),
                                                Milliseconds(125), Milliseconds(125)};
  EXPECT_EQ(Drain(sequence), expected);
}

TEST(BackoffSequenceTest, NeverExceedsTheCapWhateverTheRandomValue) {
  const BackoffPolicy policy = MakePolicy(Milliseconds(25), Milliseconds(300), 100);
  for (double random : {0.0, 0.1, 0.5, 0.999, 0.999999999, 1.0, 7.0}) {
    for (int retry = 0; retry < 40; ++retry) {
      const absl::Duration delay = policy.Delay(retry, random);
      EXPECT_GE(delay, absl::ZeroDuration()) << random << " " << retry;
      EXPECT_LE(delay, policy.Ceiling(retry)) << random << " " << retry;
      EXPECT_LE(delay, Milliseconds(300)) << random << " " << retry;
    }
  }
}

TEST(BackoffSequenceTest, AttemptLimitCountsTheFirstAttempt) {
  ScriptedRandom random({0.5});
  BackoffSequence sequence(MakePolicy(Milliseconds(25), absl::Seconds(1), 3), random.Source());
  EXPECT_EQ(sequence.NextDelay(), absl::Microseconds(12500));  // before attempt 2
  EXPECT_EQ(sequence.NextDelay(), Milliseconds(25));           // before attempt 3
  EXPECT_EQ(sequence.NextDelay(), std::nullopt);
  EXPECT_EQ(sequence.NextDelay(), std::nullopt);  // stays exhausted
  EXPECT_EQ(sequence.retries(), 2);
  EXPECT_EQ(random.calls(), 2u);  // no random draw for a refused retry
}

TEST(BackoffSequenceTest, OneAttemptMeansNoRetry) {
  ScriptedRandom random({0.5});
  BackoffSequence sequence(MakePolicy(Milliseconds(25), absl::Seconds(1), 1), random.Source());
  EXPECT_EQ(sequence.NextDelay(), std::nullopt);
  EXPECT_EQ(random.calls(), 0u);
}

TEST(BackoffPolicyTest, OutOfRangeRandomValuesAreClamped) {
  const BackoffPolicy policy = MakePolicy(Milliseconds(25), absl::Seconds(1), 3);
  EXPECT_EQ(policy.Delay(0, -0.5), absl::ZeroDuration());
  EXPECT_EQ(policy.Delay(0, std::nan("")), absl::ZeroDuration());
  EXPECT_EQ(policy.Delay(0, 1.0), Milliseconds(25));
  EXPECT_EQ(policy.Delay(0, 42.0), Milliseconds(25));
}

TEST(BackoffPolicyTest, DelaysAreRoundedToWholeMicroseconds) {
  const BackoffPolicy policy = MakePolicy(Milliseconds(25), absl::Seconds(1), 3);
  EXPECT_EQ(policy.Delay(0, 1.0 / 3.0), absl::Microseconds(8333));   // 8333.33 us
  EXPECT_EQ(policy.Delay(0, 2.0 / 3.0), absl::Microseconds(16667));  // 16666.67 us
  EXPECT_EQ(policy.Delay(1, 0.3), Milliseconds(15));                 // 0.3 is not exact in binary
}

TEST(BackoffSequenceTest, NullRandomSourceFallsBackToTheDefault) {
  BackoffSequence sequence(MakePolicy(Milliseconds(25), absl::Seconds(1), 50), nullptr);
  for (int retry = 0; retry < 49; ++retry) {
    const std::optional<absl::Duration> delay = sequence.NextDelay();
    ASSERT_TRUE(delay.has_value());
    EXPECT_LE(*delay, absl::Seconds(1));
  }
  EXPECT_EQ(sequence.NextDelay(), std::nullopt);
}

TEST(DefaultRandomSourceTest, ValuesAreInZeroToOneAndVary) {
  RandomSource random = DefaultRandomSource();
  std::set<double> seen;
  for (int i = 0; i < 10000; ++i) {
    const double value = random();
    ASSERT_GE(value, 0.0);
    ASSERT_LT(value, 1.0);
    seen.insert(value);
  }
  EXPECT_GT(seen.size(), 9990u);
}

}  // namespace
}  // namespace inspection::resilience
