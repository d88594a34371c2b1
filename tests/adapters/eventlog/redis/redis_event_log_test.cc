#include "adapters/eventlog/redis/redis_event_log.h"

#include <signal.h>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "adapters/eventlog/event_log.h"
#include "adapters/hashing/sha256.h"
#include "adapters/redis/redis_connection.h"
#include "adapters/redis/redis_url.h"
#include "tests/adapters/eventlog/event_log_conformance.h"
#include "tests/support/redis_server.h"
#include "tests/support/shared_redis_server.h"
#include "tests/support/wait.h"

namespace inspection::eventlog {

namespace {

using ::inspection::eventlog::testing::EventLogConformanceTest;
using ::inspection::eventlog::testing::EventLogFactory;
using ::inspection::eventlog::testing::MakeAccountEvent;
using ::inspection::eventlog::testing::MakeEvent;
using ::inspection::testing::RedisServer;
using ::inspection::testing::shared_redis_server;
using ::inspection::testing::WaitUntil;
using Clock = std::chrono::steady_clock;

// Generous sanity bound for "returns promptly / does not hang": far above any normal
// latency, far below the waits or hangs the tests guard against.
constexpr std::chrono::seconds kPrompt{10};

// A stream name no other test in this process uses.
std::string FreshStream(const std::string& prefix) {
  static std::atomic<int> counter{0};
  return prefix + "-" + std::to_string(++counter);
}

std::unique_ptr<EventLog> OpenOrFail(const std::string& url, RetentionPolicy retention = {},
                                     RedisEventLogOptions options = {}) {
  absl::StatusOr<std::unique_ptr<EventLog>> log =
      OpenRedisEventLogWithOptions(url, retention, options);
  if (!log.ok()) {
    ADD_FAILURE() << "open " << url << ": " << log.status();
    return nullptr;
  }
  return *std::move(log);
}

class RedisFactory : public EventLogFactory {
 public:
  std::unique_ptr<EventLog> Create(RetentionPolicy retention) override {
    url_ = shared_redis_server->Url("/0?stream=" + FreshStream("conformance"));
    return OpenOrFail(url_, retention);
  }
  std::unique_ptr<EventLog> Reopen(RetentionPolicy retention) override {
    return OpenOrFail(url_, retention);
  }

 private:
  std::string url_;
};

RedisFactory redis_factory;

// Named, not printed: the default name would be the factory's address, new every build.
INSTANTIATE_TEST_SUITE_P(Redis, EventLogConformanceTest, ::testing::Values(&redis_factory),
                         [](const ::testing::TestParamInfo<EventLogFactory*>&) {
                           return std::string("redis");
                         });

// A plain connection to look at (or tamper with) what the log keeps in Redis.
class RawRedis {
 public:
  explicit RawRedis(const std::string& url) {
    absl::StatusOr<redis::RedisUrl> parsed = redis::ParseRedisUrl(url);
    EXPECT_TRUE(parsed.ok()) << parsed.status();
    if (!parsed.ok()) return;
    absl::StatusOr<std::unique_ptr<redis::RedisConnection>> connection =
        redis::RedisConnection::Open(*parsed, redis::RedisTimeouts());
    EXPECT_TRUE(connection.ok()) << connection.status();
    if (connection.ok()) connection_ = *std::move(connection);
  }

  // The reply, or nullptr (with a test failure) when the command could not be sent.
  redis::RedisReply Do(const std::vector<std::string>& args) {
    if (connection_ == nullptr) return nullptr;
    absl::StatusOr<redis::RedisReply> reply = connection_->Command(args);
    EXPECT_TRUE(reply.ok()) << reply.status();
    return reply.ok() ? *std::move(reply) : nullptr;
  }
  int64_t Integer(const std::vector<std::string>& args) {
    redis::RedisReply reply = Do(args);
    return reply != nullptr && reply->type == REDIS_REPLY_INTEGER ? reply->integer : -1;
  }
  std::string String(const std::vector<std::string>& args) {
    redis::RedisReply reply = Do(args);
    return reply != nullptr && reply->str != nullptr ? std::string(reply->str, reply->len) : "";
  }
  // Clients blocked in XREAD & co. (INFO clients: "blocked_clients:N").
  int BlockedClients() {
    const std::string info = String({"INFO", "clients"});
    const std::string key = "blocked_clients:";
    const size_t at = info.find(key);
    if (at == std::string::npos) return -1;
    const size_t end = info.find('\r', at);
    int count = -1;
    if (!absl::SimpleAtoi(info.substr(at + key.size(), end - at - key.size()), &count)) {
      return -1;
    }
    return count;
  }

 private:
  std::unique_ptr<redis::RedisConnection> connection_;
};

TEST(RedisEventLogTest, TwoReplicasAppendingTheSamePayloadsStoreEachOnce) {
  const std::string url = shared_redis_server->Url("/0?stream=" + FreshStream("replicas"));
  auto replica_a = OpenOrFail(url);
  auto replica_b = OpenOrFail(url);
  ASSERT_TRUE(replica_a && replica_b);
  constexpr int kPayloads = 100, kThreadsPerReplica = 8;
  std::mutex mu;
  std::map<std::string, std::set<std::string>> cursors_by_payload;  // guarded by mu
  std::atomic<int> failures{0}, stored{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 2 * kThreadsPerReplica; ++t) {
    EventLog* log = t % 2 == 0 ? replica_a.get() : replica_b.get();
    threads.emplace_back([&, log, t] {
      // Every thread delivers every payload, each starting at a different one.
      for (int i = 0; i < kPayloads; ++i) {
        const std::string suffix = std::to_string((i + t * 7) % kPayloads);
        absl::StatusOr<AppendResult> result = log->Append(MakeEvent("e", suffix));
        if (!result.ok()) {
          ++failures;
          continue;
        }
        if (!result->duplicate) ++stored;
        std::lock_guard<std::mutex> lock(mu);
        cursors_by_payload[suffix].insert(result->cursor);
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(stored.load(), kPayloads);
  auto all = replica_b->ReadAfter("", 10000);
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->size(), static_cast<size_t>(kPayloads));
  std::set<std::string> hashes;
  for (const StoredEvent& event : *all) EXPECT_TRUE(hashes.insert(event.event.content_hash).second);
  // Every delivery of one payload, from either replica, got the same cursor.
  ASSERT_EQ(cursors_by_payload.size(), static_cast<size_t>(kPayloads));
  for (const auto& [payload, cursors] : cursors_by_payload) {
    EXPECT_EQ(cursors.size(), 1u) << payload;
  }
}

// The fields of the stream entry `id` as a map (empty when there is no such entry).
std::map<std::string, std::string> EntryFields(RawRedis& raw, const std::string& stream,
                                               const std::string& id) {
  std::map<std::string, std::string> fields;
  redis::RedisReply reply = raw.Do({"XRANGE", stream, id, id});
  if (reply == nullptr || reply->type != REDIS_REPLY_ARRAY || reply->elements != 1) return fields;
  const redisReply& entry = *reply->element[0];
  if (entry.type != REDIS_REPLY_ARRAY || entry.elements != 2) return fields;
  const redisReply& values = *entry.element[1];
  for (size_t i = 0; i + 1 < values.elements; i += 2) {
    fields[std::string(values.element[i]->str, values.element[i]->len)] =
        std::string(values.element[i + 1]->str, values.element[i + 1]->len);
  }
  return fields;
}

TEST(RedisEventLogTest, TheAccountIsTheEntryFieldAccountAlsoForTheDefaultAccount) {
  const std::string stream = FreshStream("account-field");
  auto log = OpenOrFail(shared_redis_server->Url("/0?stream=" + stream));
  ASSERT_NE(log, nullptr);
  auto named = log->Append(MakeAccountEvent("fleet-north", "e", "1"));
  auto by_default = log->Append(MakeAccountEvent("", "e", "2"));
  ASSERT_TRUE(named.ok() && by_default.ok());
  RawRedis raw(shared_redis_server->Url());
  const std::map<std::string, std::string> named_fields = EntryFields(raw, stream, named->cursor);
  ASSERT_EQ(named_fields.count("account"), 1u);
  EXPECT_EQ(named_fields.at("account"), "fleet-north");
  const std::map<std::string, std::string> default_fields =
      EntryFields(raw, stream, by_default->cursor);
  ASSERT_EQ(default_fields.count("account"), 1u);
  EXPECT_EQ(default_fields.at("account"), "");
}

TEST(RedisEventLogTest, AnEntryOfThePreviousVersionWithoutAnAccountReadsAsTheDefaultAccount) {
  const std::string stream = FreshStream("before-accounts");
  const NewEvent old_event = MakeEvent("createReport", "old", 1690000000000);
  RawRedis raw(shared_redis_server->Url());
  // What the previous version's append script wrote: the entry (every field but
  // `account`) and the dedupe key.
  const std::string old_id = raw.String(
      {"XADD", stream, "*", "event_name", old_event.event_name, "inspection_id",
       old_event.inspection_id, "token_id", old_event.token_id, "vehicle_id", old_event.vehicle_id,
       "payload", old_event.payload, "content_hash", old_event.content_hash, "received_at_ms",
       std::to_string(old_event.received_at_ms)});
  ASSERT_FALSE(old_id.empty());
  ASSERT_EQ(raw.String({"SET", stream + ":dedupe:" + old_event.content_hash, old_id}), "OK");
  ASSERT_EQ(EntryFields(raw, stream, old_id).count("account"), 0u);

  auto log = OpenOrFail(shared_redis_server->Url("/0?stream=" + stream));
  ASSERT_NE(log, nullptr);
  auto read = log->ReadAfter("", 10);
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->size(), 1u);
  const StoredEvent& stored = (*read)[0];
  EXPECT_EQ(stored.cursor, old_id);
  EXPECT_EQ(stored.event.account, "");
  EXPECT_EQ(stored.event.event_name, old_event.event_name);
  EXPECT_EQ(stored.event.inspection_id, old_event.inspection_id);
  EXPECT_EQ(stored.event.token_id, old_event.token_id);
  EXPECT_EQ(stored.event.vehicle_id, old_event.vehicle_id);
  EXPECT_EQ(stored.event.payload, old_event.payload);
  EXPECT_EQ(stored.event.content_hash, old_event.content_hash);
  EXPECT_EQ(stored.event.received_at_ms, old_event.received_at_ms);

  // A redelivery is still its duplicate; the same body for a named account is not.
  auto redelivered = log->Append(old_event);
  ASSERT_TRUE(redelivered.ok()) << redelivered.status();
  EXPECT_TRUE(redelivered->duplicate);
  EXPECT_EQ(redelivered->cursor, old_id);
  auto named = log->Append(MakeAccountEvent("fleet-north", "createReport", "old", 1690000000000));
  ASSERT_TRUE(named.ok()) << named.status();
  EXPECT_FALSE(named->duplicate);
  auto all = log->ReadAfter("", 10);
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].event.account, "");
  EXPECT_EQ((*all)[1].cursor, named->cursor);
  EXPECT_EQ((*all)[1].event.account, "fleet-north");
  EXPECT_EQ((*all)[1].event.payload, old_event.payload);
}

// With a replica (redis.min_replicas_acked auto = 1), an append is answered only once the
// replica has it. A frozen replica: not acknowledged (the caller answers 503); the retry of
// the same event, once the replica is back, is a duplicate that is acknowledged only after
// WAIT covered the first copy too.
TEST(RedisEventLogTest, AnAppendNoReplicaConfirmedIsNotAcknowledgedAndItsRetryIs) {
  std::string error;
  auto primary = RedisServer::Start(&error);
  ASSERT_NE(primary, nullptr) << error;
  auto replica = RedisServer::StartReplica(&error, *primary);
  ASSERT_NE(replica, nullptr) << error;
  RedisEventLogOptions options;
  options.redis.replica_ack_timeout = absl::Milliseconds(300);
  auto log = OpenOrFail(primary->Url("/0?stream=acked"), {}, options);
  ASSERT_NE(log, nullptr);
  NewEvent first = MakeEvent("createReport", "payload-1");
  ASSERT_TRUE(log->Append(first).ok());

  ASSERT_EQ(::kill(replica->pid(), SIGSTOP), 0);
  NewEvent second = MakeEvent("createReport", "payload-2");
  absl::StatusOr<AppendResult> refused = log->Append(second);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(redis::IsNotReplicated(refused.status())) << refused.status();
  ASSERT_EQ(::kill(replica->pid(), SIGCONT), 0);

  absl::StatusOr<AppendResult> retried = log->Append(second);
  ASSERT_TRUE(retried.ok()) << retried.status();
  EXPECT_TRUE(retried->duplicate);  // stored once
  auto events = log->ReadAfter("", 10);
  ASSERT_TRUE(events.ok());
  EXPECT_EQ(events->size(), 2u);
}

// A reader hands out only what the replicas hold (an event only the primary has is lost by
// a failover, and its append was refused: the vendor delivers it again). Events confirmed
// once stay readable while the replica is away, also for a reader that starts then.
TEST(RedisEventLogTest, ReadsHandOutOnlyWhatTheReplicasHold) {
  std::string error;
  auto primary = RedisServer::Start(&error);
  ASSERT_NE(primary, nullptr) << error;
  auto replica = RedisServer::StartReplica(&error, *primary);
  ASSERT_NE(replica, nullptr) << error;
  RedisEventLogOptions options;
  options.redis.min_replicas_acked = 1;
  options.redis.replica_ack_timeout = absl::Milliseconds(300);
  const std::string url = primary->Url("/0?stream=fenced");
  auto log = OpenOrFail(url, {}, options);
  ASSERT_NE(log, nullptr);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(log->Append(MakeEvent("createReport", absl::StrCat("payload-", i))).ok());
  }
  auto read = log->ReadAfter("", 10);
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->size(), 3u);
  const std::string third = read->back().cursor;

  ASSERT_EQ(::kill(replica->pid(), SIGSTOP), 0);
  absl::StatusOr<AppendResult> refused = log->Append(MakeEvent("createReport", "payload-3"));
  auto after_stall = log->ReadAfter("", 10);
  auto beyond = log->ReadAfter(third, 10);
  auto fresh = OpenOrFail(url, {}, options);
  ASSERT_NE(fresh, nullptr);
  auto fresh_read = fresh->ReadAfter("", 10);
  ASSERT_EQ(::kill(replica->pid(), SIGCONT), 0);

  EXPECT_FALSE(refused.ok());  // on the primary only: not acknowledged...
  ASSERT_TRUE(after_stall.ok()) << after_stall.status();
  EXPECT_EQ(after_stall->size(), 3u);  // ...and not handed out
  ASSERT_FALSE(beyond.ok());
  EXPECT_EQ(beyond.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(redis::IsNotReplicated(beyond.status())) << beyond.status();
  ASSERT_TRUE(fresh_read.ok()) << fresh_read.status();
  EXPECT_EQ(fresh_read->size(), 3u);

  // The replica caught up: the fourth is confirmed and handed out.
  auto caught_up = log->ReadAfter("", 10);
  ASSERT_TRUE(caught_up.ok()) << caught_up.status();
  EXPECT_EQ(caught_up->size(), 4u);
}

TEST(RedisEventLogTest, OpenFailsWithUnavailableWhenNothingListens) {
  const int port = ::inspection::testing::UnusedClosedPort();
  ASSERT_GT(port, 0);
  const auto start = Clock::now();
  auto log = OpenRedisEventLog("redis://127.0.0.1:" + std::to_string(port), {});
  EXPECT_LT(Clock::now() - start, kPrompt);
  ASSERT_FALSE(log.ok());
  EXPECT_EQ(log.status().code(), absl::StatusCode::kUnavailable) << log.status();
}

TEST(RedisEventLogTest, OpenRejectsABadUrlWithoutShowingThePassword) {
  auto bad_url = OpenRedisEventLog("redis://:hunter2@127.0.0.1:notaport", {});
  ASSERT_FALSE(bad_url.ok());
  EXPECT_EQ(bad_url.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad_url.status().message().find("hunter2"), std::string::npos);
}

TEST(RedisEventLogTest, NonPositiveRetentionLimitsMeanNoLimit) {
  const std::string stream = FreshStream("unlimited");
  RetentionPolicy unlimited;
  unlimited.max_events = 0;
  unlimited.max_age = std::chrono::seconds(0);
  auto log = OpenOrFail(shared_redis_server->Url("/0?stream=" + stream), unlimited);
  ASSERT_NE(log, nullptr);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(log->Append(MakeEvent("e", std::to_string(i), 1)).ok());
  auto removed = log->ApplyRetention(absl::Now() + absl::Hours(24 * 365));
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(*removed, 0);
  RawRedis raw(shared_redis_server->Url());
  // Whatever the retention, the dedupe key lives for the dedupe window (48 h by default).
  const int64_t ttl = raw.Integer({"PTTL", stream + ":dedupe:" + MakeEvent("e", "0").content_hash});
  EXPECT_GT(ttl, 47 * 3600 * 1000);
  EXPECT_LE(ttl, 48 * 3600 * 1000);
}

TEST(RedisEventLogTest, AuthenticatesAndSelectsTheDatabase) {
  std::string error;
  auto server = RedisServer::Start(&error, {"--requirepass", "hunter2"});
  ASSERT_NE(server, nullptr) << error;
  const std::string url = server->Url();
  // The password percent-encoded in the URL, a db other than 0, a stream of our own.
  auto log = OpenOrFail("redis://:hunter%32@127.0.0.1:" + std::to_string(server->port()) +
                        "/3?stream=authed");
  ASSERT_NE(log, nullptr);
  EXPECT_EQ(log->Describe(),
            "redis://127.0.0.1:" + std::to_string(server->port()) + "/3?stream=authed");
  ASSERT_TRUE(log->Append(MakeEvent("e", "1")).ok());
  EXPECT_TRUE(log->CheckWritable().ok());
  RawRedis db3("redis://:hunter2@127.0.0.1:" + std::to_string(server->port()) + "/3");
  EXPECT_EQ(db3.Integer({"XLEN", "authed"}), 1);
  RawRedis db0("redis://:hunter2@127.0.0.1:" + std::to_string(server->port()) + "/0");
  EXPECT_EQ(db0.Integer({"EXISTS", "authed"}), 0);

  auto wrong =
      OpenRedisEventLog("redis://:wrong-hunter3@127.0.0.1:" + std::to_string(server->port()), {});
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kPermissionDenied) << wrong.status();
  EXPECT_EQ(wrong.status().message().find("hunter3"), std::string::npos) << wrong.status();
  auto missing = OpenRedisEventLog(url, {});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kPermissionDenied) << missing.status();
}

TEST(RedisEventLogTest, StoppedServerGivesUnavailableAndARestartWorksThroughTheSameHandle) {
  std::string error;
  auto server = RedisServer::Start(&error);
  ASSERT_NE(server, nullptr) << error;
  auto log = OpenOrFail(server->Url("/0?stream=restart"));
  ASSERT_NE(log, nullptr);
  ASSERT_TRUE(log->Append(MakeEvent("e", "before")).ok());

  ASSERT_TRUE(server->Stop(SIGKILL));
  const auto start = Clock::now();
  absl::StatusOr<AppendResult> refused = log->Append(MakeEvent("e", "during"));
  EXPECT_LT(Clock::now() - start, kPrompt);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable) << refused.status();
  EXPECT_EQ(log->CheckWritable().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(log->ReadAfter("", 10).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(log->LastCursor().status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(log->ApplyRetention(absl::Now()).status().code(), absl::StatusCode::kUnavailable);
  // A wait against a dead server waits out its timeout rather than returning at once
  // (which would make the caller's loop spin); the bound is a sanity check only.
  const auto wait_start = Clock::now();
  log->WaitForAppend("", std::chrono::milliseconds(300));
  EXPECT_GE(Clock::now() - wait_start, std::chrono::milliseconds(300));
  EXPECT_LT(Clock::now() - wait_start, kPrompt);

  ASSERT_TRUE(server->Restart(&error)) << error;
  // No persistence: the restarted server is empty, and the same handle reconnects.
  EXPECT_TRUE(log->CheckWritable().ok());
  absl::StatusOr<AppendResult> after = log->Append(MakeEvent("e", "after"));
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_FALSE(after->duplicate);
  auto all = log->ReadAfter("", 10);
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 1u);
  EXPECT_EQ((*all)[0].cursor, after->cursor);
}

TEST(RedisEventLogTest, ARestartBetweenCallsIsInvisibleToTheNextCall) {
  std::string error;
  auto server = RedisServer::Start(&error);
  ASSERT_NE(server, nullptr) << error;
  auto log = OpenOrFail(server->Url("/0?stream=bounce"));
  ASSERT_NE(log, nullptr);
  ASSERT_TRUE(log->Append(MakeEvent("e", "1")).ok());  // leaves an idle pooled connection
  ASSERT_TRUE(server->Restart(&error)) << error;
  // The pooled connection was closed by the old server: the call notices, drops it and
  // runs once more on a fresh connection instead of failing.
  absl::StatusOr<AppendResult> appended = log->Append(MakeEvent("e", "2"));
  EXPECT_TRUE(appended.ok()) << appended.status();
  ASSERT_TRUE(server->Restart(&error)) << error;
  EXPECT_TRUE(log->ReadAfter("", 10).ok());
}

TEST(RedisEventLogTest, AConnectionTheServerDroppedNeitherFailsTheCallNorRaisesSigpipe) {
  const std::string url = shared_redis_server->Url("/0?stream=" + FreshStream("dropped"));
  auto log = OpenOrFail(url);
  ASSERT_NE(log, nullptr);
  ASSERT_TRUE(log->Append(MakeEvent("e", "warm")).ok());  // leaves an idle connection
  RawRedis raw(shared_redis_server->Url());
  EXPECT_GE(raw.Integer({"CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"}), 1);
  // A payload larger than one socket write: the write after the server's RST fails with
  // EPIPE, which would raise SIGPIPE and kill this process unless the log blocks it.
  NewEvent big = MakeEvent("e", "big");
  big.payload = std::string(8 << 20, 'x');
  big.content_hash = hashing::Sha256Hex(big.payload);
  absl::StatusOr<AppendResult> appended = log->Append(big);
  ASSERT_TRUE(appended.ok()) << appended.status();
  EXPECT_FALSE(appended->duplicate);
}

TEST(RedisEventLogTest, FrozenServerGivesUnavailableAfterTheCommandTimeout) {
  std::string error;
  auto server = RedisServer::Start(&error);
  ASSERT_NE(server, nullptr) << error;
  RedisEventLogOptions options;
  options.command_timeout = absl::Milliseconds(300);
  auto log = OpenOrFail(server->Url("/0?stream=frozen"), {}, options);
  ASSERT_NE(log, nullptr);
  ASSERT_TRUE(log->Append(MakeEvent("e", "warm")).ok());

  ASSERT_EQ(::kill(server->pid(), SIGSTOP), 0);
  const auto start = Clock::now();
  absl::StatusOr<AppendResult> frozen = log->Append(MakeEvent("e", "frozen"));
  EXPECT_LT(Clock::now() - start, kPrompt);
  ASSERT_EQ(::kill(server->pid(), SIGCONT), 0);
  ASSERT_FALSE(frozen.ok());
  EXPECT_EQ(frozen.status().code(), absl::StatusCode::kUnavailable) << frozen.status();

  // The outcome of a timed-out append is unknown (the server runs it once it wakes up),
  // which the content dedupe makes harmless: the retry stores it exactly once.
  absl::StatusOr<AppendResult> retried = log->Append(MakeEvent("e", "frozen"));
  ASSERT_TRUE(retried.ok()) << retried.status();
  auto all = log->ReadAfter("", 10);
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->size(), 2u);
}

TEST(RedisEventLogTest, WaitForAppendReturnsPromptlyWhenAnotherHandleAppends) {
  const std::string url = shared_redis_server->Url("/0?stream=" + FreshStream("wait"));
  auto waiter = OpenOrFail(url);
  auto writer = OpenOrFail(url);
  ASSERT_TRUE(waiter && writer);
  ASSERT_TRUE(writer->Append(MakeEvent("e", "old")).ok());
  const std::string before = *waiter->LastCursor();
  RawRedis raw(shared_redis_server->Url());
  const int blocked_before = raw.BlockedClients();

  std::atomic<bool> returned{false};
  std::thread wait([&] {
    waiter->WaitForAppend(before, std::chrono::seconds(60));
    returned = true;
  });
  // The waiter is parked in XREAD BLOCK on the server, so the append below cannot race
  // ahead of it.
  EXPECT_TRUE(WaitUntil([&] { return raw.BlockedClients() > blocked_before; }, kPrompt));
  EXPECT_FALSE(returned.load());
  ASSERT_TRUE(writer->Append(MakeEvent("e", "new")).ok());
  EXPECT_TRUE(WaitUntil([&] { return returned.load(); }, kPrompt));
  wait.join();
}

TEST(RedisEventLogTest, ABlockedWaitDoesNotHoldUpAppendsOfTheSameHandle) {
  const std::string url = shared_redis_server->Url("/0?stream=" + FreshStream("wait-same"));
  auto log = OpenOrFail(url);
  ASSERT_NE(log, nullptr);
  RawRedis raw(shared_redis_server->Url());
  const int blocked_before = raw.BlockedClients();
  std::atomic<bool> returned{false};
  std::thread wait([&] {
    log->WaitForAppend("", std::chrono::seconds(60));
    returned = true;
  });
  EXPECT_TRUE(WaitUntil([&] { return raw.BlockedClients() > blocked_before; }, kPrompt));
  EXPECT_FALSE(returned.load());
  ASSERT_TRUE(log->Append(MakeEvent("e", "first")).ok());
  EXPECT_TRUE(WaitUntil([&] { return returned.load(); }, kPrompt));
  wait.join();
}

TEST(RedisEventLogTest, WaitForAppendReturnsAtOnceWhenAnEventIsThereAndOtherwiseTimesOut) {
  auto log = OpenOrFail(shared_redis_server->Url("/0?stream=" + FreshStream("wait-now")));
  ASSERT_NE(log, nullptr);
  auto first = log->Append(MakeEvent("e", "1"));
  ASSERT_TRUE(first.ok());
  auto start = Clock::now();
  log->WaitForAppend("", std::chrono::seconds(60));  // "" + an event: nothing to wait for
  EXPECT_LT(Clock::now() - start, kPrompt);
  start = Clock::now();
  log->WaitForAppend(first->cursor, std::chrono::milliseconds(200));
  EXPECT_LT(Clock::now() - start, kPrompt);
  EXPECT_TRUE(log->ReadAfter(first->cursor, 10)->empty());
}

TEST(RedisEventLogTest, RetentionRunsInBatchesAndDeletesTheRemovedEventsDedupeKeys) {
  const std::string stream = FreshStream("batches");
  RetentionPolicy retention;
  retention.max_events = 10;
  retention.max_age = std::chrono::hours(1);
  retention.dedupe_window = std::chrono::minutes(30);
  RedisEventLogOptions options;
  options.retention_batch = 7;
  auto log = OpenOrFail(shared_redis_server->Url("/0?stream=" + stream), retention, options);
  ASSERT_NE(log, nullptr);
  std::vector<std::string> cursors;
  for (int i = 0; i < 50; ++i) {
    auto appended = log->Append(MakeEvent("e", std::to_string(i), 1700000000000 + i));
    ASSERT_TRUE(appended.ok()) << appended.status();
    cursors.push_back(appended->cursor);
  }
  RawRedis raw(shared_redis_server->Url());
  const std::string first_key = stream + ":dedupe:" + MakeEvent("e", "0").content_hash;
  const int64_t ttl = raw.Integer({"PTTL", first_key});
  // The key expires with the dedupe window (independent of max_age).
  EXPECT_GT(ttl, 29 * 60 * 1000);
  EXPECT_LE(ttl, 30 * 60 * 1000);

  auto removed = log->ApplyRetention(absl::FromUnixMillis(1700000000000 + 60000));
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(*removed, 40);
  EXPECT_EQ(raw.Integer({"XLEN", stream}), 10);
  EXPECT_EQ(raw.String({"GET", stream + ":removed_up_to"}), cursors[39]);
  EXPECT_EQ(raw.Integer({"EXISTS", first_key}), 0);
  const std::string kept_key = stream + ":dedupe:" + MakeEvent("e", "40").content_hash;
  EXPECT_EQ(raw.Integer({"EXISTS", kept_key}), 1);
  EXPECT_EQ(log->ReadAfter(cursors[38], 100).status().code(), absl::StatusCode::kOutOfRange);
  auto resumed = log->ReadAfter(cursors[39], 100);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_EQ(resumed->size(), 10u);
  // Nothing more is due: a second run removes nothing.
  EXPECT_EQ(*log->ApplyRetention(absl::FromUnixMillis(1700000000000 + 60000)), 0);
}

TEST(RedisEventLogTest, AgeRetentionRemovesOnlyAPrefixOfTooOldEvents) {
  RetentionPolicy retention;
  retention.max_age = std::chrono::hours(1);
  auto log = OpenOrFail(shared_redis_server->Url("/0?stream=" + FreshStream("age")), retention);
  ASSERT_NE(log, nullptr);
  const int64_t hour = 3600 * 1000, base = 1700000000000;
  // Received at: base, base + 2h, base (a replica with a slow clock), base + 3h.
  ASSERT_TRUE(log->Append(MakeEvent("e", "a", base)).ok());
  ASSERT_TRUE(log->Append(MakeEvent("e", "b", base + 2 * hour)).ok());
  ASSERT_TRUE(log->Append(MakeEvent("e", "c", base)).ok());
  ASSERT_TRUE(log->Append(MakeEvent("e", "d", base + 3 * hour)).ok());
  // At base + 2.5h: "a" is too old; "c" is too but sits behind the younger "b".
  EXPECT_EQ(*log->ApplyRetention(absl::FromUnixMillis(base + 2 * hour + hour / 2)), 1);
  // At base + 3.5h: "b" and then "c" are too old; "d" is not.
  EXPECT_EQ(*log->ApplyRetention(absl::FromUnixMillis(base + 3 * hour + hour / 2)), 2);
  auto kept = log->ReadAfter("", 10);
  ASSERT_TRUE(kept.ok());
  ASSERT_EQ(kept->size(), 1u);
  EXPECT_EQ((*kept)[0].event.received_at_ms, base + 3 * hour);
}

TEST(RedisEventLogTest, ContentOfAnEventTrimmedByHandIsStoredAgain) {
  const std::string stream = FreshStream("by-hand");
  auto log = OpenOrFail(shared_redis_server->Url("/0?stream=" + stream));
  ASSERT_NE(log, nullptr);
  ASSERT_TRUE(log->Append(MakeEvent("e", "x")).ok());
  RawRedis raw(shared_redis_server->Url());
  EXPECT_EQ(raw.Integer({"XTRIM", stream, "MAXLEN", "0"}), 1);
  // Its dedupe key still exists, but "duplicate" means "an event with this content is
  // retained", and none is.
  auto again = log->Append(MakeEvent("e", "x"));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE(again->duplicate);
}

TEST(RedisEventLogTest, CursorsAreValidatedStrictly) {
  auto log = OpenOrFail(shared_redis_server->Url("/0?stream=" + FreshStream("cursors")));
  ASSERT_NE(log, nullptr);
  auto appended = log->Append(MakeEvent("e", "1"));
  ASSERT_TRUE(appended.ok());
  for (const std::string bad : {"1", "1-", "-1", "1-2-3", "a-1", "+1-1", " 1-1", "1-1 ", "1--1",
                                "123456789012345678901-0", "18446744073709551616-0", "0x1-0"}) {
    EXPECT_EQ(log->ReadAfter(bad, 10).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  // Leading zeros are the same ID; "0-0" precedes everything.
  const std::string cursor = appended->cursor;
  const std::string padded = "00" + cursor;
  auto same = log->ReadAfter(padded, 10);
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_TRUE(same->empty());
  auto everything = log->ReadAfter("0-0", 10);
  ASSERT_TRUE(everything.ok());
  EXPECT_EQ(everything->size(), 1u);
  auto after_max = log->ReadAfter("18446744073709551615-18446744073709551615", 10);
  ASSERT_TRUE(after_max.ok()) << after_max.status();
  EXPECT_TRUE(after_max->empty());
  // A zero limit reads nothing.
  auto zero = log->ReadAfter("", 0);
  ASSERT_TRUE(zero.ok());
  EXPECT_TRUE(zero->empty());
}

TEST(RedisEventLogTest, AStreamKeyOfAnotherTypeIsAFailedPrecondition) {
  const std::string stream = FreshStream("wrong-type");
  RawRedis raw(shared_redis_server->Url());
  EXPECT_EQ(raw.String({"SET", stream, "not a stream"}), "OK");
  auto log = OpenOrFail(shared_redis_server->Url("/0?stream=" + stream));
  ASSERT_NE(log, nullptr);
  absl::Status writable = log->CheckWritable();
  EXPECT_EQ(writable.code(), absl::StatusCode::kFailedPrecondition) << writable;
  EXPECT_EQ(log->Append(MakeEvent("e", "1")).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(RedisEventLogTest, AppendRequiresAContentHash) {
  auto log = OpenOrFail(shared_redis_server->Url("/0?stream=" + FreshStream("no-hash")));
  ASSERT_NE(log, nullptr);
  NewEvent event = MakeEvent("e", "1");
  event.content_hash.clear();
  EXPECT_EQ(log->Append(event).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(RedisEventLogTest, SixteenThreadsOnOneHandleStoreEveryDistinctEventOnce) {
  auto log = OpenOrFail(shared_redis_server->Url("/0?stream=" + FreshStream("sixteen")));
  ASSERT_NE(log, nullptr);
  constexpr int kThreads = 16, kEach = 100;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        if (!log->Append(MakeEvent("e", std::to_string(t) + "-" + std::to_string(i))).ok()) {
          ++failures;
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(log->ReadAfter("", 100000)->size(), static_cast<size_t>(kThreads * kEach));
}

}  // namespace
}  // namespace inspection::eventlog
