#include "gateway/metrics/process_collector.h"

#include <dirent.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <string_view>
#include <utility>

#include <prometheus/client_metric.h>
#include <prometheus/metric_type.h>

namespace inspection::metrics {
namespace {

std::optional<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream content;
  content << in.rdbuf();
  return content.str();
}

// The fields of /proc/<pid>/stat after the command name. The name is in parentheses and may
// itself contain spaces and ')', so split after the *last* ')'; fields[0] is then field 3
// ("state") of proc(5).
std::vector<std::string> StatFieldsAfterComm(const std::string& stat) {
  std::vector<std::string> fields;
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return fields;
  std::istringstream in(stat.substr(close + 1));
  std::string field;
  while (in >> field) fields.push_back(field);
  return fields;
}

// proc(5) field number -> index into StatFieldsAfterComm().
constexpr size_t StatIndex(size_t field_number) { return field_number - 3; }

std::optional<double> ParseNumber(const std::string& text) {
  if (text.empty()) return std::nullopt;
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size()) return std::nullopt;
  return value;
}

std::optional<double> StatField(const std::vector<std::string>& fields, size_t field_number) {
  const size_t index = StatIndex(field_number);
  if (index >= fields.size()) return std::nullopt;
  return ParseNumber(fields[index]);
}

// "Max open files  <soft>  <hard>  files" from /proc/<pid>/limits; "unlimited" is left out
// (client_golang reports it the same way: no sample rather than a made-up number).
std::optional<double> MaxOpenFiles(const std::string& limits) {
  std::istringstream in(limits);
  std::string line;
  constexpr std::string_view kPrefix = "Max open files";
  while (std::getline(in, line)) {
    if (line.compare(0, kPrefix.size(), kPrefix) != 0) continue;
    std::istringstream rest(line.substr(kPrefix.size()));
    std::string soft;
    rest >> soft;
    return ParseNumber(soft);
  }
  return std::nullopt;
}

std::optional<double> CountOpenFds(const std::string& fd_dir, bool is_self) {
  DIR* dir = ::opendir(fd_dir.c_str());
  if (dir == nullptr) return std::nullopt;
  // Reading /proc/self/fd needs a descriptor of its own; it is not one of the process's
  // "real" open files, so it is not counted.
  const std::string own = is_self ? std::to_string(::dirfd(dir)) : std::string();
  double count = 0;
  while (const dirent* entry = ::readdir(dir)) {
    const std::string_view name = entry->d_name;
    if (name == "." || name == ".." || name == own) continue;
    ++count;
  }
  ::closedir(dir);
  return count;
}

prometheus::MetricFamily Family(std::string name, std::string help, prometheus::MetricType type,
                                double value) {
  prometheus::MetricFamily family;
  family.name = std::move(name);
  family.help = std::move(help);
  family.type = type;
  prometheus::ClientMetric metric;
  if (type == prometheus::MetricType::Counter) {
    metric.counter.value = value;
  } else {
    metric.gauge.value = value;
  }
  family.metric.push_back(std::move(metric));
  return family;
}

void AddGauge(std::vector<prometheus::MetricFamily>& out, std::string name, std::string help,
              std::optional<double> value) {
  if (!value) return;
  out.push_back(Family(std::move(name), std::move(help), prometheus::MetricType::Gauge, *value));
}

}  // namespace

ProcessCollector::ProcessCollector(std::string proc_self, std::string proc_stat)
    : proc_self_(std::move(proc_self)) {
  const std::optional<std::string> stat = ReadFile(proc_self_ + "/stat");
  const std::optional<std::string> system_stat = ReadFile(proc_stat);
  if (!stat || !system_stat) return;
  // starttime (field 22) is in clock ticks since boot; btime is boot time in Unix seconds.
  const std::optional<double> start_ticks = StatField(StatFieldsAfterComm(*stat), 22);
  std::optional<double> boot_time;
  std::istringstream in(*system_stat);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("btime ", 0) == 0) boot_time = ParseNumber(line.substr(6));
  }
  const long ticks_per_second = ::sysconf(_SC_CLK_TCK);
  if (start_ticks && boot_time && ticks_per_second > 0) {
    start_time_seconds_ = *boot_time + *start_ticks / static_cast<double>(ticks_per_second);
  }
}

std::vector<prometheus::MetricFamily> ProcessCollector::Collect() const {
  std::vector<prometheus::MetricFamily> out;
  if (start_time_seconds_ >= 0) {
    AddGauge(out, "process_start_time_seconds",
             "Start time of the process since unix epoch in seconds.", start_time_seconds_);
  }

  const std::optional<std::string> stat = ReadFile(proc_self_ + "/stat");
  const std::vector<std::string> fields =
      stat ? StatFieldsAfterComm(*stat) : std::vector<std::string>();
  const long ticks_per_second = ::sysconf(_SC_CLK_TCK);
  const long page_size = ::sysconf(_SC_PAGESIZE);

  const std::optional<double> utime = StatField(fields, 14);
  const std::optional<double> stime = StatField(fields, 15);
  if (utime && stime && ticks_per_second > 0) {
    out.push_back(Family("process_cpu_seconds_total",
                         "Total user and system CPU time spent in seconds.",
                         prometheus::MetricType::Counter,
                         (*utime + *stime) / static_cast<double>(ticks_per_second)));
  }
  const std::optional<double> rss_pages = StatField(fields, 24);
  if (rss_pages && page_size > 0) {
    AddGauge(out, "process_resident_memory_bytes", "Resident memory size in bytes.",
             *rss_pages * static_cast<double>(page_size));
  }
  AddGauge(out, "process_virtual_memory_bytes", "Virtual memory size in bytes.",
           StatField(fields, 23));
  AddGauge(out, "process_open_fds", "Number of open file descriptors.",
           CountOpenFds(proc_self_ + "/fd", proc_self_ == "/proc/self"));
  const std::optional<std::string> limits = ReadFile(proc_self_ + "/limits");
  AddGauge(out, "process_max_fds", "Maximum number of open file descriptors.",
           limits ? MaxOpenFiles(*limits) : std::nullopt);
  AddGauge(out, "process_threads", "Number of OS threads in the process.", StatField(fields, 20));
  return out;
}

}  // namespace inspection::metrics
