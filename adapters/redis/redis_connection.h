#ifndef ADAPTERS_REDIS_REDIS_CONNECTION_H_
#define ADAPTERS_REDIS_REDIS_CONNECTION_H_

#include <hiredis/hiredis.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "adapters/redis/redis_url.h"

namespace inspection::redis {

struct RedisTimeouts {
  absl::Duration connect = absl::Seconds(2);
  // Socket send/receive timeout of each command: a Redis that stops answering gives
  // Unavailable after this long instead of hanging the caller.
  absl::Duration command = absl::Seconds(2);
};

struct RedisReplyDeleter {
  void operator()(redisReply* reply) const { freeReplyObject(reply); }
};
using RedisReply = std::unique_ptr<redisReply, RedisReplyDeleter>;

// Maps an error reply ("-ERR ...") to a Status: LOADING, BUSY, MISCONF, READONLY, OOM,
// MASTERDOWN, TRYAGAIN, CLUSTERDOWN, NOREPLICAS -> Unavailable (the server cannot take
// writes now; retrying later may work); NOAUTH, WRONGPASS, NOPERM -> PermissionDenied;
// WRONGTYPE -> FailedPrecondition; anything else -> Internal. `what` prefixes the message.
absl::Status RedisErrorReplyToStatus(const redisReply& reply, const std::string& what);

// One synchronous hiredis connection, authenticated and on the URL's db.
// Thread-compatible, not thread-safe: one thread at a time (the pool hands it out).
class RedisConnection {
 public:
  // Connects within `timeouts.connect`, then AUTH (when the URL has a password) and
  // SELECT (when db != 0). Unavailable when the server cannot be reached or does not
  // answer in time; PermissionDenied when AUTH is refused; InvalidArgument when SELECT
  // is refused. Messages name `url.Describe()`, never the password.
  static absl::StatusOr<std::unique_ptr<RedisConnection>> Open(const RedisUrl& url,
                                                               const RedisTimeouts& timeouts);
  ~RedisConnection();
  RedisConnection(const RedisConnection&) = delete;
  RedisConnection& operator=(const RedisConnection&) = delete;

  // Sends one command (binary-safe arguments) and reads its reply. An error REPLY comes
  // back as a reply of type REDIS_REPLY_ERROR: what it means is the caller's business.
  // A transport failure (connection lost, timeout) returns Unavailable and marks the
  // connection broken(): its replies may be out of step, so it must not be used again.
  absl::StatusOr<RedisReply> Command(const std::vector<std::string>& args);

  // Sends all `commands` in one write and reads their replies in order (pipelining).
  // Same failure rules as Command().
  absl::StatusOr<std::vector<RedisReply>> Pipeline(
      const std::vector<std::vector<std::string>>& commands);

  // Socket timeout of the following commands (a blocking XREAD needs its block time
  // plus the usual command timeout).
  absl::Status SetCommandTimeout(absl::Duration timeout);

  bool broken() const { return broken_; }
  // True when broken() because the server had closed the connection (EOF, reset,
  // broken pipe), which is what an idle pooled connection sees after a server restart.
  bool closed_by_server() const { return closed_by_server_; }
  // Commands completed since Open() (the handshake not counted).
  int64_t completed() const { return completed_; }

 private:
  friend class RedisConnectionPool;

  RedisConnection(redisContext* context, std::string description)
      : context_(context), description_(std::move(description)) {}
  // Marks the connection broken and describes the transport error of `context_`.
  absl::Status TransportError(const char* what, int saved_errno);

  redisContext* const context_;
  const std::string description_;
  bool broken_ = false;
  bool closed_by_server_ = false;
  int64_t completed_ = 0;
  uint64_t generation_ = 0;  // the pool generation it was opened in (set by the pool)
};

// Connections to one Redis server, reused across calls. Thread-safe.
//
// Connections are created on demand, so there are as many as there are concurrent
// callers; at most `max_idle` are kept between calls. A broken connection is never
// given back: the next call simply opens a new one, so a lost connection costs one
// failed call at most and never poisons the pool.
class RedisConnectionPool {
 public:
  RedisConnectionPool(RedisUrl url, RedisTimeouts timeouts, size_t max_idle)
      : url_(std::move(url)), timeouts_(timeouts), max_idle_(max_idle) {}

  // Runs `fn(RedisConnection&) -> absl::StatusOr<T>` on a pooled connection and takes the
  // connection back. When the connection turns out to have been closed by the server
  // while it sat idle (a Redis restart, an idle timeout), every idle connection is
  // dropped and `fn` runs once more on a fresh connection: so `fn` must be safe to
  // repeat. Unavailable when no connection can be opened.
  template <typename T, typename Fn>
  absl::StatusOr<T> Run(Fn fn) {
    absl::StatusOr<std::unique_ptr<RedisConnection>> connection = Acquire();
    if (!connection.ok()) return connection.status();
    const bool reused = (*connection)->completed() > 0;
    absl::StatusOr<T> result = fn(**connection);
    if ((*connection)->broken() && (*connection)->closed_by_server() && reused) {
      DropIdle();
      connection = Open();
      if (!connection.ok()) return connection.status();
      result = fn(**connection);
    }
    Release(std::move(*connection));
    return result;
  }

  // Closes every idle connection.
  void DropIdle() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  absl::StatusOr<std::unique_ptr<RedisConnection>> Acquire() ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<std::unique_ptr<RedisConnection>> Open() ABSL_LOCKS_EXCLUDED(mu_);
  void Release(std::unique_ptr<RedisConnection> connection) ABSL_LOCKS_EXCLUDED(mu_);

  const RedisUrl url_;
  const RedisTimeouts timeouts_;
  const size_t max_idle_;
  absl::Mutex mu_;
  std::vector<std::unique_ptr<RedisConnection>> idle_ ABSL_GUARDED_BY(mu_);
  // Bumped by DropIdle(): connections opened before are not taken back either.
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace inspection::redis

#endif  // ADAPTERS_REDIS_REDIS_CONNECTION_H_
