#ifndef GATEWAY_RESILIENCE_VENDOR_FAILURE_H_
#define GATEWAY_RESILIENCE_VENDOR_FAILURE_H_

namespace inspection::resilience {

// What happened on the way to the vendor, typed: the one failure type of a vendor call. The
// vendor client sets it once from the transport's answer (errors::ApiError::FromTransport,
// FromVendorResponse, FromBadVendorBody), it travels inside the call's errors::ApiError through
// every decorator unchanged, and it alone (never the error's words) steers retries
// (ClassifyRetry), the circuit breaker (CountsAgainstVendor), idempotency keys
// (MayHaveReachedVendor) and unknown outcomes (errors::OutcomeOf).
struct VendorFailure {
  enum class Kind {
    kNone,            // not about the vendor call (the gateway's own answer, a bug)
    kNotCalled,       // the gateway did not call: open circuit, deadline already too short
    kHttpStatus,      // the vendor answered non-2xx (`http_status`)
    kConnect,         // no connection: nothing was sent
    kTimeout,         // the attempt's time ran out
    kConnectionLost,  // reset or truncated mid-exchange
    kBadBody,         // a 2xx answer that could not be read (`http_status`)
    // An answer longer than the gateway reads: the vendor answered (so it is up, and the
    // request reached it), and the same request would get the same answer again.
    kTooLarge,
  };

  // Factories with conservative defaults: only a connect failure defaults to "not sent".
  static VendorFailure Connect(bool request_sent = false) {
    return {Kind::kConnect, 0, request_sent};
  }
  static VendorFailure Timeout(bool request_sent = true) {
    return {Kind::kTimeout, 0, request_sent};
  }
  static VendorFailure ConnectionLost(bool request_sent = true) {
    return {Kind::kConnectionLost, 0, request_sent};
  }
  static VendorFailure HttpStatus(int status) { return {Kind::kHttpStatus, status, true}; }

  Kind kind = Kind::kNone;
  int http_status = 0;
  // For kConnect, kTimeout, kConnectionLost: whether the request was (perhaps partly) sent;
  // false only when the transport knows no byte of it left the gateway. Ignored for
  // kHttpStatus, kBadBody and kTooLarge (an answer means the vendor received the request);
  // false for kNotCalled.
  bool request_sent = false;

  // False only when nothing can have reached the vendor (the operation was not done).
  bool MayHaveReachedVendor() const;
  // Whether the failure says the vendor is unhealthy, so it counts against the circuit
  // breaker: server errors (5xx) and transport failures. 4xx (429 included) mean the vendor
  // is up and answering; unreadable or oversized answers, calls not made and the gateway's
  // own errors say nothing about it.
  bool CountsAgainstVendor() const;
};

}  // namespace inspection::resilience

#endif  // GATEWAY_RESILIENCE_VENDOR_FAILURE_H_
