#ifndef GATEWAY_CACHE_CACHED_FETCHER_H_
#define GATEWAY_CACHE_CACHED_FETCHER_H_

// CachedFetcher: read-through access to a ResponseCache with request coalescing and
// stale-if-error. GetOrFetch is the one call the request pipeline makes per cacheable RPC:
//
//   1. fresh entry               -> done({kFreshHit}) at once; no upstream call.
//   2. a current call in flight  -> join it; done({..., coalesced = true}) when it finishes.
//   3. otherwise, lead: call `fetch` once; on success store the value (unless an invalidation
//      raced with the call, see FetchTicket) and hand it to the leader and every follower; on a
//      failure that allows it, fall back to the entry if still within the stale window
//      (kStaleAfterError); otherwise hand the error to everyone.
//
// Non-blocking: nobody waits on a lock for the upstream call. Followers park a callback; the
// leader's completion runs the callbacks, outside any lock, on the thread that calls
// `complete` (the leader's done first, then followers in arrival order). A fresh hit runs
// `done` on the calling thread before GetOrFetch returns; so may everything else if `fetch`
// completes synchronously.
//
// Invalidation vs. coalescing: a caller that arrives after an invalidation of its key, of
// RouteTag(key) or of one of the flight's request tags does not join a flight that began before
// it: it starts a new upstream call (the old flight still answers its own callers and stores
// nothing). Tags only known from the response (e.g. the inspections on a search page) cannot be
// checked at join time; such a result is only kept out of the cache.
//
// Thread safety: all methods may be called concurrently. The ResponseCache and the
// CachedFetcher must outlive every in-flight fetch.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gateway/cache/cache_key.h"
#include "gateway/cache/response_cache.h"

namespace inspection::cache {

// UNAVAILABLE (vendor 5xx, connect failure, open circuit) and DEADLINE_EXCEEDED (timeout): the
// vendor could not answer, so an older answer beats none. Every other code is the vendor's
// answer about this request (4xx) or our own bug; serving an old value would hide it.
bool StaleIfErrorApplies(const absl::Status& error);

// The storing layer's own description of a failed fetch (the pipeline's typed vendor
// failure), handed unchanged to every caller of the flight; the fetcher never reads it.
class FailureDetail {
 public:
  virtual ~FailureDetail() = default;
};

// What `fetch` reports, exactly once, through its `complete` callback.
struct FetchResult {
  // Cache `value` (not null) for `ttl` (<= 0: hand to the waiting callers but do not store,
  // e.g. for a route whose caching is switched off) under the flight's request tags plus
  // `tags`.
  static FetchResult Success(CachedValue value, absl::Duration ttl,
                             std::vector<std::string> tags = {});
  // `bytes` as a BytesEntry.
  static FetchResult Success(std::string bytes, absl::Duration ttl,
                             std::vector<std::string> tags = {});
  // `error` must not be OK. allow_stale = StaleIfErrorApplies(error).
  static FetchResult Failure(absl::Status error);
  // `detail`: handed back to every caller of the flight in GetResult::error_detail.
  static FetchResult Failure(absl::Status error, bool allow_stale,
                             std::shared_ptr<const FailureDetail> detail = nullptr);

  absl::Status status;  // OK for a success
  CachedValue value;
  absl::Duration ttl = absl::ZeroDuration();
  std::vector<std::string> tags;
  bool allow_stale = false;                     // failures only: may a stale entry be served
  std::shared_ptr<const FailureDetail> detail;  // failures only: see Failure()
};

enum class Source {
  kFreshHit,         // from the cache, within its TTL
  kFetched,          // the upstream answer: a value or an error
  kStaleAfterError,  // from the cache, past its TTL, because the upstream call failed
};

struct GetResult {
  Source source = Source::kFetched;
  // This caller shared another caller's upstream call (or cache re-check) instead of making
  // its own. The other fields are identical for all callers of one flight.
  bool coalesced = false;
  absl::Status status;  // OK iff `value` is set
  CachedValue value;
  // For kStaleAfterError: the upstream failure that made the stale value acceptable, for the
  // response metadata and logs. OK otherwise.
  absl::Status stale_cause;
  // The fetch failure's FetchResult::detail: with a failed `status`, or with `stale_cause`.
  std::shared_ptr<const FailureDetail> error_detail;

  bool ok() const { return status.ok(); }
  bool stale() const { return source == Source::kStaleAfterError; }
};

struct GetOptions {
  // Per-call bypass (request metadata): do not answer from the cache and do not join a call in
  // flight; always call upstream, and no stale fallback. The result still replaces the cached
  // entry (it is the newest answer), and later callers may join this call.
  bool bypass = false;
  // Tags known from the request itself (e.g. InspectionTag(id) for GetDamagesReport): stored
  // with the result, and an invalidation of one of them stops later callers from joining this
  // call.
  std::vector<std::string> tags;
};

struct FetcherStats {
  std::uint64_t fetches = 0;    // upstream calls started (`fetch` invoked)
  std::uint64_t coalesced = 0;  // callers that joined another caller's flight
  std::uint64_t bypassed = 0;   // GetOrFetch calls with GetOptions::bypass
};

class CachedFetcher {
 public:
  using Complete = absl::AnyInvocable<void(FetchResult) &&>;
  // Starts the upstream call and eventually calls `complete` exactly once, from any thread
  // (possibly before returning). If `complete` is destroyed without being called, every caller
  // of the flight gets CANCELLED.
  using Fetch = absl::AnyInvocable<void(Complete complete) &&>;
  using Done = absl::AnyInvocable<void(GetResult) &&>;
  // Must be thread-safe.
  using Clock = std::function<absl::Time()>;

  // `cache` is not owned. `clock` defaults to absl::Now when null.
  explicit CachedFetcher(ResponseCache* cache, Clock clock = nullptr);
  CachedFetcher(const CachedFetcher&) = delete;
  CachedFetcher& operator=(const CachedFetcher&) = delete;
  ~CachedFetcher();

  // See the file comment. `fetch` is destroyed without being called unless this caller leads.
  // `done` is called exactly once.
  void GetOrFetch(const CacheKey& key, const GetOptions& options, Fetch fetch, Done done);
  void GetOrFetch(const CacheKey& key, Fetch fetch, Done done);

  FetcherStats stats() const;

 private:
  struct Flight;
  class Completion;

  // Removes `flight` from the in-flight map (if still there) and calls everyone's done.
  void Publish(const std::shared_ptr<Flight>& flight, const GetResult& result, Done leader_done);

  ResponseCache* const cache_;
  const Clock clock_;

  mutable absl::Mutex mu_;
  // Encoded key -> the flight new callers join. A flight overtaken by an invalidation or a
  // bypass is replaced here but lives on until it completes.
  std::unordered_map<std::string, std::shared_ptr<Flight>> flights_ ABSL_GUARDED_BY(mu_);
  FetcherStats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace inspection::cache

#endif  // GATEWAY_CACHE_CACHED_FETCHER_H_
