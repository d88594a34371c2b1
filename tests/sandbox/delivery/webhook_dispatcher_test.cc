#include "sandbox/webhooks/webhook_dispatcher.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/time/clock.h"
#include "adapters/http/curl_transport.h"
#include "sandbox/clock.h"
#include "tests/support/fake_vendor.h"
#include "tests/support/wait.h"

namespace inspection::sandbox {
namespace {

using json = nlohmann::json;
using ::inspection::testing::FakeVendor;
using ::inspection::testing::RecordedRequest;
using ::inspection::testing::ScriptedResponse;
using ::inspection::testing::UnusedClosedPort;
using ::inspection::testing::WaitUntil;
using ::testing::ElementsAre;
using ::testing::SizeIs;
using Ms = std::chrono::milliseconds;

// Long enough for a loaded 2-core CI machine; waits return as soon as their condition holds.
constexpr Ms kDeadline{30000};
// What "returns promptly" means for the destructor: far below any delay in play.
constexpr Ms kPrompt{2000};
constexpr char kHookPath[] = "/hooks/inspection";

// Milliseconds since `start`, as a number so that a failure prints it readably.
int64_t MsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration_cast<Ms>(std::chrono::steady_clock::now() - start).count();
}

ScriptedResponse Answer(int status) {
  ScriptedResponse response;
  response.status = status;
  response.body = "{}";
  return response;
}

// The `event` field of each request's JSON body, in arrival order.
std::vector<std::string> EventsReceived(const FakeVendor& vendor) {
  std::vector<std::string> events;
  for (const RecordedRequest& request : vendor.Requests()) {
    const json body = json::parse(request.body, nullptr, /*allow_exceptions=*/false);
    events.push_back(body.is_object() && body.contains("event") && body["event"].is_string()
                         ? body["event"].get<std::string>()
                         : "<unparsable>");
  }
  return events;
}

std::vector<std::string> Outcomes(const std::vector<DeliveryRecord>& log) {
  std::vector<std::string> outcomes;
  for (const DeliveryRecord& record : log) outcomes.push_back(record.outcome);
  return outcomes;
}

FaultRule WebhookRule(std::string event, WebhookFaultKind kind) {
  FaultRule rule;
  rule.webhook = true;
  rule.route = std::move(event);
  rule.webhook_kind = kind;
  return rule;
}

class WebhookDispatcherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(vendor_.Start());
    vendor_.RespondWith(Answer(200));
    auto transport = http::CurlTransport::Create(http::CurlTransportOptions{});
    ASSERT_TRUE(transport.ok()) << transport.status();
    transport_ = *std::move(transport);
    // Tiny delays keep the suite fast; each test adjusts what it needs.
    options_.initial_delay = Ms(2);
    options_.retry_schedule = {Ms(5), Ms(5), Ms(5)};
    options_.attempt_timeout = Ms(10000);
  }

  void TearDown() override { dispatcher_.reset(); }

  WebhookDispatcher& Dispatcher() {
    if (!dispatcher_) {
      dispatcher_ = std::make_unique<WebhookDispatcher>(options_, transport_.get(), &faults_,
                                                        [] { return IsoTime(absl::Now()); });
    }
    return *dispatcher_;
  }

  WebhookEvent Event(std::string name, std::string header_key = "hook-secret") {
    WebhookEvent event;
    event.event_name = name;
    event.url = vendor_.BaseUrl() + kHookPath;
    event.header_key = std::move(header_key);
    event.payload = {{"event", name}, {"message", "Report OK"}, {"inspectionId", "insp-1"}};
    return event;
  }

  // Declaration order is destruction order reversed: the dispatcher goes first (it must not
  // outlive the transport or the injector), the receiver last.
  FakeVendor vendor_;
  std::unique_ptr<http::CurlTransport> transport_;
  FaultInjector faults_{/*seed=*/1};
  WebhookDispatcherOptions options_;
  std::unique_ptr<WebhookDispatcher> dispatcher_;
};

TEST_F(WebhookDispatcherTest, PostsThePayloadWithContentTypeAndApiKey) {
  const WebhookEvent event = Event("createReport");
  const uint64_t id = Dispatcher().Enqueue(event);
  ASSERT_TRUE(Dispatcher().WaitIdle(kDeadline));

  const auto requests = vendor_.Requests();
  ASSERT_THAT(requests, SizeIs(1));
  EXPECT_EQ(requests[0].method, "POST");
  EXPECT_EQ(requests[0].path, kHookPath);
  EXPECT_EQ(json::parse(requests[0].body, nullptr, false), event.payload);
  ASSERT_NE(requests[0].Header("x-api-key"), nullptr);
  EXPECT_EQ(*requests[0].Header("x-api-key"), "hook-secret");
  ASSERT_NE(requests[0].Header("content-type"), nullptr);
  EXPECT_EQ(*requests[0].Header("content-type"), "application/json");

  const auto log = Dispatcher().Log();
  ASSERT_THAT(log, SizeIs(1));
  EXPECT_EQ(log[0].delivery_id, id);
  EXPECT_EQ(log[0].attempt, 1);
  EXPECT_EQ(log[0].event_name, "createReport");
  EXPECT_EQ(log[0].url, event.url);
  EXPECT_EQ(log[0].outcome, "delivered");
  EXPECT_EQ(log[0].http_status, 200);
  EXPECT_TRUE(log[0].final);
  EXPECT_EQ(log[0].at.size(), std::string("2024-03-01T10:00:00.000Z").size()) << log[0].at;
  EXPECT_EQ(Dispatcher().Pending(), 0u);
}

TEST_F(WebhookDispatcherTest, NoApiKeyHeaderWhenTheKeyIsEmpty) {
  Dispatcher().Enqueue(Event("createReport", /*header_key=*/""));
  ASSERT_TRUE(Dispatcher().WaitIdle(kDeadline));
  const auto requests = vendor_.Requests();
  ASSERT_THAT(requests, SizeIs(1));
  EXPECT_EQ(requests[0].Header("x-api-key"), nullptr);
  ASSERT_NE(requests[0].Header("content-type"), nullptr);
}

TEST_F(WebhookDispatcherTest, RetriesNon2xxUntilDelivered) {
  std::atomic<int> calls{0};
  vendor_.SetHandler(
      [&calls](const RecordedRequest&) { return Answer(calls.fetch_add(1) < 2 ? 500 : 200); });
  const uint64_t id = Dispatcher().Enqueue(Event("createReport"));
  ASSERT_TRUE(Dispatcher().WaitIdle(kDeadline));

  EXPECT_EQ(vendor_.RequestCount(), 3u);
  const auto log = Dispatcher().Log();
  EXPECT_THAT(Outcomes(log), ElementsAre("http_500", "http_500", "delivered"));
  ASSERT_THAT(log, SizeIs(3));
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(log[i].delivery_id, id);
    EXPECT_EQ(log[i].attempt, i + 1);
    EXPECT_EQ(log[i].final, i == 2);
  }
  EXPECT_EQ(log[0].http_status, 500);
  EXPECT_EQ(log[2].http_status, 200);
}

TEST_F(WebhookDispatcherTest, UnreachableReceiverExhaustsTheScheduleAndIsAbandoned) {
  const int port = UnusedClosedPort();
  ASSERT_GT(port, 0);
  options_.retry_schedule = {Ms(10), Ms(10), Ms(10)};
  WebhookEvent event = Event("createReport");
  event.url = "http://127.0.0.1:" + std::to_string(port) + kHookPath;
  Dispatcher().Enqueue(event);
  ASSERT_TRUE(Dispatcher().WaitIdle(kDeadline));

  const auto log = Dispatcher().Log();
  // The first attempt, then one per delay of the schedule.
  EXPECT_THAT(Outcomes(log), ElementsAre("transport_connect", "transport_connect",
                                         "transport_connect", "transport_connect"));
  ASSERT_THAT(log, SizeIs(4));
  EXPECT_FALSE(log[2].final);
  EXPECT_TRUE(log[3].final);
  EXPECT_EQ(log[3].attempt, 4);
  EXPECT_EQ(Dispatcher().Pending(), 0u);
}

TEST_F(WebhookDispatcherTest, DuplicateDeliversTheSamePayloadTwiceUnderTwoIds) {
  faults_.AddRules({WebhookRule("createReport", WebhookFaultKind::kDuplicate)});
  const WebhookEvent event = Event("createReport");
  const uint64_t id = Dispatcher().Enqueue(event);
  ASSERT_TRUE(Dispatcher().WaitIdle(kDeadline));

  const auto requests = vendor_.Requests();
  ASSERT_THAT(requests, SizeIs(2));
  EXPECT_EQ(json::parse(requests[0].body, nullptr, false), event.payload);
  EXPECT_EQ(requests[1].body, requests[0].body);

  const auto log = Dispatcher().Log();
  ASSERT_THAT(log, SizeIs(2));
  EXPECT_THAT(Outcomes(log), ElementsAre("delivered", "delivered"));
  EXPECT_NE(log[0].delivery_id, log[1].delivery_id);
  EXPECT_TRUE(log[0].delivery_id == id || log[1].delivery_id == id);
}

TEST_F(WebhookDispatcherTest, ReorderHoldsAnEventUntilTheNextOneIsDelivered) {
  // A long first retry delay: only the next event's delivery can release A in time.
  options_.retry_schedule = {Ms(60000)};
  faults_.AddRules({WebhookRule("eventA", WebhookFaultKind::kReorder)});
  Dispatcher().Enqueue(Event("eventA"));
  Dispatcher().Enqueue(Event("eventB"));
  EXPECT_EQ(Dispatcher().Pending(), 2u);
  ASSERT_TRUE(Dispatcher().WaitIdle(kDeadline));
  EXPECT_THAT(EventsReceived(vendor_), ElementsAre("eventB", "eventA"));
}

TEST_F(WebhookDispatcherTest, ReorderWithoutAFollowerIsReleasedAfterTheFirstRetryDelay) {
  options_.retry_schedule = {Ms(20)};
  faults_.AddRules({WebhookRule("eventA", WebhookFaultKind::kReorder)});
  Dispatcher().Enqueue(Event("eventA"));
  ASSERT_TRUE(Dispatcher().WaitIdle(kDeadline));
  EXPECT_THAT(EventsReceived(vendor_), ElementsAre("eventA"));
  const auto log = Dispatcher().Log();
  ASSERT_THAT(log, SizeIs(1));
  EXPECT_EQ(log[0].attempt, 1);  // holding is not an attempt
  EXPECT_EQ(log[0].outcome, "delivered");
}

TEST_F(WebhookDispatcherTest, FailFirstRecordsInjectedFailuresWithoutCallingTheReceiver) {
  FaultRule rule = WebhookRule("createReport", WebhookFaultKind::kFailFirst);
  rule.count = 2;
  faults_.AddRules({rule});
  Dispatcher().Enqueue(Event("createReport"));
  ASSERT_TRUE(Dispatcher().WaitIdle(kDeadline));

  EXPECT_EQ(vendor_.RequestCount(), 1u);
  const auto log = Dispatcher().Log();
  EXPECT_THAT(Outcomes(log), ElementsAre("injected_failure", "injected_failure", "delivered"));
  ASSERT_THAT(log, SizeIs(3));
  EXPECT_EQ(log[2].attempt, 3);
  EXPECT_FALSE(log[1].final);
  EXPECT_TRUE(log[2].final);
}

TEST_F(WebhookDispatcherTest, FailFirstBeyondTheScheduleAbandonsWithoutAnyRequest) {
  options_.retry_schedule = {Ms(2)};
  FaultRule rule = WebhookRule("*", WebhookFaultKind::kFailFirst);
  rule.count = 5;
  faults_.AddRules({rule});
  Dispatcher().Enqueue(Event("createReport"));
  ASSERT_TRUE(Dispatcher().WaitIdle(kDeadline));
  EXPECT_EQ(vendor_.RequestCount(), 0u);
  const auto log = Dispatcher().Log();
  EXPECT_THAT(Outcomes(log), ElementsAre("injected_failure", "injected_failure"));
  ASSERT_THAT(log, SizeIs(2));
  EXPECT_TRUE(log[1].final);
}

TEST_F(WebhookDispatcherTest, DropNeverCallsTheReceiverAndEndsAtOnce) {
  faults_.AddRules({WebhookRule("createReport", WebhookFaultKind::kDrop)});
  Dispatcher().Enqueue(Event("createReport"));
  Dispatcher().Enqueue(Event("detectionFinished"));
  ASSERT_TRUE(Dispatcher().WaitIdle(kDeadline));
  // Only the other event reached the receiver; the dropped one has one final record.
  EXPECT_THAT(EventsReceived(vendor_), ElementsAre("detectionFinished"));
  const auto log = Dispatcher().Log();
  ASSERT_THAT(log, SizeIs(2));
  EXPECT_EQ(log[0].event_name, "createReport");
  EXPECT_EQ(log[0].outcome, "injected_drop");
  EXPECT_TRUE(log[0].final);
  EXPECT_EQ(log[0].attempt, 1);
}

TEST_F(WebhookDispatcherTest, DelayedEventArrivesAfterAnUndelayedLaterOne) {
  FaultRule rule = WebhookRule("slow", WebhookFaultKind::kDelay);
  rule.latency = Ms(300);
  faults_.AddRules({rule});
  Dispatcher().Enqueue(Event("slow"));
  Dispatcher().Enqueue(Event("fast"));
  ASSERT_TRUE(Dispatcher().WaitIdle(kDeadline));
  EXPECT_THAT(EventsReceived(vendor_), ElementsAre("fast", "slow"));
  EXPECT_THAT(Outcomes(Dispatcher().Log()), ElementsAre("delivered", "delivered"));
}

TEST_F(WebhookDispatcherTest, ExtraDelayOrdersLikeADelay) {
  Dispatcher().Enqueue(Event("late"), Ms(300));
  Dispatcher().Enqueue(Event("early"));
  ASSERT_TRUE(Dispatcher().WaitIdle(kDeadline));
  EXPECT_THAT(EventsReceived(vendor_), ElementsAre("early", "late"));
}

TEST_F(WebhookDispatcherTest, PendingCountsWaitingAndInFlightEventsUntilIdle) {
  ScriptedResponse hold = Answer(200);
  hold.kind = ScriptedResponse::Kind::kHold;
  vendor_.RespondWith(hold);
  EXPECT_EQ(Dispatcher().Pending(), 0u);
  EXPECT_TRUE(Dispatcher().WaitIdle(Ms(0)));

  Dispatcher().Enqueue(Event("one"));
  Dispatcher().Enqueue(Event("two"));
  EXPECT_EQ(Dispatcher().Pending(), 2u);
  ASSERT_TRUE(vendor_.WaitForHeld(2, kDeadline));
  EXPECT_EQ(Dispatcher().Pending(), 2u);  // in flight still counts
  EXPECT_FALSE(Dispatcher().WaitIdle(Ms(20)));

  vendor_.ReleaseHeld();
  ASSERT_TRUE(Dispatcher().WaitIdle(kDeadline));
  EXPECT_EQ(Dispatcher().Pending(), 0u);
  EXPECT_THAT(Dispatcher().Log(), SizeIs(2));
}

TEST_F(WebhookDispatcherTest, LogKeepsOnlyTheNewestRecords) {
  vendor_.RespondWith(Answer(503));
  options_.max_log_records = 2;
  options_.retry_schedule = {Ms(1), Ms(1), Ms(1)};
  Dispatcher().Enqueue(Event("createReport"));
  ASSERT_TRUE(Dispatcher().WaitIdle(kDeadline));
  EXPECT_EQ(vendor_.RequestCount(), 4u);
  const auto log = Dispatcher().Log();
  ASSERT_THAT(log, SizeIs(2));
  EXPECT_EQ(log[0].attempt, 3);
  EXPECT_EQ(log[1].attempt, 4);
  EXPECT_TRUE(log[1].final);
  EXPECT_EQ(log[1].outcome, "http_503");
}

TEST_F(WebhookDispatcherTest, DestroyingWithEventsPendingIsPromptAndDeliversNothingAfterwards) {
  options_.initial_delay = Ms(100);
  for (int i = 0; i < 5; ++i) Dispatcher().Enqueue(Event("abandoned"));
  EXPECT_EQ(Dispatcher().Pending(), 5u);

  const auto start = std::chrono::steady_clock::now();
  dispatcher_.reset();
  EXPECT_LT(MsSince(start), kPrompt.count());

  // A sentinel through a new dispatcher on the same transport, due after the abandoned
  // events were: had any of them still been sent, it would have reached the receiver first.
  options_.initial_delay = Ms(200);
  Dispatcher().Enqueue(Event("sentinel"));
  ASSERT_TRUE(vendor_.WaitForRequests(1, kDeadline));
  ASSERT_TRUE(Dispatcher().WaitIdle(kDeadline));
  EXPECT_THAT(EventsReceived(vendor_), ElementsAre("sentinel"));
}

TEST_F(WebhookDispatcherTest, DestroyingWithASendInFlightDoesNotWaitForIt) {
  ScriptedResponse hold = Answer(200);
  hold.kind = ScriptedResponse::Kind::kHold;
  vendor_.RespondWith(hold);
  options_.attempt_timeout = Ms(60000);
  Dispatcher().Enqueue(Event("createReport"));
  ASSERT_TRUE(vendor_.WaitForHeld(1, kDeadline));

  const auto start = std::chrono::steady_clock::now();
  dispatcher_.reset();
  EXPECT_LT(MsSince(start), kPrompt.count());

  // The answer now reaches a callback whose dispatcher is gone; it must be harmless.
  vendor_.ReleaseHeld();
  EXPECT_TRUE(WaitUntil([this] { return transport_->InFlight() == 0; }, kDeadline));
  EXPECT_EQ(vendor_.RequestCount(), 1u);
}

}  // namespace
}  // namespace inspection::sandbox
