// RetryingCaller on virtual time (ManualScheduler, a fixed clock and random source): the
// exact attempts and waits, decided by the typed VendorFailure alone. The errors here carry
// no string metadata at all: nothing parsed back from ErrorInfo steers a retry (issue 15).
#include "gateway/pipeline/retrying_caller.h"

#include <gtest/gtest.h>

#include <deque>
#include <optional>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gateway/timers/scheduler.h"

namespace inspection::pipeline {
namespace {

using resilience::VendorFailure;
using std::chrono::system_clock;

// Answers each attempt with the next scripted result, recording when it came.
class ScriptedVendor final : public upstream::VendorCaller {
 public:
  explicit ScriptedVendor(timers::ManualScheduler* clock) : clock_(clock) {}
  void Script(upstream::VendorResult result) { script_.push_back(std::move(result)); }

  void Call(routes::RouteId, const vendor::VendorRequest&, system_clock::time_point,
            const upstream::CallOptions&, upstream::VendorCallback done) override {
    attempts_at_.push_back(clock_->Now());
    upstream::VendorResult result = std::move(script_.front());
    script_.pop_front();
    std::move(done)(std::move(result));
  }
  const std::vector<absl::Time>& attempts_at() const { return attempts_at_; }

 private:
  timers::ManualScheduler* const clock_;
  std::deque<upstream::VendorResult> script_;
  std::vector<absl::Time> attempts_at_;
};

upstream::VendorResult Failure(VendorFailure::Kind kind, int http_status, bool sent) {
  upstream::VendorResult result;
  errors::ApiError error;
  error.code = absl::StatusCode::kUnavailable;
  error.reason = "ANY_REASON";  // reasons and metadata are for callers, not for retries
  error.failure = {kind, http_status, sent};
  result.error = std::move(error);
  result.response.status = http_status;
  return result;
}

upstream::VendorResult Success() {
  upstream::VendorResult result;
  result.response.status = 200;
  result.body = std::make_shared<const nlohmann::json>(nlohmann::json::object());
  return result;
}

class RetryingCallerTest : public ::testing::Test {
 protected:
  RetryingCallerTest() : vendor_(&timers_) {
    budget_ = *resilience::RetryBudget::Create({});
    breaker_ = *resilience::CircuitBreaker::Create({}, [this] { return timers_.Now(); });
    RetryOptions options;
    options.backoff.base = absl::Milliseconds(100);
    options.backoff.cap = absl::Seconds(1);
    options.backoff.max_attempts = 3;
    options.clock = [this] { return timers_.Now(); };
    options.random = [] { return 1.0; };  // full jitter at its ceiling: exact waits
    retrying_.emplace(&vendor_, options, budget_.get(), breaker_.get(), &timers_);
  }

  std::optional<upstream::VendorResult> Call(routes::RouteId route) {
    std::optional<upstream::VendorResult> out;
    retrying_->Call(route, {}, system_clock::time_point::max(), {},
                    [&out](upstream::VendorResult result) { out = std::move(result); });
    while (!out.has_value() && timers_.pending() > 0) timers_.AdvanceBy(absl::Milliseconds(1));
    return out;
  }

  // A breaker that one counted failure opens, so a failure the breaker must not count shows.
  void UseBreakerThatOpensOnOneFailure() {
    resilience::CircuitBreakerConfig config;
    config.consecutive_failures = 1;
    breaker_ = *resilience::CircuitBreaker::Create(config, [this] { return timers_.Now(); });
    RetryOptions options;
    options.clock = [this] { return timers_.Now(); };
    options.random = [] { return 1.0; };
    retrying_.emplace(&vendor_, options, budget_.get(), breaker_.get(), &timers_);
  }

  timers::ManualScheduler timers_;
  ScriptedVendor vendor_;
  std::unique_ptr<resilience::RetryBudget> budget_;
  std::unique_ptr<resilience::CircuitBreaker> breaker_;
  std::optional<RetryingCaller> retrying_;
};

TEST_F(RetryingCallerTest, A503IsRetriedAfterTheExactBackoffThenSucceeds) {
  vendor_.Script(Failure(VendorFailure::Kind::kHttpStatus, 503, true));
  vendor_.Script(Failure(VendorFailure::Kind::kHttpStatus, 503, true));
  vendor_.Script(Success());
  auto result = Call(routes::RouteId::kAssessQuality);
  ASSERT_TRUE(result.has_value());
  EXPECT_TRUE(result->ok());
  const auto& at = vendor_.attempts_at();
  ASSERT_EQ(at.size(), 3u);
  // Full jitter at its ceiling: 100 ms, then 200 ms.
  EXPECT_EQ(at[1] - at[0], absl::Milliseconds(100));
  EXPECT_EQ(at[2] - at[1], absl::Milliseconds(200));
}

TEST_F(RetryingCallerTest, A4xxIsNotRetried) {
  vendor_.Script(Failure(VendorFailure::Kind::kHttpStatus, 400, true));
  auto result = Call(routes::RouteId::kAssessQuality);
  ASSERT_TRUE(result.has_value());
  EXPECT_FALSE(result->ok());
  EXPECT_EQ(vendor_.attempts_at().size(), 1u);
}

TEST_F(RetryingCallerTest, ACreationIsRetriedOnlyWhenNothingWasSent) {
  // Connection refused before sending: retried even for a creation.
  vendor_.Script(Failure(VendorFailure::Kind::kConnect, 0, false));
  vendor_.Script(Success());
  auto result = Call(routes::RouteId::kCreateToken);
  ASSERT_TRUE(result.has_value());
  EXPECT_TRUE(result->ok());
  EXPECT_EQ(vendor_.attempts_at().size(), 2u);

  // Lost after sending: never re-sent.
  vendor_.Script(Failure(VendorFailure::Kind::kConnectionLost, 0, true));
  result = Call(routes::RouteId::kCreateToken);
  ASSERT_TRUE(result.has_value());
  EXPECT_FALSE(result->ok());
  EXPECT_EQ(vendor_.attempts_at().size(), 3u);
  EXPECT_EQ(result->error->failure.kind, VendorFailure::Kind::kConnectionLost);
  EXPECT_TRUE(result->error->failure.MayHaveReachedVendor());
}

TEST_F(RetryingCallerTest, AnUnreadableSuccessIsNeitherRetriedNorAVendorFailure) {
  UseBreakerThatOpensOnOneFailure();
  vendor_.Script(Failure(VendorFailure::Kind::kBadBody, 200, true));
  auto result = Call(routes::RouteId::kAssessQuality);
  ASSERT_TRUE(result.has_value());
  EXPECT_EQ(vendor_.attempts_at().size(), 1u);
  EXPECT_EQ(breaker_->state(), resilience::CircuitState::kClosed);
}

// An answer over upstream.max_response_bytes: the same request gets it again, so the
// attempt is not repeated, and a vendor that answers is not down (the breaker stays shut).
// A lost connection on the same route, by contrast, counts against the breaker.
TEST_F(RetryingCallerTest, AnAnswerTooLargeIsNeitherRetriedNorAVendorFailure) {
  UseBreakerThatOpensOnOneFailure();
  vendor_.Script(Failure(VendorFailure::Kind::kTooLarge, 0, true));
  auto result = Call(routes::RouteId::kAssessQuality);
  ASSERT_TRUE(result.has_value());
  EXPECT_FALSE(result->ok());
  EXPECT_EQ(result->error->failure.kind, VendorFailure::Kind::kTooLarge);
  EXPECT_EQ(vendor_.attempts_at().size(), 1u);
  EXPECT_EQ(breaker_->state(), resilience::CircuitState::kClosed);

  vendor_.Script(Failure(VendorFailure::Kind::kConnectionLost, 0, true));
  vendor_.Script(Success());
  result = Call(routes::RouteId::kAssessQuality);
  ASSERT_TRUE(result.has_value());
  EXPECT_EQ(breaker_->state(), resilience::CircuitState::kOpen) << "a lost connection counts";
}

TEST_F(RetryingCallerTest, AnOpenCircuitIsANotCalledFailureThatNeverReachedTheVendor) {
  resilience::CircuitBreakerConfig config;
  config.consecutive_failures = 1;
  breaker_ = *resilience::CircuitBreaker::Create(config, [this] { return timers_.Now(); });
  RetryOptions options;
  options.backoff.max_attempts = 1;
  options.clock = [this] { return timers_.Now(); };
  retrying_.emplace(&vendor_, options, budget_.get(), breaker_.get(), &timers_);
  vendor_.Script(Failure(VendorFailure::Kind::kHttpStatus, 500, true));
  ASSERT_FALSE(Call(routes::RouteId::kCreateToken)->ok());
  auto refused = Call(routes::RouteId::kCreateToken);
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(refused->error->reason, "CIRCUIT_OPEN");
  EXPECT_EQ(refused->error->failure.kind, VendorFailure::Kind::kNotCalled);
  // So an idempotency key is released, not bound to this refusal (services::VendorNotReached).
  EXPECT_FALSE(refused->error->failure.MayHaveReachedVendor());
  EXPECT_EQ(vendor_.attempts_at().size(), 1u);
}

}  // namespace
}  // namespace inspection::pipeline
