#ifndef GATEWAY_CACHE_RESPONSE_CACHE_H_
#define GATEWAY_CACHE_RESPONSE_CACHE_H_

// ResponseCache: a byte-bounded, LRU, TTL cache of vendor answers (typed entries), with
// stale-if-error, tag/key invalidation, and fetch tickets that stop a fetch which raced with
// an invalidation from storing its result.
//
// Plain storage: it never calls the vendor, starts no thread and reads no clock (every call
// that needs the time takes `now`). CachedFetcher (cached_fetcher.h) composes it with request
// coalescing; most callers want that instead.
//
// Thread safety: every method may be called concurrently from any thread; one internal mutex
// guards all state. No method calls out to user code.

#include <cstddef>
#include <cstdint>
#include <deque>
#include <list>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gateway/cache/cache_key.h"

namespace inspection::cache {

// What the cache stores: an entry of the storing layer's own type (the pipeline's cached
// answer: status, body and parsed JSON), immutable and shared, so that a hit and every
// coalesced caller get a reference to the same entry, never a copy made under the cache lock
// or bytes to decode again. The cache only charges it and hands it back.
class CacheEntry {
 public:
  virtual ~CacheEntry() = default;
  // The memory the entry holds, counted against max_bytes (see EntryCharge).
  virtual std::size_t charge() const = 0;
};
using CachedValue = std::shared_ptr<const CacheEntry>;

// An entry of plain bytes (tests; a user without a type of its own). Charged its size.
class BytesEntry final : public CacheEntry {
 public:
  explicit BytesEntry(std::string bytes) : bytes_(std::move(bytes)) {}
  const std::string& bytes() const { return bytes_; }
  std::size_t charge() const override { return bytes_.size(); }

 private:
  const std::string bytes_;
};
CachedValue MakeCachedValue(std::string bytes);  // a BytesEntry

struct CacheOptions {
  // Upper bound on the sum of EntryCharge() over all entries.
  std::size_t max_bytes = std::size_t{64} << 20;
  // How long past its TTL an entry may still be served, and only through ServeStale (i.e. when
  // the caller's upstream call failed). Zero disables stale-if-error.
  absl::Duration stale_if_error = absl::ZeroDuration();
};

enum class Freshness {
  kMiss,   // no usable entry
  kFresh,  // now < expires_at
  kStale,  // expires_at <= now < expires_at + stale_if_error
};

struct LookupResult {
  Freshness freshness = Freshness::kMiss;
  CachedValue value;  // see each method for when it is set
};

struct CacheStats {
  std::uint64_t hits = 0;              // Lookup returned kFresh
  std::uint64_t misses = 0;            // Lookup returned kMiss or kStale
  std::uint64_t stale_served = 0;      // ServeStale returned kStale
  std::uint64_t inserts = 0;           // entries stored
  std::uint64_t rejected_inserts = 0;  // not stored: ttl <= 0 or larger than max_bytes
  // Fetched results not stored: invalidated since their fetch began, or the entry already holds
  // a newer answer (from a fetch that began later, or a later Insert).
  std::uint64_t discarded_inserts = 0;
  std::uint64_t evictions = 0;    // entries dropped to make room (LRU)
  std::uint64_t invalidated = 0;  // entries dropped by InvalidateKey/InvalidateTag/Clear
  std::size_t bytes = 0;          // sum of EntryCharge() over current entries
  std::size_t entries = 0;
  // Invalidations remembered for fetches still in flight (see FetchTicket); 0 when none are.
  std::size_t tracked_invalidations = 0;
};

class ResponseCache;

// Taken (ResponseCache::BeginFetch) before an upstream call starts, handed back to
// InsertFetched with its result. Any InvalidateKey/InvalidateTag/Clear that happens while the
// ticket is alive and matches the key or one of the tags makes InsertFetched discard the result:
// it may predate the write or event that caused the invalidation.
//
// The ticket also orders answers: InsertFetched never replaces an entry stored by a fetch that
// began later (or by an Insert made after this ticket was taken), so a slow, older call landing
// last cannot overwrite a newer answer.
//
// Move-only. Releases itself on destruction; the cache must outlive it. A default-constructed
// or moved-from ticket is empty and never current.
class FetchTicket {
 public:
  FetchTicket() = default;
  FetchTicket(FetchTicket&& other) noexcept;
  FetchTicket& operator=(FetchTicket&& other) noexcept;
  FetchTicket(const FetchTicket&) = delete;
  FetchTicket& operator=(const FetchTicket&) = delete;
  ~FetchTicket();

  bool empty() const { return cache_ == nullptr; }

 private:
  friend class ResponseCache;
  FetchTicket(ResponseCache* cache, std::uint64_t epoch) : cache_(cache), epoch_(epoch) {}
  void Release();

  ResponseCache* cache_ = nullptr;
  std::uint64_t epoch_ = 0;
};

class ResponseCache {
 public:
  // Fixed cost charged per entry on top of its bytes: list node, two hash-map nodes and string
  // headers, rounded up. Makes a flood of tiny entries count against max_bytes too.
  static constexpr std::size_t kEntryOverheadBytes = 128;

  // What an entry for `key` with a value charging `value_size` bytes (CacheEntry::charge) and
  // `tags` counts against max_bytes: key.EncodedSize() + value_size + the bytes of its
  // distinct tags (including the implicit RouteTag) + kEntryOverheadBytes.
  static std::size_t EntryCharge(const CacheKey& key, std::size_t value_size,
                                 const std::vector<std::string>& tags);

  explicit ResponseCache(CacheOptions options);
  ResponseCache(const ResponseCache&) = delete;
  ResponseCache& operator=(const ResponseCache&) = delete;
  // All FetchTickets must have been destroyed.
  ~ResponseCache();

  const CacheOptions& options() const { return options_; }

  // kFresh with the value (and marks the entry most recently used), or kStale without a value
  // (the entry is past its TTL but within the stale window: go upstream, and call ServeStale if
  // that fails), or kMiss. Entries past the stale window are dropped here. Counts a hit for
  // kFresh, a miss otherwise.
  LookupResult Lookup(const CacheKey& key, absl::Time now);

  // For use after the upstream call failed with an error that allows stale-if-error. Returns
  // kStale with the value if the entry is past its TTL but within the stale window (counts
  // stale_served), kFresh with the value if someone refreshed it meanwhile, else kMiss.
  // Marks a returned entry most recently used.
  LookupResult ServeStale(const CacheKey& key, absl::Time now);

  // The fresh value, or null. Touches neither stats nor recency.
  CachedValue Peek(const CacheKey& key, absl::Time now) const;

  // Stores `value` for `key`, fresh until now + ttl, servable stale until that plus
  // options().stale_if_error. Any existing entry for `key` is dropped first, even when the new
  // value is not stored (it is older than what the caller just learnt). Not stored, returning
  // false, when ttl <= 0 or EntryCharge() > max_bytes; otherwise evicts least recently used
  // entries until the new one fits. `tags` are matched by InvalidateTag; RouteTag(key.account,
  // key.route) is always added. `value` must not be null.
  bool Insert(const CacheKey& key, CachedValue value, absl::Duration ttl,
              const std::vector<std::string>& tags, absl::Time now);

  // Starts tracking invalidations for one upstream call; see FetchTicket.
  FetchTicket BeginFetch();

  // False if `ticket` is empty, or if since BeginFetch the cache was cleared, `key` was
  // invalidated, or RouteTag(key) or one of `tags` was.
  bool IsCurrent(const FetchTicket& ticket, const CacheKey& key,
                 const std::vector<std::string>& tags) const;

  // Insert, except that the result is discarded (counted in discarded_inserts) when
  // !IsCurrent(ticket, key, tags) or when the entry for `key` is newer than the ticket (see
  // FetchTicket). An existing entry older than the ticket is dropped even when the result is
  // not stored; a newer one is never touched. Returns whether it stored.
  bool InsertFetched(const FetchTicket& ticket, const CacheKey& key, CachedValue value,
                     absl::Duration ttl, const std::vector<std::string>& tags, absl::Time now);

  // Drop one entry / every entry carrying `tag` / everything, and make in-flight fetches that
  // would store under them discard their results. Return the number of entries dropped.
  std::size_t InvalidateKey(const CacheKey& key);
  std::size_t InvalidateTag(const std::string& tag);
  std::size_t Clear();

  CacheStats stats() const;

 private:
  struct Entry {
    std::string key;  // CacheKey::Encoded(); index_ keys view into it
    CachedValue value;
    std::vector<std::string> tags;  // distinct, includes the route tag
    absl::Time expires_at;
    absl::Time stale_until;
    std::size_t charge = 0;
    std::uint64_t origin = 0;  // epoch_ of the ticket (or Insert) that produced the value
  };
  using Lru = std::list<Entry>;  // front: most recently used

  friend class FetchTicket;
  void ReleaseTicket(std::uint64_t epoch);

  // Stores unless the existing entry's origin is newer than `origin`; drops an older one even
  // when the new value is rejected.
  bool InsertLocked(const CacheKey& key, CachedValue value, absl::Duration ttl,
                    const std::vector<std::string>& tags, absl::Time now, std::uint64_t origin)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool InvalidatedSinceLocked(std::uint64_t epoch, const std::string& encoded_key,
                              const CacheKey& key, const std::vector<std::string>& tags) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EraseLocked(Lru::iterator it) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EraseKeyLocked(const std::string& encoded_key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RecordInvalidationLocked(std::string name) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PruneInvalidationsLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const CacheOptions options_;

  mutable absl::Mutex mu_;
  Lru lru_ ABSL_GUARDED_BY(mu_);
  std::unordered_map<std::string_view, Lru::iterator> index_ ABSL_GUARDED_BY(mu_);
  std::unordered_map<std::string, std::unordered_set<Entry*>> by_tag_ ABSL_GUARDED_BY(mu_);
  std::size_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  CacheStats counters_ ABSL_GUARDED_BY(mu_);  // bytes/entries/tracked filled in by stats()

  // A logical clock: every invalidation, BeginFetch and Insert takes the next value, so
  // "invalidated after the ticket" is `record > ticket` and "newer answer" is `origin > ticket`.
  // invalidated_at_ maps "k"+encoded key / "t"+tag to the epoch of its last invalidation, kept
  // only while some open ticket is older than it (invalidation_order_ lists the same records
  // oldest first, for pruning).
  std::uint64_t epoch_ ABSL_GUARDED_BY(mu_) = 0;
  std::uint64_t cleared_at_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::uint64_t, std::size_t> open_tickets_ ABSL_GUARDED_BY(mu_);  // epoch -> count
  std::unordered_map<std::string, std::uint64_t> invalidated_at_ ABSL_GUARDED_BY(mu_);
  std::deque<std::pair<std::uint64_t, std::string>> invalidation_order_ ABSL_GUARDED_BY(mu_);
};

}  // namespace inspection::cache

#endif  // GATEWAY_CACHE_RESPONSE_CACHE_H_
