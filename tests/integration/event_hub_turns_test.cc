// EventHub driven turn by turn (Options::run_thread = false) on an injected clock, against a
// real SQLite log: catch-up slices, live dispatch between them and the idle catch-up
// timeout, with exact counts and times (issue 15: the orchestrators' unit tests).
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "adapters/eventlog/event_log.h"
#include "adapters/hashing/sha256.h"
#include "gateway/streaming/event_hub.h"
#include "tests/support/temp_dir.h"

namespace inspection::streaming {
namespace {

using ::inspection::testing::TempDir;
using std::chrono::milliseconds;

eventlog::NewEvent MakeEvent(const std::string& inspection, int n) {
  eventlog::NewEvent event;
  event.event_name = "newInspection";
  event.inspection_id = inspection;
  event.payload = absl::StrCat(R"({"inspectionId":")", inspection, R"(","n":)", n, "}");
  event.content_hash = hashing::Sha256Hex(absl::StrCat(inspection, "/", n));
  event.received_at_ms = absl::ToUnixMillis(absl::Now());  // within retention
  return event;
}

class Sink final : public EventSink {
 public:
  explicit Sink(size_t room) : room_(room) {}
  size_t Room() const override { return room_; }
  // A queue that the test drains by hand: each delivery takes one place.
  bool Deliver(std::shared_ptr<const EncodedEvent> event) override {
    delivered.push_back(event->event.inspection_id());
    if (room_ > 0) --room_;
    if (on_deliver) on_deliver();
    return true;
  }
  // Called after each delivery, on the hub's thread (a write that completes at once).
  std::function<void()> on_deliver;
  void End(const grpc::Status& status) override { ended = status; }

  size_t room_;
  std::vector<std::string> delivered;
  std::optional<grpc::Status> ended;
};

class EventHubTurnsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto log = eventlog::OpenSqliteEventLog(dir_.File("events.db"), eventlog::RetentionPolicy{});
    ASSERT_TRUE(log.ok()) << log.status();
    log_ = std::move(*log);
  }

  void Append(const std::string& inspection, int n) {
    ASSERT_TRUE(log_->Append(MakeEvent(inspection, n)).ok());
  }

  void StartHub(EventHub::Options options) {
    options.run_thread = false;
    options.clock = [this] { return now_; };
    hub_.emplace(log_.get(), std::move(options));
    ASSERT_TRUE(hub_->Start().ok());
  }

  TempDir dir_;
  std::unique_ptr<eventlog::EventLog> log_;
  std::chrono::steady_clock::time_point now_{};
  std::optional<EventHub> hub_;
};

TEST_F(EventHubTurnsTest, ACatchUpScansOneSliceATurnAndLiveEventsGoOutBetweenSlices) {
  for (int i = 0; i < 100; ++i) Append("old", i);
  EventHub::Options options;
  options.read_batch = 10;
  options.catchup_events_per_turn = 10;
  StartHub(options);
  auto live = std::make_shared<Sink>(1000);
  EventFilter live_filter;
  live_filter.inspection_id = "live";
  ASSERT_NE(hub_->Subscribe(live, live_filter, "", /*from_start=*/false), 0u);
  auto catching_up = std::make_shared<Sink>(1000);
  ASSERT_NE(hub_->Subscribe(catching_up, EventFilter{}, "", /*from_start=*/true), 0u);

  EXPECT_EQ(hub_->RunOneTurn(), milliseconds(0)) << "more to catch up: no wait";
  EXPECT_EQ(catching_up->delivered.size(), 10u);
  EXPECT_EQ(hub_->RunOneTurn(), milliseconds(0));
  EXPECT_EQ(catching_up->delivered.size(), 20u);

  // A live event goes out on the very next turn, 8 slices before the catch-up ends.
  Append("live", 0);
  hub_->RunOneTurn();
  EXPECT_EQ(live->delivered, std::vector<std::string>{"live"});
  EXPECT_EQ(catching_up->delivered.size(), 30u);

  for (int turn = 0; turn < 7; ++turn) hub_->RunOneTurn();
  ASSERT_EQ(catching_up->delivered.size(), 100u);
  // The next slice reaches the end of the log (with the live event in it) and joins the
  // live dispatch; then the hub waits for appends.
  EXPECT_EQ(hub_->RunOneTurn(), options.idle_wait);
  EXPECT_EQ(catching_up->delivered.back(), "live");
  EXPECT_EQ(catching_up->delivered.size(), 101u);
  Append("live", 1);
  hub_->RunOneTurn();
  EXPECT_EQ(catching_up->delivered.size(), 102u) << "live now, with no gap and no duplicate";
  EXPECT_EQ(live->delivered.size(), 2u);
  hub_->Stop();
  ASSERT_TRUE(live->ended.has_value());
  EXPECT_EQ(live->ended->error_code(), grpc::StatusCode::UNAVAILABLE);
}

// A stream's write completion calls Wake(). It means "room again" to a catching-up
// subscription that waits for room; with none waiting, it must not cost a turn: a fan-out
// to 10,000 live streams would otherwise schedule a turn (a read of the log) per write.
TEST_F(EventHubTurnsTest, AWriteCompletionCostsATurnOnlyWhileACatchUpWaitsForRoom) {
  for (int i = 0; i < 5; ++i) Append("old", i);
  EventHub::Options options;
  StartHub(options);
  auto live = std::make_shared<Sink>(1000);
  live->on_deliver = [this] { hub_->Wake(); };  // its writes complete at once
  ASSERT_NE(hub_->Subscribe(live, EventFilter{}, "", /*from_start=*/false), 0u);
  EXPECT_EQ(hub_->RunOneTurn(), options.idle_wait);
  Append("new", 0);
  EXPECT_EQ(hub_->RunOneTurn(), options.idle_wait)
      << "live streams only: a write completion during the turn asks for no other turn";
  EXPECT_EQ(live->delivered.size(), 1u);

  auto stuck = std::make_shared<Sink>(0);  // a catching-up stream with a full queue
  ASSERT_NE(hub_->Subscribe(stuck, EventFilter{}, "", /*from_start=*/true), 0u);
  EXPECT_EQ(hub_->RunOneTurn(), milliseconds(5)) << "waiting for room: polls again soon";
  Append("new", 1);
  EXPECT_EQ(hub_->RunOneTurn(), milliseconds(0))
      << "a catch-up waits for room: a write completion means another turn at once";
  EXPECT_EQ(live->delivered.size(), 2u);
}

TEST_F(EventHubTurnsTest, AStalledCatchUpIsEndedExactlyAtTheIdleTimeout) {
  for (int i = 0; i < 5; ++i) Append("old", i);
  EventHub::Options options;
  options.catchup_idle_timeout = milliseconds(30000);
  StartHub(options);
  auto stuck = std::make_shared<Sink>(0);  // a queue that is full and stays full
  ASSERT_NE(hub_->Subscribe(stuck, EventFilter{}, "", /*from_start=*/true), 0u);

  EXPECT_EQ(hub_->RunOneTurn(), milliseconds(5)) << "waiting for room: polls again soon";
  now_ += milliseconds(29999);
  hub_->RunOneTurn();
  EXPECT_FALSE(stuck->ended.has_value()) << "1 ms before the timeout";
  now_ += milliseconds(1);
  hub_->RunOneTurn();
  ASSERT_TRUE(stuck->ended.has_value());
  EXPECT_EQ(stuck->ended->error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  hub_->RunOneTurn();
  EXPECT_EQ(hub_->SubscriberCount(), 0u);

  // Room again before the timeout restarts the count.
  auto slow = std::make_shared<Sink>(0);
  ASSERT_NE(hub_->Subscribe(slow, EventFilter{}, "", /*from_start=*/true), 0u);
  hub_->RunOneTurn();
  now_ += milliseconds(20000);
  slow->room_ = 1;  // it read one message: one place
  hub_->RunOneTurn();
  EXPECT_EQ(slow->delivered.size(), 1u);
  hub_->RunOneTurn();  // full again: stalled from now
  now_ += milliseconds(29999);
  hub_->RunOneTurn();
  EXPECT_FALSE(slow->ended.has_value());
  now_ += milliseconds(1);
  hub_->RunOneTurn();
  EXPECT_TRUE(slow->ended.has_value());
}

}  // namespace
}  // namespace inspection::streaming
