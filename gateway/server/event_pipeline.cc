#include "gateway/server/event_pipeline.h"

#include <unistd.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "adapters/eventlog/redis/redis_event_log.h"
#include "adapters/redis/redis_url.h"
#include "gateway/logging/log.h"
#include "gateway/tracing/trace_context.h"

namespace inspection::server {
namespace {

// This replica's name in the work ledger's claims: host, pid and a random part (a restarted
// process with the same pid is another owner).
std::string ReplicaName() {
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  return absl::StrCat(host[0] != '\0' ? host : "gateway", "-", getpid(), "-",
                      tracing::Hex(tracing::NewSpanId()).substr(0, 8));
}

// Opens the ledger and creates the reconciler (ReconcileSettings); leaves both null when
// reconciliation is off.
absl::Status MakeReconciler(const GatewayServerOptions& options, EventPipeline& events,
                            const reconcile::ReconcileMetrics* metrics,
                            reconcile::FetchReport fetch_report,
                            reconcile::FetchToken fetch_token) {
  const ReconcileSettings& settings = options.reconcile;
  if (!settings.enabled) return absl::OkStatus();
  events.ledger = settings.ledger;
  if (events.ledger == nullptr) {
    if (options.event_log != nullptr && settings.ledger_url.empty()) {
      logging::Info(
          "reconciliation is off: the event log is injected and no work ledger is configured");
      return absl::OkStatus();
    }
    auto ledger = OpenWorkLedger(settings.ledger_url, options.event_log_url, options.redis);
    if (!ledger.ok()) return Prefixed(ledger.status(), "reconcile.ledger: ");
    events.ledger = std::shared_ptr<eventlog::WorkLedger>(std::move(*ledger));
  }
  reconcile::ReconcilerOptions reconciler = settings.reconciler;
  reconciler.webhook_less = events.webhook_less;
  reconciler.owner = ReplicaName();
  reconciler.metrics = metrics;
  events.reconciler = std::make_unique<reconcile::Reconciler>(
      std::move(reconciler), events.ledger.get(), events.log.get(), std::move(fetch_report),
      std::move(fetch_token));
  logging::Info(
      "reconciliation on",
      {{"mode", events.webhook_less ? "poll (no webhooks)" : "webhook"},
       {"after_ms", std::to_string(absl::ToInt64Milliseconds(settings.reconciler.after))}});
  return absl::OkStatus();
}

// Named accounts receive webhooks only as configured vendor accounts, and only when the
// default account's key starts the receiver.
absl::Status CheckWebhookAccounts(const GatewayServerOptions& options) {
  for (const webhooks::WebhookAccount& account : options.webhook.accounts) {
    if (std::none_of(options.accounts.begin(), options.accounts.end(),
                     [&](const VendorAccountOptions& a) { return a.name == account.name; })) {
      return absl::InvalidArgumentError(
          absl::StrCat("webhook receiver: account \"", account.name,
                       "\" receives webhooks but is not a configured vendor account"));
    }
  }
  if (!options.webhook.accounts.empty() && options.webhook.current_key.empty()) {
    return absl::InvalidArgumentError(
        "webhook receiver: named accounts receive webhooks only when the default account's "
        "webhook key is set (it starts the receiver)");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status Prefixed(const absl::Status& status, absl::string_view prefix) {
  return absl::Status(status.code(), absl::StrCat(prefix, status.message()));
}

absl::StatusOr<std::unique_ptr<eventlog::WorkLedger>> OpenWorkLedger(
    const std::string& ledger_url, const std::string& event_log_url,
    const redis::RedisOptions& redis) {
  const std::string& url = ledger_url.empty() ? event_log_url : ledger_url;
  if (url.rfind("sqlite:", 0) == 0) {
    // Beside the event log: a file of its own, so the two never wait for each other's lock.
    return eventlog::OpenSqliteWorkLedger(ledger_url.empty() ? absl::StrCat(url.substr(7), ".work")
                                                             : url.substr(7));
  }
  if (redis::IsRedisUrl(url)) return eventlog::OpenRedisWorkLedgerWithOptions(url, redis);
  return absl::InvalidArgumentError(
      "reconcile.ledger must be sqlite:<path>, redis://host:port or redis+sentinel://...");
}

absl::StatusOr<std::unique_ptr<eventlog::EventLog>> OpenEventLog(
    const std::string& url, const eventlog::RetentionPolicy& retention,
    const redis::RedisOptions& redis) {
  if (url.rfind("sqlite:", 0) == 0) return eventlog::OpenSqliteEventLog(url.substr(7), retention);
  if (redis::IsRedisUrl(url)) {
    eventlog::RedisEventLogOptions options;
    options.redis = redis;
    return eventlog::OpenRedisEventLogWithOptions(url, retention, std::move(options));
  }
  return absl::InvalidArgumentError(
      "event_log must be sqlite:<path>, redis://host:port or redis+sentinel://...");
}

absl::StatusOr<EventPipeline> MakeEventPipeline(
    const GatewayServerOptions& options, const streaming::HubMetrics* hub_metrics,
    const reconcile::ReconcileMetrics* reconcile_metrics, webhooks::WebhookMetrics* webhook_metrics,
    pipeline::CachingCaller* cache, reconcile::FetchReport fetch_report,
    reconcile::FetchToken fetch_token) {
  EventPipeline events;
  events.log = options.event_log;
  if (events.log == nullptr) {
    auto log = OpenEventLog(options.event_log_url, options.retention, options.redis);
    if (!log.ok()) return Prefixed(log.status(), "event_log: ");
    events.log = std::shared_ptr<eventlog::EventLog>(std::move(*log));
  }
  events.webhook_less = options.webhook_less || options.webhook.current_key.empty();
  if (absl::Status made = MakeReconciler(options, events, reconcile_metrics,
                                         std::move(fetch_report), std::move(fetch_token));
      !made.ok()) {
    return made;
  }
  streaming::EventHub::Options hub = options.hub;
  hub.metrics = hub_metrics;
  reconcile::Reconciler* reconciler = events.reconciler.get();
  // Every replica tails the shared log, so each one drops what an event makes stale, and a
  // createReport resolves its inspection in the work ledger (queued: no I/O here).
  hub.on_event = [cache, reconciler](const eventlog::StoredEvent& stored) {
    cache->OnInspectionEvent(stored.event.inspection_id);
    if (reconciler != nullptr) reconciler->QueueObserved(stored.event);
  };
  events.hub = std::make_unique<streaming::EventHub>(events.log.get(), hub);
  if (absl::Status started = events.hub->Start(); !started.ok()) return started;
  if (absl::Status checked = CheckWebhookAccounts(options); !checked.ok()) return checked;
  if (!events.webhook_less) {
    webhooks::WebhookReceiverOptions webhook = options.webhook;
    webhook.rejected_lines_per_second = options.rejected_log_lines_per_second;
    webhook.metrics = webhook_metrics;
    auto receiver = webhooks::WebhookReceiver::Start(webhook, events.log.get());
    if (!receiver.ok()) return Prefixed(receiver.status(), "webhook receiver: ");
    events.receiver = std::move(*receiver);
  }
  return events;
}

}  // namespace inspection::server
