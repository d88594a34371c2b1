// ProcessCollector: exact parsing against a fake procfs, then the live /proc/self values
// checked against independent readings and against changes the test itself makes.
#include "gateway/metrics/process_collector.h"

#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <prometheus/metric_type.h>

#include "absl/synchronization/notification.h"
#include "tests/support/temp_dir.h"

namespace inspection::metrics {
namespace {

using ::prometheus::MetricFamily;
using ::prometheus::MetricType;

// name -> value of the single-series process families.
std::map<std::string, double> Values(const std::vector<MetricFamily>& families) {
  std::map<std::string, double> values;
  for (const MetricFamily& family : families) {
    EXPECT_EQ(family.metric.size(), 1u) << family.name;
    if (family.metric.empty()) continue;
    const auto& metric = family.metric[0];
    EXPECT_TRUE(metric.label.empty()) << family.name;
    EXPECT_EQ(family.type,
              family.name == "process_cpu_seconds_total" ? MetricType::Counter : MetricType::Gauge)
        << family.name;
    values[family.name] =
        family.type == MetricType::Counter ? metric.counter.value : metric.gauge.value;
  }
  return values;
}

void WriteFile(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary);
  out << content;
}

// Independent readings for the live checks.
int ThreadsFromStatus() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
  }
  return -1;
}

int OpenFdsByProbing() {
  int count = 0;
  const long max = std::min<long>(::sysconf(_SC_OPEN_MAX), 65536);
  for (int fd = 0; fd < max; ++fd) {
    if (::fcntl(fd, F_GETFD) != -1) ++count;
  }
  return count;
}

TEST(ProcessCollectorTest, ParsesProcfsExactly) {
  testing::TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  const long ticks = ::sysconf(_SC_CLK_TCK);
  const long page = ::sysconf(_SC_PAGESIZE);
  // A command name with spaces and parentheses: only the last ')' ends it.
  // Fields 3.. : state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt
  // utime(14) stime(15) cutime cstime priority nice num_threads(20) itrealvalue
  // starttime(22) vsize(23) rss(24) ...
  const std::string stat = "4242 (gate way) (x)) S 1 4242 4242 0 -1 4194560 100 0 0 0 " +
                           std::to_string(3 * ticks) + " " + std::to_string(ticks / 2) +
                           " 0 0 20 0 7 0 " + std::to_string(250 * ticks) +
                           " 123456789 2500 18446744073709551615 1 1 0 0 0 0 0 0 0\n";
  WriteFile(dir.File("stat"), stat);
  WriteFile(dir.File("limits"),
            "Limit                     Soft Limit           Hard Limit           Units     \n"
            "Max cpu time              unlimited            unlimited            seconds   \n"
            "Max open files            1024                 524288               files     \n");
  std::filesystem::create_directory(dir.File("fd"));
  for (const char* fd : {"0", "1", "2", "5", "17"}) WriteFile(dir.File("fd/") + fd, "");
  WriteFile(dir.File("system_stat"),
            "cpu  1 2 3 4\nintr 5\nctxt 6\nbtime 1700000000\nprocesses 7\n");

  ProcessCollector collector(dir.path(), dir.File("system_stat"));
  const std::map<std::string, double> values = Values(collector.Collect());
  const std::map<std::string, double> expected = {
      {"process_start_time_seconds", 1700000250},
      {"process_cpu_seconds_total", 3 + static_cast<double>(ticks / 2) / ticks},
      {"process_resident_memory_bytes", 2500.0 * page},
      {"process_virtual_memory_bytes", 123456789},
      {"process_open_fds", 5},
      {"process_max_fds", 1024},
      {"process_threads", 7},
  };
  EXPECT_EQ(values, expected);
}

TEST(ProcessCollectorTest, LeavesOutWhatCannotBeRead) {
  testing::TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  WriteFile(dir.File("stat"), "1 (short) S 1\n");  // truncated
  WriteFile(dir.File("limits"), "Max open files            unlimited            unlimited\n");
  ProcessCollector collector(dir.path(), dir.File("missing"));
  // No start time (no btime), no stat fields, no fd dir, unlimited fds: nothing made up.
  EXPECT_TRUE(Values(collector.Collect()).empty());
}

TEST(ProcessCollectorTest, LiveValuesFollowThisProcess) {
  ProcessCollector collector;
  const auto now_seconds = [] {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
        .count();
  };

  // Threads and fds: bracketed by independent readings taken just before and after.
  const int threads_before = ThreadsFromStatus();
  const int fds_before = OpenFdsByProbing();
  std::map<std::string, double> v1 = Values(collector.Collect());
  const int threads_after = ThreadsFromStatus();
  const int fds_after = OpenFdsByProbing();
  EXPECT_GE(v1["process_threads"], std::min(threads_before, threads_after));
  EXPECT_LE(v1["process_threads"], std::max(threads_before, threads_after));
  EXPECT_GE(v1["process_open_fds"], std::min(fds_before, fds_after));
  EXPECT_LE(v1["process_open_fds"], std::max(fds_before, fds_after));
  EXPECT_LE(v1["process_start_time_seconds"], now_seconds() + 1);
  EXPECT_GT(v1["process_start_time_seconds"], now_seconds() - 24 * 3600);
  EXPECT_GE(v1["process_max_fds"], v1["process_open_fds"]);

  // Changes the test makes show up with the right units.
  std::vector<int> pipes(100);
  for (size_t i = 0; i < pipes.size(); i += 2) ASSERT_EQ(::pipe(&pipes[i]), 0);
  absl::Notification release;
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) threads.emplace_back([&] { release.WaitForNotification(); });
  // 64 MiB is above glibc's mmap threshold: fresh pages, resident only once written.
  constexpr size_t kBytes = 64 << 20;
  char* block = static_cast<char*>(::malloc(kBytes));
  ASSERT_NE(block, nullptr);
  std::memset(block, 1, kBytes);
  asm volatile("" : : "r"(block) : "memory");  // the writes must happen
  // Burn 0.3 s of CPU (measured, not slept).
  timespec start{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &start);
  for (volatile uint64_t spin = 0;; ++spin) {
    timespec now{};
    ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
    if ((now.tv_sec - start.tv_sec) + (now.tv_nsec - start.tv_nsec) / 1e9 >= 0.3) break;
  }

  const int threads_before2 = ThreadsFromStatus();
  std::map<std::string, double> v2 = Values(collector.Collect());
  const int threads_after2 = ThreadsFromStatus();
  EXPECT_GE(v2["process_open_fds"] - v1["process_open_fds"], 100);
  EXPECT_GE(v2["process_threads"], std::min(threads_before2, threads_after2));
  EXPECT_LE(v2["process_threads"], std::max(threads_before2, threads_after2));
  EXPECT_GE(v2["process_threads"], 5);  // main + the four above
  EXPECT_GE(v2["process_resident_memory_bytes"] - v1["process_resident_memory_bytes"],
            60.0 * (1 << 20));
  EXPECT_GE(v2["process_cpu_seconds_total"] - v1["process_cpu_seconds_total"], 0.25);
  EXPECT_EQ(v2["process_start_time_seconds"], v1["process_start_time_seconds"]);

  release.Notify();
  for (std::thread& thread : threads) thread.join();
  for (int fd : pipes) ::close(fd);
  ::free(block);
}

}  // namespace
}  // namespace inspection::metrics
