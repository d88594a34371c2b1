#ifndef GATEWAY_IDEMPOTENCY_REDIS_IDEMPOTENCY_STORE_H_
#define GATEWAY_IDEMPOTENCY_REDIS_IDEMPOTENCY_STORE_H_

#include <deque>
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
  // BeginAsync: threads that do its round trips (never the caller's), and how many begins
  // may wait for one; past that a begin is answered UNAVAILABLE at once.
  size_t begin_threads = 4;
  size_t max_queued_begins = 1024;
  // After a begin found Redis unreachable, begins are answered UNAVAILABLE without trying
  // for this long (callers are not each made to wait for a connect timeout).
  absl::Duration unreachable_backoff = absl::Milliseconds(500);
  // Outcomes that could not be saved are retried, the first retry after
  // `first_save_retry`, the interval doubling up to `max_save_retry`, until saved or `ttl`
  // has passed. While their bytes (outcome and key) exceed `max_unsaved_bytes`, begins of
  // new keys are answered UNAVAILABLE.
  absl::Duration first_save_retry = absl::Milliseconds(100);
  absl::Duration max_save_retry = absl::Seconds(5);
  size_t max_unsaved_bytes = size_t{64} << 20;
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
// Claims are acknowledged like outcomes: a begin that leads waits for
// RedisOptions::min_replicas_acked replicas (WAIT) before the caller goes on, so a failover
// cannot lose a claim whose call is in flight; a claim not confirmed is let go and the begin
// answers UNAVAILABLE.
//
// Threads: BeginAsync() queues the round trip for one of `begin_threads` threads and never
// blocks its caller (a gRPC handler); Begin() does it on the calling thread. Complete() and
// Abandon() never touch the network either: they are called on the HTTP transport's
// event-loop thread, which must not block. They queue the Redis write for the store's
// background thread (which also polls remote waits). Complete()'s waiters and `saved` are
// called once the write has landed (WAIT included), or after its first attempt failed;
// Abandon()'s waiters at once. Until a completed outcome is saved, Begin() in this process
// answers from memory (waits for the first attempt, then replays; mismatch for other
// parameters); another replica that looks in between sees the claim still pending and
// waits for it. Callbacks run outside any lock, on the thread calling Abandon(), a begin
// thread or the background thread. Thread-safe.
//
// Redis unreachable (refused, timed out, error reply): a begin answers kUnavailable with an
// UNAVAILABLE `replay` status within about connect_timeout + command_timeout, and for
// `unreachable_backoff` after that without trying; BeginAsync also when its queue is full
// or the caller's deadline passed while queued (DEADLINE_EXCEEDED). An outcome whose save
// fails keeps its claim and is retried with backoff (see max_unsaved_bytes), reported to
// `on_error` each time; a repeat on another replica meanwhile waits, then gets ABORTED.
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

  using IdempotencyStore::Complete;
  Decision Begin(const std::string& account, const std::string& key, const std::string& fingerprint,
                 IdempotentOutcome* replay, Waiter on_ready) override;
  void BeginAsync(const std::string& account, const std::string& key,
                  const std::string& fingerprint, absl::Time deadline, OnDecided decided,
                  Waiter on_ready) override;
  void Complete(const std::string& account, const std::string& key, IdempotentOutcome outcome,
                OnSaved saved) override;
  void Abandon(const std::string& account, const std::string& key,
               const IdempotentOutcome& outcome) override;
  void BeginShutdown() override;

  // The Redis key of (account, key).
  std::string RedisKey(const std::string& account, const std::string& key) const;
  // Waiters on other replicas' claims (for tests and metrics).
  size_t remote_waiters() const;
  size_t UnsavedOutcomes() const override;
  // BeginAsync()s waiting for a begin thread (for tests).
  size_t QueuedBegins() const;
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
  // A call waiting for another replica's claim, until its deadline.
  struct RemoteWaiter {
    Callback callback;
    absl::Time deadline;
  };
  struct RemoteWait {
    std::string fingerprint;
    std::vector<RemoteWaiter> waiters;
    absl::Time next_poll;
    absl::Duration interval;
    absl::Time give_up_at;
    bool last_poll_failed = false;
  };
  using RemoteKey = std::pair<std::string, std::string>;  // (redis key, claim)
  // A finished outcome not saved yet: Begin() answers from it.
  struct Completing {
    std::string claim;
    std::string fingerprint;
    IdempotentOutcome outcome;
    // Until the first attempt to save it ends: called then.
    std::vector<Callback> waiters;
    OnSaved saved;
    bool attempted = false;
    // Retrying a failed save: when next, the current interval, when to give up, and the
    // bytes it counts in unsaved_bytes_.
    absl::Time next_attempt;
    absl::Duration backoff;
    absl::Time give_up_at;
    size_t bytes = 0;
  };
  // A Complete() or Abandon() script to run (`completing`: a Complete()) for `claim`.
  struct Write {
    std::string redis_key;
    std::vector<std::string> command;
    bool completing = false;
    std::string claim;
  };
  // A BeginAsync() waiting for a begin thread.
  struct QueuedBegin {
    std::string account;
    std::string key;
    std::string fingerprint;
    absl::Time deadline;
    OnDecided decided;
    Callback on_ready;
  };

  RedisIdempotencyStore(RedisIdempotencyUrl url, RedisIdempotencyOptions options,
                        std::unique_ptr<internal::RedisIdempotencyConnections> connections);

  std::string NewClaim() ABSL_LOCKS_EXCLUDED(mu_);
  void ReportError(const absl::Status& status) const;
  // Begin()'s "wait": for a claim this process holds after all (another thread won it), or
  // for `claim_seen` of another replica (polled by the background thread).
  Decision WaitForClaim(const std::string& redis_key, const std::string& claim_seen,
                        const std::string& fingerprint, absl::Time deadline, Callback on_ready)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Begin() for a call with `deadline` (a wait on another replica's claim ends at it).
  Decision DoBegin(const std::string& account, const std::string& key,
                   const std::string& fingerprint, absl::Time deadline, IdempotentOutcome* replay,
                   Callback on_ready) ABSL_LOCKS_EXCLUDED(mu_);
  // Stops the begin threads (queued begins answered UNAVAILABLE) and joins them.
  void StopBegins() ABSL_LOCKS_EXCLUDED(mu_);
  // A begin thread: runs queued BeginAsync()s until the store stops.
  void BeginLoop() ABSL_LOCKS_EXCLUDED(mu_);
  // Why a begin is answered UNAVAILABLE without a round trip (Redis known unreachable,
  // too many outcomes unsaved), or OK.
  grpc::Status RefusedBeforeTrying(absl::Time now) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The background thread: runs the queued writes and the due save retries, polls the due
  // remote waits and completes the finished ones.
  void BackgroundLoop() ABSL_LOCKS_EXCLUDED(mu_);
  // Queues `completing`'s outcome to be saved (the Complete script under its claim).
  void QueueSaveLocked(const std::string& redis_key, const Completing& completing)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Queues the release of `claim` (the Abandon script: deletes the key while `claim` holds
  // it); until it has run, a begin of the key here frees it first (abandoning_).
  void QueueReleaseLocked(const std::string& redis_key, const std::string& claim)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Queues the saves due for a retry (all when `all`) as writes.
  void QueueRetries(absl::Time now, bool all) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // One pipelined round trip for the queued writes. Called and returns with mu_ held.
  void RunWrites() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // After a save of `redis_key` was tried: erases it when saved (or given up), else
  // schedules its retry; moves the callbacks due now into `callbacks`.
  void SettleSave(const std::string& redis_key, bool saved, absl::Time now,
                  std::vector<absl::AnyInvocable<void() &&>>* callbacks)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
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
  // Bytes of the completing_ entries whose save failed (max_unsaved_bytes).
  size_t unsaved_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  // Until then begins are answered UNAVAILABLE without trying (unreachable_backoff).
  absl::Time unreachable_until_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  std::deque<QueuedBegin> begins_ ABSL_GUARDED_BY(mu_);
  bool begins_stopped_ ABSL_GUARDED_BY(mu_) = false;
  // Keys abandoned here whose DEL is still queued -> the abandoned claim.
  std::map<std::string, std::string> abandoning_ ABSL_GUARDED_BY(mu_);
  std::vector<Write> writes_ ABSL_GUARDED_BY(mu_);
  size_t writes_running_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::CondVar work_cv_;  // a queued write, a new remote wait, or stopping
  std::vector<std::thread> begin_threads_;
  std::thread background_;
};

}  // namespace inspection::pipeline

#endif  // GATEWAY_IDEMPOTENCY_REDIS_IDEMPOTENCY_STORE_H_
