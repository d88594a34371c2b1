#include "gateway/token_watch/token_status_poller.h"

#include <algorithm>
#include <deque>
#include <map>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "google/protobuf/util/message_differencer.h"

namespace inspection::token_watch {

bool IsTransientPollError(const grpc::Status& status) {
  switch (status.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
    case grpc::StatusCode::ABORTED:
    // INTERNAL/UNKNOWN/DATA_LOSS: a malformed or truncated vendor answer, or a lost
    // callback. Usually a glitch; if it persists, polling at max_backoff costs little.
    case grpc::StatusCode::INTERNAL:
    case grpc::StatusCode::UNKNOWN:
    case grpc::StatusCode::DATA_LOSS:
    // The vendor call was cancelled on our side (e.g. the HTTP client stopping); not the
    // token's fault.
    case grpc::StatusCode::CANCELLED:
      return true;
    default:
      return false;
  }
}

absl::Duration BackoffDelay(const TokenStatusPollerOptions& options, int consecutive_errors) {
  const absl::Duration cap = std::max(options.max_backoff, options.interval);
  absl::Duration delay = options.interval;
  // Doubling stops at the cap, so a long outage cannot overflow the duration.
  for (int i = 1; i < consecutive_errors && delay < cap; ++i) delay *= 2;
  return std::min(delay, cap);
}

namespace internal {

using Response = v1::GetTokenStatusResponse;
using ResponsePtr = std::shared_ptr<const Response>;

// One watch. Serialises its callbacks without holding a lock while they run: whoever
// queues an event when nobody is delivering becomes the deliverer and drains the queue;
// others only append. This gives ordering and at-most-one-at-a-time without a thread per
// watcher, and lets a callback call Cancel (its on_end is queued behind it).
class WatcherImpl final : public TokenWatch, public std::enable_shared_from_this<WatcherImpl> {
 public:
  WatcherImpl(uint64_t id, std::string uid, std::weak_ptr<PollerCore> core,
              TokenStatusPoller::StatusCallback on_status, TokenStatusPoller::EndCallback on_end)
      : id_(id),
        uid_(std::move(uid)),
        core_(std::move(core)),
        on_status_(std::move(on_status)),
        on_end_(std::move(on_end)) {}

  void Cancel() override;
  const std::string& uid() const override { return uid_; }
  uint64_t id() const { return id_; }

  // Queues `status`, the uid's status number `version`, unless the watch has ended or was
  // already given this version or a newer one (a cached status racing with a fresh poll
  // must not go backwards); then delivers. The caller holds a reference to this watcher.
  void DeliverStatus(uint64_t version, ResponsePtr status) ABSL_LOCKS_EXCLUDED(mu_);
  // Queues on_end(status) unless the watch has ended already; then delivers.
  void End(grpc::Status status) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Event {
    ResponsePtr status;  // null for the end event
    grpc::Status end;
  };

  // Appends `event`; returns true if the caller must drain (nobody else is delivering).
  bool EnqueueLocked(Event event) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Drain() ABSL_LOCKS_EXCLUDED(mu_);

  const uint64_t id_;
  const std::string uid_;
  const std::weak_ptr<PollerCore> core_;

  absl::Mutex mu_;
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t version_ ABSL_GUARDED_BY(mu_) = 0;  // newest status version queued
  std::deque<Event> queue_ ABSL_GUARDED_BY(mu_);
  // Touched only by the current deliverer (draining_ hands them over under mu_).
  TokenStatusPoller::StatusCallback on_status_;
  TokenStatusPoller::EndCallback on_end_;
};

// The poll loop of one uid. Fields are guarded by PollerCore::mu_ (not annotated: the
// mutex lives in another object).
struct UidLoop {
  explicit UidLoop(std::string u) : uid(std::move(u)) {}

  const std::string uid;
  bool active = true;  // false once removed from PollerCore::loops_
  std::map<uint64_t, std::shared_ptr<WatcherImpl>> watchers;
  ResponsePtr last;      // last successful poll result, null until one
  uint64_t version = 0;  // incremented each time `last` changes
  bool in_flight = false;
  timers::Scheduler::TaskId timer = 0;  // the pending poll, 0 when none
  int consecutive_errors = 0;
};

class PollerCore : public std::enable_shared_from_this<PollerCore> {
 public:
  PollerCore(TokenStatusPollerOptions options, FetchStatus fetch, timers::Scheduler* scheduler)
      : options_(std::move(options)), fetch_(std::move(fetch)), scheduler_(scheduler) {}

  absl::StatusOr<std::shared_ptr<TokenWatch>> Watch(const std::string& uid,
                                                    TokenStatusPoller::StatusCallback on_status,
                                                    TokenStatusPoller::EndCallback on_end)
      ABSL_LOCKS_EXCLUDED(mu_);
  void Detach(const std::string& uid, uint64_t watcher_id) ABSL_LOCKS_EXCLUDED(mu_);
  void Shutdown() ABSL_LOCKS_EXCLUDED(mu_);
  TokenStatusPoller::Stats stats() const ABSL_LOCKS_EXCLUDED(mu_);

  void OnPollDone(const std::shared_ptr<UidLoop>& loop, PollResult result) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  using WatcherMap = std::map<uint64_t, std::shared_ptr<WatcherImpl>>;

  void Poll(const std::shared_ptr<UidLoop>& loop) ABSL_LOCKS_EXCLUDED(mu_);
  void DeliverCached(const std::shared_ptr<UidLoop>& loop,
                     const std::weak_ptr<WatcherImpl>& watcher) ABSL_LOCKS_EXCLUDED(mu_);
  void ScheduleLocked(const std::shared_ptr<UidLoop>& loop, absl::Duration delay)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Stops the loop and forgets it. Returns its watchers so that the caller releases them
  // after unlocking (their callbacks' captures may do anything when destroyed).
  WatcherMap RemoveLocked(const std::shared_ptr<UidLoop>& loop) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool IsFinal(const Response& response) const;

  const TokenStatusPollerOptions options_;
  const FetchStatus fetch_;
  timers::Scheduler* const scheduler_;

  mutable absl::Mutex mu_;
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  std::map<std::string, std::shared_ptr<UidLoop>> loops_ ABSL_GUARDED_BY(mu_);
  uint64_t next_watcher_id_ ABSL_GUARDED_BY(mu_) = 1;
  size_t watchers_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t polls_issued_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t poll_errors_ ABSL_GUARDED_BY(mu_) = 0;
};

namespace {

// Whether two poll results would stream as the same WatchTokenStatusResponse.
bool SameStatus(const Response& a, const Response& b) {
  return a.has_token() == b.has_token() && a.has_web_api_version() == b.has_web_api_version() &&
         a.web_api_version() == b.web_api_version() &&
         google::protobuf::util::MessageDifferencer::Equals(a.token(), b.token());
}

// The `done` handed to FetchStatus. If the fetch destroys it without calling it, the poll
// still completes (as an UNKNOWN error); otherwise the uid would stay "in flight" forever and
// never be polled again.
class PollCompletion {
 public:
  PollCompletion(std::shared_ptr<PollerCore> core, std::shared_ptr<UidLoop> loop)
      : core_(std::move(core)), loop_(std::move(loop)) {}
  PollCompletion(PollCompletion&& other) noexcept
      : core_(std::move(other.core_)), loop_(std::move(other.loop_)) {}
  PollCompletion& operator=(PollCompletion&&) = delete;
  ~PollCompletion() {
    if (core_ != nullptr) {
      core_->OnPollDone(loop_, grpc::Status(grpc::StatusCode::UNKNOWN,
                                            "the token status fetch dropped its callback"));
    }
  }

  void operator()(PollResult result) && {
    std::shared_ptr<PollerCore> core = std::move(core_);
    core->OnPollDone(loop_, std::move(result));
  }

 private:
  std::shared_ptr<PollerCore> core_;  // null once called (or moved from)
  std::shared_ptr<UidLoop> loop_;
};

}  // namespace

// ---------------------------------------------------------------------------
// WatcherImpl
// ---------------------------------------------------------------------------

void WatcherImpl::Cancel() {
  // The caller's handle may be released by our own on_end (e.g. a reactor finishing and
  // being deleted); keep this object alive until Drain returns.
  std::shared_ptr<WatcherImpl> self = shared_from_this();
  if (std::shared_ptr<PollerCore> core = core_.lock()) core->Detach(uid_, id_);
  End(grpc::Status(grpc::StatusCode::CANCELLED, "watch cancelled"));
}

bool WatcherImpl::EnqueueLocked(Event event) {
  queue_.push_back(std::move(event));
  if (draining_) return false;
  draining_ = true;
  return true;
}

void WatcherImpl::DeliverStatus(uint64_t version, ResponsePtr status) {
  {
    absl::MutexLock lock(&mu_);
    if (ended_ || version <= version_) return;
    version_ = version;
    if (!EnqueueLocked(Event{std::move(status), grpc::Status::OK})) return;
  }
  Drain();
}

void WatcherImpl::End(grpc::Status status) {
  {
    absl::MutexLock lock(&mu_);
    if (ended_) return;
    ended_ = true;
    if (!EnqueueLocked(Event{nullptr, std::move(status)})) return;
  }
  Drain();
}

void WatcherImpl::Drain() {
  for (;;) {
    Event event;
    {
      absl::MutexLock lock(&mu_);
      if (queue_.empty()) {
        draining_ = false;
        return;
      }
      event = std::move(queue_.front());
      queue_.pop_front();
    }
    if (event.status != nullptr) {
      on_status_(*event.status);
    } else {
      // Nothing comes after on_end: release both callbacks (and what they captured) now
      // rather than when the last handle goes.
      TokenStatusPoller::EndCallback on_end = std::move(on_end_);
      on_end_ = nullptr;
      on_status_ = nullptr;
      std::move(on_end)(std::move(event.end));
    }
  }
}

// ---------------------------------------------------------------------------
// PollerCore
// ---------------------------------------------------------------------------

absl::StatusOr<std::shared_ptr<TokenWatch>> PollerCore::Watch(
    const std::string& uid, TokenStatusPoller::StatusCallback on_status,
    TokenStatusPoller::EndCallback on_end) {
  absl::MutexLock lock(&mu_);
  if (shutdown_) return absl::UnavailableError("gateway shutting down");
  auto watcher = std::make_shared<WatcherImpl>(next_watcher_id_++, uid, weak_from_this(),
                                               std::move(on_status), std::move(on_end));
  std::shared_ptr<UidLoop>& loop = loops_[uid];
  if (loop == nullptr) {
    loop = std::make_shared<UidLoop>(uid);
    // Through the scheduler, not inline: the fetch may complete synchronously, and Watch
    // promises not to call back before it returns.
    ScheduleLocked(loop, absl::ZeroDuration());
  }
  loop->watchers.emplace(watcher->id(), watcher);
  ++watchers_;
  if (loop->last != nullptr) {
    // Known status: hand it over without an upstream call. Read at delivery time (not
    // now), so that a poll completing in between is not followed by this older status.
    scheduler_->RunAfter(absl::ZeroDuration(),
                         [core = shared_from_this(), loop, weak = std::weak_ptr(watcher)] {
                           core->DeliverCached(loop, weak);
                         });
  }
  return watcher;
}

void PollerCore::DeliverCached(const std::shared_ptr<UidLoop>& loop,
                               const std::weak_ptr<WatcherImpl>& weak) {
  ResponsePtr status;
  uint64_t version;
  {
    absl::MutexLock lock(&mu_);
    status = loop->last;
    version = loop->version;
  }
  std::shared_ptr<WatcherImpl> watcher = weak.lock();
  if (watcher != nullptr && status != nullptr) watcher->DeliverStatus(version, std::move(status));
}

void PollerCore::Detach(const std::string& uid, uint64_t watcher_id) {
  // Declared before the lock, so released after it.
  std::shared_ptr<WatcherImpl> removed;
  WatcherMap dropped;
  absl::MutexLock lock(&mu_);
  auto found = loops_.find(uid);
  if (found == loops_.end()) return;
  const std::shared_ptr<UidLoop> loop = found->second;
  auto watcher = loop->watchers.find(watcher_id);
  if (watcher == loop->watchers.end()) return;
  removed = std::move(watcher->second);
  loop->watchers.erase(watcher);
  --watchers_;
  // A poll in flight finishes first (OnPollDone removes the loop then): a new watcher
  // arriving meanwhile reuses its result instead of starting an overlapping poll.
  if (loop->watchers.empty() && !loop->in_flight) dropped = RemoveLocked(loop);
}

void PollerCore::Shutdown() {
  std::vector<std::shared_ptr<WatcherImpl>> ended;
  {
    absl::MutexLock lock(&mu_);
    if (shutdown_) return;
    shutdown_ = true;
    // Copy: RemoveLocked erases from loops_.
    const auto loops = loops_;
    for (const auto& [uid, loop] : loops) {
      for (auto& [id, watcher] : RemoveLocked(loop)) ended.push_back(std::move(watcher));
    }
  }
  for (const auto& watcher : ended) {
    watcher->End(grpc::Status(grpc::StatusCode::UNAVAILABLE, "gateway shutting down"));
  }
}

TokenStatusPoller::Stats PollerCore::stats() const {
  absl::MutexLock lock(&mu_);
  TokenStatusPoller::Stats stats;
  stats.polls_issued = polls_issued_;
  stats.poll_errors = poll_errors_;
  stats.active_uids = loops_.size();
  stats.watchers = watchers_;
  return stats;
}

void PollerCore::ScheduleLocked(const std::shared_ptr<UidLoop>& loop, absl::Duration delay) {
  loop->timer =
      scheduler_->RunAfter(delay, [core = shared_from_this(), loop] { core->Poll(loop); });
}

PollerCore::WatcherMap PollerCore::RemoveLocked(const std::shared_ptr<UidLoop>& loop) {
  loop->active = false;
  if (loop->timer != 0) {
    // If the task has already started, Poll sees `active == false` and does nothing.
    scheduler_->Cancel(loop->timer);
    loop->timer = 0;
  }
  watchers_ -= loop->watchers.size();
  auto found = loops_.find(loop->uid);
  if (found != loops_.end() && found->second == loop) loops_.erase(found);
  WatcherMap watchers;
  watchers.swap(loop->watchers);
  return watchers;
}

void PollerCore::Poll(const std::shared_ptr<UidLoop>& loop) {
  {
    absl::MutexLock lock(&mu_);
    if (!loop->active) return;
    loop->timer = 0;
    loop->in_flight = true;
    ++polls_issued_;
  }
  // Without the lock: the fetch may complete (and call OnPollDone) synchronously.
  fetch_(loop->uid, PollCompletion(shared_from_this(), loop));
}

bool PollerCore::IsFinal(const Response& response) const {
  if (response.token().expired()) return true;
  return std::find(options_.final_statuses.begin(), options_.final_statuses.end(),
                   response.token().tradein_status()) != options_.final_statuses.end();
}

void PollerCore::OnPollDone(const std::shared_ptr<UidLoop>& loop, PollResult result) {
  std::vector<std::shared_ptr<WatcherImpl>> targets;
  WatcherMap dropped;  // released after the lock
  ResponsePtr status;
  uint64_t version = 0;
  bool end = false;
  grpc::Status end_status;
  {
    absl::MutexLock lock(&mu_);
    loop->in_flight = false;
    if (!result.ok()) ++poll_errors_;
    if (!loop->active) return;  // shut down meanwhile
    if (loop->watchers.empty()) {
      // Everyone left while the poll was in flight.
      dropped = RemoveLocked(loop);
      return;
    }
    targets.reserve(loop->watchers.size());
    for (const auto& [id, watcher] : loop->watchers) targets.push_back(watcher);

    if (result.ok()) {
      loop->consecutive_errors = 0;
      if (loop->last == nullptr || !SameStatus(*loop->last, *result)) {
        loop->last = std::make_shared<const Response>(*std::move(result));
        ++loop->version;
      }
      // Sent to every watcher; those that already have this version drop it, those that
      // joined before any result get their first status.
      status = loop->last;
      version = loop->version;
      if (IsFinal(*status)) {
        end = true;
        dropped = RemoveLocked(loop);
      } else {
        ScheduleLocked(loop, options_.interval);
      }
    } else if (!IsTransientPollError(result.status())) {
      end = true;
      end_status = result.status();
      dropped = RemoveLocked(loop);
    } else {
      ++loop->consecutive_errors;
      if (options_.max_consecutive_errors > 0 &&
          loop->consecutive_errors >= options_.max_consecutive_errors) {
        end = true;
        end_status = result.status();
        dropped = RemoveLocked(loop);
      } else {
        absl::Duration delay = BackoffDelay(options_, loop->consecutive_errors);
        if (options_.backoff_jitter) delay = options_.backoff_jitter(delay);
        ScheduleLocked(loop, delay);
      }
    }
  }
  for (const auto& watcher : targets) {
    if (status != nullptr) watcher->DeliverStatus(version, status);
    if (end) watcher->End(end_status);
  }
}

}  // namespace internal

// ---------------------------------------------------------------------------
// TokenStatusPoller
// ---------------------------------------------------------------------------

namespace {

TokenStatusPollerOptions Normalize(TokenStatusPollerOptions options) {
  // A zero interval would poll in a tight loop.
  options.interval = std::max(options.interval, absl::Milliseconds(1));
  options.max_backoff = std::max(options.max_backoff, options.interval);
  return options;
}

}  // namespace

TokenStatusPoller::TokenStatusPoller(TokenStatusPollerOptions options, FetchStatus fetch,
                                     timers::Scheduler* scheduler)
    : core_(std::make_shared<internal::PollerCore>(Normalize(std::move(options)), std::move(fetch),
                                                   scheduler)) {}

TokenStatusPoller::~TokenStatusPoller() { Shutdown(); }

absl::StatusOr<std::shared_ptr<TokenWatch>> TokenStatusPoller::Watch(const std::string& uid,
                                                                     StatusCallback on_status,
                                                                     EndCallback on_end) {
  return core_->Watch(uid, std::move(on_status), std::move(on_end));
}

void TokenStatusPoller::Shutdown() { core_->Shutdown(); }

TokenStatusPoller::Stats TokenStatusPoller::stats() const { return core_->stats(); }

}  // namespace inspection::token_watch
