#ifndef GATEWAY_IDEMPOTENCY_IDEMPOTENCY_STORE_H_
#define GATEWAY_IDEMPOTENCY_IDEMPOTENCY_STORE_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <grpcpp/support/status.h>

#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "adapters/redis/redis_connection.h"

namespace inspection::pipeline {

// The first outcome of an operation done under an idempotency key: the gRPC status and,
// when OK, the serialized response message.
struct IdempotentOutcome {
  grpc::Status status;
  std::string response;
  // Not a stored outcome but the store's own answer to a waiter (shutting down, the call's
  // deadline passed, the first call's claim ended, Redis unreachable): never "replayed".
  bool from_store = false;
};

// Remembers the first outcome per (vendor account, idempotency key) for a TTL (24 h by
// default) so that a repeat returns it without calling the vendor again; the same key
// with different parameters (another request fingerprint) is a mismatch; duplicates
// that arrive while the first is in flight wait for it (callbacks, no blocked thread).
// Implementations: InMemoryIdempotencyStore (default; a restart forgets the keys) and
// RedisIdempotencyStore (redis_idempotency_store.h; shared by replicas).
// Thread-safe; callbacks run outside any lock.
class IdempotencyStore {
 public:
  enum class Decision {
    kLead,      // first use: do the operation, then Complete() or Abandon()
    kReplay,    // `replay` holds the stored outcome
    kMismatch,  // the key was used with other parameters
    kWait,      // in flight: `on_ready` is called with the first outcome
    // The store cannot be reached (Redis down), is busy, or could not decide before the
    // caller's deadline: `replay` holds an UNAVAILABLE (or DEADLINE_EXCEEDED) status to
    // answer with; nothing was claimed.
    kUnavailable,
  };
  using Waiter = absl::AnyInvocable<void(const IdempotentOutcome&)>;
  // BeginAsync's answer: the decision and, for kReplay and kUnavailable, the outcome.
  using OnDecided = absl::AnyInvocable<void(Decision, IdempotentOutcome) &&>;
  // Called once a leader's outcome is saved, or its first save failed (see Complete()).
  using OnSaved = absl::AnyInvocable<void() &&>;

  virtual ~IdempotencyStore() = default;

  // Decides on the calling thread; the Redis store does a round trip here (it blocks for
  // up to its timeouts): serving code calls BeginAsync.
  virtual Decision Begin(const std::string& account, const std::string& key,
                         const std::string& fingerprint, IdempotentOutcome* replay,
                         Waiter on_ready) = 0;

  // Begin without blocking the calling thread (a gRPC handler): `decided` is called
  // exactly once, on this thread before BeginAsync returns or later on one of the
  // store's own threads; for kWait, `on_ready` is called after it with the first
  // outcome. A store that cannot decide before `deadline` (the call's) answers
  // kUnavailable with DEADLINE_EXCEEDED. This default runs Begin inline (the in-memory
  // store never blocks).
  virtual void BeginAsync(const std::string& account, const std::string& key,
                          const std::string& fingerprint, absl::Time deadline, OnDecided decided,
                          Waiter on_ready);

  // Stores the leader's outcome, then completes the waiters with it and calls `saved`
  // (may be null): the leader answers only then, so an outcome a caller was given is one
  // a repeat replays. When the store cannot save it (Redis down), the waiters and
  // `saved` are called after the first attempt all the same, and the key stays claimed
  // while the store keeps trying: a repeat meanwhile gets the outcome from this
  // process, or waits and then ABORTED on another replica, never a second operation.
  virtual void Complete(const std::string& account, const std::string& key,
                        IdempotentOutcome outcome, OnSaved saved) = 0;
  void Complete(const std::string& account, const std::string& key, IdempotentOutcome outcome) {
    Complete(account, key, std::move(outcome), nullptr);
  }
  // The leader's outcome is not to be remembered (nothing reached the vendor, so the
  // client may safely try again with the same key): waiters get it, the key is freed.
  virtual void Abandon(const std::string& account, const std::string& key,
                       const IdempotentOutcome& outcome) = 0;

  // Outcomes whose save failed and is being retried (only a remote store has any).
  virtual size_t UnsavedOutcomes() const { return 0; }

  // The gateway is shutting down: BeginAsync answers UNAVAILABLE from now on, queued begins
  // are answered so, begins in progress finish (their callbacks run before this returns),
  // and waiters on another replica's claim get UNAVAILABLE (their calls can end). Saves
  // and the waiters of this process's own leads go on until the store is destroyed.
  virtual void BeginShutdown() {}
};

// The process-local store: a map with an expiry index, bounded in bytes (keys,
// fingerprints, outcomes and a per-entry overhead). Past `max_bytes`, a new key first
// evicts the oldest finished outcomes (they are forgotten before their TTL: counted in
// evictions()); when only keys in flight remain, Begin() answers kUnavailable (an
// UNAVAILABLE status in `replay`: nothing was claimed, the client may retry later).
class InMemoryIdempotencyStore final : public IdempotencyStore {
 public:
  explicit InMemoryIdempotencyStore(
      absl::Duration ttl = absl::Hours(24),
      std::function<absl::Time()> clock = [] { return absl::Now(); },
      size_t max_bytes = size_t{64} << 20);

  using IdempotencyStore::Complete;
  Decision Begin(const std::string& account, const std::string& key, const std::string& fingerprint,
                 IdempotentOutcome* replay, Waiter on_ready) override;
  void Complete(const std::string& account, const std::string& key, IdempotentOutcome outcome,
                OnSaved saved) override;
  void Abandon(const std::string& account, const std::string& key,
               const IdempotentOutcome& outcome) override;

  size_t size() const;
  size_t bytes() const;
  // Finished outcomes forgotten before their TTL to stay within max_bytes.
  int64_t evictions() const;

 private:
  struct Entry {
    std::string fingerprint;
    bool done = false;
    IdempotentOutcome outcome;
    absl::Time expires_at;
    std::vector<absl::AnyInvocable<void(const IdempotentOutcome&)>> waiters;
  };
  using Key = std::pair<std::string, std::string>;

  void ExpireLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Removes an entry and its bytes.
  void EraseLocked(std::map<Key, Entry>::iterator it) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static size_t EntryBytes(const Key& key, const Entry& entry);

  const absl::Duration ttl_;
  const std::function<absl::Time()> clock_;
  const size_t max_bytes_;
  mutable absl::Mutex mu_;
  std::map<Key, Entry> entries_ ABSL_GUARDED_BY(mu_);
  std::multimap<absl::Time, Key> expiry_ ABSL_GUARDED_BY(mu_);
  size_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t evictions_ ABSL_GUARDED_BY(mu_) = 0;
};

// How OpenIdempotencyStore builds its store.
struct IdempotencyStoreOptions {
  // How long a first outcome is kept.
  absl::Duration ttl = absl::Hours(24);
  // The in-memory store: everything it holds. The Redis store: the outcomes not saved yet
  // (Redis unreachable); past it, new keys get UNAVAILABLE until saves land again.
  size_t max_bytes = size_t{64} << 20;
  // The Redis store: threads that do BeginAsync's round trips (never gRPC's), and how many
  // begins may wait for one; past that a keyed call gets UNAVAILABLE at once.
  size_t redis_threads = 4;
  size_t max_queued_begins = 1024;
  // The sentinels' password and what a stored outcome waits for.
  redis::RedisOptions redis;
  // Told about every Redis failure (a begin answered UNAVAILABLE, an outcome not saved, a
  // failed poll): messages name host:port/db, never the password. May be null;
  // thread-safe, must not call back into the store.
  std::function<void(const absl::Status&)> on_error;
};

// The store named by `url`: "memory" -> InMemoryIdempotencyStore, "redis://..." or
// "redis+sentinel://..." -> RedisIdempotencyStore (see ParseRedisIdempotencyUrl).
// InvalidArgument for anything else, a malformed URL or a ttl <= 0; PermissionDenied when
// Redis refuses the password. An unreachable Redis is not an error (Begin() answers
// kUnavailable until it is back). Messages never contain the URL (it may hold a password).
absl::StatusOr<std::unique_ptr<IdempotencyStore>> OpenIdempotencyStore(
    const std::string& url, IdempotencyStoreOptions options);
// The same with `ttl` and `memory_max_bytes`, other options at their defaults.
absl::StatusOr<std::unique_ptr<IdempotencyStore>> OpenIdempotencyStore(
    const std::string& url, absl::Duration ttl, size_t memory_max_bytes = size_t{64} << 20);

// An idempotency key a client may use: 1 to 255 visible ASCII characters (0x21-0x7E).
bool ValidIdempotencyKey(absl::string_view key);
inline constexpr size_t kMaxIdempotencyKeyLength = 255;

}  // namespace inspection::pipeline

#endif  // GATEWAY_IDEMPOTENCY_IDEMPOTENCY_STORE_H_
