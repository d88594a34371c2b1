#include "gateway/resilience/circuit_breaker.h"

#include <atomic>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace inspection::resilience {
namespace {

using absl::Milliseconds;
using absl::Seconds;
using State = CircuitState;
using Transition = std::pair<State, State>;

constexpr State kClosed = State::kClosed;
constexpr State kOpen = State::kOpen;
constexpr State kHalfOpen = State::kHalfOpen;

class CircuitBreakerTest : public ::testing::Test {
 protected:
  // Builds the breaker under test on a virtual clock, recording every transition.
  CircuitBreaker& Make(const CircuitBreakerConfig& config = {}) {
    absl::StatusOr<std::unique_ptr<CircuitBreaker>> breaker = CircuitBreaker::Create(
        config, [this] { return now_; },
        [this](State from, State to) { transitions_.emplace_back(from, to); });
    EXPECT_TRUE(breaker.ok()) << breaker.status();
    breaker_ = std::move(*breaker);
    return *breaker_;
  }

  void Advance(absl::Duration d) { now_ += d; }

  // One call through the breaker; false when it failed fast.
  bool Call(bool success) {
    const CircuitBreaker::Permit permit = breaker_->Allow();
    if (!permit) return false;
    breaker_->Record(permit, success);
    return true;
  }
  void Calls(int n, bool success) {
    for (int i = 0; i < n; ++i) ASSERT_TRUE(Call(success)) << "call " << i << " refused";
  }
  // n calls alternating failure, success, failure...: never two failures in a row.
  void AlternatingCalls(int n) {
    for (int i = 0; i < n; ++i) ASSERT_TRUE(Call(i % 2 == 1)) << "call " << i << " refused";
  }

  void Open() {
    Calls(5, false);
    ASSERT_EQ(breaker_->state(), kOpen);
  }
  void OpenThenHalfOpen() {
    Open();
    Advance(breaker_->RetryAfter());
    ASSERT_EQ(breaker_->state(), kHalfOpen);
  }

  // Whole seconds since the epoch: bucket-aligned.
  absl::Time now_ = absl::FromUnixSeconds(1'700'000'000);
  std::vector<Transition> transitions_;
  std::unique_ptr<CircuitBreaker> breaker_;
};

TEST_F(CircuitBreakerTest, DefaultConfig) {
  const CircuitBreakerConfig config;
  EXPECT_EQ(config.consecutive_failures, 5);
  EXPECT_EQ(config.failure_ratio, 0.5);
  EXPECT_EQ(config.minimum_requests, 20);
  EXPECT_EQ(config.window_buckets * config.bucket_width, Seconds(10));
  EXPECT_EQ(config.open_duration, Seconds(5));
  EXPECT_EQ(config.max_open_duration, Seconds(60));
  EXPECT_EQ(config.half_open_max_probes, 1);
  EXPECT_EQ(config.success_threshold, 1);
}

TEST_F(CircuitBreakerTest, RejectsInvalidConfig) {
  std::vector<CircuitBreakerConfig> invalid(12);
  invalid[0].consecutive_failures = -1;
  invalid[1].failure_ratio = 0;
  invalid[2].failure_ratio = 1.5;
  invalid[3].minimum_requests = 0;
  invalid[4].window_buckets = 0;
  invalid[5].bucket_width = absl::ZeroDuration();
  invalid[6].open_duration = absl::ZeroDuration();
  invalid[7].max_open_duration = Seconds(1);  // below open_duration
  invalid[8].half_open_max_probes = 0;
  invalid[9].success_threshold = 0;
  invalid[10].bucket_width = absl::InfiniteDuration();
  invalid[11].max_open_duration = absl::InfiniteDuration();
  for (size_t i = 0; i < invalid.size(); ++i) {
    EXPECT_EQ(CircuitBreaker::Create(invalid[i], nullptr).status().code(),
              absl::StatusCode::kInvalidArgument)
        << "config " << i;
  }
  CircuitBreakerConfig no_consecutive_rule;
  no_consecutive_rule.consecutive_failures = 0;
  EXPECT_TRUE(CircuitBreaker::Create(no_consecutive_rule, nullptr).ok());
}

TEST_F(CircuitBreakerTest, StartsClosedAndAllows) {
  CircuitBreaker& breaker = Make();
  EXPECT_EQ(breaker.state(), kClosed);
  EXPECT_TRUE(breaker.Allow());
  EXPECT_EQ(breaker.RetryAfter(), absl::ZeroDuration());
  EXPECT_TRUE(transitions_.empty());
}

TEST_F(CircuitBreakerTest, ConsecutiveFailuresOpenIt) {
  CircuitBreaker& breaker = Make();
  Calls(4, false);
  EXPECT_EQ(breaker.state(), kClosed);
  Calls(1, false);
  EXPECT_EQ(breaker.state(), kOpen);
  EXPECT_EQ(transitions_, (std::vector<Transition>{{kClosed, kOpen}}));
  EXPECT_EQ(breaker.Stats().opened, 1);
}

TEST_F(CircuitBreakerTest, ASuccessResetsTheConsecutiveCount) {
  CircuitBreaker& breaker = Make();
  Calls(4, false);
  Calls(1, true);
  Calls(4, false);
  EXPECT_EQ(breaker.state(), kClosed);
  Calls(1, false);
  EXPECT_EQ(breaker.state(), kOpen);
}

TEST_F(CircuitBreakerTest, FailureRatioOverTheWindowOpensIt) {
  CircuitBreaker& breaker = Make();
  AlternatingCalls(19);  // 10 failures of 19: ratio above 0.5, but below 20 requests
  EXPECT_EQ(breaker.state(), kClosed);
  Calls(1, true);  // 10 of 20 = 0.5
  EXPECT_EQ(breaker.state(), kOpen);
  EXPECT_EQ(transitions_, (std::vector<Transition>{{kClosed, kOpen}}));
}

TEST_F(CircuitBreakerTest, HighFailureRatioBelowTheMinimumRequestCountDoesNotOpen) {
  CircuitBreakerConfig config;
  config.consecutive_failures = 0;  // only the ratio rule
  CircuitBreaker& breaker = Make(config);
  Calls(19, false);  // 100% failures, 19 requests
  EXPECT_EQ(breaker.state(), kClosed);
  Calls(1, false);
  EXPECT_EQ(breaker.state(), kOpen);
}

TEST_F(CircuitBreakerTest, RatioBelowTheThresholdDoesNotOpen) {
  CircuitBreaker& breaker = Make();
  AlternatingCalls(18);  // 9 failures, 9 successes
  Calls(2, true);        // 9 of 20 = 0.45
  EXPECT_EQ(breaker.state(), kClosed);
  AlternatingCalls(20);  // 19 of 40 = 0.475
  EXPECT_EQ(breaker.state(), kClosed);
}

TEST_F(CircuitBreakerTest, OldestBucketStillCountsNineSecondsLater) {
  CircuitBreaker& breaker = Make();
  AlternatingCalls(18);  // 9 of 18 at t0
  Advance(Seconds(9) + Milliseconds(999));
  AlternatingCalls(2);  // 10 of 20 across buckets 0 and 9
  EXPECT_EQ(breaker.state(), kOpen);
}

TEST_F(CircuitBreakerTest, BucketsExpireWithTime) {
  CircuitBreaker& breaker = Make();
  AlternatingCalls(18);  // 9 of 18 at t0
  Advance(Seconds(10));  // bucket 0 has left the 10-bucket window
  AlternatingCalls(2);
  EXPECT_EQ(breaker.state(), kClosed);
  AlternatingCalls(17);  // 19 requests in the window, 10 failures
  EXPECT_EQ(breaker.state(), kClosed);
  Calls(1, true);  // 20 requests, 10 failures
  EXPECT_EQ(breaker.state(), kOpen);
}

TEST_F(CircuitBreakerTest, BucketsExpireOneByOne) {
  CircuitBreaker& breaker = Make();
  Calls(1, true);  // t0: a success that will expire
  Advance(Seconds(1));
  AlternatingCalls(18);  // t1: 9 of 18, window = 19 requests
  Advance(Seconds(9));   // t10: t0's bucket expired, t1's still counts
  EXPECT_EQ(breaker.state(), kClosed);
  Calls(1, false);  // 10 failures of 19: above the ratio, below the minimum
  EXPECT_EQ(breaker.state(), kClosed);
  Calls(1, true);  // 10 of 20
  EXPECT_EQ(breaker.state(), kOpen);
}

TEST_F(CircuitBreakerTest, OpenFailsFastAndReportsTheRemainingOpenTime) {
  CircuitBreaker& breaker = Make();
  Open();
  EXPECT_FALSE(breaker.Allow());
  EXPECT_EQ(breaker.RetryAfter(), Seconds(5));
  Advance(Seconds(2));
  EXPECT_FALSE(breaker.Allow());
  EXPECT_EQ(breaker.RetryAfter(), Seconds(3));
  Advance(Seconds(2) + Milliseconds(999));
  EXPECT_FALSE(breaker.Allow());
  EXPECT_EQ(breaker.RetryAfter(), Milliseconds(1));
  EXPECT_EQ(breaker.state(), kOpen);
  EXPECT_EQ(breaker.Stats().rejected, 3);
}

TEST_F(CircuitBreakerTest, HalfOpensWhenTheOpenTimeHasElapsed) {
  CircuitBreaker& breaker = Make();
  Open();
  Advance(Seconds(5));
  EXPECT_EQ(breaker.state(), kHalfOpen);
  EXPECT_EQ(breaker.RetryAfter(), absl::ZeroDuration());
  EXPECT_EQ(transitions_, (std::vector<Transition>{{kClosed, kOpen}, {kOpen, kHalfOpen}}));
  EXPECT_EQ(breaker.Stats().half_opened, 1);
}

TEST_F(CircuitBreakerTest, HalfOpenAllowsExactlyOneProbeByDefault) {
  CircuitBreaker& breaker = Make();
  OpenThenHalfOpen();
  const CircuitBreaker::Permit probe = breaker.Allow();
  EXPECT_TRUE(probe);
  EXPECT_FALSE(breaker.Allow());
  EXPECT_FALSE(breaker.Allow());
  EXPECT_EQ(breaker.state(), kHalfOpen);
  EXPECT_EQ(breaker.Stats().rejected, 2);
}

TEST_F(CircuitBreakerTest, HalfOpenAllowsExactlyTheConfiguredProbeLimit) {
  CircuitBreakerConfig config;
  config.half_open_max_probes = 3;
  config.success_threshold = 3;
  CircuitBreaker& breaker = Make(config);
  OpenThenHalfOpen();
  std::vector<CircuitBreaker::Permit> probes;
  for (int i = 0; i < 3; ++i) {
    probes.push_back(breaker.Allow());
    EXPECT_TRUE(probes.back()) << "probe " << i;
  }
  EXPECT_FALSE(breaker.Allow());
  breaker.Record(probes[0], true);  // one slot frees up, 1 of 3 successes
  EXPECT_EQ(breaker.state(), kHalfOpen);
  probes.push_back(breaker.Allow());
  EXPECT_TRUE(probes.back());
  EXPECT_FALSE(breaker.Allow());
}

TEST_F(CircuitBreakerTest, ReleaseFreesAProbeSlotWithoutCountingAnything) {
  CircuitBreaker& breaker = Make();
  OpenThenHalfOpen();
  const CircuitBreaker::Permit cancelled = breaker.Allow();
  ASSERT_TRUE(cancelled);
  EXPECT_FALSE(breaker.Allow());
  breaker.Release(cancelled);
  EXPECT_EQ(breaker.state(), kHalfOpen);
  const CircuitBreaker::Permit probe = breaker.Allow();
  ASSERT_TRUE(probe);
  breaker.Record(probe, true);
  EXPECT_EQ(breaker.state(), kClosed);
}

TEST_F(CircuitBreakerTest, ProbeSuccessClosesIt) {
  CircuitBreaker& breaker = Make();
  OpenThenHalfOpen();
  EXPECT_TRUE(Call(true));
  EXPECT_EQ(breaker.state(), kClosed);
  EXPECT_TRUE(breaker.Allow());
  EXPECT_EQ(breaker.Stats().closed, 1);
}

TEST_F(CircuitBreakerTest, SuccessThresholdNeedsThatManyConsecutiveProbeSuccesses) {
  CircuitBreakerConfig config;
  config.success_threshold = 2;
  CircuitBreaker& breaker = Make(config);
  OpenThenHalfOpen();
  EXPECT_TRUE(Call(true));
  EXPECT_EQ(breaker.state(), kHalfOpen);
  EXPECT_TRUE(Call(true));
  EXPECT_EQ(breaker.state(), kClosed);
}

TEST_F(CircuitBreakerTest, ProbeFailureReopensIt) {
  CircuitBreakerConfig config;
  config.success_threshold = 2;
  CircuitBreaker& breaker = Make(config);
  OpenThenHalfOpen();
  EXPECT_TRUE(Call(true));
  EXPECT_TRUE(Call(false));  // the earlier success does not save it
  EXPECT_EQ(breaker.state(), kOpen);
  EXPECT_FALSE(breaker.Allow());
  EXPECT_EQ(breaker.Stats().opened, 2);
}

TEST_F(CircuitBreakerTest, ReopeningDoublesTheOpenTimeUpToTheMaximumAndClosingResetsIt) {
  CircuitBreaker& breaker = Make();
  Open();
  std::vector<absl::Duration> open_times = {breaker.RetryAfter()};
  for (int i = 0; i < 6; ++i) {
    Advance(breaker.RetryAfter());
    ASSERT_EQ(breaker.state(), kHalfOpen);
    ASSERT_TRUE(Call(false));
    open_times.push_back(breaker.RetryAfter());
  }
  EXPECT_EQ(open_times,
            (std::vector<absl::Duration>{Seconds(5), Seconds(10), Seconds(20), Seconds(40),
                                         Seconds(60), Seconds(60), Seconds(60)}));
  Advance(Seconds(60));
  ASSERT_TRUE(Call(true));
  ASSERT_EQ(breaker.state(), kClosed);
  Open();
  EXPECT_EQ(breaker.RetryAfter(), Seconds(5));
}

TEST_F(CircuitBreakerTest, ListenerSeesEveryTransitionInOrder) {
  CircuitBreaker& breaker = Make();
  Open();
  Advance(Seconds(5));
  ASSERT_TRUE(Call(false));  // half-open probe fails
  Advance(Seconds(10));
  ASSERT_TRUE(Call(true));  // half-open probe succeeds
  Open();
  EXPECT_EQ(transitions_, (std::vector<Transition>{{kClosed, kOpen},
                                                   {kOpen, kHalfOpen},
                                                   {kHalfOpen, kOpen},
                                                   {kOpen, kHalfOpen},
                                                   {kHalfOpen, kClosed},
                                                   {kClosed, kOpen}}));
  const CircuitBreakerStats stats = breaker.Stats();
  EXPECT_EQ(stats.opened, 3);
  EXPECT_EQ(stats.half_opened, 2);
  EXPECT_EQ(stats.closed, 1);
}

TEST_F(CircuitBreakerTest, ClosingStartsFromCleanCounts) {
  CircuitBreaker& breaker = Make();
  Calls(4, false);  // these belong to the period before the first open
  Calls(1, false);
  Advance(Seconds(5));
  ASSERT_TRUE(Call(true));
  ASSERT_EQ(breaker.state(), kClosed);
  Calls(4, false);  // 4 consecutive, not 9; ratio window empty before them
  EXPECT_EQ(breaker.state(), kClosed);
}

TEST_F(CircuitBreakerTest, OutcomesOfCallsAdmittedBeforeATransitionAreIgnored) {
  CircuitBreaker& breaker = Make();
  const CircuitBreaker::Permit slow_success = breaker.Allow();
  const CircuitBreaker::Permit slow_failure = breaker.Allow();
  Open();
  breaker.Record(slow_failure, false);  // lands while open: no effect on the open time
  EXPECT_EQ(breaker.RetryAfter(), Seconds(5));
  Advance(Seconds(5));
  breaker.Record(slow_success, true);  // lands while half-open: not a probe result
  EXPECT_EQ(breaker.state(), kHalfOpen);
  EXPECT_TRUE(breaker.Allow());  // and it did not use up the probe slot either
}

TEST_F(CircuitBreakerTest, AFailureFromAnEarlierClosedPeriodIsIgnored) {
  CircuitBreaker& breaker = Make();
  const CircuitBreaker::Permit very_slow = breaker.Allow();  // admitted before the outage
  OpenThenHalfOpen();
  ASSERT_TRUE(Call(true));
  ASSERT_EQ(breaker.state(), kClosed);
  Calls(4, false);
  breaker.Record(very_slow, false);  // would be the 5th consecutive failure
  EXPECT_EQ(breaker.state(), kClosed);
}

TEST_F(CircuitBreakerTest, AProbeFromAnEarlierHalfOpenPeriodIsIgnored) {
  CircuitBreakerConfig config;
  config.half_open_max_probes = 2;
  CircuitBreaker& breaker = Make(config);
  OpenThenHalfOpen();
  const CircuitBreaker::Permit failing_probe = breaker.Allow();
  const CircuitBreaker::Permit slow_probe = breaker.Allow();
  ASSERT_TRUE(failing_probe && slow_probe);
  breaker.Record(failing_probe, false);
  ASSERT_EQ(breaker.state(), kOpen);
  Advance(breaker.RetryAfter());
  ASSERT_EQ(breaker.state(), kHalfOpen);
  breaker.Record(slow_probe, true);  // a probe of the previous half-open period
  EXPECT_EQ(breaker.state(), kHalfOpen);
  EXPECT_TRUE(breaker.Allow());  // both of this period's probe slots are still free
  EXPECT_TRUE(breaker.Allow());
  EXPECT_FALSE(breaker.Allow());
}

TEST_F(CircuitBreakerTest, ReleasingAProbeFromAnEarlierHalfOpenPeriodFreesNothing) {
  CircuitBreakerConfig config;
  config.half_open_max_probes = 2;
  CircuitBreaker& breaker = Make(config);
  OpenThenHalfOpen();
  const CircuitBreaker::Permit failing_probe = breaker.Allow();
  const CircuitBreaker::Permit cancelled_probe = breaker.Allow();
  breaker.Record(failing_probe, false);
  Advance(breaker.RetryAfter());
  ASSERT_EQ(breaker.state(), kHalfOpen);
  EXPECT_TRUE(breaker.Allow());
  breaker.Release(cancelled_probe);  // must not free this period's slot
  EXPECT_TRUE(breaker.Allow());
  EXPECT_FALSE(breaker.Allow());
}

TEST_F(CircuitBreakerTest, RefusedOrDefaultPermitsRecordNothing) {
  CircuitBreaker& breaker = Make();
  for (int i = 0; i < 10; ++i) breaker.Record(CircuitBreaker::Permit(), false);
  EXPECT_EQ(breaker.state(), kClosed);
  Open();
  const CircuitBreaker::Permit refused = breaker.Allow();
  ASSERT_FALSE(refused);
  Advance(Seconds(5));
  breaker.Record(refused, true);
  EXPECT_EQ(breaker.state(), kHalfOpen);
}

TEST_F(CircuitBreakerTest, ListenerMayCallBackIntoTheBreaker) {
  std::vector<State> seen;
  CircuitBreaker* self = nullptr;
  absl::StatusOr<std::unique_ptr<CircuitBreaker>> breaker = CircuitBreaker::Create(
      CircuitBreakerConfig(), [this] { return now_; },
      [&](State, State) { seen.push_back(self->state()); });
  ASSERT_TRUE(breaker.ok());
  self = breaker->get();
  for (int i = 0; i < 5; ++i) self->Record(self->Allow(), false);
  EXPECT_EQ(seen, (std::vector<State>{kOpen}));
}

TEST(CircuitBreakerListenerTest, OneThreadDeliversWhileAnotherOnlyQueues) {
  // Thread A opens the breaker and is held inside the listener; meanwhile the main thread
  // causes open -> half-open. That transition must wait for A to deliver it after the
  // first, never reach the listener concurrently or ahead of it.
  absl::Mutex mu;
  absl::Time now = absl::FromUnixSeconds(1'700'000'000);
  std::vector<Transition> seen;  // guarded by mu
  absl::Notification in_listener;
  absl::Notification release_listener;
  absl::StatusOr<std::unique_ptr<CircuitBreaker>> created = CircuitBreaker::Create(
      CircuitBreakerConfig(),
      [&] {
        absl::MutexLock lock(&mu);
        return now;
      },
      [&](State from, State to) {
        {
          absl::MutexLock lock(&mu);
          seen.emplace_back(from, to);
        }
        if (to == kOpen) {
          in_listener.Notify();
          release_listener.WaitForNotification();
        }
      });
  ASSERT_TRUE(created.ok());
  CircuitBreaker& breaker = **created;

  std::thread opener([&] {
    for (int i = 0; i < 5; ++i) breaker.Record(breaker.Allow(), false);
  });
  in_listener.WaitForNotification();
  {
    absl::MutexLock lock(&mu);
    now += absl::Seconds(5);
  }
  EXPECT_EQ(breaker.state(), kHalfOpen);
  {
    absl::MutexLock lock(&mu);
    EXPECT_EQ(seen, (std::vector<Transition>{{kClosed, kOpen}}));
  }
  release_listener.Notify();
  opener.join();
  absl::MutexLock lock(&mu);
  EXPECT_EQ(seen, (std::vector<Transition>{{kClosed, kOpen}, {kOpen, kHalfOpen}}));
}

TEST(CircuitStateNameTest, Labels) {
  EXPECT_EQ(CircuitStateName(kClosed), "closed");
  EXPECT_EQ(CircuitStateName(kOpen), "open");
  EXPECT_EQ(CircuitStateName(kHalfOpen), "half_open");
}

TEST(CircuitBreakerConcurrencyTest, ListenerSeesAConsistentChainUnderContention) {
  // Each clock read moves time 1 ms forward, so that with a 2 ms open time the threads
  // drive the breaker round its states many times.
  std::atomic<int64_t> ticks{0};
  absl::Mutex mu;
  std::vector<Transition> transitions;
  CircuitBreakerConfig config;
  config.consecutive_failures = 2;
  config.open_duration = Milliseconds(2);
  config.max_open_duration = Milliseconds(4);
  absl::StatusOr<std::unique_ptr<CircuitBreaker>> created = CircuitBreaker::Create(
      config, [&] { return absl::UnixEpoch() + Milliseconds(ticks++); },
      [&](State from, State to) {
        absl::MutexLock lock(&mu);
        transitions.emplace_back(from, to);
      });
  ASSERT_TRUE(created.ok());
  CircuitBreaker& breaker = **created;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&breaker, t] {
      for (int i = 0; i < 5000; ++i) {
        const CircuitBreaker::Permit permit = breaker.Allow();
        if (permit) breaker.Record(permit, (i + t) % 3 == 0);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();

  const CircuitBreakerStats stats = breaker.Stats();
  absl::MutexLock lock(&mu);
  ASSERT_GT(transitions.size(), 10u);
  EXPECT_EQ(static_cast<int64_t>(transitions.size()),
            stats.opened + stats.half_opened + stats.closed);
  State state = kClosed;
  for (size_t i = 0; i < transitions.size(); ++i) {
    ASSERT_EQ(transitions[i].first, state) << "transition " << i;
    state = transitions[i].second;
  }
}

}  // namespace
}  // namespace inspection::resilience
