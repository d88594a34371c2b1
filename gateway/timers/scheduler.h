#ifndef GATEWAY_TIMERS_SCHEDULER_H_
#define GATEWAY_TIMERS_SCHEDULER_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace inspection::timers {

// Runs tasks later: the gateway's timer facility (retry waits, cache waiters, token
// polls), injected so that tests drive virtual time (ManualScheduler) instead of sleeping.
//
// Contract shared by every implementation:
// - RunAfter never runs `task` on the calling thread before it returns: callers may hold
//   their own locks while scheduling.
// - Tasks run one at a time, each exactly once, unless cancelled or the scheduler is
//   destroyed first (then the task is destroyed without running).
// - A task may call RunAfter and Cancel on the same scheduler.
// - Tasks must be short and must not block: they share one thread.
// Thread-safety: all methods may be called from any thread.
class Scheduler {
 public:
  using TaskId = uint64_t;
  using Task = absl::AnyInvocable<void() &&>;

  virtual ~Scheduler() = default;

  // Runs `task` once `delay` has passed (delay <= 0: as soon as possible). Returns an id
  // for Cancel, never 0.
  virtual TaskId RunAfter(absl::Duration delay, Task task) = 0;

  // Removes a task that has not started yet; it is destroyed without running. Returns
  // false when the task has already started or run, was cancelled before, or is unknown.
  virtual bool Cancel(TaskId id) = 0;
};

// The production scheduler: one timer thread waiting on a condition variable until the
// earliest due task (std::chrono::steady_clock, so wall-clock jumps do not move timers).
// Tasks due at the same instant run in the order they were scheduled.
//
// Destruction stops the thread after the running task (if any) returns; tasks still pending
// are destroyed without running, and later RunAfter calls destroy their task at once. Do not
// destroy the scheduler from one of its own tasks.
class TimerThreadScheduler final : public Scheduler {
 public:
  TimerThreadScheduler();
  ~TimerThreadScheduler() override;
  TimerThreadScheduler(const TimerThreadScheduler&) = delete;
  TimerThreadScheduler& operator=(const TimerThreadScheduler&) = delete;

  TaskId RunAfter(absl::Duration delay, Task task) override;
  bool Cancel(TaskId id) override;

 private:
  using Clock = std::chrono::steady_clock;
  using Key = std::pair<Clock::time_point, TaskId>;  // due time, then scheduling order

  void Loop();

  // std::mutex rather than absl::Mutex: the thread waits with condition_variable::wait_until
  // on the steady clock.
  std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;                              // guarded by mu_
  TaskId next_id_ = 1;                                 // guarded by mu_
  std::map<Key, Task> queue_;                          // guarded by mu_
  std::unordered_map<TaskId, Clock::time_point> due_;  // guarded by mu_; id -> queue_ key
  std::thread thread_;
};

// A scheduler on virtual time for tests: nothing runs until the test calls AdvanceBy (or
// RunDue), which runs the due tasks on the calling thread, each with Now() equal to its due
// time. Deterministic: tasks run in due-time order, ties in scheduling order.
class ManualScheduler final : public Scheduler {
 public:
  explicit ManualScheduler(absl::Time start = absl::UnixEpoch());

  TaskId RunAfter(absl::Duration delay, Task task) override;
  bool Cancel(TaskId id) override;

  // The virtual time.
  absl::Time Now() const ABSL_LOCKS_EXCLUDED(mu_);
  // Moves virtual time forward by `delta` (>= 0), running every task due up to the new
  // time, including tasks scheduled by those tasks. Returns how many tasks ran. Tasks run
  // without the scheduler's lock held. Call from one thread at a time.
  int AdvanceBy(absl::Duration delta) ABSL_LOCKS_EXCLUDED(mu_);
  // Runs the tasks due now (AdvanceBy(0)).
  int RunDue() { return AdvanceBy(absl::ZeroDuration()); }
  // Number of tasks waiting (scheduled, not cancelled, not run).
  size_t pending() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  using Key = std::pair<absl::Time, TaskId>;

  mutable absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_);
  TaskId next_id_ ABSL_GUARDED_BY(mu_) = 1;
  std::map<Key, Task> queue_ ABSL_GUARDED_BY(mu_);
  std::unordered_map<TaskId, absl::Time> due_ ABSL_GUARDED_BY(mu_);
};

}  // namespace inspection::timers

#endif  // GATEWAY_TIMERS_SCHEDULER_H_
