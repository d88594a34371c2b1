#include "gateway/timers/scheduler.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace inspection::timers {
namespace {

using ::testing::ElementsAre;

// ---------------------------------------------------------------------------
// ManualScheduler
// ---------------------------------------------------------------------------

TEST(ManualSchedulerTest, RunsDueTasksInTimeOrderWithVirtualNow) {
  const absl::Time start = absl::FromUnixSeconds(1000);
  ManualScheduler scheduler(start);
  std::vector<std::string> ran;
  scheduler.RunAfter(absl::Seconds(3), [&] {
    ran.push_back(absl::StrCat("c@", absl::ToInt64Seconds(scheduler.Now() - start)));
  });
  scheduler.RunAfter(absl::Seconds(1), [&] {
    ran.push_back(absl::StrCat("a@", absl::ToInt64Seconds(scheduler.Now() - start)));
  });
  scheduler.RunAfter(absl::Seconds(1), [&] {  // same instant: after "a", in scheduling order
    ran.push_back(absl::StrCat("b@", absl::ToInt64Seconds(scheduler.Now() - start)));
  });

  EXPECT_EQ(scheduler.RunDue(), 0);
  EXPECT_EQ(scheduler.AdvanceBy(absl::Seconds(2)), 2);
  EXPECT_THAT(ran, ElementsAre("a@1", "b@1"));
  EXPECT_EQ(scheduler.Now(), start + absl::Seconds(2));
  EXPECT_EQ(scheduler.pending(), 1u);

  EXPECT_EQ(scheduler.AdvanceBy(absl::Seconds(5)), 1);
  EXPECT_THAT(ran, ElementsAre("a@1", "b@1", "c@3"));
  EXPECT_EQ(scheduler.Now(), start + absl::Seconds(7));
}

TEST(ManualSchedulerTest, TasksScheduledByTasksRunWhenDueWithinTheSameAdvance) {
  ManualScheduler scheduler;
  std::vector<absl::Time> ran;
  // A chain: each task schedules the next one 1 s after itself.
  std::function<void()> step = [&] {
    ran.push_back(scheduler.Now());
    if (ran.size() < 10) scheduler.RunAfter(absl::Seconds(1), [&] { step(); });
  };
  scheduler.RunAfter(absl::Seconds(1), [&] { step(); });

  EXPECT_EQ(scheduler.AdvanceBy(absl::Seconds(3)), 3);
  EXPECT_THAT(
      ran, ElementsAre(absl::UnixEpoch() + absl::Seconds(1), absl::UnixEpoch() + absl::Seconds(2),
                       absl::UnixEpoch() + absl::Seconds(3)));
}

TEST(ManualSchedulerTest, CancelledTaskNeverRunsAndIsDestroyed) {
  ManualScheduler scheduler;
  auto token = std::make_shared<int>(0);
  bool ran = false;
  const Scheduler::TaskId id = scheduler.RunAfter(absl::Seconds(1), [&ran, token] { ran = true; });
  EXPECT_EQ(token.use_count(), 2);

  EXPECT_TRUE(scheduler.Cancel(id));
  EXPECT_EQ(token.use_count(), 1);  // the task and its captures are gone
  EXPECT_FALSE(scheduler.Cancel(id));
  scheduler.AdvanceBy(absl::Seconds(10));
  EXPECT_FALSE(ran);
}

TEST(ManualSchedulerTest, NothingRunsInsideRunAfter) {
  ManualScheduler scheduler;
  bool ran = false;
  scheduler.RunAfter(absl::ZeroDuration(), [&] { ran = true; });
  EXPECT_FALSE(ran);
  EXPECT_EQ(scheduler.RunDue(), 1);
  EXPECT_TRUE(ran);
}

// ---------------------------------------------------------------------------
// TimerThreadScheduler (real time; waits on conditions with deadlines, never sleeps)
// ---------------------------------------------------------------------------

// Collects labels from the timer thread; the test waits on the count with a deadline.
class Log {
 public:
  void Add(std::string label) {
    absl::MutexLock lock(&mu_);
    labels_.push_back(std::move(label));
  }
  // True if `count` labels arrived before the deadline.
  bool WaitFor(size_t count, absl::Duration deadline) {
    absl::MutexLock lock(&mu_);
    auto enough = [this, count]()
                      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return labels_.size() >= count; };
    return mu_.AwaitWithTimeout(absl::Condition(&enough), deadline);
  }
  std::vector<std::string> labels() {
    absl::MutexLock lock(&mu_);
    return labels_;
  }

 private:
  absl::Mutex mu_;
  std::vector<std::string> labels_ ABSL_GUARDED_BY(mu_);
};

TEST(TimerThreadSchedulerTest, RunsTasksInDueOrderOnItsOwnThread) {
  TimerThreadScheduler scheduler;
  Log log;
  std::thread::id task_thread;
  scheduler.RunAfter(absl::Milliseconds(60), [&] { log.Add("60"); });
  scheduler.RunAfter(absl::Milliseconds(20), [&] {
    task_thread = std::this_thread::get_id();
    log.Add("20");
  });
  scheduler.RunAfter(absl::Milliseconds(40), [&] { log.Add("40"); });
  scheduler.RunAfter(absl::ZeroDuration(), [&] { log.Add("0"); });

  ASSERT_TRUE(log.WaitFor(4, absl::Seconds(10)));
  EXPECT_THAT(log.labels(), ElementsAre("0", "20", "40", "60"));
  EXPECT_NE(task_thread, std::this_thread::get_id());
}

TEST(TimerThreadSchedulerTest, EarlierTaskScheduledLaterWakesTheThread) {
  TimerThreadScheduler scheduler;
  Log log;
  // The thread is waiting for the far task; the near one must not wait behind it.
  scheduler.RunAfter(absl::Hours(1), [&] { log.Add("far"); });
  scheduler.RunAfter(absl::Milliseconds(5), [&] { log.Add("near"); });
  ASSERT_TRUE(log.WaitFor(1, absl::Seconds(10)));
  EXPECT_THAT(log.labels(), ElementsAre("near"));
}

TEST(TimerThreadSchedulerTest, CancelledTaskDoesNotRun) {
  TimerThreadScheduler scheduler;
  Log log;
  // Hold the timer thread in a first task so that the cancel below surely comes before the
  // cancelled task is due, however slow this machine is.
  absl::Notification gate;
  scheduler.RunAfter(absl::ZeroDuration(), [&] { gate.WaitForNotification(); });
  const Scheduler::TaskId cancelled =
      scheduler.RunAfter(absl::ZeroDuration(), [&] { log.Add("cancelled"); });
  // Due after the cancelled task: tasks run in due order on one thread, so by the time
  // "sentinel" is logged the cancelled task would have run.
  scheduler.RunAfter(absl::Milliseconds(1), [&] { log.Add("sentinel"); });
  EXPECT_TRUE(scheduler.Cancel(cancelled));
  EXPECT_FALSE(scheduler.Cancel(cancelled));
  gate.Notify();

  ASSERT_TRUE(log.WaitFor(1, absl::Seconds(10)));
  EXPECT_THAT(log.labels(), ElementsAre("sentinel"));
}

TEST(TimerThreadSchedulerTest, TaskCanScheduleAnotherTask) {
  TimerThreadScheduler scheduler;
  Log log;
  scheduler.RunAfter(absl::ZeroDuration(), [&] {
    log.Add("first");
    scheduler.RunAfter(absl::Milliseconds(1), [&] { log.Add("second"); });
  });
  ASSERT_TRUE(log.WaitFor(2, absl::Seconds(10)));
  EXPECT_THAT(log.labels(), ElementsAre("first", "second"));
}

TEST(TimerThreadSchedulerTest, DestructionDropsPendingTasksWithoutRunningThem) {
  auto token = std::make_shared<int>(0);
  bool ran = false;
  {
    TimerThreadScheduler scheduler;
    scheduler.RunAfter(absl::Hours(1), [&ran, token] { ran = true; });
    EXPECT_EQ(token.use_count(), 2);
  }
  EXPECT_FALSE(ran);
  EXPECT_EQ(token.use_count(), 1);
}

}  // namespace
}  // namespace inspection::timers
