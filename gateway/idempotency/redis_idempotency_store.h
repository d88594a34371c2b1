#ifndef GATEWAY_IDEMPOTENCY_REDIS_IDEMPOTENCY_STORE_H_
#define GATEWAY_IDEMPOTENCY_REDIS_IDEMPOTENCY_STORE_H_

#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "adapters/redis/redis_connection.h"
#include "adapters/redis/redis_url.h"
#include "gateway/idempotency/idempotency_store.h"

namespace inspection::pipeline {

inline constexpr char kDefaultIdempotencyPrefix[] = "inspection:";

// Where the store lives, parsed from
//   redis://[[user]:password@]host[:port][/db][?prefix=name]
// `user`, `password` and `prefix` are percent-decoded; the credentials end at the last
// '@'; an IPv6 host is written in brackets. Port defaults to 6379, db to 0; `prefix` is
// empty when the URL has none (RedisIdempotencyOptions::prefix applies). Plain value type.
struct RedisIdempotencyUrl {
  // The server (redis://) or the sentinels (redis+sentinel://), credentials and db, as the
  // Redis client reads them.
  redis::RedisUrl server;
  std::string prefix;  // ?prefix=; "" when not given

  // "redis://host:port/db" or "redis+sentinel://host:port,.../MASTER/db": never the user or
  // the password.
  std::string Describe() const;
};

// InvalidArgument naming the offending part; the message never holds the URL (it may
// carry the password).
absl::StatusOr<RedisIdempotencyUrl> ParseRedisIdempotencyUrl(const std::string& url);

struct RedisIdempotencyOptions {
  // How long a finished outcome is kept (the done record's Redis TTL).
  absl::Duration ttl = absl::Hours(24);
  // How long a claim (a "pending" record) lives when its leader never finishes it (the
  // process died): longer than any vendor call, including retries. Waiters on such a
  // claim get ABORTED once it is gone.
  absl::Duration claim_ttl = absl::Minutes(5);
  // Key prefix, unless the URL has ?prefix=. Keys are
  // "<prefix>idem:<account length>:<account><key>".
  std::string prefix = kDefaultIdempotencyPrefix;
  // The sentinels' password and what a stored outcome waits for (WAIT; the timeouts are
  // connect_timeout and command_timeout below).
  redis::RedisOptions redis;
  absl::Duration connect_timeout = absl::Seconds(1);
  // Socket timeout of each command: Begin() returns kUnavailable after about this long
  // when Redis stops answering.
  absl::Duration command_timeout = absl::Seconds(1);
  // Waiting for another replica's claim: the first poll after this, then the interval
  // doubles up to `max_poll_interval`.
  absl::Duration first_poll_interval = absl::Milliseconds(10);
  absl::Duration max_poll_interval = absl::Milliseconds(250);
  // Told about every Redis failure, with details a caller does not see (Begin() answers
  // a generic UNAVAILABLE; a Complete()/Abandon() that could not be stored, failed polls
  // are seen by nobody else). Messages name host:port/db, never the password. May be null;
  // must be thread-safe and must not call back into the store.
  std::function<void(const absl::Status&)> on_error;
};

namespace internal {
class RedisIdempotencyConnections;
}  // namespace internal

// IdempotencyStore on Redis, shared by every gateway replica that uses the same Redis
// and prefix. One Redis hash per (account, key):
//   state=pending, fp, claim            while the leader works (TTL: claim_ttl)
//   state=done, fp, claim, code, msg, details, resp   afterwards (TTL: ttl)
// Begin/Complete/Abandon are one Lua script each, so claiming is atomic across replicas.
//
// Waiting (kWait):
//  - for a key this process leads, the waiter is completed directly by Complete() or
//    Abandon(), with the leader's outcome (like the in-memory store);
//  - for another replica's claim, one background thread per store polls the keys being
//    waited for (one pipelined round trip per tick; per key the interval starts at
//    first_poll_interval and doubles up to max_poll_interval). The waiter follows the
//    claim it saw in Begin(): it gets that claim's stored outcome, or ABORTED ("the
//    first call with this idempotency key did not finish; retry") when the claim ends
//    without one: the leader abandoned it (nothing reached the vendor), its process died
//    and the claim expired, or the key now belongs to another claim or fingerprint. A
//    retry with the same key then leads, waits or replays as usual. When Redis stays
//    unreachable past the claim's lifetime, the waiter gets UNAVAILABLE.
//
// Threads: Begin() does one synchronous round trip on the calling thread (a pooled
// connection). Complete() and Abandon() never touch the network: they are called on the
// HTTP transport's event-loop thread, which must not block. They complete local waiters
// at once and queue the Redis write for the store's background thread (which also polls
// remote waits). Until that write has landed, Begin() in this process answers from
// memory (replay or mismatch for a completed key); another replica that looks in between
// sees the claim still pending and simply waits for it. Callbacks run outside any lock,
// on the thread calling Complete()/Abandon() or on the background thread. Thread-safe.
//
// Redis unreachable (refused, timed out, error reply): Begin() returns kUnavailable with
// an UNAVAILABLE `replay` status within about connect_timeout + command_timeout; it never
// blocks longer. A Complete()/Abandon() write that fails is reported to `on_error` (the
// claim then expires after claim_ttl); local waiters have their outcome regardless.
class RedisIdempotencyStore final : public IdempotencyStore {
 public:
  // Parses `url` (InvalidArgument when malformed) and tries one connection: a refused
  // AUTH is PermissionDenied and a refused SELECT InvalidArgument, but an unreachable
  // Redis is not an error here (the gateway may start before Redis; Begin() reports
  // kUnavailable meanwhile).
  static absl::StatusOr<std::unique_ptr<RedisIdempotencyStore>> Open(
      const std::string& url, RedisIdempotencyOptions options = {});

  // Writes what Complete()/Abandon() queued (bounded by the timeouts), completes the
  // waiters still waiting with UNAVAILABLE (shutting down) and stops the background
  // thread. Claims this process still holds are left to expire.
  ~RedisIdempotencyStore() override;
  RedisIdempotencyStore(const RedisIdempotencyStore&) = delete;
  RedisIdempotencyStore& operator=(const RedisIdempotencyStore&) = delete;

  Decision Begin(const std::string& account, const std::string& key, const std::string& fingerprint,
                 IdempotentOutcome* replay,
                 absl::AnyInvocable<void(const IdempotentOutcome&)> on_ready) override;
  void Complete(const std::string& account, const std::string& key,
                IdempotentOutcome outcome) override;
  void Abandon(const std::string& account, const std::string& key,
               const IdempotentOutcome& outcome) override;

  // The Redis key of (account, key).
  std::string RedisKey(const std::string& account, const std::string& key) const;
  // Waiters on other replicas' claims (for tests and metrics).
  size_t remote_waiters() const;
  // Waits until every Complete()/Abandon() so far has been written to Redis (or has
  // failed); false on timeout. For tests and orderly shutdown.
  bool WaitForWrites(absl::Duration timeout) const;

 private:
  using Callback = absl::AnyInvocable<void(const IdempotentOutcome&)>;
  // A claim this process holds.
  struct Lead {
    std::string claim;
    std::string fingerprint;
    std::vector<Callback> waiters;
  };
  // Waiters on a claim held elsewhere, polled by the background thread.
  struct RemoteWait {
    std::string fingerprint;
    std::vector<Callback> waiters;
    absl::Time next_poll;
    absl::Duration interval;
    absl::Time give_up_at;
    bool last_poll_failed = false;
  };
  using RemoteKey = std::pair<std::string, std::string>;  // (redis key, claim)
  // A finished outcome whose Redis write is still queued: Begin() answers from it.
  struct Completing {
    std::string fingerprint;
    IdempotentOutcome outcome;
  };
  // A Complete() or Abandon() script to run (`completing`: a Complete()) for `claim`.
  struct Write {
    std::string redis_key;
    std::vector<std::string> command;
    bool completing = false;
    std::string claim;
  };

  RedisIdempotencyStore(RedisIdempotencyUrl url, RedisIdempotencyOptions options,
                        std::unique_ptr<internal::RedisIdempotencyConnections> connections);

  std::string NewClaim() ABSL_LOCKS_EXCLUDED(mu_);
  void ReportError(const absl::Status& status) const;
  // The background thread: runs the queued writes, polls the due remote waits and
  // completes the finished ones.
  void BackgroundLoop() ABSL_LOCKS_EXCLUDED(mu_);
  // One pipelined round trip for the queued writes. Called and returns with mu_ held.
  void RunWrites() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // One pipelined poll of the due remote waits. Called and returns with mu_ held.
  void PollDue() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const RedisIdempotencyUrl url_;
  const RedisIdempotencyOptions options_;
  const std::string prefix_;  // the URL's, else the options'
  const std::unique_ptr<internal::RedisIdempotencyConnections> connections_;

  mutable absl::Mutex mu_;
  std::mt19937_64 random_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, Lead> leads_ ABSL_GUARDED_BY(mu_);
  std::map<RemoteKey, RemoteWait> remote_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, Completing> completing_ ABSL_GUARDED_BY(mu_);
  // Keys abandoned here whose DEL is still queued -> the abandoned claim.
  std::map<std::string, std::string> abandoning_ ABSL_GUARDED_BY(mu_);
  std::vector<Write> writes_ ABSL_GUARDED_BY(mu_);
  size_t writes_running_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::CondVar work_cv_;  // a queued write, a new remote wait, or stopping
  std::thread background_;
};

}  // namespace inspection::pipeline

#endif  // GATEWAY_IDEMPOTENCY_REDIS_IDEMPOTENCY_STORE_H_
