#ifndef TESTS_ADAPTERS_EVENTLOG_EVENT_LOG_CONFORMANCE_H_
#define TESTS_ADAPTERS_EVENTLOG_EVENT_LOG_CONFORMANCE_H_

// The contract of eventlog::EventLog, run against every backend: a backend's test file
// defines a factory and instantiates the suite:
//
//   class SqliteFactory : public EventLogFactory { ... };
//   INSTANTIATE_TEST_SUITE_P(Sqlite, EventLogConformanceTest,
//                            ::testing::Values(&sqlite_factory));

#include <atomic>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "adapters/eventlog/event_log.h"
#include "adapters/hashing/sha256.h"

namespace inspection::eventlog::testing {

class EventLogFactory {
 public:
  virtual ~EventLogFactory() = default;
  // A new, empty log for one test.
  virtual std::unique_ptr<EventLog> Create(RetentionPolicy retention) = 0;
  // Opens the same store again (a second process or replica); may return nullptr for
  // the in-memory case, but both backends here support it.
  virtual std::unique_ptr<EventLog> Reopen(RetentionPolicy retention) = 0;
};

inline NewEvent MakeEvent(const std::string& name, const std::string& body_suffix,
                          int64_t at_ms = 1700000000000) {
  NewEvent event;
  event.event_name = name;
  event.inspection_id = "insp_" + body_suffix;
  event.token_id = "tok_" + body_suffix;
  event.vehicle_id = "veh_" + body_suffix;
  event.payload = R"({"event":")" + name + R"(","n":")" + body_suffix + R"("})";
  event.content_hash = hashing::Sha256Hex(event.payload);
  event.received_at_ms = at_ms;
  return event;
}

// MakeEvent for the vendor account `account`, hashed the way the contract asks of the
// caller: the duplicate key covers the account as well as the payload.
inline NewEvent MakeAccountEvent(const std::string& account, const std::string& name,
                                 const std::string& body_suffix, int64_t at_ms = 1700000000000) {
  NewEvent event = MakeEvent(name, body_suffix, at_ms);
  event.account = account;
  if (!account.empty()) event.content_hash = hashing::Sha256Hex(account + "\n" + event.payload);
  return event;
}

class EventLogConformanceTest : public ::testing::TestWithParam<EventLogFactory*> {
 protected:
  std::unique_ptr<EventLog> Create(RetentionPolicy retention = {}) {
    return GetParam()->Create(retention);
  }
};

TEST_P(EventLogConformanceTest, AppendThenReadInOrderWithEveryField) {
  auto log = Create();
  ASSERT_NE(log, nullptr);
  EXPECT_EQ(*log->LastCursor(), "");
  std::vector<std::string> cursors;
  for (int i = 0; i < 5; ++i) {
    auto appended = log->Append(MakeEvent("createReport", std::to_string(i), 1700000000000 + i));
    ASSERT_TRUE(appended.ok()) << appended.status();
    EXPECT_FALSE(appended->duplicate);
    cursors.push_back(appended->cursor);
  }
  EXPECT_EQ(*log->LastCursor(), cursors.back());
  auto all = log->ReadAfter("", 100);
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 5u);
  for (int i = 0; i < 5; ++i) {
    const StoredEvent& stored = (*all)[i];
    const NewEvent expected = MakeEvent("createReport", std::to_string(i), 1700000000000 + i);
    EXPECT_EQ(stored.cursor, cursors[i]);
    EXPECT_EQ(stored.event.account, "");
    EXPECT_EQ(stored.event.event_name, expected.event_name);
    EXPECT_EQ(stored.event.inspection_id, expected.inspection_id);
    EXPECT_EQ(stored.event.token_id, expected.token_id);
    EXPECT_EQ(stored.event.vehicle_id, expected.vehicle_id);
    EXPECT_EQ(stored.event.payload, expected.payload);
    EXPECT_EQ(stored.event.content_hash, expected.content_hash);
    EXPECT_EQ(stored.event.received_at_ms, expected.received_at_ms);
  }
}

TEST_P(EventLogConformanceTest, TheAccountRoundTrips) {
  auto log = Create();
  ASSERT_NE(log, nullptr);
  const std::vector<NewEvent> events = {
      MakeAccountEvent("", "createReport", "default"),
      MakeAccountEvent("fleet-north", "createReport", "north"),
      MakeAccountEvent("", "newInspection", "default-2"),
      // Not only [a-z-]: whatever the receiver derives from the webhook path.
      MakeAccountEvent("Fleet South/\xc3\xa4 2", "newInspection", "south"),
  };
  std::vector<std::string> cursors;
  for (const NewEvent& event : events) {
    auto appended = log->Append(event);
    ASSERT_TRUE(appended.ok()) << appended.status();
    EXPECT_FALSE(appended->duplicate);
    cursors.push_back(appended->cursor);
  }
  auto all = log->ReadAfter("", 100);
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), events.size());
  for (size_t i = 0; i < events.size(); ++i) {
    const StoredEvent& stored = (*all)[i];
    EXPECT_EQ(stored.cursor, cursors[i]);
    EXPECT_EQ(stored.event.account, events[i].account) << i;
    EXPECT_EQ(stored.event.event_name, events[i].event_name) << i;
    EXPECT_EQ(stored.event.payload, events[i].payload) << i;
    EXPECT_EQ(stored.event.content_hash, events[i].content_hash) << i;
  }
  // Reading after a cursor, and through another handle, returns it too.
  auto after = log->ReadAfter(cursors[0], 1);
  ASSERT_TRUE(after.ok()) << after.status();
  ASSERT_EQ(after->size(), 1u);
  EXPECT_EQ((*after)[0].event.account, "fleet-north");
  auto other = GetParam()->Reopen({});
  ASSERT_NE(other, nullptr);
  auto reread = other->ReadAfter(cursors[2], 10);
  ASSERT_TRUE(reread.ok()) << reread.status();
  ASSERT_EQ(reread->size(), 1u);
  EXPECT_EQ((*reread)[0].event.account, "Fleet South/\xc3\xa4 2");
}

TEST_P(EventLogConformanceTest,
       IdenticalBodiesOfTwoAccountsAreTwoEventsWhenTheHashCoversTheAccount) {
  auto log = Create();
  ASSERT_NE(log, nullptr);
  const NewEvent north = MakeAccountEvent("north", "createReport", "same-body");
  const NewEvent south = MakeAccountEvent("south", "createReport", "same-body");
  const NewEvent by_default = MakeAccountEvent("", "createReport", "same-body");
  ASSERT_EQ(north.payload, south.payload);
  ASSERT_EQ(north.payload, by_default.payload);
  std::set<std::string> cursors;
  for (const NewEvent& event : {north, south, by_default}) {
    auto appended = log->Append(event);
    ASSERT_TRUE(appended.ok()) << appended.status();
    EXPECT_FALSE(appended->duplicate) << event.account;
    cursors.insert(appended->cursor);
  }
  EXPECT_EQ(cursors.size(), 3u);
  // A redelivery to one account is still a duplicate of that account's event only.
  auto again = log->Append(south);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->duplicate);
  auto all = log->ReadAfter("", 100);
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ((*all)[1].cursor, again->cursor);
  EXPECT_EQ((*all)[1].event.account, "south");
}

TEST_P(EventLogConformanceTest, ReadAfterACursorHasNoGapAndNoDuplicate) {
  auto log = Create();
  std::vector<std::string> cursors;
  for (int i = 0; i < 10; ++i)
    cursors.push_back(log->Append(MakeEvent("e", std::to_string(i)))->cursor);
  auto after = log->ReadAfter(cursors[3], 100);
  ASSERT_TRUE(after.ok()) << after.status();
  ASSERT_EQ(after->size(), 6u);
  EXPECT_EQ((*after)[0].cursor, cursors[4]);
  EXPECT_EQ(after->back().cursor, cursors[9]);
  auto limited = log->ReadAfter(cursors[3], 2);
  ASSERT_EQ(limited->size(), 2u);
  EXPECT_EQ((*limited)[1].cursor, cursors[5]);
  auto none = log->ReadAfter(cursors[9], 100);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

TEST_P(EventLogConformanceTest, SameContentIsStoredOnce) {
  auto log = Create();
  auto first = log->Append(MakeEvent("createReport", "a"));
  auto again = log->Append(MakeEvent("createReport", "a"));
  ASSERT_TRUE(first.ok() && again.ok());
  EXPECT_FALSE(first->duplicate);
  EXPECT_TRUE(again->duplicate);
  EXPECT_EQ(again->cursor, first->cursor);
  EXPECT_EQ(log->ReadAfter("", 100)->size(), 1u);
}

// The dedupe window is independent of retention: inside it a byte-identical delivery is
// the same event; a whole window later (a second TestWebhook, a re-run) it is a new one,
// and the one after that is a duplicate of the new one.
TEST_P(EventLogConformanceTest, SameContentAfterTheDedupeWindowIsANewEvent) {
  RetentionPolicy retention;
  retention.max_age = std::chrono::hours(24 * 30);
  retention.dedupe_window = std::chrono::hours(1);
  auto log = Create(retention);
  const int64_t t0 = 1700000000000;
  const int64_t hour_ms = 3600 * 1000;
  auto first = log->Append(MakeEvent("testWebhook", "same", t0));
  auto inside = log->Append(MakeEvent("testWebhook", "same", t0 + hour_ms - 1));
  auto after = log->Append(MakeEvent("testWebhook", "same", t0 + hour_ms));
  auto after_again = log->Append(MakeEvent("testWebhook", "same", t0 + hour_ms + 1000));
  ASSERT_TRUE(first.ok() && inside.ok() && after.ok() && after_again.ok());
  EXPECT_FALSE(first->duplicate);
  EXPECT_TRUE(inside->duplicate);
  EXPECT_EQ(inside->cursor, first->cursor);
  EXPECT_FALSE(after->duplicate);
  EXPECT_NE(after->cursor, first->cursor);
  EXPECT_TRUE(after_again->duplicate);
  EXPECT_EQ(after_again->cursor, after->cursor);
  auto all = log->ReadAfter("", 100);
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].event.payload, (*all)[1].event.payload);
  EXPECT_EQ((*all)[1].event.received_at_ms, t0 + hour_ms);
}

TEST_P(EventLogConformanceTest, ConcurrentAppendsAreAllStoredInOneTotalOrder) {
  auto log = Create();
  constexpr int kThreads = 8, kEach = 50;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        // Every other append repeats one shared body: stored once in total.
        const std::string suffix =
            i % 2 == 0 ? "shared" : std::to_string(t) + "-" + std::to_string(i);
        if (!log->Append(MakeEvent("e", suffix)).ok()) ++failures;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
  auto all = log->ReadAfter("", 100000);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), static_cast<size_t>(kThreads * kEach / 2 + 1));
  std::set<std::string> seen;
  for (const auto& stored : *all) EXPECT_TRUE(seen.insert(stored.cursor).second);
  // Reading page by page after each cursor gives the same order.
  std::string cursor;
  size_t count = 0;
  for (;;) {
    auto page = log->ReadAfter(cursor, 7);
    ASSERT_TRUE(page.ok());
    if (page->empty()) break;
    for (const auto& stored : *page) EXPECT_EQ(stored.cursor, (*all)[count++].cursor);
    cursor = page->back().cursor;
  }
  EXPECT_EQ(count, all->size());
}

TEST_P(EventLogConformanceTest, ASecondHandleOnTheSameStoreSeesEverything) {
  auto writer = Create();
  auto reader = GetParam()->Reopen({});
  ASSERT_NE(reader, nullptr);
  auto appended = writer->Append(MakeEvent("newInspection", "x"));
  ASSERT_TRUE(appended.ok());
  auto read = reader->ReadAfter("", 10);
  ASSERT_TRUE(read.ok());
  ASSERT_EQ(read->size(), 1u);
  EXPECT_EQ((*read)[0].cursor, appended->cursor);
  // Duplicates are recognised across handles (replicas) too.
  EXPECT_TRUE(reader->Append(MakeEvent("newInspection", "x"))->duplicate);
}

TEST_P(EventLogConformanceTest, WaitForAppendWakesOnAnAppendFromAnotherHandle) {
  auto waiter = Create();
  auto writer = GetParam()->Reopen({});
  const std::string before = *waiter->LastCursor();
  std::thread append([&] { ASSERT_TRUE(writer->Append(MakeEvent("e", "wake")).ok()); });
  // Wait until the event is readable, with WaitForAppend between reads (a deadline, not
  // a fixed sleep: each wait returns as soon as an append may have happened).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  bool seen = false;
  while (!seen && std::chrono::steady_clock::now() < deadline) {
    waiter->WaitForAppend(before, std::chrono::milliseconds(500));
    seen = !waiter->ReadAfter(before, 10)->empty();
  }
  append.join();
  EXPECT_TRUE(seen);
}

TEST_P(EventLogConformanceTest, RetentionByCountAndAgeMakesOldCursorsOutOfRange) {
  RetentionPolicy retention;
  retention.max_events = 3;
  retention.max_age = std::chrono::hours(1);
  auto log = Create(retention);
  const int64_t base = 1700000000000;
  std::vector<std::string> cursors;
  for (int i = 0; i < 6; ++i) {
    cursors.push_back(log->Append(MakeEvent("e", std::to_string(i), base + i * 1000))->cursor);
  }
  // Now = a minute after the last event: only the count limit applies.
  auto removed = log->ApplyRetention(absl::FromUnixMillis(base + 5000 + 60000));
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(*removed, 3);
  auto kept = log->ReadAfter("", 100);
  ASSERT_EQ(kept->size(), 3u);
  EXPECT_EQ((*kept)[0].cursor, cursors[3]);
  // Resuming after the newest removed event is still gap-free...
  EXPECT_TRUE(log->ReadAfter(cursors[2], 100).ok());
  // ...but after an older one, events were lost: OUT_OF_RANGE.
  EXPECT_EQ(log->ReadAfter(cursors[0], 100).status().code(), absl::StatusCode::kOutOfRange);
  // Two hours later everything is too old.
  EXPECT_EQ(*log->ApplyRetention(absl::FromUnixMillis(base + 2 * 3600 * 1000)), 3);
  EXPECT_TRUE(log->ReadAfter("", 100)->empty());
  EXPECT_EQ(log->ReadAfter(cursors[4], 100).status().code(), absl::StatusCode::kOutOfRange);
  // A removed event's content may be stored again (its duplicate key expired with it).
  EXPECT_FALSE(log->Append(MakeEvent("e", "0", base + 3 * 3600 * 1000))->duplicate);
}

TEST_P(EventLogConformanceTest, MalformedCursorIsInvalidArgument) {
  auto log = Create();
  EXPECT_EQ(log->ReadAfter("not a cursor!", 10).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_P(EventLogConformanceTest, IsWritableAndDescribesItselfWithoutSecrets) {
  auto log = Create();
  EXPECT_TRUE(log->CheckWritable().ok());
  EXPECT_FALSE(log->Describe().empty());
  EXPECT_EQ(log->Describe().find("password"), std::string::npos);
}

}  // namespace inspection::eventlog::testing

#endif  // TESTS_ADAPTERS_EVENTLOG_EVENT_LOG_CONFORMANCE_H_
