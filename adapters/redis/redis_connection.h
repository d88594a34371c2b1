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
#include "adapters/redis/redis_status.h"
#include "adapters/redis/redis_url.h"

namespace inspection::redis {

struct RedisTimeouts {
  absl::Duration connect = absl::Seconds(2);
  // Socket send/receive timeout of each command: a Redis that stops answering gives
  // Unavailable after this long instead of hanging the caller.
  absl::Duration command = absl::Seconds(2);
};

// How a store's connections find the primary and what an acknowledged write waits for.
// One set for the whole process (config section redis.*), shared by the event log, the
// work ledger and the idempotency store.
struct RedisOptions {
  RedisTimeouts timeouts;
  // AUTH password of the sentinels of a redis+sentinel:// URL ("" = none). The data
  // servers' password is the URL's.
  std::string sentinel_password;
  // Replicas that must hold a write before it is acknowledged (WaitForReplicas): WAIT
  // n replica_ack_timeout after the write. -1 = auto: 1 when the primary reported a
  // connected replica when the connection was opened (ROLE), else 0. 0 = acknowledge what
  // the primary has (a primary that dies before its replica copied the write loses it).
  int min_replicas_acked = -1;
  absl::Duration replica_ack_timeout = absl::Seconds(1);
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

// One synchronous hiredis connection to the primary, authenticated and on the URL's db.
// Thread-compatible, not thread-safe: one thread at a time (the pool hands it out).
class RedisConnection {
 public:
  // For redis+sentinel:// first asks the sentinels, in turn, where the primary called
  // url.master_name is (AUTH with options.sentinel_password when set); then connects to
  // that server (or to the redis:// URL's) within the connect timeout, AUTH (when the URL
  // has a password), SELECT (when db != 0) and ROLE: a server that is not the primary is
  // refused (Unavailable; with sentinels a failover is under way, the next open asks them
  // again), so nothing is ever written to a replica. A server that refuses ROLE (an ACL
  // without it) is taken as a primary without replicas. Unavailable when no sentinel or
  // server can be reached or answers in time; PermissionDenied when AUTH is refused;
  // InvalidArgument when SELECT is refused; FailedPrecondition when every sentinel that
  // answered does not know the master name. Messages name `url.Describe()` and the
  // addresses, never a password.
  static absl::StatusOr<std::unique_ptr<RedisConnection>> Open(const RedisUrl& url,
                                                               const RedisOptions& options);
  static absl::StatusOr<std::unique_ptr<RedisConnection>> Open(const RedisUrl& url,
                                                               const RedisTimeouts& timeouts) {
    return Open(url, RedisOptions{timeouts});
  }
  // Connects to `address` with the URL's credentials and db, and nothing else (no sentinel,
  // no ROLE): `description` names it in messages. What Open and the sentinel lookup use.
  static absl::StatusOr<std::unique_ptr<RedisConnection>> Connect(const RedisUrl& url,
                                                                  const RedisAddress& address,
                                                                  const RedisTimeouts& timeouts,
                                                                  std::string description);
  ~RedisConnection();
  RedisConnection(const RedisConnection&) = delete;
  RedisConnection& operator=(const RedisConnection&) = delete;

  // Sends one command (binary-safe arguments) and reads its reply. An error REPLY comes
  // back as a reply of type REDIS_REPLY_ERROR: what it means is the caller's business.
  // A transport failure (connection lost, timeout) returns Unavailable and marks the
  // connection broken(): its replies may be out of step, so it must not be used again.
  // A READONLY error reply (the server was demoted to a replica by a failover) marks it
  // demoted(): the pool then drops it and its idle siblings and opens anew.
  absl::StatusOr<RedisReply> Command(const std::vector<std::string>& args);

  // Sends all `commands` in one write and reads their replies in order (pipelining).
  // Same failure rules as Command().
  absl::StatusOr<std::vector<RedisReply>> Pipeline(
      const std::vector<std::vector<std::string>>& commands);

  // After the write(s) an acknowledgement promises: WAIT until required_acks() replicas
  // have every write this connection made, at most RedisOptions::replica_ack_timeout. OK at
  // once when none are required. Unavailable, carrying kNotReplicatedPayloadUrl, when fewer
  // confirmed in time (the message says how many of how many); Unavailable as Command's
  // when the connection fails.
  absl::Status WaitForReplicas();
  // Replicas WaitForReplicas waits for (RedisOptions::min_replicas_acked; auto resolved when
  // the connection opens, and again as the primary's replicas come and go).
  int required_acks() const { return required_acks_; }

  // Socket timeout of the following commands (a blocking XREAD needs its block time
  // plus the usual command timeout).
  absl::Status SetCommandTimeout(absl::Duration timeout);

  bool broken() const { return broken_; }
  // True when broken() because the server had closed the connection (EOF, reset,
  // broken pipe), which is what an idle pooled connection sees after a server restart.
  bool closed_by_server() const { return closed_by_server_; }
  // A reply said READONLY: the server is no longer the primary.
  bool demoted() const { return demoted_; }
  // Commands completed since Open() (the handshake not counted).
  int64_t completed() const { return completed_; }
  // The server's address ("host:port"), for messages.
  const std::string& description() const { return description_; }

 private:
  friend class RedisConnectionPool;

  RedisConnection(redisContext* context, std::string description)
      : context_(context), description_(std::move(description)) {}
  // Marks the connection broken and describes the transport error of `context_`.
  absl::Status TransportError(const char* what, int saved_errno);
  void NoteErrorReply(const redisReply& reply);

  redisContext* const context_;
  const std::string description_;
  bool broken_ = false;
  bool closed_by_server_ = false;
  bool demoted_ = false;
  int64_t completed_ = 0;
  // Re-resolves an auto required_acks_ (ROLE: 1 with a connected replica, else 0).
  void RefreshAutoAcks();

  int required_acks_ = 0;
  // min_replicas_acked -1: required_acks_ follows the primary's replicas, looked at again
  // at most every kAutoAcksRefresh and after a WAIT that fell short.
  bool auto_acks_ = false;
  absl::Time acks_checked_at_ = absl::InfinitePast();
  absl::Duration command_timeout_ = absl::Seconds(2);
  absl::Duration replica_ack_timeout_ = absl::Seconds(1);
  uint64_t generation_ = 0;  // the pool generation it was opened in (set by the pool)
};

// Where the sentinels of `url` say its primary is: the first sentinel that answers, in the
// order given. Unavailable when none answers; FailedPrecondition when those that answered do
// not know url.master_name.
absl::StatusOr<RedisAddress> AskSentinelsForPrimary(const RedisUrl& url,
                                                    const RedisOptions& options);

// Connections to one Redis primary, reused across calls. Thread-safe.
//
// Connections are created on demand, so there are as many as there are concurrent
// callers; at most `max_idle` are kept between calls. A broken connection is never
// given back: the next call simply opens a new one, so a lost connection costs one
// failed call at most and never poisons the pool. With sentinels every new connection
// asks them where the primary is, so a failover is followed by the next open: a lost
// connection or a READONLY answer drops every idle connection (they point at the old
// primary) and the next call opens anew.
class RedisConnectionPool {
 public:
  RedisConnectionPool(RedisUrl url, RedisOptions options, size_t max_idle)
      : url_(std::move(url)), options_(std::move(options)), max_idle_(max_idle) {}
  RedisConnectionPool(RedisUrl url, RedisTimeouts timeouts, size_t max_idle)
      : RedisConnectionPool(std::move(url), RedisOptions{timeouts}, max_idle) {}

  // Runs `fn(RedisConnection&) -> absl::StatusOr<T>` on a pooled connection and takes the
  // connection back. When the connection turns out to have been closed by the server
  // while it sat idle (a Redis restart, an idle timeout, a dead primary), or the server
  // answered READONLY (demoted by a failover), every idle connection is dropped and `fn`
  // runs once more on a fresh connection: so `fn` must be safe to repeat. Unavailable
  // when no connection can be opened.
  template <typename T, typename Fn>
  absl::StatusOr<T> Run(Fn fn) {
    absl::StatusOr<std::unique_ptr<RedisConnection>> connection = Acquire();
    if (!connection.ok()) return connection.status();
    const bool reused = (*connection)->completed() > 0;
    absl::StatusOr<T> result = fn(**connection);
    if (((*connection)->broken() && (*connection)->closed_by_server() && reused) ||
        (*connection)->demoted()) {
      DropIdle();
      connection = Open();
      if (!connection.ok()) return connection.status();
      result = fn(**connection);
    }
    Release(std::move(*connection));
    return result;
  }

  // Run, for a write the caller is about to acknowledge: when `fn` succeeds, WAIT on the
  // same connection for RedisOptions::min_replicas_acked replicas
  // (RedisConnection::WaitForReplicas), and return its refusal instead of `fn`'s result when
  // fewer confirm. `fn` turns an error reply it cannot acknowledge into a failed status, so
  // that nothing is waited for after it.
  template <typename T, typename Fn>
  absl::StatusOr<T> RunAcknowledged(Fn fn) {
    return Run<T>([&fn](RedisConnection& connection) -> absl::StatusOr<T> {
      absl::StatusOr<T> result = fn(connection);
      if (!result.ok()) return result;
      if (absl::Status replicated = connection.WaitForReplicas(); !replicated.ok()) {
        return replicated;
      }
      return result;
    });
  }

  // Closes every idle connection.
  void DropIdle() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  absl::StatusOr<std::unique_ptr<RedisConnection>> Acquire() ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<std::unique_ptr<RedisConnection>> Open() ABSL_LOCKS_EXCLUDED(mu_);
  void Release(std::unique_ptr<RedisConnection> connection) ABSL_LOCKS_EXCLUDED(mu_);

  const RedisUrl url_;
  const RedisOptions options_;
  const size_t max_idle_;
  absl::Mutex mu_;
  std::vector<std::unique_ptr<RedisConnection>> idle_ ABSL_GUARDED_BY(mu_);
  // Bumped by DropIdle(): connections opened before are not taken back either.
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace inspection::redis

#endif  // ADAPTERS_REDIS_REDIS_CONNECTION_H_
