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
  void Answer(size_t i, std::string body) {
    upstream::VendorCallback done;
    {
      absl::MutexLock lock(&mu_);
      done = std::move(held_.at(i).done);
    }
    upstream::VendorResult result;
    result.response.status = 200;
    result.response.body = body;
    result.body = nlohmann::json::parse(body);
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
  EXPECT_EQ(patient->result->body["score"], 0.9);

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

}  // namespace
}  // namespace inspection::pipeline
