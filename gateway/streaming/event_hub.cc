#include "gateway/streaming/event_hub.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "adapters/vendor/event_mapper.h"
#include "adapters/vendor/json_codec.h"
#include "gateway/logging/log.h"
#include "nlohmann/json.hpp"

namespace inspection::streaming {

bool EventFilter::Matches(const v1::Event& event) const {
  if (event.vendor_account() != account) return false;
  if (!names.empty() && names.count(event.event_name_raw()) == 0) return false;
  if (!inspection_id.empty() && event.inspection_id() != inspection_id) return false;
  if (!token_uid.empty() && event.token_id() != token_uid) return false;
  return true;
}

bool EventFilter::Matches(const eventlog::NewEvent& event) const {
  if (event.account != account) return false;
  if (!names.empty() && names.count(event.event_name) == 0) return false;
  if (!inspection_id.empty() && event.inspection_id != inspection_id) return false;
  if (!token_uid.empty() && event.token_id != token_uid) return false;
  return true;
}

namespace {

// An event converted (and serialized) for the subscribers that want it: done at most once
// per event, and only when one does.
std::shared_ptr<const EncodedEvent> Convert(const eventlog::StoredEvent& stored) {
  return EncodeEvent(ToApiEvent(stored));
}

}  // namespace

std::shared_ptr<const EncodedEvent> EncodeEvent(v1::Event event) {
  auto encoded = std::make_shared<EncodedEvent>();
  encoded->event = std::move(event);
  const std::string wire = encoded->event.SerializeAsString();
  encoded->wire = grpc::Slice(wire);
  // What the subscribers' queues hold of it: the message (for the final-event test) is the
  // hub's alone; each queue holds a reference to the wire bytes and a small header.
  encoded->bytes = wire.size();
  return encoded;
}

bool IsReconciledReport(const std::string& event_name, const nlohmann::json& payload) {
  if (event_name != eventlog::kDamagesReportEventName || !payload.is_object()) return false;
  auto source = payload.find("source");
  return source != payload.end() && *source == "reconcile";
}

bool EndsDamageResults(const v1::Event& event) {
  return event.event_name() == v1::EVENT_NAME_CREATE_REPORT ||
         event.source() == v1::EVENT_SOURCE_RECONCILE;
}

v1::Event ToApiEvent(const eventlog::StoredEvent& stored) {
  v1::Event out;
  const eventlog::NewEvent& in = stored.event;
  out.set_cursor(stored.cursor);
  out.set_event_name_raw(in.event_name);
  out.set_event_name(vendor::EventNameFromString(in.event_name));
  out.set_inspection_id(in.inspection_id);
  out.set_token_id(in.token_id);
  out.set_vehicle_id(in.vehicle_id);
  out.set_vendor_account(in.account);
  out.set_source(v1::EVENT_SOURCE_WEBHOOK);
  out.set_received_at(absl::FormatTime(
      "%Y-%m-%dT%H:%M:%E3SZ", absl::FromUnixMillis(in.received_at_ms), absl::UTCTimeZone()));
  nlohmann::json body = nlohmann::json::parse(in.payload, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) {
    // The receiver only stores JSON; keep anything else as a string rather than lose it.
    out.mutable_payload()->set_string_value(in.payload);
    return out;
  }
  *out.mutable_payload() = vendor::JsonToValue(body);
  if (IsReconciledReport(in.event_name, body)) out.set_source(v1::EVENT_SOURCE_RECONCILE);
  if (in.event_name == "createReport" && body.is_object()) {
    if (!vendor::DecodeCreateReport(body, out.mutable_create_report(), nullptr).ok()) {
      out.clear_create_report();
    }
  }
  return out;
}

EventHub::EventHub(eventlog::EventLog* log, Options options) : log_(log), options_(options) {}

EventHub::~EventHub() { Stop(); }

absl::Status EventHub::Start() {
  absl::StatusOr<std::string> last = log_->LastCursor();
  if (!last.ok()) return last.status();
  absl::MutexLock lock(&mu_);
  if (started_) return absl::OkStatus();
  tail_ = *last;
  started_ = true;
  if (options_.run_thread) thread_ = std::thread([this] { Run(); });
  return absl::OkStatus();
}

void EventHub::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (!started_ || stopping_) return;
    stopping_ = true;
  }
  if (thread_.joinable()) {
    thread_.join();  // the thread ends every stream on its way out
  } else {
    EndAll();
  }
}

uint64_t EventHub::Subscribe(std::shared_ptr<EventSink> sink, EventFilter filter,
                             std::string after_cursor, bool from_start) {
  mu_.Lock();
  const uint64_t id = next_id_++;
  Subscription subscription;
  subscription.sink = std::move(sink);
  subscription.filter = std::move(filter);
  if (!after_cursor.empty() || from_start) {
    subscription.position = std::move(after_cursor);  // caught up by the hub thread
  } else {
    subscription.position = tail_;  // "from now": the next event the hub dispatches
    subscription.live = true;
  }
  if (stopping_) {
    mu_.Unlock();
    return 0;  // the caller ends its stream: the gateway is stopping
  }
  subscriptions_.emplace(id, std::move(subscription));
  wake_.store(true);
  mu_.Unlock();
  return id;
}

void EventHub::Unsubscribe(uint64_t id) {
  absl::MutexLock lock(&mu_);
  removed_.push_back(id);
}

void EventHub::Wake() {
  // A catching-up subscription that stalls in this turn is counted at its end, and the turn
  // then waits at most 5 ms: no wake-up is lost for good.
  if (waiting_for_room_.load(std::memory_order_acquire) > 0) wake_.store(true);
}

std::string EventHub::TailCursor() const {
  absl::MutexLock lock(&mu_);
  return tail_;
}

size_t EventHub::SubscriberCount() const {
  absl::MutexLock lock(&mu_);
  return subscriptions_.size() - std::min(subscriptions_.size(), removed_.size());
}

bool EventHub::Offer(Subscription& subscription, const std::shared_ptr<const EncodedEvent>& event) {
  if (subscription.sink->Room() == 0) {
    if (options_.metrics != nullptr) {
      options_.metrics->RecordDroppedSubscriber(StreamDropReason::kSlowConsumer);
    }
    subscription.sink->End(grpc::Status(
        grpc::StatusCode::RESOURCE_EXHAUSTED,
        "the subscriber fell behind: its queue of events is full; resume from the last cursor"));
    return false;
  }
  return subscription.sink->Deliver(event);
}

void EventHub::DispatchTail() {
  for (;;) {
    std::string tail;
    std::vector<std::pair<uint64_t, Subscription*>> live;
    {
      absl::MutexLock lock(&mu_);
      tail = tail_;
      for (auto& [id, subscription] : subscriptions_) {
        if (subscription.live) live.emplace_back(id, &subscription);
      }
    }
    absl::StatusOr<std::vector<eventlog::StoredEvent>> page =
        log_->ReadAfter(tail, options_.read_batch);
    if (!page.ok()) {
      if (page.status().code() == absl::StatusCode::kOutOfRange) {
        // Retention removed events this process never dispatched: its live subscribers
        // may have missed some. End them (they resume from their cursor, or resync)
        // and continue from the log's end.
        logging::Warn("event hub fell behind the event log's retention",
                      {{"log", log_->Describe()}});
        for (auto& [id, subscription] : live) {
          if (options_.metrics != nullptr) {
            options_.metrics->RecordDroppedSubscriber(StreamDropReason::kError);
          }
          subscription->sink->End(
              grpc::Status(grpc::StatusCode::UNAVAILABLE, "events were removed before delivery"));
          subscription->live = false;
          Unsubscribe(id);
        }
        absl::StatusOr<std::string> last = log_->LastCursor();
        absl::MutexLock lock(&mu_);
        if (last.ok()) tail_ = *last;
      } else {
        read_backoff_ = std::clamp(read_backoff_ * 2, std::chrono::milliseconds(50),
                                   std::chrono::milliseconds(1000));
        logging::Warn("event log read failed",
                      {{"error", std::string(page.status().message())},
                       {"retry_in_ms", static_cast<int64_t>(read_backoff_.count())}});
      }
      return;
    }
    read_backoff_ = std::chrono::milliseconds(0);
    if (page->empty()) return;
    for (const eventlog::StoredEvent& stored : *page) {
      if (options_.on_event) options_.on_event(stored);
      std::shared_ptr<const EncodedEvent> converted;  // on the first subscriber that wants it
      for (auto& [id, subscription] : live) {
        absl::StatusOr<int> order = eventlog::CompareCursors(stored.cursor, subscription->position);
        if (order.ok() && *order <= 0) continue;  // it already has this one (caught up past it)
        subscription->position = stored.cursor;
        if (!subscription->filter.Matches(stored.event)) continue;
        if (converted == nullptr) converted = Convert(stored);
        if (!Offer(*subscription, converted)) {
          // Ended: out of the live dispatch at once (DispatchTail runs several times a
          // turn; the subscription is erased at the next turn).
          subscription->live = false;
          Unsubscribe(id);
        }
      }
      if (options_.metrics != nullptr && stored.event.received_at_ms > 0) {
        // Receipt (= append) to hand-off to every live subscriber of this replica.
        const auto now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                std::chrono::system_clock::now().time_since_epoch())
                                .count();
        options_.metrics->RecordFanoutLag(
            std::chrono::milliseconds(std::max<int64_t>(0, now_ms - stored.event.received_at_ms)));
      }
    }
    {
      absl::MutexLock lock(&mu_);
      tail_ = page->back().cursor;
    }
    if (page->size() < options_.read_batch) return;
  }
}

void EventHub::CatchUp(Subscription& subscription) {
  if (subscription.sink->Room() == 0) {
    // A subscriber that reads makes room again; one whose queue stays full is not reading
    // and only holds its queue's memory: end it, it can resume from its last cursor.
    const auto now = Now();
    if (!subscription.stalled_since.has_value()) {
      subscription.stalled_since = now;
    } else if (now - *subscription.stalled_since >= options_.catchup_idle_timeout) {
      if (options_.metrics != nullptr) {
        options_.metrics->RecordDroppedSubscriber(StreamDropReason::kIdleCatchUp);
      }
      subscription.sink->End(grpc::Status(
          grpc::StatusCode::RESOURCE_EXHAUSTED,
          absl::StrCat("the subscriber read nothing for ", options_.catchup_idle_timeout.count(),
                       " ms while catching up (streams.catchup_idle_timeout_ms); resume from the "
                       "last cursor")));
      subscription.sink.reset();
    }
    return;
  }
  subscription.stalled_since.reset();
  const size_t batch =
      std::max<size_t>(1, std::min(options_.read_batch, options_.catchup_events_per_turn));
  absl::StatusOr<std::vector<eventlog::StoredEvent>> page =
      log_->ReadAfter(subscription.position, batch);
  if (!page.ok()) {
    const bool expired = page.status().code() == absl::StatusCode::kOutOfRange;
    const bool bad_cursor = page.status().code() == absl::StatusCode::kInvalidArgument;
    const bool transient = page.status().code() == absl::StatusCode::kUnavailable ||
                           page.status().code() == absl::StatusCode::kDeadlineExceeded;
    if (!expired && !bad_cursor) {
      logging::Warn("event log read for a catching-up stream failed",
                    {{"error", std::string(page.status().message())}});
    }
    if (options_.metrics != nullptr) {
      options_.metrics->RecordDroppedSubscriber(expired ? StreamDropReason::kCursorExpired
                                                        : StreamDropReason::kError);
    }
    // The log unavailable for now (Redis failing over) is not the cursor's fault: the
    // client resumes from its last cursor, as after any UNAVAILABLE.
    subscription.sink->End(
        expired      ? grpc::Status(grpc::StatusCode::OUT_OF_RANGE,
                                    "the cursor is older than the event log's retention: resync, "
                                         "then subscribe without after_cursor")
        : bad_cursor ? grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                    absl::StrCat("cannot resume from that cursor: ",
                                                 page.status().message()))
        : transient  ? grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                    "the event log is unavailable; resume from your last cursor")
                     : grpc::Status(grpc::StatusCode::INTERNAL,
                                    "the event log refused the read; see the gateway's log"));
    subscription.live = false;
    subscription.sink.reset();
    return;
  }
  for (const eventlog::StoredEvent& stored : *page) {
    // Matched on the stored columns: a filter that wants nothing converts nothing.
    if (subscription.filter.Matches(stored.event)) {
      if (subscription.sink->Room() == 0) return;  // full: continue from `position` later
      if (!subscription.sink->Deliver(Convert(stored))) {
        subscription.sink.reset();
        return;
      }
    }
    subscription.position = stored.cursor;
  }
  if (page->size() < batch) {
    // The end of the log: from now on the tail dispatch feeds it (events after its
    // position only, so nothing twice and nothing skipped).
    subscription.live = true;
  }
}

std::chrono::steady_clock::time_point EventHub::Now() const {
  return options_.clock ? options_.clock() : std::chrono::steady_clock::now();
}

std::optional<std::chrono::milliseconds> EventHub::RunOneTurn() {
  std::vector<uint64_t> removed;
  {
    absl::MutexLock lock(&mu_);
    removed.swap(removed_);
    for (uint64_t id : removed) subscriptions_.erase(id);
    if (stopping_) return std::nullopt;
  }
  wake_.store(false);
  DispatchTail();

  std::vector<std::pair<uint64_t, Subscription*>> catching_up;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [id, subscription] : subscriptions_) {
      if (!subscription.live) catching_up.emplace_back(id, &subscription);
    }
  }
  if (options_.metrics != nullptr) options_.metrics->SetCatchingUpSubscribers(catching_up.size());
  // One slice per catching-up subscriber, with the live tail dispatched between slices:
  // a long catch-up delays live events by one slice at most.
  size_t waiting_for_room = 0;
  bool more_to_catch_up = false;
  for (auto& [id, subscription] : catching_up) {
    CatchUp(*subscription);
    if (subscription->sink == nullptr) {
      Unsubscribe(id);
    } else if (!subscription->live) {
      if (subscription->stalled_since.has_value()) {
        ++waiting_for_room;
      } else {
        more_to_catch_up = true;
      }
    }
    DispatchTail();
  }

  if (Now() >= next_retention_) {
    absl::StatusOr<int64_t> trimmed = log_->ApplyRetention(absl::Now());
    if (!trimmed.ok()) {
      logging::Warn("event log retention failed",
                    {{"error", std::string(trimmed.status().message())}});
    }
    next_retention_ = Now() + options_.retention_every;
  }
  waiting_for_room_.store(waiting_for_room, std::memory_order_release);
  if (more_to_catch_up || wake_.load()) return std::chrono::milliseconds(0);
  // Catching-up subscribers continue as soon as they have room; otherwise wait for the
  // next append (the log wakes us at once for appends in this process).
  return waiting_for_room > 0 ? std::chrono::milliseconds(5) : options_.idle_wait;
}

void EventHub::Run() {
  for (;;) {
    const std::optional<std::chrono::milliseconds> wait = RunOneTurn();
    if (!wait.has_value()) break;
    if (read_backoff_.count() > 0) {
      // Not WaitForAppend: it returns at once while entries follow the tail.
      absl::MutexLock lock(&mu_);
      mu_.AwaitWithTimeout(absl::Condition(&stopping_), absl::FromChrono(read_backoff_));
      continue;
    }
    if (wait->count() > 0) log_->WaitForAppend(TailCursor(), *wait);
  }
  EndAll();
}

void EventHub::EndAll() {
  // Shutdown: every stream ends with a status its client can resume from.
  std::map<uint64_t, Subscription> left;
  {
    absl::MutexLock lock(&mu_);
    left.swap(subscriptions_);
  }
  for (auto& [id, subscription] : left) {
    if (subscription.sink != nullptr) {
      if (options_.metrics != nullptr) {
        options_.metrics->RecordDroppedSubscriber(StreamDropReason::kShutdown);
      }
      subscription.sink->End(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                          "the gateway is shutting down; resume from the last "
                                          "cursor on another replica or after the restart"));
    }
  }
}

}  // namespace inspection::streaming
