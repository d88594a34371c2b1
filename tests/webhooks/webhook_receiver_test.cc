// The webhook receiver end to end: a real HTTP client (httplib::Client, or a raw socket
// where the framing itself is under test) against a receiver started on an OS-chosen
// port, storing into an in-memory EventLog that can be made to fail or to block.
#include "gateway/webhooks/webhook_receiver.h"
#include "adapters/hashing/sha256.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include <prometheus/registry.h>
#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "adapters/eventlog/event_log.h"
#include "adapters/redis/redis_status.h"
#include "gateway/metrics/metrics_scope.h"
#include "gateway/webhooks/webhook_metrics.h"
#include "nlohmann/json.hpp"
#include "tests/support/captured_log.h"
#include "tests/support/raw_tcp_client.h"
#include "tests/support/wait.h"

namespace inspection::webhooks {
namespace {

using ::inspection::eventlog::AppendResult;
using ::inspection::eventlog::NewEvent;
using ::inspection::eventlog::StoredEvent;
using ::inspection::testing::ConnectToLoopback;
using ::inspection::testing::PeerCloses;
using ::inspection::testing::SendAll;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kKey[] = "whk-current-0123456789abcdef";
constexpr char kPreviousKey[] = "whk-previous-fedcba9876543210";
constexpr char kPath[] = "/webhooks/v2";
constexpr int64_t kNowMs = 1700000000123;
constexpr int kTimeoutSeconds = 20;

// The spec's createReport delivery, compacted differently from what nlohmann would print
// (spaces, key order, a float and an escape), so that "stored exactly" means byte for byte.
const char kCreateReport[] =
    R"({"message": "Report OK","event":"createReport", "inspectionId":"i1","tokenId":"t1",)"
    R"("vehicleId":"v1","dataAPI":{"totalTime":1.50,"status":200,"data":{"damages":{},)"
    R"("vehicle":{"region":"FR","immat":"AB-123-CD","detectedLicensePlate":"AB\u002d123"},)"
    R"("damageNumber":0,"reportUrl":"https://example.test/r?t=x"}}})";

// An in-memory EventLog: duplicates by content_hash like the real backends; appends can
// be made to fail, or to wait for the test.
class FakeEventLog final : public eventlog::EventLog {
 public:
  absl::StatusOr<AppendResult> Append(const NewEvent& event) override {
    absl::MutexLock lock(&mu_);
    ++append_calls_;
    if (hold_appends_) {
      ++held_;
      mu_.Await(absl::Condition(
          +[](FakeEventLog* self) { return !self->hold_appends_; }, this));
      --held_;
    }
    if (!failure_.ok()) return failure_;
    for (const StoredEvent& stored : events_) {
      if (stored.event.content_hash == event.content_hash) {
        return AppendResult{stored.cursor, /*duplicate=*/true};
      }
    }
    StoredEvent stored{absl::StrCat("c", events_.size() + 1), event};
    events_.push_back(stored);
    return AppendResult{stored.cursor, /*duplicate=*/false};
  }

  absl::StatusOr<std::vector<StoredEvent>> ReadAfter(const std::string&, size_t) override {
    absl::MutexLock lock(&mu_);
    return events_;
  }
  absl::StatusOr<std::string> LastCursor() override {
    absl::MutexLock lock(&mu_);
    return events_.empty() ? "" : events_.back().cursor;
  }
  void WaitForAppend(const std::string&, std::chrono::milliseconds) override {}
  absl::StatusOr<int64_t> ApplyRetention(absl::Time) override { return 0; }
  absl::Status CheckWritable() override { return absl::OkStatus(); }
  std::string Describe() const override { return "fake"; }

  void FailAppendsWith(absl::Status status) {
    absl::MutexLock lock(&mu_);
    failure_ = std::move(status);
  }
  void HoldAppends(bool hold) {
    absl::MutexLock lock(&mu_);
    hold_appends_ = hold;
  }
  // Waits until `n` appends are being held; false after the deadline.
  bool WaitForHeld(int n) {
    absl::MutexLock lock(&mu_);
    auto enough = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return held_ >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&enough), absl::Seconds(kTimeoutSeconds));
  }
  std::vector<StoredEvent> Events() {
    absl::MutexLock lock(&mu_);
    return events_;
  }
  int AppendCalls() {
    absl::MutexLock lock(&mu_);
    return append_calls_;
  }

 private:
  absl::Mutex mu_;
  std::vector<StoredEvent> events_ ABSL_GUARDED_BY(mu_);
  absl::Status failure_ ABSL_GUARDED_BY(mu_);
  bool hold_appends_ ABSL_GUARDED_BY(mu_) = false;
  int held_ ABSL_GUARDED_BY(mu_) = 0;
  int append_calls_ ABSL_GUARDED_BY(mu_) = 0;
};

WebhookReceiverOptions TestOptions() {
  WebhookReceiverOptions options;
  options.host = "127.0.0.1";
  options.port = 0;
  options.current_key = kKey;
  options.clock = [] { return absl::FromUnixMillis(kNowMs); };
  return options;
}

std::unique_ptr<httplib::Client> NewClient(int port) {
  auto client = std::make_unique<httplib::Client>("127.0.0.1", port);
  client->set_connection_timeout(kTimeoutSeconds, 0);
  client->set_read_timeout(kTimeoutSeconds, 0);
  client->set_write_timeout(kTimeoutSeconds, 0);
  // httplib writes a request's head and body separately: without this, Nagle's algorithm
  // and the delayed ACK cost each request ~40 ms.
  client->set_tcp_nodelay(true);
  return client;
}

httplib::Headers KeyHeader(const std::string& key = kKey) { return {{"x-api-key", key}}; }

nlohmann::json JsonOf(const httplib::Result& result) {
  return nlohmann::json::parse(result->body, nullptr, /*allow_exceptions=*/false);
}

class WebhookReceiverTest : public ::testing::Test {
 protected:
  void StartReceiver(WebhookReceiverOptions options = TestOptions()) {
    absl::StatusOr<std::unique_ptr<WebhookReceiver>> started =
        WebhookReceiver::Start(std::move(options), &log_);
    ASSERT_TRUE(started.ok()) << started.status();
    receiver_ = *std::move(started);
    ASSERT_GT(receiver_->port(), 0);
    client_ = NewClient(receiver_->port());
  }

  httplib::Result Deliver(const std::string& body, const httplib::Headers& headers = KeyHeader(),
                          const std::string& path = kPath) {
    return client_->Post(path.c_str(), headers, body, "application/json");
  }

  FakeEventLog log_;
  std::unique_ptr<WebhookReceiver> receiver_;
  std::unique_ptr<httplib::Client> client_;
};

// ---------------------------------------------------------------------------------------
// Raw sockets, for requests httplib::Client will not send.

// Reads one response (head plus Content-Length body), or until EOF / the deadline.
std::string ReadResponse(int fd) {
  std::string in;
  char buffer[4096];
  for (;;) {
    const size_t head_end = in.find("\r\n\r\n");
    if (head_end != std::string::npos) {
      const size_t at = in.find("Content-Length: ");
      if (at != std::string::npos && at < head_end) {
        const size_t length = std::stoul(in.substr(at + 16));
        if (in.size() >= head_end + 4 + length) return in;
      }
    }
    pollfd p = {fd, POLLIN, 0};
    if (::poll(&p, 1, kTimeoutSeconds * 1000) <= 0) return in;
    const ssize_t n = ::recv(fd, buffer, sizeof(buffer), 0);
    if (n <= 0) return in;
    in.append(buffer, static_cast<size_t>(n));
  }
}

// ---------------------------------------------------------------------------------------

TEST_F(WebhookReceiverTest, ValidDeliveryIsStoredExactlyAndAnsweredWithItsCursor) {
  StartReceiver();
  const httplib::Result result = Deliver(kCreateReport);
  ASSERT_TRUE(result) << httplib::to_string(result.error());
  EXPECT_EQ(result->status, 200);
  EXPECT_EQ(result->get_header_value("Content-Type"), "application/json");

  const std::vector<StoredEvent> events = log_.Events();
  ASSERT_EQ(events.size(), 1u);
  const NewEvent& event = events[0].event;
  EXPECT_EQ(event.payload, kCreateReport);
  EXPECT_EQ(event.content_hash, hashing::Sha256Hex(kCreateReport));
  EXPECT_EQ(event.event_name, "createReport");
  EXPECT_EQ(event.inspection_id, "i1");
  EXPECT_EQ(event.token_id, "t1");
  EXPECT_EQ(event.vehicle_id, "v1");
  EXPECT_EQ(event.received_at_ms, kNowMs);

  const nlohmann::json answer = JsonOf(result);
  EXPECT_EQ(answer, (nlohmann::json{
                        {"status", "stored"}, {"cursor", events[0].cursor}, {"duplicate", false}}));
  const WebhookReceiver::Stats stats = receiver_->stats();
  EXPECT_EQ(stats.accepted, 1);
  EXPECT_EQ(stats.unknown_event_names, 0);
}

TEST_F(WebhookReceiverTest, KeyHeaderNameIsCaseInsensitiveAndKeepAliveCarriesDeliveries) {
  StartReceiver();
  client_->set_keep_alive(true);
  for (int i = 0; i < 5; ++i) {
    const std::string body = absl::StrCat(R"({"event":"createReport","n":)", i, "}");
    const httplib::Result result = Deliver(body, {{"X-Api-Key", kKey}});
    ASSERT_TRUE(result) << httplib::to_string(result.error());
    EXPECT_EQ(result->status, 200);
    EXPECT_NE(result->get_header_value("Connection"), "close");
  }
  EXPECT_EQ(log_.Events().size(), 5u);
}

TEST_F(WebhookReceiverTest, PreviousKeyIsAcceptedDuringRotation) {
  WebhookReceiverOptions options = TestOptions();
  options.previous_key = kPreviousKey;
  StartReceiver(std::move(options));

  const httplib::Result old_key =
      Deliver(R"({"event":"newInspection","n":1})", KeyHeader(kPreviousKey));
  ASSERT_TRUE(old_key);
  EXPECT_EQ(old_key->status, 200);
  const httplib::Result new_key = Deliver(R"({"event":"newInspection","n":2})", KeyHeader(kKey));
  ASSERT_TRUE(new_key);
  EXPECT_EQ(new_key->status, 200);
  EXPECT_EQ(log_.Events().size(), 2u);
}

TEST_F(WebhookReceiverTest, MissingKeyIs401AndNothingIsStored) {
  StartReceiver();
  const httplib::Result result = Deliver(kCreateReport, /*headers=*/{});
  ASSERT_TRUE(result);
  EXPECT_EQ(result->status, 401);
  EXPECT_EQ(JsonOf(result).value("error", ""), "unauthorized");
  EXPECT_EQ(log_.AppendCalls(), 0);
  EXPECT_EQ(receiver_->stats().unauthorized, 1);
}

TEST_F(WebhookReceiverTest, WrongKeyIs401AndNothingIsStored) {
  WebhookReceiverOptions options = TestOptions();
  options.previous_key = kPreviousKey;
  StartReceiver(std::move(options));
  const std::string key = kKey;
  const std::vector<httplib::Headers> wrong = {
      KeyHeader("nope"),
      KeyHeader(""),
      KeyHeader(key.substr(0, key.size() - 1)),  // a prefix
      KeyHeader(key + "x"),                      // an extension
      KeyHeader(std::string(kKey) + kPreviousKey),
      {{"x-api-key", "nope"}, {"x-api-key", kKey}},  // repeated: refused, not guessed
      {{"authorization", kKey}},
  };
  for (const httplib::Headers& headers : wrong) {
    const httplib::Result result = Deliver(kCreateReport, headers);
    ASSERT_TRUE(result);
    EXPECT_EQ(result->status, 401);
  }
  EXPECT_EQ(log_.AppendCalls(), 0);
  EXPECT_EQ(receiver_->stats().unauthorized, static_cast<int64_t>(wrong.size()));
}

TEST_F(WebhookReceiverTest, RejectedBodyIsNotReadAndTheConnectionCloses) {
  StartReceiver();
  client_->set_keep_alive(true);
  const httplib::Result rejected = Deliver(kCreateReport, KeyHeader("wrong"));
  ASSERT_TRUE(rejected);
  EXPECT_EQ(rejected->status, 401);
  EXPECT_EQ(rejected->get_header_value("Connection"), "close");
  // The client reconnects by itself; the next delivery is fine.
  const httplib::Result next = Deliver(kCreateReport);
  ASSERT_TRUE(next);
  EXPECT_EQ(next->status, 200);
}

TEST_F(WebhookReceiverTest, DeclaredBodyOverTheLimitIs413AndNothingIsStored) {
  WebhookReceiverOptions options = TestOptions();
  options.limits.max_body_bytes = 1024;
  StartReceiver(std::move(options));

  std::string at_limit = R"({"event":"createReport","pad":")";
  at_limit += std::string(1024 - at_limit.size() - 2, 'x') + "\"}";
  ASSERT_EQ(at_limit.size(), 1024u);
  const httplib::Result fits = Deliver(at_limit);
  ASSERT_TRUE(fits);
  EXPECT_EQ(fits->status, 200);

  std::string over = R"({"event":"createReport","pad":")";
  over += std::string(1025 - over.size() - 2, 'y') + "\"}";
  const httplib::Result result = Deliver(over);
  ASSERT_TRUE(result) << httplib::to_string(result.error());
  EXPECT_EQ(result->status, 413);
  EXPECT_EQ(JsonOf(result).value("error", ""), "payload_too_large");
  EXPECT_EQ(log_.Events().size(), 1u);  // only the one that fit
  EXPECT_EQ(receiver_->stats().too_large, 1);
}

TEST_F(WebhookReceiverTest, ChunkedBodyOverTheLimitIs413) {
  WebhookReceiverOptions options = TestOptions();
  options.limits.max_body_bytes = 1024;
  StartReceiver(std::move(options));
  // No length: httplib::Client sends it chunked, 256 bytes at a time, 4 KiB in all. The
  // declared-length check cannot catch it; the limit on what arrives must.
  const httplib::Result result = client_->Post(
      kPath, KeyHeader(),
      [](size_t offset, httplib::DataSink& sink) {
        if (offset == 0) {
          const std::string start = R"({"event":"createReport","pad":")";
          sink.write(start.data(), start.size());
        } else if (offset < 4096) {
          const std::string pad(256, 'z');
          sink.write(pad.data(), pad.size());
        } else {
          sink.write("\"}", 2);
          sink.done();
        }
        return true;
      },
      "application/json");
  ASSERT_TRUE(result) << httplib::to_string(result.error());
  EXPECT_EQ(result->status, 413);
  EXPECT_EQ(log_.AppendCalls(), 0);
}

TEST_F(WebhookReceiverTest, ChunkedBodyWithinTheLimitIsStoredDecoded) {
  StartReceiver();
  const std::string body = kCreateReport;
  const httplib::Result result = client_->Post(
      kPath, KeyHeader(),
      [&body](size_t offset, httplib::DataSink& sink) {
        if (offset < body.size()) {
          sink.write(body.data() + offset, std::min<size_t>(7, body.size() - offset));
        } else {
          sink.done();
        }
        return true;
      },
      "application/json");
  ASSERT_TRUE(result) << httplib::to_string(result.error());
  EXPECT_EQ(result->status, 200);
  ASSERT_EQ(log_.Events().size(), 1u);
  EXPECT_EQ(log_.Events()[0].event.payload, body);
}

TEST_F(WebhookReceiverTest, SenderOfALargeBodyOverTheDefaultLimitReads413) {
  StartReceiver();  // default 8 MiB
  std::string body = R"({"event":"createReport","pad":")";
  body += std::string(8 * 1024 * 1024 + 1 - body.size() - 2, 'x') + "\"}";
  // The receiver answers before reading the body; the client is still sending it. The
  // answer must survive (no reset that would discard it).
  const httplib::Result result = Deliver(body);
  ASSERT_TRUE(result) << httplib::to_string(result.error());
  EXPECT_EQ(result->status, 413);
  EXPECT_EQ(log_.AppendCalls(), 0);
}

TEST_F(WebhookReceiverTest, BodyThatIsNotJsonIs400) {
  StartReceiver();
  for (const std::string& body : {std::string("not json"), std::string(R"({"event":"x")"),
                                  std::string(""), std::string("\xff\xfe")}) {
    const httplib::Result result = Deliver(body);
    ASSERT_TRUE(result);
    EXPECT_EQ(result->status, 400) << body;
    EXPECT_EQ(JsonOf(result).value("error", ""), "bad_json");
    EXPECT_THAT(JsonOf(result).value("message", ""), HasSubstr("not valid JSON"));
  }
  EXPECT_EQ(log_.AppendCalls(), 0);
  EXPECT_EQ(receiver_->stats().bad_json, 4);
}

TEST_F(WebhookReceiverTest, JsonDeeperOrLargerThanTheLimitsIs400AndNothingIsStored) {
  WebhookReceiverOptions options = TestOptions();
  options.json_limits.max_depth = 3;
  options.json_limits.max_elements = 10;
  StartReceiver(std::move(options));
  const httplib::Result within = Deliver(R"({"event":"createReport","a":{"b":[1]}})");
  ASSERT_TRUE(within);
  EXPECT_EQ(within->status, 200) << within->body;
  const httplib::Result deep = Deliver(R"({"event":"createReport","a":{"b":[[1]]}})");
  ASSERT_TRUE(deep);
  EXPECT_EQ(deep->status, 400);
  EXPECT_EQ(JsonOf(deep).value("error", ""), "json_too_complex");
  EXPECT_THAT(JsonOf(deep).value("message", ""), HasSubstr("deeper than 3"));
  const httplib::Result wide = Deliver(R"({"event":"createReport","n":[1,2,3,4,5,6,7,8,9]})");
  ASSERT_TRUE(wide);
  EXPECT_EQ(wide->status, 400);
  EXPECT_THAT(JsonOf(wide).value("message", ""), HasSubstr("more than 10 values"));
  EXPECT_EQ(log_.AppendCalls(), 1);
  EXPECT_EQ(receiver_->stats().json_too_complex, 2);
}

TEST_F(WebhookReceiverTest, ContinueComesOnlyAfterTheKeyCheck) {
  StartReceiver();
  const std::string body = R"({"event":"createReport","inspectionId":"c1"})";
  const std::string head = absl::StrCat(
      "POST /webhooks/v2 HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: ",
      body.size(), "\r\nx-api-key: ");
  // A wrong key: the 401 at once, never a 100 Continue (the sender keeps its body).
  const int wrong = ConnectToLoopback(receiver_->port());
  ASSERT_TRUE(SendAll(wrong, head + "wrong-key\r\n\r\n"));
  const std::string refused = ReadResponse(wrong);
  EXPECT_THAT(refused, ::testing::StartsWith("HTTP/1.1 401"));
  EXPECT_THAT(refused, Not(HasSubstr("100 Continue")));
  ::close(wrong);
  // The right key: 100 Continue, then the body, then 200.
  const int right = ConnectToLoopback(receiver_->port());
  ASSERT_TRUE(SendAll(right, head + kKey + "\r\n\r\n"));
  std::string interim;
  char buffer[256];
  while (interim.find("\r\n\r\n") == std::string::npos) {
    pollfd p = {right, POLLIN, 0};
    ASSERT_GT(::poll(&p, 1, kTimeoutSeconds * 1000), 0);
    const ssize_t n = ::recv(right, buffer, sizeof(buffer), 0);
    ASSERT_GT(n, 0);
    interim.append(buffer, static_cast<size_t>(n));
  }
  EXPECT_THAT(interim, ::testing::StartsWith("HTTP/1.1 100 Continue\r\n\r\n"));
  ASSERT_TRUE(SendAll(right, body));
  EXPECT_THAT(ReadResponse(right), HasSubstr(R"("status":"stored")"));
  ::close(right);
  EXPECT_EQ(log_.Events().size(), 1u);
}

TEST_F(WebhookReceiverTest, JsonThatIsNotAnObjectIs400) {
  StartReceiver();
  for (const std::string& body : {std::string(R"([{"event":"createReport"}])"),
                                  std::string(R"("createReport")"), std::string("42")}) {
    const httplib::Result result = Deliver(body);
    ASSERT_TRUE(result);
    EXPECT_EQ(result->status, 400) << body;
    EXPECT_EQ(JsonOf(result).value("message", ""), "the body is not a JSON object");
  }
  EXPECT_EQ(log_.AppendCalls(), 0);
}

TEST_F(WebhookReceiverTest, MissingOrNonStringEventNameIs400) {
  StartReceiver();
  for (const std::string& body :
       {std::string(R"({"inspectionId":"i1"})"), std::string(R"({"event":42})"),
        std::string(R"({"event":null})"), std::string(R"({"event":""})"),
        std::string(R"({"event":{"name":"createReport"}})")}) {
    const httplib::Result result = Deliver(body);
    ASSERT_TRUE(result);
    EXPECT_EQ(result->status, 400) << body;
    EXPECT_EQ(JsonOf(result).value("error", ""), "no_event_name");
    EXPECT_THAT(JsonOf(result).value("message", ""), HasSubstr("\"/event\""));
  }
  EXPECT_EQ(log_.AppendCalls(), 0);
  EXPECT_EQ(receiver_->stats().no_event_name, 5);
}

TEST_F(WebhookReceiverTest, UnknownEventNameIsStoredWithItsRawNameAndCounted) {
  StartReceiver();
  const httplib::Result result = Deliver(R"({"event":"vehicleTeleported","inspectionId":"i9"})");
  ASSERT_TRUE(result);
  EXPECT_EQ(result->status, 200);
  ASSERT_EQ(log_.Events().size(), 1u);
  EXPECT_EQ(log_.Events()[0].event.event_name, "vehicleTeleported");
  EXPECT_EQ(log_.Events()[0].event.inspection_id, "i9");
  EXPECT_EQ(log_.Events()[0].event.token_id, "");  // absent ids are ""
  const WebhookReceiver::Stats stats = receiver_->stats();
  EXPECT_EQ(stats.accepted, 1);
  EXPECT_EQ(stats.unknown_event_names, 1);
}

TEST_F(WebhookReceiverTest, CustomPointersTakeNamesAndNumericIdsFromAnywhere) {
  WebhookReceiverOptions options = TestOptions();
  options.event_name_pointer = "/data/type";
  options.inspection_id_pointer = "/data/ids/0";
  options.token_id_pointer = "/data/a~1b";  // the member named "a/b"
  options.vehicle_id_pointer = "/data/vehicle/id";
  options.known_event_names = {"inspection.created"};
  StartReceiver(std::move(options));

  const std::string body =
      R"({"data":{"type":"inspection.created","ids":[123456789012,7],"a/b":-5,)"
      R"("vehicle":{"id":1.5}}})";
  const httplib::Result result = Deliver(body);
  ASSERT_TRUE(result);
  EXPECT_EQ(result->status, 200);
  const std::vector<StoredEvent> events = log_.Events();
  ASSERT_EQ(events.size(), 1u);
  const NewEvent& event = events[0].event;
  EXPECT_EQ(event.event_name, "inspection.created");
  EXPECT_EQ(event.inspection_id, "123456789012");
  EXPECT_EQ(event.token_id, "-5");
  EXPECT_EQ(event.vehicle_id, "");  // not an integer: no id
  EXPECT_EQ(receiver_->stats().unknown_event_names, 0);

  // The default pointer no longer names the event.
  const httplib::Result wrong_place = Deliver(R"({"event":"createReport"})");
  ASSERT_TRUE(wrong_place);
  EXPECT_EQ(wrong_place->status, 400);
  EXPECT_THAT(JsonOf(wrong_place).value("message", ""), HasSubstr("/data/type"));
}

TEST_F(WebhookReceiverTest, DuplicateDeliveryIsAnswered200AndStoredOnce) {
  StartReceiver();
  const httplib::Result first = Deliver(kCreateReport);
  const httplib::Result second = Deliver(kCreateReport);
  ASSERT_TRUE(first);
  ASSERT_TRUE(second);
  EXPECT_EQ(first->status, 200);
  EXPECT_EQ(second->status, 200);
  EXPECT_EQ(JsonOf(first).value("duplicate", true), false);
  EXPECT_EQ(JsonOf(second).value("duplicate", false), true);
  EXPECT_EQ(JsonOf(second).value("cursor", ""), JsonOf(first).value("cursor", "x"));
  EXPECT_EQ(log_.Events().size(), 1u);
  const WebhookReceiver::Stats stats = receiver_->stats();
  EXPECT_EQ(stats.accepted, 1);
  EXPECT_EQ(stats.duplicates, 1);
}

TEST_F(WebhookReceiverTest, LogFailureIs503WithRetryAfterAndTheRetryIsStored) {
  StartReceiver();
  log_.FailAppendsWith(absl::UnavailableError("sqlite: disk I/O error at /secret/path"));
  const httplib::Result failed = Deliver(kCreateReport);
  ASSERT_TRUE(failed);
  EXPECT_EQ(failed->status, 503);
  EXPECT_EQ(failed->get_header_value("Retry-After"), "1");
  EXPECT_EQ(JsonOf(failed).value("error", ""), "store_unavailable");
  EXPECT_THAT(failed->body, Not(HasSubstr("stored\"")));
  EXPECT_THAT(failed->body, Not(HasSubstr("/secret/path")));
  EXPECT_EQ(log_.AppendCalls(), 1);
  EXPECT_TRUE(log_.Events().empty());

  // Any error, not only Unavailable, is "not stored: try again".
  log_.FailAppendsWith(absl::InternalError("broken"));
  const httplib::Result internal = Deliver(kCreateReport);
  ASSERT_TRUE(internal);
  EXPECT_EQ(internal->status, 503);

  // The sender's retry, once the log is back, is stored.
  log_.FailAppendsWith(absl::OkStatus());
  const httplib::Result retry = Deliver(kCreateReport);
  ASSERT_TRUE(retry);
  EXPECT_EQ(retry->status, 200);
  EXPECT_EQ(log_.Events().size(), 1u);
  const WebhookReceiver::Stats stats = receiver_->stats();
  EXPECT_EQ(stats.store_failures, 2);
  EXPECT_EQ(stats.accepted, 1);
}

// A Redis primary that took the event but no replica confirmed it in time
// (redis.min_replicas_acked): 503 not_replicated, counted apart from store failures, and the
// vendor's retry is acknowledged once the store confirms it.
TEST_F(WebhookReceiverTest, AnEventNoReplicaConfirmedIs503NotReplicated) {
  StartReceiver();
  absl::Status not_replicated = absl::UnavailableError("redis://h:1/0: 0 of the 1 replica(s)");
  not_replicated.SetPayload(redis::kNotReplicatedPayloadUrl, absl::Cord("1"));
  log_.FailAppendsWith(not_replicated);
  const httplib::Result refused = Deliver(kCreateReport);
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 503);
  EXPECT_EQ(refused->get_header_value("Retry-After"), "1");
  EXPECT_EQ(JsonOf(refused).value("error", ""), "not_replicated");
  EXPECT_THAT(refused->body, Not(HasSubstr("redis://")));

  log_.FailAppendsWith(absl::OkStatus());
  const httplib::Result retry = Deliver(kCreateReport);
  ASSERT_TRUE(retry);
  EXPECT_EQ(retry->status, 200);
  const WebhookReceiver::Stats stats = receiver_->stats();
  EXPECT_EQ(stats.not_replicated, 1);
  EXPECT_EQ(stats.store_failures, 0);
  EXPECT_EQ(stats.accepted, 1);
}

TEST_F(WebhookReceiverTest, AnswerWaitsForTheAppend) {
  StartReceiver();
  log_.HoldAppends(true);
  std::atomic<bool> answered{false};
  int status = 0;
  std::thread sender([&] {
    std::unique_ptr<httplib::Client> client = NewClient(receiver_->port());
    const httplib::Result result =
        client->Post(kPath, KeyHeader(), kCreateReport, "application/json");
    status = result ? result->status : -1;
    answered = true;
  });
  ASSERT_TRUE(log_.WaitForHeld(1));
  // The append has started and cannot finish: no answer may have gone out.
  EXPECT_FALSE(answered);
  log_.HoldAppends(false);
  sender.join();
  EXPECT_EQ(status, 200);
  EXPECT_EQ(log_.Events().size(), 1u);
}

TEST_F(WebhookReceiverTest, StopLetsADeliveryBeingStoredFinish) {
  StartReceiver();
  log_.HoldAppends(true);
  int status = 0;
  std::thread sender([&] {
    std::unique_ptr<httplib::Client> client = NewClient(receiver_->port());
    const httplib::Result result =
        client->Post(kPath, KeyHeader(), kCreateReport, "application/json");
    status = result ? result->status : -1;
  });
  ASSERT_TRUE(log_.WaitForHeld(1));
  absl::Notification stopped;
  std::thread stopper([&] {
    receiver_->Stop();
    stopped.Notify();
  });
  log_.HoldAppends(false);
  sender.join();
  stopper.join();
  EXPECT_TRUE(stopped.HasBeenNotified());
  EXPECT_EQ(status, 200);
  EXPECT_EQ(log_.Events().size(), 1u);
}

TEST_F(WebhookReceiverTest, OtherMethodsAre405) {
  StartReceiver();
  const httplib::Result get = client_->Get(kPath, KeyHeader());
  ASSERT_TRUE(get);
  EXPECT_EQ(get->status, 405);
  EXPECT_EQ(get->get_header_value("Allow"), "POST");
  EXPECT_EQ(JsonOf(get).value("error", ""), "method_not_allowed");
  const httplib::Result put = client_->Put(kPath, KeyHeader(), kCreateReport, "application/json");
  ASSERT_TRUE(put);
  EXPECT_EQ(put->status, 405);
  EXPECT_EQ(log_.AppendCalls(), 0);
  EXPECT_EQ(receiver_->stats().method_not_allowed, 2);
}

TEST_F(WebhookReceiverTest, OtherPathsAre404) {
  StartReceiver();
  for (const std::string path : {"/webhooks/v1", "/webhooks/v2/", "/", "/webhooks/v2x"}) {
    const httplib::Result result = Deliver(kCreateReport, KeyHeader(), path);
    ASSERT_TRUE(result);
    EXPECT_EQ(result->status, 404) << path;
    EXPECT_EQ(JsonOf(result).value("error", ""), "not_found");
  }
  // A query string does not change the path.
  const httplib::Result with_query = Deliver(kCreateReport, KeyHeader(), "/webhooks/v2?src=x");
  ASSERT_TRUE(with_query);
  EXPECT_EQ(with_query->status, 200);
  EXPECT_EQ(log_.AppendCalls(), 1);
  EXPECT_EQ(receiver_->stats().not_found, 4);
}

TEST_F(WebhookReceiverTest, StartWithoutAKeyFailsWithFailedPrecondition) {
  WebhookReceiverOptions options = TestOptions();
  options.current_key = "";
  options.previous_key = kPreviousKey;  // a previous key alone is not a configuration
  const absl::StatusOr<std::unique_ptr<WebhookReceiver>> started =
      WebhookReceiver::Start(std::move(options), &log_);
  ASSERT_FALSE(started.ok());
  EXPECT_EQ(started.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(started.status().message()), HasSubstr("webhook key"));
  EXPECT_THAT(std::string(started.status().message()), Not(HasSubstr(kPreviousKey)));
}

TEST_F(WebhookReceiverTest, StartRejectsInvalidOptions) {
  {
    WebhookReceiverOptions options = TestOptions();
    options.event_name_pointer = "event";  // not a pointer
    const auto started = WebhookReceiver::Start(std::move(options), &log_);
    ASSERT_FALSE(started.ok());
    EXPECT_EQ(started.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(started.status().message()), HasSubstr("event_name_pointer"));
  }
  {
    WebhookReceiverOptions options = TestOptions();
    options.token_id_pointer = "/a~2";
    EXPECT_EQ(WebhookReceiver::Start(std::move(options), &log_).status().code(),
              absl::StatusCode::kInvalidArgument);
  }
  {
    WebhookReceiverOptions options = TestOptions();
    options.path = "webhooks";
    EXPECT_EQ(WebhookReceiver::Start(std::move(options), &log_).status().code(),
              absl::StatusCode::kInvalidArgument);
  }
  EXPECT_EQ(WebhookReceiver::Start(TestOptions(), nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(WebhookReceiverTest, PortInUseIsUnavailable) {
  StartReceiver();
  WebhookReceiverOptions options = TestOptions();
  options.port = receiver_->port();
  EXPECT_EQ(WebhookReceiver::Start(std::move(options), &log_).status().code(),
            absl::StatusCode::kUnavailable);
}

TEST_F(WebhookReceiverTest, AnswersNeverContainTheKeysOrTheBody) {
  WebhookReceiverOptions options = TestOptions();
  options.previous_key = kPreviousKey;
  StartReceiver(std::move(options));
  const std::string marker = "BODY-MARKER-7f3a";
  const std::string stored = R"({"event":"createReport","m":")" + marker + R"("})";
  std::vector<httplib::Result> results;
  results.push_back(Deliver(stored));                                      // 200
  results.push_back(Deliver(stored));                                      // 200 duplicate
  results.push_back(Deliver(stored, KeyHeader(std::string(kKey) + "x")));  // 401
  results.push_back(Deliver(R"({"m":")" + marker + R"("})"));              // 400 no name
  results.push_back(Deliver("[\"" + marker + "\"]"));                      // 400 array
  results.push_back(Deliver(marker));                                      // 400 not JSON
  results.push_back(Deliver(stored, KeyHeader(), "/elsewhere"));           // 404
  log_.FailAppendsWith(absl::UnavailableError(absl::StrCat("down ", kKey)));
  results.push_back(Deliver(R"({"event":"x","m":")" + marker + R"("})"));  // 503
  results.push_back(client_->Get(kPath, KeyHeader()));                     // 405
  for (const httplib::Result& result : results) {
    ASSERT_TRUE(result);
    std::string everything = result->body;
    for (const auto& [name, value] : result->headers) absl::StrAppend(&everything, name, value);
    EXPECT_THAT(everything, Not(HasSubstr(kKey))) << result->status;
    EXPECT_THAT(everything, Not(HasSubstr(kPreviousKey))) << result->status;
    EXPECT_THAT(everything, Not(HasSubstr(marker))) << result->status;
  }
}

TEST_F(WebhookReceiverTest, ConcurrentDeliveriesAreAllStored) {
  StartReceiver();
  constexpr int kThreads = 8;
  constexpr int kPerThread = 25;
  std::atomic<int> ok{0};
  std::vector<std::thread> senders;
  for (int t = 0; t < kThreads; ++t) {
    senders.emplace_back([this, t, &ok] {
      std::unique_ptr<httplib::Client> client = NewClient(receiver_->port());
      client->set_keep_alive(true);
      for (int i = 0; i < kPerThread; ++i) {
        const std::string body =
            absl::StrCat(R"({"event":"detectionFinished","inspectionId":")", t, "-", i, R"("})");
        const httplib::Result result = client->Post(kPath, KeyHeader(), body, "application/json");
        if (result && result->status == 200) ++ok;
      }
    });
  }
  for (std::thread& sender : senders) sender.join();
  EXPECT_EQ(ok.load(), kThreads * kPerThread);
  const std::vector<StoredEvent> events = log_.Events();
  ASSERT_EQ(events.size(), static_cast<size_t>(kThreads * kPerThread));
  std::set<std::string> ids;
  for (const StoredEvent& stored : events) ids.insert(stored.event.inspection_id);
  EXPECT_EQ(ids.size(), events.size());
  EXPECT_EQ(receiver_->stats().accepted, kThreads * kPerThread);
}

// ---------------------------------------------------------------------------------------
// Named accounts: each on its own path, with its own key(s).

constexpr char kProdPath[] = "/webhooks/v2/prod";
constexpr char kProdKey[] = "whk-prod-current-aaaaaaaaaaaa";
constexpr char kProdPreviousKey[] = "whk-prod-previous-bbbbbbbbbb";
constexpr char kPreprodPath[] = "/webhooks/v2/preprod";
constexpr char kPreprodKey[] = "whk-preprod-current-cccccccccc";

WebhookReceiverOptions AccountOptions() {
  WebhookReceiverOptions options = TestOptions();
  options.accounts = {
      {"prod", kProdPath, kProdKey, kProdPreviousKey},
      {"pre-prod", kPreprodPath, kPreprodKey, ""},
  };
  return options;
}

// Start()'s answer to `options`: its code, and its message (checked for keys).
absl::Status StartStatus(WebhookReceiverOptions options, eventlog::EventLog* log) {
  return WebhookReceiver::Start(std::move(options), log).status();
}

TEST_F(WebhookReceiverTest, AccountDeliveriesAreStoredWithTheirAccount) {
  StartReceiver(AccountOptions());
  const std::vector<std::pair<std::string, std::string>> deliveries = {
      {kPath, kKey}, {kProdPath, kProdKey}, {kPreprodPath, kPreprodKey}};
  for (size_t i = 0; i < deliveries.size(); ++i) {
    const auto& [path, key] = deliveries[i];
    const httplib::Result result =
        Deliver(absl::StrCat(R"({"event":"createReport","inspectionId":"i)", i, R"("})"),
                KeyHeader(key), path);
    ASSERT_TRUE(result) << httplib::to_string(result.error());
    EXPECT_EQ(result->status, 200) << path;
  }
  const std::vector<StoredEvent> events = log_.Events();
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].event.account, "");
  EXPECT_EQ(events[1].event.account, "prod");
  EXPECT_EQ(events[2].event.account, "pre-prod");
  // The default account's duplicate key is the payload's hash, as before accounts; a named
  // account's is scoped by its name.
  EXPECT_EQ(events[0].event.content_hash, hashing::Sha256Hex(events[0].event.payload));
  EXPECT_EQ(events[1].event.content_hash, hashing::Sha256Hex("prod\n" + events[1].event.payload));
  EXPECT_EQ(events[2].event.content_hash,
            hashing::Sha256Hex("pre-prod\n" + events[2].event.payload));
  EXPECT_EQ(events[1].event.inspection_id, "i1");
  EXPECT_EQ(receiver_->stats().accepted, 3);  // stats are summed over accounts
}

TEST_F(WebhookReceiverTest, AnotherAccountsKeyIs401BothWays) {
  StartReceiver(AccountOptions());
  const std::vector<std::pair<std::string, std::string>> crossed = {
      {kProdPath, kKey},          // the default account's key on an account's path
      {kPath, kProdKey},          // an account's key on the default path
      {kPath, kProdPreviousKey},  // ... or its previous key
      {kProdPath, kPreprodKey},   // another account's key
      {kPreprodPath, kProdKey},   // ... both ways
      {kPreprodPath, kProdPreviousKey},
  };
  for (const auto& [path, key] : crossed) {
    const httplib::Result result = Deliver(kCreateReport, KeyHeader(key), path);
    ASSERT_TRUE(result);
    EXPECT_EQ(result->status, 401) << path;
    EXPECT_EQ(JsonOf(result).value("error", ""), "unauthorized");
  }
  EXPECT_EQ(log_.AppendCalls(), 0);
  EXPECT_EQ(receiver_->stats().unauthorized, static_cast<int64_t>(crossed.size()));
}

TEST_F(WebhookReceiverTest, SameBodyOnTwoAccountsIsTwoEventsAndTwiceOnOneIsADuplicate) {
  StartReceiver(AccountOptions());
  const httplib::Result on_default = Deliver(kCreateReport, KeyHeader(kKey), kPath);
  const httplib::Result on_prod = Deliver(kCreateReport, KeyHeader(kProdKey), kProdPath);
  const httplib::Result on_preprod = Deliver(kCreateReport, KeyHeader(kPreprodKey), kPreprodPath);
  const httplib::Result prod_again = Deliver(kCreateReport, KeyHeader(kProdKey), kProdPath);
  const httplib::Result default_again = Deliver(kCreateReport, KeyHeader(kKey), kPath);
  for (const httplib::Result* result :
       {&on_default, &on_prod, &on_preprod, &prod_again, &default_again}) {
    ASSERT_TRUE(*result);
    EXPECT_EQ((*result)->status, 200);
  }
  EXPECT_FALSE(JsonOf(on_default).value("duplicate", true));
  EXPECT_FALSE(JsonOf(on_prod).value("duplicate", true));
  EXPECT_FALSE(JsonOf(on_preprod).value("duplicate", true));
  EXPECT_TRUE(JsonOf(prod_again).value("duplicate", false));
  EXPECT_EQ(JsonOf(prod_again).value("cursor", ""), JsonOf(on_prod).value("cursor", "x"));
  EXPECT_TRUE(JsonOf(default_again).value("duplicate", false));
  EXPECT_EQ(JsonOf(default_again).value("cursor", ""), JsonOf(on_default).value("cursor", "x"));

  const std::vector<StoredEvent> events = log_.Events();
  ASSERT_EQ(events.size(), 3u);
  std::set<std::string> accounts;
  std::set<std::string> hashes;
  for (const StoredEvent& stored : events) {
    EXPECT_EQ(stored.event.payload, kCreateReport);
    accounts.insert(stored.event.account);
    hashes.insert(stored.event.content_hash);
  }
  EXPECT_EQ(accounts, (std::set<std::string>{"", "prod", "pre-prod"}));
  EXPECT_EQ(hashes.size(), 3u);
  const WebhookReceiver::Stats stats = receiver_->stats();
  EXPECT_EQ(stats.accepted, 3);
  EXPECT_EQ(stats.duplicates, 2);
}

TEST_F(WebhookReceiverTest, AccountsPreviousKeyIsAcceptedDuringRotation) {
  StartReceiver(AccountOptions());
  const httplib::Result old_key =
      Deliver(R"({"event":"newInspection","n":1})", KeyHeader(kProdPreviousKey), kProdPath);
  ASSERT_TRUE(old_key);
  EXPECT_EQ(old_key->status, 200);
  const httplib::Result new_key =
      Deliver(R"({"event":"newInspection","n":2})", KeyHeader(kProdKey), kProdPath);
  ASSERT_TRUE(new_key);
  EXPECT_EQ(new_key->status, 200);
  // pre-prod has no rotation in progress: prod's previous key is not one of its keys.
  const httplib::Result other =
      Deliver(R"({"event":"newInspection","n":3})", KeyHeader(kProdPreviousKey), kPreprodPath);
  ASSERT_TRUE(other);
  EXPECT_EQ(other->status, 401);
  const std::vector<StoredEvent> events = log_.Events();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].event.account, "prod");
  EXPECT_EQ(events[1].event.account, "prod");
}

TEST_F(WebhookReceiverTest, PathsOfNoAccountAre404) {
  StartReceiver(AccountOptions());
  for (const std::string path : {"/webhooks/v2/staging", "/webhooks/v2/prod/", "/webhooks/v2/Prod",
                                 "/webhooks/v2/pro", "/prod", "/webhooks/v2/pre-prod"}) {
    const httplib::Result result = Deliver(kCreateReport, KeyHeader(kProdKey), path);
    ASSERT_TRUE(result);
    EXPECT_EQ(result->status, 404) << path;
    EXPECT_EQ(JsonOf(result).value("error", ""), "not_found");
  }
  // A query string does not change the path (nor the account).
  const httplib::Result with_query =
      Deliver(kCreateReport, KeyHeader(kProdKey), std::string(kProdPath) + "?src=x");
  ASSERT_TRUE(with_query);
  EXPECT_EQ(with_query->status, 200);
  ASSERT_EQ(log_.Events().size(), 1u);
  EXPECT_EQ(log_.Events()[0].event.account, "prod");
  EXPECT_EQ(receiver_->stats().not_found, 6);
}

TEST_F(WebhookReceiverTest, StartRejectsInvalidAccounts) {
  struct Case {
    std::string what;
    std::function<void(WebhookReceiverOptions&)> change;
    absl::StatusCode code;
    std::string message;  // a part of the expected message
  };
  const std::vector<Case> cases = {
      {"duplicate name", [](WebhookReceiverOptions& o) { o.accounts[1].name = "prod"; },
       absl::StatusCode::kInvalidArgument, "\"prod\" is configured twice"},
      {"duplicate path", [](WebhookReceiverOptions& o) { o.accounts[1].path = kProdPath; },
       absl::StatusCode::kInvalidArgument, "already the path of webhook account \"prod\""},
      {"the default path", [](WebhookReceiverOptions& o) { o.accounts[0].path = kPath; },
       absl::StatusCode::kInvalidArgument, "already the path of the default webhook account"},
      {"relative path", [](WebhookReceiverOptions& o) { o.accounts[0].path = "webhooks/prod"; },
       absl::StatusCode::kInvalidArgument, "must start with '/'"},
      {"empty path", [](WebhookReceiverOptions& o) { o.accounts[0].path = ""; },
       absl::StatusCode::kInvalidArgument, "must start with '/'"},
      {"name with a newline", [](WebhookReceiverOptions& o) { o.accounts[0].name = "pr\nod"; },
       absl::StatusCode::kInvalidArgument, "[A-Za-z0-9._-]"},
      {"name with a space", [](WebhookReceiverOptions& o) { o.accounts[0].name = "pre prod"; },
       absl::StatusCode::kInvalidArgument, "[A-Za-z0-9._-]"},
      {"empty name", [](WebhookReceiverOptions& o) { o.accounts[0].name = ""; },
       absl::StatusCode::kInvalidArgument, "webhook account #1"},
      {"no key", [](WebhookReceiverOptions& o) { o.accounts[1].current_key = ""; },
       absl::StatusCode::kFailedPrecondition, "\"pre-prod\") has no webhook key"},
      {"only a previous key",
       [](WebhookReceiverOptions& o) {
         o.accounts[0].current_key = "";
         o.accounts[0].previous_key = kProdPreviousKey;
       },
       absl::StatusCode::kFailedPrecondition, "has no webhook key"},
      {"the default account's key",
       [](WebhookReceiverOptions& o) { o.accounts[1].current_key = kKey; },
       absl::StatusCode::kInvalidArgument,
       "\"pre-prod\" shares a webhook key with the default webhook account"},
      {"another account's previous key",
       [](WebhookReceiverOptions& o) { o.accounts[1].previous_key = kProdPreviousKey; },
       absl::StatusCode::kInvalidArgument,
       "\"pre-prod\" shares a webhook key with webhook "
       "account \"prod\""},
      {"no default key, with accounts", [](WebhookReceiverOptions& o) { o.current_key = ""; },
       absl::StatusCode::kFailedPrecondition, "webhook key"},
  };
  for (const Case& c : cases) {
    WebhookReceiverOptions options = AccountOptions();
    c.change(options);
    const absl::Status status = StartStatus(options, &log_);
    EXPECT_EQ(status.code(), c.code) << c.what << ": " << status;
    const std::string message(status.message());
    EXPECT_THAT(message, HasSubstr(c.message)) << c.what;
    EXPECT_THAT(message, Not(HasSubstr("\n"))) << c.what;  // names are escaped
    for (const char* key : {kKey, kProdKey, kProdPreviousKey, kPreprodKey}) {
      EXPECT_THAT(message, Not(HasSubstr(key))) << c.what;
    }
  }
  // The same key as current and previous of one account is no conflict; the valid
  // configuration starts.
  WebhookReceiverOptions same = AccountOptions();
  same.accounts[1].previous_key = kPreprodKey;
  EXPECT_TRUE(StartStatus(same, &log_).ok());
}

TEST_F(WebhookReceiverTest, AnswersOnAccountPathsNeverContainTheKeys) {
  StartReceiver(AccountOptions());
  std::vector<httplib::Result> results;
  results.push_back(Deliver(kCreateReport, KeyHeader(kProdKey), kProdPath));     // 200
  results.push_back(Deliver(kCreateReport, KeyHeader(kProdKey), kProdPath));     // duplicate
  results.push_back(Deliver(kCreateReport, KeyHeader(kKey), kProdPath));         // 401
  results.push_back(Deliver(kCreateReport, KeyHeader(kProdKey), kPreprodPath));  // 401
  results.push_back(Deliver("{}", KeyHeader(kProdKey), kProdPath));              // 400
  for (const httplib::Result& result : results) {
    ASSERT_TRUE(result);
    std::string everything = result->body;
    for (const auto& [name, value] : result->headers) absl::StrAppend(&everything, name, value);
    for (const char* key : {kKey, kProdKey, kProdPreviousKey, kPreprodKey}) {
      EXPECT_THAT(everything, Not(HasSubstr(key))) << result->status;
    }
  }
}

// ---------------------------------------------------------------------------------------
// Framing, over a raw socket.

TEST_F(WebhookReceiverTest, PostWithoutAnyLengthIsAnEmptyBodyNotAHang) {
  StartReceiver();
  const int fd = ConnectToLoopback(receiver_->port());
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(SendAll(
      fd, absl::StrCat("POST ", kPath, " HTTP/1.1\r\nHost: t\r\nx-api-key: ", kKey, "\r\n\r\n")));
  const std::string response = ReadResponse(fd);
  ::close(fd);
  EXPECT_THAT(response, HasSubstr("HTTP/1.1 400"));
  EXPECT_THAT(response, HasSubstr("bad_json"));
}

TEST_F(WebhookReceiverTest, DeclaredLengthOverTheLimitIsRefusedBeforeTheBodyArrives) {
  StartReceiver();
  // 10 GiB announced, nothing sent: httplib alone would try to read (and drop) all of it
  // before answering; the receiver answers from the head.
  const int fd = ConnectToLoopback(receiver_->port());
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(SendAll(fd, absl::StrCat("POST ", kPath, " HTTP/1.1\r\nHost: t\r\nx-api-key: ", kKey,
                                       "\r\nContent-Length: 10737418240\r\n\r\n")));
  const std::string response = ReadResponse(fd);
  EXPECT_THAT(response, HasSubstr("HTTP/1.1 413"));
  EXPECT_THAT(response, HasSubstr("payload_too_large"));
  EXPECT_THAT(response, HasSubstr("Connection: close"));
  ::close(fd);
  EXPECT_EQ(receiver_->stats().too_large, 1);
}

TEST_F(WebhookReceiverTest, AmbiguousFramingIs400AndEndsTheConnection) {
  StartReceiver();
  const std::string body = R"({"event":"createReport"})";
  const int fd = ConnectToLoopback(receiver_->port());
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(SendAll(fd, absl::StrCat("POST ", kPath, " HTTP/1.1\r\nHost: t\r\nx-api-key: ", kKey,
                                       "\r\nContent-Length: ", body.size(),
                                       "\r\nTransfer-Encoding: chunked\r\n\r\n", body)));
  const std::string response = ReadResponse(fd);
  EXPECT_THAT(response, HasSubstr("HTTP/1.1 400"));
  EXPECT_THAT(response, HasSubstr("Connection: close"));
  EXPECT_TRUE(PeerCloses(fd, std::chrono::seconds(kTimeoutSeconds)));
  ::close(fd);
  EXPECT_EQ(log_.AppendCalls(), 0);
  EXPECT_EQ(receiver_->stats().bad_requests, 1);
}

TEST_F(WebhookReceiverTest, TransferCodingOtherThanChunkedIs400NotAWaitForTheEnd) {
  StartReceiver();
  const int fd = ConnectToLoopback(receiver_->port());
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(SendAll(fd, absl::StrCat("POST ", kPath, " HTTP/1.1\r\nHost: t\r\nx-api-key: ", kKey,
                                       "\r\nTransfer-Encoding: gzip\r\n\r\nxyz")));
  const std::string response = ReadResponse(fd);
  EXPECT_THAT(response, HasSubstr("HTTP/1.1 400"));
  EXPECT_TRUE(PeerCloses(fd, std::chrono::seconds(kTimeoutSeconds)));
  ::close(fd);
  EXPECT_EQ(log_.AppendCalls(), 0);
}

TEST_F(WebhookReceiverTest, GetWithABodyEndsTheConnectionInsteadOfParsingTheBody) {
  StartReceiver();
  // If the body were left in the stream it would be parsed as a second request (a POST
  // that would be stored).
  const std::string smuggled =
      absl::StrCat("POST ", kPath, " HTTP/1.1\r\nHost: t\r\nx-api-key: ", kKey,
                   "\r\nContent-Length: 24\r\n\r\n", R"({"event":"createReport"})");
  const int fd = ConnectToLoopback(receiver_->port());
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(SendAll(fd, absl::StrCat("GET ", kPath, " HTTP/1.1\r\nHost: t\r\nContent-Length: ",
                                       smuggled.size(), "\r\n\r\n", smuggled)));
  const std::string response = ReadResponse(fd);
  EXPECT_THAT(response, HasSubstr("HTTP/1.1 405"));
  EXPECT_TRUE(PeerCloses(fd, std::chrono::seconds(kTimeoutSeconds)));
  ::close(fd);
  EXPECT_EQ(log_.AppendCalls(), 0);
}

TEST_F(WebhookReceiverTest, StopIsIdempotentAndDoesNotWaitForIdleConnections) {
  StartReceiver();
  client_->set_keep_alive(true);
  const httplib::Result result = Deliver(kCreateReport);  // leaves an idle keep-alive connection
  ASSERT_TRUE(result);
  ASSERT_EQ(result->status, 200);
  const auto begin = std::chrono::steady_clock::now();
  receiver_->Stop();
  // The idle timeout is 5 s; a Stop() that waited for it would take at least that long.
  EXPECT_LT(std::chrono::steady_clock::now() - begin, std::chrono::seconds(4));
  receiver_->Stop();
  // Nothing listens any more.
  EXPECT_LT(ConnectToLoopback(receiver_->port()), 0);
}

using ::inspection::testing::CapturedLog;

TEST_F(WebhookReceiverTest, EachDeliveryIsLoggedWithItsAccountNameCursorAndResult) {
  CapturedLog captured;
  StartReceiver();
  ASSERT_EQ(Deliver(kCreateReport)->status, 200);
  ASSERT_EQ(Deliver(kCreateReport)->status, 200);  // the same body again: a duplicate
  const std::vector<nlohmann::json> lines = captured.With("webhook delivered");
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0]["result"], "stored");
  EXPECT_EQ(lines[1]["result"], "duplicate");
  EXPECT_EQ(lines[0]["account"], "default");
  EXPECT_EQ(lines[0]["event_name"], "createReport");
  EXPECT_EQ(lines[0]["inspection_id"], "i1");
  EXPECT_EQ(lines[0]["cursor"], log_.Events()[0].cursor);
  EXPECT_EQ(lines[0]["peer"], "127.0.0.1");
  // A rejected one says why, and never carries the key it was sent with.
  ASSERT_EQ(Deliver(kCreateReport, KeyHeader("not-the-key-4f2a"))->status, 401);
  ASSERT_EQ(Deliver("{not json")->status, 400);
  const std::vector<nlohmann::json> rejected = captured.With("webhook rejected");
  ASSERT_EQ(rejected.size(), 2u);
  EXPECT_EQ(rejected[0]["reason"], "wrong_api_key");
  EXPECT_EQ(rejected[0]["http_status"], 401);
  EXPECT_EQ(rejected[1]["reason"], "bad_json");
  EXPECT_EQ(rejected[1]["account"], "default");
  EXPECT_EQ(captured.All().find("not-the-key-4f2a"), std::string::npos);
  EXPECT_EQ(captured.All().find(kKey), std::string::npos);
}

TEST_F(WebhookReceiverTest, AFloodOfRejectedDeliveriesCannotFloodTheLog) {
  CapturedLog captured;
  WebhookReceiverOptions options = TestOptions();
  options.rejected_lines_per_second = 5;
  StartReceiver(std::move(options));
  constexpr int kFlood = 300;
  for (int i = 0; i < kFlood; ++i) {
    auto client = NewClient(receiver_->port());  // a 401 closes its connection
    ASSERT_EQ(
        client->Post(kPath, KeyHeader("wrong-key"), kCreateReport, "application/json")->status,
        401);
  }
  // The legitimate delivery sent after the flood is stored and logged.
  ASSERT_EQ(Deliver(kCreateReport)->status, 200);
  const std::vector<nlohmann::json> rejected = captured.With("webhook rejected");
  // The burst (5) plus what the bucket refilled while the flood ran: far fewer than 300.
  EXPECT_GE(rejected.size(), 5u);
  EXPECT_LT(rejected.size(), static_cast<size_t>(kFlood) / 2) << rejected.size();
  EXPECT_EQ(receiver_->stats().unauthorized, kFlood);  // the metrics count every one
  EXPECT_EQ(captured.With("webhook delivered").size(), 1u);
  // One more rejection after a pause is written with the count of those suppressed.
  uint64_t suppressed_total = 0;
  for (const nlohmann::json& line : rejected)
    suppressed_total += line["suppressed"].get<uint64_t>();
  const size_t logged = rejected.size();
  ASSERT_TRUE(::inspection::testing::WaitUntil(
      [&] {
        auto client = NewClient(receiver_->port());
        client->Post(kPath, KeyHeader("wrong-key"), kCreateReport, "application/json");
        return captured.With("webhook rejected").size() > logged;
      },
      std::chrono::seconds(5)));
  const std::vector<nlohmann::json> after = captured.With("webhook rejected");
  suppressed_total += after.back()["suppressed"].get<uint64_t>();
  // Every rejection is either a line or counted in a later line's `suppressed`.
  EXPECT_EQ(after.size() + suppressed_total, static_cast<size_t>(receiver_->stats().unauthorized));
}

// --- the port's own series (webhook_metrics.h) --------------------------------------------

// The value of series `name` {`label`=`value`} in `registry` now; -1 when there is none.
double SeriesValue(prometheus::Registry& registry, const std::string& name,
                   const std::string& label = "", const std::string& value = "") {
  for (const prometheus::MetricFamily& family : registry.Collect()) {
    if (family.name != name) continue;
    for (const prometheus::ClientMetric& metric : family.metric) {
      const bool match = label.empty() || (!metric.label.empty() && metric.label[0].name == label &&
                                           metric.label[0].value == value);
      if (!match) continue;
      return family.type == prometheus::MetricType::Gauge ? metric.gauge.value
                                                          : metric.counter.value;
    }
  }
  return -1;
}

TEST_F(WebhookReceiverTest, ItsSeriesAreUpdatedAsDeliveriesAndConnectionsHappen) {
  prometheus::Registry registry;
  WebhookMetrics metrics{metrics::MetricsScope(registry)};
  // Every series exists at zero before the first delivery.
  EXPECT_EQ(SeriesValue(registry, "inspection_webhook_deliveries_total", "outcome", "accepted"), 0);
  EXPECT_EQ(
      SeriesValue(registry, "inspection_webhook_http_refusals_total", "reason", "head_timeout"), 0);
  WebhookReceiverOptions options = TestOptions();
  options.metrics = &metrics;
  StartReceiver(std::move(options));
  // The receiver tells `metrics` until it stops: stop it before they go, however this ends.
  struct StopFirst {
    std::unique_ptr<WebhookReceiver>& receiver;
    ~StopFirst() { receiver.reset(); }
  } stop_first{receiver_};
  EXPECT_EQ(SeriesValue(registry, "inspection_webhook_listener_accepting"), 1);

  ASSERT_EQ(Deliver(kCreateReport)->status, 200);
  ASSERT_EQ(Deliver(kCreateReport)->status, 200);  // a duplicate
  ASSERT_EQ(Deliver(kCreateReport, KeyHeader("wrong-key"))->status, 401);
  ASSERT_EQ(Deliver("{not json")->status, 400);
  // Read with nothing in between that could copy them: they were counted as they happened.
  EXPECT_EQ(SeriesValue(registry, "inspection_webhook_deliveries_total", "outcome", "accepted"), 1);
  EXPECT_EQ(SeriesValue(registry, "inspection_webhook_deliveries_total", "outcome", "duplicate"),
            1);
  EXPECT_EQ(SeriesValue(registry, "inspection_webhook_deliveries_total", "outcome", "unauthorized"),
            1);
  EXPECT_EQ(SeriesValue(registry, "inspection_webhook_deliveries_total", "outcome", "bad_json"), 1);
  EXPECT_EQ(SeriesValue(registry, "inspection_event_log_appends_total"), 1);
  // A connection held open is counted while it is open, and no longer once closed.
  client_.reset();
  auto connections = [&] { return SeriesValue(registry, "inspection_webhook_connections"); };
  ASSERT_TRUE(::inspection::testing::WaitUntil([&] { return connections() == 0; },
                                               std::chrono::seconds(kTimeoutSeconds)));
  const int idle = ConnectToLoopback(receiver_->port());
  ASSERT_GE(idle, 0);
  ASSERT_TRUE(::inspection::testing::WaitUntil([&] { return connections() == 1; },
                                               std::chrono::seconds(kTimeoutSeconds)));
  ::close(idle);
  ASSERT_TRUE(::inspection::testing::WaitUntil([&] { return connections() == 0; },
                                               std::chrono::seconds(kTimeoutSeconds)));

  // A request line the HTTP layer cannot read: a refusal and a bad_request delivery at once.
  const int raw = ConnectToLoopback(receiver_->port());
  ASSERT_GE(raw, 0);
  ASSERT_TRUE(SendAll(raw,
                      "POST /webhooks/v2 HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n"
                      "Content-Length: 2\r\n\r\nab"));
  ASSERT_TRUE(::inspection::testing::WaitUntil(
      [&] {
        return SeriesValue(registry, "inspection_webhook_http_refusals_total", "reason",
                           "malformed") == 1 &&
               SeriesValue(registry, "inspection_webhook_deliveries_total", "outcome",
                           "bad_request") == 1;
      },
      std::chrono::seconds(kTimeoutSeconds)));
  ::close(raw);
  EXPECT_EQ(SeriesValue(registry, "inspection_webhook_deliveries_total", "outcome", "bad_request"),
            1);

  receiver_.reset();
  EXPECT_EQ(SeriesValue(registry, "inspection_webhook_connections"), 0);
  EXPECT_EQ(SeriesValue(registry, "inspection_webhook_listener_accepting"), 0);
}

TEST(WebhookMetricsTest, EveryHttpEventLandsInItsSeriesAndOddValuesStayBounded) {
  prometheus::Registry registry;
  WebhookMetrics metrics{metrics::MetricsScope(registry)};
  using http::HttpServerEvent;
  const std::pair<HttpServerEvent, const char*> refusals[] = {
      {HttpServerEvent::kShedMaxConnections, "max_connections"},
      {HttpServerEvent::kShedPerClient, "max_connections_per_client"},
      {HttpServerEvent::kShedInFlight, "max_requests_in_flight"},
      {HttpServerEvent::kIdleClosedForRoom, "idle_closed_for_room"},
      {HttpServerEvent::kAwaitingHeadClosedForRoom, "awaiting_head_closed_for_room"},
      {HttpServerEvent::kAnsweringClosedForRoom, "answering_closed_for_room"},
      {HttpServerEvent::kHeadTimeout, "head_timeout"},
      {HttpServerEvent::kBodyTimeout, "body_timeout"},
      {HttpServerEvent::kWriteTimeout, "write_timeout"},
      {HttpServerEvent::kHeadTooLarge, "head_too_large"},
      {HttpServerEvent::kNotImplemented, "not_implemented"},
  };
  for (const auto& [event, reason] : refusals) {
    metrics.OnHttpEvent(event);
    EXPECT_EQ(SeriesValue(registry, "inspection_webhook_http_refusals_total", "reason", reason), 1)
        << reason;
  }
  metrics.OnHttpEvent(HttpServerEvent::kMalformed);  // a refusal and a bad_request delivery
  EXPECT_EQ(SeriesValue(registry, "inspection_webhook_http_refusals_total", "reason", "malformed"),
            1);
  EXPECT_EQ(SeriesValue(registry, "inspection_webhook_deliveries_total", "outcome", "bad_request"),
            1);
  metrics.OnHttpEvent(HttpServerEvent::kAccepted);  // no series of its own: nothing moves
  metrics.OnHttpEvent(HttpServerEvent::kAccepting);
  EXPECT_EQ(SeriesValue(registry, "inspection_webhook_listener_accepting"), 1);
  metrics.OnHttpEvent(HttpServerEvent::kNotAccepting);
  EXPECT_EQ(SeriesValue(registry, "inspection_webhook_listener_accepting"), 0);
  metrics.OnHttpEvent(HttpServerEvent::kBodyTooLarge);
  EXPECT_EQ(SeriesValue(registry, "inspection_webhook_deliveries_total", "outcome", "too_large"),
            1);
  metrics.OnHttpEvent(HttpServerEvent::kAcceptError);
  EXPECT_EQ(SeriesValue(registry, "inspection_webhook_accept_errors_total"), 1);
  metrics.OnHttpEvent(HttpServerEvent::kConnectionOpened);
  metrics.OnHttpEvent(HttpServerEvent::kConnectionOpened);
  metrics.OnHttpEvent(HttpServerEvent::kConnectionClosed);
  EXPECT_EQ(SeriesValue(registry, "inspection_webhook_connections"), 1);
  metrics.Delivery(WebhookOutcome::kStoreFailure);
  EXPECT_EQ(SeriesValue(registry, "inspection_event_log_append_errors_total"), 1);
  metrics.Delivery(WebhookOutcome::kNotReplicated);
  EXPECT_EQ(SeriesValue(registry, "inspection_event_log_append_errors_total"), 2);
  EXPECT_EQ(
      SeriesValue(registry, "inspection_webhook_deliveries_total", "outcome", "not_replicated"), 1);
  // A value cast from an int lands in the last bucket, not out of bounds.
  metrics.Delivery(static_cast<WebhookOutcome>(50));
  EXPECT_EQ(
      SeriesValue(registry, "inspection_webhook_deliveries_total", "outcome", "not_replicated"), 2);
  EXPECT_EQ(WebhookOutcomeLabel(WebhookOutcome::kMethodNotAllowed), "method_not_allowed");
  EXPECT_EQ(WebhookRefusalLabel(WebhookRefusal::kAnsweringClosedForRoom),
            "answering_closed_for_room");
}

}  // namespace
}  // namespace inspection::webhooks
