#include "gateway/cache/response_cache.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gateway/cache/cache_key.h"

namespace inspection::cache {
namespace {

// Distinct tags, the implicit route tag included. Sorted so that the charge and the stored
// tags do not depend on the order (or repetition) in which the caller listed them.
std::vector<std::string> NormalizedTags(const CacheKey& key, const std::vector<std::string>& tags) {
  std::vector<std::string> out;
  out.reserve(tags.size() + 1);
  out.push_back(RouteTag(key.account, key.route));
  out.insert(out.end(), tags.begin(), tags.end());
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::size_t ChargeFor(const CacheKey& key, std::size_t value_size,
                      const std::vector<std::string>& normalized_tags) {
  std::size_t charge = key.EncodedSize() + value_size + ResponseCache::kEntryOverheadBytes;
  for (const std::string& tag : normalized_tags) charge += tag.size();
  return charge;
}

// Keys and tags share one invalidation log; the prefix keeps a tag from ever matching a key.
std::string KeyRecord(const std::string& encoded_key) { return "k" + encoded_key; }
std::string TagRecord(const std::string& tag) { return "t" + tag; }

}  // namespace

CachedValue MakeCachedValue(std::string bytes) {
  return std::make_shared<const BytesEntry>(std::move(bytes));
}

// ---------------------------------------------------------------------------------------------
// FetchTicket

FetchTicket::FetchTicket(FetchTicket&& other) noexcept
    : cache_(std::exchange(other.cache_, nullptr)), epoch_(other.epoch_) {}

FetchTicket& FetchTicket::operator=(FetchTicket&& other) noexcept {
  if (this != &other) {
    Release();
    cache_ = std::exchange(other.cache_, nullptr);
    epoch_ = other.epoch_;
  }
  return *this;
}

FetchTicket::~FetchTicket() { Release(); }

void FetchTicket::Release() {
  if (cache_ != nullptr) std::exchange(cache_, nullptr)->ReleaseTicket(epoch_);
}

// ---------------------------------------------------------------------------------------------
// ResponseCache

std::size_t ResponseCache::EntryCharge(const CacheKey& key, std::size_t value_size,
                                       const std::vector<std::string>& tags) {
  return ChargeFor(key, value_size, NormalizedTags(key, tags));
}

ResponseCache::ResponseCache(CacheOptions options) : options_(options) {}

ResponseCache::~ResponseCache() = default;

LookupResult ResponseCache::Lookup(const CacheKey& key, absl::Time now) {
  const std::string encoded = key.Encoded();
  absl::MutexLock lock(&mu_);
  auto found = index_.find(encoded);
  if (found == index_.end()) {
    ++counters_.misses;
    return {};
  }
  Lru::iterator it = found->second;
  if (now < it->expires_at) {
    ++counters_.hits;
    lru_.splice(lru_.begin(), lru_, it);
    return {Freshness::kFresh, it->value};
  }
  ++counters_.misses;
  if (now < it->stale_until) {
    // Deliberately no value and no recency bump: the caller must try upstream first, and an
    // entry only kept for emergencies should age out before ones that are being served.
    return {Freshness::kStale, nullptr};
  }
  // Useless even as a fallback: free its bytes now rather than waiting for LRU to reach it.
  EraseLocked(it);
  return {};
}

LookupResult ResponseCache::ServeStale(const CacheKey& key, absl::Time now) {
  const std::string encoded = key.Encoded();
  absl::MutexLock lock(&mu_);
  auto found = index_.find(encoded);
  if (found == index_.end()) return {};
  Lru::iterator it = found->second;
  if (now >= it->stale_until) return {};
  lru_.splice(lru_.begin(), lru_, it);
  if (now < it->expires_at) return {Freshness::kFresh, it->value};
  ++counters_.stale_served;
  return {Freshness::kStale, it->value};
}

CachedValue ResponseCache::Peek(const CacheKey& key, absl::Time now) const {
  const std::string encoded = key.Encoded();
  absl::MutexLock lock(&mu_);
  auto found = index_.find(encoded);
  if (found == index_.end() || now >= found->second->expires_at) return nullptr;
  return found->second->value;
}

bool ResponseCache::Insert(const CacheKey& key, CachedValue value, absl::Duration ttl,
                           const std::vector<std::string>& tags, absl::Time now) {
  absl::MutexLock lock(&mu_);
  return InsertLocked(key, std::move(value), ttl, tags, now, ++epoch_);
}

FetchTicket ResponseCache::BeginFetch() {
  absl::MutexLock lock(&mu_);
  const std::uint64_t epoch = ++epoch_;
  ++open_tickets_[epoch];
  return FetchTicket(this, epoch);
}

bool ResponseCache::IsCurrent(const FetchTicket& ticket, const CacheKey& key,
                              const std::vector<std::string>& tags) const {
  if (ticket.cache_ != this) return false;
  const std::string encoded = key.Encoded();
  absl::MutexLock lock(&mu_);
  return !InvalidatedSinceLocked(ticket.epoch_, encoded, key, tags);
}

bool ResponseCache::InsertFetched(const FetchTicket& ticket, const CacheKey& key, CachedValue value,
                                  absl::Duration ttl, const std::vector<std::string>& tags,
                                  absl::Time now) {
  const std::string encoded = key.Encoded();
  absl::MutexLock lock(&mu_);
  if (ticket.cache_ != this) {
    ++counters_.discarded_inserts;
    return false;
  }
  if (InvalidatedSinceLocked(ticket.epoch_, encoded, key, tags)) {
    ++counters_.discarded_inserts;
    // What the fetch learnt cannot be kept, but it is still newer than an entry stored before
    // the fetch began, which may be just as outdated without carrying the invalidated tag (a
    // search page that did not list the inspection yet). An entry newer than the fetch stays.
    auto found = index_.find(encoded);
    if (found != index_.end() && found->second->origin < ticket.epoch_) EraseLocked(found->second);
    return false;
  }
  return InsertLocked(key, std::move(value), ttl, tags, now, ticket.epoch_);
}

std::size_t ResponseCache::InvalidateKey(const CacheKey& key) {
  const std::string encoded = key.Encoded();
  absl::MutexLock lock(&mu_);
  RecordInvalidationLocked(KeyRecord(encoded));
  auto found = index_.find(encoded);
  if (found == index_.end()) return 0;
  EraseLocked(found->second);
  ++counters_.invalidated;
  return 1;
}

std::size_t ResponseCache::InvalidateTag(const std::string& tag) {
  absl::MutexLock lock(&mu_);
  RecordInvalidationLocked(TagRecord(tag));
  auto found = by_tag_.find(tag);
  if (found == by_tag_.end()) return 0;
  // EraseLocked edits this very set (and drops it when it empties), so iterate over a copy.
  const std::vector<Entry*> victims(found->second.begin(), found->second.end());
  for (Entry* entry : victims) EraseKeyLocked(entry->key);
  counters_.invalidated += victims.size();
  return victims.size();
}

std::size_t ResponseCache::Clear() {
  absl::MutexLock lock(&mu_);
  // A Clear covers every key and tag, so one mark replaces recording each of them.
  cleared_at_ = ++epoch_;
  const std::size_t dropped = lru_.size();
  lru_.clear();
  index_.clear();
  by_tag_.clear();
  bytes_ = 0;
  counters_.invalidated += dropped;
  return dropped;
}

CacheStats ResponseCache::stats() const {
  absl::MutexLock lock(&mu_);
  CacheStats out = counters_;
  out.bytes = bytes_;
  out.entries = lru_.size();
  out.tracked_invalidations = invalidated_at_.size();
  return out;
}

// ---------------------------------------------------------------------------------------------
// Private

void ResponseCache::ReleaseTicket(std::uint64_t epoch) {
  absl::MutexLock lock(&mu_);
  auto it = open_tickets_.find(epoch);
  if (it != open_tickets_.end() && --it->second == 0) open_tickets_.erase(it);
  PruneInvalidationsLocked();
}

bool ResponseCache::InsertLocked(const CacheKey& key, CachedValue value, absl::Duration ttl,
                                 const std::vector<std::string>& tags, absl::Time now,
                                 std::uint64_t origin) {
  std::string encoded = key.Encoded();
  auto found = index_.find(encoded);
  if (found != index_.end()) {
    if (found->second->origin > origin) {
      // A fetch that began later (or an Insert made since) already stored its answer; this one
      // was on the wire longer and is the older of the two.
      ++counters_.discarded_inserts;
      return false;
    }
    // Whatever happens below, the old value is older than the one being offered.
    EraseLocked(found->second);
  }

  std::vector<std::string> normalized = NormalizedTags(key, tags);
  const std::size_t charge = ChargeFor(key, value->charge(), normalized);
  if (ttl <= absl::ZeroDuration() || charge > options_.max_bytes) {
    // Evicting everything for an entry that can never fit would only empty the cache.
    ++counters_.rejected_inserts;
    return false;
  }
  while (bytes_ + charge > options_.max_bytes) {
    EraseLocked(std::prev(lru_.end()));
    ++counters_.evictions;
  }

  lru_.push_front(Entry{std::move(encoded), std::move(value), std::move(normalized), now + ttl,
                        now + ttl + options_.stale_if_error, charge, origin});
  Entry& entry = lru_.front();
  index_.emplace(entry.key, lru_.begin());
  for (const std::string& tag : entry.tags) by_tag_[tag].insert(&entry);
  bytes_ += charge;
  ++counters_.inserts;
  return true;
}

bool ResponseCache::InvalidatedSinceLocked(std::uint64_t epoch, const std::string& encoded_key,
                                           const CacheKey& key,
                                           const std::vector<std::string>& tags) const {
  if (cleared_at_ > epoch) return true;
  if (invalidated_at_.empty()) return false;
  auto after = [&](const std::string& record) {
    auto it = invalidated_at_.find(record);
    return it != invalidated_at_.end() && it->second > epoch;
  };
  if (after(KeyRecord(encoded_key))) return true;
  if (after(TagRecord(RouteTag(key.account, key.route)))) return true;
  for (const std::string& tag : tags) {
    if (after(TagRecord(tag))) return true;
  }
  return false;
}

void ResponseCache::EraseLocked(Lru::iterator it) {
  for (const std::string& tag : it->tags) {
    auto set = by_tag_.find(tag);
    if (set == by_tag_.end()) continue;
    set->second.erase(&*it);
    if (set->second.empty()) by_tag_.erase(set);
  }
  bytes_ -= it->charge;
  index_.erase(it->key);  // before the list node (which owns the viewed bytes) goes away
  lru_.erase(it);
}

void ResponseCache::EraseKeyLocked(const std::string& encoded_key) {
  auto found = index_.find(encoded_key);
  if (found != index_.end()) EraseLocked(found->second);
}

void ResponseCache::RecordInvalidationLocked(std::string name) {
  ++epoch_;
  // With no fetch in flight nobody can be affected: a ticket taken later starts after this
  // epoch. Skipping the record keeps the log empty in the common case.
  if (open_tickets_.empty()) return;
  invalidated_at_[name] = epoch_;
  invalidation_order_.emplace_back(epoch_, std::move(name));
}

void ResponseCache::PruneInvalidationsLocked() {
  // A record at epoch E matters only to tickets that began before it (epoch < E). Once the
  // oldest open ticket began after E, no one can ask about it again.
  const std::uint64_t oldest_open = open_tickets_.empty()
                                        ? std::numeric_limits<std::uint64_t>::max()
                                        : open_tickets_.begin()->first;
  while (!invalidation_order_.empty() && invalidation_order_.front().first <= oldest_open) {
    const auto& [epoch, name] = invalidation_order_.front();
    auto it = invalidated_at_.find(name);
    // A later invalidation of the same name has its own, newer record; keep that one.
    if (it != invalidated_at_.end() && it->second == epoch) invalidated_at_.erase(it);
    invalidation_order_.pop_front();
  }
}

}  // namespace inspection::cache
