#ifndef GATEWAY_RESILIENCE_RETRY_POLICY_H_
#define GATEWAY_RESILIENCE_RETRY_POLICY_H_

#include <string_view>

namespace inspection::resilience {

// What re-sending a request does at the vendor. Mirrors routes::Idempotency (same
// enumerators, same meaning); this library does not depend on the route table, so the
// pipeline maps one onto the other with a switch.
enum class Idempotency {
  kSafe,           // reads, and pure image analysis: no vendor state changes
  kIdempotent,     // PUT of a configuration: sending twice = sending once
  kNonIdempotent,  // creates something: never re-sent once it may have reached the vendor
};

// How an attempt failed.
enum class FailureKind {
  kConnect,     // no connection to the vendor (DNS, refused, TLS handshake, connect timeout)
  kReset,       // connection reset or closed before a complete response
  kTimeout,     // the attempt's timeout expired
  kHttpStatus,  // the vendor answered with `http_status`
};

struct AttemptFailure {
  static AttemptFailure Connect(bool request_sent = false) {
    return {FailureKind::kConnect, 0, request_sent};
  }
  static AttemptFailure Reset(bool request_sent = true) {
    return {FailureKind::kReset, 0, request_sent};
  }
  static AttemptFailure Timeout(bool request_sent = true) {
    return {FailureKind::kTimeout, 0, request_sent};
  }
  static AttemptFailure HttpStatus(int status) { return {FailureKind::kHttpStatus, status, true}; }

  FailureKind kind = FailureKind::kConnect;
  int http_status = 0;  // kHttpStatus only
  // False only when the transport knows that no byte of the request left the gateway
  // (e.g. the connection was never established). When in doubt: true. Ignored for
  // kHttpStatus: an answer means the vendor received the request.
  bool request_sent = true;
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
//  - Retryable failures: connect errors, resets, timeouts, HTTP 429, 502, 503, 504.
//    Everything else (other 4xx, 500, 501, 2xx/3xx...) is not retryable.
//  - kSafe and kIdempotent routes retry every retryable failure.
//  - kNonIdempotent routes retry only when `request_sent` is false (the vendor cannot have
//    seen the request); any HTTP status means it did, so 429/503 are not retried there.
// Whether time, attempts and the budget allow the retry is decided elsewhere.
RetryReason ClassifyRetry(Idempotency idempotency, const AttemptFailure& failure);

}  // namespace inspection::resilience

#endif  // GATEWAY_RESILIENCE_RETRY_POLICY_H_
