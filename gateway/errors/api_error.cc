#include "gateway/errors/api_error.h"

#include <cctype>

#include "absl/strings/ascii.h"
#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"

namespace inspection::errors {

absl::StatusCode MapHttpStatusToCode(int http_status) {
  switch (http_status) {
    case 400:  // the vendor rejected the request's content
    case 422:  // same meaning, stricter wording
      return absl::StatusCode::kInvalidArgument;
    case 401:  // our API key is missing or wrong: the caller cannot fix it, the operator can
      return absl::StatusCode::kUnauthenticated;
    case 403:
      return absl::StatusCode::kPermissionDenied;
    case 404:
      return absl::StatusCode::kNotFound;
    case 409:  // a conflicting concurrent change: retry the whole operation
      return absl::StatusCode::kAborted;
    case 429:  // rate limited: RetryInfo carries Retry-After when the vendor sends it
      return absl::StatusCode::kResourceExhausted;
    case 408:  // the vendor timed out waiting for our request: transient
      return absl::StatusCode::kUnavailable;
    case 501:  // not implemented will not get better by retrying
      return absl::StatusCode::kUnimplemented;
    case 504:  // the vendor's own gateway timed out
      return absl::StatusCode::kUnavailable;
    default:
      break;
  }
  if (http_status >= 500 && http_status <= 599) return absl::StatusCode::kUnavailable;
  // Other 4xx (405, 410, 413, 415...): the request as built was not acceptable.
  if (http_status >= 400 && http_status <= 499) return absl::StatusCode::kFailedPrecondition;
  // 1xx/3xx reaching here mean the vendor answered something we do not follow
  // (redirects are not followed on purpose: the API key must not travel elsewhere).
  return absl::StatusCode::kUnknown;
}

absl::StatusCode MapTransportErrorToCode(http::TransportError error) {
  switch (error) {
    case http::TransportError::kNone:
      return absl::StatusCode::kOk;
    case http::TransportError::kTimeout:
      return absl::StatusCode::kDeadlineExceeded;
    case http::TransportError::kConnect:
    case http::TransportError::kSend:
    case http::TransportError::kReceive:
      return absl::StatusCode::kUnavailable;
    case http::TransportError::kTooLarge:
      // As gRPC's own answer to a message over its size limit.
      return absl::StatusCode::kResourceExhausted;
    case http::TransportError::kOther:
      return absl::StatusCode::kInternal;
  }
  return absl::StatusCode::kInternal;
}

std::optional<std::chrono::milliseconds> ParseRetryAfter(std::string_view value, absl::Time now) {
  absl::string_view trimmed =
      absl::StripAsciiWhitespace(absl::string_view(value.data(), value.size()));
  if (trimmed.empty()) return std::nullopt;
  bool all_digits = true;
  for (char c : trimmed) all_digits = all_digits && std::isdigit(static_cast<unsigned char>(c));
  if (all_digits) {
    uint64_t seconds = 0;
    if (!absl::SimpleAtoi(trimmed, &seconds)) return std::nullopt;
    constexpr uint64_t kMaxSeconds = 365ull * 24 * 3600;  // keep the arithmetic sane
    if (seconds > kMaxSeconds) seconds = kMaxSeconds;
    return std::chrono::milliseconds(seconds * 1000);
  }
  // HTTP-date: IMF-fixdate, then the obsolete RFC 850 and asctime forms (RFC 9110 5.6.7).
  static constexpr const char* kFormats[] = {"%a, %d %b %Y %H:%M:%S GMT",
                                             "%A, %d-%b-%y %H:%M:%S GMT", "%a %b %e %H:%M:%S %Y"};
  for (const char* format : kFormats) {
    absl::Time when;
    std::string err;
    if (absl::ParseTime(format, std::string(trimmed), absl::UTCTimeZone(), &when, &err)) {
      absl::Duration delta = when - now;
      if (delta < absl::ZeroDuration()) delta = absl::ZeroDuration();
      return std::chrono::milliseconds(absl::ToInt64Milliseconds(delta));
    }
  }
  return std::nullopt;
}

google::rpc::Status ApiError::ToRpcStatus() const {
  google::rpc::Status status;
  status.set_code(static_cast<int>(code));
  status.set_message(message);
  if (!reason.empty()) {
    google::rpc::ErrorInfo info;
    info.set_reason(reason);
    info.set_domain(std::string(kErrorDomain));
    for (const auto& [key, value] : metadata) (*info.mutable_metadata())[key] = value;
    status.add_details()->PackFrom(info);
  }
  if (!violations.empty()) {
    google::rpc::BadRequest bad_request;
    for (const auto& violation : violations) {
      auto* out = bad_request.add_field_violations();
      out->set_field(violation.field);
      out->set_description(violation.description);
    }
    status.add_details()->PackFrom(bad_request);
  }
  if (retry_delay.has_value()) {
    google::rpc::RetryInfo retry;
    const auto ms = retry_delay->count();
    retry.mutable_retry_delay()->set_seconds(ms / 1000);
    retry.mutable_retry_delay()->set_nanos(static_cast<int32_t>((ms % 1000) * 1000000));
    status.add_details()->PackFrom(retry);
  }
  return status;
}

grpc::Status ApiError::ToGrpcStatus() const {
  return grpc::Status(static_cast<grpc::StatusCode>(code), message,
                      ToRpcStatus().SerializeAsString());
}

absl::Status ApiError::ToStatus() const {
  absl::Status status(code, message);
  status.SetPayload(kRpcStatusPayloadUrl, absl::Cord(ToRpcStatus().SerializeAsString()));
  return status;
}

ApiError ApiError::InvalidRequest(validation::Violations violations) {
  ApiError error;
  error.code = absl::StatusCode::kInvalidArgument;
  error.reason = std::string(kReasonInvalidRequest);
  error.message =
      violations.size() == 1
          ? absl::StrCat("invalid request: ", violations[0].field, ": ", violations[0].description)
          : absl::StrCat("invalid request: ", violations.size(),
                         " field violations (see BadRequest details)");
  error.violations = std::move(violations);
  return error;
}

ApiError ApiError::UnknownVendorAccount() {
  return InvalidRequest(
      {{"x-vendor-account",
        "metadata names no configured vendor account; see the gateway's `accounts` "
        "configuration (omit it, or send \"default\", for the default account)"}});
}

namespace {

void AddVendorBody(const http::HttpResponse& response, ApiError* error) {
  const std::string& body = response.body;
  if (body.size() > kMaxVendorBodyBytes) {
    error->metadata["vendor_body"] = body.substr(0, kMaxVendorBodyBytes);
    error->metadata["vendor_body_truncated"] = "true";
  } else {
    error->metadata["vendor_body"] = body;
  }
  if (const std::string* type = response.FindHeader("content-type")) {
    error->metadata["vendor_content_type"] = *type;
  }
}

// The vendor's own message, when its error body is JSON with a usual message key;
// it makes the gRPC status message useful without opening the details.
std::string VendorMessageHint(const std::string& body) {
  for (std::string_view key : {"\"message\"", "\"error\"", "\"msg\""}) {
    size_t at = body.find(key);
    if (at == std::string::npos) continue;
    size_t colon = body.find(':', at + key.size());
    size_t open = colon == std::string::npos ? colon : body.find('"', colon);
    size_t close = open == std::string::npos ? open : body.find('"', open + 1);
    if (close != std::string::npos && close - open - 1 <= 200) {
      return body.substr(open + 1, close - open - 1);
    }
  }
  return {};
}

}  // namespace

ApiError ApiError::FromVendorResponse(const routes::Route& route,
                                      const http::HttpResponse& response, absl::Time now) {
  ApiError error;
  error.code = MapHttpStatusToCode(static_cast<int>(response.status));
  error.reason = std::string(kReasonVendorHttpError);
  error.metadata["route"] = std::string(route.metric_label);
  error.metadata["http_status"] = absl::StrCat(response.status);
  error.failure = {resilience::VendorFailure::Kind::kHttpStatus, static_cast<int>(response.status),
                   true};
  AddVendorBody(response, &error);
  error.message = absl::StrCat("vendor answered HTTP ", response.status, " on ",
                               std::string(routes::HttpMethodName(route.http_method)), " ",
                               std::string(route.path_template));
  if (std::string hint = VendorMessageHint(response.body); !hint.empty()) {
    absl::StrAppend(&error.message, ": ", hint);
  }
  if (const std::string* retry_after = response.FindHeader("retry-after")) {
    error.retry_delay = ParseRetryAfter(*retry_after, now);
    error.metadata["retry_after"] = *retry_after;
  }
  return error;
}

ApiError ApiError::FromTransport(const routes::Route& route, const http::HttpResult& result) {
  ApiError error;
  error.code = MapTransportErrorToCode(result.error);
  error.metadata["route"] = std::string(route.metric_label);
  error.metadata["transport_error"] = http::TransportErrorName(result.error);
  error.metadata["request_sent"] = result.request_sent ? "true" : "false";
  const char* what = "vendor call failed";
  error.failure.request_sent = result.request_sent;
  switch (result.error) {
    case http::TransportError::kConnect:
      error.reason = std::string(kReasonVendorUnreachable);
      error.failure.kind = resilience::VendorFailure::Kind::kConnect;
      what = "cannot connect to the vendor";
      break;
    case http::TransportError::kTimeout:
      error.reason = std::string(kReasonVendorTimeout);
      error.failure.kind = resilience::VendorFailure::Kind::kTimeout;
      what = "the vendor did not answer in time";
      break;
    case http::TransportError::kSend:
    case http::TransportError::kReceive:
      error.reason = std::string(kReasonVendorConnectionLost);
      error.failure.kind = resilience::VendorFailure::Kind::kConnectionLost;
      what = "the connection to the vendor failed mid-exchange";
      break;
    case http::TransportError::kTooLarge:
      error.reason = std::string(kReasonVendorResponseTooLarge);
      error.failure.kind = resilience::VendorFailure::Kind::kTooLarge;
      error.failure.request_sent = true;
      error.metadata["request_sent"] = "true";
      what =
          "the vendor's answer is longer than the gateway reads (upstream.max_response_bytes, "
          "or upstream.max_response_head_bytes for its head); the same request would get it "
          "again";
      break;
    case http::TransportError::kNone:
    case http::TransportError::kOther:
      error.reason = std::string(kReasonInternal);
      break;
  }
  error.message =
      absl::StrCat(what, " (", std::string(route.metric_label), "): ", result.error_detail);
  return error;
}

ApiError ApiError::FromBadVendorBody(const routes::Route& route, const http::HttpResponse& response,
                                     std::string_view reason, std::string_view detail) {
  ApiError error;
  // The vendor said 2xx but we cannot read it. Most often a truncated or garbled
  // answer, which a later call may not repeat: UNAVAILABLE tells the caller it may
  // retry. The body is kept so the operator can see what arrived.
  error.code = absl::StatusCode::kUnavailable;
  error.reason = std::string(reason);
  error.metadata["route"] = std::string(route.metric_label);
  error.metadata["http_status"] = absl::StrCat(response.status);
  error.failure = {resilience::VendorFailure::Kind::kBadBody, static_cast<int>(response.status),
                   true};
  AddVendorBody(response, &error);
  error.message = absl::StrCat("unreadable vendor response on ", std::string(route.metric_label),
                               ": ", std::string(detail));
  return error;
}

ApiError OutcomeOf(const routes::Route& route, ApiError error) {
  if (route.idempotency != routes::Idempotency::kNonIdempotent) return error;
  const resilience::VendorFailure::Kind kind = error.failure.kind;
  const bool lost_after_sending = (kind == resilience::VendorFailure::Kind::kTimeout ||
                                   kind == resilience::VendorFailure::Kind::kConnectionLost) &&
                                  error.failure.request_sent;
  // An answer too long to read may be the operation's success.
  const bool unreadable_success = kind == resilience::VendorFailure::Kind::kBadBody ||
                                  kind == resilience::VendorFailure::Kind::kTooLarge;
  if (!lost_after_sending && !unreadable_success) return error;
  error.metadata["cause"] = error.reason;
  error.code = absl::StatusCode::kUnknown;
  error.reason = std::string(kReasonOutcomeUnknown);
  error.retry_delay.reset();
  error.message = absl::StrCat(
      "the outcome is unknown: the request may have reached the vendor, and no answer was "
      "read (",
      error.message,
      "). Do not simply retry: retry only with the same idempotency key, which returns the "
      "first outcome (or this one) and never does the operation twice");
  return error;
}

}  // namespace inspection::errors
