// The IdempotencyStore contract; instantiated for each backend in its own test file
// (idempotency_store_test.cc: memory, redis_idempotency_store_test.cc: redis).

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tests/idempotency/idempotency_conformance.h"

namespace inspection::pipeline::testing {
namespace {

using Decision = IdempotencyStore::Decision;

TEST_P(IdempotencyConformanceTest, FirstUseLeadsThenRepeatsReplayTheOutcome) {
  auto store = Create();
  EXPECT_EQ(store->Begin("acct", "k1", "fp", &replay_, Ignore), Decision::kLead);
  ASSERT_TRUE(Save(*store, "acct", "k1", {grpc::Status::OK, "response-bytes"}));
  EXPECT_EQ(store->Begin("acct", "k1", "fp", &replay_, Ignore), Decision::kReplay);
  EXPECT_TRUE(replay_.status.ok());
  EXPECT_EQ(replay_.response, "response-bytes");
}

TEST_P(IdempotencyConformanceTest, ErrorOutcomesReplayWithMessageAndDetails) {
  auto store = Create();
  ASSERT_EQ(store->Begin("acct", "k", "fp", &replay_, Ignore), Decision::kLead);
  const std::string details("\x08\x09\x00\xff details", 13);  // binary, with a NUL
  ASSERT_TRUE(
      Save(*store, "acct", "k",
           {grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "vehicle locked", details), ""}));
  ASSERT_EQ(store->Begin("acct", "k", "fp", &replay_, Ignore), Decision::kReplay);
  EXPECT_EQ(replay_.status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(replay_.status.error_message(), "vehicle locked");
  EXPECT_EQ(replay_.status.error_details(), details);
  EXPECT_EQ(replay_.response, "");
}

TEST_P(IdempotencyConformanceTest, ResponsesAreBinarySafe) {
  auto store = Create();
  const std::string response("\x0a\x03\x00\x01\x02\xff", 6);
  ASSERT_EQ(store->Begin("acct", "k", "fp", &replay_, Ignore), Decision::kLead);
  ASSERT_TRUE(Save(*store, "acct", "k", {grpc::Status::OK, response}));
  ASSERT_EQ(store->Begin("acct", "k", "fp", &replay_, Ignore), Decision::kReplay);
  EXPECT_EQ(replay_.response, response);
}

TEST_P(IdempotencyConformanceTest, SameKeyOtherParametersIsAMismatch) {
  auto store = Create();
  EXPECT_EQ(store->Begin("acct", "k1", "fp-a", &replay_, Ignore), Decision::kLead);
  EXPECT_EQ(store->Begin("acct", "k1", "fp-b", &replay_, Ignore), Decision::kMismatch);
  ASSERT_TRUE(Save(*store, "acct", "k1", {grpc::Status::OK, "r"}));
  EXPECT_EQ(store->Begin("acct", "k1", "fp-b", &replay_, Ignore), Decision::kMismatch);
  EXPECT_EQ(store->Begin("acct", "k1", "fp-a", &replay_, Ignore), Decision::kReplay);
}

TEST_P(IdempotencyConformanceTest, KeysAreScopedPerAccount) {
  auto store = Create();
  EXPECT_EQ(store->Begin("a", "k", "fp", &replay_, Ignore), Decision::kLead);
  EXPECT_EQ(store->Begin("b", "k", "other", &replay_, Ignore), Decision::kLead);
  EXPECT_EQ(store->Begin("", "k", "third", &replay_, Ignore), Decision::kLead);
  ASSERT_TRUE(Save(*store, "a", "k", {grpc::Status::OK, "from-a"}));
  ASSERT_TRUE(Save(*store, "b", "k", {grpc::Status::OK, "from-b"}));
  ASSERT_EQ(store->Begin("b", "k", "other", &replay_, Ignore), Decision::kReplay);
  EXPECT_EQ(replay_.response, "from-b");
}

TEST_P(IdempotencyConformanceTest, AccountAndKeyDoNotRunTogether) {
  auto store = Create();
  EXPECT_EQ(store->Begin("ab", "c", "fp-1", &replay_, Ignore), Decision::kLead);
  EXPECT_EQ(store->Begin("a", "bc", "fp-2", &replay_, Ignore), Decision::kLead);
}

TEST_P(IdempotencyConformanceTest, ConcurrentDuplicatesWaitForTheFirstOutcome) {
  auto store = Create();
  ASSERT_EQ(store->Begin("acct", "k", "fp", &replay_, Ignore), Decision::kLead);
  OutcomeLatch latches[3];
  for (OutcomeLatch& latch : latches) {
    EXPECT_EQ(store->Begin("acct", "k", "fp", &replay_, latch.Callback()), Decision::kWait);
  }
  for (OutcomeLatch& latch : latches) EXPECT_EQ(latch.calls(), 0);
  ASSERT_TRUE(Save(*store, "acct", "k", {grpc::Status::OK, "first"}));
  // Waiters in the process that leads are completed by the store itself once the outcome
  // is saved (before `saved`).
  for (OutcomeLatch& latch : latches) {
    ASSERT_TRUE(latch.Now().has_value());
    EXPECT_EQ(latch.Now()->response, "first");
    EXPECT_EQ(latch.calls(), 1);
  }
}

TEST_P(IdempotencyConformanceTest, ARepeatBeforeTheOutcomeIsSavedWaitsForIt) {
  // The leader answers only once its outcome is saved (`saved`), and a repeat that comes
  // in between gets the same outcome, never a lead of its own.
  auto store = Create();
  ASSERT_EQ(store->Begin("acct", "k", "fp", &replay_, Ignore), Decision::kLead);
  absl::Mutex mu;
  int saved = 0;
  store->Complete("acct", "k", {grpc::Status::OK, "first"}, [&] {
    absl::MutexLock lock(&mu);
    ++saved;
  });
  OutcomeLatch repeat;
  const Decision decision = store->Begin("acct", "k", "fp", &replay_, repeat.Callback());
  ASSERT_TRUE(decision == Decision::kWait || decision == Decision::kReplay);
  if (decision == Decision::kReplay) {
    EXPECT_EQ(replay_.response, "first");
  } else {
    std::optional<IdempotentOutcome> outcome = repeat.Wait(absl::Seconds(20));
    ASSERT_TRUE(outcome.has_value());
    EXPECT_EQ(outcome->response, "first");
  }
  absl::MutexLock lock(&mu);
  EXPECT_TRUE(mu.AwaitWithTimeout(absl::Condition(
                                      +[](int* n) { return *n > 0; }, &saved),
                                  absl::Seconds(20)));
  EXPECT_EQ(saved, 1);
}

TEST_P(IdempotencyConformanceTest, ManyThreadsElectExactlyOneLeader) {
  auto store = Create();
  constexpr int kThreads = 8;
  std::atomic<int> leads{0};
  std::atomic<int> waits{0};
  std::atomic<int> leader{-1};
  OutcomeLatch latches[kThreads];
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      IdempotentOutcome replay;
      const Decision decision = store->Begin("acct", "k", "fp", &replay, latches[i].Callback());
      if (decision == Decision::kLead) {
        ++leads;
        leader = i;
      }
      if (decision == Decision::kWait) ++waits;
    });
  }
  for (std::thread& thread : threads) thread.join();
  ASSERT_EQ(leads.load(), 1);
  EXPECT_EQ(waits.load(), kThreads - 1);
  ASSERT_TRUE(Save(*store, "acct", "k", {grpc::Status::OK, "only"}));
  for (int i = 0; i < kThreads; ++i) {
    if (i == leader) continue;
    std::optional<IdempotentOutcome> outcome = latches[i].Wait(absl::Seconds(20));
    ASSERT_TRUE(outcome.has_value()) << "waiter " << i;
    EXPECT_EQ(outcome->response, "only");
    EXPECT_EQ(latches[i].calls(), 1);
  }
  EXPECT_EQ(latches[leader].calls(), 0);  // the leader's callback is never called
}

TEST_P(IdempotencyConformanceTest, OutcomesExpireAfterTheTtl) {
  auto store = Create(GetParam()->ShortTtl());
  ASSERT_EQ(store->Begin("acct", "k", "fp", &replay_, Ignore), Decision::kLead);
  ASSERT_TRUE(Save(*store, "acct", "k", {grpc::Status::OK, "r"}));
  EXPECT_EQ(store->Begin("acct", "k", "fp", &replay_, Ignore), Decision::kReplay);
  // Until the TTL has passed another fingerprint is a mismatch; then the key is free.
  EXPECT_TRUE(GetParam()->PassTtl([&] {
    IdempotentOutcome ignored;
    return store->Begin("acct", "k", "other", &ignored, Ignore) == Decision::kLead;
  }));
}

TEST_P(IdempotencyConformanceTest, AbandonFreesTheKeyAndTellsTheWaiters) {
  auto store = Create();
  ASSERT_EQ(store->Begin("acct", "k", "fp", &replay_, Ignore), Decision::kLead);
  OutcomeLatch latch;
  ASSERT_EQ(store->Begin("acct", "k", "fp", &replay_, latch.Callback()), Decision::kWait);
  store->Abandon("acct", "k", {grpc::Status(grpc::StatusCode::UNAVAILABLE, "down"), ""});
  ASSERT_TRUE(latch.Now().has_value());
  EXPECT_EQ(latch.Now()->status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(latch.Now()->status.error_message(), "down");
  EXPECT_EQ(store->Begin("acct", "k", "other-fp", &replay_, Ignore), Decision::kLead);
}

TEST_P(IdempotencyConformanceTest, CompleteOrAbandonOfAKeyNotLedIsANoOp) {
  auto store = Create();
  // `saved` is still called: nothing to save, nothing to wait for.
  ASSERT_TRUE(Save(*store, "acct", "never-begun", {grpc::Status::OK, "r"}));
  store->Abandon("acct", "never-begun-either", {grpc::Status::OK, ""});
  EXPECT_EQ(store->Begin("acct", "never-begun", "fp", &replay_, Ignore), Decision::kLead);
  EXPECT_EQ(store->Begin("acct", "never-begun-either", "fp", &replay_, Ignore), Decision::kLead);
}

}  // namespace
}  // namespace inspection::pipeline::testing
