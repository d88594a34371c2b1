#ifndef TESTS_SUPPORT_REDIS_SERVER_H_
#define TESTS_SUPPORT_REDIS_SERVER_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "tests/support/subprocess.h"

namespace inspection::testing {

// A redis-server child process on a loopback port, without persistence (nothing is
// written to disk; a restart starts empty). Not daemonized: the test owns the pid and
// the destructor stops it by that pid. Not thread-safe (drive it from the test thread).
class RedisServer {
 public:
  // Starts redis-server (found on PATH) on a free port picked by the OS, retrying once
  // with another port if the port was taken between picking and binding. `extra_args`
  // are appended to the command line (e.g. {"--requirepass", "s3cret"}). Returns nullptr
  // and sets `*error` when it cannot start.
  static std::unique_ptr<RedisServer> Start(std::string* error,
                                            std::vector<std::string> extra_args = {});
  // A replica of `primary` (replicaof 127.0.0.1 primary.port()), ready once it has
  // finished its first sync with the primary.
  static std::unique_ptr<RedisServer> StartReplica(std::string* error, const RedisServer& primary,
                                                   std::vector<std::string> extra_args = {});
  // A Redis Sentinel (redis-server --sentinel) monitoring `primary` under `master_name`
  // with quorum `quorum`, `down_after_ms` as down-after-milliseconds and a failover
  // timeout of 4 x that. Its config file (sentinels rewrite theirs) lives in `dir`.
  // `conf_lines` are added to the file (e.g. "requirepass s3cret").
  static std::unique_ptr<RedisServer> StartSentinel(std::string* error, const std::string& dir,
                                                    const std::string& master_name,
                                                    const RedisServer& primary, int quorum,
                                                    int down_after_ms,
                                                    std::vector<std::string> conf_lines = {});
  ~RedisServer();
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  int port() const { return port_; }
  // -1 while stopped.
  pid_t pid() const;
  // "redis://127.0.0.1:<port>" plus `suffix` ("/0?stream=x").
  std::string Url(const std::string& suffix = "") const;

  // Stops the server by its pid with `signal` (SIGTERM: orderly; SIGKILL: a crash) and
  // waits for the exit. True when it exited.
  bool Stop(int signal);
  // Starts it again on the same port (empty: no persistence). False with `*error` set
  // when it does not come up (e.g. someone else took the port meanwhile).
  bool Restart(std::string* error);

 private:
  RedisServer(std::string binary, std::vector<std::string> extra_args)
      : binary_(std::move(binary)), extra_args_(std::move(extra_args)) {}
  // A server not started yet (redis-server looked up on PATH); null with `*error` set.
  static std::unique_ptr<RedisServer> Create(std::string* error,
                                             std::vector<std::string> extra_args);
  // Launches `server` on a port the OS picks (a second port if the first was taken).
  static std::unique_ptr<RedisServer> LaunchOnFreePort(std::unique_ptr<RedisServer> server,
                                                       std::string* error);
  // Starts on `port` and waits for the ready line ("Ready to accept connections", for a
  // replica its sync, for a sentinel "+monitor"); false when the process exits or does not
  // get ready in time.
  bool Launch(int port, std::string* error);

  const std::string binary_;
  const std::vector<std::string> extra_args_;
  std::string sentinel_config_;  // non-empty: a sentinel with this config file
  // Any of these in a line of its output means it is ready.
  std::vector<std::string> ready_lines_ = {"Ready to accept connections"};
  int port_ = -1;
  std::unique_ptr<Subprocess> process_;
};

}  // namespace inspection::testing

#endif  // TESTS_SUPPORT_REDIS_SERVER_H_
