#include "gateway/reconcile/reconcile_metrics.h"

namespace inspection::reconcile {

ReconcileMetrics ReconcileMetrics::Create(const metrics::MetricsScope& scope) {
  ReconcileMetrics m;
  auto& polls = scope.CounterFamily(
      "inspection_reconcile_polls_total",
      "Vendor calls the reconciler made (reconcile.*): kind=inspection polls a damages report, "
      "kind=token a token's status.");
  m.polls_inspection = &polls.Add({{"kind", "inspection"}});
  m.polls_token = &polls.Add({{"kind", "token"}});
  auto& recovered = scope.CounterFamily(
      "inspection_reconcile_recovered_total",
      "Damage reports the gateway recovered by polling and appended as damagesReport events, "
      "by cause: missed_webhook (its createReport did not arrive within reconcile.after_ms: "
      "webhooks are being lost) or webhook_less (webhook.mode poll).");
  m.recovered_missed_webhook = &recovered.Add({{"cause", "missed_webhook"}});
  m.recovered_webhook_less = &recovered.Add({{"cause", "webhook_less"}});
  m.overdue = &scope.Gauge(
      "inspection_reconcile_overdue_items",
      "Recorded inspections and tokens due for a poll and not being polled (grows when the "
      "poll budget is too small).");
  m.ledger_errors =
      &scope.Counter("inspection_reconcile_ledger_errors_total",
                     "Work ledger or event log operations of the reconciler that failed.");
  m.given_up = &scope.Counter(
      "inspection_reconcile_given_up_total",
      "Inspections and tokens the reconciler gave up on: polled reconcile.max_polls_per_item "
      "times without a result, never polled again.");
  m.unrecorded = &scope.Gauge(
      "inspection_reconcile_unrecorded_items",
      "Submissions, created tokens and createReport resolutions queued for the work ledger "
      "and not written yet: in this process's memory only, lost if it dies. Above 0 for long: "
      "the ledger refuses writes (retried with backoff, "
      "inspection_reconcile_ledger_errors_total).");
  m.unrecorded_dropped = &scope.Counter(
      "inspection_reconcile_unrecorded_dropped_total",
      "Submissions, created tokens and createReport resolutions never queued for the work "
      "ledger because reconcile.max_unrecorded were waiting (the ledger refuses writes): such "
      "a submission's result depends on its webhook alone.");
  return m;
}

}  // namespace inspection::reconcile
