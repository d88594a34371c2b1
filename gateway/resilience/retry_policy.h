#ifndef GATEWAY_RESILIENCE_RETRY_POLICY_H_
#define GATEWAY_RESILIENCE_RETRY_POLICY_H_

#include <string_view>

#include "gateway/resilience/vendor_failure.h"

namespace inspection::resilience {

// What re-sending a request does at the vendor. Mirrors routes::Idempotency (same
// enumerators, same meaning); this library does not depend on the route table, so the
// pipeline maps one onto the other with a switch.
enum class Idempotency {
  kSafe,           // reads, and pure image analysis: no vendor state changes
  kIdempotent,     // PUT of a configuration: sending twice = sending once
  kNonIdempotent,  // creates something: never re-sent once it may have reached the vendor
};

// Why a failed attempt may be retried; each value has a bounded metric label.
enum class RetryReason {
  kNotRetryable,
  kConnect,
  kReset,
  kTimeout,
  kStatus429,
  kStatus502,
  kStatus503,
  kStatus504,
};

// The metric label ("reason"): "connect", "reset", "timeout", "status_429", "status_502",
// "status_503", "status_504", or "not_retryable". Static storage.
std::string_view RetryReasonLabel(RetryReason reason);

inline bool IsRetryable(RetryReason reason) { return reason != RetryReason::kNotRetryable; }

// Whether an attempt that failed with `failure` may be re-sent on a route with
// `idempotency`, and why. Pure; thread-safe.
//  - Retryable failures: connect errors, lost connections (resets), timeouts, HTTP 429, 502, 503,
//  504.
//    Everything else (other 4xx, 500, 501, 2xx/3xx...) is not retryable.
//  - kSafe and kIdempotent routes retry every retryable failure.
//  - kNonIdempotent routes retry only when `request_sent` is false (the vendor cannot have
//    seen the request); any HTTP status means it did, so 429/503 are not retried there.
//  - Unreadable or oversized answers, calls not made and the gateway's own errors are
//    never retried: the same request would meet the same answer.
// Whether time, attempts and the budget allow the retry is decided elsewhere.
RetryReason ClassifyRetry(Idempotency idempotency, const VendorFailure& failure);

}  // namespace inspection::resilience

#endif  // GATEWAY_RESILIENCE_RETRY_POLICY_H_
