#ifndef GATEWAY_METRICS_METRICS_SCOPE_H_
#define GATEWAY_METRICS_METRICS_SCOPE_H_

// A handle on the process's metrics registry from which a component creates its own
// families (docs/design.md §7), Envoy-style: the component declares a struct of its
// counters next to its code, creates it from a scope once, and updates the counters where
// things happen; nothing copies a counter on a scrape. Every family and series is created
// up front (the families exist, at zero, before the first event).

#include <array>
#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "absl/status/status.h"

namespace inspection::metrics {

// The label value of every "other" bucket. Reserved: no configured label may use it.
inline constexpr std::string_view kOtherLabel = "other";
// The `account` label value of the default vendor account (upstream_url, api_key_file); the
// configuration reserves the name, so no named account can take it.
inline constexpr std::string_view kDefaultAccountLabel = "default";

// Label values that come from the rest of the gateway (route labels, method names, stream
// RPCs) must be 1..128 characters of [A-Za-z0-9_.], unique within their list and not
// "other": this keeps ids and URLs out of the label space by construction. The error names
// `list` and the value.
absl::Status CheckLabelValues(std::string_view list, const std::vector<std::string>& values);
// Account names: the config's own rule (1..64 of [A-Za-z0-9._-]), unique.
absl::Status CheckAccountLabels(const std::vector<std::string>& accounts);

// Latency buckets (seconds): Prometheus' default buckets, which go-grpc-prometheus uses,
// plus 30 s and 60 s because vendor image analysis can legitimately take that long.
const prometheus::Histogram::BucketBoundaries& LatencyBuckets();
double Seconds(std::chrono::nanoseconds elapsed);

// Index of `key` in a list that ends with the "other" bucket; unknown -> `other`.
size_t IndexOrOther(const std::map<std::string, size_t, std::less<>>& index, std::string_view key,
                    size_t other);

// Runs `build` (which registers families), turning what prometheus-cpp throws for a bad
// name or a clashing family (only at start-up) into an InternalError.
absl::Status Registering(const std::function<void()>& build);

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
  prometheus::Registry& registry() const { return *registry_; }
  prometheus::Family<prometheus::Histogram>& HistogramFamily(const std::string& name,
                                                             const std::string& help) const {
    return prometheus::BuildHistogram().Name(name).Help(help).Register(*registry_);
  }

 private:
  prometheus::Registry* registry_;
};

}  // namespace inspection::metrics

#endif  // GATEWAY_METRICS_METRICS_SCOPE_H_
