#include "gateway/errors/api_error.h"

#include <gtest/gtest.h>

#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"

namespace inspection::errors {
namespace {

using resilience::VendorFailure;

// A non-idempotent call that may have been done at the vendor, with no answer read, is
// UNKNOWN / OUTCOME_UNKNOWN at the edge (not UNAVAILABLE, which retry policies re-send).
TEST(OutcomeOfTest, OnlyNonIdempotentCallsThatMayHaveArrivedBecomeUnknown) {
  const routes::Route& create = routes::GetRoute(routes::RouteId::kCreateToken);
  const routes::Route& get = routes::GetRoute(routes::RouteId::kGetTokenStatus);
  auto transport = [](http::TransportError kind, bool sent) {
    http::HttpResult result;
    result.error = kind;
    result.request_sent = sent;
    result.error_detail = "detail";
    return result;
  };
  const ApiError lost =
      ApiError::FromTransport(create, transport(http::TransportError::kReceive, true));
  const ApiError unknown = OutcomeOf(create, lost);
  EXPECT_EQ(unknown.code, absl::StatusCode::kUnknown);
  EXPECT_EQ(unknown.reason, kReasonOutcomeUnknown);
  EXPECT_EQ(unknown.metadata.at("cause"), kReasonVendorConnectionLost);
  EXPECT_NE(unknown.message.find("same idempotency key"), std::string::npos);
  EXPECT_EQ(OutcomeOf(create, ApiError::FromTransport(
                                  create, transport(http::TransportError::kTimeout, true)))
                .reason,
            kReasonOutcomeUnknown);
  // Nothing reached the vendor: safe to retry, UNAVAILABLE stays.
  EXPECT_EQ(OutcomeOf(create, ApiError::FromTransport(
                                  create, transport(http::TransportError::kConnect, false)))
                .code,
            absl::StatusCode::kUnavailable);
  // An unreadable 2xx: the vendor did it, we cannot say what came of it.
  http::HttpResponse ok;
  ok.status = 200;
  EXPECT_EQ(OutcomeOf(create,
                      ApiError::FromBadVendorBody(create, ok, kReasonVendorMalformedResponse, "x"))
                .code,
            absl::StatusCode::kUnknown);
  // An idempotent route keeps its error: a retry is harmless there.
  EXPECT_EQ(
      OutcomeOf(get, ApiError::FromTransport(get, transport(http::TransportError::kReceive, true)))
          .code,
      absl::StatusCode::kUnavailable);
}

// The typed failure each constructor records: what steers retries, the breaker,
// idempotency and OutcomeOf. Erasing the string metadata changes none of it.
TEST(VendorFailureTest, EveryVendorErrorSaysWhatHappenedTyped) {
  const routes::Route& route = routes::GetRoute(routes::RouteId::kCreateToken);
  http::HttpResponse refused;
  refused.status = 503;
  ApiError http_error = ApiError::FromVendorResponse(route, refused, absl::Now());
  http_error.metadata.clear();
  EXPECT_EQ(http_error.failure.kind, VendorFailure::Kind::kHttpStatus);
  EXPECT_EQ(http_error.failure.http_status, 503);
  EXPECT_TRUE(http_error.failure.MayHaveReachedVendor());

  http::HttpResult not_sent;
  not_sent.error = http::TransportError::kConnect;
  not_sent.request_sent = false;
  ApiError connect = ApiError::FromTransport(route, not_sent);
  connect.metadata.clear();
  EXPECT_EQ(connect.failure.kind, VendorFailure::Kind::kConnect);
  EXPECT_FALSE(connect.failure.MayHaveReachedVendor());
  EXPECT_EQ(OutcomeOf(route, connect).code, absl::StatusCode::kUnavailable);

  http::HttpResult lost = not_sent;
  lost.error = http::TransportError::kReceive;
  lost.request_sent = true;
  ApiError reset = ApiError::FromTransport(route, lost);
  reset.metadata.clear();
  EXPECT_EQ(reset.failure.kind, VendorFailure::Kind::kConnectionLost);
  EXPECT_EQ(OutcomeOf(route, reset).reason, kReasonOutcomeUnknown);

  http::HttpResponse ok;
  ok.status = 200;
  ApiError bad = ApiError::FromBadVendorBody(route, ok, kReasonVendorUnexpectedResponse, "x");
  EXPECT_EQ(bad.failure.kind, VendorFailure::Kind::kBadBody);
  EXPECT_EQ(OutcomeOf(route, bad).reason, kReasonOutcomeUnknown);

  http::HttpResult long_answer = not_sent;
  long_answer.error = http::TransportError::kTooLarge;
  long_answer.request_sent = false;  // the transport says true; the kind says it regardless
  long_answer.error_detail = "response too large (limit 1024 bytes)";
  ApiError too_large = ApiError::FromTransport(route, long_answer);
  EXPECT_EQ(too_large.code, absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(too_large.reason, kReasonVendorResponseTooLarge);
  EXPECT_EQ(too_large.metadata.at("transport_error"), "too_large");
  EXPECT_EQ(too_large.metadata.at("request_sent"), "true");
  EXPECT_NE(too_large.message.find("upstream.max_response_bytes"), std::string::npos)
      << too_large.message;
  EXPECT_NE(too_large.message.find("limit 1024 bytes"), std::string::npos) << too_large.message;
  too_large.metadata.clear();
  EXPECT_EQ(too_large.failure.kind, VendorFailure::Kind::kTooLarge);
  EXPECT_TRUE(too_large.failure.MayHaveReachedVendor());
  // Answered, but not read: a token may have been created.
  const ApiError too_large_outcome = OutcomeOf(route, too_large);
  EXPECT_EQ(too_large_outcome.reason, kReasonOutcomeUnknown);
  EXPECT_EQ(too_large_outcome.metadata.at("cause"), kReasonVendorResponseTooLarge);
  // An idempotent route keeps it.
  const routes::Route& get = routes::GetRoute(routes::RouteId::kGetTokenStatus);
  EXPECT_EQ(OutcomeOf(get, ApiError::FromTransport(get, long_answer)).reason,
            kReasonVendorResponseTooLarge);

  ApiError not_called;
  not_called.failure.kind = VendorFailure::Kind::kNotCalled;
  EXPECT_FALSE(not_called.failure.MayHaveReachedVendor());
  EXPECT_TRUE(ApiError().failure.MayHaveReachedVendor()) << "unknown: assume it may have";
}

TEST(MapHttpStatusToCodeTest, FollowsTheDesignTable) {
  EXPECT_EQ(MapHttpStatusToCode(400), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MapHttpStatusToCode(422), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MapHttpStatusToCode(401), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(MapHttpStatusToCode(403), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(MapHttpStatusToCode(404), absl::StatusCode::kNotFound);
  EXPECT_EQ(MapHttpStatusToCode(409), absl::StatusCode::kAborted);
  EXPECT_EQ(MapHttpStatusToCode(429), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(MapHttpStatusToCode(500), absl::StatusCode::kUnavailable);
  EXPECT_EQ(MapHttpStatusToCode(503), absl::StatusCode::kUnavailable);
  EXPECT_EQ(MapHttpStatusToCode(599), absl::StatusCode::kUnavailable);
  EXPECT_EQ(MapHttpStatusToCode(501), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(MapHttpStatusToCode(408), absl::StatusCode::kUnavailable);
  EXPECT_EQ(MapHttpStatusToCode(418), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(MapHttpStatusToCode(301), absl::StatusCode::kUnknown);
}

TEST(MapTransportErrorToCodeTest, TimeoutIsDeadlineAndConnectionsAreUnavailable) {
  EXPECT_EQ(MapTransportErrorToCode(http::TransportError::kTimeout),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(MapTransportErrorToCode(http::TransportError::kConnect),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(MapTransportErrorToCode(http::TransportError::kReceive),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(MapTransportErrorToCode(http::TransportError::kSend), absl::StatusCode::kUnavailable);
  EXPECT_EQ(MapTransportErrorToCode(http::TransportError::kTooLarge),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(MapTransportErrorToCode(http::TransportError::kOther), absl::StatusCode::kInternal);
}

TEST(ParseRetryAfterTest, DeltaSeconds) {
  const absl::Time now = absl::FromUnixSeconds(1700000000);
  EXPECT_EQ(ParseRetryAfter("120", now), std::chrono::milliseconds(120000));
  EXPECT_EQ(ParseRetryAfter(" 0 ", now), std::chrono::milliseconds(0));
  EXPECT_EQ(ParseRetryAfter("-5", now), std::nullopt);
  EXPECT_EQ(ParseRetryAfter("1.5", now), std::nullopt);
  EXPECT_EQ(ParseRetryAfter("", now), std::nullopt);
  EXPECT_EQ(ParseRetryAfter("soon", now), std::nullopt);
}

TEST(ParseRetryAfterTest, HttpDateForms) {
  // Sun, 06 Nov 1994 08:49:37 GMT = 784111777.
  const absl::Time now = absl::FromUnixSeconds(784111777 - 30);
  EXPECT_EQ(ParseRetryAfter("Sun, 06 Nov 1994 08:49:37 GMT", now),
            std::chrono::milliseconds(30000));
  EXPECT_EQ(ParseRetryAfter("Sunday, 06-Nov-94 08:49:37 GMT", now),
            std::chrono::milliseconds(30000));
  EXPECT_EQ(ParseRetryAfter("Sun Nov  6 08:49:37 1994", now), std::chrono::milliseconds(30000));
  // In the past: retry now.
  EXPECT_EQ(ParseRetryAfter("Sun, 06 Nov 1994 08:49:37 GMT", now + absl::Hours(1)),
            std::chrono::milliseconds(0));
}

TEST(ApiErrorTest, ToGrpcStatusPacksEveryDetail) {
  ApiError error;
  error.code = absl::StatusCode::kResourceExhausted;
  error.message = "slow down";
  error.reason = "VENDOR_HTTP_ERROR";
  error.metadata["http_status"] = "429";
  error.violations = {{"urls[1]", "must be an absolute http(s) URL"}};
  error.retry_delay = std::chrono::milliseconds(2500);
  grpc::Status status = error.ToGrpcStatus();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(status.error_message(), "slow down");

  google::rpc::Status details;
  ASSERT_TRUE(details.ParseFromString(status.error_details()));
  EXPECT_EQ(details.code(), static_cast<int>(absl::StatusCode::kResourceExhausted));
  ASSERT_EQ(details.details_size(), 3);
  google::rpc::ErrorInfo info;
  ASSERT_TRUE(details.details(0).UnpackTo(&info));
  EXPECT_EQ(info.reason(), "VENDOR_HTTP_ERROR");
  EXPECT_EQ(info.domain(), "inspection-gateway");
  EXPECT_EQ(info.metadata().at("http_status"), "429");
  google::rpc::BadRequest bad_request;
  ASSERT_TRUE(details.details(1).UnpackTo(&bad_request));
  EXPECT_EQ(bad_request.field_violations(0).field(), "urls[1]");
  google::rpc::RetryInfo retry;
  ASSERT_TRUE(details.details(2).UnpackTo(&retry));
  EXPECT_EQ(retry.retry_delay().seconds(), 2);
  EXPECT_EQ(retry.retry_delay().nanos(), 500000000);
}

TEST(ApiErrorTest, ToStatusKeepsTheSameDetailsAsItsPayload) {
  ApiError error;
  error.code = absl::StatusCode::kUnavailable;
  error.message = "the vendor is not answering";
  error.reason = "VENDOR_TIMEOUT";
  error.retry_delay = std::chrono::milliseconds(1000);
  const absl::Status status = error.ToStatus();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(status.message(), "the vendor is not answering");
  const auto payload = status.GetPayload(kRpcStatusPayloadUrl);
  ASSERT_TRUE(payload.has_value());
  google::rpc::Status details;
  ASSERT_TRUE(details.ParseFromString(std::string(*payload)));
  // Byte for byte what a gRPC caller gets in its binary details.
  EXPECT_EQ(details.SerializeAsString(), error.ToGrpcStatus().error_details());
  google::rpc::ErrorInfo info;
  ASSERT_TRUE(details.details(0).UnpackTo(&info));
  EXPECT_EQ(info.reason(), "VENDOR_TIMEOUT");
}

TEST(ApiErrorTest, LongVendorBodiesAreCutAndFlagged) {
  http::HttpResponse response;
  response.status = 500;
  response.body = std::string(kMaxVendorBodyBytes + 100, 'x');
  ApiError error = ApiError::FromVendorResponse(routes::GetRoute(routes::RouteId::kAssessQuality),
                                                response, absl::Now());
  EXPECT_EQ(error.metadata.at("vendor_body").size(), kMaxVendorBodyBytes);
  EXPECT_EQ(error.metadata.at("vendor_body_truncated"), "true");
  EXPECT_EQ(error.metadata.at("route"), "assess_quality");
}

TEST(ApiErrorTest, InvalidRequestNamesTheSingleField) {
  ApiError error = ApiError::InvalidRequest({{"validity", "must be greater than 0"}});
  EXPECT_EQ(error.code, absl::StatusCode::kInvalidArgument);
  EXPECT_NE(error.message.find("validity"), std::string::npos);
  EXPECT_EQ(error.reason, "INVALID_REQUEST");
}

}  // namespace
}  // namespace inspection::errors
