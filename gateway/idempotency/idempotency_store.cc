#include "gateway/idempotency/idempotency_store.h"

#include "gateway/idempotency/redis_idempotency_store.h"

namespace inspection::pipeline {

InMemoryIdempotencyStore::InMemoryIdempotencyStore(absl::Duration ttl,
                                                   std::function<absl::Time()> clock)
    : ttl_(ttl), clock_(std::move(clock)) {}

void InMemoryIdempotencyStore::ExpireLocked(absl::Time now) {
  while (!expiry_.empty() && expiry_.begin()->first <= now) {
    auto it = entries_.find(expiry_.begin()->second);
    // Only finished entries are scheduled; a key reused after an Abandon has its own time.
    if (it != entries_.end() && it->second.done && it->second.expires_at <= now) {
      entries_.erase(it);
    }
    expiry_.erase(expiry_.begin());
  }
}

IdempotencyStore::Decision InMemoryIdempotencyStore::Begin(
    const std::string& account, const std::string& key, const std::string& fingerprint,
    IdempotentOutcome* replay, absl::AnyInvocable<void(const IdempotentOutcome&)> on_ready) {
  absl::MutexLock lock(&mu_);
  ExpireLocked(clock_());
  auto [it, inserted] = entries_.try_emplace(Key(account, key));
  Entry& entry = it->second;
  if (inserted) {
    entry.fingerprint = fingerprint;
    return Decision::kLead;
  }
  if (entry.fingerprint != fingerprint) return Decision::kMismatch;
  if (entry.done) {
    *replay = entry.outcome;
    return Decision::kReplay;
  }
  entry.waiters.push_back(std::move(on_ready));
  return Decision::kWait;
}

void InMemoryIdempotencyStore::Complete(const std::string& account, const std::string& key,
                                        IdempotentOutcome outcome) {
  std::vector<absl::AnyInvocable<void(const IdempotentOutcome&)>> waiters;
  {
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(Key(account, key));
    if (it == entries_.end()) return;
    Entry& entry = it->second;
    entry.done = true;
    entry.outcome = outcome;
    entry.expires_at = clock_() + ttl_;
    expiry_.emplace(entry.expires_at, it->first);
    waiters.swap(entry.waiters);
  }
  for (auto& waiter : waiters) waiter(outcome);
}

void InMemoryIdempotencyStore::Abandon(const std::string& account, const std::string& key,
                                       const IdempotentOutcome& outcome) {
  std::vector<absl::AnyInvocable<void(const IdempotentOutcome&)>> waiters;
  {
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(Key(account, key));
    if (it == entries_.end()) return;
    waiters.swap(it->second.waiters);
    entries_.erase(it);
  }
  for (auto& waiter : waiters) waiter(outcome);
}

size_t InMemoryIdempotencyStore::size() const {
  absl::MutexLock lock(&mu_);
  return entries_.size();
}

absl::StatusOr<std::unique_ptr<IdempotencyStore>> OpenIdempotencyStore(const std::string& url,
                                                                       absl::Duration ttl) {
  if (ttl <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("idempotency store: the TTL must be positive");
  }
  if (url == "memory") return std::make_unique<InMemoryIdempotencyStore>(ttl);
  if (url.rfind("redis://", 0) == 0 || url.rfind("rediss://", 0) == 0) {
    RedisIdempotencyOptions options;
    options.ttl = ttl;
    absl::StatusOr<std::unique_ptr<RedisIdempotencyStore>> store =
        RedisIdempotencyStore::Open(url, std::move(options));
    if (!store.ok()) return store.status();
    return std::unique_ptr<IdempotencyStore>(*std::move(store));
  }
  // Not echoed: a mistyped scheme may still carry a password.
  return absl::InvalidArgumentError(
      "idempotency store: expected \"memory\" or a "
      "redis://[[user]:password@]host[:port][/db][?prefix=name] URL");
}

}  // namespace inspection::pipeline
