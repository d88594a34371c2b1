#ifndef GATEWAY_METRICS_PROCESS_COLLECTOR_H_
#define GATEWAY_METRICS_PROCESS_COLLECTOR_H_

#include <string>
#include <vector>

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>

namespace inspection::metrics {

// The standard process_* metrics of the Prometheus client libraries (same names, units and
// types as client_golang's process collector), read from /proc/self at each Collect():
//   process_start_time_seconds     gauge    Unix time the process started
//   process_cpu_seconds_total      counter  user + system CPU time
//   process_resident_memory_bytes  gauge
//   process_virtual_memory_bytes   gauge
//   process_open_fds               gauge
//   process_max_fds                gauge    soft RLIMIT_NOFILE
//   process_threads                gauge
// A value that cannot be read (no /proc, e.g. not Linux) is left out rather than reported as
// 0. Thread-safe: Collect() only reads the procfs files and immutable members.
class ProcessCollector final : public prometheus::Collectable {
 public:
  // `proc_self` is the procfs directory of the process to describe; `proc_stat` the system
  // stat file (its btime turns the start tick count into a Unix time). Tests only change them.
  explicit ProcessCollector(std::string proc_self = "/proc/self",
                            std::string proc_stat = "/proc/stat");

  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  const std::string proc_self_;
  // Computed once: it cannot change, and reading /proc/stat per scrape would be wasted work.
  // Negative when unknown.
  double start_time_seconds_ = -1;
};

}  // namespace inspection::metrics

#endif  // GATEWAY_METRICS_PROCESS_COLLECTOR_H_
