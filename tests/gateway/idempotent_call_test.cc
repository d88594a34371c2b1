// services/idempotent_call.h: every answer of the idempotency store becomes one way to end a
// keyed call, the same for the generic unary handler and StreamDamageResults.
#include "gateway/services/idempotent_call.h"

#include <optional>
#include <string>
#include <vector>

#include "gateway/idempotency/idempotency_store.h"
#include "gmock/gmock.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "gtest/gtest.h"
#include "inspection/v1/token.pb.h"

namespace inspection::services {
namespace {

using ::testing::HasSubstr;

// A store that cannot be reached (Redis down).
class UnreachableStore final : public pipeline::IdempotencyStore {
 public:
  Decision Begin(const std::string&, const std::string&, const std::string&,
                 pipeline::IdempotentOutcome* replay,
                 absl::AnyInvocable<void(const pipeline::IdempotentOutcome&)>) override {
    replay->status = grpc::Status(grpc::StatusCode::UNAVAILABLE, "idempotency store down");
    return Decision::kUnavailable;
  }
  void Complete(const std::string&, const std::string&, pipeline::IdempotentOutcome,
                OnSaved) override {}
  void Abandon(const std::string&, const std::string&,
               const pipeline::IdempotentOutcome&) override {}
};

// A store where every key is in flight elsewhere, and whose claims end unfinished (a
// replica that died mid-call, as the Redis store reports it).
class ClaimEndingStore final : public pipeline::IdempotencyStore {
 public:
  Decision Begin(const std::string&, const std::string&, const std::string&,
                 pipeline::IdempotentOutcome*,
                 absl::AnyInvocable<void(const pipeline::IdempotentOutcome&)> on_ready) override {
    waiter_ = std::move(on_ready);
    return Decision::kWait;
  }
  void EndClaim() {
    waiter_({grpc::Status(grpc::StatusCode::ABORTED, "the first call never finished"), "",
             /*from_store=*/true});
  }
  void Complete(const std::string&, const std::string&, pipeline::IdempotentOutcome,
                OnSaved) override {}
  void Abandon(const std::string&, const std::string&,
               const pipeline::IdempotentOutcome&) override {}

 private:
  absl::AnyInvocable<void(const pipeline::IdempotentOutcome&)> waiter_;
};

// What BeginKeyedCall did: called `proceed` (the call goes to the vendor) or not.
enum class KeyedStart { kProceed, kFinished };

class IdempotentCallTest : public ::testing::Test {
 protected:
  IdempotentCallTest() {
    deps_.idempotency = &store_;
    request_.set_uid("tok-1");
  }

  // BeginKeyedCall with `raw_key`; what it decided, the key and what `finish` got. The
  // in-memory store decides inline, so proceed or finish (unless it waits) ran on return.
  KeyedStart Begin(const std::string& raw_key, const google::protobuf::Message& request,
                   const std::string& caller = "") {
    bool proceeded = false;
    key_.clear();
    BeginKeyedCall(
        deps_, "", caller, raw_key, request,
        std::chrono::system_clock::now() + std::chrono::seconds(10),
        [this, &proceeded](std::string key) {
          proceeded = true;
          key_ = std::move(key);
        },
        [this](KeyedFinish finished) { finished_.push_back(finished); });
    return proceeded ? KeyedStart::kProceed : KeyedStart::kFinished;
  }

  pipeline::InMemoryIdempotencyStore store_;
  ServiceDeps deps_;
  v1::GetTokenStatusRequest request_;
  std::string key_;
  std::vector<KeyedFinish> finished_;
};

// A vendor error as the call core hands it to CompleteKeyedCall.
errors::ApiError Error(absl::StatusCode code, std::string message) {
  errors::ApiError error;
  error.code = code;
  error.message = std::move(message);
  error.reason = std::string(errors::kReasonVendorHttpError);
  return error;
}

TEST_F(IdempotentCallTest, WithoutAKeyOrAStoreTheCallProceedsUnkeyed) {
  EXPECT_EQ(Begin("", request_), KeyedStart::kProceed);
  EXPECT_TRUE(key_.empty());
  deps_.idempotency = nullptr;
  EXPECT_EQ(Begin("k-1", request_), KeyedStart::kProceed);
  EXPECT_TRUE(key_.empty());
  EXPECT_TRUE(finished_.empty());
}

TEST_F(IdempotentCallTest, AnInvalidKeyIsRefusedWithAFieldViolation) {
  EXPECT_EQ(Begin(std::string(300, 'k'), request_), KeyedStart::kFinished);
  ASSERT_EQ(finished_.size(), 1u);
  ASSERT_TRUE(finished_[0].refused.has_value());
  EXPECT_EQ(finished_[0].refused->code, absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(finished_[0].refused->ToGrpcStatus().error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(IdempotentCallTest, TheLeaderProceedsAndARepeatReplaysItsOutcome) {
  EXPECT_EQ(Begin("k-1", request_, "spiffe://corp/ns/a"), KeyedStart::kProceed);
  const std::string leader_key = key_;
  EXPECT_THAT(leader_key, HasSubstr(":k-1"));  // scoped by the caller's identity
  EXPECT_NE(leader_key, "k-1");
  v1::GetTokenStatusResponse response;
  response.set_web_api_version("v2");
  CompleteKeyedCall(deps_, "", leader_key, std::nullopt, response,
                    /*vendor_not_reached=*/false);

  EXPECT_EQ(Begin("k-1", request_, "spiffe://corp/ns/a"), KeyedStart::kFinished);
  ASSERT_EQ(finished_.size(), 1u);
  EXPECT_FALSE(finished_[0].refused.has_value());
  EXPECT_TRUE(finished_[0].replayed);
  EXPECT_TRUE(finished_[0].status.ok());
  v1::GetTokenStatusResponse replayed;
  ASSERT_TRUE(replayed.ParseFromString(finished_[0].response));
  EXPECT_EQ(replayed.web_api_version(), "v2");

  // The same key from another caller is another operation.
  EXPECT_EQ(Begin("k-1", request_, "spiffe://corp/ns/b"), KeyedStart::kProceed);
  EXPECT_NE(key_, leader_key);
}

TEST_F(IdempotentCallTest, TheSameKeyWithOtherParametersIsRefused) {
  ASSERT_EQ(Begin("k-2", request_), KeyedStart::kProceed);
  CompleteKeyedCall(deps_, "", key_, std::nullopt, v1::GetTokenStatusResponse(), false);
  v1::GetTokenStatusRequest other;
  other.set_uid("tok-2");
  EXPECT_EQ(Begin("k-2", other), KeyedStart::kFinished);
  ASSERT_EQ(finished_.size(), 1u);
  ASSERT_TRUE(finished_[0].refused.has_value());
  ASSERT_EQ(finished_[0].refused->violations.size(), 1u);
  EXPECT_EQ(finished_[0].refused->violations[0].field, "idempotency_key");
}

TEST_F(IdempotentCallTest, AWaiterGetsTheLeadersOutcomeAndAnAbandonedKeyIsFreeAgain) {
  ASSERT_EQ(Begin("k-3", request_), KeyedStart::kProceed);
  const std::string leader = key_;
  EXPECT_EQ(Begin("k-3", request_), KeyedStart::kFinished);  // waits
  EXPECT_TRUE(finished_.empty());
  // The leader never reached the vendor: the waiter shares its failure, and the key is free
  // again, so that a retry calls the vendor.
  CompleteKeyedCall(deps_, "", leader, Error(absl::StatusCode::kUnavailable, "down"),
                    v1::GetTokenStatusResponse(), /*vendor_not_reached=*/true);
  ASSERT_EQ(finished_.size(), 1u);
  EXPECT_EQ(finished_[0].status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_TRUE(finished_[0].response.empty());
  EXPECT_EQ(Begin("k-3", request_), KeyedStart::kProceed);

  // A leader whose call reached the vendor: its failure is the outcome every repeat gets.
  const std::string second = key_;
  EXPECT_EQ(Begin("k-3", request_), KeyedStart::kFinished);
  CompleteKeyedCall(deps_, "", second, Error(absl::StatusCode::kNotFound, "no token"),
                    v1::GetTokenStatusResponse(), /*vendor_not_reached=*/false);
  ASSERT_EQ(finished_.size(), 2u);
  EXPECT_TRUE(finished_[1].replayed);
  EXPECT_EQ(finished_[1].status.error_code(), grpc::StatusCode::NOT_FOUND);
  // As the first caller got it: the details too.
  google::rpc::Status details;
  ASSERT_TRUE(details.ParseFromString(finished_[1].status.error_details()));
  google::rpc::ErrorInfo info;
  ASSERT_EQ(details.details_size(), 1);
  ASSERT_TRUE(details.details(0).UnpackTo(&info));
  EXPECT_EQ(info.reason(), errors::kReasonVendorHttpError);
  EXPECT_TRUE(finished_[1].response.empty());
}

TEST_F(IdempotentCallTest, AnUnreachableStoreAnswersUnavailableAndIsNoReplay) {
  UnreachableStore down;
  deps_.idempotency = &down;
  EXPECT_EQ(Begin("k-4", request_), KeyedStart::kFinished);
  ASSERT_EQ(finished_.size(), 1u);
  EXPECT_FALSE(finished_[0].refused.has_value());
  EXPECT_FALSE(finished_[0].replayed);
  EXPECT_EQ(finished_[0].status.error_code(), grpc::StatusCode::UNAVAILABLE);
}

TEST_F(IdempotentCallTest, AWaiterWhoseFirstCallNeverFinishedIsAbortedAndNoReplay) {
  ClaimEndingStore store;
  deps_.idempotency = &store;
  EXPECT_EQ(Begin("k-5", request_), KeyedStart::kFinished);
  EXPECT_TRUE(finished_.empty());
  store.EndClaim();
  ASSERT_EQ(finished_.size(), 1u);
  EXPECT_FALSE(finished_[0].replayed);
  EXPECT_EQ(finished_[0].status.error_code(), grpc::StatusCode::ABORTED);
}

}  // namespace
}  // namespace inspection::services
