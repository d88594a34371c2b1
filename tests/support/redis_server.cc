#include "tests/support/redis_server.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "tests/support/wait.h"

namespace inspection::testing {
namespace {

constexpr std::chrono::seconds kStartDeadline{20};
constexpr std::chrono::seconds kStopDeadline{10};

// Subprocess execs a path, not a name: look redis-server up on PATH.
std::string FindOnPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

}  // namespace

std::unique_ptr<RedisServer> RedisServer::Create(std::string* error,
                                                 std::vector<std::string> extra_args) {
  const std::string binary = FindOnPath("redis-server");
  if (binary.empty()) {
    *error = "redis-server is not on PATH (apt-get install redis-server)";
    return nullptr;
  }
  return std::unique_ptr<RedisServer>(new RedisServer(binary, std::move(extra_args)));
}

std::unique_ptr<RedisServer> RedisServer::LaunchOnFreePort(std::unique_ptr<RedisServer> server,
                                                           std::string* error) {
  if (server == nullptr) return nullptr;
  // The port is free when the OS hands it out but another process may bind it before
  // redis-server does: one retry with a new port makes that race harmless.
  for (int attempt = 0; attempt < 2; ++attempt) {
    const int port = UnusedClosedPort();
    if (port <= 0) {
      *error = "no free loopback port";
      return nullptr;
    }
    if (server->Launch(port, error)) return server;
  }
  return nullptr;
}

std::unique_ptr<RedisServer> RedisServer::Start(std::string* error,
                                                std::vector<std::string> extra_args) {
  return LaunchOnFreePort(Create(error, std::move(extra_args)), error);
}

std::unique_ptr<RedisServer> RedisServer::StartReplica(std::string* error,
                                                       const RedisServer& primary,
                                                       std::vector<std::string> extra_args) {
  extra_args.insert(extra_args.begin(),
                    {"--replicaof", "127.0.0.1", std::to_string(primary.port())});
  std::unique_ptr<RedisServer> server = Create(error, std::move(extra_args));
  if (server == nullptr) return nullptr;
  // A full sync, or (a fresh diskless primary) a partial one.
  server->ready_lines_ = {"MASTER <-> REPLICA sync: Finished with success",
                          "MASTER <-> REPLICA sync: Master accepted a Partial Resynchronization"};
  return LaunchOnFreePort(std::move(server), error);
}

std::unique_ptr<RedisServer> RedisServer::StartSentinel(std::string* error, const std::string& dir,
                                                        const std::string& master_name,
                                                        const RedisServer& primary, int quorum,
                                                        int down_after_ms,
                                                        std::vector<std::string> conf_lines) {
  std::unique_ptr<RedisServer> server = Create(error, {});
  if (server == nullptr) return nullptr;
  static std::atomic<int> counter{0};
  server->sentinel_config_ = dir + "/sentinel-" + std::to_string(++counter) + ".conf";
  std::ofstream conf(server->sentinel_config_);
  conf << "sentinel monitor " << master_name << " 127.0.0.1 " << primary.port() << " " << quorum
       << "\n"
       << "sentinel down-after-milliseconds " << master_name << " " << down_after_ms << "\n"
       << "sentinel failover-timeout " << master_name << " " << 4 * down_after_ms << "\n"
       << "sentinel resolve-hostnames no\n";
  for (const std::string& line : conf_lines) conf << line << "\n";
  conf.close();
  if (!conf) {
    *error = "cannot write " + server->sentinel_config_;
    return nullptr;
  }
  server->ready_lines_ = {"+monitor master"};
  return LaunchOnFreePort(std::move(server), error);
}

RedisServer::~RedisServer() {
  if (process_ != nullptr) Stop(SIGTERM);
}

pid_t RedisServer::pid() const { return process_ != nullptr ? process_->pid() : -1; }

std::string RedisServer::Url(const std::string& suffix) const {
  return "redis://127.0.0.1:" + std::to_string(port_) + suffix;
}

bool RedisServer::Launch(int port, std::string* error) {
  std::vector<std::string> argv;
  if (sentinel_config_.empty()) {
    argv = {binary_,        "--port", std::to_string(port), "--bind", "127.0.0.1",  "--save", "",
            "--appendonly", "no",     "--daemonize",        "no",     "--loglevel", "notice"};
  } else {
    // A sentinel takes its config file first and no persistence options.
    argv = {binary_,  sentinel_config_, "--sentinel",  "--port", std::to_string(port),
            "--bind", "127.0.0.1",      "--daemonize", "no",     "--loglevel",
            "notice"};
  }
  argv.insert(argv.end(), extra_args_.begin(), extra_args_.end());
  auto process = std::make_unique<Subprocess>(argv);
  const std::string ready = process->WaitForLine(
      [this](const std::string& line) {
        for (const std::string& ready : ready_lines_) {
          if (line.find(ready) != std::string::npos) return true;
        }
        return false;
      },
      kStartDeadline);
  if (ready.empty()) {
    *error =
        "redis-server did not start on port " + std::to_string(port) + ": " + process->output();
    // ~Subprocess stops it by pid if it is still running.
    return false;
  }
  port_ = port;
  process_ = std::move(process);
  return true;
}

bool RedisServer::Stop(int signal) {
  if (process_ == nullptr) return true;
  // A server stopped with SIGSTOP by a test would ignore SIGTERM until continued.
  ::kill(process_->pid(), SIGCONT);
  int code = process_->Stop(signal, kStopDeadline);
  if (code == -1) code = process_->Stop(SIGKILL, kStopDeadline);
  process_.reset();
  return code != -1;
}

bool RedisServer::Restart(std::string* error) {
  if (process_ != nullptr && !Stop(SIGTERM)) {
    *error = "could not stop the running server";
    return false;
  }
  return Launch(port_, error);
}

}  // namespace inspection::testing
