#include "gateway/resilience/retry_policy.h"

namespace inspection::resilience {

std::string_view RetryReasonLabel(RetryReason reason) {
  switch (reason) {
    case RetryReason::kNotRetryable:
      return "not_retryable";
    case RetryReason::kConnect:
      return "connect";
    case RetryReason::kReset:
      return "reset";
    case RetryReason::kTimeout:
      return "timeout";
    case RetryReason::kStatus429:
      return "status_429";
    case RetryReason::kStatus502:
      return "status_502";
    case RetryReason::kStatus503:
      return "status_503";
    case RetryReason::kStatus504:
      return "status_504";
  }
  return "not_retryable";
}

namespace {

RetryReason ReasonForStatus(int http_status) {
  switch (http_status) {
    // 429: the vendor's rate limiter refused the request before doing anything with it;
    // the Retry-After it sends is honoured by the wait decision.
    case 429:
      return RetryReason::kStatus429;
    // 502/503/504: a proxy or load balancer in front of the vendor could not get an
    // answer; the next attempt may land on a healthy instance.
    case 502:
      return RetryReason::kStatus502;
    case 503:
      return RetryReason::kStatus503;
    case 504:
      return RetryReason::kStatus504;
    // 500 is deliberately not here: it reports that processing *this* request failed,
    // which sending the same request again is more likely to reproduce than to fix
    // (unlike 502-504, which are about the path to the vendor).
    default:
      return RetryReason::kNotRetryable;
  }
}

}  // namespace

RetryReason ClassifyRetry(Idempotency idempotency, const VendorFailure& failure) {
  using Kind = VendorFailure::Kind;
  RetryReason reason = RetryReason::kNotRetryable;
  // An HTTP answer proves the vendor received the request, whatever the flag says.
  bool request_sent = failure.request_sent;
  switch (failure.kind) {
    case Kind::kConnect:
      reason = RetryReason::kConnect;
      break;
    case Kind::kConnectionLost:
      reason = RetryReason::kReset;
      break;
    case Kind::kTimeout:
      reason = RetryReason::kTimeout;
      break;
    case Kind::kHttpStatus:
      reason = ReasonForStatus(failure.http_status);
      request_sent = true;
      break;
    case Kind::kNone:
    case Kind::kNotCalled:
    case Kind::kBadBody:
    case Kind::kTooLarge:
      break;
  }
  if (!IsRetryable(reason)) return RetryReason::kNotRetryable;
  switch (idempotency) {
    case Idempotency::kSafe:
    case Idempotency::kIdempotent:
      return reason;
    case Idempotency::kNonIdempotent:
      // A second CreateToken / DetectDamage would create a second token / inspection and
      // charge for it. Only a request that provably never left is safe to send again.
      return request_sent ? RetryReason::kNotRetryable : reason;
  }
  return RetryReason::kNotRetryable;
}

}  // namespace inspection::resilience
