#include "gateway/cache/cached_fetcher.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gateway/cache/cache_key.h"
#include "gateway/cache/response_cache.h"

namespace inspection::cache {

bool StaleIfErrorApplies(const absl::Status& error) {
  return absl::IsUnavailable(error) || absl::IsDeadlineExceeded(error);
}

FetchResult FetchResult::Success(CachedValue value, absl::Duration ttl,
                                 std::vector<std::string> tags) {
  FetchResult result;
  result.value = std::move(value);
  result.ttl = ttl;
  result.tags = std::move(tags);
  return result;
}

FetchResult FetchResult::Success(std::string bytes, absl::Duration ttl,
                                 std::vector<std::string> tags) {
  return Success(MakeCachedValue(std::move(bytes)), ttl, std::move(tags));
}

FetchResult FetchResult::Failure(absl::Status error) {
  const bool allow_stale = StaleIfErrorApplies(error);
  return Failure(std::move(error), allow_stale);
}

FetchResult FetchResult::Failure(absl::Status error, bool allow_stale,
                                 std::shared_ptr<const FailureDetail> detail) {
  FetchResult result;
  result.detail = std::move(detail);
  // An OK "failure" would reach callers as a success without a value.
  result.status = error.ok() ? absl::InternalError("FetchResult::Failure called with OK status")
                             : std::move(error);
  result.allow_stale = allow_stale;
  return result;
}

// One upstream call and the callers waiting for it.
struct CachedFetcher::Flight {
  Flight(CacheKey key_in, std::string encoded_in, std::vector<std::string> tags_in, bool bypass_in)
      : key(std::move(key_in)),
        encoded(std::move(encoded_in)),
        tags(std::move(tags_in)),
        bypass(bypass_in) {}

  const CacheKey key;
  const std::string encoded;
  const std::vector<std::string> tags;  // request tags
  const bool bypass;
  // Set under the fetcher's mu_ before the flight is published in flights_, reset after it has
  // left flights_; IsCurrent reads it under mu_ only while the flight is in flights_.
  FetchTicket ticket;
  std::vector<Done> followers;  // guarded by the fetcher's mu_
};

// The state behind the `complete` callback handed to `fetch`. Owned by that callback, so its
// destructor notices a callback dropped unrun (a transport shutting down, a bug) and fails the
// flight instead of leaving its followers waiting forever.
class CachedFetcher::Completion {
 public:
  Completion(CachedFetcher* fetcher, std::shared_ptr<Flight> flight, Done leader_done)
      : fetcher_(fetcher), flight_(std::move(flight)), leader_done_(std::move(leader_done)) {}
  Completion(const Completion&) = delete;
  Completion& operator=(const Completion&) = delete;

  ~Completion() {
    if (!finished_) {
      Run(FetchResult::Failure(
          absl::CancelledError("upstream fetch dropped its completion callback"), false));
    }
  }

  void Run(FetchResult result) {
    // `complete` is an rvalue callable, but nothing stops a buggy caller from invoking it
    // twice; the first outcome has already been delivered, so the second is ignored.
    if (finished_) return;
    finished_ = true;
    ResponseCache& cache = *fetcher_->cache_;
    const absl::Time now = fetcher_->clock_();
    GetResult out;
    if (result.status.ok() && result.value == nullptr) {
      // A success without a value would reach callers as neither an answer nor an error.
      result.status = absl::InternalError("FetchResult::Success called without a value");
    }
    if (result.status.ok()) {
      std::vector<std::string> tags = flight_->tags;
      tags.insert(tags.end(), result.tags.begin(), result.tags.end());
      cache.InsertFetched(flight_->ticket, flight_->key, result.value, result.ttl, tags, now);
      out.value = std::move(result.value);
    } else {
      if (result.allow_stale && !flight_->bypass) {
        // Looked up now, not remembered from before the call: an invalidation during the call
        // must also retire the fallback.
        LookupResult fallback = cache.ServeStale(flight_->key, now);
        if (fallback.value != nullptr) {
          out.value = std::move(fallback.value);
          if (fallback.freshness == Freshness::kStale) {
            out.source = Source::kStaleAfterError;
            out.stale_cause = result.status;
            out.error_detail = result.detail;
          } else {
            // Someone stored a fresh value while this call was failing; that is a plain hit.
            out.source = Source::kFreshHit;
          }
        }
      }
      if (out.value == nullptr) {
        out.status = std::move(result.status);
        out.error_detail = std::move(result.detail);
      }
    }
    fetcher_->Publish(flight_, out, std::move(leader_done_));
  }

 private:
  CachedFetcher* const fetcher_;
  const std::shared_ptr<Flight> flight_;
  Done leader_done_;
  bool finished_ = false;
};

CachedFetcher::CachedFetcher(ResponseCache* cache, Clock clock)
    : cache_(cache), clock_(clock ? std::move(clock) : Clock([] { return absl::Now(); })) {}

CachedFetcher::~CachedFetcher() = default;

void CachedFetcher::GetOrFetch(const CacheKey& key, Fetch fetch, Done done) {
  GetOrFetch(key, GetOptions{}, std::move(fetch), std::move(done));
}

void CachedFetcher::GetOrFetch(const CacheKey& key, const GetOptions& options, Fetch fetch,
                               Done done) {
  if (!options.bypass) {
    LookupResult hit = cache_->Lookup(key, clock_());
    if (hit.freshness == Freshness::kFresh) {
      GetResult out;
      out.source = Source::kFreshHit;
      out.value = std::move(hit.value);
      std::move(done)(std::move(out));
      return;
    }
  }

  std::string encoded = key.Encoded();
  auto flight = std::make_shared<Flight>(key, encoded, options.tags, options.bypass);
  {
    absl::MutexLock lock(&mu_);
    if (options.bypass) {
      ++stats_.bypassed;
    } else {
      auto it = flights_.find(encoded);
      if (it != flights_.end() && cache_->IsCurrent(it->second->ticket, key, it->second->tags)) {
        it->second->followers.push_back(std::move(done));
        ++stats_.coalesced;
        return;
      }
    }
    // The ticket is taken before the flight becomes visible, so no caller can join a flight
    // whose invalidation tracking has not started yet. Replacing an entry that is still in
    // flight (bypass, or overtaken by an invalidation) keeps that flight running for its own
    // callers; it just takes no new ones.
    flight->ticket = cache_->BeginFetch();
    flights_[std::move(encoded)] = flight;
  }

  if (!options.bypass) {
    // Between our Lookup and registering the flight, a previous leader may have stored its
    // value and left flights_. Without this re-check we would call upstream a second time for a
    // response that is already cached.
    if (CachedValue value = cache_->Peek(key, clock_())) {
      GetResult out;
      out.source = Source::kFreshHit;
      out.value = std::move(value);
      Publish(flight, out, std::move(done));
      return;
    }
  }

  {
    absl::MutexLock lock(&mu_);
    ++stats_.fetches;
  }
  auto completion = std::make_unique<Completion>(this, flight, std::move(done));
  std::move(fetch)([completion = std::move(completion)](FetchResult result) mutable {
    completion->Run(std::move(result));
  });
}

void CachedFetcher::Publish(const std::shared_ptr<Flight>& flight, const GetResult& result,
                            Done leader_done) {
  std::vector<Done> followers;
  {
    absl::MutexLock lock(&mu_);
    // Only after the value is in the cache (Completion::Run inserts before calling us): a caller
    // that no longer finds the flight then finds the entry instead of starting a second call.
    auto it = flights_.find(flight->encoded);
    if (it != flights_.end() && it->second == flight) flights_.erase(it);
    followers.swap(flight->followers);
  }
  // Out of flights_, so nothing reads the ticket any more; releasing it lets the cache forget
  // invalidations only this flight cared about.
  flight->ticket = FetchTicket();

  // Outside the lock: callbacks may re-enter GetOrFetch or take their own locks.
  std::move(leader_done)(result);
  for (Done& follower : followers) {
    GetResult copy = result;
    copy.coalesced = true;
    std::move(follower)(std::move(copy));
  }
}

FetcherStats CachedFetcher::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

}  // namespace inspection::cache
