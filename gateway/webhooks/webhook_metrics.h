#ifndef GATEWAY_WEBHOOKS_WEBHOOK_METRICS_H_
#define GATEWAY_WEBHOOKS_WEBHOOK_METRICS_H_

#include <array>
#include <cstddef>
#include <string_view>

#include <prometheus/counter.h>
#include <prometheus/gauge.h>

#include "adapters/http/http_server.h"
#include "gateway/metrics/metrics_scope.h"

namespace inspection::webhooks {

// `outcome` of one webhook delivery (one HTTP request to the webhook endpoint).
enum class WebhookOutcome {
  kAccepted,          // stored, 2xx
  kDuplicate,         // already stored (same content hash), 2xx
  kUnauthorized,      // x-api-key missing or wrong
  kTooLarge,          // body over the limit
  kBadJson,           // body is not JSON
  kNoEventName,       // JSON without an event name at the configured pointer
  kStoreFailure,      // event log append failed, 503
  kBadRequest,        // any other malformed request
  kNotFound,          // unknown path
  kMethodNotAllowed,  // not POST
  kJsonTooComplex,    // JSON deeper or with more values than the limits
  // Stored on the Redis primary, but fewer replicas than redis.min_replicas_acked confirmed
  // it within redis.replica_ack_timeout_ms: 503, the vendor delivers it again (stored once).
  kNotReplicated,
};
inline constexpr size_t kNumWebhookOutcomes = 12;
std::string_view WebhookOutcomeLabel(WebhookOutcome outcome);

// `reason` the webhook port's HTTP layer refused a connection or request, or ended a
// connection, before any delivery was looked at (inspection_webhook_http_refusals_total).
enum class WebhookRefusal {
  kMaxConnections,           // 503 + close: webhook.max_connections reached
  kMaxConnectionsPerClient,  // 503 + close: webhook.max_connections_per_client reached
  kMaxRequestsInFlight,      // 503: webhook.max_requests_in_flight reached
  kIdleClosedForRoom,        // an idle kept-alive connection closed to admit a new one
  kHeadTimeout,              // closed: no complete head within webhook.head_timeout_ms
  kBodyTimeout,              // 408: body slower than webhook.min_body_bytes_per_second
  kWriteTimeout,             // closed: the client did not read its answer
  kHeadTooLarge,             // 431: webhook.max_head_bytes or max_header_count
  kMalformed,                // 400/505: not HTTP/1.1, ambiguous framing
  kNotImplemented,           // 501: unknown method
  // At webhook.max_connections with no idle kept-alive connection: the connection that had
  // waited longest without a complete request head, closed to admit a new one.
  kAwaitingHeadClosedForRoom,
  // At webhook.max_connections with no idle or head-waiting connection: the connection that
  // had been writing an answer (or draining after it) the longest, closed to admit a new one.
  kAnsweringClosedForRoom,
};
inline constexpr size_t kNumWebhookRefusals = 12;
std::string_view WebhookRefusalLabel(WebhookRefusal reason);

// The webhook port's series, owned by the receiver (docs/design.md §7): created from a scope
// at start-up, every series at zero, and updated where each delivery, refusal or connection
// is decided. Nothing copies them on a scrape. Thread-safe (Prometheus counters and gauges).
//   inspection_webhook_deliveries_total{outcome}
//   inspection_webhook_unknown_event_names_total
//   inspection_webhook_http_refusals_total{reason}
//   inspection_webhook_connections, inspection_webhook_listener_accepting
//   inspection_webhook_accept_errors_total
//   inspection_event_log_appends_total, inspection_event_log_append_errors_total (the
//   receiver is the event log's only writer: its accepted deliveries are the appends)
class WebhookMetrics {
 public:
  explicit WebhookMetrics(const metrics::MetricsScope& scope);

  // One delivery's outcome (an accepted one is also an append; a store failure, an append
  // error).
  void Delivery(WebhookOutcome outcome);
  // An accepted delivery whose event name is not in webhook.known_event_names.
  void UnknownEventName() { unknown_event_names_->Increment(); }
  // What the port's HTTP layer told (HttpServerOptions::on_event).
  void OnHttpEvent(http::HttpServerEvent event);

 private:
  void Refusal(WebhookRefusal reason);

  std::array<prometheus::Counter*, kNumWebhookOutcomes> deliveries_{};
  std::array<prometheus::Counter*, kNumWebhookRefusals> refusals_{};
  prometheus::Counter* unknown_event_names_ = nullptr;
  prometheus::Gauge* connections_ = nullptr;
  prometheus::Gauge* listener_accepting_ = nullptr;
  prometheus::Counter* accept_errors_ = nullptr;
  prometheus::Counter* event_log_appends_ = nullptr;
  prometheus::Counter* event_log_append_errors_ = nullptr;
};

}  // namespace inspection::webhooks

#endif  // GATEWAY_WEBHOOKS_WEBHOOK_METRICS_H_
