#ifndef GATEWAY_RECONCILE_RECONCILE_METRICS_H_
#define GATEWAY_RECONCILE_RECONCILE_METRICS_H_

// The reconciler's Prometheus series (inspection_reconcile_*), created from a scope and
// updated by the reconciler where things happen (docs/design.md §7).

#include <prometheus/counter.h>
#include <prometheus/gauge.h>

#include "gateway/metrics/metrics_scope.h"

namespace inspection::reconcile {

struct ReconcileMetrics {
  // Registers the families, every series at zero.
  static ReconcileMetrics Create(const metrics::MetricsScope& scope);

  prometheus::Counter* polls_inspection = nullptr;  // polls_total{kind="inspection"}
  prometheus::Counter* polls_token = nullptr;       // polls_total{kind="token"}
  prometheus::Counter* recovered_missed_webhook = nullptr;
  prometheus::Counter* recovered_webhook_less = nullptr;
  prometheus::Gauge* overdue = nullptr;
  prometheus::Counter* ledger_errors = nullptr;
  prometheus::Counter* given_up = nullptr;
  // Queued work (submissions, tokens, createReport resolutions) not written to the work
  // ledger yet, and Queue* calls refused because reconcile.max_unrecorded were waiting.
  prometheus::Gauge* unrecorded = nullptr;
  prometheus::Counter* unrecorded_dropped = nullptr;
};

}  // namespace inspection::reconcile

#endif  // GATEWAY_RECONCILE_RECONCILE_METRICS_H_
