#ifndef TESTS_SUPPORT_SUBPROCESS_H_
#define TESTS_SUPPORT_SUBPROCESS_H_

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace inspection::testing {

// A child process started by a test, with its stdout and stderr captured. The
// destructor stops it by its pid (SIGTERM, then SIGKILL after a deadline) so no test
// leaves a process behind.
class Subprocess {
 public:
  // argv[0] is the program path. `env` entries ("NAME=value") are added to the
  // inherited environment.
  Subprocess(std::vector<std::string> argv, std::vector<std::string> env = {});
  ~Subprocess();
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  pid_t pid() const { return pid_; }

  // Reads output until a line of stdout or stderr satisfies `match` (returns that
  // line) or the deadline passes or the process exits (returns empty).
  std::string WaitForLine(const std::function<bool(const std::string&)>& match,
                          std::chrono::milliseconds deadline);

  // Sends `signal` and waits for the exit. Returns the exit code (128 + signal when
  // killed by a signal), or -1 if it did not exit within the deadline.
  int Stop(int signal, std::chrono::milliseconds deadline);
  // Waits for the process to exit on its own; -1 on timeout.
  int Wait(std::chrono::milliseconds deadline);

  // Everything read so far from stdout and stderr.
  std::string output() const;

  // Number of threads of the process now (from /proc/<pid>/status), -1 if unknown.
  int ThreadCount() const;
  // Resident memory of the process now (VmRSS of /proc/<pid>/status), KiB; -1 if unknown.
  int64_t ResidentKiB() const;

 private:
  // Reads the child's output until EOF, so a chatty child never blocks on a full pipe.
  void ReadLoop();

  pid_t pid_ = -1;
  int out_fd_ = -1;
  std::thread reader_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::string output_;              // guarded by mu_
  std::string partial_;             // guarded by mu_
  std::vector<std::string> lines_;  // guarded by mu_
  bool eof_ = false;                // guarded by mu_
  size_t lines_seen_ = 0;
  int exit_code_ = -1;
  bool exited_ = false;
};

}  // namespace inspection::testing

#endif  // TESTS_SUPPORT_SUBPROCESS_H_
