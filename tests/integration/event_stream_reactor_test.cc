// EventStreamReactor against a real gRPC call: a stream whose finish is pending behind a
// write in flight, then cancelled by its client, must still finish (OnDone runs, the call
// and the reactor are freed). Shutdown would otherwise wait for the leaked call.
#include <atomic>
#include <chrono>
#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "adapters/eventlog/event_log.h"
#include "gateway/streaming/event_hub.h"
#include "gateway/streaming/event_stream.h"
#include "inspection/v1/damage.pb.h"
#include "inspection/v1/event.grpc.pb.h"
#include "tests/support/temp_dir.h"
#include "tests/support/wait.h"

namespace inspection::streaming {
namespace {

using ::inspection::testing::TempDir;
using ::inspection::testing::WaitUntil;

std::atomic<int> reactors_done{0};

// Counts OnDone, then lets the reactor delete itself.
class CountingReactor final : public EventStreamReactor<v1::SubscribeResponse> {
 public:
  using EventStreamReactor::EventStreamReactor;
  void OnDone() override {
    ++reactors_done;
    EventStreamReactor::OnDone();  // deletes this
  }
};

// Subscribe: sends one message far larger than the HTTP/2 flow-control window (so the
// write stays in flight while the client does not read), then asks to end the stream.
class StallingService final
    : public v1::EventService::WithRawCallbackMethod_Subscribe<v1::EventService::CallbackService> {
 public:
  explicit StallingService(EventHub* hub) : hub_(hub) {}
  grpc::ServerWriteReactor<grpc::ByteBuffer>* Subscribe(grpc::CallbackServerContext*,
                                                        const grpc::ByteBuffer*) override {
    auto* reactor = new CountingReactor(hub_, StreamQueueLimits{10});
    v1::SubscribeResponse big;
    big.mutable_event()->mutable_payload()->set_string_value(std::string(8 * 1024 * 1024, 'x'));
    reactor->Send(big);
    reactor->End(grpc::Status::OK);  // a finish pending behind the write in flight
    ++started_;
    return reactor;
  }
  std::atomic<int> started_{0};

 private:
  EventHub* const hub_;
};

TEST(EventStreamReactorTest, ACancelWhileAFinishIsPendingStillFinishes) {
  TempDir dir;
  auto log = eventlog::OpenSqliteEventLog(dir.File("events.db"), eventlog::RetentionPolicy{});
  ASSERT_TRUE(log.ok()) << log.status();
  EventHub hub(log->get(), EventHub::Options());
  StallingService service(&hub);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.SetMaxSendMessageSize(16 * 1024 * 1024);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);

  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(16 * 1024 * 1024);
  auto channel = grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", port),
                                           grpc::InsecureChannelCredentials(), args);
  auto stub = v1::EventService::NewStub(channel);
  const int before = reactors_done.load();
  for (int i = 0; i < 3; ++i) {
    grpc::ClientContext context;
    auto reader = stub->Subscribe(&context, v1::SubscribeRequest());
    // The server wrote past the window and asked to finish; the client never reads.
    ASSERT_TRUE(
        WaitUntil([&] { return service.started_.load() == i + 1; }, std::chrono::seconds(20)));
    context.TryCancel();
    reader->Finish();
  }
  // Every reactor is done (Finish was called, so gRPC ran OnDone).
  EXPECT_TRUE(
      WaitUntil([&] { return reactors_done.load() == before + 3; }, std::chrono::seconds(20)))
      << "done: " << reactors_done.load() - before << " of 3";
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
}

// What a stream writes for an event, its own header before the hub's shared bytes, is
// the encoding of the typed response holding that event: for both stream responses, small
// and large events (a one-byte and a three-byte length), and the oneof of
// StreamDamageResultsResponse.
template <class Response>
void ExpectHeaderAndSharedBytesParseAs(size_t payload_bytes) {
  v1::Event event;
  event.set_cursor("s:42");
  event.set_event_name(v1::EVENT_NAME_CREATE_REPORT);
  event.set_inspection_id("insp-1");
  event.mutable_payload()->set_string_value(std::string(payload_bytes, 'p'));
  std::shared_ptr<const EncodedEvent> encoded = EncodeEvent(event);
  const std::string wire(reinterpret_cast<const char*>(encoded->wire.begin()),
                         encoded->wire.size());
  EXPECT_EQ(wire, event.SerializeAsString());

  Response parsed;
  ASSERT_TRUE(parsed.ParseFromString(
      absl::StrCat(EventStreamReactor<Response>::EventHeader(wire.size()), wire)));
  ASSERT_TRUE(parsed.has_event());
  EXPECT_EQ(parsed.event().SerializeAsString(), wire);
  EXPECT_EQ(parsed.event().cursor(), "s:42");
}

TEST(EventStreamReactorTest, AnEventWrittenAsHeaderAndSharedBytesIsTheTypedResponse) {
  for (size_t payload : {size_t{10}, size_t{300}, size_t{200000}}) {
    SCOPED_TRACE(payload);
    ExpectHeaderAndSharedBytesParseAs<v1::SubscribeResponse>(payload);
    ExpectHeaderAndSharedBytesParseAs<v1::StreamDamageResultsResponse>(payload);
  }
}

}  // namespace
}  // namespace inspection::streaming
