#include "gateway/idempotency/idempotency_store.h"

#include <gtest/gtest.h>

namespace inspection::pipeline {
namespace {

class IdempotencyStoreTest : public ::testing::Test {
 protected:
  absl::Time now_ = absl::FromUnixSeconds(1700000000);
  InMemoryIdempotencyStore store_{absl::Hours(24), [this] { return now_; }};
  IdempotentOutcome replay_;
  static void Ignore(const IdempotentOutcome&) {}
};

TEST_F(IdempotencyStoreTest, FirstUseLeadsThenRepeatsReplayTheOutcome) {
  EXPECT_EQ(store_.Begin("acct", "k1", "fp", &replay_, Ignore), IdempotencyStore::Decision::kLead);
  store_.Complete("acct", "k1", {grpc::Status::OK, "response-bytes"});
  EXPECT_EQ(store_.Begin("acct", "k1", "fp", &replay_, Ignore),
            IdempotencyStore::Decision::kReplay);
  EXPECT_TRUE(replay_.status.ok());
  EXPECT_EQ(replay_.response, "response-bytes");
}

TEST_F(IdempotencyStoreTest, SameKeyOtherParametersIsAMismatch) {
  store_.Begin("acct", "k1", "fp-a", &replay_, Ignore);
  EXPECT_EQ(store_.Begin("acct", "k1", "fp-b", &replay_, Ignore),
            IdempotencyStore::Decision::kMismatch);
  store_.Complete("acct", "k1", {grpc::Status::OK, "r"});
  EXPECT_EQ(store_.Begin("acct", "k1", "fp-b", &replay_, Ignore),
            IdempotencyStore::Decision::kMismatch);
}

TEST_F(IdempotencyStoreTest, KeysAreScopedPerAccount) {
  EXPECT_EQ(store_.Begin("a", "k", "fp", &replay_, Ignore), IdempotencyStore::Decision::kLead);
  EXPECT_EQ(store_.Begin("b", "k", "other", &replay_, Ignore), IdempotencyStore::Decision::kLead);
}

TEST_F(IdempotencyStoreTest, ConcurrentDuplicatesWaitForTheFirstOutcome) {
  store_.Begin("acct", "k", "fp", &replay_, Ignore);
  std::vector<std::string> got;
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(store_.Begin("acct", "k", "fp", &replay_,
                           [&got](const IdempotentOutcome& o) { got.push_back(o.response); }),
              IdempotencyStore::Decision::kWait);
  }
  EXPECT_TRUE(got.empty());
  store_.Complete("acct", "k", {grpc::Status::OK, "first"});
  EXPECT_EQ(got, (std::vector<std::string>{"first", "first", "first"}));
}

TEST_F(IdempotencyStoreTest, OutcomesExpireAfterTheTtl) {
  store_.Begin("acct", "k", "fp", &replay_, Ignore);
  store_.Complete("acct", "k", {grpc::Status::OK, "r"});
  now_ += absl::Hours(24) - absl::Seconds(1);
  EXPECT_EQ(store_.Begin("acct", "k", "fp", &replay_, Ignore), IdempotencyStore::Decision::kReplay);
  now_ += absl::Seconds(1);
  EXPECT_EQ(store_.Begin("acct", "k", "other", &replay_, Ignore),
            IdempotencyStore::Decision::kLead);
}

TEST_F(IdempotencyStoreTest, AbandonFreesTheKeyAndTellsTheWaiters) {
  store_.Begin("acct", "k", "fp", &replay_, Ignore);
  grpc::StatusCode seen = grpc::StatusCode::OK;
  store_.Begin("acct", "k", "fp", &replay_,
               [&seen](const IdempotentOutcome& o) { seen = o.status.error_code(); });
  store_.Abandon("acct", "k", {grpc::Status(grpc::StatusCode::UNAVAILABLE, "down"), ""});
  EXPECT_EQ(seen, grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(store_.size(), 0u);
  EXPECT_EQ(store_.Begin("acct", "k", "fp", &replay_, Ignore), IdempotencyStore::Decision::kLead);
}

}  // namespace
}  // namespace inspection::pipeline
