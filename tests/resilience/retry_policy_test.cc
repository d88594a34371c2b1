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
  AttemptFailure failure;
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
        {"connect before sending", idempotency, AttemptFailure::Connect(false),
         RetryReason::kConnect},
        {"connect, request maybe sent", idempotency, AttemptFailure::Connect(true),
         RetryReason::kConnect},
        {"reset after sending", idempotency, AttemptFailure::Reset(), RetryReason::kReset},
        {"timeout after sending", idempotency, AttemptFailure::Timeout(), RetryReason::kTimeout},
        {"429", idempotency, AttemptFailure::HttpStatus(429), RetryReason::kStatus429},
        {"502", idempotency, AttemptFailure::HttpStatus(502), RetryReason::kStatus502},
        {"503", idempotency, AttemptFailure::HttpStatus(503), RetryReason::kStatus503},
        {"504", idempotency, AttemptFailure::HttpStatus(504), RetryReason::kStatus504},
    });
  }
}

TEST(ClassifyRetryTest, OtherStatusesAreNotRetriedOnAnyRoute) {
  for (Idempotency idempotency : {kSafe, kIdempotent, kNonIdempotent}) {
    for (int status : {500, 501, 505, 400, 401, 403, 404, 408, 409, 422, 200, 204, 302, 0}) {
      SCOPED_TRACE(status);
      EXPECT_EQ(ClassifyRetry(idempotency, AttemptFailure::HttpStatus(status)),
                RetryReason::kNotRetryable);
    }
  }
}

TEST(ClassifyRetryTest, Status500IsNotRetriedEvenOnSafeRoutes) {
  EXPECT_EQ(ClassifyRetry(kSafe, AttemptFailure::HttpStatus(500)), RetryReason::kNotRetryable);
}

TEST(ClassifyRetryTest, NonIdempotentRoutesRetryOnlyWhatNeverLeft) {
  // CreateToken and DetectDamage: a second request could create a second token/inspection.
  ExpectTable({
      {"connect before sending (CreateToken)", kNonIdempotent, AttemptFailure::Connect(false),
       RetryReason::kConnect},
      {"connect timeout before sending", kNonIdempotent, AttemptFailure::Timeout(false),
       RetryReason::kTimeout},
      {"reset before sending", kNonIdempotent, AttemptFailure::Reset(false), RetryReason::kReset},
      {"connect error, request maybe sent", kNonIdempotent, AttemptFailure::Connect(true),
       RetryReason::kNotRetryable},
      {"timeout after sending", kNonIdempotent, AttemptFailure::Timeout(true),
       RetryReason::kNotRetryable},
      {"reset after sending", kNonIdempotent, AttemptFailure::Reset(true),
       RetryReason::kNotRetryable},
      {"429", kNonIdempotent, AttemptFailure::HttpStatus(429), RetryReason::kNotRetryable},
      {"502", kNonIdempotent, AttemptFailure::HttpStatus(502), RetryReason::kNotRetryable},
      {"503", kNonIdempotent, AttemptFailure::HttpStatus(503), RetryReason::kNotRetryable},
      {"504", kNonIdempotent, AttemptFailure::HttpStatus(504), RetryReason::kNotRetryable},
  });
}

TEST(ClassifyRetryTest, AnHttpAnswerMeansTheRequestWasSentWhateverTheFlagSays) {
  const AttemptFailure contradictory{FailureKind::kHttpStatus, 503, /*request_sent=*/false};
  EXPECT_EQ(ClassifyRetry(kNonIdempotent, contradictory), RetryReason::kNotRetryable);
  EXPECT_EQ(ClassifyRetry(kSafe, contradictory), RetryReason::kStatus503);
}

TEST(ClassifyRetryTest, FactoryDefaultsAreConservative) {
  // Only a connect failure defaults to "not sent"; resets and timeouts default to "sent".
  EXPECT_FALSE(AttemptFailure::Connect().request_sent);
  EXPECT_TRUE(AttemptFailure::Reset().request_sent);
  EXPECT_TRUE(AttemptFailure::Timeout().request_sent);
  EXPECT_TRUE(AttemptFailure{}.request_sent);
  EXPECT_EQ(ClassifyRetry(kNonIdempotent, AttemptFailure::Timeout()), RetryReason::kNotRetryable);
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
