#include "tests/support/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace inspection::testing {

Subprocess::Subprocess(std::vector<std::string> argv, std::vector<std::string> env) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return;
  // Build everything the child needs before fork(): only async-signal-safe calls after.
  std::vector<char*> args;
  for (auto& arg : argv) args.push_back(arg.data());
  args.push_back(nullptr);
  std::vector<std::string> environment;
  for (char** e = environ; *e != nullptr; ++e) environment.emplace_back(*e);
  for (auto& e : env) environment.push_back(e);
  std::vector<char*> envp;
  for (auto& e : environment) envp.push_back(e.data());
  envp.push_back(nullptr);

  pid_ = fork();
  if (pid_ == 0) {
    dup2(fds[1], STDOUT_FILENO);
    dup2(fds[1], STDERR_FILENO);
    // The test process may block signals in its threads; the child starts clean.
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    execve(args[0], args.data(), envp.data());
    _exit(127);
  }
  close(fds[1]);
  out_fd_ = fds[0];
  reader_ = std::thread([this] { ReadLoop(); });
}

Subprocess::~Subprocess() {
  if (pid_ > 0 && !exited_) {
    if (Stop(SIGTERM, std::chrono::seconds(10)) == -1) Stop(SIGKILL, std::chrono::seconds(10));
  }
  // The child has exited, so its end of the pipe is closed and the reader sees EOF.
  if (reader_.joinable()) reader_.join();
  if (out_fd_ >= 0) close(out_fd_);
}

void Subprocess::ReadLoop() {
  char buffer[8192];
  for (;;) {
    ssize_t n = read(out_fd_, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    std::lock_guard<std::mutex> lock(mu_);
    if (n <= 0) {
      eof_ = true;
      cv_.notify_all();
      return;
    }
    output_.append(buffer, static_cast<size_t>(n));
    partial_.append(buffer, static_cast<size_t>(n));
    size_t newline;
    while ((newline = partial_.find('\n')) != std::string::npos) {
      lines_.push_back(partial_.substr(0, newline));
      partial_.erase(0, newline + 1);
    }
    cv_.notify_all();
  }
}

std::string Subprocess::output() const {
  std::lock_guard<std::mutex> lock(mu_);
  return output_;
}

std::string Subprocess::WaitForLine(const std::function<bool(const std::string&)>& match,
                                    std::chrono::milliseconds deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  std::string found;
  cv_.wait_for(lock, deadline, [&] {
    for (; lines_seen_ < lines_.size(); ++lines_seen_) {
      if (match(lines_[lines_seen_])) {
        found = lines_[lines_seen_++];
        return true;
      }
    }
    return eof_;
  });
  return found;
}

int Subprocess::Wait(std::chrono::milliseconds deadline) {
  if (exited_) return exit_code_;
  // One deadline for both steps. The child's exit closes its output: wait for EOF on the
  // condition variable, then reap. A child that closed its output but still runs is
  // reaped when it exits.
  const auto end = std::chrono::steady_clock::now() + deadline;
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_until(lock, end, [&] { return eof_; });
  }
  int status = 0;
  for (;;) {
    pid_t done = waitpid(pid_, &status, WNOHANG);
    if (done == pid_) break;
    if (std::chrono::steady_clock::now() >= end) return -1;
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, std::chrono::milliseconds(10));  // rare: output closed before exit
  }
  exited_ = true;
  exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return exit_code_;
}

int Subprocess::Stop(int signal, std::chrono::milliseconds deadline) {
  if (pid_ <= 0) return -1;
  if (!exited_) kill(pid_, signal);
  return Wait(deadline);
}

namespace {

// The number of a "Name:   123 kB"-style line of /proc/<pid>/status; -1 if absent.
int64_t StatusField(pid_t pid, const std::string& name) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(name, 0) == 0) return std::stoll(line.substr(name.size()));
  }
  return -1;
}

}  // namespace

int Subprocess::ThreadCount() const { return static_cast<int>(StatusField(pid_, "Threads:")); }

int64_t Subprocess::ResidentKiB() const { return StatusField(pid_, "VmRSS:"); }

}  // namespace inspection::testing
