#include "gateway/resilience/retry_policy.h"

#include <string>
#include <string_view>
#include <vector>

#include "gtest/gtest.h"

namespace inspection::resilience {
namespace {

struct Case {
  std::string_view name;
  Idempotency idempotency;
  VendorFailure failure;
  RetryReason expected;
};

void ExpectTable(const std::vector<Case>& cases) {
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.name));
    const RetryReason reason = ClassifyRetry(c.idempotency, c.failure);
    EXPECT_EQ(reason, c.expected) << "got " << RetryReasonLabel(reason) << ", want "
                                  << RetryReasonLabel(c.expected);
  }
}

constexpr Idempotency kSafe = Idempotency::kSafe;
constexpr Idempotency kIdempotent = Idempotency::kIdempotent;
constexpr Idempotency kNonIdempotent = Idempotency::kNonIdempotent;

TEST(ClassifyRetryTest, SafeAndIdempotentRoutesRetryTransientFailures) {
  for (Idempotency idempotency : {kSafe, kIdempotent}) {
    SCOPED_TRACE(idempotency == kSafe ? "safe" : "idempotent");
    ExpectTable({
        {"connect before sending", idempotency, VendorFailure::Connect(false),
         RetryReason::kConnect},
        {"connect, request maybe sent", idempotency, VendorFailure::Connect(true),
         RetryReason::kConnect},
        {"reset after sending", idempotency, VendorFailure::ConnectionLost(), RetryReason::kReset},
        {"timeout after sending", idempotency, VendorFailure::Timeout(), RetryReason::kTimeout},
        {"429", idempotency, VendorFailure::HttpStatus(429), RetryReason::kStatus429},
        {"502", idempotency, VendorFailure::HttpStatus(502), RetryReason::kStatus502},
        {"503", idempotency, VendorFailure::HttpStatus(503), RetryReason::kStatus503},
        {"504", idempotency, VendorFailure::HttpStatus(504), RetryReason::kStatus504},
    });
  }
}

TEST(ClassifyRetryTest, OtherStatusesAreNotRetriedOnAnyRoute) {
  for (Idempotency idempotency : {kSafe, kIdempotent, kNonIdempotent}) {
    for (int status : {500, 501, 505, 400, 401, 403, 404, 408, 409, 422, 200, 204, 302, 0}) {
      SCOPED_TRACE(status);
      EXPECT_EQ(ClassifyRetry(idempotency, VendorFailure::HttpStatus(status)),
                RetryReason::kNotRetryable);
    }
  }
}

TEST(ClassifyRetryTest, Status500IsNotRetriedEvenOnSafeRoutes) {
  EXPECT_EQ(ClassifyRetry(kSafe, VendorFailure::HttpStatus(500)), RetryReason::kNotRetryable);
}

TEST(ClassifyRetryTest, NonIdempotentRoutesRetryOnlyWhatNeverLeft) {
  // CreateToken and DetectDamage: a second request could create a second token/inspection.
  ExpectTable({
      {"connect before sending (CreateToken)", kNonIdempotent, VendorFailure::Connect(false),
       RetryReason::kConnect},
      {"connect timeout before sending", kNonIdempotent, VendorFailure::Timeout(false),
       RetryReason::kTimeout},
      {"reset before sending", kNonIdempotent, VendorFailure::ConnectionLost(false),
       RetryReason::kReset},
      {"connect error, request maybe sent", kNonIdempotent, VendorFailure::Connect(true),
       RetryReason::kNotRetryable},
      {"timeout after sending", kNonIdempotent, VendorFailure::Timeout(true),
       RetryReason::kNotRetryable},
      {"reset after sending", kNonIdempotent, VendorFailure::ConnectionLost(true),
       RetryReason::kNotRetryable},
      {"429", kNonIdempotent, VendorFailure::HttpStatus(429), RetryReason::kNotRetryable},
      {"502", kNonIdempotent, VendorFailure::HttpStatus(502), RetryReason::kNotRetryable},
      {"503", kNonIdempotent, VendorFailure::HttpStatus(503), RetryReason::kNotRetryable},
      {"504", kNonIdempotent, VendorFailure::HttpStatus(504), RetryReason::kNotRetryable},
  });
}

TEST(ClassifyRetryTest, AnHttpAnswerMeansTheRequestWasSentWhateverTheFlagSays) {
  const VendorFailure contradictory{VendorFailure::Kind::kHttpStatus, 503, /*request_sent=*/false};
  EXPECT_EQ(ClassifyRetry(kNonIdempotent, contradictory), RetryReason::kNotRetryable);
  EXPECT_EQ(ClassifyRetry(kSafe, contradictory), RetryReason::kStatus503);
}

TEST(ClassifyRetryTest, FactoryDefaultsAreConservative) {
  // Only a connect failure defaults to "not sent"; resets and timeouts default to "sent".
  EXPECT_FALSE(VendorFailure::Connect().request_sent);
  EXPECT_TRUE(VendorFailure::ConnectionLost().request_sent);
  EXPECT_TRUE(VendorFailure::Timeout().request_sent);
  EXPECT_EQ(ClassifyRetry(kNonIdempotent, VendorFailure::Timeout()), RetryReason::kNotRetryable);
}

TEST(ClassifyRetryTest, AnswersThatARetryWouldMeetAgainAreNeverRetried) {
  using Kind = VendorFailure::Kind;
  for (Idempotency idempotency : {kSafe, kIdempotent, kNonIdempotent}) {
    ExpectTable({
        {"the gateway's own error", idempotency, VendorFailure{}, RetryReason::kNotRetryable},
        {"not called (open circuit)", idempotency, VendorFailure{Kind::kNotCalled, 0, false},
         RetryReason::kNotRetryable},
        {"unreadable 2xx", idempotency, VendorFailure{Kind::kBadBody, 200, true},
         RetryReason::kNotRetryable},
        {"answer too large", idempotency, VendorFailure{Kind::kTooLarge, 200, true},
         RetryReason::kNotRetryable},
    });
  }
}

TEST(VendorFailureTest, WhatCountsAgainstTheVendorAndWhatMayHaveReachedIt) {
  using Kind = VendorFailure::Kind;
  struct Row {
    std::string_view name;
    VendorFailure failure;
    bool counts_against_vendor;
    bool may_have_reached_vendor;
  };
  const Row rows[] = {
      {"gateway's own error", VendorFailure{}, false, true},
      {"not called", {Kind::kNotCalled, 0, false}, false, false},
      {"HTTP 400", VendorFailure::HttpStatus(400), false, true},
      {"HTTP 429", VendorFailure::HttpStatus(429), false, true},
      {"HTTP 500", VendorFailure::HttpStatus(500), true, true},
      {"HTTP 503", VendorFailure::HttpStatus(503), true, true},
      {"connect, nothing sent", VendorFailure::Connect(false), true, false},
      {"timeout before sending", VendorFailure::Timeout(false), true, false},
      {"timeout after sending", VendorFailure::Timeout(true), true, true},
      {"lost after sending", VendorFailure::ConnectionLost(true), true, true},
      {"unreadable 2xx", {Kind::kBadBody, 200, true}, false, true},
      {"too large", {Kind::kTooLarge, 200, true}, false, true},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(std::string(row.name));
    EXPECT_EQ(row.failure.CountsAgainstVendor(), row.counts_against_vendor);
    EXPECT_EQ(row.failure.MayHaveReachedVendor(), row.may_have_reached_vendor);
  }
}

TEST(RetryReasonLabelTest, LabelsAreTheBoundedMetricSet) {
  EXPECT_EQ(RetryReasonLabel(RetryReason::kNotRetryable), "not_retryable");
  EXPECT_EQ(RetryReasonLabel(RetryReason::kConnect), "connect");
  EXPECT_EQ(RetryReasonLabel(RetryReason::kReset), "reset");
  EXPECT_EQ(RetryReasonLabel(RetryReason::kTimeout), "timeout");
  EXPECT_EQ(RetryReasonLabel(RetryReason::kStatus429), "status_429");
  EXPECT_EQ(RetryReasonLabel(RetryReason::kStatus502), "status_502");
  EXPECT_EQ(RetryReasonLabel(RetryReason::kStatus503), "status_503");
  EXPECT_EQ(RetryReasonLabel(RetryReason::kStatus504), "status_504");
  EXPECT_FALSE(IsRetryable(RetryReason::kNotRetryable));
  EXPECT_TRUE(IsRetryable(RetryReason::kStatus429));
}

}  // namespace
}  // namespace inspection::resilience
