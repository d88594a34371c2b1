#ifndef SANDBOX_WEBHOOKS_WEBHOOK_DISPATCHER_H_
#define SANDBOX_WEBHOOKS_WEBHOOK_DISPATCHER_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "adapters/http/http_transport.h"
#include "nlohmann/json.hpp"
#include "sandbox/faults/fault_injector.h"

namespace inspection::sandbox {

// One event to deliver to the configured webhook destination.
struct WebhookEvent {
  std::string event_name;  // "createReport", ...
  std::string url;         // webhookUrlV2 at the time the event was emitted
  std::string header_key;  // webhookHeaderKey; sent as `x-api-key` when non-empty
  nlohmann::json payload;
};

// One attempt, as kept in the delivery log (GET /_sandbox/webhooks/deliveries).
struct DeliveryRecord {
  uint64_t delivery_id = 0;  // one id per event; attempts share it
  int attempt = 0;           // 1-based
  std::string event_name;
  std::string url;
  // "delivered", "http_<status>", "transport_<error>", "injected_failure", "injected_drop"
  std::string outcome;
  long http_status = 0;
  std::string at;      // ISO 8601 time of the attempt
  bool final = false;  // true on the last attempt (delivered, or retries exhausted)
};

struct WebhookDispatcherOptions {
  // Delay before the first attempt of every event: the sandbox delivers results "after a
  // configurable delay", like the vendor's asynchronous damage results.
  std::chrono::milliseconds initial_delay{200};
  // Delays before attempts 2, 3, ...: the retry schedule (at-least-once until it runs out).
  std::vector<std::chrono::milliseconds> retry_schedule = {
      std::chrono::milliseconds(500), std::chrono::seconds(2), std::chrono::seconds(5),
      std::chrono::seconds(15), std::chrono::seconds(60)};
  std::chrono::milliseconds attempt_timeout{5000};
  size_t max_log_records = 10000;  // oldest records dropped first
};

// Delivers webhook events asynchronously: a timer thread schedules attempts, the HTTP
// transport sends them (POST, JSON body, `Content-Type: application/json`,
// `x-api-key: <header_key>`). A 2xx answer ends an event; anything else is retried on
// the schedule. Webhook fault rules (duplicate, reorder, delay, fail first N) are
// applied from the injector. Thread-safe; the destructor stops the timer thread and
// abandons undelivered events.
class WebhookDispatcher {
 public:
  // `transport` (required) and `faults` (may be null: no webhook faults) must outlive the
  // dispatcher. `now_iso` stamps DeliveryRecord::at; it is called on the timer thread only,
  // never after the destructor has returned.
  //
  // Faults, decided once per event at Enqueue: duplicate = a second, independent delivery
  // (its own id, same payload); reorder = held until the next enqueued event has had its
  // final attempt (delivered or abandoned), or, if no event is enqueued before its due
  // time plus the first retry delay, released then; delay = first attempt `latency`
  // later; fail_first = the first `count` attempts are logged "injected_failure" without
  // calling the receiver, then retried on the schedule; drop = one final attempt logged
  // "injected_drop", the receiver never called (a webhook lost for good).
  //
  // Destruction: no Send() starts once the destructor has begun; the timer thread is
  // joined; sends in flight are not waited for: their callbacks share the dispatcher's
  // state through a shared_ptr and do nothing once it is stopping.
  WebhookDispatcher(WebhookDispatcherOptions options, http::HttpTransport* transport,
                    FaultInjector* faults, std::function<std::string()> now_iso);
  ~WebhookDispatcher();

  // Queues `event` for delivery after options.initial_delay (plus `extra_delay`).
  // Returns the delivery id.
  uint64_t Enqueue(WebhookEvent event,
                   std::chrono::milliseconds extra_delay = std::chrono::milliseconds(0));

  std::vector<DeliveryRecord> Log() const;
  // Events not finished yet (waiting, in flight, held for reordering).
  size_t Pending() const;
  // Waits until Pending() == 0 or the deadline passes; true when drained.
  bool WaitIdle(std::chrono::milliseconds deadline) const;

 private:
  // Implementation detail of the helper that writes webhook_dispatcher.cc.
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace inspection::sandbox

#endif  // SANDBOX_WEBHOOKS_WEBHOOK_DISPATCHER_H_
