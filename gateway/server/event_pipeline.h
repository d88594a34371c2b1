#ifndef GATEWAY_SERVER_EVENT_PIPELINE_H_
#define GATEWAY_SERVER_EVENT_PIPELINE_H_

// The event path: the webhook receiver appends the vendor's deliveries to the event log;
// the hub tails the log and fans each event out to the streams; the reconciler records
// what this gateway started in the work ledger and polls the vendor for what no webhook
// brought.

#include <algorithm>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "adapters/eventlog/event_log.h"
#include "adapters/redis/redis_connection.h"
#include "gateway/pipeline/caching_caller.h"
#include "gateway/reconcile/reconciler.h"
#include "gateway/routes/route_table.h"
#include "gateway/server/server_options.h"
#include "gateway/streaming/event_hub.h"
#include "gateway/streaming/hub_metrics.h"
#include "gateway/webhooks/webhook_receiver.h"

namespace inspection::server {

struct EventPipeline {
  // Members are destroyed in reverse order: the receiver (the log's writer) first.
  std::shared_ptr<eventlog::EventLog> log;
  std::shared_ptr<eventlog::WorkLedger> ledger;
  std::unique_ptr<reconcile::Reconciler> reconciler;    // null when reconciliation is off
  std::unique_ptr<streaming::EventHub> hub;             // tailing the log
  std::unique_ptr<webhooks::WebhookReceiver> receiver;  // null without webhooks
  // Streams are fed by polling alone (webhook.mode poll, or no webhook key).
  bool webhook_less = false;
};

// Opens (or takes the injected) event log and work ledger, creates the reconciler (not
// started: Start starts it last, once the pipeline its polls use is complete; it updates
// `reconcile_metrics`), starts the
// hub and the webhook receiver (which updates `webhook_metrics`). Each event the hub sees drops
// what it makes stale in `cache` and is shown to the reconciler. `fetch_report` and `fetch_token`
// are the reconciler's polls (services/background_calls.h).
absl::StatusOr<EventPipeline> MakeEventPipeline(
    const GatewayServerOptions& options, const streaming::HubMetrics* hub_metrics,
    const reconcile::ReconcileMetrics* reconcile_metrics, webhooks::WebhookMetrics* webhook_metrics,
    pipeline::CachingCaller* cache, reconcile::FetchReport fetch_report,
    reconcile::FetchToken fetch_token);

// `status` with `prefix` (what it is about: "event_log: ") before its message, its code kept.
// The composition root's start-up errors name their config key this way.
absl::Status Prefixed(const absl::Status& status, absl::string_view prefix);

// Opens "sqlite:<path>", "redis://..." or "redis+sentinel://..." (config key event_log),
// a Redis with `redis` (redis.*).
absl::StatusOr<std::unique_ptr<eventlog::EventLog>> OpenEventLog(
    const std::string& url, const eventlog::RetentionPolicy& retention,
    const redis::RedisOptions& redis = redis::RedisOptions());

// Opens the work ledger at `ledger_url`, or beside the event log at `event_log_url` when it
// is empty (ReconcileSettings::ledger_url).
absl::StatusOr<std::unique_ptr<eventlog::WorkLedger>> OpenWorkLedger(
    const std::string& ledger_url, const std::string& event_log_url,
    const redis::RedisOptions& redis = redis::RedisOptions());

// The longest a reconciler poll's vendor call may take: its deadline, the timeout of the
// GET damagesReport or token status route (retries happen within it; upstream.timeout_ms
// only shortens each attempt). A lease must outlast it, or a second replica claims and
// polls an item whose poll is still in flight: config refuses a reconcile.lease_ms that
// is not longer.
// Inline (gateway_routes only): the config loader checks against it, and the config fuzzer
// builds that loader without the rest of the server.
inline absl::Duration ReconcilePollDeadline() {
  // The deadline the background calls give ReportFetch's and TokenFetch's calls.
  return absl::FromChrono(std::max(routes::GetRoute(routes::RouteId::kGetDamagesReport).timeout,
                                   routes::GetRoute(routes::RouteId::kGetTokenStatus).timeout));
}

}  // namespace inspection::server

#endif  // GATEWAY_SERVER_EVENT_PIPELINE_H_
