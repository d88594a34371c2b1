#ifndef GATEWAY_METRICS_METRICS_REGISTRY_H_
#define GATEWAY_METRICS_METRICS_REGISTRY_H_

// The process's one Prometheus registry (docs/design.md §7). It knows no component: each
// component creates its own series from scope() at start-up (PipelineMetrics,
// GrpcServerMetrics, HubMetrics, ReconcileMetrics, WebhookMetrics, ...) and updates them where
// things happen. What it adds itself is the process's: inspection_gateway_build_info and
// the process_* families (read from /proc/self per scrape).
//
// Thread-safe: prometheus-cpp counters and gauges are atomics, histograms take a short
// internal lock; series stay valid as long as the registry lives.

#include <functional>
#include <memory>
#include <vector>

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>
#include <prometheus/registry.h>

#include "gateway/metrics/metrics_scope.h"
#include "gateway/metrics/process_collector.h"

namespace inspection::metrics {

class MetricsRegistry final : public prometheus::Collectable {
 public:
  MetricsRegistry();
  MetricsRegistry(const MetricsRegistry&) = delete;
  MetricsRegistry& operator=(const MetricsRegistry&) = delete;
  ~MetricsRegistry() override;

  // Where components create their series.
  MetricsScope scope() const { return MetricsScope(*registry_); }

  // The registry's families followed by the process_* families; what AdminServer serves on
  // /metrics. Thread-safe.
  std::vector<prometheus::MetricFamily> Collect() const override;
  // Runs at the start of every Collect() (i.e. per scrape), for a gauge whose value lives
  // elsewhere and is read then, as a Prometheus GaugeFunc would (the vendor transport's
  // buffered bytes). Set once, before serving.
  void SetCollectHook(std::function<void()> hook) { collect_hook_ = std::move(hook); }

 private:
  const std::shared_ptr<prometheus::Registry> registry_;
  std::function<void()> collect_hook_;
  ProcessCollector process_collector_;
};

}  // namespace inspection::metrics

#endif  // GATEWAY_METRICS_METRICS_REGISTRY_H_
