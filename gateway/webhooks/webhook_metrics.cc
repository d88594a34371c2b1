#include "gateway/webhooks/webhook_metrics.h"

#include <string>

namespace inspection::webhooks {
namespace {

constexpr std::array<std::string_view, kNumWebhookOutcomes> kOutcomeLabels = {
    "accepted",  "duplicate",          "unauthorized",     "too_large",
    "bad_json",  "no_event_name",      "store_failure",    "bad_request",
    "not_found", "method_not_allowed", "json_too_complex", "not_replicated"};
constexpr std::array<std::string_view, kNumWebhookRefusals> kRefusalLabels = {
    "max_connections",
    "max_connections_per_client",
    "max_requests_in_flight",
    "idle_closed_for_room",
    "head_timeout",
    "body_timeout",
    "write_timeout",
    "head_too_large",
    "malformed",
    "not_implemented",
    "awaiting_head_closed_for_room",
    "answering_closed_for_room"};

}  // namespace

std::string_view WebhookOutcomeLabel(WebhookOutcome outcome) {
  return metrics::BoundedAt(kOutcomeLabels, static_cast<size_t>(outcome));
}

std::string_view WebhookRefusalLabel(WebhookRefusal reason) {
  return metrics::BoundedAt(kRefusalLabels, static_cast<size_t>(reason));
}

WebhookMetrics::WebhookMetrics(const metrics::MetricsScope& scope) {
  auto& deliveries = scope.CounterFamily("inspection_webhook_deliveries_total",
                                         "Webhook deliveries received, by outcome.");
  for (size_t o = 0; o < kNumWebhookOutcomes; ++o) {
    deliveries_[o] = &deliveries.Add({{"outcome", std::string(kOutcomeLabels[o])}});
  }
  unknown_event_names_ =
      &scope.Counter("inspection_webhook_unknown_event_names_total",
                     "Webhook deliveries whose event name the gateway does not know.");
  auto& refusals = scope.CounterFamily(
      "inspection_webhook_http_refusals_total",
      "Connections and requests the webhook port's HTTP layer refused or ended before a "
      "delivery was looked at, by reason.");
  for (size_t r = 0; r < kNumWebhookRefusals; ++r) {
    refusals_[r] = &refusals.Add({{"reason", std::string(kRefusalLabels[r])}});
  }
  connections_ =
      &scope.Gauge("inspection_webhook_connections", "Connections open to the webhook port.");
  listener_accepting_ =
      &scope.Gauge("inspection_webhook_listener_accepting",
                   "1 while the webhook listener accepts connections, 0 while accept() fails.");
  accept_errors_ = &scope.Counter("inspection_webhook_accept_errors_total",
                                  "accept() failures on the webhook port (each retried).");
  event_log_appends_ =
      &scope.Counter("inspection_event_log_appends_total", "Events appended to the event log.");
  event_log_append_errors_ =
      &scope.Counter("inspection_event_log_append_errors_total", "Event log appends that failed.");
}

void WebhookMetrics::Delivery(WebhookOutcome outcome) {
  metrics::BoundedAt(deliveries_, static_cast<size_t>(outcome))->Increment();
  if (outcome == WebhookOutcome::kAccepted) event_log_appends_->Increment();
  if (outcome == WebhookOutcome::kStoreFailure || outcome == WebhookOutcome::kNotReplicated) {
    event_log_append_errors_->Increment();
  }
}

void WebhookMetrics::Refusal(WebhookRefusal reason) {
  metrics::BoundedAt(refusals_, static_cast<size_t>(reason))->Increment();
}

void WebhookMetrics::OnHttpEvent(http::HttpServerEvent event) {
  using http::HttpServerEvent;
  switch (event) {
    case HttpServerEvent::kAccepted:
      return;  // not a series of its own
    case HttpServerEvent::kConnectionOpened:
      connections_->Increment();
      return;
    case HttpServerEvent::kConnectionClosed:
      connections_->Decrement();
      return;
    case HttpServerEvent::kShedMaxConnections:
      return Refusal(WebhookRefusal::kMaxConnections);
    case HttpServerEvent::kShedPerClient:
      return Refusal(WebhookRefusal::kMaxConnectionsPerClient);
    case HttpServerEvent::kShedInFlight:
      return Refusal(WebhookRefusal::kMaxRequestsInFlight);
    case HttpServerEvent::kIdleClosedForRoom:
      return Refusal(WebhookRefusal::kIdleClosedForRoom);
    case HttpServerEvent::kAwaitingHeadClosedForRoom:
      return Refusal(WebhookRefusal::kAwaitingHeadClosedForRoom);
    case HttpServerEvent::kAnsweringClosedForRoom:
      return Refusal(WebhookRefusal::kAnsweringClosedForRoom);
    case HttpServerEvent::kHeadTimeout:
      return Refusal(WebhookRefusal::kHeadTimeout);
    case HttpServerEvent::kBodyTimeout:
      return Refusal(WebhookRefusal::kBodyTimeout);
    case HttpServerEvent::kWriteTimeout:
      return Refusal(WebhookRefusal::kWriteTimeout);
    case HttpServerEvent::kHeadTooLarge:
      return Refusal(WebhookRefusal::kHeadTooLarge);
    case HttpServerEvent::kNotImplemented:
      return Refusal(WebhookRefusal::kNotImplemented);
    case HttpServerEvent::kBodyTooLarge:
      // A delivery the HTTP layer answered 413: an outcome, not a refusal.
      return Delivery(WebhookOutcome::kTooLarge);
    case HttpServerEvent::kMalformed:
      // Both: a refusal of the HTTP layer, and a delivery with outcome bad_request.
      Refusal(WebhookRefusal::kMalformed);
      return Delivery(WebhookOutcome::kBadRequest);
    case HttpServerEvent::kAcceptError:
      accept_errors_->Increment();
      return;
    case HttpServerEvent::kAccepting:
      listener_accepting_->Set(1);
      return;
    case HttpServerEvent::kNotAccepting:
      listener_accepting_->Set(0);
      return;
  }
}

}  // namespace inspection::webhooks
