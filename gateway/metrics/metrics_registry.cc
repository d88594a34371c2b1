#include "gateway/metrics/metrics_registry.h"

#include <iterator>
#include <utility>

#include <prometheus/gauge.h>

#include "gateway/version/version.h"

namespace inspection::metrics {

MetricsRegistry::MetricsRegistry() : registry_(std::make_shared<prometheus::Registry>()) {
  scope()
      .GaugeFamily("inspection_gateway_build_info",
                   "Always 1: the build this process runs (version: the project's SemVer "
                   "version; revision: the git revision it was built from).")
      .Add({{"version", std::string(version::Version())},
            {"revision", std::string(version::Revision())}})
      .Set(1);
}

MetricsRegistry::~MetricsRegistry() = default;

std::vector<prometheus::MetricFamily> MetricsRegistry::Collect() const {
  if (collect_hook_) collect_hook_();
  std::vector<prometheus::MetricFamily> families = registry_->Collect();
  std::vector<prometheus::MetricFamily> process = process_collector_.Collect();
  families.insert(families.end(), std::make_move_iterator(process.begin()),
                  std::make_move_iterator(process.end()));
  return families;
}

}  // namespace inspection::metrics
