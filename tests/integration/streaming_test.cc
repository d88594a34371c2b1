// Webhooks in, gRPC streams out: the in-process gateway with its webhook receiver and a
// SQLite event log; webhooks are posted over HTTP like the vendor does.
#include <httplib.h>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

#include <grpcpp/generic/generic_stub.h>

#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "inspection/v1/event.grpc.pb.h"
#include "sandbox/emulator/sandbox_server.h"
#include "tests/integration/gateway_fixture.h"
#include "tests/support/captured_log.h"
#include "tests/support/wait.h"

namespace inspection::testing {
namespace {

constexpr char kWebhookKey[] = "webhook-key-9c1e";

class StreamingTest : public GatewayTest {
 protected:
  void SetUp() override {
    ASSERT_TRUE(vendor_.Start());
    StartStreamingGateway();
  }

  void StartStreamingGateway(size_t queue_size = 1000, int max_events = 1000000,
                             std::function<void(server::GatewayServerOptions&)> tweak = nullptr) {
    StartGateway(vendor_.BaseUrl(), [&](server::GatewayServerOptions& options) {
      options.webhook.host = "127.0.0.1";
      options.webhook.port = 0;
      options.webhook.current_key = kWebhookKey;
      options.stream_queue.max_events = queue_size;
      options.retention.max_events = max_events;
      // The tests share one channel; the caps have tests of their own.
      options.stream_slots.max_per_connection = 0;
      if (tweak) tweak(options);
    });
    events_ = v1::EventService::NewStub(channel_);
  }

  // Posts a webhook as the vendor does; returns the HTTP status.
  int PostWebhook(const nlohmann::json& body, const std::string& key = kWebhookKey) {
    httplib::Client client("127.0.0.1", gateway_->webhook_port());
    auto response =
        client.Post("/webhooks/v2", {{"x-api-key", key}}, body.dump(), "application/json");
    return response ? response->status : -1;
  }

  static nlohmann::json Event(const std::string& name, const std::string& inspection, int n = 0) {
    return {{"event", name},
            {"inspectionId", inspection},
            {"tokenId", "tok"},
            {"vehicleId", "veh"},
            {"n", n}};
  }

  // A Subscribe stream read on its own thread into a list.
  struct Stream {
    grpc::ClientContext context;
    std::unique_ptr<grpc::ClientReader<v1::SubscribeResponse>> reader;
    std::thread thread;
    std::mutex mu;
    std::condition_variable cv;
    std::vector<v1::Event> events;
    bool done = false;
    grpc::Status status;

    bool WaitFor(size_t n, std::chrono::seconds deadline = std::chrono::seconds(20)) {
      std::unique_lock<std::mutex> lock(mu);
      return cv.wait_for(lock, deadline, [&] { return events.size() >= n || done; }) &&
             events.size() >= n;
    }
    bool WaitDone(std::chrono::seconds deadline = std::chrono::seconds(20)) {
      std::unique_lock<std::mutex> lock(mu);
      return cv.wait_for(lock, deadline, [&] { return done; });
    }
    ~Stream() {
      context.TryCancel();
      if (thread.joinable()) thread.join();
    }
  };

  std::unique_ptr<Stream> Subscribe(const v1::SubscribeRequest& request) {
    auto stream = std::make_unique<Stream>();
    stream->reader = events_->Subscribe(&stream->context, request);
    Stream* s = stream.get();
    s->thread = std::thread([s] {
      v1::SubscribeResponse response;
      while (s->reader->Read(&response)) {
        std::lock_guard<std::mutex> lock(s->mu);
        s->events.push_back(response.event());
        s->cv.notify_all();
      }
      grpc::Status status = s->reader->Finish();
      std::lock_guard<std::mutex> lock(s->mu);
      s->status = status;
      s->done = true;
      s->cv.notify_all();
    });
    return stream;
  }

  // Waits until the hub has this many subscribers (a new stream is registered
  // asynchronously; posting before that would be "before the subscription").
  void WaitSubscribers(size_t n) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (gateway_->hub().SubscriberCount() < n && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::yield();
    }
    ASSERT_GE(gateway_->hub().SubscriberCount(), n);
  }

  std::unique_ptr<v1::EventService::Stub> events_;
};

// Subscribe and StreamDamageResults are raw methods (they write shared, serialized-once
// bytes): bytes that are not the request message get INVALID_ARGUMENT with the reason
// INVALID_REQUEST, as a typed method's validation errors do, and the gateway serves on.
TEST_F(StreamingTest, AStreamRequestThatIsNotTheMessageIsInvalidArgument) {
  StartStreamingGateway();
  grpc::GenericStub generic(channel_);
  for (const char* method : {"/inspection.v1.EventService/Subscribe",
                             "/inspection.v1.DamageService/StreamDamageResults"}) {
    SCOPED_TRACE(method);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    grpc::CompletionQueue cq;
    // Field 1 as a length-delimited value 200 bytes long, followed by 1 byte: truncated.
    const std::string garbage = "\x0a\xc8\x01x";
    grpc::Slice slice(garbage);
    grpc::ByteBuffer request(&slice, 1);
    auto call = generic.PrepareCall(&context, method, &cq);
    void* tag = nullptr;
    bool ok = false;
    call->StartCall(reinterpret_cast<void*>(1));
    ASSERT_TRUE(cq.Next(&tag, &ok));
    ASSERT_TRUE(ok);
    call->Write(request, reinterpret_cast<void*>(2));
    ASSERT_TRUE(cq.Next(&tag, &ok));
    call->WritesDone(reinterpret_cast<void*>(3));
    ASSERT_TRUE(cq.Next(&tag, &ok));
    grpc::ByteBuffer response;
    call->Read(&response, reinterpret_cast<void*>(4));
    ASSERT_TRUE(cq.Next(&tag, &ok));
    EXPECT_FALSE(ok);  // no message: the stream ends
    grpc::Status status;
    call->Finish(&status, reinterpret_cast<void*>(5));
    ASSERT_TRUE(cq.Next(&tag, &ok));
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
    google::rpc::Status details;
    ASSERT_TRUE(details.ParseFromString(status.error_details()));
    google::rpc::ErrorInfo info;
    ASSERT_GE(details.details_size(), 1);
    ASSERT_TRUE(details.details(0).UnpackTo(&info));
    EXPECT_EQ(info.reason(), "INVALID_REQUEST");
    cq.Shutdown();
    while (cq.Next(&tag, &ok)) {
    }
  }
  // A well-formed Subscribe on the same channel still streams.
  auto stream = Subscribe(v1::SubscribeRequest());
  WaitSubscribers(1);
  ASSERT_EQ(PostWebhook(Event("newInspection", "after-garbage")), 200);
  EXPECT_TRUE(stream->WaitFor(1));
}

TEST_F(StreamingTest, WebhooksReachSubscribersInOrderWithCursors) {
  auto stream = Subscribe(v1::SubscribeRequest());
  WaitSubscribers(1);
  for (int i = 0; i < 3; ++i) ASSERT_EQ(PostWebhook(Event("newInspection", "i1", i)), 200);
  ASSERT_TRUE(stream->WaitFor(3));
  std::lock_guard<std::mutex> lock(stream->mu);
  for (int i = 0; i < 3; ++i) {
    const v1::Event& event = stream->events[i];
    EXPECT_EQ(event.event_name(), v1::EVENT_NAME_NEW_INSPECTION);
    EXPECT_EQ(event.event_name_raw(), "newInspection");
    EXPECT_EQ(event.inspection_id(), "i1");
    EXPECT_EQ(event.token_id(), "tok");
    EXPECT_EQ(event.vehicle_id(), "veh");
    EXPECT_FALSE(event.cursor().empty());
    EXPECT_EQ(event.payload().struct_value().fields().at("n").number_value(), i);
    if (i > 0) {
      EXPECT_LT(*eventlog::CompareCursors(stream->events[i - 1].cursor(), event.cursor()), 0);
    }
  }
}

TEST_F(StreamingTest, WrongKeyIsRejectedAndNothingIsStreamed) {
  v1::SubscribeRequest request;
  request.set_from_start(true);
  auto stream = Subscribe(request);
  WaitSubscribers(1);
  EXPECT_EQ(PostWebhook(Event("newInspection", "i1"), "wrong-key"), 401);
  ASSERT_EQ(PostWebhook(Event("detectionFinished", "i1"), kWebhookKey), 200);
  ASSERT_TRUE(stream->WaitFor(1));
  std::lock_guard<std::mutex> lock(stream->mu);
  ASSERT_EQ(stream->events.size(), 1u);
  EXPECT_EQ(stream->events[0].event_name_raw(), "detectionFinished");
}

TEST_F(StreamingTest, ResumeAfterACursorHasNoGapAndNoDuplicate) {
  for (int i = 0; i < 6; ++i) ASSERT_EQ(PostWebhook(Event("newInspection", "i", i)), 200);
  v1::SubscribeRequest first;
  first.set_from_start(true);
  auto stream = Subscribe(first);
  ASSERT_TRUE(stream->WaitFor(6));
  std::string cursor;
  {
    std::lock_guard<std::mutex> lock(stream->mu);
    cursor = stream->events[2].cursor();
  }
  stream.reset();  // the client goes away after processing three events
  ASSERT_EQ(PostWebhook(Event("newInspection", "i", 6)), 200);

  v1::SubscribeRequest resume;
  resume.set_after_cursor(cursor);
  auto resumed = Subscribe(resume);
  ASSERT_TRUE(resumed->WaitFor(4));
  std::lock_guard<std::mutex> lock(resumed->mu);
  std::vector<int> numbers;
  for (const auto& event : resumed->events) {
    numbers.push_back(
        static_cast<int>(event.payload().struct_value().fields().at("n").number_value()));
  }
  EXPECT_EQ(numbers, (std::vector<int>{3, 4, 5, 6}));
}

TEST_F(StreamingTest, FiltersByNameInspectionAndToken) {
  v1::SubscribeRequest request;
  request.add_event_names(v1::EVENT_NAME_CREATE_REPORT);
  request.add_event_names_raw("futureEvent");
  request.set_inspection_id("wanted");
  auto stream = Subscribe(request);
  WaitSubscribers(1);
  ASSERT_EQ(PostWebhook(Event("createReport", "other")), 200);
  ASSERT_EQ(PostWebhook(Event("newInspection", "wanted")), 200);
  ASSERT_EQ(PostWebhook(Event("futureEvent", "wanted")), 200);
  ASSERT_EQ(PostWebhook(Event("createReport", "wanted")), 200);
  ASSERT_TRUE(stream->WaitFor(2));
  std::lock_guard<std::mutex> lock(stream->mu);
  ASSERT_EQ(stream->events.size(), 2u);
  EXPECT_EQ(stream->events[0].event_name_raw(), "futureEvent");
  EXPECT_EQ(stream->events[0].event_name(), v1::EVENT_NAME_UNSPECIFIED);  // unknown, kept raw
  EXPECT_EQ(stream->events[1].event_name(), v1::EVENT_NAME_CREATE_REPORT);
}

TEST_F(StreamingTest, CreateReportIsDecoded) {
  v1::SubscribeRequest request;
  request.set_from_start(true);
  auto stream = Subscribe(request);
  WaitSubscribers(1);
  ASSERT_EQ(PostWebhook(nlohmann::json::parse(R"({
    "message": "Report OK", "event": "createReport", "inspectionId": "insp_7",
    "tokenId": "uid_7", "vehicleId": "veh_7",
    "dataAPI": {"totalTime": 12.5, "status": 200, "data": {
      "damages": {"PRCAR": [{"uid": 1, "isAuto": true, "severity": "SEV3", "size": 0.02,
                             "part": "PRCAR", "type": "scratch",
                             "rois": [{"height": 0.1, "width": 0.2, "centerX": 0.5,
                                       "centerY": 0.6, "imageId": "img1",
                                       "imageUrl": "https://cdn.test/img1.jpg"}]}]},
      "vehicle": {"region": "FR", "immat": "AB-123-CD", "detectedLicensePlate": "AB123CD"},
      "damageNumber": 1,
      "detectionList": [{"url": "https://cdn.test/img1.jpg", "status": 200, "angle": 9,
                         "id": "img1", "detections": {"damages": null}}],
      "reportUrl": "https://report.test/insp_7?token=x", "tokenId": "uid_7",
      "severity": [{"cost": 120, "severity": "SEV3", "severityType": "sum",
                    "location": "PRCAR"}],
      "inspectionImages": [{"name": "back", "url": "https://cdn.test/img1.jpg",
                            "shootingDate": "2024-03-01T10:00:00.000Z", "angle": 9}]}}})")),
            200);
  ASSERT_TRUE(stream->WaitFor(1));
  std::lock_guard<std::mutex> lock(stream->mu);
  const v1::CreateReport& report = stream->events[0].create_report();
  EXPECT_EQ(report.message(), "Report OK");
  EXPECT_EQ(report.inspection_id(), "insp_7");
  const v1::ReportData& data = report.data_api().data();
  ASSERT_EQ(data.damages().count("PRCAR"), 1u);
  const v1::Damage& damage = data.damages().at("PRCAR").damages(0);
  EXPECT_EQ(damage.severity(), v1::SEVERITY_SEV3);
  EXPECT_EQ(damage.part_code().family(), "PRC");
  EXPECT_EQ(damage.part_code().location(), "AR");
  EXPECT_DOUBLE_EQ(damage.rois(0).center_y(), 0.6);
  EXPECT_EQ(data.vehicle().detected_license_plate(), "AB123CD");
  EXPECT_EQ(data.detection_list(0).angle(), 9);
  EXPECT_FALSE(data.detection_list(0).angle_name().empty());
  EXPECT_EQ(data.severity(0).severity(), v1::SEVERITY_SEV3);
  EXPECT_EQ(data.unknown_fields().fields().count("damages"), 0u);  // typed, not left raw
}

TEST_F(StreamingTest, ACursorOlderThanRetentionIsOutOfRange) {
  std::string oldest;
  for (int i = 0; i < 5; ++i) ASSERT_EQ(PostWebhook(Event("newInspection", "i", i)), 200);
  auto all = gateway_->event_log().ReadAfter("", 10);
  ASSERT_TRUE(all.ok());
  oldest = (*all)[0].cursor;
  // Keep only the newest event.
  auto trimmed =
      server::OpenEventLog("sqlite:" + temp_.File("events-1.db"), {std::chrono::hours(1), 1});
  ASSERT_TRUE(trimmed.ok()) << trimmed.status();
  ASSERT_TRUE((*trimmed)->ApplyRetention(absl::Now()).ok());
  v1::SubscribeRequest request;
  request.set_after_cursor(oldest);
  auto stream = Subscribe(request);
  ASSERT_TRUE(stream->WaitDone());
  EXPECT_EQ(stream->status.error_code(), grpc::StatusCode::OUT_OF_RANGE);
  EXPECT_EQ(ErrorInfoOf(stream->status).reason(), "CURSOR_EXPIRED");
}

TEST_F(StreamingTest, MalformedCursorIsInvalidArgument) {
  v1::SubscribeRequest request;
  request.set_after_cursor("yesterday");
  auto stream = Subscribe(request);
  ASSERT_TRUE(stream->WaitDone());
  EXPECT_EQ(stream->status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(BadRequestOf(stream->status).field_violations(0).field(), "after_cursor");
}

TEST_F(StreamingTest, ASubscriberThatDoesNotReadIsEndedWithItsLastCursor) {
  StartStreamingGateway(/*queue_size=*/4);
  // A raw stream that is never read: gRPC's flow-control windows fill up, then the
  // gateway's bounded queue, then the gateway ends it.
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  auto reader = events_->Subscribe(&context, v1::SubscribeRequest());
  WaitSubscribers(1);
  const std::string padding(200 * 1024, 'x');
  int posted = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(40);
  while (gateway_->hub().SubscriberCount() > 0 && std::chrono::steady_clock::now() < deadline) {
    nlohmann::json body = Event("newInspection", "i", posted++);
    body["padding"] = padding;
    ASSERT_EQ(PostWebhook(body), 200);
  }
  EXPECT_EQ(gateway_->hub().SubscriberCount(), 0u) << "never dropped after " << posted;
  // Now read what was written, then the status.
  v1::SubscribeResponse response;
  std::string last;
  while (reader->Read(&response)) last = response.event().cursor();
  grpc::Status status = reader->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  auto info = ErrorInfoOf(status);
  EXPECT_EQ(info.reason(), "SUBSCRIBER_TOO_SLOW");
  EXPECT_EQ(info.metadata().at("last_cursor"), last);
}

// Issue 14: the queue is bounded in bytes too. With 1 MiB events and queue_max_bytes of
// 2 MiB, a subscriber that does not read is ended after a few events, not after
// queue_size (1,000) of them, a GiB later.
TEST_F(StreamingTest, ASubscriberThatDoesNotReadIsEndedAtItsByteBound) {
  StartStreamingGateway(/*queue_size=*/1000, 1000000, [](server::GatewayServerOptions& options) {
    options.stream_queue.max_bytes = 2 << 20;
  });
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  auto reader = events_->Subscribe(&context, v1::SubscribeRequest());
  WaitSubscribers(1);
  const std::string padding(1 << 20, 'x');
  int posted = 0;
  while (gateway_->hub().SubscriberCount() > 0 && posted < 200) {
    nlohmann::json body = Event("newInspection", "i", posted++);
    body["padding"] = padding;
    ASSERT_EQ(PostWebhook(body), 200);
  }
  EXPECT_EQ(gateway_->hub().SubscriberCount(), 0u);
  // gRPC's flow-control windows take some; the gateway's queue at most 2 MiB more.
  EXPECT_LT(posted, 64);
  context.TryCancel();
}

// The byte bound counts what waits behind the write in flight: events each larger than
// queue_max_bytes reach a subscriber that keeps reading. (A burst of them, all waiting at
// once, is past the bound by design and ends the stream; so each is posted once the one
// before it was read, which makes the test independent of the machine's load.)
TEST_F(StreamingTest, EventsLargerThanTheByteBoundReachASubscriberThatKeepsReading) {
  StartStreamingGateway(/*queue_size=*/1000, 1000000, [](server::GatewayServerOptions& options) {
    options.stream_queue.max_bytes = 64 * 1024;
  });
  auto stream = Subscribe(v1::SubscribeRequest());
  WaitSubscribers(1);
  const std::string padding(256 * 1024, 'x');
  for (int i = 0; i < 8; ++i) {
    nlohmann::json body = Event("newInspection", "big", i);
    body["padding"] = padding;
    ASSERT_EQ(PostWebhook(body), 200);
    ASSERT_TRUE(stream->WaitFor(i + 1)) << "event " << i;
  }
  EXPECT_TRUE(stream->WaitFor(8));
  std::lock_guard<std::mutex> lock(stream->mu);
  EXPECT_FALSE(stream->done) << stream->status.error_message();
}

// Issue 14: a catching-up subscriber that does not read is ended after
// streams.catchup_idle_timeout_ms with RESOURCE_EXHAUSTED and its last cursor.
TEST_F(StreamingTest, ACatchingUpSubscriberThatDoesNotReadIsEndedWithItsLastCursor) {
  StartStreamingGateway(/*queue_size=*/4, 1000000, [](server::GatewayServerOptions& options) {
    options.hub.catchup_idle_timeout = std::chrono::milliseconds(300);
  });
  const std::string padding(256 * 1024, 'x');
  for (int i = 0; i < 60; ++i) {  // 15 MiB: more than gRPC's windows and the queue hold
    nlohmann::json body = Event("newInspection", "i", i);
    body["padding"] = padding;
    ASSERT_EQ(PostWebhook(body), 200);
  }
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  v1::SubscribeRequest request;
  request.set_from_start(true);
  auto reader = events_->Subscribe(&context, request);
  WaitSubscribers(1);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (gateway_->hub().SubscriberCount() > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(gateway_->hub().SubscriberCount(), 0u) << "a non-reading catch-up is never ended";
  v1::SubscribeResponse response;
  std::string last;
  int read = 0;
  while (reader->Read(&response)) {
    last = response.event().cursor();
    ++read;
  }
  grpc::Status status = reader->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(status.error_message().find("catchup_idle_timeout_ms"), std::string::npos);
  auto info = ErrorInfoOf(status);
  EXPECT_EQ(info.reason(), "SUBSCRIBER_TOO_SLOW");
  EXPECT_EQ(info.metadata().at("last_cursor"), last);
  EXPECT_LT(read, 60);
  // Resuming from that cursor gives the rest, with no gap.
  v1::SubscribeRequest resume;
  resume.set_after_cursor(last);
  auto rest = Subscribe(resume);
  ASSERT_TRUE(rest->WaitFor(60 - read));
}

// Issue 14: streams are capped per connection and per replica; past a cap a new stream is
// refused with RESOURCE_EXHAUSTED and a reason, while unary calls on the same connection,
// and streams on other connections within the total, still go through.
TEST_F(StreamingTest, StreamsAreCappedPerConnectionAndInTotal) {
  StartStreamingGateway(1000, 1000000, [](server::GatewayServerOptions& options) {
    options.stream_slots.max_per_connection = 2;
    options.stream_slots.max_total = 3;
  });
  auto connection = [this] {
    // A channel of its own: its own TCP connection (no shared subchannel).
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    return v1::EventService::NewStub(
        grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", gateway_->grpc_port()),
                                  grpc::InsecureChannelCredentials(), args));
  };
  auto a = connection();
  auto b = connection();
  auto c = connection();
  struct Open {
    grpc::ClientContext context;
    std::unique_ptr<grpc::ClientReader<v1::SubscribeResponse>> reader;
  };
  auto open = [](v1::EventService::Stub& stub) {
    auto stream = std::make_unique<Open>();
    stream->context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    stream->reader = stub.Subscribe(&stream->context, v1::SubscribeRequest());
    return stream;
  };
  auto refused = [](Open& stream) {
    v1::SubscribeResponse response;
    EXPECT_FALSE(stream.reader->Read(&response));
    return stream.reader->Finish();
  };
  auto a1 = open(*a);
  auto a2 = open(*a);
  WaitSubscribers(2);
  auto a3 = open(*a);
  grpc::Status status = refused(*a3);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(ErrorInfoOf(status).reason(), "CONNECTION_STREAM_LIMIT");
  EXPECT_NE(status.error_message().find("streams.max_per_connection"), std::string::npos);

  auto b1 = open(*b);  // another connection: within the total of 3
  WaitSubscribers(3);
  auto c1 = open(*c);
  status = refused(*c1);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(ErrorInfoOf(status).reason(), "STREAM_LIMIT");

  // Events still reach the open streams.
  ASSERT_EQ(PostWebhook(Event("newInspection", "capped", 1)), 200);
  for (Open* stream : {a1.get(), a2.get(), b1.get()}) {
    v1::SubscribeResponse response;
    ASSERT_TRUE(stream->reader->Read(&response));
    EXPECT_EQ(response.event().inspection_id(), "capped");
  }

  // A slot frees when a stream ends.
  a1->context.TryCancel();
  a1->reader->Finish();
  ASSERT_TRUE(WaitUntil([&] { return gateway_->open_streams() == 2; }, std::chrono::seconds(5)));
  auto a4 = open(*a);
  WaitSubscribers(3);
  for (Open* stream : {a2.get(), b1.get(), a4.get()}) stream->context.TryCancel();
  for (Open* stream : {a2.get(), b1.get(), a4.get()}) stream->reader->Finish();
}

TEST_F(StreamingTest, ShutdownEndsStreamsWithAResumableCursor) {
  auto stream = Subscribe(v1::SubscribeRequest());
  WaitSubscribers(1);
  ASSERT_EQ(PostWebhook(Event("newInspection", "i", 1)), 200);
  ASSERT_TRUE(stream->WaitFor(1));
  gateway_->Shutdown(std::chrono::milliseconds(2000));
  ASSERT_TRUE(stream->WaitDone());
  EXPECT_EQ(stream->status.error_code(), grpc::StatusCode::UNAVAILABLE);
  std::lock_guard<std::mutex> lock(stream->mu);
  EXPECT_EQ(ErrorInfoOf(stream->status).metadata().at("last_cursor"), stream->events[0].cursor());
}

TEST_F(StreamingTest, AThousandSubscribersAllReceiveAFannedOutEvent) {
  constexpr int kSubscribers = 1000;
  struct Reader : grpc::ClientReadReactor<v1::SubscribeResponse> {
    grpc::ClientContext context;
    v1::SubscribeResponse response;
    std::atomic<int>* received;
    std::atomic<int>* finished;
    void OnReadDone(bool ok) override {
      if (ok) {
        received->fetch_add(1);
        StartRead(&response);
      }
    }
    void OnDone(const grpc::Status&) override { finished->fetch_add(1); }
  };
  std::atomic<int> received{0}, finished{0};
  std::vector<std::unique_ptr<Reader>> readers;
  for (int i = 0; i < kSubscribers; ++i) {
    auto reader = std::make_unique<Reader>();
    reader->received = &received;
    reader->finished = &finished;
    v1::SubscribeRequest request;
    events_->async()->Subscribe(&reader->context, &request, reader.get());
    reader->StartRead(&reader->response);
    reader->StartCall();
    readers.push_back(std::move(reader));
  }
  WaitSubscribers(kSubscribers);
  ASSERT_EQ(PostWebhook(Event("createReport", "fan-out")), 200);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (received.load() < kSubscribers && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();
  }
  EXPECT_EQ(received.load(), kSubscribers);
  for (auto& reader : readers) reader->context.TryCancel();
  while (finished.load() < kSubscribers && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();
  }
  EXPECT_EQ(finished.load(), kSubscribers);
}

TEST_F(StreamingTest, AStreamsStartAndEndAreLoggedWithFilterCursorAndEventsSent) {
  CapturedLog captured;
  ASSERT_EQ(PostWebhook(Event("newInspection", "i-log", 0)), 200);
  v1::SubscribeRequest request;
  request.set_inspection_id("i-log");
  request.set_from_start(true);
  auto stream = Subscribe(request);
  ASSERT_TRUE(stream->WaitFor(1));
  ASSERT_EQ(PostWebhook(Event("newInspection", "i-log", 1)), 200);
  ASSERT_TRUE(stream->WaitFor(2));
  stream->context.TryCancel();
  ASSERT_TRUE(stream->WaitDone());
  std::vector<nlohmann::json> ended;
  ASSERT_TRUE(WaitUntil([&] { return !(ended = captured.With("stream ended")).empty(); },
                        std::chrono::seconds(5)));
  const std::vector<nlohmann::json> opened = captured.With("stream opened");
  ASSERT_EQ(opened.size(), 1u);
  EXPECT_EQ(opened[0]["method"], "/inspection.v1.EventService/Subscribe");
  EXPECT_EQ(opened[0]["filter"], "inspection_id=i-log");
  EXPECT_EQ(opened[0]["from_start"], true);
  EXPECT_EQ(opened[0]["account"], "default");
  EXPECT_NE(opened[0]["peer"].get<std::string>().find("127.0.0.1"), std::string::npos);
  EXPECT_EQ(opened[0]["trace_id"].get<std::string>().size(), 32u);
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_EQ(ended[0]["reason"], "cancelled");
  EXPECT_EQ(ended[0]["events_sent"], 2);
  std::lock_guard<std::mutex> lock(stream->mu);
  EXPECT_EQ(ended[0]["last_cursor"], stream->events[1].cursor());
  EXPECT_EQ(ended[0]["trace_id"], opened[0]["trace_id"]);
}

TEST_F(StreamingTest, AStreamEndedByTheGatewayLogsTheReasonTheClientGets) {
  CapturedLog captured;
  auto stream = Subscribe(v1::SubscribeRequest());
  WaitSubscribers(1);
  gateway_->Shutdown(std::chrono::milliseconds(0));  // streams end UNAVAILABLE, resumable
  ASSERT_TRUE(stream->WaitDone());
  EXPECT_EQ(stream->status.error_code(), grpc::StatusCode::UNAVAILABLE);
  std::vector<nlohmann::json> ended;
  ASSERT_TRUE(WaitUntil([&] { return !(ended = captured.With("stream ended")).empty(); },
                        std::chrono::seconds(5)));
  EXPECT_EQ(ended[0]["grpc_code"], static_cast<int>(grpc::StatusCode::UNAVAILABLE));
  EXPECT_EQ(ended[0]["reason"], "STREAM_INTERRUPTED");
  EXPECT_EQ(ended[0]["events_sent"], 0);
}

}  // namespace
}  // namespace inspection::testing
