// The Redis client against real processes: a primary, its replica and Redis Sentinels on
// loopback (redis-server, and redis-server --sentinel). What a store relies on: the pool
// finds the primary through the sentinels, never writes to a replica, follows a failover
// without being rebuilt, and WaitForReplicas refuses to acknowledge what no replica has.

#include <signal.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "adapters/redis/redis_connection.h"
#include "adapters/redis/redis_url.h"
#include "tests/support/loopback_listener.h"
#include "tests/support/raw_tcp_server.h"
#include "tests/support/redis_server.h"
#include "tests/support/temp_dir.h"
#include "tests/support/wait.h"

namespace inspection::redis {
namespace {

using ::inspection::testing::RedisServer;
using ::inspection::testing::TempDir;
using ::inspection::testing::WaitUntil;

constexpr char kMaster[] = "gw-primary";

RedisOptions FastOptions() {
  RedisOptions options;
  options.timeouts.connect = absl::Milliseconds(500);
  options.timeouts.command = absl::Milliseconds(1000);
  options.replica_ack_timeout = absl::Milliseconds(300);
  return options;
}

// SET key value, then the acknowledgement wait: what every store does for a write it is
// about to acknowledge. Returns the address of the server that took it.
absl::StatusOr<std::string> DurableSet(RedisConnectionPool& pool, const std::string& key,
                                       const std::string& value) {
  return pool.Run<std::string>([&](RedisConnection& c) -> absl::StatusOr<std::string> {
    absl::StatusOr<RedisReply> reply = c.Command({"SET", key, value});
    if (!reply.ok()) return reply.status();
    if ((*reply)->type == REDIS_REPLY_ERROR) {
      return RedisErrorReplyToStatus(**reply, "SET");
    }
    if (absl::Status acked = c.WaitForReplicas(); !acked.ok()) return acked;
    return c.description();
  });
}

// The role a server reports ("master", "slave").
std::string RoleOf(const RedisServer& server) {
  auto url = ParseRedisUrl(server.Url());
  if (!url.ok()) return "";
  auto connection =
      RedisConnection::Connect(*url, {"127.0.0.1", server.port()}, FastOptions().timeouts, "probe");
  if (!connection.ok()) return "";
  auto reply = (*connection)->Command({"ROLE"});
  if (!reply.ok() || (*reply)->type != REDIS_REPLY_ARRAY || (*reply)->elements < 1) return "";
  return std::string((*reply)->element[0]->str, (*reply)->element[0]->len);
}

class RedisSentinelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string error;
    primary_ = RedisServer::Start(&error);
    ASSERT_NE(primary_, nullptr) << error;
    replica_ = RedisServer::StartReplica(&error, *primary_);
    ASSERT_NE(replica_, nullptr) << error;
  }

  // Two sentinels, quorum 1 so that either may start a failover on its own.
  void StartSentinels(std::vector<std::string> conf_lines = {}) {
    for (int i = 0; i < 2; ++i) {
      std::string error;
      auto sentinel = RedisServer::StartSentinel(&error, dir_.path(), kMaster, *primary_,
                                                 /*quorum=*/1, /*down_after_ms=*/1000, conf_lines);
      ASSERT_NE(sentinel, nullptr) << error;
      sentinels_.push_back(std::move(sentinel));
    }
  }

  std::string SentinelUrl(const std::string& master = kMaster) const {
    std::string list;
    for (const auto& sentinel : sentinels_) {
      absl::StrAppend(&list, list.empty() ? "" : ",", "127.0.0.1:", sentinel->port());
    }
    return absl::StrCat("redis+sentinel://", list, "/", master);
  }

  TempDir dir_;
  std::unique_ptr<RedisServer> primary_;
  std::unique_ptr<RedisServer> replica_;
  std::vector<std::unique_ptr<RedisServer>> sentinels_;
};

TEST_F(RedisSentinelTest, TheSentinelsLeadToThePrimaryAndAWriteWaitsForTheReplica) {
  ASSERT_NO_FATAL_FAILURE(StartSentinels());
  auto url = ParseRedisUrl(SentinelUrl());
  ASSERT_TRUE(url.ok()) << url.status();
  auto primary = AskSentinelsForPrimary(*url, FastOptions());
  ASSERT_TRUE(primary.ok()) << primary.status();
  EXPECT_EQ(primary->port, primary_->port());

  auto connection = RedisConnection::Open(*url, FastOptions());
  ASSERT_TRUE(connection.ok()) << connection.status();
  // auto: the primary reported a connected replica, so one must confirm each write.
  EXPECT_EQ((*connection)->required_acks(), 1);
  EXPECT_NE((*connection)->description().find(absl::StrCat(":", primary_->port())),
            std::string::npos);

  RedisConnectionPool pool(*url, FastOptions(), 4);
  auto written = DurableSet(pool, "k", "v");
  ASSERT_TRUE(written.ok()) << written.status();
  // The replica has it: WAIT said so.
  auto replica_url = ParseRedisUrl(replica_->Url());
  auto on_replica = RedisConnection::Connect(*replica_url, {"127.0.0.1", replica_->port()},
                                             FastOptions().timeouts, "replica");
  ASSERT_TRUE(on_replica.ok());
  auto got = (*on_replica)->Command({"GET", "k"});
  ASSERT_TRUE(got.ok());
  ASSERT_EQ((*got)->type, REDIS_REPLY_STRING);
  EXPECT_EQ(std::string((*got)->str, (*got)->len), "v");
}

TEST_F(RedisSentinelTest, AReplicaIsNeverWrittenTo) {
  auto url = ParseRedisUrl(replica_->Url());
  ASSERT_TRUE(url.ok());
  auto connection = RedisConnection::Open(*url, FastOptions());
  ASSERT_FALSE(connection.ok());
  EXPECT_EQ(connection.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(connection.status().message().find("not the primary"), absl::string_view::npos)
      << connection.status();
  RedisConnectionPool pool(*url, FastOptions(), 4);
  EXPECT_EQ(DurableSet(pool, "k", "v").status().code(), absl::StatusCode::kUnavailable);
}

TEST_F(RedisSentinelTest, AWriteNoReplicaConfirmsIsNotAcknowledged) {
  // The replica stops answering (a frozen node): WAIT runs out.
  ASSERT_EQ(::kill(replica_->pid(), SIGSTOP), 0);
  auto url = ParseRedisUrl(primary_->Url());
  RedisConnectionPool pool(*url, FastOptions(), 4);
  const auto start = std::chrono::steady_clock::now();
  auto written = DurableSet(pool, "k", "v");
  const auto took = std::chrono::steady_clock::now() - start;
  ::kill(replica_->pid(), SIGCONT);
  ASSERT_FALSE(written.ok());
  EXPECT_EQ(written.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(IsNotReplicated(written.status())) << written.status();
  EXPECT_NE(written.status().message().find("0 of the 1 replica(s)"), absl::string_view::npos)
      << written.status();
  // Refused after the ack timeout, not after the command timeout's multiples.
  EXPECT_LT(took, std::chrono::milliseconds(300 + 1000));

  // Explicit 0: acknowledged on the primary's word alone.
  RedisOptions none = FastOptions();
  none.min_replicas_acked = 0;
  ASSERT_EQ(::kill(replica_->pid(), SIGSTOP), 0);
  RedisConnectionPool unreplicated(*url, none, 4);
  auto alone = DurableSet(unreplicated, "k", "v2");
  ::kill(replica_->pid(), SIGCONT);
  EXPECT_TRUE(alone.ok()) << alone.status();
}

TEST_F(RedisSentinelTest, AutoAcksAreZeroWithoutAReplicaAndAnExplicitOneRefuses) {
  replica_.reset();  // stopped by its pid
  auto url = ParseRedisUrl(primary_->Url());
  // The primary notices the replica's connection close at once (it was stopped cleanly).
  ASSERT_TRUE(WaitUntil(
      [&] {
        auto c = RedisConnection::Open(*url, FastOptions());
        return c.ok() && (*c)->required_acks() == 0;
      },
      std::chrono::seconds(10)));
  RedisConnectionPool pool(*url, FastOptions(), 4);
  EXPECT_TRUE(DurableSet(pool, "k", "v").ok());

  RedisOptions one = FastOptions();
  one.min_replicas_acked = 1;
  RedisConnectionPool strict(*url, one, 4);
  auto refused = DurableSet(strict, "k", "v");
  EXPECT_TRUE(IsNotReplicated(refused.status())) << refused.status();
}

TEST_F(RedisSentinelTest, AManualFailoverIsFollowedWithoutRebuildingThePool) {
  ASSERT_NO_FATAL_FAILURE(StartSentinels());
  auto url = ParseRedisUrl(SentinelUrl());
  RedisConnectionPool pool(*url, FastOptions(), 4);
  auto before = DurableSet(pool, "k", "1");
  ASSERT_TRUE(before.ok()) << before.status();

  // The sentinels promote the replica and demote the primary (it stays up, as a replica):
  // the pool's idle connection now points at a replica and gets READONLY.
  auto sentinel_url = ParseRedisUrl(absl::StrCat("redis://127.0.0.1:", sentinels_[0]->port()));
  auto sentinel = RedisConnection::Connect(*sentinel_url, {"127.0.0.1", sentinels_[0]->port()},
                                           FastOptions().timeouts, "sentinel");
  ASSERT_TRUE(sentinel.ok());
  // The sentinel refuses (NOGOODSLAVE) until it has seen the replica in the primary's INFO,
  // which it reads every few seconds.
  std::string refusal;
  ASSERT_TRUE(WaitUntil(
      [&] {
        auto failover = (*sentinel)->Command({"SENTINEL", "FAILOVER", kMaster});
        if (!failover.ok()) return false;
        if ((*failover)->type != REDIS_REPLY_ERROR) return true;
        refusal.assign((*failover)->str, (*failover)->len);
        return false;
      },
      std::chrono::seconds(20)))
      << refusal;
  ASSERT_TRUE(WaitUntil([&] { return RoleOf(*replica_) == "master"; }, std::chrono::seconds(20)));
  ASSERT_TRUE(WaitUntil([&] { return RoleOf(*primary_) == "slave"; }, std::chrono::seconds(20)));

  // Every write lands on the new primary from now on, through the same pool.
  absl::StatusOr<std::string> after;
  ASSERT_TRUE(WaitUntil(
      [&] {
        after = DurableSet(pool, "k", "2");
        return after.ok();
      },
      std::chrono::seconds(20)))
      << after.status();
  EXPECT_NE(after->find(absl::StrCat(":", replica_->port(), ")")), std::string::npos) << *after;
}

TEST_F(RedisSentinelTest, ADeadPrimaryIsReplacedAndWritesResumeOnTheNewOne) {
  ASSERT_NO_FATAL_FAILURE(StartSentinels());
  auto url = ParseRedisUrl(SentinelUrl());
  RedisConnectionPool pool(*url, FastOptions(), 4);
  ASSERT_TRUE(DurableSet(pool, "k", "1").ok());

  ASSERT_TRUE(primary_->Stop(SIGKILL));
  // Refused (never acknowledged) until the sentinels have promoted the replica; then the
  // same pool writes to it. With down-after-milliseconds 1000 this takes a few seconds.
  const auto killed = std::chrono::steady_clock::now();
  int refused = 0;
  absl::StatusOr<std::string> after;
  ASSERT_TRUE(WaitUntil(
      [&] {
        after = DurableSet(pool, "k", "2");
        if (!after.ok()) {
          ++refused;
          EXPECT_EQ(after.status().code(), absl::StatusCode::kUnavailable) << after.status();
        }
        return after.ok();
      },
      std::chrono::seconds(30)))
      << after.status();
  const auto window = std::chrono::steady_clock::now() - killed;
  EXPECT_GT(refused, 0);
  EXPECT_NE(after->find(absl::StrCat(":", replica_->port(), ")")), std::string::npos) << *after;
  std::printf(
      "unavailability window after kill -9 of the primary: %lld ms (%d writes refused)\n",
      static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(window).count()),
      refused);
}

// Hostile or broken sentinels ahead of a good one (one that accepts and never answers, one
// that resets the connection): each costs at most its command timeout, and the next
// sentinel names the primary.
TEST_F(RedisSentinelTest, ASilentOrResettingSentinelIsPassedOver) {
  ASSERT_NO_FATAL_FAILURE(StartSentinels());
  ::inspection::testing::LoopbackListener silent;  // the kernel accepts; nobody reads
  ASSERT_TRUE(silent.ok());
  ::inspection::testing::RawTcpServer resetting(::inspection::testing::RawTcpServer::Mode::kReset);
  ASSERT_TRUE(resetting.Start());
  auto url = ParseRedisUrl(absl::StrCat("redis+sentinel://127.0.0.1:", silent.port(),
                                        ",127.0.0.1:", resetting.port(),
                                        ",127.0.0.1:", sentinels_[0]->port(), "/", kMaster));
  ASSERT_TRUE(url.ok()) << url.status();
  RedisOptions options = FastOptions();
  options.timeouts.command = absl::Milliseconds(300);
  const auto start = std::chrono::steady_clock::now();
  auto connection = RedisConnection::Open(*url, options);
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(connection.ok()) << connection.status();
  EXPECT_NE((*connection)->description().find(absl::StrCat(":", primary_->port(), ")")),
            std::string::npos);
  // At most the two bad ones' command timeouts, plus a margin.
  EXPECT_LT(took, std::chrono::milliseconds(2 * 300 + 1200));

  // Only silent sentinels: Unavailable after their timeouts, naming what happened.
  auto alone =
      ParseRedisUrl(absl::StrCat("redis+sentinel://127.0.0.1:", silent.port(), "/", kMaster));
  auto refused = RedisConnection::Open(*alone, options);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(refused.status().message().find("timed out"), absl::string_view::npos)
      << refused.status();
}

TEST_F(RedisSentinelTest, SentinelErrorsSayWhatIsWrongWithoutThePassword) {
  ASSERT_NO_FATAL_FAILURE(StartSentinels({"requirepass sentinel-s3cret"}));
  auto url = ParseRedisUrl(SentinelUrl());
  // Without the sentinels' password.
  auto no_password = RedisConnection::Open(*url, FastOptions());
  ASSERT_FALSE(no_password.ok());
  EXPECT_EQ(no_password.status().code(), absl::StatusCode::kPermissionDenied)
      << no_password.status();
  EXPECT_NE(no_password.status().message().find("redis.sentinel_password"),
            absl::string_view::npos);
  // A wrong one.
  RedisOptions wrong = FastOptions();
  wrong.sentinel_password = "not-it";
  auto refused = RedisConnection::Open(*url, wrong);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kPermissionDenied) << refused.status();
  EXPECT_NE(refused.status().message().find("redis.sentinel_password"), absl::string_view::npos);
  EXPECT_EQ(refused.status().message().find("not-it"), absl::string_view::npos);
  // The right one.
  RedisOptions right = FastOptions();
  right.sentinel_password = "sentinel-s3cret";
  EXPECT_TRUE(RedisConnection::Open(*url, right).ok());

  // A name the sentinels do not monitor.
  auto unknown = RedisConnection::Open(*ParseRedisUrl(SentinelUrl("other")), right);
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kFailedPrecondition) << unknown.status();
  EXPECT_NE(unknown.status().message().find("'other'"), absl::string_view::npos);

  // No sentinel reachable at all.
  const int closed = ::inspection::testing::UnusedClosedPort();
  auto nobody = RedisConnection::Open(
      *ParseRedisUrl(absl::StrCat("redis+sentinel://127.0.0.1:", closed, "/", kMaster)), right);
  ASSERT_FALSE(nobody.ok());
  EXPECT_EQ(nobody.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(nobody.status().message().find("no sentinel named the primary"),
            absl::string_view::npos)
      << nobody.status();
}

}  // namespace
}  // namespace inspection::redis
