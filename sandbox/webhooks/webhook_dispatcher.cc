#include "sandbox/webhooks/webhook_dispatcher.h"

#include <algorithm>
#include <unordered_map>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace inspection::sandbox {
namespace {

using Clock = std::chrono::steady_clock;

// Position in the timer queue: due time, then a sequence number so that attempts due at
// the same instant run in the order they were scheduled (a duplicate after its original,
// events enqueued together in enqueue order).
using QueueKey = std::pair<Clock::time_point, uint64_t>;

// One delivery: an enqueued event, or the second copy of a duplicated one. Lives in
// State::deliveries from Enqueue until its final attempt.
struct Delivery {
  uint64_t id = 0;
  WebhookEvent event;
  int attempts = 0;                // attempts made so far (injected failures included)
  size_t next_retry = 0;           // index of the next delay in retry_schedule
  int injected_failures_left = 0;  // fail_first
  bool drop = false;               // drop: the first attempt is final and never sent
  // reorder: held until the delivery `release_after` reaches its final attempt; while
  // `release_after` is 0 (no later event enqueued yet) `queued` is the fallback release.
  bool held = false;
  uint64_t release_after = 0;
  // The one queue entry of this delivery, if any (none while in flight or held for a
  // trigger). Kept so that a release can replace the fallback entry instead of adding a
  // second one, which would make two attempts.
  std::optional<QueueKey> queued;
};

// Everything the timer thread and the transport callbacks share. Held through shared_ptr
// by the dispatcher and by every callback of an in-flight send, so a callback that arrives
// after the dispatcher is gone still finds it alive; it sees `stopping` and does nothing.
struct State {
  explicit State(WebhookDispatcherOptions options_in) : options(std::move(options_in)) {}

  // --- All of these run with `mu` held. ---

  // Gives `delivery` its (single) queue entry at `due`, replacing any previous one.
  void Schedule(Delivery& delivery, Clock::time_point due) {
    if (delivery.queued) queue.erase(*delivery.queued);
    const QueueKey key{due, next_seq++};
    queue.emplace(key, delivery.id);
    delivery.queued = key;
    wake_cv.notify_one();
  }

  void AppendRecord(DeliveryRecord record) {
    if (options.max_log_records == 0) return;
    while (log.size() >= options.max_log_records) log.pop_front();
    log.push_back(std::move(record));
  }

  // Records one finished attempt. On success, or when the schedule is exhausted, the
  // delivery ends (abandoned in the latter case); otherwise its next attempt is queued.
  void RecordAttempt(Delivery& delivery, int attempt, std::string outcome, long http_status,
                     std::string at, bool success) {
    const bool final = success || delivery.next_retry >= options.retry_schedule.size();
    AppendRecord(DeliveryRecord{delivery.id, attempt, delivery.event.event_name, delivery.event.url,
                                std::move(outcome), http_status, std::move(at), final});
    if (final) {
      Finish(delivery.id);  // `delivery` is gone after this
      return;
    }
    const auto delay =
        std::max(options.retry_schedule[delivery.next_retry++], std::chrono::milliseconds(0));
    Schedule(delivery, Clock::now() + delay);
  }

  // Ends a delivery, and releases the reordered deliveries that were waiting for it:
  // they go out right away, i.e. right after this one.
  void Finish(uint64_t id) {
    deliveries.erase(id);
    for (auto& [other_id, other] : deliveries) {
      if (other.held && other.release_after == id) {
        other.held = false;
        Schedule(other, Clock::now());
      }
    }
    if (deliveries.empty()) idle_cv.notify_all();
  }

  const WebhookDispatcherOptions options;

  std::mutex mu;
  std::condition_variable wake_cv;  // timer thread: queue changed, or stopping
  std::condition_variable idle_cv;  // WaitIdle: deliveries became empty

  bool stopping = false;                              // guarded by mu
  uint64_t next_id = 1;                               // guarded by mu
  uint64_t next_seq = 0;                              // guarded by mu
  std::map<QueueKey, uint64_t> queue;                 // guarded by mu; -> delivery id
  std::unordered_map<uint64_t, Delivery> deliveries;  // guarded by mu; unfinished only
  std::vector<uint64_t> awaiting_next;                // guarded by mu; held, no trigger yet
  std::deque<DeliveryRecord> log;                     // guarded by mu
};

}  // namespace

struct WebhookDispatcher::Impl {
  Impl(WebhookDispatcherOptions options, http::HttpTransport* transport_in,
       FaultInjector* faults_in, std::function<std::string()> now_iso_in)
      : transport(transport_in),
        faults(faults_in),
        now_iso(std::move(now_iso_in)),
        state(std::make_shared<State>(std::move(options))) {}

  // The timer thread's loop.
  void Run();
  // Sends one attempt through the transport. Timer thread, without state->mu.
  void Send(uint64_t id, int attempt, const WebhookEvent& event, std::string at);

  http::HttpTransport* const transport;
  FaultInjector* const faults;
  // Called on the timer thread only (never from a transport callback), so the destructor's
  // join is the last point it can run.
  const std::function<std::string()> now_iso;
  const std::shared_ptr<State> state;

  // Serialises the timer thread's Send() calls with the destructor, so that once the
  // destructor has closed it no Send() starts. A separate mutex from state->mu because
  // a transport that is shutting down runs the callback inside Send(), on this thread,
  // and the callback takes state->mu.
  absl::Mutex send_mu;
  bool send_closed ABSL_GUARDED_BY(send_mu) = false;

  std::thread timer;
};

void WebhookDispatcher::Impl::Run() {
  std::unique_lock<std::mutex> lock(state->mu);
  while (!state->stopping) {
    if (state->queue.empty()) {
      state->wake_cv.wait(lock);
      continue;
    }
    const auto first = state->queue.begin();
    if (first->first.first > Clock::now()) {
      // A copy: wait_until reads its deadline again after each wake-up, when the lock has
      // been released meanwhile and Enqueue may have erased (re-scheduled) this node.
      const Clock::time_point due = first->first.first;
      state->wake_cv.wait_until(lock, due);
      continue;
    }
    const uint64_t id = first->second;
    state->queue.erase(first);
    auto it = state->deliveries.find(id);
    if (it == state->deliveries.end()) continue;  // cannot happen: entries die with them
    Delivery& delivery = it->second;
    delivery.queued.reset();

    if (delivery.held) {
      // The reorder fallback came due. With a trigger assigned, keep waiting for it (it
      // always ends, delivered or abandoned); without one nothing followed, so stop holding.
      if (delivery.release_after != 0) continue;
      delivery.held = false;
      auto& waiting = state->awaiting_next;
      waiting.erase(std::remove(waiting.begin(), waiting.end(), id), waiting.end());
    }

    const int attempt = ++delivery.attempts;
    // An injected fault (drop: the first attempt is final and never sent; fail_first: this
    // attempt fails) is recorded without a request.
    const bool drop = delivery.drop;
    if (drop || delivery.injected_failures_left > 0) {
      if (!drop) --delivery.injected_failures_left;
      // now_iso may take the sandbox clock's lock; call it outside ours.
      lock.unlock();
      std::string at = now_iso();
      lock.lock();
      if (state->stopping) break;
      it = state->deliveries.find(id);
      if (it == state->deliveries.end()) continue;
      if (drop) {
        state->AppendRecord(DeliveryRecord{id, attempt, it->second.event.event_name,
                                           it->second.event.url, "injected_drop", 0, std::move(at),
                                           /*final=*/true});
        state->Finish(id);
      } else {
        state->RecordAttempt(it->second, attempt, "injected_failure", 0, std::move(at), false);
      }
      continue;
    }

    // Copy what the request needs: the delivery may change (or end) once we unlock.
    WebhookEvent event = delivery.event;
    lock.unlock();
    Send(id, attempt, event, now_iso());
    lock.lock();
  }
}

void WebhookDispatcher::Impl::Send(uint64_t id, int attempt, const WebhookEvent& event,
                                   std::string at) {
  http::HttpRequest request;
  request.method = "POST";
  request.url = event.url;
  request.headers.emplace_back("Content-Type", "application/json");
  if (!event.header_key.empty()) request.headers.emplace_back("x-api-key", event.header_key);
  request.body = event.payload.dump();
  request.timeout = std::max(state->options.attempt_timeout, std::chrono::milliseconds(1));

  // The callback runs on the transport's thread: it only takes state->mu for a short
  // bookkeeping step, never waits. It holds `state` itself, not `this`, so it is safe
  // whenever it runs, even after the dispatcher has been destroyed.
  auto done = [state = state, id, attempt, at = std::move(at)](http::HttpResult result) mutable {
    std::lock_guard<std::mutex> lock(state->mu);
    if (state->stopping) return;
    auto it = state->deliveries.find(id);
    if (it == state->deliveries.end()) return;
    std::string outcome;
    long status = 0;
    bool success = false;
    if (result.error == http::TransportError::kNone) {
      status = result.response.status;
      success = status >= 200 && status < 300;
      outcome = success ? "delivered" : absl::StrCat("http_", status);
    } else {
      outcome = absl::StrCat("transport_", http::TransportErrorName(result.error));
    }
    state->RecordAttempt(it->second, attempt, std::move(outcome), status, std::move(at), success);
  };

  absl::MutexLock lock(&send_mu);
  if (send_closed) return;
  transport->Send(std::move(request), std::move(done));
}

WebhookDispatcher::WebhookDispatcher(WebhookDispatcherOptions options,
                                     http::HttpTransport* transport, FaultInjector* faults,
                                     std::function<std::string()> now_iso)
    : impl_(std::make_unique<Impl>(std::move(options), transport, faults, std::move(now_iso))) {
  impl_->timer = std::thread([impl = impl_.get()] { impl->Run(); });
}

WebhookDispatcher::~WebhookDispatcher() {
  // 1. No Send() may start from now on (waits at most for one Send() in progress, which
  //    never blocks on the network).
  {
    absl::MutexLock lock(&impl_->send_mu);
    impl_->send_closed = true;
  }
  // 2. Late callbacks become no-ops, and the timer thread leaves its loop.
  {
    std::lock_guard<std::mutex> lock(impl_->state->mu);
    impl_->state->stopping = true;
    impl_->state->wake_cv.notify_all();
    impl_->state->idle_cv.notify_all();
  }
  impl_->timer.join();
  // In-flight sends are not waited for: their callbacks keep `state` alive and do nothing.
}

uint64_t WebhookDispatcher::Enqueue(WebhookEvent event, std::chrono::milliseconds extra_delay) {
  // Decided once per event, outside our lock (the injector has its own).
  std::optional<FaultDecision> fault;
  if (impl_->faults != nullptr) fault = impl_->faults->DecideWebhook(event.event_name);

  Clock::time_point due =
      Clock::now() + std::max(impl_->state->options.initial_delay, std::chrono::milliseconds(0)) +
      std::max(extra_delay, std::chrono::milliseconds(0));
  bool duplicate = false;
  bool reorder = false;
  int fail_first = 0;
  bool drop = false;
  if (fault) {
    switch (fault->rule.webhook_kind) {
      case WebhookFaultKind::kDuplicate:
        duplicate = true;
        break;
      case WebhookFaultKind::kReorder:
        reorder = true;
        break;
      case WebhookFaultKind::kDelay:
        due += std::max(fault->rule.latency, std::chrono::milliseconds(0));
        break;
      case WebhookFaultKind::kFailFirst:
        fail_first = std::max(fault->rule.count, 0);
        break;
      case WebhookFaultKind::kDrop:
        drop = true;
        break;
    }
  }

  State& state = *impl_->state;
  std::lock_guard<std::mutex> lock(state.mu);
  const uint64_t id = state.next_id++;

  // This is the "next event" of every reordered delivery still waiting for one.
  for (const uint64_t waiting_id : state.awaiting_next) {
    auto it = state.deliveries.find(waiting_id);
    if (it == state.deliveries.end()) continue;
    it->second.release_after = id;
    // Its fallback entry is dropped: from now on only this event's end releases it.
    if (it->second.queued) {
      state.queue.erase(*it->second.queued);
      it->second.queued.reset();
    }
  }
  state.awaiting_next.clear();

  Delivery& delivery = state.deliveries[id];
  delivery.id = id;
  delivery.injected_failures_left = fail_first;
  delivery.drop = drop;
  if (reorder) {
    // Held from now on; released when the next enqueued event ends, or, if none is
    // enqueued in time, one retry delay after its own due time, so it is never held forever.
    delivery.held = true;
    state.awaiting_next.push_back(id);
    const auto& schedule = impl_->state->options.retry_schedule;
    const auto fallback = schedule.empty()
                              ? std::chrono::milliseconds(0)
                              : std::max(schedule.front(), std::chrono::milliseconds(0));
    due += fallback;
  }
  if (duplicate) {
    // An independent second delivery with its own id, due at the same time and queued
    // right after the original.
    const uint64_t copy_id = state.next_id++;
    Delivery& copy = state.deliveries[copy_id];
    copy.id = copy_id;
    copy.event = event;
    delivery.event = std::move(event);
    state.Schedule(delivery, due);
    state.Schedule(state.deliveries[copy_id], due);
  } else {
    delivery.event = std::move(event);
    state.Schedule(delivery, due);
  }
  return id;
}

std::vector<DeliveryRecord> WebhookDispatcher::Log() const {
  std::lock_guard<std::mutex> lock(impl_->state->mu);
  return {impl_->state->log.begin(), impl_->state->log.end()};
}

size_t WebhookDispatcher::Pending() const {
  std::lock_guard<std::mutex> lock(impl_->state->mu);
  return impl_->state->deliveries.size();
}

bool WebhookDispatcher::WaitIdle(std::chrono::milliseconds deadline) const {
  State& state = *impl_->state;
  std::unique_lock<std::mutex> lock(state.mu);
  return state.idle_cv.wait_for(lock, deadline, [&state] { return state.deliveries.empty(); });
}

}  // namespace inspection::sandbox
