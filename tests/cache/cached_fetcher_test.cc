#include "gateway/cache/cached_fetcher.h"

#include <algorithm>
#include <cstddef>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gateway/cache/cache_key.h"
#include "gateway/cache/response_cache.h"
#include "gtest/gtest.h"

namespace inspection::cache {
namespace {

constexpr absl::Duration kTtl = absl::Seconds(10);
constexpr absl::Duration kStaleWindow = absl::Seconds(60);

class FakeClock {
 public:
  absl::Time Now() const {
    absl::MutexLock lock(&mu_);
    return now_;
  }
  void Advance(absl::Duration d) {
    absl::MutexLock lock(&mu_);
    now_ += d;
  }
  CachedFetcher::Clock AsClock() {
    return [this] { return Now(); };
  }

 private:
  mutable absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_) = absl::FromUnixSeconds(1'700'000'000);
};

// The vendor: records every upstream call; the test decides when and how each one completes.
class ManualUpstream {
 public:
  CachedFetcher::Fetch Fetch() {
    return [this](CachedFetcher::Complete complete) {
      absl::MutexLock lock(&mu_);
      pending_.push_back(std::move(complete));
    };
  }

  int calls() const {
    absl::MutexLock lock(&mu_);
    return static_cast<int>(pending_.size());
  }

  void AwaitCalls(int n) const {
    absl::MutexLock lock(&mu_);
    auto reached = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return static_cast<int>(pending_.size()) >= n;
    };
    mu_.Await(absl::Condition(&reached));
  }

  // Completes upstream call `i` (in start order). Outside the lock: the done callbacks it
  // triggers may start new calls.
  void Complete(std::size_t i, FetchResult result) {
    CachedFetcher::Complete complete;
    {
      absl::MutexLock lock(&mu_);
      complete = std::exchange(pending_.at(i), nullptr);
    }
    ASSERT_TRUE(complete != nullptr) << "call " << i << " already completed";
    std::move(complete)(std::move(result));
  }

  // Destroys call `i`'s completion without calling it (outside the lock, like Complete).
  void Drop(std::size_t i) {
    CachedFetcher::Complete complete;
    {
      absl::MutexLock lock(&mu_);
      complete = std::exchange(pending_.at(i), nullptr);
    }
    complete = nullptr;
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<CachedFetcher::Complete> pending_ ABSL_GUARDED_BY(mu_);
};

class Results {
 public:
  CachedFetcher::Done Done() {
    return [this](GetResult result) {
      absl::MutexLock lock(&mu_);
      results_.push_back(std::move(result));
    };
  }
  std::size_t size() const {
    absl::MutexLock lock(&mu_);
    return results_.size();
  }
  std::vector<GetResult> Take() {
    absl::MutexLock lock(&mu_);
    return std::exchange(results_, {});
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<GetResult> results_ ABSL_GUARDED_BY(mu_);
};

std::size_t CountCoalesced(const std::vector<GetResult>& results) {
  return static_cast<std::size_t>(std::count_if(results.begin(), results.end(),
                                                [](const GetResult& r) { return r.coalesced; }));
}

// The bytes of a BytesEntry ("<null>" for none).
std::string BytesOf(const CachedValue& value) {
  if (value == nullptr) return "<null>";
  const auto* bytes = dynamic_cast<const BytesEntry*>(value.get());
  return bytes == nullptr ? "<not bytes>" : bytes->bytes();
}

std::string ValueOf(const GetResult& result) {
  if (result.value == nullptr) return "<null>";
  const auto* bytes = dynamic_cast<const BytesEntry*>(result.value.get());
  return bytes == nullptr ? "<not bytes>" : bytes->bytes();
}

CacheOptions TestOptions() {
  CacheOptions options;
  options.max_bytes = 1 << 20;
  options.stale_if_error = kStaleWindow;
  return options;
}

class CachedFetcherTest : public ::testing::Test {
 protected:
  void Get(const CacheKey& key, const GetOptions& options = {}) {
    fetcher_.GetOrFetch(key, options, upstream_.Fetch(), results_.Done());
  }

  // Declaration order matters for teardown: upstream_ goes first, and its undelivered
  // completions still reach a live fetcher and results_.
  FakeClock clock_;
  ResponseCache cache_{TestOptions()};
  CachedFetcher fetcher_{&cache_, clock_.AsClock()};
  Results results_;
  ManualUpstream upstream_;

  const CacheKey key_{"acct", "get_inspection", "id=1"};
};

TEST_F(CachedFetcherTest, MissFetchesStoresAndTheNextCallIsAFreshHit) {
  Get(key_);
  ASSERT_EQ(upstream_.calls(), 1);
  EXPECT_EQ(results_.size(), 0u);  // nobody answered before upstream did
  upstream_.Complete(0, FetchResult::Success("v", kTtl, {"extra-tag"}));

  std::vector<GetResult> first = results_.Take();
  ASSERT_EQ(first.size(), 1u);
  EXPECT_TRUE(first[0].ok());
  EXPECT_EQ(first[0].source, Source::kFetched);
  EXPECT_FALSE(first[0].coalesced);
  EXPECT_FALSE(first[0].stale());
  EXPECT_EQ(ValueOf(first[0]), "v");

  clock_.Advance(kTtl - absl::Nanoseconds(1));
  Get(key_);
  std::vector<GetResult> second = results_.Take();
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].source, Source::kFreshHit);
  EXPECT_EQ(second[0].value, first[0].value);  // the very same bytes, not a copy
  EXPECT_EQ(upstream_.calls(), 1);

  // The TTL runs from when the response arrived; at exactly TTL it is a miss again.
  clock_.Advance(absl::Nanoseconds(1));
  Get(key_);
  EXPECT_EQ(upstream_.calls(), 2);
  // Stored under the tags the fetch reported.
  EXPECT_EQ(cache_.InvalidateTag("extra-tag"), 1u);
}

TEST_F(CachedFetcherTest, TheStoredEntryItselfReachesTheLeaderFollowersHitsAndStaleCallers) {
  Get(key_);
  Get(key_);  // joins the first call
  ASSERT_EQ(upstream_.calls(), 1);
  const CachedValue entry = MakeCachedValue("v");
  upstream_.Complete(0, FetchResult::Success(entry, kTtl));
  std::vector<GetResult> first = results_.Take();
  ASSERT_EQ(first.size(), 2u);
  EXPECT_EQ(first[0].value, entry);
  EXPECT_EQ(first[1].value, entry);
  EXPECT_TRUE(first[1].coalesced);

  Get(key_);  // a fresh hit
  std::vector<GetResult> hit = results_.Take();
  ASSERT_EQ(hit.size(), 1u);
  EXPECT_EQ(hit[0].source, Source::kFreshHit);
  EXPECT_EQ(hit[0].value, entry);

  // Past the TTL the vendor fails: the stale answer is the same entry too.
  clock_.Advance(kTtl);
  Get(key_);
  ASSERT_EQ(upstream_.calls(), 2);
  upstream_.Complete(1, FetchResult::Failure(absl::UnavailableError("down")));
  std::vector<GetResult> stale = results_.Take();
  ASSERT_EQ(stale.size(), 1u);
  EXPECT_TRUE(stale[0].stale());
  EXPECT_EQ(stale[0].value, entry);
}

TEST_F(CachedFetcherTest, ASuccessWithoutAValueIsAnInternalErrorNotAnEmptyAnswer) {
  Get(key_);
  Get(key_);
  upstream_.Complete(0, FetchResult::Success(CachedValue(), kTtl));
  std::vector<GetResult> got = results_.Take();
  ASSERT_EQ(got.size(), 2u);
  for (const GetResult& result : got) {
    EXPECT_EQ(result.status.code(), absl::StatusCode::kInternal);
    EXPECT_EQ(result.value, nullptr);
  }
  EXPECT_EQ(cache_.stats().entries, 0u);
}

TEST_F(CachedFetcherTest, HundredConcurrentCallersMakeOneUpstreamCall) {
  constexpr int kThreads = 4;
  constexpr int kPerThread = 25;
  absl::Notification go;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      go.WaitForNotification();
      for (int i = 0; i < kPerThread; ++i) Get(key_);
    });
  }
  go.Notify();
  for (std::thread& thread : threads) thread.join();

  ASSERT_EQ(upstream_.calls(), 1);
  EXPECT_EQ(results_.size(), 0u);
  upstream_.Complete(0, FetchResult::Success("v", kTtl));

  std::vector<GetResult> results = results_.Take();
  ASSERT_EQ(results.size(), 100u);
  EXPECT_EQ(CountCoalesced(results), 99u);
  EXPECT_FALSE(results[0].coalesced);  // the leader is answered first
  for (const GetResult& r : results) {
    EXPECT_TRUE(r.ok());
    EXPECT_EQ(r.source, Source::kFetched);
    EXPECT_EQ(r.value, results[0].value);
    EXPECT_EQ(ValueOf(r), "v");
  }
  const FetcherStats stats = fetcher_.stats();
  EXPECT_EQ(stats.fetches, 1u);
  EXPECT_EQ(stats.coalesced, 99u);
  EXPECT_EQ(cache_.stats().misses, 100u);
  EXPECT_EQ(cache_.stats().inserts, 1u);
}

TEST_F(CachedFetcherTest, CompletionRacingWithArrivalsStillMakesOneUpstreamCall) {
  // Callers keep arriving while the upstream call completes on another thread: each one either
  // joins the flight or finds the stored value, never starts a second call.
  constexpr int kThreads = 4;
  constexpr int kPerThread = 25;
  absl::Notification go;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      go.WaitForNotification();
      for (int i = 0; i < kPerThread; ++i) Get(key_);
    });
  }
  std::thread completer([&] {
    upstream_.AwaitCalls(1);
    upstream_.Complete(0, FetchResult::Success("v", kTtl));
  });
  go.Notify();
  for (std::thread& thread : threads) thread.join();
  completer.join();

  EXPECT_EQ(upstream_.calls(), 1);
  std::vector<GetResult> results = results_.Take();
  ASSERT_EQ(results.size(), 100u);
  std::size_t leaders = 0;
  for (const GetResult& r : results) {
    EXPECT_EQ(ValueOf(r), "v");
    if (r.source == Source::kFetched && !r.coalesced) ++leaders;
  }
  EXPECT_EQ(leaders, 1u);
  EXPECT_EQ(fetcher_.stats().fetches, 1u);
}

TEST_F(CachedFetcherTest, ErrorReachesEveryFollowerAndIsNotCached) {
  for (int i = 0; i < 10; ++i) Get(key_);
  ASSERT_EQ(upstream_.calls(), 1);
  upstream_.Complete(0, FetchResult::Failure(absl::NotFoundError("no such inspection")));

  std::vector<GetResult> results = results_.Take();
  ASSERT_EQ(results.size(), 10u);
  EXPECT_EQ(CountCoalesced(results), 9u);
  for (const GetResult& r : results) {
    EXPECT_EQ(r.status, absl::NotFoundError("no such inspection"));
    EXPECT_EQ(r.source, Source::kFetched);
    EXPECT_EQ(r.value, nullptr);
  }
  EXPECT_EQ(cache_.stats().entries, 0u);
  Get(key_);  // the finished flight is gone: a new call starts
  EXPECT_EQ(upstream_.calls(), 2);
}

// The caller's typed description of a failure reaches every caller of the flight as it was,
// never re-encoded (the pipeline hands its VendorResult through here).
TEST_F(CachedFetcherTest, AFailuresDetailReachesEveryCallerUnchanged) {
  class Detail final : public FailureDetail {
   public:
    explicit Detail(std::string text) : text(std::move(text)) {}
    const std::string text;
  };
  for (int i = 0; i < 3; ++i) Get(key_);
  auto detail = std::make_shared<const Detail>("the vendor's typed error");
  upstream_.Complete(0, FetchResult::Failure(absl::UnavailableError("down"), false, detail));
  std::vector<GetResult> results = results_.Take();
  ASSERT_EQ(results.size(), 3u);
  for (const GetResult& r : results) {
    EXPECT_EQ(r.error_detail.get(), detail.get()) << "the same object, not a copy";
    const auto* typed = dynamic_cast<const Detail*>(r.error_detail.get());
    ASSERT_NE(typed, nullptr);
    EXPECT_EQ(typed->text, "the vendor's typed error");
  }
}

TEST_F(CachedFetcherTest, StaleServedOnlyOnRetryableFailureWithinWindowAndFlagged) {
  Get(key_);
  upstream_.Complete(0, FetchResult::Success("v1", kTtl));  // fresh until +10s
  results_.Take();
  clock_.Advance(absl::Seconds(20));

  // Expired: not served as a hit, upstream is asked. A vendor 5xx (UNAVAILABLE): stale.
  Get(key_);
  Get(key_);
  ASSERT_EQ(upstream_.calls(), 2);
  upstream_.Complete(1, FetchResult::Failure(absl::UnavailableError("vendor 503")));
  std::vector<GetResult> stale = results_.Take();
  ASSERT_EQ(stale.size(), 2u);
  for (const GetResult& r : stale) {
    EXPECT_TRUE(r.ok());
    EXPECT_TRUE(r.stale());
    EXPECT_EQ(r.source, Source::kStaleAfterError);
    EXPECT_EQ(ValueOf(r), "v1");
    EXPECT_EQ(r.stale_cause, absl::UnavailableError("vendor 503"));
  }
  EXPECT_FALSE(stale[0].coalesced);
  EXPECT_TRUE(stale[1].coalesced);
  EXPECT_EQ(cache_.stats().stale_served, 1u);  // once per flight

  // A 4xx is the vendor's answer about the request: never papered over with a stale value.
  Get(key_);
  upstream_.Complete(2, FetchResult::Failure(absl::InvalidArgumentError("bad id")));
  // Nor is an error the fetch explicitly marks as not eligible.
  Get(key_);
  upstream_.Complete(3, FetchResult::Failure(absl::UnavailableError("x"), false));
  std::vector<GetResult> errors = results_.Take();
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors[0].status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(errors[1].status.code(), absl::StatusCode::kUnavailable);
  EXPECT_FALSE(errors[0].stale());
  EXPECT_FALSE(errors[1].stale());

  // Upstream success while a stale entry exists: the new value, not flagged stale.
  Get(key_);
  upstream_.Complete(4, FetchResult::Success("v2", kTtl));  // fresh until +30s, stale to +90s
  std::vector<GetResult> fresh = results_.Take();
  ASSERT_EQ(fresh.size(), 1u);
  EXPECT_EQ(ValueOf(fresh[0]), "v2");
  EXPECT_FALSE(fresh[0].stale());

  // The window's last instant still serves stale; its end does not.
  clock_.Advance(kTtl + kStaleWindow - absl::Nanoseconds(1));
  Get(key_);
  upstream_.Complete(5, FetchResult::Failure(absl::DeadlineExceededError("timeout")));
  clock_.Advance(absl::Nanoseconds(1));
  Get(key_);
  upstream_.Complete(6, FetchResult::Failure(absl::DeadlineExceededError("timeout")));
  std::vector<GetResult> edge = results_.Take();
  ASSERT_EQ(edge.size(), 2u);
  EXPECT_TRUE(edge[0].stale());
  EXPECT_EQ(ValueOf(edge[0]), "v2");
  EXPECT_FALSE(edge[1].ok());
  EXPECT_EQ(edge[1].status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(cache_.stats().stale_served, 2u);
}

TEST_F(CachedFetcherTest, InvalidatedEntryIsNotAStaleFallback) {
  Get(key_);
  upstream_.Complete(0, FetchResult::Success("v1", kTtl));
  clock_.Advance(absl::Seconds(20));
  Get(key_);
  cache_.InvalidateKey(key_);  // e.g. a webhook while the refresh is failing
  upstream_.Complete(1, FetchResult::Failure(absl::UnavailableError("down")));
  std::vector<GetResult> results = results_.Take();
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[1].status.code(), absl::StatusCode::kUnavailable);
}

TEST_F(CachedFetcherTest, InvalidationDuringFetchPreventsInsertion) {
  const CacheKey report{"acct", "get_damages_report", "inspection=X"};
  GetOptions options;
  options.tags = {InspectionTag("X")};
  Get(report, options);
  ASSERT_EQ(upstream_.calls(), 1);

  // A webhook event about X arrives while the report is being fetched.
  cache_.InvalidateTag(InspectionTag("X"));
  upstream_.Complete(0, FetchResult::Success("report before the event", kTtl));

  std::vector<GetResult> results = results_.Take();
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(ValueOf(results[0]), "report before the event");  // its caller still gets it
  EXPECT_EQ(cache_.Peek(report, clock_.Now()), nullptr);      // but it is not kept
  EXPECT_EQ(cache_.stats().discarded_inserts, 1u);
  EXPECT_EQ(cache_.stats().tracked_invalidations, 0u);
}

TEST_F(CachedFetcherTest, InvalidationOfAResponseTagDuringFetchPreventsInsertion) {
  // Search pages learn which inspections they list only from the response.
  const CacheKey search{"acct", "search_inspections", "page=1"};
  Get(search);
  cache_.InvalidateTag(InspectionTag("X"));
  upstream_.Complete(0,
                     FetchResult::Success("page", kTtl, {InspectionTag("X"), InspectionTag("Y")}));
  EXPECT_EQ(results_.Take().size(), 1u);
  EXPECT_EQ(cache_.Peek(search, clock_.Now()), nullptr);
}

TEST_F(CachedFetcherTest, UnrelatedInvalidationDuringFetchDoesNotPreventInsertion) {
  GetOptions options;
  options.tags = {InspectionTag("X")};
  Get(key_, options);
  cache_.InvalidateTag(InspectionTag("Y"));
  cache_.InvalidateTag(RouteTag("other-account", key_.route));
  upstream_.Complete(0, FetchResult::Success("v", kTtl));
  EXPECT_NE(cache_.Peek(key_, clock_.Now()), nullptr);
}

TEST_F(CachedFetcherTest, CallerAfterAWriteDoesNotJoinAFlightThatBeganBeforeIt) {
  const CacheKey config{"acct", "get_webhook_config", ""};
  Get(config);  // flight 0 begins
  // UpdateWebhookConfig succeeds; the pipeline drops the cached GET.
  cache_.InvalidateTag(RouteTag("acct", "get_webhook_config"));
  Get(config);  // must see the write: a new upstream call, not flight 0's answer
  ASSERT_EQ(upstream_.calls(), 2);
  Get(config);  // joins flight 1, which is current
  EXPECT_EQ(upstream_.calls(), 2);

  // The newer answer lands first; the older one, landing after, must not overwrite it.
  upstream_.Complete(1, FetchResult::Success("new config", kTtl));
  upstream_.Complete(0, FetchResult::Success("old config", kTtl));

  std::vector<GetResult> results = results_.Take();
  ASSERT_EQ(results.size(), 3u);
  EXPECT_EQ(ValueOf(results[0]), "new config");
  EXPECT_FALSE(results[0].coalesced);
  EXPECT_EQ(ValueOf(results[1]), "new config");
  EXPECT_TRUE(results[1].coalesced);
  EXPECT_EQ(ValueOf(results[2]), "old config");
  EXPECT_EQ(BytesOf(cache_.Peek(config, clock_.Now())), "new config");
  EXPECT_EQ(fetcher_.stats().fetches, 2u);
  EXPECT_EQ(fetcher_.stats().coalesced, 1u);
}

TEST_F(CachedFetcherTest, BypassSkipsTheCacheAndRefreshesIt) {
  Get(key_);
  upstream_.Complete(0, FetchResult::Success("v1", kTtl));
  GetOptions bypass;
  bypass.bypass = true;
  Get(key_, bypass);  // fresh entry, but asked to bypass
  ASSERT_EQ(upstream_.calls(), 2);
  upstream_.Complete(1, FetchResult::Success("v2", kTtl));
  Get(key_);
  std::vector<GetResult> results = results_.Take();
  ASSERT_EQ(results.size(), 3u);
  EXPECT_EQ(results[1].source, Source::kFetched);
  EXPECT_EQ(ValueOf(results[1]), "v2");
  EXPECT_EQ(results[2].source, Source::kFreshHit);
  EXPECT_EQ(ValueOf(results[2]), "v2");
  EXPECT_EQ(fetcher_.stats().bypassed, 1u);
}

TEST_F(CachedFetcherTest, BypassDoesNotJoinAFlightButLaterCallersJoinIt) {
  Get(key_);  // flight 0
  GetOptions bypass;
  bypass.bypass = true;
  Get(key_, bypass);  // flight 1, not a follower of 0
  ASSERT_EQ(upstream_.calls(), 2);
  Get(key_);  // joins the newest flight, 1
  EXPECT_EQ(upstream_.calls(), 2);
  upstream_.Complete(1, FetchResult::Success("bypass", kTtl));
  upstream_.Complete(0, FetchResult::Success("first", kTtl));
  std::vector<GetResult> results = results_.Take();
  ASSERT_EQ(results.size(), 3u);
  EXPECT_EQ(ValueOf(results[0]), "bypass");
  EXPECT_FALSE(results[0].coalesced);
  EXPECT_EQ(ValueOf(results[1]), "bypass");
  EXPECT_TRUE(results[1].coalesced);
  EXPECT_EQ(ValueOf(results[2]), "first");
  EXPECT_FALSE(
      results[2].coalesced);  // The first flight landed last, but its answer is the older one.
  EXPECT_EQ(BytesOf(cache_.Peek(key_, clock_.Now())), "bypass");
}

TEST_F(CachedFetcherTest, BypassGetsNoStaleFallback) {
  Get(key_);
  upstream_.Complete(0, FetchResult::Success("v1", kTtl));
  clock_.Advance(absl::Seconds(20));
  GetOptions bypass;
  bypass.bypass = true;
  Get(key_, bypass);
  upstream_.Complete(1, FetchResult::Failure(absl::UnavailableError("down")));
  std::vector<GetResult> results = results_.Take();
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[1].status.code(), absl::StatusCode::kUnavailable);
}

TEST_F(CachedFetcherTest, DroppedCompletionCancelsEveryCaller) {
  for (int i = 0; i < 3; ++i) Get(key_);
  upstream_.Drop(0);
  std::vector<GetResult> results = results_.Take();
  ASSERT_EQ(results.size(), 3u);
  for (const GetResult& r : results) EXPECT_EQ(r.status.code(), absl::StatusCode::kCancelled);
  Get(key_);
  EXPECT_EQ(upstream_.calls(), 2);
}

TEST_F(CachedFetcherTest, SynchronousCompletionAndReentrantDone) {
  // `fetch` completes before returning, and `done` calls back into the fetcher: neither may
  // deadlock, which they would if callbacks ran under a lock.
  std::vector<GetResult> inner;
  fetcher_.GetOrFetch(
      key_,
      [](CachedFetcher::Complete complete) {
        std::move(complete)(FetchResult::Success("v", kTtl));
      },
      [&](GetResult outer) {
        EXPECT_EQ(ValueOf(outer), "v");
        fetcher_.GetOrFetch(
            key_, [](CachedFetcher::Complete) { ADD_FAILURE() << "should be a hit"; },
            [&](GetResult r) { inner.push_back(std::move(r)); });
      });
  ASSERT_EQ(inner.size(), 1u);
  EXPECT_EQ(inner[0].source, Source::kFreshHit);
}

TEST_F(CachedFetcherTest, ZeroTtlIsSharedButNotStored) {
  Get(key_);
  Get(key_);
  upstream_.Complete(0, FetchResult::Success("uncacheable", absl::ZeroDuration()));
  std::vector<GetResult> results = results_.Take();
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(ValueOf(results[1]), "uncacheable");
  EXPECT_TRUE(results[1].coalesced);
  EXPECT_EQ(cache_.stats().entries, 0u);
  Get(key_);
  EXPECT_EQ(upstream_.calls(), 2);
}

TEST_F(CachedFetcherTest, AccountsNeitherShareEntriesNorFlights) {
  const CacheKey alice{"alice", "get_inspection", "id=1"};
  const CacheKey bob{"bob", "get_inspection", "id=1"};
  Get(alice);
  Get(bob);
  ASSERT_EQ(upstream_.calls(), 2);
  upstream_.Complete(0, FetchResult::Success("alice's", kTtl));
  upstream_.Complete(1, FetchResult::Success("bob's", kTtl));
  Get(alice);
  Get(bob);
  std::vector<GetResult> results = results_.Take();
  ASSERT_EQ(results.size(), 4u);
  EXPECT_EQ(CountCoalesced(results), 0u);
  EXPECT_EQ(ValueOf(results[2]), "alice's");
  EXPECT_EQ(ValueOf(results[3]), "bob's");
  EXPECT_EQ(upstream_.calls(), 2);
}

TEST(StaleIfErrorAppliesTest, OnlyWhenTheVendorCouldNotAnswer) {
  EXPECT_TRUE(StaleIfErrorApplies(absl::UnavailableError("")));
  EXPECT_TRUE(StaleIfErrorApplies(absl::DeadlineExceededError("")));
  EXPECT_FALSE(StaleIfErrorApplies(absl::InvalidArgumentError("")));
  EXPECT_FALSE(StaleIfErrorApplies(absl::NotFoundError("")));
  EXPECT_FALSE(StaleIfErrorApplies(absl::PermissionDeniedError("")));
  EXPECT_FALSE(StaleIfErrorApplies(absl::ResourceExhaustedError("")));
  EXPECT_FALSE(StaleIfErrorApplies(absl::OkStatus()));
}

}  // namespace
}  // namespace inspection::cache
