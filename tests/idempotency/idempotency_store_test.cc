#include "gateway/idempotency/idempotency_store.h"

#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "tests/idempotency/idempotency_conformance.h"

namespace inspection::pipeline {
namespace {

using ::inspection::pipeline::testing::BackendName;
using ::inspection::pipeline::testing::IdempotencyConformanceTest;
using ::inspection::pipeline::testing::IdempotencyStoreFactory;

// In-memory stores on a fake clock that PassTtl() moves.
class MemoryFactory : public IdempotencyStoreFactory {
 public:
  std::unique_ptr<IdempotencyStore> Create(absl::Duration ttl) override {
    ttl_ = ttl;
    return std::make_unique<InMemoryIdempotencyStore>(ttl, [this] { return now_; });
  }
  absl::Duration ShortTtl() override { return absl::Hours(24); }
  bool PassTtl(const std::function<bool()>& done) override {
    now_ += ttl_;
    return done();
  }

 private:
  absl::Time now_ = absl::FromUnixSeconds(1700000000);
  absl::Duration ttl_;
};

MemoryFactory memory_factory;

INSTANTIATE_TEST_SUITE_P(Memory, IdempotencyConformanceTest, ::testing::Values(&memory_factory),
                         BackendName("memory"));

class InMemoryIdempotencyStoreTest : public ::testing::Test {
 protected:
  absl::Time now_ = absl::FromUnixSeconds(1700000000);
  InMemoryIdempotencyStore store_{absl::Hours(24), [this] { return now_; }};
  IdempotentOutcome replay_;
  static void Ignore(const IdempotentOutcome&) {}
};

TEST_F(InMemoryIdempotencyStoreTest, OutcomesAreKeptForExactlyTheTtl) {
  store_.Begin("acct", "k", "fp", &replay_, Ignore);
  store_.Complete("acct", "k", {grpc::Status::OK, "r"});
  now_ += absl::Hours(24) - absl::Seconds(1);
  EXPECT_EQ(store_.Begin("acct", "k", "fp", &replay_, Ignore), IdempotencyStore::Decision::kReplay);
  now_ += absl::Seconds(1);
  EXPECT_EQ(store_.Begin("acct", "k", "other", &replay_, Ignore),
            IdempotencyStore::Decision::kLead);
}

TEST_F(InMemoryIdempotencyStoreTest, AbandonForgetsTheEntry) {
  store_.Begin("acct", "k", "fp", &replay_, Ignore);
  EXPECT_EQ(store_.size(), 1u);
  store_.Abandon("acct", "k", {grpc::Status(grpc::StatusCode::UNAVAILABLE, "down"), ""});
  EXPECT_EQ(store_.size(), 0u);
}

TEST(OpenIdempotencyStoreTest, MemoryIsTheInMemoryStore) {
  auto store = OpenIdempotencyStore("memory", absl::Hours(1));
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_NE(dynamic_cast<InMemoryIdempotencyStore*>(store->get()), nullptr);
}

TEST(OpenIdempotencyStoreTest, AnythingElseIsInvalidWithoutEchoingIt) {
  for (const std::string url :
       {"", "Memory", "sqlite:///tmp/x", "http://:hunter2@host:6379", "redis:/host"}) {
    auto store = OpenIdempotencyStore(url, absl::Hours(1));
    ASSERT_FALSE(store.ok()) << url;
    EXPECT_EQ(store.status().code(), absl::StatusCode::kInvalidArgument) << url;
    EXPECT_NE(store.status().message().find("memory"), std::string::npos) << store.status();
    EXPECT_EQ(store.status().message().find("hunter2"), std::string::npos) << store.status();
  }
}

TEST(OpenIdempotencyStoreTest, TtlMustBePositive) {
  auto store = OpenIdempotencyStore("memory", absl::ZeroDuration());
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace inspection::pipeline
