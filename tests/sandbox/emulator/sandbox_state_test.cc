// SandboxState on its own: the vendor's rules without HTTP.
#include "sandbox/emulator/sandbox_state.h"

#include <climits>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace inspection::sandbox {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using json = nlohmann::json;

v1::CreateTokenRequest TokenRequest(bool fast_track, const std::string& agent = "agent-1") {
  v1::CreateTokenRequest request;
  request.mutable_options()->set_shoot_inspect(true);
  request.mutable_options()->set_fast_track(fast_track);
  request.mutable_trade_in()->set_immat("AA-111-BB");
  request.mutable_trade_in()->set_sending_type(v1::SENDING_TYPE_EMAIL);
  request.mutable_customer()->set_email("<EMAIL>");
  request.mutable_customer()->set_firstname("<FIRST_NAME>");
  request.mutable_customer()->set_lastname("<LAST_NAME>");
  request.mutable_customer()->set_phone("<PHONE>");
  request.mutable_customer()->set_locale(v1::LOCALE_EN);
  request.set_creator_user_id(agent);
  request.set_validity(10);
  return request;
}

std::vector<std::string> Names(const std::vector<WebhookEvent>& events) {
  std::vector<std::string> names;
  for (const auto& event : events) names.push_back(event.event_name);
  return names;
}

class SandboxStateTest : public ::testing::Test {
 protected:
  SandboxStateTest()
      : state_({/*seed=*/7, "http://sandbox.test", "http://sandbox.test/webapp"}, &clock_) {}

  std::string Create(bool fast_track = true, std::vector<WebhookEvent>* events = nullptr) {
    Reply reply = state_.CreateToken(TokenRequest(fast_track), "api-token-1", events);
    EXPECT_EQ(reply.status, 200);
    return reply.body["token"]["uid"];
  }

  int Step(const std::string& uid, TokenStep step, std::vector<WebhookEvent>* events = nullptr) {
    return state_.AdvanceToken(uid, step, events).status;
  }

  SandboxClock clock_;
  SandboxState state_;
};

TEST_F(SandboxStateTest, EventsNeedADestinationAndTheirFlag) {
  std::vector<WebhookEvent> events;
  Create(true, &events);
  EXPECT_THAT(events, IsEmpty());  // no webhookUrlV2

  ASSERT_EQ(state_.UpdateWebhookConfig("http://hooks.test/in", std::string("key-1")).status, 200);
  Create(true, &events);
  EXPECT_THAT(events, IsEmpty());  // tradeinVehicle's flag is false

  ASSERT_EQ(state_.UpdateEventConfig("tradeinVehicle", true).status, 200);
  const std::string uid = Create(true, &events);
  ASSERT_THAT(Names(events), ElementsAre("tradeinVehicle"));
  EXPECT_EQ(events[0].url, "http://hooks.test/in");
  EXPECT_EQ(events[0].header_key, "key-1");
  EXPECT_EQ(events[0].payload["tokenId"], uid);
  EXPECT_TRUE(events[0].payload["inspectionId"].is_null());
  EXPECT_TRUE(events[0].payload["createdAt"].is_string());

  // A PUT without a header key leaves none.
  ASSERT_EQ(state_.UpdateWebhookConfig("http://hooks.test/in2", std::nullopt).status, 200);
  events.clear();
  Create(true, &events);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].header_key, "");
  EXPECT_EQ(events[0].url, "http://hooks.test/in2");
}

TEST_F(SandboxStateTest, TestWebhookIgnoresTheFlagsButNeedsADestination) {
  std::vector<WebhookEvent> events;
  EXPECT_EQ(state_.TestWebhook("newDamage", "", &events).status, 400);
  EXPECT_THAT(events, IsEmpty());
  state_.ConfigureWebhook("http://hooks.test/in", "", {});
  Reply reply = state_.TestWebhook("newDamage", "", &events);
  EXPECT_EQ(reply.status, 200);
  EXPECT_EQ(reply.body, (json{{"status", "send"}}));
  ASSERT_THAT(Names(events), ElementsAre("newDamage"));
  EXPECT_EQ(events[0].payload["inspectionId"], "sandbox-test-inspection");
}

TEST_F(SandboxStateTest, ConfigureWebhookEnablesTheNamedEvents) {
  state_.ConfigureWebhook("http://hooks.test/in", "k", {"newInspection", "notAnEvent"});
  const json list = state_.ListEventConfigs().body;
  ASSERT_EQ(list.size(), 8u);
  EXPECT_EQ(list[0]["eventName"], "newInspection");
  EXPECT_EQ(list[0]["webhook"], true);
  EXPECT_EQ(list[1]["webhook"], false);
  EXPECT_EQ(state_.GetWebhookConfig().body["webhookHeaderKey"], "k");
  EXPECT_EQ(state_.UpdateEventConfig("notAnEvent", true).status, 404);
}

TEST_F(SandboxStateTest, SelfInspectionEmitsItsEventsInJourneyOrder) {
  state_.ConfigureWebhook("http://hooks.test/in", "",
                          {"newInspection", "detectionFinished", "createReport", "chaseUpVehicle"});
  std::vector<WebhookEvent> events;
  const std::string uid = Create(/*fast_track=*/true);
  for (TokenStep step : {TokenStep::kOpen, TokenStep::kStartShooting, TokenStep::kFinishShooting,
                         TokenStep::kFastTrack, TokenStep::kComplete, TokenStep::kChaseUp}) {
    ASSERT_EQ(Step(uid, step, &events), 200);
  }
  EXPECT_THAT(Names(events),
              ElementsAre("newInspection", "detectionFinished", "createReport", "chaseUpVehicle"));
  const json& report = events[2].payload;
  EXPECT_EQ(report["message"], "Report OK");
  EXPECT_EQ(report["tokenId"], uid);
  EXPECT_EQ(report["inspectionId"], events[0].payload["inspectionId"]);
  EXPECT_EQ(report["dataAPI"]["data"]["tokenId"], uid);
}

TEST_F(SandboxStateTest, ChaseUpMayComeBeforeCompletionButOnlyOnce) {
  const std::string uid = Create();
  EXPECT_EQ(Step(uid, TokenStep::kChaseUp), 200);
  EXPECT_EQ(state_.GetTokenStatus(uid).body["token"]["tradeinStatus"], 6);
  EXPECT_EQ(Step(uid, TokenStep::kChaseUp), 409);
  EXPECT_EQ(Step(uid, TokenStep::kOpen), 409);
}

TEST_F(SandboxStateTest, ExpiryFollowsTheClock) {
  const std::string uid = Create();
  clock_.Advance(absl::Hours(24 * 10) - absl::Seconds(1));
  EXPECT_EQ(state_.GetTokenStatus(uid).body["token"]["expired"], false);
  EXPECT_EQ(Step(uid, TokenStep::kOpen), 200);
  clock_.Advance(absl::Seconds(2));
  EXPECT_EQ(state_.GetTokenStatus(uid).body["token"]["expired"], true);
  EXPECT_EQ(Step(uid, TokenStep::kStartShooting), 409);
  EXPECT_EQ(Step(uid, TokenStep::kExpire), 200);  // always allowed
}

TEST_F(SandboxStateTest, PaginationHandlesPagesFarBeyondTheEnd) {
  const std::string uid = Create();
  ASSERT_EQ(Step(uid, TokenStep::kOpen), 200);
  v1::SearchInspectionsRequest request;
  request.set_username("AGENT-1");  // usernames match whatever their case
  request.set_page(INT_MAX);
  request.set_limit(1000);
  const json body = state_.SearchInspections(request).body;
  EXPECT_THAT(body["data"], IsEmpty());
  EXPECT_EQ(body["paginationInfo"]["range"], "0-0");
  EXPECT_EQ(body["paginationInfo"]["totalInspections"], 1);
  EXPECT_EQ(body["paginationInfo"]["totalPages"], 1);
  EXPECT_EQ(body["paginationInfo"]["currentPage"], INT_MAX);
}

TEST_F(SandboxStateTest, IdsAreDeterministicPerSeed) {
  SandboxClock clock;
  SandboxState same({7, "http://sandbox.test", "http://sandbox.test/webapp"}, &clock);
  SandboxState other({8, "http://sandbox.test", "http://sandbox.test/webapp"}, &clock);
  const std::string uid = Create();
  EXPECT_EQ(same.CreateToken(TokenRequest(true), "t", nullptr).body["token"]["uid"], uid);
  EXPECT_NE(other.CreateToken(TokenRequest(true), "t", nullptr).body["token"]["uid"], uid);
  // UUID-shaped.
  EXPECT_EQ(uid.size(), 36u);
  EXPECT_EQ(uid[8], '-');
}

TEST_F(SandboxStateTest, DumpShowsEverythingButTheHeaderKey) {
  state_.ConfigureWebhook("http://hooks.test/in", "secret-key", {});
  const std::string uid = Create();
  ASSERT_EQ(Step(uid, TokenStep::kOpen), 200);
  ASSERT_EQ(state_.DetectDamage({"https://img.test/a.jpg"}, nullptr).status, 200);
  const json dump = state_.Dump();
  ASSERT_EQ(dump["tokens"].size(), 1u);
  EXPECT_EQ(dump["tokens"][0]["uid"], uid);
  EXPECT_EQ(dump["tokens"][0]["immat"], "AA-111-BB");
  ASSERT_EQ(dump["inspections"].size(), 2u);
  EXPECT_EQ(dump["inspections"][0]["type"], 4);
  EXPECT_EQ(dump["inspections"][0]["hasReport"], false);
  EXPECT_EQ(dump["inspections"][1]["type"], 5);
  EXPECT_EQ(dump["inspections"][1]["hasReport"], true);
  EXPECT_EQ(dump["webhookConfig"]["webhookHeaderKey"], "***");
  EXPECT_EQ(dump["eventConfigs"].size(), 8u);
  EXPECT_EQ(dump.dump().find("secret-key"), std::string::npos);
}

TEST(TokenStepTest, ParsesTheAdminStepNames) {
  EXPECT_EQ(ParseTokenStep("open"), TokenStep::kOpen);
  EXPECT_EQ(ParseTokenStep("start-shooting"), TokenStep::kStartShooting);
  EXPECT_EQ(ParseTokenStep("finish-shooting"), TokenStep::kFinishShooting);
  EXPECT_EQ(ParseTokenStep("fast-track"), TokenStep::kFastTrack);
  EXPECT_EQ(ParseTokenStep("complete"), TokenStep::kComplete);
  EXPECT_EQ(ParseTokenStep("chase-up"), TokenStep::kChaseUp);
  EXPECT_EQ(ParseTokenStep("expire"), TokenStep::kExpire);
  EXPECT_EQ(ParseTokenStep("Open"), std::nullopt);
}

}  // namespace
}  // namespace inspection::sandbox
