// EventHub catch-up against a real SQLite log (issue 14): a long filtered catch-up never
// holds up live dispatch, and a catching-up subscriber that does not read is ended.
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "adapters/eventlog/event_log.h"
#include "adapters/hashing/sha256.h"
#include "gateway/streaming/event_hub.h"
#include "tests/support/temp_dir.h"
#include "tests/support/wait.h"

namespace inspection::streaming {
namespace {

using ::inspection::testing::TempDir;
using ::inspection::testing::WaitUntil;

eventlog::NewEvent MakeEvent(const std::string& inspection, int n) {
  eventlog::NewEvent event;
  event.event_name = "newInspection";
  event.inspection_id = inspection;
  event.payload =
      absl::StrCat(R"({"event":"newInspection","inspectionId":")", inspection, R"(","n":)", n, "}");
  event.content_hash = hashing::Sha256Hex(absl::StrCat(inspection, "/", n));
  event.received_at_ms = absl::ToUnixMillis(absl::Now());
  return event;
}

// The SQLite log, counting the reads that start before `boundary` (catch-up reads: the
// live tail only reads after it), and appending one live event during the
// `append_at`-th of them, as a webhook arriving mid-catch-up would.
class ObservedLog final : public eventlog::EventLog {
 public:
  explicit ObservedLog(std::unique_ptr<eventlog::EventLog> inner) : inner_(std::move(inner)) {}

  void Arm(std::string boundary, int append_at) {
    absl::MutexLock lock(&mu_);
    boundary_ = std::move(boundary);
    append_at_ = append_at;
  }
  int catch_up_reads() const { return catch_up_reads_.load(); }

  absl::StatusOr<eventlog::AppendResult> Append(const eventlog::NewEvent& event) override {
    return inner_->Append(event);
  }
  absl::StatusOr<std::vector<eventlog::StoredEvent>> ReadAfter(const std::string& after,
                                                               size_t limit) override {
    bool append = false;
    {
      absl::MutexLock lock(&mu_);
      auto order = eventlog::CompareCursors(after, boundary_);
      if (!boundary_.empty() && order.ok() && *order < 0) {
        append = ++catch_up_reads_ == append_at_;
      }
    }
    if (append) {
      EXPECT_TRUE(inner_->Append(MakeEvent("live", 0)).ok());
    }
    return inner_->ReadAfter(after, limit);
  }
  absl::StatusOr<std::string> LastCursor() override { return inner_->LastCursor(); }
  void WaitForAppend(const std::string& after, std::chrono::milliseconds timeout) override {
    inner_->WaitForAppend(after, timeout);
  }
  absl::StatusOr<int64_t> ApplyRetention(absl::Time now) override {
    return inner_->ApplyRetention(now);
  }
  absl::Status CheckWritable() override { return inner_->CheckWritable(); }
  std::string Describe() const override { return inner_->Describe(); }

 private:
  const std::unique_ptr<eventlog::EventLog> inner_;
  absl::Mutex mu_;
  std::string boundary_ ABSL_GUARDED_BY(mu_);
  int append_at_ ABSL_GUARDED_BY(mu_) = 0;
  std::atomic<int> catch_up_reads_{0};
};

// A sink that reads everything at once (room always), or never (no room).
class TestSink final : public EventSink {
 public:
  TestSink(size_t room, std::function<void()> on_deliver = nullptr)
      : room_(room), on_deliver_(std::move(on_deliver)) {}
  size_t Room() const override { return room_; }
  bool Deliver(std::shared_ptr<const EncodedEvent> event) override {
    // The shared wire bytes are the event's serialization, counted at their size.
    EXPECT_EQ(event->bytes, event->wire.size());
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(event->wire.begin()), event->wire.size()),
              event->event.SerializeAsString());
    if (on_deliver_) on_deliver_();
    absl::MutexLock lock(&mu_);
    delivered_.push_back(event->event.inspection_id());
    return true;
  }
  void End(const grpc::Status& status) override {
    absl::MutexLock lock(&mu_);
    ended_ = status;
  }
  std::vector<std::string> delivered() const {
    absl::MutexLock lock(&mu_);
    return delivered_;
  }
  std::optional<grpc::Status> ended() const {
    absl::MutexLock lock(&mu_);
    return ended_;
  }

 private:
  const size_t room_;
  const std::function<void()> on_deliver_;
  mutable absl::Mutex mu_;
  std::vector<std::string> delivered_ ABSL_GUARDED_BY(mu_);
  std::optional<grpc::Status> ended_ ABSL_GUARDED_BY(mu_);
};

// Appends `n` events for inspection "old", from a few threads so SQLite's group commit
// keeps this quick.
void Fill(eventlog::EventLog& log, int n) {
  std::vector<std::thread> threads;
  constexpr int kThreads = 4;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&log, n, t] {
      for (int i = t; i < n; i += kThreads) ASSERT_TRUE(log.Append(MakeEvent("old", i)).ok());
    });
  }
  for (auto& thread : threads) thread.join();
}

TEST(EventHubCatchUpTest, ALongFilteredCatchUpDoesNotHoldUpLiveDispatch) {
  TempDir dir;
  auto sqlite = eventlog::OpenSqliteEventLog(dir.File("events.db"), eventlog::RetentionPolicy{});
  ASSERT_TRUE(sqlite.ok()) << sqlite.status();
  ObservedLog log(std::move(*sqlite));
  constexpr int kStored = 400;
  Fill(log, kStored);
  auto boundary = log.LastCursor();
  ASSERT_TRUE(boundary.ok());

  EventHub::Options options;
  options.read_batch = 10;
  options.catchup_events_per_turn = 10;  // 40 slices to scan the whole log
  EventHub hub(&log, options);
  ASSERT_TRUE(hub.Start().ok());

  std::atomic<int> reads_at_live_delivery{-1};
  auto live = std::make_shared<TestSink>(1000, [&] {
    int expected = -1;
    reads_at_live_delivery.compare_exchange_strong(expected, log.catch_up_reads());
  });
  EventFilter live_filter;
  live_filter.inspection_id = "live";
  ASSERT_NE(hub.Subscribe(live, live_filter, "", /*from_start=*/false), 0u);
  // The live subscription is registered before the catch-up starts.
  ASSERT_TRUE(WaitUntil([&] { return hub.SubscriberCount() == 1; }, std::chrono::seconds(5)));

  // A catch-up over the whole log for an inspection that has no events.
  auto nope = std::make_shared<TestSink>(1000);
  EventFilter nope_filter;
  nope_filter.inspection_id = "nope";
  log.Arm(*boundary, /*append_at=*/5);
  ASSERT_NE(hub.Subscribe(nope, nope_filter, "", /*from_start=*/true), 0u);

  ASSERT_TRUE(WaitUntil([&] { return !live->delivered().empty(); }, std::chrono::seconds(10)));
  EXPECT_EQ(live->delivered(), std::vector<std::string>{"live"});
  // The live event was appended during the 5th catch-up slice and dispatched right after
  // it, not after the 40 slices of the whole catch-up.
  EXPECT_GE(reads_at_live_delivery.load(), 5);
  EXPECT_LE(reads_at_live_delivery.load(), 6);
  // The catch-up still finishes, having delivered nothing.
  ASSERT_TRUE(
      WaitUntil([&] { return log.catch_up_reads() >= kStored / 10; }, std::chrono::seconds(10)));
  EXPECT_TRUE(nope->delivered().empty());
  EXPECT_FALSE(nope->ended().has_value());
  hub.Stop();
}

TEST(EventHubCatchUpTest, ACatchingUpSubscriberThatNeverReadsIsEnded) {
  TempDir dir;
  auto log = eventlog::OpenSqliteEventLog(dir.File("events.db"), eventlog::RetentionPolicy{});
  ASSERT_TRUE(log.ok()) << log.status();
  Fill(**log, 20);
  EventHub::Options options;
  options.catchup_idle_timeout = std::chrono::milliseconds(100);
  EventHub hub(log->get(), options);
  ASSERT_TRUE(hub.Start().ok());

  auto stuck = std::make_shared<TestSink>(0);  // its queue is full and stays full
  ASSERT_NE(hub.Subscribe(stuck, EventFilter{}, "", /*from_start=*/true), 0u);
  ASSERT_TRUE(WaitUntil([&] { return stuck->ended().has_value(); }, std::chrono::seconds(10)));
  EXPECT_EQ(stuck->ended()->error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(stuck->ended()->error_message().find("streams.catchup_idle_timeout_ms"),
            std::string::npos);
  EXPECT_TRUE(WaitUntil([&] { return hub.SubscriberCount() == 0; }, std::chrono::seconds(5)));

  // A catching-up subscriber that reads is not ended, however long its catch-up takes.
  auto reading = std::make_shared<TestSink>(1000);
  ASSERT_NE(hub.Subscribe(reading, EventFilter{}, "", /*from_start=*/true), 0u);
  ASSERT_TRUE(
      WaitUntil([&] { return reading->delivered().size() == 20; }, std::chrono::seconds(10)));
  EXPECT_FALSE(reading->ended().has_value());
  hub.Stop();
}

TEST(EventFilterTest, MatchesStoredColumnsLikeTheConvertedEvent) {
  eventlog::StoredEvent stored;
  stored.cursor = "s:1";
  stored.event = MakeEvent("i-1", 1);
  stored.event.token_id = "t-1";
  stored.event.account = "preprod";
  const v1::Event converted = ToApiEvent(stored);
  std::vector<EventFilter> filters(6);
  filters[0].account = "preprod";
  filters[1].account = "preprod";
  filters[1].inspection_id = "i-1";
  filters[1].token_uid = "t-1";
  filters[1].names = {"newInspection"};
  filters[2].account = "";  // another account
  filters[3].account = "preprod";
  filters[3].names = {"createReport"};
  filters[4].account = "preprod";
  filters[4].inspection_id = "i-2";
  filters[5].account = "preprod";
  filters[5].token_uid = "t-2";
  const std::vector<bool> expected = {true, true, false, false, false, false};
  for (size_t i = 0; i < filters.size(); ++i) {
    EXPECT_EQ(filters[i].Matches(stored.event), expected[i]) << i;
    EXPECT_EQ(filters[i].Matches(converted), expected[i]) << i;
  }
}

}  // namespace
}  // namespace inspection::streaming

namespace inspection::streaming {
namespace {

// A log that refuses every read at once while `refusing` (Redis whose replicas are gone,
// with min-replicas-to-write unmet), and whose WaitForAppend returns at once, as XREAD does
// while entries follow the tail.
class RefusingLog final : public eventlog::EventLog {
 public:
  explicit RefusingLog(std::unique_ptr<eventlog::EventLog> inner) : inner_(std::move(inner)) {}
  std::atomic<bool> refusing{true};
  std::atomic<int> refused_reads{0};
  std::atomic<int64_t> fourth_refusal_ms{0};
  int64_t first_refusal_ms = 0;

  absl::StatusOr<eventlog::AppendResult> Append(const eventlog::NewEvent& event) override {
    return inner_->Append(event);
  }
  absl::StatusOr<std::vector<eventlog::StoredEvent>> ReadAfter(const std::string& after,
                                                               size_t limit) override {
    if (refusing.load()) {
      const int n = ++refused_reads;
      const int64_t now = absl::ToUnixMillis(absl::Now());
      if (n == 1) first_refusal_ms = now;
      if (n == 4) fourth_refusal_ms = now;
      return absl::UnavailableError("NOREPLICAS Not enough good replicas to write");
    }
    return inner_->ReadAfter(after, limit);
  }
  absl::StatusOr<std::string> LastCursor() override { return inner_->LastCursor(); }
  void WaitForAppend(const std::string&, std::chrono::milliseconds) override {}
  absl::StatusOr<int64_t> ApplyRetention(absl::Time now) override {
    return inner_->ApplyRetention(now);
  }
  absl::Status CheckWritable() override { return inner_->CheckWritable(); }
  std::string Describe() const override { return inner_->Describe(); }

 private:
  const std::unique_ptr<eventlog::EventLog> inner_;
};

// Review of issue 33: a tail read that failed at once was retried at once (88,789 reads
// in 5 s against a Redis refusing its fence). The hub now rests 50 ms, 100 ms, 200 ms ...
// (up to 1 s) between failed reads, and delivers as soon as the log reads again.
TEST(EventHubCatchUpTest, ALogThatRefusesReadsAtOnceIsRetriedWithBackOff) {
  TempDir dir;
  auto sqlite = eventlog::OpenSqliteEventLog(dir.File("events.db"), eventlog::RetentionPolicy{});
  ASSERT_TRUE(sqlite.ok()) << sqlite.status();
  RefusingLog log(*std::move(sqlite));
  EventHub hub(&log, EventHub::Options{});
  ASSERT_TRUE(hub.Start().ok());
  auto live = std::make_shared<TestSink>(1000);
  ASSERT_NE(hub.Subscribe(live, EventFilter{}, "", /*from_start=*/false), 0u);

  ASSERT_TRUE(WaitUntil([&] { return log.refused_reads.load() >= 4; }, std::chrono::seconds(10)));
  // Three rests at least (50 + 100 + 200 ms) lie between the first and the fourth refusal;
  // a busy loop makes them microseconds apart.
  EXPECT_GE(log.fourth_refusal_ms.load() - log.first_refusal_ms, 350);

  // The log reads again: the next event is delivered.
  ASSERT_TRUE(log.Append(MakeEvent("after", 1)).ok());
  log.refusing = false;
  EXPECT_TRUE(WaitUntil([&] { return !live->delivered().empty(); }, std::chrono::seconds(10)));
  hub.Stop();
}

}  // namespace
}  // namespace inspection::streaming
