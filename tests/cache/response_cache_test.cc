#include "gateway/cache/response_cache.h"

#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "gateway/cache/cache_key.h"
#include "gtest/gtest.h"

namespace inspection::cache {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1'700'000'000);
constexpr absl::Duration kTtl = absl::Seconds(10);

CacheKey Key(const std::string& request, const std::string& account = "acct",
             const std::string& route = "get_inspection") {
  return CacheKey{account, route, request};
}

CacheOptions Options(std::size_t max_bytes, absl::Duration stale = absl::ZeroDuration()) {
  CacheOptions options;
  options.max_bytes = max_bytes;
  options.stale_if_error = stale;
  return options;
}

// The bytes of a BytesEntry ("<null>" for none).
std::string BytesOf(const CachedValue& value) {
  if (value == nullptr) return "<null>";
  const auto* bytes = dynamic_cast<const BytesEntry*>(value.get());
  return bytes == nullptr ? "<not bytes>" : bytes->bytes();
}

std::string ValueOf(const LookupResult& result) {
  if (result.value == nullptr) return "<null>";
  const auto* bytes = dynamic_cast<const BytesEntry*>(result.value.get());
  return bytes == nullptr ? "<not bytes>" : bytes->bytes();
}

TEST(ResponseCacheTest, EntryChargeFormula) {
  // "4:acct5:route3:req" (18) + value (10) + "route:4:acctroute" (17) + "x" (1, once) + 128.
  EXPECT_EQ(ResponseCache::EntryCharge({"acct", "route", "req"}, 10, {"x", "x"}),
            18u + 10u + 17u + 1u + 128u);
  EXPECT_EQ(ResponseCache::kEntryOverheadBytes, 128u);
}

TEST(ResponseCacheTest, FreshUntilExactlyTtlThenGone) {
  ResponseCache cache(Options(1 << 20));
  ASSERT_TRUE(cache.Insert(Key("a"), MakeCachedValue("v"), kTtl, {}, kT0));

  LookupResult before = cache.Lookup(Key("a"), kT0 + kTtl - absl::Nanoseconds(1));
  EXPECT_EQ(before.freshness, Freshness::kFresh);
  EXPECT_EQ(ValueOf(before), "v");

  // Expiry is at expires_at itself, not after it. No stale window: the entry is dropped.
  LookupResult at = cache.Lookup(Key("a"), kT0 + kTtl);
  EXPECT_EQ(at.freshness, Freshness::kMiss);
  EXPECT_EQ(at.value, nullptr);
  EXPECT_EQ(cache.stats().entries, 0u);
  EXPECT_EQ(cache.stats().bytes, 0u);
}

TEST(ResponseCacheTest, StaleOnlyThroughServeStaleAndOnlyWithinWindow) {
  ResponseCache cache(Options(1 << 20, /*stale=*/absl::Seconds(5)));
  ASSERT_TRUE(cache.Insert(Key("a"), MakeCachedValue("v"), kTtl, {}, kT0));

  // Fresh: ServeStale hands back the value but it is not a stale serve.
  LookupResult fresh = cache.ServeStale(Key("a"), kT0 + absl::Seconds(9));
  EXPECT_EQ(fresh.freshness, Freshness::kFresh);
  EXPECT_EQ(ValueOf(fresh), "v");

  // Past the TTL a normal lookup reports the stale entry but never serves it.
  LookupResult lookup = cache.Lookup(Key("a"), kT0 + kTtl);
  EXPECT_EQ(lookup.freshness, Freshness::kStale);
  EXPECT_EQ(lookup.value, nullptr);

  LookupResult first = cache.ServeStale(Key("a"), kT0 + kTtl);
  EXPECT_EQ(first.freshness, Freshness::kStale);
  EXPECT_EQ(ValueOf(first), "v");
  LookupResult last =
      cache.ServeStale(Key("a"), kT0 + kTtl + absl::Seconds(5) - absl::Nanoseconds(1));
  EXPECT_EQ(last.freshness, Freshness::kStale);
  EXPECT_EQ(ValueOf(last), "v");

  LookupResult closed = cache.ServeStale(Key("a"), kT0 + kTtl + absl::Seconds(5));
  EXPECT_EQ(closed.freshness, Freshness::kMiss);
  EXPECT_EQ(closed.value, nullptr);

  const CacheStats stats = cache.stats();
  EXPECT_EQ(stats.stale_served, 2u);
  EXPECT_EQ(stats.hits, 0u);
  EXPECT_EQ(stats.misses, 1u);
}

TEST(ResponseCacheTest, LookupDropsEntriesPastTheStaleWindow) {
  ResponseCache cache(Options(1 << 20, /*stale=*/absl::Seconds(5)));
  ASSERT_TRUE(cache.Insert(Key("a"), MakeCachedValue("v"), kTtl, {}, kT0));
  EXPECT_EQ(cache.Lookup(Key("a"), kT0 + kTtl + absl::Seconds(5)).freshness, Freshness::kMiss);
  EXPECT_EQ(cache.stats().entries, 0u);
  EXPECT_EQ(cache.ServeStale(Key("a"), kT0 + kTtl).freshness, Freshness::kMiss);
}

TEST(ResponseCacheTest, EvictsLeastRecentlyUsedNotLeastRecentlyInserted) {
  const std::size_t charge = ResponseCache::EntryCharge(Key("a"), 10, {});
  ResponseCache cache(Options(3 * charge));
  const std::string ten(10, 'x');
  ASSERT_TRUE(cache.Insert(Key("a"), MakeCachedValue(ten), kTtl, {}, kT0));
  ASSERT_TRUE(cache.Insert(Key("b"), MakeCachedValue(ten), kTtl, {}, kT0));
  ASSERT_TRUE(cache.Insert(Key("c"), MakeCachedValue(ten), kTtl, {}, kT0));
  EXPECT_EQ(cache.stats().bytes, 3 * charge);

  // "a" is the oldest insertion, but this use makes "b" the least recently used.
  ASSERT_EQ(cache.Lookup(Key("a"), kT0).freshness, Freshness::kFresh);
  ASSERT_TRUE(cache.Insert(Key("d"), MakeCachedValue(ten), kTtl, {}, kT0));

  EXPECT_EQ(cache.Peek(Key("b"), kT0), nullptr);
  EXPECT_NE(cache.Peek(Key("a"), kT0), nullptr);
  EXPECT_NE(cache.Peek(Key("c"), kT0), nullptr);
  EXPECT_NE(cache.Peek(Key("d"), kT0), nullptr);
  const CacheStats stats = cache.stats();
  EXPECT_EQ(stats.evictions, 1u);
  EXPECT_EQ(stats.entries, 3u);
  EXPECT_EQ(stats.bytes, 3 * charge);
}

TEST(ResponseCacheTest, BigInsertEvictsAsManyAsNeeded) {
  const std::size_t charge = ResponseCache::EntryCharge(Key("a"), 10, {});
  ResponseCache cache(Options(3 * charge));
  const std::string ten(10, 'x');
  ASSERT_TRUE(cache.Insert(Key("a"), MakeCachedValue(ten), kTtl, {}, kT0));
  ASSERT_TRUE(cache.Insert(Key("b"), MakeCachedValue(ten), kTtl, {}, kT0));
  ASSERT_TRUE(cache.Insert(Key("c"), MakeCachedValue(ten), kTtl, {}, kT0));

  // Charge exactly 2 * charge: "a" and "b" (least recent) must go, "c" stays.
  const std::string big(10 + charge, 'y');
  ASSERT_EQ(ResponseCache::EntryCharge(Key("z"), big.size(), {}), 2 * charge);
  ASSERT_TRUE(cache.Insert(Key("z"), MakeCachedValue(big), kTtl, {}, kT0));

  EXPECT_EQ(cache.Peek(Key("a"), kT0), nullptr);
  EXPECT_EQ(cache.Peek(Key("b"), kT0), nullptr);
  EXPECT_NE(cache.Peek(Key("c"), kT0), nullptr);
  EXPECT_NE(cache.Peek(Key("z"), kT0), nullptr);
  EXPECT_EQ(cache.stats().evictions, 2u);
  EXPECT_EQ(cache.stats().bytes, 3 * charge);
}

TEST(ResponseCacheTest, EntryLargerThanMaxBytesIsNotCachedAndEvictsNothing) {
  const std::size_t charge = ResponseCache::EntryCharge(Key("a"), 1, {});
  ResponseCache cache(Options(2 * charge));
  ASSERT_TRUE(cache.Insert(Key("a"), MakeCachedValue("1"), kTtl, {}, kT0));
  ASSERT_TRUE(cache.Insert(Key("b"), MakeCachedValue("1"), kTtl, {}, kT0));

  // One byte over the whole budget.
  const std::string too_big(2 * charge - charge + 2, 'x');
  ASSERT_EQ(ResponseCache::EntryCharge(Key("c"), too_big.size(), {}), 2 * charge + 1);
  EXPECT_FALSE(cache.Insert(Key("c"), MakeCachedValue(too_big), kTtl, {}, kT0));
  EXPECT_EQ(cache.Peek(Key("c"), kT0), nullptr);
  EXPECT_NE(cache.Peek(Key("a"), kT0), nullptr);
  EXPECT_NE(cache.Peek(Key("b"), kT0), nullptr);

  // Exactly the budget fits (after evicting both).
  const std::string exact(2 * charge - charge + 1, 'x');
  EXPECT_TRUE(cache.Insert(Key("c"), MakeCachedValue(exact), kTtl, {}, kT0));
  const CacheStats stats = cache.stats();
  EXPECT_EQ(stats.rejected_inserts, 1u);
  EXPECT_EQ(stats.evictions, 2u);
  EXPECT_EQ(stats.entries, 1u);
  EXPECT_EQ(stats.bytes, 2 * charge);
}

// An entry of the storing layer's own type (the pipeline keeps status, body and parsed tree in
// one), charged what it says it holds.
class TreeEntry final : public CacheEntry {
 public:
  TreeEntry(std::vector<int> tree, std::size_t charge) : tree(std::move(tree)), charge_(charge) {}
  std::size_t charge() const override { return charge_; }
  const std::vector<int> tree;

 private:
  const std::size_t charge_;
};

TEST(ResponseCacheTest, ATypedEntryIsKeptReturnedAsItselfAndCharged) {
  const std::size_t charge = ResponseCache::EntryCharge(Key("a"), 1, {});
  ResponseCache cache(Options(3 * charge, absl::Seconds(5)));
  auto entry = std::make_shared<const TreeEntry>(std::vector<int>{1, 2, 3}, charge + 1);
  ASSERT_TRUE(cache.Insert(Key("a"), entry, kTtl, {}, kT0));
  EXPECT_EQ(cache.stats().bytes, 2 * charge);  // the charge it reports, plus key and overhead

  // Every way out of the cache hands back the very same object, not a copy.
  const LookupResult fresh = cache.Lookup(Key("a"), kT0);
  EXPECT_EQ(fresh.value, entry);
  const CachedValue peeked = cache.Peek(Key("a"), kT0);
  EXPECT_EQ(peeked, entry);
  const LookupResult stale = cache.ServeStale(Key("a"), kT0 + kTtl);
  EXPECT_EQ(stale.freshness, Freshness::kStale);
  EXPECT_EQ(stale.value, entry);
  EXPECT_EQ(cache.Lookup(Key("a"), kT0 + kTtl).value, nullptr);  // stale: no value
  const auto* typed = dynamic_cast<const TreeEntry*>(stale.value.get());
  ASSERT_NE(typed, nullptr);
  EXPECT_EQ(typed->tree, (std::vector<int>{1, 2, 3}));

  // Bytes are charged their size.
  ASSERT_TRUE(cache.Insert(Key("b"), MakeCachedValue("1"), kTtl, {}, kT0));
  EXPECT_EQ(cache.stats().bytes, 3 * charge);

  // The entry's charge counts against max_bytes: one that says it holds more is not stored.
  auto big = std::make_shared<const TreeEntry>(std::vector<int>{}, 4 * charge);
  EXPECT_FALSE(cache.Insert(Key("c"), big, kTtl, {}, kT0));
  EXPECT_EQ(cache.Peek(Key("c"), kT0), nullptr);
  EXPECT_EQ(cache.stats().rejected_inserts, 1u);
  EXPECT_EQ(cache.stats().entries, 2u);

  // Dropping the entry gives its charge back; the object lives on with whoever holds it.
  EXPECT_EQ(cache.InvalidateKey(Key("a")), 1u);
  EXPECT_EQ(cache.stats().bytes, charge);
  EXPECT_EQ(entry.use_count(), 4);  // entry, fresh, peeked, stale
}

TEST(ResponseCacheTest, RejectedInsertStillDropsTheOlderValue) {
  ResponseCache cache(Options(1 << 10));
  ASSERT_TRUE(cache.Insert(Key("a"), MakeCachedValue("old"), kTtl, {}, kT0));
  EXPECT_FALSE(cache.Insert(Key("a"), MakeCachedValue(std::string(2048, 'x')), kTtl, {}, kT0));
  EXPECT_EQ(cache.Peek(Key("a"), kT0), nullptr);
  // Zero TTL: not cacheable, and likewise retires the old value.
  ASSERT_TRUE(cache.Insert(Key("b"), MakeCachedValue("old"), kTtl, {}, kT0));
  EXPECT_FALSE(cache.Insert(Key("b"), MakeCachedValue("new"), absl::ZeroDuration(), {}, kT0));
  EXPECT_EQ(cache.Peek(Key("b"), kT0), nullptr);
  EXPECT_EQ(cache.stats().rejected_inserts, 2u);
  EXPECT_EQ(cache.stats().bytes, 0u);
}

TEST(ResponseCacheTest, ReplacingAnEntryUpdatesBytesAndTags) {
  ResponseCache cache(Options(1 << 20));
  ASSERT_TRUE(cache.Insert(Key("a"), MakeCachedValue("short"), kTtl, {"tag-1"}, kT0));
  ASSERT_TRUE(cache.Insert(Key("a"), MakeCachedValue("much longer"), kTtl, {"tag-2"}, kT0));
  EXPECT_EQ(cache.stats().entries, 1u);
  EXPECT_EQ(cache.stats().bytes, ResponseCache::EntryCharge(Key("a"), 11, {"tag-2"}));
  EXPECT_EQ(BytesOf(cache.Peek(Key("a"), kT0)), "much longer");
  EXPECT_EQ(cache.InvalidateTag("tag-1"), 0u);
  EXPECT_EQ(cache.InvalidateTag("tag-2"), 1u);
}

TEST(ResponseCacheTest, TwoAccountsNeverShareAnEntry) {
  ResponseCache cache(Options(1 << 20));
  const CacheKey alice = Key("same-request", "alice");
  const CacheKey bob = Key("same-request", "bob");
  ASSERT_TRUE(cache.Insert(alice, MakeCachedValue("alice's"), kTtl, {}, kT0));
  EXPECT_EQ(cache.Lookup(bob, kT0).freshness, Freshness::kMiss);
  ASSERT_TRUE(cache.Insert(bob, MakeCachedValue("bob's"), kTtl, {}, kT0));
  EXPECT_EQ(ValueOf(cache.Lookup(alice, kT0)), "alice's");
  EXPECT_EQ(ValueOf(cache.Lookup(bob, kT0)), "bob's");

  // A write by alice drops only alice's entries of that route.
  EXPECT_EQ(cache.InvalidateTag(RouteTag("alice", "get_inspection")), 1u);
  EXPECT_EQ(cache.Peek(alice, kT0), nullptr);
  EXPECT_NE(cache.Peek(bob, kT0), nullptr);
}

TEST(ResponseCacheTest, InvalidateByTagAndByKey) {
  ResponseCache cache(Options(1 << 20));
  const CacheKey report{"acct", "get_damages_report", "inspection=X"};
  const CacheKey search{"acct", "search_inspections", "page=1"};
  const CacheKey other{"acct", "search_inspections", "page=2"};
  ASSERT_TRUE(cache.Insert(report, MakeCachedValue("r"), kTtl, {InspectionTag("X")}, kT0));
  ASSERT_TRUE(cache.Insert(search, MakeCachedValue("s"), kTtl,
                           {InspectionTag("X"), InspectionTag("Y")}, kT0));
  ASSERT_TRUE(cache.Insert(other, MakeCachedValue("o"), kTtl, {InspectionTag("Y")}, kT0));

  EXPECT_EQ(cache.InvalidateTag(InspectionTag("X")), 2u);
  EXPECT_EQ(cache.Peek(report, kT0), nullptr);
  EXPECT_EQ(cache.Peek(search, kT0), nullptr);
  EXPECT_NE(cache.Peek(other, kT0), nullptr);
  EXPECT_EQ(cache.InvalidateTag(InspectionTag("X")), 0u);

  EXPECT_EQ(cache.InvalidateKey(other), 1u);
  EXPECT_EQ(cache.Peek(other, kT0), nullptr);
  EXPECT_EQ(cache.InvalidateKey(other), 0u);

  const CacheStats stats = cache.stats();
  EXPECT_EQ(stats.invalidated, 3u);
  EXPECT_EQ(stats.entries, 0u);
  EXPECT_EQ(stats.bytes, 0u);
}

TEST(ResponseCacheTest, RouteTagIsImplicit) {
  ResponseCache cache(Options(1 << 20));
  const CacheKey config{"acct", "get_webhook_config", ""};
  ASSERT_TRUE(cache.Insert(config, MakeCachedValue("cfg"), kTtl, {}, kT0));
  EXPECT_EQ(cache.InvalidateTag(RouteTag("acct", "get_webhook_config")), 1u);
  EXPECT_EQ(cache.Peek(config, kT0), nullptr);
}

TEST(ResponseCacheTest, ClearDropsEverything) {
  ResponseCache cache(Options(1 << 20));
  ASSERT_TRUE(cache.Insert(Key("a"), MakeCachedValue("1"), kTtl, {"t"}, kT0));
  ASSERT_TRUE(cache.Insert(Key("b"), MakeCachedValue("2"), kTtl, {"t"}, kT0));
  EXPECT_EQ(cache.Clear(), 2u);
  EXPECT_EQ(cache.stats().entries, 0u);
  EXPECT_EQ(cache.stats().bytes, 0u);
  EXPECT_EQ(cache.InvalidateTag("t"), 0u);
  ASSERT_TRUE(cache.Insert(Key("a"), MakeCachedValue("1"), kTtl, {"t"}, kT0));
  EXPECT_NE(cache.Peek(Key("a"), kT0), nullptr);
}

TEST(ResponseCacheTest, FetchTicketDiscardsResultsRacingAnInvalidation) {
  ResponseCache cache(Options(1 << 20));
  const CacheKey report{"acct", "get_damages_report", "inspection=X"};
  const std::vector<std::string> x_tags = {InspectionTag("X")};

  {  // Tag invalidated while in flight.
    FetchTicket ticket = cache.BeginFetch();
    cache.InvalidateTag(InspectionTag("X"));
    EXPECT_FALSE(cache.IsCurrent(ticket, report, x_tags));
    EXPECT_FALSE(cache.InsertFetched(ticket, report, MakeCachedValue("old"), kTtl, x_tags, kT0));
    EXPECT_EQ(cache.Peek(report, kT0), nullptr);
    // The same ticket is still good for things nobody invalidated.
    EXPECT_TRUE(cache.InsertFetched(ticket, Key("a"), MakeCachedValue("1"), kTtl, {}, kT0));
  }
  {  // Key invalidated while in flight.
    FetchTicket ticket = cache.BeginFetch();
    cache.InvalidateKey(report);
    EXPECT_FALSE(cache.InsertFetched(ticket, report, MakeCachedValue("old"), kTtl, {}, kT0));
  }
  {  // The implicit route tag.
    FetchTicket ticket = cache.BeginFetch();
    cache.InvalidateTag(RouteTag("acct", "get_damages_report"));
    EXPECT_FALSE(cache.InsertFetched(ticket, report, MakeCachedValue("old"), kTtl, {}, kT0));
  }
  {  // Clear.
    FetchTicket ticket = cache.BeginFetch();
    cache.Clear();
    EXPECT_FALSE(cache.InsertFetched(ticket, report, MakeCachedValue("old"), kTtl, {}, kT0));
  }
  {  // An unrelated invalidation does not get in the way.
    FetchTicket ticket = cache.BeginFetch();
    cache.InvalidateTag(InspectionTag("Y"));
    cache.InvalidateKey(Key("unrelated"));
    EXPECT_TRUE(cache.InsertFetched(ticket, report, MakeCachedValue("new"), kTtl, x_tags, kT0));
  }
  {  // A fetch that began after the invalidation is current.
    cache.InvalidateTag(InspectionTag("X"));
    FetchTicket ticket = cache.BeginFetch();
    EXPECT_TRUE(cache.InsertFetched(ticket, report, MakeCachedValue("newer"), kTtl, x_tags, kT0));
  }
  {  // Empty and moved-from tickets are never current.
    FetchTicket empty;
    EXPECT_FALSE(cache.IsCurrent(empty, report, {}));
    FetchTicket taken = cache.BeginFetch();
    FetchTicket moved = std::move(taken);
    EXPECT_TRUE(cache.IsCurrent(moved, report, {}));
    EXPECT_FALSE(cache.IsCurrent(taken, report, {}));  // NOLINT(bugprone-use-after-move)
  }
  EXPECT_EQ(BytesOf(cache.Peek(report, kT0)), "newer");
  EXPECT_EQ(cache.stats().discarded_inserts, 4u);
}

TEST(ResponseCacheTest, DiscardedFetchAlsoDropsTheOlderEntry) {
  ResponseCache cache(Options(1 << 20));
  // Cached before the fetch, without the tag the new result will carry.
  ASSERT_TRUE(cache.Insert(Key("page"), MakeCachedValue("old"), kTtl, {}, kT0));
  FetchTicket ticket = cache.BeginFetch();
  cache.InvalidateTag(InspectionTag("X"));
  EXPECT_FALSE(cache.InsertFetched(ticket, Key("page"), MakeCachedValue("mid"), kTtl,
                                   {InspectionTag("X")}, kT0));
  EXPECT_EQ(cache.Peek(Key("page"), kT0), nullptr);
}

TEST(ResponseCacheTest, OlderFetchNeverOverwritesANewerAnswer) {
  ResponseCache cache(Options(1 << 20));
  FetchTicket older = cache.BeginFetch();
  FetchTicket newer = cache.BeginFetch();
  ASSERT_TRUE(cache.InsertFetched(newer, Key("a"), MakeCachedValue("new"), kTtl, {}, kT0));
  EXPECT_FALSE(cache.InsertFetched(older, Key("a"), MakeCachedValue("old"), kTtl, {}, kT0));
  EXPECT_EQ(BytesOf(cache.Peek(Key("a"), kT0)), "new");

  // Nor a value stored by a plain Insert made while the fetch was on the wire.
  FetchTicket slow = cache.BeginFetch();
  ASSERT_TRUE(cache.Insert(Key("b"), MakeCachedValue("inserted"), kTtl, {}, kT0));
  EXPECT_FALSE(cache.InsertFetched(slow, Key("b"), MakeCachedValue("old"), kTtl, {}, kT0));
  EXPECT_EQ(BytesOf(cache.Peek(Key("b"), kT0)), "inserted");

  // A discarded (invalidated) older fetch leaves the newer entry alone, too.
  FetchTicket stale = cache.BeginFetch();
  cache.InvalidateTag("t");
  FetchTicket fresh = cache.BeginFetch();
  ASSERT_TRUE(cache.InsertFetched(fresh, Key("c"), MakeCachedValue("new"), kTtl, {"t"}, kT0));
  EXPECT_FALSE(cache.InsertFetched(stale, Key("c"), MakeCachedValue("old"), kTtl, {"t"}, kT0));
  EXPECT_EQ(BytesOf(cache.Peek(Key("c"), kT0)), "new");

  // An entry older than the ticket is replaced as usual.
  FetchTicket later = cache.BeginFetch();
  EXPECT_TRUE(cache.InsertFetched(later, Key("a"), MakeCachedValue("newest"), kTtl, {}, kT0));
  EXPECT_EQ(BytesOf(cache.Peek(Key("a"), kT0)), "newest");
  EXPECT_EQ(cache.stats().discarded_inserts, 3u);
}

TEST(ResponseCacheTest, InvalidationRecordsLiveOnlyWhileAnOlderFetchIsOpen) {
  ResponseCache cache(Options(1 << 20));
  cache.InvalidateTag("a");  // nothing in flight: nothing to remember
  EXPECT_EQ(cache.stats().tracked_invalidations, 0u);

  auto first = std::make_unique<FetchTicket>(cache.BeginFetch());
  cache.InvalidateTag("a");
  FetchTicket second = cache.BeginFetch();
  cache.InvalidateTag("b");
  EXPECT_EQ(cache.stats().tracked_invalidations, 2u);

  // "a" only matters to the first ticket; "b" still matters to the second.
  first.reset();
  EXPECT_EQ(cache.stats().tracked_invalidations, 1u);
  EXPECT_TRUE(cache.IsCurrent(second, Key("k"), {"a"}));
  EXPECT_FALSE(cache.IsCurrent(second, Key("k"), {"b"}));

  second = FetchTicket();
  EXPECT_EQ(cache.stats().tracked_invalidations, 0u);
}

TEST(ResponseCacheTest, StatsAreExact) {
  const std::size_t charge = ResponseCache::EntryCharge(Key("a"), 1, {});
  ResponseCache cache(Options(2 * charge, /*stale=*/absl::Seconds(5)));
  cache.Insert(Key("a"), MakeCachedValue("1"), kTtl, {}, kT0);  // insert
  cache.Insert(Key("b"), MakeCachedValue("2"), kTtl, {}, kT0);  // insert
  cache.Lookup(Key("a"), kT0);                                  // hit
  cache.Lookup(Key("x"), kT0);                                  // miss
  cache.Insert(Key("c"), MakeCachedValue("3"), kTtl, {}, kT0);  // insert, evict b
  cache.Insert(Key("d"), MakeCachedValue(std::string(4096, 'x')), kTtl, {}, kT0);  // rejected
  cache.Lookup(Key("a"), kT0 + kTtl);                                              // miss (stale)
  cache.ServeStale(Key("a"), kT0 + kTtl);                                          // stale served
  cache.InvalidateKey(Key("c"));                                                   // invalidated
  FetchTicket ticket = cache.BeginFetch();
  cache.InvalidateKey(Key("e"));
  cache.InsertFetched(ticket, Key("e"), MakeCachedValue("5"), kTtl, {}, kT0);  // discarded

  const CacheStats stats = cache.stats();
  EXPECT_EQ(stats.hits, 1u);
  EXPECT_EQ(stats.misses, 2u);
  EXPECT_EQ(stats.stale_served, 1u);
  EXPECT_EQ(stats.inserts, 3u);
  EXPECT_EQ(stats.rejected_inserts, 1u);
  EXPECT_EQ(stats.discarded_inserts, 1u);
  EXPECT_EQ(stats.evictions, 1u);
  EXPECT_EQ(stats.invalidated, 1u);
  EXPECT_EQ(stats.entries, 1u);
  EXPECT_EQ(stats.bytes, charge);
  EXPECT_EQ(stats.tracked_invalidations, 1u);
}

}  // namespace
}  // namespace inspection::cache
