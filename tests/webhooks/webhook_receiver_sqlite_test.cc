// The receiver over the real default backend (SQLite): what a 200 promises is in the
// durable log, byte for byte, once, and readable by a second handle on the same file.
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include <gtest/gtest.h>
#include <httplib.h>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "adapters/eventlog/event_log.h"
#include "adapters/hashing/sha256.h"
#include "gateway/webhooks/webhook_receiver.h"
#include "nlohmann/json.hpp"
#include "tests/support/temp_dir.h"

namespace inspection::webhooks {
namespace {

constexpr char kKey[] = "whk-sqlite-test-key";

using inspection::testing::TempDir;

TEST(WebhookReceiverSqliteTest, AcknowledgedDeliveriesAreDurableAndStoredOnce) {
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  const std::string db = dir.path() + "/events.db";
  absl::StatusOr<std::unique_ptr<eventlog::EventLog>> log =
      eventlog::OpenSqliteEventLog(db, eventlog::RetentionPolicy{});
  ASSERT_TRUE(log.ok()) << log.status();

  WebhookReceiverOptions options;
  options.host = "127.0.0.1";
  options.port = 0;
  options.current_key = kKey;
  options.clock = [] { return absl::FromUnixMillis(1700000000456); };
  absl::StatusOr<std::unique_ptr<WebhookReceiver>> receiver =
      WebhookReceiver::Start(std::move(options), log->get());
  ASSERT_TRUE(receiver.ok()) << receiver.status();

  httplib::Client client("127.0.0.1", (*receiver)->port());
  client.set_tcp_nodelay(true);
  client.set_keep_alive(true);
  const httplib::Headers headers = {{"x-api-key", kKey}};
  const std::vector<std::string> bodies = {
      R"({"message":"Report OK","event":"createReport","inspectionId":"i1","tokenId":"t1",)"
      R"("vehicleId":"v1","dataAPI":{"totalTime":3.2,"status":200,"data":{}}})",
      R"({ "event" : "detectionFinished", "inspectionId" : 42 })",
  };
  std::vector<std::string> cursors;
  for (const std::string& body : bodies) {
    const httplib::Result result = client.Post("/webhooks/v2", headers, body, "application/json");
    ASSERT_TRUE(result) << httplib::to_string(result.error());
    ASSERT_EQ(result->status, 200) << result->body;
    const nlohmann::json answer = nlohmann::json::parse(result->body);
    EXPECT_FALSE(answer.at("duplicate").get<bool>());
    cursors.push_back(answer.at("cursor").get<std::string>());
  }
  // The vendor retries the first one: acknowledged again, not stored again.
  const httplib::Result again = client.Post("/webhooks/v2", headers, bodies[0], "application/json");
  ASSERT_TRUE(again);
  ASSERT_EQ(again->status, 200);
  const nlohmann::json again_answer = nlohmann::json::parse(again->body);
  EXPECT_TRUE(again_answer.at("duplicate").get<bool>());
  EXPECT_EQ(again_answer.at("cursor").get<std::string>(), cursors[0]);
  (*receiver)->Stop();

  // A second handle on the same file (another process, after a restart) reads them.
  absl::StatusOr<std::unique_ptr<eventlog::EventLog>> reopened =
      eventlog::OpenSqliteEventLog(db, eventlog::RetentionPolicy{});
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  absl::StatusOr<std::vector<eventlog::StoredEvent>> events = (*reopened)->ReadAfter("", 10);
  ASSERT_TRUE(events.ok()) << events.status();
  ASSERT_EQ(events->size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const eventlog::StoredEvent& stored = (*events)[i];
    EXPECT_EQ(stored.cursor, cursors[i]);
    EXPECT_EQ(stored.event.payload, bodies[i]);
    EXPECT_EQ(stored.event.content_hash, hashing::Sha256Hex(bodies[i]));
    EXPECT_EQ(stored.event.received_at_ms, 1700000000456);
  }
  EXPECT_EQ((*events)[0].event.event_name, "createReport");
  EXPECT_EQ((*events)[0].event.token_id, "t1");
  EXPECT_EQ((*events)[1].event.event_name, "detectionFinished");
  EXPECT_EQ((*events)[1].event.inspection_id, "42");
  EXPECT_EQ((*receiver)->stats().accepted, 2);
  EXPECT_EQ((*receiver)->stats().duplicates, 1);
}

// Over the real backend's duplicate detection: a body delivered to two accounts is two
// events, the same body again on one account is a duplicate of that account's event.
TEST(WebhookReceiverSqliteTest, AccountsDoNotDeduplicateAgainstEachOther) {
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  absl::StatusOr<std::unique_ptr<eventlog::EventLog>> log =
      eventlog::OpenSqliteEventLog(dir.path() + "/events.db", eventlog::RetentionPolicy{});
  ASSERT_TRUE(log.ok()) << log.status();

  WebhookReceiverOptions options;
  options.host = "127.0.0.1";
  options.port = 0;
  options.current_key = kKey;
  options.accounts = {{"preprod", "/webhooks/v2/preprod", "whk-sqlite-preprod-key", ""}};
  absl::StatusOr<std::unique_ptr<WebhookReceiver>> receiver =
      WebhookReceiver::Start(std::move(options), log->get());
  ASSERT_TRUE(receiver.ok()) << receiver.status();

  httplib::Client client("127.0.0.1", (*receiver)->port());
  client.set_tcp_nodelay(true);
  const std::string body = R"({"event":"newInspection","inspectionId":"i9"})";
  struct Delivery {
    std::string path;
    std::string key;
    bool duplicate;
  };
  const std::vector<Delivery> deliveries = {
      {"/webhooks/v2", kKey, false},
      {"/webhooks/v2/preprod", "whk-sqlite-preprod-key", false},
      {"/webhooks/v2/preprod", "whk-sqlite-preprod-key", true},
      {"/webhooks/v2", kKey, true},
  };
  for (const Delivery& delivery : deliveries) {
    const httplib::Result result =
        client.Post(delivery.path, {{"x-api-key", delivery.key}}, body, "application/json");
    ASSERT_TRUE(result) << httplib::to_string(result.error());
    ASSERT_EQ(result->status, 200) << result->body;
    EXPECT_EQ(nlohmann::json::parse(result->body).at("duplicate").get<bool>(), delivery.duplicate)
        << delivery.path;
  }
  (*receiver)->Stop();

  absl::StatusOr<std::vector<eventlog::StoredEvent>> events = (*log)->ReadAfter("", 10);
  ASSERT_TRUE(events.ok()) << events.status();
  ASSERT_EQ(events->size(), 2u);
  EXPECT_EQ((*events)[0].event.content_hash, hashing::Sha256Hex(body));
  EXPECT_EQ((*events)[1].event.content_hash, hashing::Sha256Hex("preprod\n" + body));
  EXPECT_EQ((*events)[1].event.payload, body);
  EXPECT_EQ((*receiver)->stats().accepted, 2);
  EXPECT_EQ((*receiver)->stats().duplicates, 2);
}

// The dedupe window over the real backend, with the receiver's clock: the same body within
// the window is the event already stored; a whole window later it is a new event.
TEST(WebhookReceiverSqliteTest, TheSameBodyAfterTheDedupeWindowIsANewEvent) {
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  eventlog::RetentionPolicy retention;
  retention.dedupe_window = std::chrono::hours(48);
  absl::StatusOr<std::unique_ptr<eventlog::EventLog>> log =
      eventlog::OpenSqliteEventLog(dir.path() + "/events.db", retention);
  ASSERT_TRUE(log.ok()) << log.status();
  auto now = std::make_shared<std::atomic<int64_t>>(1700000000000);
  WebhookReceiverOptions options;
  options.host = "127.0.0.1";
  options.port = 0;
  options.current_key = kKey;
  options.clock = [now] { return absl::FromUnixMillis(now->load()); };
  absl::StatusOr<std::unique_ptr<WebhookReceiver>> receiver =
      WebhookReceiver::Start(std::move(options), log->get());
  ASSERT_TRUE(receiver.ok()) << receiver.status();
  httplib::Client client("127.0.0.1", (*receiver)->port());
  client.set_tcp_nodelay(true);
  // A second TestWebhook two days later is byte-identical to the first.
  const std::string body = R"({"event":"newInspection","inspectionId":"test"})";
  auto deliver = [&] {
    const httplib::Result result =
        client.Post("/webhooks/v2", {{"x-api-key", kKey}}, body, "application/json");
    EXPECT_TRUE(result);
    return result ? nlohmann::json::parse(result->body) : nlohmann::json();
  };
  const nlohmann::json first = deliver();
  now->fetch_add(47 * 3600 * 1000);
  const nlohmann::json retried = deliver();
  now->fetch_add(2 * 3600 * 1000);
  const nlohmann::json later = deliver();
  EXPECT_FALSE(first.value("duplicate", true));
  EXPECT_TRUE(retried.value("duplicate", false));
  EXPECT_EQ(retried.value("cursor", ""), first.value("cursor", "-"));
  EXPECT_FALSE(later.value("duplicate", true));
  EXPECT_NE(later.value("cursor", ""), first.value("cursor", ""));
  EXPECT_EQ((*receiver)->stats().accepted, 2);
  EXPECT_EQ((*receiver)->stats().duplicates, 1);
}

}  // namespace
}  // namespace inspection::webhooks
