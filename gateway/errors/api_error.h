#ifndef GATEWAY_ERRORS_API_ERROR_H_
#define GATEWAY_ERRORS_API_ERROR_H_

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <grpcpp/support/status.h>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "adapters/http/http_transport.h"
#include "adapters/vendor/request_validation.h"
#include "gateway/resilience/vendor_failure.h"
#include "gateway/routes/route_table.h"
#include "google/rpc/status.pb.h"

namespace inspection::errors {

// google.rpc.ErrorInfo.domain of every error the gateway returns.
inline constexpr std::string_view kErrorDomain = "inspection-gateway";

// google.rpc.ErrorInfo.reason values: stable, documented in the README.
inline constexpr std::string_view kReasonInvalidRequest = "INVALID_REQUEST";
inline constexpr std::string_view kReasonVendorHttpError = "VENDOR_HTTP_ERROR";
inline constexpr std::string_view kReasonVendorUnreachable = "VENDOR_UNREACHABLE";
inline constexpr std::string_view kReasonVendorTimeout = "VENDOR_TIMEOUT";
inline constexpr std::string_view kReasonVendorConnectionLost = "VENDOR_CONNECTION_LOST";
inline constexpr std::string_view kReasonVendorMalformedResponse = "VENDOR_MALFORMED_RESPONSE";
inline constexpr std::string_view kReasonVendorUnexpectedResponse = "VENDOR_UNEXPECTED_RESPONSE";
// The vendor's answer was longer than the gateway reads (upstream.max_response_bytes).
inline constexpr std::string_view kReasonVendorResponseTooLarge = "VENDOR_RESPONSE_TOO_LARGE";
// A non-idempotent call (token creation, damage submission) may have been done by the
// vendor, but no answer was read: see OutcomeOf.
inline constexpr std::string_view kReasonOutcomeUnknown = "OUTCOME_UNKNOWN";
inline constexpr std::string_view kReasonDeadlineTooShort = "DEADLINE_TOO_SHORT";
// The caller's deadline passed while it waited for a vendor call it shared with other
// callers (a coalesced cache fetch); that call went on without it.
inline constexpr std::string_view kReasonCallerDeadlineExceeded = "CALLER_DEADLINE_EXCEEDED";
inline constexpr std::string_view kReasonInternal = "INTERNAL";
// The pipeline and the gRPC edge.
inline constexpr std::string_view kReasonCircuitOpen = "CIRCUIT_OPEN";
inline constexpr std::string_view kReasonPermissionDeniedByPolicy = "PERMISSION_DENIED_BY_POLICY";
inline constexpr std::string_view kReasonCallerRateLimited = "CALLER_RATE_LIMITED";
inline constexpr std::string_view kReasonCallerStreamLimit = "CALLER_STREAM_LIMIT";
inline constexpr std::string_view kReasonConnectionStreamLimit = "CONNECTION_STREAM_LIMIT";
inline constexpr std::string_view kReasonStreamLimit = "STREAM_LIMIT";
// Streams.
inline constexpr std::string_view kReasonSubscriberTooSlow = "SUBSCRIBER_TOO_SLOW";
inline constexpr std::string_view kReasonCursorExpired = "CURSOR_EXPIRED";
inline constexpr std::string_view kReasonStreamInterrupted = "STREAM_INTERRUPTED";
inline constexpr std::string_view kReasonStreamEnded = "STREAM_ENDED";
inline constexpr std::string_view kReasonInspectionIdNotFound = "INSPECTION_ID_NOT_FOUND";

// Every reason above: the one list (the README's Errors table documents each, checked by
// readme_examples_test). No ErrorInfo.reason is spelled anywhere else.
inline constexpr std::string_view kAllReasons[] = {
    kReasonInvalidRequest,
    kReasonVendorHttpError,
    kReasonVendorUnreachable,
    kReasonVendorTimeout,
    kReasonVendorConnectionLost,
    kReasonVendorMalformedResponse,
    kReasonVendorUnexpectedResponse,
    kReasonVendorResponseTooLarge,
    kReasonOutcomeUnknown,
    kReasonDeadlineTooShort,
    kReasonCallerDeadlineExceeded,
    kReasonInternal,
    kReasonCircuitOpen,
    kReasonPermissionDeniedByPolicy,
    kReasonCallerRateLimited,
    kReasonCallerStreamLimit,
    kReasonConnectionStreamLimit,
    kReasonStreamLimit,
    kReasonSubscriberTooSlow,
    kReasonCursorExpired,
    kReasonStreamInterrupted,
    kReasonStreamEnded,
    kReasonInspectionIdNotFound,
};

// ApiError::ToStatus's payload: the serialized google.rpc.Status.
inline constexpr char kRpcStatusPayloadUrl[] = "type.googleapis.com/google.rpc.Status";

// The vendor's body is kept in ErrorInfo.metadata["vendor_body"], cut to this many
// bytes so the error fits in gRPC's trailer size limits (8 KiB by default);
// metadata["vendor_body_truncated"] = "true" says when it was cut.
inline constexpr size_t kMaxVendorBodyBytes = 4096;

// The one mapping from a vendor HTTP status (non-2xx) to a gRPC code.
absl::StatusCode MapHttpStatusToCode(int http_status);
// The one mapping from a transport failure to a gRPC code.
absl::StatusCode MapTransportErrorToCode(http::TransportError error);

// Parses a Retry-After header value: delta-seconds ("120") or an HTTP-date
// ("Wed, 21 Oct 2015 07:28:00 GMT", also the obsolete RFC 850 and asctime forms).
// Dates in the past give zero. nullopt when the value is neither.
std::optional<std::chrono::milliseconds> ParseRetryAfter(std::string_view value, absl::Time now);

// An error on its way to a gRPC caller: a code, a message that never contains
// secrets, and the google.rpc details (ErrorInfo, BadRequest, RetryInfo).
struct ApiError {
  absl::StatusCode code = absl::StatusCode::kInternal;
  std::string message;
  std::string reason;                                    // ErrorInfo.reason
  std::map<std::string, std::string> metadata;           // ErrorInfo.metadata
  validation::Violations violations;                     // BadRequest.field_violations
  std::optional<std::chrono::milliseconds> retry_delay;  // RetryInfo.retry_delay
  resilience::VendorFailure failure;                     // what happened, typed

  // The one conversion of an error into what its receiver reads, at the edge:
  //  - ToGrpcStatus for a gRPC caller: a grpc::Status whose binary details are a
  //    google.rpc.Status holding the details;
  //  - ToStatus for the gateway's own background callers (the reconciler, start-up
  //    registration): the code and message, with the same google.rpc.Status as the payload
  //    kRpcStatusPayloadUrl, so nothing is lost.
  grpc::Status ToGrpcStatus() const;
  absl::Status ToStatus() const;
  // The details as a google.rpc.Status (code, message, ErrorInfo, BadRequest, RetryInfo).
  google::rpc::Status ToRpcStatus() const;

  static ApiError InvalidRequest(validation::Violations violations);
  // Metadata `x-vendor-account` names no configured account: INVALID_ARGUMENT with a
  // field violation on the metadata key.
  static ApiError UnknownVendorAccount();
  // A non-2xx vendor answer. The body (already scrubbed of secrets by the caller)
  // is preserved in metadata; Retry-After becomes RetryInfo.
  static ApiError FromVendorResponse(const routes::Route& route, const http::HttpResponse& response,
                                     absl::Time now);
  static ApiError FromTransport(const routes::Route& route, const http::HttpResult& result);
  // A 2xx answer whose body is not the JSON we can read: `reason` is
  // kReasonVendorMalformedResponse (not JSON, truncated) or
  // kReasonVendorUnexpectedResponse (JSON of the wrong shape).
  static ApiError FromBadVendorBody(const routes::Route& route, const http::HttpResponse& response,
                                    std::string_view reason, std::string_view detail);
};

// The error a caller of `route` gets for `error`, decided once at the gRPC edge. For a
// non-idempotent route (creates something at the vendor), an error that leaves open
// whether the vendor did it (the request may have reached it and no answer was read: a
// timeout or lost connection after sending, or a 2xx we could not read) becomes UNKNOWN
// with reason OUTCOME_UNKNOWN: UNAVAILABLE would make gRPC retry policies and clients send
// it again and create a second token or a second billed inspection. The original reason
// stays in metadata["cause"]. Every other error is returned as it is.
ApiError OutcomeOf(const routes::Route& route, ApiError error);

}  // namespace inspection::errors

#endif  // GATEWAY_ERRORS_API_ERROR_H_
