// The WorkLedger contract on Redis (a redis-server started by the test), and what only a
// server can show.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "adapters/eventlog/event_log.h"
#include "adapters/eventlog/work_ledger.h"
#include "adapters/redis/redis_connection.h"
#include "adapters/redis/redis_url.h"
#include "tests/adapters/eventlog/work_ledger_conformance.h"
#include "tests/support/redis_server.h"
#include "tests/support/shared_redis_server.h"
#include "tests/support/wait.h"

namespace inspection::eventlog {
namespace {

using ::inspection::eventlog::testing::WorkLedgerConformanceTest;
using ::inspection::testing::RedisServer;
using ::inspection::testing::shared_redis_server;
using ::inspection::testing::WaitUntil;

// One key prefix per test: the scratch directory's name is unique.
std::unique_ptr<WorkLedger> OpenIn(const std::string& scratch) {
  const std::string prefix = "work-test-" + scratch.substr(scratch.rfind('/') + 1);
  auto ledger = OpenRedisWorkLedger(shared_redis_server->Url("/0?stream=" + prefix));
  EXPECT_TRUE(ledger.ok()) << ledger.status();
  return ledger.ok() ? std::move(*ledger) : nullptr;
}

INSTANTIATE_TEST_SUITE_P(Redis, WorkLedgerConformanceTest, ::testing::Values(&OpenIn));

TEST(RedisWorkLedgerTest, AnUnreachableRedisIsUnavailableAndABadUrlInvalid) {
  auto down = OpenRedisWorkLedger("redis://127.0.0.1:1/0");
  ASSERT_FALSE(down.ok());
  EXPECT_EQ(down.status().code(), absl::StatusCode::kUnavailable) << down.status();
  auto bad = OpenRedisWorkLedger("redis://:s3cret@/0");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message().find("s3cret"), std::string::npos);
}

// One command on a connection of the test's own (what only the server can tell).
redis::RedisReply Raw(redis::RedisConnection& connection, const std::vector<std::string>& args) {
  absl::StatusOr<redis::RedisReply> reply = connection.Command(args);
  EXPECT_TRUE(reply.ok()) << reply.status();
  if (!reply.ok()) return nullptr;
  EXPECT_NE((*reply)->type, REDIS_REPLY_ERROR) << args[0] << ": " << (*reply)->str;
  return *std::move(reply);
}

// Issue 31: forgetting old items must not block the Redis the event log shares. 50,000
// items older than max_age go in scripts of at most kRedisWorkLedgerTrimBatch items, and
// an event log appending all along is served between them. The server's slow log, set to
// log every command, tells which scripts ran and in what order.
TEST(RedisWorkLedgerTest, ALargeTrimRunsInBoundedScriptsAndAppendsAreServedBetweenThem) {
  std::string error;
  std::unique_ptr<RedisServer> server = RedisServer::Start(&error);
  ASSERT_NE(server, nullptr) << error;
  const std::string url = server->Url("/0?stream=trim");
  constexpr int kOld = 50000;
  constexpr int kWriters = 4;
  std::atomic<int> failures{0};
  std::vector<std::thread> writers;
  for (int w = 0; w < kWriters; ++w) {
    writers.emplace_back([&, w] {
      auto ledger = OpenRedisWorkLedger(url);
      if (!ledger.ok()) {
        ++failures;
        return;
      }
      for (int i = w; i < kOld; i += kWriters) {
        WorkItem item;
        item.id = absl::StrCat("old-", i);
        item.started_at_ms = 1000 + i;
        item.next_poll_at_ms = 2000000 + i;
        if (!(*ledger)->Record(item).ok()) ++failures;
      }
    });
  }
  for (std::thread& writer : writers) writer.join();
  ASSERT_EQ(failures.load(), 0);
  auto ledger = OpenRedisWorkLedger(url);
  ASSERT_TRUE(ledger.ok()) << ledger.status();
  for (int i = 0; i < 3; ++i) {
    WorkItem recent;
    recent.id = absl::StrCat("recent-", i);
    recent.started_at_ms = 1000000 + i;
    recent.next_poll_at_ms = 2000000;
    ASSERT_TRUE((*ledger)->Record(recent).ok());
  }
  ASSERT_EQ(*(*ledger)->CountPending(INT64_MAX), kOld + 3);

  absl::StatusOr<redis::RedisUrl> parsed = redis::ParseRedisUrl(url);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  auto raw = redis::RedisConnection::Open(*parsed, redis::RedisTimeouts());
  ASSERT_TRUE(raw.ok()) << raw.status();
  ASSERT_NE(Raw(**raw, {"CONFIG", "SET", "slowlog-max-len", "1000000"}), nullptr);

  // A replica's event log appending all along (webhooks arriving during the trim).
  auto log = OpenRedisEventLog(server->Url("/0?stream=events"), RetentionPolicy{});
  ASSERT_TRUE(log.ok()) << log.status();
  std::atomic<bool> stop{false};
  std::atomic<int> appended{0};
  std::thread appender([&] {
    for (int n = 0; !stop.load(); ++n) {
      NewEvent event;
      event.event_name = "newInspection";
      event.inspection_id = absl::StrCat("insp-", n);
      event.payload = absl::StrCat(R"({"n":)", n, "}");
      event.content_hash = absl::StrCat("hash-", n);
      event.received_at_ms = 1700000000000;
      if ((*log)->Append(event).ok()) ++appended;
    }
  });
  const bool appending = WaitUntil([&] { return appended.load() >= 10; }, std::chrono::seconds(10));
  ASSERT_NE(Raw(**raw, {"SLOWLOG", "RESET"}), nullptr);
  ASSERT_NE(Raw(**raw, {"CONFIG", "SET", "slowlog-log-slower-than", "0"}), nullptr);
  absl::StatusOr<int64_t> trimmed = (*ledger)->Trim(1000000);
  ASSERT_NE(Raw(**raw, {"CONFIG", "SET", "slowlog-log-slower-than", "10000"}), nullptr);
  stop = true;
  appender.join();
  ASSERT_TRUE(appending) << "the event log never appended";
  ASSERT_TRUE(trimmed.ok()) << trimmed.status();
  EXPECT_EQ(*trimmed, kOld);
  EXPECT_EQ(*(*ledger)->CountPending(INT64_MAX), 3) << "the recent items stay";

  // Slow log entries: [id, time, microseconds, [args...], client, name]; ids grow with
  // the order the server ran the commands in.
  redis::RedisReply entries = Raw(**raw, {"SLOWLOG", "GET", "-1"});
  ASSERT_NE(entries, nullptr);
  ASSERT_EQ(entries->type, REDIS_REPLY_ARRAY);
  std::vector<int64_t> trim_ids;
  std::vector<int64_t> append_ids;
  int64_t longest_trim_us = 0;
  int64_t total_trim_us = 0;
  for (size_t i = 0; i < entries->elements; ++i) {
    const redisReply* entry = entries->element[i];
    ASSERT_GE(entry->elements, 4u);
    const redisReply* args = entry->element[3];
    std::vector<std::string> argv;
    for (size_t a = 0; a < args->elements; ++a) {
      argv.emplace_back(args->element[a]->str, args->element[a]->len);
    }
    bool trim = false;
    bool append = false;
    for (const std::string& arg : argv) {
      trim = trim || arg == "trim:work:started";
      append = append || arg.rfind("events", 0) == 0;
    }
    if (trim && (argv[0] == "EVAL" || argv[0] == "EVALSHA")) {
      trim_ids.push_back(entry->element[0]->integer);
      const int64_t us = entry->element[2]->integer;
      longest_trim_us = std::max(longest_trim_us, us);
      total_trim_us += us;
    } else if (append) {
      append_ids.push_back(entry->element[0]->integer);
    }
  }
  ASSERT_FALSE(trim_ids.empty()) << "no trim script in the slow log";
  const auto [first, last] = std::minmax_element(trim_ids.begin(), trim_ids.end());
  int appends_between = 0;
  for (int64_t id : append_ids) appends_between += id > *first && id < *last ? 1 : 0;
  EXPECT_GE(static_cast<int64_t>(trim_ids.size()), kOld / kRedisWorkLedgerTrimBatch)
      << "scripts of at most " << kRedisWorkLedgerTrimBatch << " items";
  EXPECT_GT(appends_between, 0) << "event log commands served while the trim ran";
  std::printf(
      "trim: %zu scripts, longest %lld us, %lld us in all; %d event log commands served "
      "between them\n",
      trim_ids.size(), static_cast<long long>(longest_trim_us),
      static_cast<long long>(total_trim_us), appends_between);
}

}  // namespace
}  // namespace inspection::eventlog
