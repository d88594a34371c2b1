#ifndef GATEWAY_PIPELINE_CACHING_CALLER_H_
#define GATEWAY_PIPELINE_CACHING_CALLER_H_

#include <functional>
#include <optional>
#include <string>

#include "absl/time/time.h"
#include "gateway/cache/cached_fetcher.h"
#include "gateway/cache/response_cache.h"
#include "gateway/pipeline/pipeline_metrics.h"
#include "gateway/timers/scheduler.h"
#include "gateway/upstream/vendor_caller.h"

namespace inspection::pipeline {

struct CachingOptions {
  // Off: every call goes to the next caller (no caching, no coalescing).
  bool enabled = true;
  // Upper bound on the bytes the cache holds (keys, bodies, tags, per-entry overhead).
  size_t max_bytes = size_t{64} << 20;
  // How long past its TTL an answer may still be served when the vendor fails
  // (UNAVAILABLE, DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED). Zero disables stale-if-error.
  absl::Duration stale_if_error = absl::Minutes(5);
  // Image analysis (quality, segmentation, background removal): cached by (URL,
  // parameters) when on, for `image_analysis_ttl` (route table TTL when unset).
  bool image_analysis = true;
  std::optional<absl::Duration> image_analysis_ttl;
  // The cache scope of a vendor account (a hash of its upstream and API key, never the key): two
  // accounts never share an entry. Null: every account is scoped by its name.
  std::function<std::string(const std::string& account)> account_scope;
  std::function<absl::Time()> clock = [] { return absl::Now(); };
  // Cache metrics (hits, misses, coalesced, stale, evictions, bytes); null: none.
  PipelineMetrics* metrics = nullptr;
  // Timers that answer a caller whose own deadline passes while it waits for a shared
  // fetch (CALLER_DEADLINE_EXCEEDED) without cancelling the fetch. Null: a caller waits
  // until the fetch ends (at most the route's timeout, plus retries, after it started).
  timers::Scheduler* timers = nullptr;
};

// The response cache of the request pipeline (docs/design.md §4), a decorator above the retry
// loop. For cacheable routes (route table: `cacheable`, `cache_ttl`) it answers fresh
// entries without calling the vendor, coalesces identical concurrent calls into one,
// and serves an expired entry within the stale window when the vendor fails (the
// result says kStale so the service can flag it). Keys: the account's scope, the route
// and the canonical request (path parameters, query, body with sorted keys).
// Invalidation, from the routes' annotations: a call drops the routes its
// `vendor_route.invalidates` names (UpdateWebhookConfig drops GetWebhookConfig, after the
// write, whatever its outcome: it may have been applied); answers carry their route's
// `cache_tags`, and OnInspectionEvent drops that inspection's tag and every search page.
// Only 2xx answers are stored.
//
// Deadlines: a fetch is shared, so no one caller's deadline governs it. It runs until
// the later of its first caller's deadline and the route's timeout from now, so an
// impatient first caller cannot fail every caller that joined it. Each caller waits
// until its own deadline at most (CALLER_DEADLINE_EXCEEDED, DEADLINE_EXCEEDED); the fetch
// goes on and its answer is cached for the next one. Thread-safe.
class CachingCaller final : public upstream::VendorCaller {
 public:
  CachingCaller(upstream::VendorCaller* next, CachingOptions options);

  void Call(routes::RouteId route, const vendor::VendorRequest& request,
            std::chrono::system_clock::time_point deadline, const upstream::CallOptions& options,
            upstream::VendorCallback done) override;

  // A vendor event about `inspection_id` arrived: its report and the search results
  // may have changed.
  void OnInspectionEvent(const std::string& inspection_id);

  cache::CacheStats cache_stats() const { return cache_.stats(); }
  cache::FetcherStats fetcher_stats() const { return fetcher_.stats(); }

 private:
  std::string ScopeOf(const std::string& account) const;
  // The TTL of `route` under the options; zero: not cached.
  absl::Duration TtlOf(const routes::Route& route) const;
  void CallAndInvalidate(routes::RouteId route, const vendor::VendorRequest& request,
                         std::chrono::system_clock::time_point deadline,
                         const upstream::CallOptions& options, upstream::VendorCallback done,
                         std::vector<std::string> tags);
  void PublishGauges();
  struct Waiter;
  // Answers `waiter` once: the first of the fetch's result and its deadline timer.
  void Deliver(const std::shared_ptr<Waiter>& waiter, upstream::VendorResult result);

  upstream::VendorCaller* const next_;
  const CachingOptions options_;
  cache::ResponseCache cache_;
  cache::CachedFetcher fetcher_;
  absl::Mutex metrics_mu_;
  uint64_t reported_evictions_ ABSL_GUARDED_BY(metrics_mu_) = 0;
};

// The tag every SearchInspections entry carries (any new event may change any page).
inline constexpr char kSearchResultsTag[] = "search-results";

}  // namespace inspection::pipeline

#endif  // GATEWAY_PIPELINE_CACHING_CALLER_H_
