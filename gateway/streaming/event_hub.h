#ifndef GATEWAY_STREAMING_EVENT_HUB_H_
#define GATEWAY_STREAMING_EVENT_HUB_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/support/slice.h>
#include <grpcpp/support/status.h>

#include "absl/synchronization/mutex.h"
#include "adapters/eventlog/event_log.h"
#include "gateway/streaming/hub_metrics.h"
#include "inspection/v1/event.pb.h"
#include "nlohmann/json.hpp"

namespace inspection::streaming {

// How much one stream may buffer for its client (streams.queue_size,
// streams.queue_max_bytes).
struct StreamQueueLimits {
  size_t max_events = 1000;
  // Bytes of the events waiting behind the write in flight (their wire size: the bytes are
  // shared with every other stream carrying them, so this bounds what this stream keeps
  // alive); an event larger than this is still queued when none is waiting, so a stream
  // that reads never stalls or ends on one big event.
  size_t max_bytes = size_t{4} << 20;
};

// Which events a subscriber wants.
struct EventFilter {
  std::set<std::string> names;  // vendor event names; empty = all
  std::string inspection_id;    // empty = any
  std::string token_uid;        // empty = any
  // The vendor account, always matched exactly ("" = the default account): a stream
  // never carries another account's events.
  std::string account;
  bool Matches(const v1::Event& event) const;
  // The same test on the stored columns, before any conversion to protobuf.
  bool Matches(const eventlog::NewEvent& event) const;
};

// An event as the hub hands it to every subscriber that wants it: converted and
// serialized once, then shared by reference, so that one more subscriber costs a
// reference and a write, not a copy and a serialization.
struct EncodedEvent {
  v1::Event event;   // for filters, the final-event test and the cursor
  grpc::Slice wire;  // event's wire bytes (ref-counted: every write shares them)
  size_t bytes = 0;  // what it is counted as against a queue's byte bound
};

// The hub's conversion: ToApiEvent, then the wire bytes.
std::shared_ptr<const EncodedEvent> EncodeEvent(v1::Event event);

// The receiving end of a subscription (a gRPC stream). Called on the hub's thread only.
class EventSink {
 public:
  virtual ~EventSink() = default;
  // Room left in the sink's bounded queue, in events; 0 also when its byte bound is
  // reached. Asked before every Deliver.
  virtual size_t Room() const = 0;
  // Queues `event` for the client (event->bytes counts against its byte bound). Returns
  // false when the sink is already closed.
  virtual bool Deliver(std::shared_ptr<const EncodedEvent> event) = 0;
  // Ends the stream with `status` (OUT_OF_RANGE for an expired cursor, RESOURCE_EXHAUSTED
  // when it fell behind, UNAVAILABLE on shutdown). The sink adds its last cursor.
  virtual void End(const grpc::Status& status) = 0;
};

// v1::Event from a stored event: names, ids, payload as a Value, and for createReport
// the typed report.
// Sets Event.source: EVENT_SOURCE_RECONCILE for the gateway's own damagesReport events
// (IsReconciledReport), EVENT_SOURCE_WEBHOOK otherwise.
v1::Event ToApiEvent(const eventlog::StoredEvent& stored);
// A stored event that is a report the gateway recovered by polling: named
// eventlog::kDamagesReportEventName with payload.source "reconcile".
bool IsReconciledReport(const std::string& event_name, const nlohmann::json& payload);
// StreamDamageResults' last event: the createReport webhook, or the report recovered by
// polling, whichever comes first.
bool EndsDamageResults(const v1::Event& event);

// Fans the event log out to every subscriber of this process. One thread tails the log
// (so replicas sharing a Redis log each see every event) and dispatches to live
// subscribers; a subscriber resuming from a cursor first catches up from the log,
// paced by the room in its queue, then joins the live dispatch with no gap and no
// duplicate (per-subscriber positions, compared with eventlog::CompareCursors). A live
// subscriber whose queue is full is ended with RESOURCE_EXHAUSTED: memory stays bounded.
//
// Catch-up never holds up live dispatch: filters are matched on the stored columns
// (an event is converted to protobuf only for a subscriber that wants it, once per
// event), each catching-up subscriber scans at most `catchup_events_per_turn` events per
// turn, and the live tail is dispatched between any two such slices. A catching-up
// subscriber whose queue stays full for `catchup_idle_timeout` (it does not read) is
// ended with RESOURCE_EXHAUSTED and its last cursor. Thread-safe.
class EventHub {
 public:
  struct Options {
    size_t read_batch = 256;                   // events read from the log at once
    std::chrono::milliseconds idle_wait{100};  // longest wait for an append per loop
    std::chrono::milliseconds retention_every{std::chrono::minutes(1)};
    // Called on the hub's thread for every event read from the log, before it is
    // dispatched (the response cache drops what the event makes stale). May be null.
    std::function<void(const eventlog::StoredEvent&)> on_event;
    // Fan-out lag and dropped subscribers; null records nothing.
    const HubMetrics* metrics = nullptr;
    // streams.catchup_events_per_turn: events one catching-up subscriber may scan
    // before the live tail is dispatched again (>= 1).
    size_t catchup_events_per_turn = 256;
    // streams.catchup_idle_timeout_ms: how long a catching-up subscriber's queue may stay
    // full before the subscriber is ended.
    std::chrono::milliseconds catchup_idle_timeout{std::chrono::seconds(30)};
    // The hub's clock (idle catch-ups, retention cadence); null: steady_clock::now.
    std::function<std::chrono::steady_clock::time_point()> clock;
    // False: Start() starts no thread, and the owner drives the hub with RunOneTurn()
    // (tests, on an injected clock, turn by turn).
    bool run_thread = true;
  };

  EventHub(eventlog::EventLog* log, Options options);
  ~EventHub();  // Stop()

  // Starts the tailer from the log's current end.
  absl::Status Start();
  // Ends every subscription with UNAVAILABLE (and its cursor) and stops the thread.
  void Stop();

  // Subscribes `sink`. `after_cursor` non-empty: catch up from the log after it;
  // empty with `from_start`: from the oldest retained event; empty otherwise: only
  // events after the hub's current position. Returns an id for Unsubscribe, or 0 when
  // the hub is stopping (nothing was subscribed; the caller ends its stream).
  uint64_t Subscribe(std::shared_ptr<EventSink> sink, EventFilter filter, std::string after_cursor,
                     bool from_start);
  void Unsubscribe(uint64_t id);
  // A sink that had no room has room again (call from its write-completion). Only a
  // catching-up subscription waits for room, so this costs nothing (no extra turn of the
  // hub) while none does: a fan-out's 10,000 write completions do not make 10,000 turns.
  void Wake();

  // One turn of the hub's loop: drop removed subscriptions, dispatch the live tail, one
  // catch-up slice per catching-up subscriber (the tail again after each), retention when
  // due. Returns how long the loop may wait for an append before the next turn (zero: go
  // on at once), or nullopt once stopping. Called by the hub's thread; with
  // Options::run_thread false, by the owner instead (one thread at a time).
  std::optional<std::chrono::milliseconds> RunOneTurn();

  // The newest event the hub has dispatched ("" before any).
  std::string TailCursor() const;
  size_t SubscriberCount() const;

 private:
  struct Subscription {
    std::shared_ptr<EventSink> sink;
    EventFilter filter;
    std::string position;  // last event considered for this subscriber
    bool live = false;
    // Catching up with a full queue since then; nullopt while it has room.
    std::optional<std::chrono::steady_clock::time_point> stalled_since;
  };

  void Run();
  // Ends every subscription with UNAVAILABLE (shutdown).
  void EndAll();
  std::chrono::steady_clock::time_point Now() const;
  void DispatchTail();
  // One slice of a subscriber's catch-up (at most catchup_events_per_turn events).
  void CatchUp(Subscription& subscription);
  bool Offer(Subscription& subscription, const std::shared_ptr<const EncodedEvent>& event);

  eventlog::EventLog* const log_;
  const Options options_;

  mutable absl::Mutex mu_;
  std::map<uint64_t, Subscription> subscriptions_ ABSL_GUARDED_BY(mu_);
  std::vector<uint64_t> removed_ ABSL_GUARDED_BY(mu_);
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  std::string tail_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<bool> wake_{false};
  // Catching-up subscriptions waiting for room in their queue, as of the last turn.
  std::atomic<size_t> waiting_for_room_{0};
  // Touched by the turn's thread only.
  std::chrono::steady_clock::time_point next_retention_{};
  // After a failed tail read, how long the loop rests before the next turn (doubling from
  // 50 ms up to 1 s; zero after a read that worked): a log that refuses at once (Redis
  // without its replicas) must not become a busy loop of reads and log lines.
  std::chrono::milliseconds read_backoff_{0};
  std::thread thread_;
};

}  // namespace inspection::streaming

#endif  // GATEWAY_STREAMING_EVENT_HUB_H_
