// GatewayServer::SyncReceiverMetrics: the webhook receiver's and its HTTP layer's counters,
// copied into the Prometheus metrics on each scrape. The last such copy: the reconciler and
// the span exporter update series of their own (docs/design.md §7); the receiver's move the
// same way with issue 32.
#include <algorithm>
#include <cstdint>
#include <utility>

#include "gateway/server/gateway_server.h"

namespace inspection::server {

void GatewayServer::SyncReceiverMetrics() {
  if (events_.receiver == nullptr) return;
  const webhooks::WebhookReceiverStats now = events_.receiver->stats();
  absl::MutexLock lock(&receiver_metrics_mu_);
  webhooks::WebhookReceiverStats& seen = receiver_reported_;
  auto delta = [](int64_t now_value, int64_t& seen_value) {
    const uint64_t d = now_value > seen_value ? static_cast<uint64_t>(now_value - seen_value) : 0;
    seen_value = std::max(seen_value, now_value);
    return d;
  };
  using metrics::WebhookOutcome;
  metrics::GatewayMetrics& m = *metrics_;
  const uint64_t accepted = delta(now.accepted, seen.accepted);
  const uint64_t store_failures = delta(now.store_failures, seen.store_failures);
  m.RecordWebhookDelivery(WebhookOutcome::kAccepted, accepted);
  m.RecordWebhookDelivery(WebhookOutcome::kDuplicate, delta(now.duplicates, seen.duplicates));
  m.RecordWebhookDelivery(WebhookOutcome::kUnauthorized,
                          delta(now.unauthorized, seen.unauthorized));
  m.RecordWebhookDelivery(WebhookOutcome::kTooLarge, delta(now.too_large, seen.too_large));
  m.RecordWebhookDelivery(WebhookOutcome::kBadJson, delta(now.bad_json, seen.bad_json));
  m.RecordWebhookDelivery(WebhookOutcome::kNoEventName,
                          delta(now.no_event_name, seen.no_event_name));
  m.RecordWebhookDelivery(WebhookOutcome::kStoreFailure, store_failures);
  m.RecordWebhookDelivery(WebhookOutcome::kBadRequest, delta(now.bad_requests, seen.bad_requests));
  m.RecordWebhookDelivery(WebhookOutcome::kNotFound, delta(now.not_found, seen.not_found));
  m.RecordWebhookDelivery(WebhookOutcome::kMethodNotAllowed,
                          delta(now.method_not_allowed, seen.method_not_allowed));
  m.RecordWebhookDelivery(WebhookOutcome::kJsonTooComplex,
                          delta(now.json_too_complex, seen.json_too_complex));
  m.RecordUnknownWebhookEventName(delta(now.unknown_event_names, seen.unknown_event_names));
  // The HTTP layer under it: connections, shedding, timeouts, the listener.
  const http::HttpServerStats http_now = events_.receiver->http_stats();
  http::HttpServerStats& http_seen = receiver_http_reported_;
  using metrics::WebhookRefusal;
  const std::pair<WebhookRefusal, int64_t http::HttpServerStats::*> refusals[] = {
      {WebhookRefusal::kMaxConnections, &http::HttpServerStats::shed_max_connections},
      {WebhookRefusal::kMaxConnectionsPerClient, &http::HttpServerStats::shed_per_client},
      {WebhookRefusal::kMaxRequestsInFlight, &http::HttpServerStats::shed_in_flight},
      {WebhookRefusal::kIdleClosedForRoom, &http::HttpServerStats::idle_closed_for_room},
      {WebhookRefusal::kHeadTimeout, &http::HttpServerStats::head_timeouts},
      {WebhookRefusal::kBodyTimeout, &http::HttpServerStats::body_timeouts},
      {WebhookRefusal::kWriteTimeout, &http::HttpServerStats::write_timeouts},
      {WebhookRefusal::kHeadTooLarge, &http::HttpServerStats::head_too_large},
      {WebhookRefusal::kNotImplemented, &http::HttpServerStats::not_implemented},
      {WebhookRefusal::kAwaitingHeadClosedForRoom,
       &http::HttpServerStats::awaiting_head_closed_for_room},
      {WebhookRefusal::kAnsweringClosedForRoom, &http::HttpServerStats::answering_closed_for_room},
  };
  for (const auto& [reason, field] : refusals) {
    m.RecordWebhookRefusal(reason, delta(http_now.*field, http_seen.*field));
  }
  // Malformed requests are also deliveries with outcome bad_request (above).
  m.RecordWebhookRefusal(WebhookRefusal::kMalformed,
                         delta(http_now.malformed, http_seen.malformed));
  m.RecordWebhookAcceptErrors(delta(http_now.accept_errors, http_seen.accept_errors));
  m.SetWebhookConnections(http_now.connections_open);
  m.SetWebhookListenerAccepting(http_now.accepting);
  // The receiver is the only writer of the event log: its accepted deliveries are the
  // appends, its store failures the append errors.
  m.RecordEventLogAppend(accepted);
  m.RecordEventLogAppendError(store_failures);
}

}  // namespace inspection::server
