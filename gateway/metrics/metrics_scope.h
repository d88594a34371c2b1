#ifndef GATEWAY_METRICS_METRICS_SCOPE_H_
#define GATEWAY_METRICS_METRICS_SCOPE_H_

// A handle on the process's metrics registry from which a component creates its own
// families (docs/design.md §7), Envoy-style: the component declares a struct of its
// counters next to its code, creates it from a scope once, and updates the counters where
// things happen; nothing copies a counter on a scrape. Every family and series is created
// up front (the families exist, at zero, before the first event).

#include <array>
#include <cstddef>
#include <string>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

namespace inspection::metrics {

// items[i], or the last item when `i` is out of range: the series of an enum value, where a
// value cast from an int must not index out of bounds on the hot path.
template <typename T, size_t N>
T BoundedAt(const std::array<T, N>& items, size_t i) {
  return items[i < N ? i : N - 1];
}

class MetricsScope {
 public:
  // `registry` must outlive the scope and every series created from it.
  explicit MetricsScope(prometheus::Registry& registry) : registry_(&registry) {}

  prometheus::Family<prometheus::Counter>& CounterFamily(const std::string& name,
                                                         const std::string& help) const {
    return prometheus::BuildCounter().Name(name).Help(help).Register(*registry_);
  }
  prometheus::Family<prometheus::Gauge>& GaugeFamily(const std::string& name,
                                                     const std::string& help) const {
    return prometheus::BuildGauge().Name(name).Help(help).Register(*registry_);
  }
  // A family with one series and no labels.
  prometheus::Counter& Counter(const std::string& name, const std::string& help) const {
    return CounterFamily(name, help).Add({});
  }
  prometheus::Gauge& Gauge(const std::string& name, const std::string& help) const {
    return GaugeFamily(name, help).Add({});
  }

 private:
  prometheus::Registry* registry_;
};

}  // namespace inspection::metrics

#endif  // GATEWAY_METRICS_METRICS_SCOPE_H_
