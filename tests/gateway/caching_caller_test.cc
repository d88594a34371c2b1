// CachingCaller and deadlines (issue 14): a shared (coalesced) fetch is not governed by
// the deadline of the caller that happened to start it, and a caller whose own deadline
// passes stops waiting without cancelling the fetch.
#include "gateway/pipeline/caching_caller.h"

#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gateway/timers/scheduler.h"

namespace inspection::pipeline {
namespace {

using std::chrono::system_clock;

// The next caller in the pipeline: records each call and lets the test answer it.
class HeldVendor final : public upstream::VendorCaller {
 public:
  struct Held {
    system_clock::time_point deadline;
    upstream::VendorCallback done;
  };

  void Call(routes::RouteId, const vendor::VendorRequest&, system_clock::time_point deadline,
            const upstream::CallOptions&, upstream::VendorCallback done) override {
    absl::MutexLock lock(&mu_);
    held_.push_back({deadline, std::move(done)});
  }

  size_t calls() {
    absl::MutexLock lock(&mu_);
    return held_.size();
  }
  system_clock::time_point deadline(size_t i) {
    absl::MutexLock lock(&mu_);
    return held_.at(i).deadline;
  }
  // `capacity`: what the body's string holds allocated (a transport that grew it by doubling
  // leaves spare room); 0: as much as it needs.
  void Answer(size_t i, std::string body, size_t capacity = 0) {
    upstream::VendorCallback done;
    {
      absl::MutexLock lock(&mu_);
      done = std::move(held_.at(i).done);
    }
    upstream::VendorResult result;
    result.response.status = 200;
    result.response.body.reserve(capacity);
    result.response.body.assign(body);
    result.body = std::make_shared<const nlohmann::json>(nlohmann::json::parse(body));
    std::move(done)(std::move(result));
  }

 private:
  absl::Mutex mu_;
  std::vector<Held> held_ ABSL_GUARDED_BY(mu_);
};

struct Outcome {
  std::optional<upstream::VendorResult> result;
};

vendor::VendorRequest QualityRequest() {
  vendor::VendorRequest request;
  request.body = nlohmann::json{{"url", "https://images.example.com/front.jpg"}};
  return request;
}

class CachingCallerDeadlineTest : public ::testing::Test {
 protected:
  CachingCallerDeadlineTest() {
    CachingOptions options;
    options.timers = &timers_;
    caching_.emplace(&vendor_, std::move(options));
  }

  // Calls AssessQuality with `deadline`; the outcome lands in the returned slot.
  std::shared_ptr<Outcome> Call(system_clock::time_point deadline) {
    auto outcome = std::make_shared<Outcome>();
    caching_->Call(
        routes::RouteId::kAssessQuality, QualityRequest(), deadline, {},
        [outcome](upstream::VendorResult result) { outcome->result = std::move(result); });
    return outcome;
  }

  HeldVendor vendor_;
  timers::ManualScheduler timers_;
  std::optional<CachingCaller> caching_;
};

TEST_F(CachingCallerDeadlineTest, AnImpatientLeaderDoesNotShortenTheSharedFetch) {
  const auto route_timeout = routes::GetRoute(routes::RouteId::kAssessQuality).timeout;
  const auto before = system_clock::now();
  auto impatient = Call(before + std::chrono::milliseconds(50));
  ASSERT_EQ(vendor_.calls(), 1u);
  // The fetch runs for the route's timeout at least, not the leader's 50 ms.
  EXPECT_GE(vendor_.deadline(0), before + route_timeout);

  auto patient = Call(system_clock::now() + std::chrono::seconds(10));
  EXPECT_EQ(vendor_.calls(), 1u) << "the patient caller joins the flight";

  // The leader's deadline passes: it alone is answered, and the fetch goes on.
  timers_.AdvanceBy(absl::Seconds(1));
  ASSERT_TRUE(impatient->result.has_value());
  ASSERT_FALSE(impatient->result->ok());
  EXPECT_EQ(impatient->result->error->code, absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(impatient->result->error->reason, errors::kReasonCallerDeadlineExceeded);
  EXPECT_EQ(impatient->result->error->metadata.at("route"), "assess_quality");
  EXPECT_FALSE(patient->result.has_value());

  vendor_.Answer(0, R"({"score": 0.9})");
  ASSERT_TRUE(patient->result.has_value());
  ASSERT_TRUE(patient->result->ok());
  EXPECT_EQ(patient->result->cache, upstream::CacheStatus::kCoalesced);
  EXPECT_EQ(patient->result->json_body()["score"], 0.9);

  // The answer the impatient leader gave up on was cached for the next caller.
  auto next = Call(system_clock::now() + std::chrono::milliseconds(50));
  ASSERT_TRUE(next->result.has_value());
  EXPECT_TRUE(next->result->ok());
  EXPECT_EQ(next->result->cache, upstream::CacheStatus::kHit);
  EXPECT_EQ(vendor_.calls(), 1u);
  EXPECT_EQ(timers_.pending(), 0u) << "a hit arms no timer";
}

TEST_F(CachingCallerDeadlineTest, APatientLeaderKeepsItsOwnLongerDeadline) {
  const auto deadline = system_clock::now() + std::chrono::minutes(5);
  auto patient = Call(deadline);
  ASSERT_EQ(vendor_.calls(), 1u);
  EXPECT_EQ(vendor_.deadline(0), deadline);
  vendor_.Answer(0, R"({"score": 0.5})");
  ASSERT_TRUE(patient->result.has_value());
  EXPECT_TRUE(patient->result->ok());
  // Answered by the fetch: its deadline timer is cancelled, not left to fire.
  EXPECT_EQ(timers_.pending(), 0u);
}

TEST_F(CachingCallerDeadlineTest, ACallerWithoutADeadlineWaitsForTheFetch) {
  auto patient = Call(system_clock::time_point::max());
  EXPECT_EQ(timers_.pending(), 0u);
  EXPECT_EQ(vendor_.deadline(0), system_clock::time_point::max());
  timers_.AdvanceBy(absl::Hours(1));
  EXPECT_FALSE(patient->result.has_value());
  vendor_.Answer(0, R"({"score": 0.5})");
  ASSERT_TRUE(patient->result.has_value());
  EXPECT_TRUE(patient->result->ok());
}

// The parsed body of a cached answer is kept with its bytes and shared by every caller: a
// hit does not parse the JSON again, and the tree's memory counts against cache.max_bytes.
class CachingCallerSharedBodyTest : public ::testing::Test {
 protected:
  void Start(size_t max_bytes) {
    CachingOptions options;
    options.max_bytes = max_bytes;
    caching_.emplace(&vendor_, std::move(options));
  }

  std::shared_ptr<Outcome> Call() {
    auto outcome = std::make_shared<Outcome>();
    caching_->Call(
        routes::RouteId::kAssessQuality, QualityRequest(), system_clock::now() + kWait, {},
        [outcome](upstream::VendorResult result) { outcome->result = std::move(result); });
    return outcome;
  }

  static constexpr std::chrono::seconds kWait{10};
  HeldVendor vendor_;
  std::optional<CachingCaller> caching_;
};

TEST_F(CachingCallerSharedBodyTest, EveryHitSharesTheTreeTheVendorClientParsed) {
  Start(size_t{1} << 20);
  auto miss = Call();
  auto coalesced = Call();
  ASSERT_EQ(vendor_.calls(), 1u);
  vendor_.Answer(0, R"({"score": 0.9, "labels": ["front", "bumper"]})");
  ASSERT_TRUE(miss->result.has_value() && miss->result->ok());
  ASSERT_TRUE(coalesced->result.has_value() && coalesced->result->ok());
  const std::shared_ptr<const nlohmann::json> tree = miss->result->body;
  ASSERT_NE(tree, nullptr);
  EXPECT_EQ(coalesced->result->body, tree);

  auto hit = Call();
  ASSERT_TRUE(hit->result.has_value() && hit->result->ok());
  EXPECT_EQ(hit->result->cache, upstream::CacheStatus::kHit);
  EXPECT_EQ(hit->result->body, tree);  // the same object: nothing was parsed or copied
  EXPECT_EQ(hit->result->json_body()["labels"][1], "bumper");
  // The raw answer still travels with it (for errors and logs).
  EXPECT_EQ(hit->result->response.status, 200);
  EXPECT_EQ(hit->result->response.body, R"({"score": 0.9, "labels": ["front", "bumper"]})");
  EXPECT_EQ(vendor_.calls(), 1u);
}

TEST_F(CachingCallerSharedBodyTest, TheTreeCountsAgainstMaxBytes) {
  // 4,000 numbers: 8 KB of text, but over 64 KB as a tree (16 bytes per element).
  std::string body = "[0";
  for (int i = 1; i < 4000; ++i) body += ",0";
  body += "]";

  Start(size_t{1} << 20);
  Call();
  vendor_.Answer(0, body);
  const cache::CacheStats roomy = caching_->cache_stats();
  EXPECT_EQ(roomy.entries, 1u);
  EXPECT_GE(roomy.bytes, body.size() + 4000 * sizeof(nlohmann::json));
  EXPECT_LT(roomy.bytes, body.size() + 4000 * sizeof(nlohmann::json) + 4096);
}

// A body is charged what it holds allocated, not only its length: a small answer whose
// string kept 256 KiB of spare room from the transport costs the cache that room.
TEST_F(CachingCallerSharedBodyTest, TheBodysAllocatedSizeCountsAgainstMaxBytes) {
  Start(size_t{1} << 20);
  Call();
  vendor_.Answer(0, "[1]", size_t{256} << 10);
  const cache::CacheStats stats = caching_->cache_stats();
  EXPECT_EQ(stats.entries, 1u);
  EXPECT_GE(stats.bytes, size_t{256} << 10);
  EXPECT_LT(stats.bytes, (size_t{256} << 10) + 4096);
}

TEST_F(CachingCallerSharedBodyTest, AnAnswerWhoseTreeDoesNotFitIsServedButNotStored) {
  std::string body = "[0";
  for (int i = 1; i < 4000; ++i) body += ",0";
  body += "]";
  // 32 KiB holds the text several times over but not the tree: the answer is served and not
  // stored, so the next call goes to the vendor again.
  Start(32 << 10);
  auto first = Call();
  vendor_.Answer(0, body);
  ASSERT_TRUE(first->result.has_value() && first->result->ok());
  EXPECT_EQ(first->result->json_body().size(), 4000u);
  EXPECT_EQ(caching_->cache_stats().entries, 0u);
  EXPECT_EQ(caching_->cache_stats().rejected_inserts, 1u);
  auto second = Call();
  EXPECT_EQ(vendor_.calls(), 2u);
  EXPECT_FALSE(second->result.has_value());  // waiting for the vendor, not a hit
  vendor_.Answer(1, body);
  ASSERT_TRUE(second->result.has_value());
  EXPECT_EQ(second->result->cache, upstream::CacheStatus::kMiss);
}

TEST_F(CachingCallerSharedBodyTest, ADeeplyNestedAnswerIsMeasuredWithoutRecursion) {
  // 300,000 levels of nesting: measuring the tree recursively would overflow the stack.
  constexpr int kDepth = 300000;
  const std::string body = std::string(kDepth, '[') + std::string(kDepth, ']');
  Start(size_t{64} << 20);
  auto first = Call();
  vendor_.Answer(0, body);
  ASSERT_TRUE(first->result.has_value() && first->result->ok());
  const cache::CacheStats stats = caching_->cache_stats();
  EXPECT_EQ(stats.entries, 1u);
  EXPECT_GE(stats.bytes, body.size() + kDepth * sizeof(nlohmann::json));
  auto hit = Call();
  ASSERT_TRUE(hit->result.has_value());
  EXPECT_EQ(hit->result->cache, upstream::CacheStatus::kHit);
  EXPECT_EQ(hit->result->body, first->result->body);
}

}  // namespace
}  // namespace inspection::pipeline
