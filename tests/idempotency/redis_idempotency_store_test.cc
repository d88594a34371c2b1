#include "gateway/idempotency/redis_idempotency_store.h"

#include <hiredis/hiredis.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "tests/idempotency/idempotency_conformance.h"
#include "tests/support/loopback_listener.h"
#include "tests/support/redis_server.h"
#include "tests/support/shared_redis_server.h"
#include "tests/support/wait.h"

namespace inspection::pipeline {
namespace {

using ::inspection::pipeline::testing::BackendName;
using ::inspection::pipeline::testing::IdempotencyConformanceTest;
using ::inspection::pipeline::testing::IdempotencyStoreFactory;
using ::inspection::pipeline::testing::OutcomeLatch;
using ::inspection::testing::RedisServer;
using ::inspection::testing::shared_redis_server;
using ::inspection::testing::UnusedClosedPort;
using ::inspection::testing::WaitUntil;
using Clock = std::chrono::steady_clock;
using Decision = IdempotencyStore::Decision;

// Generous bounds: far above normal latencies, far below the hangs they guard against.
constexpr std::chrono::seconds kPrompt{10};
constexpr absl::Duration kOutcomeDeadline = absl::Seconds(20);

void Ignore(const IdempotentOutcome&) {}

// A key prefix no other test in this process uses.
std::string FreshPrefix() {
  static std::atomic<int> counter{0};
  return "test" + std::to_string(++counter) + ":";
}

std::unique_ptr<RedisIdempotencyStore> OpenOrFail(const std::string& url,
                                                  RedisIdempotencyOptions options) {
  absl::StatusOr<std::unique_ptr<RedisIdempotencyStore>> store =
      RedisIdempotencyStore::Open(url, std::move(options));
  if (!store.ok()) {
    ADD_FAILURE() << "open: " << store.status();
    return nullptr;
  }
  return *std::move(store);
}

// Options with a prefix of their own (the stores of one test share it: replicas).
RedisIdempotencyOptions FreshOptions() {
  RedisIdempotencyOptions options;
  options.prefix = FreshPrefix();
  return options;
}

// Another replica's options: the same keys.
RedisIdempotencyOptions FreshOptionsWithPrefix(const std::string& prefix) {
  RedisIdempotencyOptions options;
  options.prefix = prefix;
  return options;
}

class RedisFactory : public IdempotencyStoreFactory {
 public:
  std::unique_ptr<IdempotencyStore> Create(absl::Duration ttl) override {
    RedisIdempotencyOptions options = FreshOptions();
    options.ttl = ttl;
    return OpenOrFail(shared_redis_server->Url(), options);
  }
  absl::Duration ShortTtl() override { return absl::Seconds(2); }
  bool PassTtl(const std::function<bool()>& done) override {
    return WaitUntil(done, std::chrono::seconds(30));
  }
};

RedisFactory redis_factory;

INSTANTIATE_TEST_SUITE_P(Redis, IdempotencyConformanceTest, ::testing::Values(&redis_factory),
                         BackendName("redis"));

// A plain hiredis connection to look at what the store keeps.
class RawRedis {
 public:
  explicit RawRedis(int port, int db = 0) {
    context_ = redisConnect("127.0.0.1", port);
    EXPECT_TRUE(context_ != nullptr && context_->err == 0);
    if (db != 0) {
      redisReply* reply = Do({"SELECT", std::to_string(db)});
      if (reply != nullptr) freeReplyObject(reply);
    }
  }
  ~RawRedis() {
    if (context_ != nullptr) redisFree(context_);
  }
  long long Integer(const std::vector<std::string>& args) {
    redisReply* reply = Do(args);
    const long long value =
        reply != nullptr && reply->type == REDIS_REPLY_INTEGER ? reply->integer : -999;
    if (reply != nullptr) freeReplyObject(reply);
    return value;
  }
  std::string String(const std::vector<std::string>& args) {
    redisReply* reply = Do(args);
    std::string value = reply != nullptr && reply->str != nullptr
                            ? std::string(reply->str, reply->len)
                            : std::string();
    if (reply != nullptr) freeReplyObject(reply);
    return value;
  }

 private:
  redisReply* Do(const std::vector<std::string>& args) {
    std::vector<const char*> argv;
    std::vector<size_t> lengths;
    for (const std::string& arg : args) {
      argv.push_back(arg.data());
      lengths.push_back(arg.size());
    }
    auto* reply = static_cast<redisReply*>(
        redisCommandArgv(context_, static_cast<int>(argv.size()), argv.data(), lengths.data()));
    EXPECT_NE(reply, nullptr);
    return reply;
  }
  redisContext* context_ = nullptr;
};

// Collects what the store reports to `on_error`.
class ErrorLog {
 public:
  std::function<void(const absl::Status&)> Hook() {
    return [this](const absl::Status& status) {
      absl::MutexLock lock(&mu_);
      text_ += status.ToString() + "\n";
    };
  }
  std::string text() {
    absl::MutexLock lock(&mu_);
    return text_;
  }

 private:
  absl::Mutex mu_;
  std::string text_ ABSL_GUARDED_BY(mu_);
};

// --- Two stores on one Redis are two gateway replicas.

class RedisReplicasTest : public ::testing::Test {
 protected:
  void SetUp() override {
    options_ = FreshOptions();
    a_ = OpenOrFail(shared_redis_server->Url(), options_);
    b_ = OpenOrFail(shared_redis_server->Url(), options_);
    ASSERT_TRUE(a_ && b_);
  }
  RedisIdempotencyOptions options_;
  std::unique_ptr<RedisIdempotencyStore> a_;
  std::unique_ptr<RedisIdempotencyStore> b_;
  IdempotentOutcome replay_;
};

TEST_F(RedisReplicasTest, LeadInOneReplicaReplayInTheOther) {
  ASSERT_EQ(a_->Begin("acct", "k", "fp", &replay_, Ignore), Decision::kLead);
  a_->Complete("acct", "k", {grpc::Status::OK, "from-a"});
  ASSERT_TRUE(a_->WaitForWrites(kOutcomeDeadline));
  ASSERT_EQ(b_->Begin("acct", "k", "fp", &replay_, Ignore), Decision::kReplay);
  EXPECT_TRUE(replay_.status.ok());
  EXPECT_EQ(replay_.response, "from-a");
}

TEST_F(RedisReplicasTest, MismatchAcrossReplicasWhilePendingAndWhenDone) {
  ASSERT_EQ(a_->Begin("acct", "k", "fp-a", &replay_, Ignore), Decision::kLead);
  EXPECT_EQ(b_->Begin("acct", "k", "fp-b", &replay_, Ignore), Decision::kMismatch);
  a_->Complete("acct", "k", {grpc::Status::OK, "r"});
  EXPECT_EQ(b_->Begin("acct", "k", "fp-b", &replay_, Ignore), Decision::kMismatch);
}

TEST_F(RedisReplicasTest, AccountsAreScopedAcrossReplicas) {
  ASSERT_EQ(a_->Begin("acct-1", "k", "fp", &replay_, Ignore), Decision::kLead);
  EXPECT_EQ(b_->Begin("acct-2", "k", "fp", &replay_, Ignore), Decision::kLead);
  EXPECT_NE(a_->RedisKey("acct-1", "k"), a_->RedisKey("acct-2", "k"));
  EXPECT_NE(a_->RedisKey("ab", "c"), a_->RedisKey("a", "bc"));
}

TEST_F(RedisReplicasTest, AWaiterInOneReplicaIsCompletedByTheOther) {
  ASSERT_EQ(a_->Begin("acct", "k", "fp", &replay_, Ignore), Decision::kLead);
  OutcomeLatch latch;
  ASSERT_EQ(b_->Begin("acct", "k", "fp", &replay_, latch.Callback()), Decision::kWait);
  EXPECT_EQ(b_->remote_waiters(), 1u);
  EXPECT_FALSE(latch.Now().has_value());  // nothing before the leader finishes
  a_->Complete("acct", "k",
               {grpc::Status(grpc::StatusCode::NOT_FOUND, "no such vehicle", "details"), ""});
  std::optional<IdempotentOutcome> outcome = latch.Wait(kOutcomeDeadline);
  ASSERT_TRUE(outcome.has_value());
  EXPECT_EQ(outcome->status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(outcome->status.error_message(), "no such vehicle");
  EXPECT_EQ(outcome->status.error_details(), "details");
  EXPECT_EQ(latch.calls(), 1);
  EXPECT_EQ(b_->remote_waiters(), 0u);
}

TEST_F(RedisReplicasTest, AbandonTellsRemoteWaitersToRetryAndFreesTheKey) {
  ASSERT_EQ(a_->Begin("acct", "k", "fp", &replay_, Ignore), Decision::kLead);
  OutcomeLatch local;
  OutcomeLatch remote;
  ASSERT_EQ(a_->Begin("acct", "k", "fp", &replay_, local.Callback()), Decision::kWait);
  ASSERT_EQ(b_->Begin("acct", "k", "fp", &replay_, remote.Callback()), Decision::kWait);
  a_->Abandon("acct", "k", {grpc::Status(grpc::StatusCode::UNAVAILABLE, "vendor down"), ""});
  // The local waiter gets the leader's outcome at once ...
  ASSERT_TRUE(local.Now().has_value());
  EXPECT_EQ(local.Now()->status.error_message(), "vendor down");
  // ... the remote one sees the key freed: ABORTED, retry.
  std::optional<IdempotentOutcome> outcome = remote.Wait(kOutcomeDeadline);
  ASSERT_TRUE(outcome.has_value());
  EXPECT_EQ(outcome->status.error_code(), grpc::StatusCode::ABORTED);
  EXPECT_NE(outcome->status.error_message().find("retry"), std::string::npos);
  EXPECT_EQ(b_->Begin("acct", "k", "fp", &replay_, Ignore), Decision::kLead);
}

TEST_F(RedisReplicasTest, ConcurrentBeginsAcrossReplicasElectOneLeader) {
  constexpr int kPerReplica = 4;
  constexpr int kCalls = 2 * kPerReplica;
  std::atomic<int> leads{0};
  std::atomic<int> waits{0};
  std::atomic<int> leader{-1};
  OutcomeLatch latches[kCalls];
  RedisIdempotencyStore* stores[kCalls];
  std::vector<std::thread> threads;
  for (int i = 0; i < kCalls; ++i) {
    stores[i] = i % 2 == 0 ? a_.get() : b_.get();
    threads.emplace_back([&, i] {
      IdempotentOutcome replay;
      const Decision decision = stores[i]->Begin("acct", "k", "fp", &replay, latches[i].Callback());
      if (decision == Decision::kLead) {
        ++leads;
        leader = i;
      }
      if (decision == Decision::kWait) ++waits;
    });
  }
  for (std::thread& thread : threads) thread.join();
  ASSERT_EQ(leads.load(), 1);
  EXPECT_EQ(waits.load(), kCalls - 1);
  stores[leader]->Complete("acct", "k", {grpc::Status::OK, "once"});
  for (int i = 0; i < kCalls; ++i) {
    if (i == leader) continue;
    std::optional<IdempotentOutcome> outcome = latches[i].Wait(kOutcomeDeadline);
    ASSERT_TRUE(outcome.has_value()) << "waiter " << i;
    EXPECT_EQ(outcome->response, "once");
    EXPECT_EQ(latches[i].calls(), 1);
  }
  EXPECT_EQ(latches[leader].calls(), 0);
}

TEST(RedisIdempotencyStoreTest, ADeadLeadersClaimExpiresAndItsWaitersAreToldToRetry) {
  RedisIdempotencyOptions options = FreshOptions();
  options.claim_ttl = absl::Milliseconds(600);
  auto waiter_replica = OpenOrFail(shared_redis_server->Url(), options);
  ASSERT_NE(waiter_replica, nullptr);
  RawRedis raw(shared_redis_server->port());
  IdempotentOutcome replay;
  {
    auto dying_replica = OpenOrFail(shared_redis_server->Url(), options);
    ASSERT_NE(dying_replica, nullptr);
    ASSERT_EQ(dying_replica->Begin("acct", "k", "fp", &replay, Ignore), Decision::kLead);
    const long long ttl_ms = raw.Integer({"PTTL", dying_replica->RedisKey("acct", "k")});
    EXPECT_GT(ttl_ms, 0);
    EXPECT_LE(ttl_ms, 600);
    // Destroyed without Complete() or Abandon(): the process died mid-call.
  }
  OutcomeLatch latch;
  ASSERT_EQ(waiter_replica->Begin("acct", "k", "fp", &replay, latch.Callback()), Decision::kWait);
  std::optional<IdempotentOutcome> outcome = latch.Wait(kOutcomeDeadline);
  ASSERT_TRUE(outcome.has_value());
  EXPECT_EQ(outcome->status.error_code(), grpc::StatusCode::ABORTED);
  EXPECT_EQ(outcome->status.error_message(),
            "the first call with this idempotency key did not finish; retry");
  // The retry takes the key over.
  EXPECT_EQ(waiter_replica->Begin("acct", "k", "fp", &replay, Ignore), Decision::kLead);
}

TEST(RedisIdempotencyStoreTest, AnOutcomeFinishedAfterTheClaimExpiredIsStillKept) {
  RedisIdempotencyOptions options = FreshOptions();
  options.claim_ttl = absl::Milliseconds(300);
  auto store = OpenOrFail(shared_redis_server->Url(), options);
  ASSERT_NE(store, nullptr);
  RawRedis raw(shared_redis_server->port());
  IdempotentOutcome replay;
  ASSERT_EQ(store->Begin("acct", "k", "fp", &replay, Ignore), Decision::kLead);
  ASSERT_TRUE(WaitUntil(
      [&] {
        return raw.Integer({"EXISTS", store->RedisKey("acct", "k")}) == 0;
      },
      std::chrono::seconds(20)));
  // The vendor did act: a retry must replay that, not act a second time.
  store->Complete("acct", "k", {grpc::Status::OK, "late"});
  ASSERT_TRUE(store->WaitForWrites(kOutcomeDeadline));
  EXPECT_EQ(raw.String({"HGET", store->RedisKey("acct", "k"), "state"}), "done");
  ASSERT_EQ(store->Begin("acct", "k", "fp", &replay, Ignore), Decision::kReplay);
  EXPECT_EQ(replay.response, "late");
}

TEST(RedisIdempotencyStoreTest, DoneRecordsCarryTheTtlAndExpire) {
  RedisIdempotencyOptions options = FreshOptions();
  options.ttl = absl::Milliseconds(800);
  auto store = OpenOrFail(shared_redis_server->Url(), options);
  ASSERT_NE(store, nullptr);
  RawRedis raw(shared_redis_server->port());
  IdempotentOutcome replay;
  ASSERT_EQ(store->Begin("acct", "k", "fp", &replay, Ignore), Decision::kLead);
  store->Complete("acct", "k", {grpc::Status::OK, "r"});
  ASSERT_TRUE(store->WaitForWrites(kOutcomeDeadline));
  const std::string redis_key = store->RedisKey("acct", "k");
  const long long ttl_ms = raw.Integer({"PTTL", redis_key});
  EXPECT_GT(ttl_ms, 0);
  EXPECT_LE(ttl_ms, 800);
  EXPECT_EQ(raw.String({"HGET", redis_key, "state"}), "done");
  ASSERT_TRUE(WaitUntil(
      [&] {
        return raw.Integer({"EXISTS", redis_key}) == 0;
      },
      std::chrono::seconds(20)));
  EXPECT_EQ(store->Begin("acct", "k", "other", &replay, Ignore), Decision::kLead);
}

TEST(RedisIdempotencyStoreTest, DefaultTtlsAre24HoursAndFiveMinutes) {
  auto store = OpenOrFail(shared_redis_server->Url(), FreshOptions());
  ASSERT_NE(store, nullptr);
  RawRedis raw(shared_redis_server->port());
  IdempotentOutcome replay;
  ASSERT_EQ(store->Begin("acct", "k", "fp", &replay, Ignore), Decision::kLead);
  const std::string redis_key = store->RedisKey("acct", "k");
  EXPECT_EQ(raw.String({"HGET", redis_key, "state"}), "pending");
  EXPECT_GT(raw.Integer({"PTTL", redis_key}), 4 * 60 * 1000);
  EXPECT_LE(raw.Integer({"PTTL", redis_key}), 5 * 60 * 1000);
  store->Complete("acct", "k", {grpc::Status::OK, "r"});
  ASSERT_TRUE(store->WaitForWrites(kOutcomeDeadline));
  EXPECT_GT(raw.Integer({"PTTL", redis_key}), 23 * 3600 * 1000LL);
  EXPECT_LE(raw.Integer({"PTTL", redis_key}), 24 * 3600 * 1000LL);
}

TEST(RedisIdempotencyStoreTest, UrlPrefixAndDbNameWhereKeysLive) {
  const std::string prefix = "custom-" + FreshPrefix();
  auto store = OpenOrFail(shared_redis_server->Url("/3?prefix=" + prefix), FreshOptions());
  ASSERT_NE(store, nullptr);
  IdempotentOutcome replay;
  ASSERT_EQ(store->Begin("acct", "key-1", "fp", &replay, Ignore), Decision::kLead);
  EXPECT_EQ(store->RedisKey("acct", "key-1"), prefix + "idem:4:acctkey-1");
  RawRedis db3(shared_redis_server->port(), 3);
  EXPECT_EQ(db3.Integer({"EXISTS", prefix + "idem:4:acctkey-1"}), 1);
  RawRedis db0(shared_redis_server->port());
  EXPECT_EQ(db0.Integer({"EXISTS", prefix + "idem:4:acctkey-1"}), 0);
}

TEST(RedisIdempotencyStoreTest, OpenIdempotencyStoreOpensRedisWithTheTtl) {
  auto store = OpenIdempotencyStore(shared_redis_server->Url("/0?prefix=" + FreshPrefix()),
                                    absl::Milliseconds(5000));
  ASSERT_TRUE(store.ok()) << store.status();
  auto* redis = dynamic_cast<RedisIdempotencyStore*>(store->get());
  ASSERT_NE(redis, nullptr);
  IdempotentOutcome replay;
  ASSERT_EQ(redis->Begin("a", "k", "fp", &replay, Ignore), Decision::kLead);
  redis->Complete("a", "k", {grpc::Status::OK, "r"});
  ASSERT_TRUE(redis->WaitForWrites(kOutcomeDeadline));
  RawRedis raw(shared_redis_server->port());
  const long long ttl_ms = raw.Integer({"PTTL", redis->RedisKey("a", "k")});
  EXPECT_GT(ttl_ms, 0);
  EXPECT_LE(ttl_ms, 5000);
}

// --- Redis down.

TEST(RedisIdempotencyStoreTest, UnreachableRedisIsNotAnOpenErrorAndBeginIsUnavailable) {
  const int port = UnusedClosedPort();
  ASSERT_GT(port, 0);
  ErrorLog errors;
  RedisIdempotencyOptions options = FreshOptions();
  options.on_error = errors.Hook();
  auto store = OpenOrFail("redis://127.0.0.1:" + std::to_string(port), options);
  ASSERT_NE(store, nullptr);
  IdempotentOutcome replay;
  OutcomeLatch latch;
  const auto start = Clock::now();
  EXPECT_EQ(store->Begin("acct", "k", "fp", &replay, latch.Callback()), Decision::kUnavailable);
  EXPECT_LT(Clock::now() - start, kPrompt);
  EXPECT_EQ(replay.status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_NE(replay.status.error_message().find("idempotency store is unreachable"),
            std::string::npos);
  EXPECT_EQ(latch.calls(), 0);
  EXPECT_NE(errors.text().find("cannot connect"), std::string::npos) << errors.text();
}

TEST(RedisIdempotencyStoreTest, KilledRedisGivesUnavailablePromptlyAndNeverThePassword) {
  std::string error;
  auto server = RedisServer::Start(&error, {"--requirepass", "s3cret-pw"});
  ASSERT_NE(server, nullptr) << error;
  ErrorLog errors;
  RedisIdempotencyOptions options = FreshOptions();
  options.on_error = errors.Hook();
  const std::string url = "redis://:s3cret-pw@127.0.0.1:" + std::to_string(server->port());
  auto store = OpenOrFail(url, options);
  ASSERT_NE(store, nullptr);
  IdempotentOutcome replay;
  ASSERT_EQ(store->Begin("acct", "before", "fp", &replay, Ignore), Decision::kLead);
  store->Complete("acct", "before", {grpc::Status::OK, "r"});
  ASSERT_TRUE(store->WaitForWrites(kOutcomeDeadline));

  ASSERT_TRUE(server->Stop(SIGKILL));
  const auto start = Clock::now();
  EXPECT_EQ(store->Begin("acct", "after", "fp", &replay, Ignore), Decision::kUnavailable);
  EXPECT_LT(Clock::now() - start, kPrompt);
  EXPECT_EQ(replay.status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(replay.status.error_message().find("s3cret"), std::string::npos);
  const std::string reported = errors.text();
  EXPECT_FALSE(reported.empty());
  EXPECT_EQ(reported.find("s3cret"), std::string::npos) << reported;
  // Within unreachable_backoff the next begin is refused without a round trip (nothing new
  // reported), so a burst of keyed calls does not each wait for a connect timeout.
  EXPECT_EQ(store->Begin("acct", "burst", "fp", &replay, Ignore), Decision::kUnavailable);
  EXPECT_EQ(replay.status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(errors.text(), reported);

  // Back up (empty: no persistence): the pooled connections are dead, fresh ones work once
  // the back-off has passed.
  ASSERT_TRUE(server->Restart(&error)) << error;
  EXPECT_TRUE(WaitUntil(
      [&] { return store->Begin("acct", "after", "fp", &replay, Ignore) == Decision::kLead; },
      std::chrono::seconds(10)));
}

TEST(RedisIdempotencyStoreTest, FrozenRedisGivesUnavailableAfterTheCommandTimeout) {
  std::string error;
  auto server = RedisServer::Start(&error);
  ASSERT_NE(server, nullptr) << error;
  RedisIdempotencyOptions options = FreshOptions();
  options.command_timeout = absl::Milliseconds(300);
  auto store = OpenOrFail(server->Url(), options);
  ASSERT_NE(store, nullptr);
  IdempotentOutcome replay;
  ASSERT_EQ(store->Begin("acct", "warm", "fp", &replay, Ignore), Decision::kLead);

  ASSERT_EQ(::kill(server->pid(), SIGSTOP), 0);
  const auto start = Clock::now();
  const Decision frozen = store->Begin("acct", "frozen", "fp", &replay, Ignore);
  const auto elapsed = Clock::now() - start;
  ASSERT_EQ(::kill(server->pid(), SIGCONT), 0);
  EXPECT_EQ(frozen, Decision::kUnavailable);
  EXPECT_LT(elapsed, kPrompt);
  EXPECT_EQ(replay.status.error_code(), grpc::StatusCode::UNAVAILABLE);
}

TEST(RedisIdempotencyStoreTest, CompleteAndAbandonNeverWaitForRedis) {
  // They run on the HTTP transport's event-loop thread, which must not block.
  std::string error;
  auto server = RedisServer::Start(&error);
  ASSERT_NE(server, nullptr) << error;
  RedisIdempotencyOptions options = FreshOptions();
  options.command_timeout = absl::Seconds(60);  // a blocking write would be obvious
  auto store = OpenOrFail(server->Url(), options);
  ASSERT_NE(store, nullptr);
  IdempotentOutcome replay;
  ASSERT_EQ(store->Begin("acct", "done", "fp", &replay, Ignore), Decision::kLead);
  ASSERT_EQ(store->Begin("acct", "abandoned", "fp", &replay, Ignore), Decision::kLead);
  OutcomeLatch latch;
  ASSERT_EQ(store->Begin("acct", "done", "fp", &replay, latch.Callback()), Decision::kWait);

  ASSERT_EQ(::kill(server->pid(), SIGSTOP), 0);
  const auto start = Clock::now();
  OutcomeLatch saved;
  store->Complete("acct", "done", {grpc::Status::OK, "r"}, [&saved] {
    saved.Callback()({grpc::Status::OK, "saved"});
  });
  store->Abandon("acct", "abandoned", {grpc::Status(grpc::StatusCode::UNAVAILABLE, "x"), ""});
  const auto elapsed = Clock::now() - start;
  // Answered from memory while the write waits for Redis: a repeat waits for the save, like
  // the leader's own answer; other parameters are a mismatch.
  OutcomeLatch repeat_latch;
  const Decision repeat = store->Begin("acct", "done", "fp", &replay, repeat_latch.Callback());
  const Decision other = store->Begin("acct", "done", "other", &replay, Ignore);
  const bool written_while_frozen = store->WaitForWrites(absl::Milliseconds(200));
  const bool answered_while_frozen = latch.Now().has_value() || saved.Now().has_value();
  ASSERT_EQ(::kill(server->pid(), SIGCONT), 0);
  EXPECT_LT(elapsed, kPrompt);
  EXPECT_FALSE(answered_while_frozen) << "an outcome was handed out before it was saved";
  EXPECT_EQ(repeat, Decision::kWait);
  EXPECT_EQ(other, Decision::kMismatch);
  EXPECT_FALSE(written_while_frozen);

  ASSERT_TRUE(store->WaitForWrites(kOutcomeDeadline));
  ASSERT_TRUE(saved.Wait(kOutcomeDeadline).has_value());
  ASSERT_TRUE(latch.Wait(kOutcomeDeadline).has_value());
  EXPECT_EQ(latch.Now()->response, "r");
  ASSERT_TRUE(repeat_latch.Wait(kOutcomeDeadline).has_value());
  EXPECT_EQ(repeat_latch.Now()->response, "r");
  RawRedis raw(server->port());
  EXPECT_EQ(raw.String({"HGET", store->RedisKey("acct", "done"), "state"}), "done");
  EXPECT_EQ(raw.Integer({"EXISTS", store->RedisKey("acct", "abandoned")}), 0);
}

TEST(RedisIdempotencyStoreTest, AnOutcomeWhoseSaveFailsKeepsItsKeyAndIsSavedWhenRedisIsBack) {
  // Before: a failed save was only reported, the claim expired as pending, and a repeat
  // then made the vendor call again (a second token). Now the leader still answers after
  // the first attempt, the outcome is retried until saved, and meanwhile the key is held.
  std::string error;
  auto server = RedisServer::Start(&error);
  ASSERT_NE(server, nullptr) << error;
  ErrorLog errors;
  RedisIdempotencyOptions options = FreshOptions();
  options.command_timeout = absl::Milliseconds(300);
  options.first_save_retry = absl::Milliseconds(50);
  options.max_save_retry = absl::Milliseconds(200);
  options.on_error = errors.Hook();
  auto store = OpenOrFail(server->Url(), options);
  auto other_replica = OpenOrFail(server->Url(), FreshOptionsWithPrefix(options.prefix));
  ASSERT_TRUE(store && other_replica);
  IdempotentOutcome replay;
  ASSERT_EQ(store->Begin("acct", "k", "fp", &replay, Ignore), Decision::kLead);

  ASSERT_EQ(::kill(server->pid(), SIGSTOP), 0);
  OutcomeLatch saved;
  store->Complete("acct", "k", {grpc::Status::OK, "token"}, [&saved] {
    saved.Callback()({grpc::Status::OK, ""});
  });
  // The first attempt times out: the leader is answered all the same.
  const bool answered = saved.Wait(kOutcomeDeadline).has_value();
  const size_t unsaved = store->UnsavedOutcomes();
  // A repeat in this process is replayed from memory, never led again.
  const Decision repeat = store->Begin("acct", "k", "fp", &replay, Ignore);
  ASSERT_EQ(::kill(server->pid(), SIGCONT), 0);
  EXPECT_TRUE(answered);
  EXPECT_EQ(unsaved, 1u);
  EXPECT_EQ(repeat, Decision::kReplay);
  EXPECT_EQ(replay.response, "token");
  EXPECT_NE(errors.text().find("retried"), std::string::npos) << errors.text();

  // Redis answers again: the retry lands, and another replica replays the outcome.
  EXPECT_TRUE(WaitUntil([&] { return store->UnsavedOutcomes() == 0; }, std::chrono::seconds(20)));
  RawRedis raw(server->port());
  EXPECT_EQ(raw.String({"HGET", store->RedisKey("acct", "k"), "state"}), "done");
  EXPECT_EQ(other_replica->Begin("acct", "k", "fp", &replay, Ignore), Decision::kReplay);
  EXPECT_EQ(replay.response, "token");
}

TEST(RedisIdempotencyStoreTest, BeginAsyncNeverBlocksItsCallerAndBoundsItsQueue) {
  // Redis accepts and never answers: begins wait on the store's own threads, and past
  // max_queued_begins a begin is refused on the caller's thread at once.
  ::inspection::testing::LoopbackListener silent;
  ASSERT_TRUE(silent.ok());
  RedisIdempotencyOptions options = FreshOptions();
  options.command_timeout = absl::Milliseconds(500);
  options.begin_threads = 1;
  options.max_queued_begins = 2;
  auto store = OpenOrFail(absl::StrCat("redis://127.0.0.1:", silent.port()), options);
  ASSERT_NE(store, nullptr);

  struct Answer {
    absl::Mutex mu;
    std::optional<std::pair<Decision, IdempotentOutcome>> got ABSL_GUARDED_BY(mu);
    IdempotencyStore::OnDecided Callback() {
      return [this](Decision decision, IdempotentOutcome outcome) {
        absl::MutexLock lock(&mu);
        got.emplace(decision, std::move(outcome));
      };
    }
    bool Wait(absl::Duration timeout) {
      absl::MutexLock lock(&mu);
      return mu.AwaitWithTimeout(absl::Condition(
                                     +[](std::optional<std::pair<Decision, IdempotentOutcome>>* g) {
                                       return g->has_value();
                                     },
                                     &got),
                                 timeout);
    }
    bool Now() {
      absl::MutexLock lock(&mu);
      return got.has_value();
    }
  };
  const absl::Time later = absl::Now() + absl::Seconds(30);
  Answer running, queued, expired, refused;
  store->BeginAsync("acct", "a", "fp", later, running.Callback(), Ignore);
  // The thread takes "a" and blocks on Redis; wait until it has, so two fit in the queue.
  ASSERT_TRUE(WaitUntil([&] { return store->QueuedBegins() == 0; }, std::chrono::seconds(10)));
  store->BeginAsync("acct", "b", "fp", later, queued.Callback(), Ignore);
  store->BeginAsync("acct", "c", "fp", absl::Now(), expired.Callback(), Ignore);
  store->BeginAsync("acct", "d", "fp", later, refused.Callback(), Ignore);
  // Only the one past the queue was answered before BeginAsync returned.
  EXPECT_FALSE(running.Now());
  EXPECT_FALSE(queued.Now());
  ASSERT_TRUE(refused.Now());
  {
    absl::MutexLock lock(&refused.mu);
    EXPECT_EQ(refused.got->first, Decision::kUnavailable);
    EXPECT_EQ(refused.got->second.status.error_code(), grpc::StatusCode::UNAVAILABLE);
  }
  ASSERT_TRUE(running.Wait(kOutcomeDeadline));
  ASSERT_TRUE(queued.Wait(kOutcomeDeadline));
  ASSERT_TRUE(expired.Wait(kOutcomeDeadline));
  absl::MutexLock lock(&expired.mu);
  EXPECT_EQ(expired.got->first, Decision::kUnavailable);
  // Its deadline passed while it waited: not sent to Redis at all.
  EXPECT_EQ(expired.got->second.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
}

// A call waiting for another replica's claim used to wait until the claim ended (up to
// claim_ttl, 5 min), past its own deadline and past the gateway's shutdown grace. Now it
// ends at its deadline, and BeginShutdown ends the rest; neither is a replayed outcome.
TEST(RedisIdempotencyStoreTest, AWaiterOnAnotherReplicasClaimEndsAtItsDeadlineOrAtShutdown) {
  RedisIdempotencyOptions options = FreshOptions();
  auto leader = OpenOrFail(shared_redis_server->Url(), options);
  auto waiter = OpenOrFail(shared_redis_server->Url(), options);
  ASSERT_TRUE(leader && waiter);
  IdempotentOutcome replay;
  ASSERT_EQ(leader->Begin("acct", "k", "fp", &replay, Ignore), Decision::kLead);

  std::atomic<int> decided_wait{0};
  auto decided = [&decided_wait](Decision decision, IdempotentOutcome) {
    if (decision == Decision::kWait) ++decided_wait;
  };
  OutcomeLatch short_call;
  waiter->BeginAsync("acct", "k", "fp", absl::Now() + absl::Milliseconds(300), decided,
                     short_call.Callback());
  std::optional<IdempotentOutcome> ended = short_call.Wait(kOutcomeDeadline);
  ASSERT_TRUE(ended.has_value());
  EXPECT_EQ(ended->status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_TRUE(ended->from_store);

  OutcomeLatch long_call;
  waiter->BeginAsync("acct", "k", "fp", absl::Now() + absl::Seconds(60), decided,
                     long_call.Callback());
  ASSERT_TRUE(WaitUntil([&] { return waiter->remote_waiters() == 1; }, std::chrono::seconds(10)));
  waiter->BeginShutdown();
  ASSERT_TRUE(long_call.Now().has_value());
  EXPECT_EQ(long_call.Now()->status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_TRUE(long_call.Now()->from_store);
  EXPECT_EQ(decided_wait.load(), 2);
  // After it, a begin is answered at once.
  std::optional<Decision> after;
  waiter->BeginAsync(
      "acct", "other", "fp", absl::Now() + absl::Seconds(60),
      [&after](Decision decision, IdempotentOutcome) { after = decision; }, Ignore);
  EXPECT_EQ(after, Decision::kUnavailable);
  // The leader's own call is untouched: its outcome is still stored.
  leader->Complete("acct", "k", {grpc::Status::OK, "r"});
  ASSERT_TRUE(leader->WaitForWrites(kOutcomeDeadline));
}

TEST(RedisIdempotencyStoreTest, RemoteWaitersGetUnavailableWhenRedisStaysDown) {
  std::string error;
  auto server = RedisServer::Start(&error);
  ASSERT_NE(server, nullptr) << error;
  RedisIdempotencyOptions options = FreshOptions();
  options.claim_ttl = absl::Milliseconds(500);
  auto leader = OpenOrFail(server->Url(), options);
  auto waiter = OpenOrFail(server->Url(), options);
  ASSERT_TRUE(leader && waiter);
  IdempotentOutcome replay;
  ASSERT_EQ(leader->Begin("acct", "k", "fp", &replay, Ignore), Decision::kLead);
  OutcomeLatch latch;
  ASSERT_EQ(waiter->Begin("acct", "k", "fp", &replay, latch.Callback()), Decision::kWait);
  ASSERT_TRUE(server->Stop(SIGKILL));
  std::optional<IdempotentOutcome> outcome = latch.Wait(kOutcomeDeadline);
  ASSERT_TRUE(outcome.has_value());
  EXPECT_EQ(outcome->status.error_code(), grpc::StatusCode::UNAVAILABLE);
  // The leader's process still finishes its own call (its waiters would get it).
  leader->Complete("acct", "k", {grpc::Status::OK, "r"});
}

TEST(RedisIdempotencyStoreTest, DestroyingTheStoreReleasesItsWaiters) {
  RedisIdempotencyOptions options = FreshOptions();
  auto leader = OpenOrFail(shared_redis_server->Url(), options);
  auto waiter = OpenOrFail(shared_redis_server->Url(), options);
  ASSERT_TRUE(leader && waiter);
  IdempotentOutcome replay;
  ASSERT_EQ(leader->Begin("acct", "k", "fp", &replay, Ignore), Decision::kLead);
  OutcomeLatch latch;
  ASSERT_EQ(waiter->Begin("acct", "k", "fp", &replay, latch.Callback()), Decision::kWait);
  waiter.reset();
  ASSERT_TRUE(latch.Now().has_value());
  EXPECT_EQ(latch.Now()->status.error_code(), grpc::StatusCode::UNAVAILABLE);
}

TEST(RedisIdempotencyStoreTest, WrongPasswordIsPermissionDeniedWithoutThePassword) {
  std::string error;
  auto server = RedisServer::Start(&error, {"--requirepass", "right-pw"});
  ASSERT_NE(server, nullptr) << error;
  auto store = RedisIdempotencyStore::Open(
      "redis://:wrong-pw@127.0.0.1:" + std::to_string(server->port()), FreshOptions());
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kPermissionDenied) << store.status();
  EXPECT_EQ(store.status().message().find("wrong-pw"), std::string::npos) << store.status();
}

// --- URLs.

TEST(ParseRedisIdempotencyUrlTest, DefaultsAndEveryPart) {
  auto plain = ParseRedisIdempotencyUrl("redis://localhost");
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->server.host, "localhost");
  EXPECT_EQ(plain->server.port, 6379);
  EXPECT_EQ(plain->server.db, 0);
  EXPECT_EQ(plain->server.password, "");
  EXPECT_EQ(plain->prefix, "");

  auto full =
      ParseRedisIdempotencyUrl("redis://app:p%40ss/w@rd@redis.internal:6380/2?prefix=gw%3A");
  ASSERT_TRUE(full.ok()) << full.status();
  EXPECT_EQ(full->server.user, "app");
  EXPECT_EQ(full->server.password, "p@ss/w@rd");
  EXPECT_EQ(full->server.host, "redis.internal");
  EXPECT_EQ(full->server.port, 6380);
  EXPECT_EQ(full->server.db, 2);
  EXPECT_EQ(full->prefix, "gw:");
  EXPECT_EQ(full->Describe(), "redis://redis.internal:6380/2");

  auto ipv6 = ParseRedisIdempotencyUrl("redis://[::1]:7000");
  ASSERT_TRUE(ipv6.ok()) << ipv6.status();
  EXPECT_EQ(ipv6->server.host, "::1");
  EXPECT_EQ(ipv6->Describe(), "redis://[::1]:7000/0");

  auto sentinel = ParseRedisIdempotencyUrl("redis+sentinel://:pw@s1,s2:26380/gw/3?prefix=k:");
  ASSERT_TRUE(sentinel.ok()) << sentinel.status();
  ASSERT_EQ(sentinel->server.sentinels.size(), 2u);
  EXPECT_EQ(sentinel->server.master_name, "gw");
  EXPECT_EQ(sentinel->server.db, 3);
  EXPECT_EQ(sentinel->prefix, "k:");
  EXPECT_EQ(sentinel->Describe(), "redis+sentinel://s1:26379,s2:26380/gw/3");
}

TEST(ParseRedisIdempotencyUrlTest, MalformedUrlsAreInvalidWithoutThePassword) {
  for (const std::string url : {
           "rediss://:topsecret@h:6379",
           "http://:topsecret@h",
           "redis://:topsecret@",
           "redis://:topsecret@h:0",
           "redis://:topsecret@h:99999",
           "redis://:topsecret@h:6379/x",
           "redis://:topsecret@h:6379/0?stream=s",
           "redis://:topsecret@h:6379/0?prefix=",
           "redis://:topsecret@h:6379/0#frag",
           "redis://topsecret@h:6379",
           "redis://:topsecret@h!:6379",
       }) {
    auto parsed = ParseRedisIdempotencyUrl(url);
    ASSERT_FALSE(parsed.ok()) << url;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument) << url;
    EXPECT_EQ(parsed.status().message().find("topsecret"), std::string::npos) << parsed.status();
  }
}

}  // namespace
}  // namespace inspection::pipeline
