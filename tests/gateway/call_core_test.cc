// The call core (services::CallEndpoint) on its own, with a scripted pipeline: the one place
// that turns a vendor result into the caller's status, the decoded response, the idempotency
// key's outcome and the observer's record (issue 15).
#include <gtest/gtest.h>

#include <optional>
#include <vector>

#include "gateway/idempotency/idempotency_store.h"
#include "gateway/services/endpoints.h"
#include "gateway/services/unary_call.h"

namespace inspection::services {
namespace {

using resilience::VendorFailure;

// Answers every call with the scripted result, synchronously.
class ScriptedPipeline final : public upstream::VendorCaller {
 public:
  void Call(routes::RouteId route, const vendor::VendorRequest&,
            std::chrono::system_clock::time_point, const upstream::CallOptions& options,
            upstream::VendorCallback done) override {
    routes.push_back(route);
    accounts.push_back(options.account);
    std::move(done)(next);
  }
  upstream::VendorResult next;
  std::vector<routes::RouteId> routes;
  std::vector<std::string> accounts;
};

class Recorder final : public RpcObserver {
 public:
  void OnRpcFinished(const RpcRecord& record) override { records.push_back(record); }
  std::vector<RpcRecord> records;
};

class CallCoreTest : public ::testing::Test {
 protected:
  CallCoreTest() {
    store_ = *pipeline::OpenIdempotencyStore("memory", absl::Hours(1));
    deps_.vendor = &pipeline_;
    deps_.observer = &recorder_;
    deps_.idempotency = store_.get();
  }

  template <class Request, class Response>
  EndpointResult<Response> RunAs(const Endpoint& endpoint, Request request, std::string key = "") {
    std::optional<EndpointResult<Response>> out;
    RpcRecord record;
    record.origin = "test";
    upstream::CallOptions call;
    call.account = "preprod";
    CallEndpoint<Request, Response>(
        deps_, endpoint, std::make_shared<const Request>(std::move(request)),
        std::chrono::system_clock::now() + std::chrono::seconds(5), call, std::move(key),
        std::move(record), std::chrono::steady_clock::now(),
        [&out](EndpointResult<Response> result) { out = std::move(result); });
    EXPECT_TRUE(out.has_value()) << "done runs once the pipeline answered";
    return std::move(*out);
  }
  // CreateToken through the call core, with a scripted encoding and `decoded` as the outcome
  // of decoding the vendor's answer.
  EndpointResult<v1::CreateTokenResponse> RunCreate(absl::Status decoded, std::string key) {
    Endpoint create;
    create.route = routes::RouteId::kCreateToken;
    create.response_prototype = &v1::CreateTokenResponse::default_instance();
    create.encode = [](const google::protobuf::Message&) { return vendor::VendorRequest{}; };
    create.decode = [decoded](const nlohmann::json&, const google::protobuf::Message&,
                              google::protobuf::Message*,
                              vendor::DecodeReport*) { return decoded; };
    return RunAs<v1::CreateTokenRequest, v1::CreateTokenResponse>(create, v1::CreateTokenRequest(),
                                                                  std::move(key));
  }
  // GetTokenStatus as the gateway serves it (the generic mapping and its override).
  EndpointResult<v1::GetTokenStatusResponse> RunGetTokenStatus(v1::GetTokenStatusRequest request) {
    const Endpoints endpoints{EndpointOptions()};
    return RunAs<v1::GetTokenStatusRequest, v1::GetTokenStatusResponse>(
        endpoints.Get(routes::RouteId::kGetTokenStatus), std::move(request));
  }

  pipeline::IdempotencyStore::Decision Begin(const std::string& key) {
    pipeline::IdempotentOutcome replay;
    return store_->Begin("preprod", key, "fingerprint", &replay, [](const auto&) {});
  }

  ScriptedPipeline pipeline_;
  Recorder recorder_;
  std::unique_ptr<pipeline::IdempotencyStore> store_;
  ServiceDeps deps_;
};

upstream::VendorResult Answer(int status, nlohmann::json body) {
  upstream::VendorResult result;
  result.response.status = status;
  result.response.body = body.dump();
  result.body = std::make_shared<const nlohmann::json>(std::move(body));
  return result;
}

TEST_F(CallCoreTest, ASuccessIsDecodedAndRecorded) {
  pipeline_.next = Answer(200, {{"status", 2}, {"uid", "u-1"}});
  v1::GetTokenStatusRequest request;
  request.set_uid("u-1");
  auto out = RunGetTokenStatus(request);
  EXPECT_TRUE(out.ok()) << out.ToGrpcStatus().error_message();
  EXPECT_FALSE(out.error.has_value());
  EXPECT_EQ(pipeline_.routes, std::vector<routes::RouteId>{routes::RouteId::kGetTokenStatus});
  EXPECT_EQ(pipeline_.accounts, std::vector<std::string>{"preprod"});
  ASSERT_EQ(recorder_.records.size(), 1u);
  const RpcRecord& record = recorder_.records[0];
  EXPECT_EQ(record.origin, "test");
  EXPECT_EQ(record.route, &routes::GetRoute(routes::RouteId::kGetTokenStatus));
  EXPECT_EQ(record.code, grpc::StatusCode::OK);
  EXPECT_EQ(record.http_status, 200);
}

TEST_F(CallCoreTest, AnUnreadableAnswerIsUnexpectedAndForACreationUnknown) {
  // JSON of the wrong shape for a token status: an array.
  pipeline_.next = Answer(200, nlohmann::json::array({1, 2}));
  auto read = RunGetTokenStatus(v1::GetTokenStatusRequest());
  EXPECT_EQ(read.ToGrpcStatus().error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(read.error->reason, errors::kReasonVendorUnexpectedResponse);
  EXPECT_EQ(recorder_.records.back().reason, errors::kReasonVendorUnexpectedResponse);

  // The same for a creation: the token may exist, so the outcome is unknown, and the key is
  // bound to that answer (a repeat replays it rather than creating a second token).
  ASSERT_EQ(Begin("key-1"), pipeline::IdempotencyStore::Decision::kLead);
  auto created = RunCreate(absl::InvalidArgumentError("not a token"), "key-1");
  EXPECT_EQ(created.ToGrpcStatus().error_code(), grpc::StatusCode::UNKNOWN);
  EXPECT_EQ(created.error->reason, errors::kReasonOutcomeUnknown);
  EXPECT_EQ(Begin("key-1"), pipeline::IdempotencyStore::Decision::kReplay);
}

TEST_F(CallCoreTest, AKeyIsReleasedOnlyWhenNothingReachedTheVendor) {
  auto fail = [](VendorFailure::Kind kind, bool sent) {
    upstream::VendorResult result;
    errors::ApiError error;
    error.code = absl::StatusCode::kUnavailable;
    error.reason = "ANY";
    error.failure = {kind, 0, sent};
    result.error = std::move(error);
    return result;
  };
  // Refused before sending (an open circuit): the key is free again.
  pipeline_.next = fail(VendorFailure::Kind::kNotCalled, false);
  ASSERT_EQ(Begin("key-2"), pipeline::IdempotencyStore::Decision::kLead);
  EXPECT_EQ(RunCreate(absl::OkStatus(), "key-2").ToGrpcStatus().error_code(),
            grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(Begin("key-2"), pipeline::IdempotencyStore::Decision::kLead);
  // Lost after sending: bound to the unknown outcome.
  pipeline_.next = fail(VendorFailure::Kind::kConnectionLost, true);
  EXPECT_EQ(RunCreate(absl::OkStatus(), "key-2").ToGrpcStatus().error_code(),
            grpc::StatusCode::UNKNOWN);
  EXPECT_EQ(Begin("key-2"), pipeline::IdempotencyStore::Decision::kReplay);
}

}  // namespace
}  // namespace inspection::services
