#include "gateway/timers/scheduler.h"

#include <algorithm>

namespace inspection::timers {

namespace {

// absl::InfiniteDuration() would overflow the steady clock: cap far delays at ~100 years,
// which is "never" for a gateway process.
std::chrono::steady_clock::duration ToSteady(absl::Duration delay) {
  constexpr absl::Duration kFar = absl::Hours(24 * 365 * 100);
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      absl::ToChronoNanoseconds(std::clamp(delay, absl::ZeroDuration(), kFar)));
}

}  // namespace

// ---------------------------------------------------------------------------
// TimerThreadScheduler
// ---------------------------------------------------------------------------

TimerThreadScheduler::TimerThreadScheduler() : thread_([this] { Loop(); }) {}

TimerThreadScheduler::~TimerThreadScheduler() {
  std::map<Key, Task> leftover;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
  {
    std::lock_guard<std::mutex> lock(mu_);
    leftover.swap(queue_);
    due_.clear();
  }
  // `leftover` is destroyed here, outside the lock: a task's captures may schedule or cancel
  // from their destructors.
}

Scheduler::TaskId TimerThreadScheduler::RunAfter(absl::Duration delay, Task task) {
  const Clock::time_point when = Clock::now() + ToSteady(delay);
  TaskId id;
  bool earliest;
  {
    std::lock_guard<std::mutex> lock(mu_);
    id = next_id_++;
    if (stopping_) {
      // Destroy the task outside the lock (end of function), as the contract says.
      earliest = false;
    } else {
      const Key key{when, id};
      queue_.emplace(key, std::move(task));
      due_.emplace(id, when);
      earliest = queue_.begin()->first == key;
    }
  }
  // Only a new earliest deadline changes what the thread waits for.
  if (earliest) wake_.notify_one();
  return id;
}

bool TimerThreadScheduler::Cancel(TaskId id) {
  Task removed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = due_.find(id);
    if (it == due_.end()) return false;
    auto node = queue_.extract(Key{it->second, id});
    due_.erase(it);
    removed = std::move(node.mapped());
  }
  return true;  // `removed` is destroyed outside the lock
}

void TimerThreadScheduler::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    if (queue_.empty()) {
      wake_.wait(lock);
      continue;
    }
    const Clock::time_point due = queue_.begin()->first.first;
    if (due > Clock::now()) {
      // Re-checks everything on wake-up: a new earlier task, a cancel, stop, or spurious.
      wake_.wait_until(lock, due);
      continue;
    }
    auto node = queue_.extract(queue_.begin());
    due_.erase(node.key().second);
    lock.unlock();
    {
      Task task = std::move(node.mapped());
      std::move(task)();
    }  // the task and its captures are destroyed before the lock is taken again
    lock.lock();
  }
}

// ---------------------------------------------------------------------------
// ManualScheduler
// ---------------------------------------------------------------------------

ManualScheduler::ManualScheduler(absl::Time start) : now_(start) {}

Scheduler::TaskId ManualScheduler::RunAfter(absl::Duration delay, Task task) {
  absl::MutexLock lock(&mu_);
  const TaskId id = next_id_++;
  const absl::Time when = now_ + std::max(delay, absl::ZeroDuration());
  queue_.emplace(Key{when, id}, std::move(task));
  due_.emplace(id, when);
  return id;
}

bool ManualScheduler::Cancel(TaskId id) {
  Task removed;
  {
    absl::MutexLock lock(&mu_);
    auto it = due_.find(id);
    if (it == due_.end()) return false;
    auto node = queue_.extract(Key{it->second, id});
    due_.erase(it);
    removed = std::move(node.mapped());
  }
  return true;
}

absl::Time ManualScheduler::Now() const {
  absl::MutexLock lock(&mu_);
  return now_;
}

size_t ManualScheduler::pending() const {
  absl::MutexLock lock(&mu_);
  return queue_.size();
}

int ManualScheduler::AdvanceBy(absl::Duration delta) {
  int ran = 0;
  absl::Time target;
  {
    absl::MutexLock lock(&mu_);
    target = now_ + std::max(delta, absl::ZeroDuration());
  }
  for (;;) {
    Task task;
    {
      absl::MutexLock lock(&mu_);
      if (queue_.empty() || queue_.begin()->first.first > target) {
        now_ = target;
        return ran;
      }
      auto node = queue_.extract(queue_.begin());
      due_.erase(node.key().second);
      now_ = std::max(now_, node.key().first);
      task = std::move(node.mapped());
    }
    std::move(task)();
    ++ran;
  }
}

}  // namespace inspection::timers
