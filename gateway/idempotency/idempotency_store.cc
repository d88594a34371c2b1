#include "gateway/idempotency/idempotency_store.h"

#include <algorithm>

#include "gateway/idempotency/redis_idempotency_store.h"

namespace inspection::pipeline {

namespace {
// What a map node, the expiry index and the strings' headers cost besides their text.
constexpr size_t kEntryOverheadBytes = 256;
}  // namespace

bool ValidIdempotencyKey(absl::string_view key) {
  if (key.empty() || key.size() > kMaxIdempotencyKeyLength) return false;
  for (const char c : key) {
    if (c < 0x21 || c > 0x7E) return false;
  }
  return true;
}

void IdempotencyStore::BeginAsync(const std::string& account, const std::string& key,
                                  const std::string& fingerprint, absl::Time /*deadline*/,
                                  OnDecided decided, Waiter on_ready) {
  IdempotentOutcome replay;
  const Decision decision = Begin(account, key, fingerprint, &replay, std::move(on_ready));
  std::move(decided)(decision, std::move(replay));
}

InMemoryIdempotencyStore::InMemoryIdempotencyStore(absl::Duration ttl,
                                                   std::function<absl::Time()> clock,
                                                   size_t max_bytes)
    : ttl_(ttl), clock_(std::move(clock)), max_bytes_(max_bytes) {}

size_t InMemoryIdempotencyStore::EntryBytes(const Key& key, const Entry& entry) {
  return kEntryOverheadBytes + key.first.size() + key.second.size() + entry.fingerprint.size() +
         entry.outcome.response.size() + entry.outcome.status.error_message().size() +
         entry.outcome.status.error_details().size();
}

void InMemoryIdempotencyStore::EraseLocked(std::map<Key, Entry>::iterator it) {
  bytes_ -= std::min(bytes_, EntryBytes(it->first, it->second));
  entries_.erase(it);
}

void InMemoryIdempotencyStore::ExpireLocked(absl::Time now) {
  while (!expiry_.empty() && expiry_.begin()->first <= now) {
    auto it = entries_.find(expiry_.begin()->second);
    // Only finished entries are scheduled; a key reused after an Abandon has its own time.
    if (it != entries_.end() && it->second.done && it->second.expires_at <= now) {
      EraseLocked(it);
    }
    expiry_.erase(expiry_.begin());
  }
}

IdempotencyStore::Decision InMemoryIdempotencyStore::Begin(const std::string& account,
                                                           const std::string& key,
                                                           const std::string& fingerprint,
                                                           IdempotentOutcome* replay,
                                                           Waiter on_ready) {
  absl::MutexLock lock(&mu_);
  ExpireLocked(clock_());
  Key id(account, key);
  if (entries_.find(id) == entries_.end()) {
    // A new key: make room by forgetting the oldest finished outcomes first.
    const size_t needed = kEntryOverheadBytes + account.size() + key.size() + fingerprint.size();
    while (bytes_ + needed > max_bytes_ && !expiry_.empty()) {
      auto oldest = entries_.find(expiry_.begin()->second);
      expiry_.erase(expiry_.begin());
      if (oldest != entries_.end() && oldest->second.done) {
        EraseLocked(oldest);
        ++evictions_;
      }
    }
    if (bytes_ + needed > max_bytes_) {
      *replay = IdempotentOutcome{
          grpc::Status(grpc::StatusCode::UNAVAILABLE,
                       "too many idempotency keys in flight on this replica; retry later"),
          ""};
      return Decision::kUnavailable;
    }
  }
  auto [it, inserted] = entries_.try_emplace(std::move(id));
  Entry& entry = it->second;
  if (inserted) {
    entry.fingerprint = fingerprint;
    bytes_ += EntryBytes(it->first, entry);
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
                                        IdempotentOutcome outcome, OnSaved saved) {
  std::vector<Waiter> waiters;
  {
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(Key(account, key));
    if (it == entries_.end()) {
      if (saved) std::move(saved)();
      return;
    }
    Entry& entry = it->second;
    const size_t before = EntryBytes(it->first, entry);
    entry.done = true;
    entry.outcome = outcome;
    bytes_ += EntryBytes(it->first, entry) - before;
    entry.expires_at = clock_() + ttl_;
    expiry_.emplace(entry.expires_at, it->first);
    waiters.swap(entry.waiters);
  }
  for (auto& waiter : waiters) waiter(outcome);
  if (saved) std::move(saved)();
}

void InMemoryIdempotencyStore::Abandon(const std::string& account, const std::string& key,
                                       const IdempotentOutcome& outcome) {
  std::vector<absl::AnyInvocable<void(const IdempotentOutcome&)>> waiters;
  {
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(Key(account, key));
    if (it == entries_.end()) return;
    waiters.swap(it->second.waiters);
    EraseLocked(it);
  }
  for (auto& waiter : waiters) waiter(outcome);
}

size_t InMemoryIdempotencyStore::size() const {
  absl::MutexLock lock(&mu_);
  return entries_.size();
}

size_t InMemoryIdempotencyStore::bytes() const {
  absl::MutexLock lock(&mu_);
  return bytes_;
}

int64_t InMemoryIdempotencyStore::evictions() const {
  absl::MutexLock lock(&mu_);
  return evictions_;
}

absl::StatusOr<std::unique_ptr<IdempotencyStore>> OpenIdempotencyStore(
    const std::string& url, IdempotencyStoreOptions options) {
  if (options.ttl <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("idempotency store: the TTL must be positive");
  }
  if (url == "memory") {
    return std::make_unique<InMemoryIdempotencyStore>(
        options.ttl, [] { return absl::Now(); }, options.max_bytes);
  }
  if (redis::IsRedisUrl(url) || url.rfind("rediss://", 0) == 0) {
    RedisIdempotencyOptions redis;
    redis.ttl = options.ttl;
    redis.redis = std::move(options.redis);
    redis.max_unsaved_bytes = options.max_bytes;
    redis.begin_threads = options.redis_threads;
    redis.max_queued_begins = options.max_queued_begins;
    redis.on_error = std::move(options.on_error);
    absl::StatusOr<std::unique_ptr<RedisIdempotencyStore>> store =
        RedisIdempotencyStore::Open(url, std::move(redis));
    if (!store.ok()) return store.status();
    return std::unique_ptr<IdempotencyStore>(*std::move(store));
  }
  // Not echoed: a mistyped scheme may still carry a password.
  return absl::InvalidArgumentError(
      "idempotency store: expected \"memory\", a "
      "redis://[[user]:password@]host[:port][/db][?prefix=name] URL or a redis+sentinel:// one");
}

absl::StatusOr<std::unique_ptr<IdempotencyStore>> OpenIdempotencyStore(const std::string& url,
                                                                       absl::Duration ttl,
                                                                       size_t memory_max_bytes) {
  IdempotencyStoreOptions options;
  options.ttl = ttl;
  options.max_bytes = memory_max_bytes;
  return OpenIdempotencyStore(url, std::move(options));
}

}  // namespace inspection::pipeline
