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

TEST(InMemoryIdempotencyStoreBoundTest, TheOldestFinishedOutcomesGoFirstThenNewKeysWait) {
  absl::Time now = absl::FromUnixSeconds(1700000000);
  // Room for about four entries of ~1.3 KiB (256 bytes of overhead each).
  InMemoryIdempotencyStore store(
      absl::Hours(24), [&] { return now; }, 5200);
  IdempotentOutcome replay;
  auto ignore = [](const IdempotentOutcome&) {};
  const std::string response(1000, 'r');
  for (const char* key : {"a", "b", "c"}) {
    ASSERT_EQ(store.Begin("acct", key, "fp", &replay, ignore), IdempotencyStore::Decision::kLead);
    store.Complete("acct", key, {grpc::Status::OK, response});
    now += absl::Seconds(1);
  }
  EXPECT_LE(store.bytes(), 5200u);
  // A fourth and a fifth key: "a", then "b", the oldest finished outcomes, are forgotten.
  ASSERT_EQ(store.Begin("acct", "d", "fp", &replay, ignore), IdempotencyStore::Decision::kLead);
  store.Complete("acct", "d", {grpc::Status::OK, response});
  ASSERT_EQ(store.Begin("acct", "e", "fp", &replay, ignore), IdempotencyStore::Decision::kLead);
  EXPECT_GE(store.evictions(), 1);
  EXPECT_LE(store.bytes(), 5200u);
  EXPECT_EQ(store.Begin("acct", "a", "other", &replay, ignore), IdempotencyStore::Decision::kLead)
      << "the oldest outcome was forgotten";
  EXPECT_EQ(store.Begin("acct", "d", "fp", &replay, ignore), IdempotencyStore::Decision::kReplay);

  // Nothing finished left to forget: a new key is UNAVAILABLE, nothing is claimed.
  InMemoryIdempotencyStore tiny(
      absl::Hours(24), [&] { return now; }, 600);
  ASSERT_EQ(tiny.Begin("acct", "x", "fp", &replay, ignore), IdempotencyStore::Decision::kLead);
  ASSERT_EQ(tiny.Begin("acct", "y", "fp", &replay, ignore), IdempotencyStore::Decision::kLead);
  EXPECT_EQ(tiny.Begin("acct", "z", "fp", &replay, ignore),
            IdempotencyStore::Decision::kUnavailable);
  EXPECT_EQ(replay.status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(tiny.size(), 2u);
}

TEST(ValidIdempotencyKeyTest, OneTo255VisibleAsciiCharacters) {
  EXPECT_TRUE(ValidIdempotencyKey("order-1"));
  EXPECT_TRUE(ValidIdempotencyKey(std::string(255, 'k')));
  EXPECT_FALSE(ValidIdempotencyKey(""));
  EXPECT_FALSE(ValidIdempotencyKey(std::string(256, 'k')));
  EXPECT_FALSE(ValidIdempotencyKey("with space"));
  EXPECT_FALSE(ValidIdempotencyKey("tab\t"));
  EXPECT_FALSE(ValidIdempotencyKey("caf\xc3\xa9"));
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
