// The gRPC streams against careless clients, on the real inspection-gateway process
// (issue 14): 1,000 Subscribe streams that ask for the whole log, never read, and are
// cancelled while the gateway's writes to them are in flight. Every stream must end (the
// open-stream gauge and the gateway's RSS return to where they were), a live subscriber
// must keep receiving meanwhile, and SIGTERM must still end the process within its grace
// period. A reactor that never finished after a cancel (the bug this guards against)
// leaks its call, and Shutdown then waits for it.
#include <httplib.h>
#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "inspection/v1/event.grpc.pb.h"
#include "nlohmann/json.hpp"
#include "tests/support/gateway_binary.h"
#include "tests/support/rss_bounds.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"
#include "tests/support/wait.h"

namespace inspection::testing {
namespace {

using std::chrono::milliseconds;

constexpr milliseconds kDeadline{30000};
constexpr char kWebhookKey[] = "stream-churn-webhook-key";
constexpr int kGraceMs = 3000;

class StreamingGateway {
 public:
  StreamingGateway() {
    std::vector<std::string> argv =
        LoopbackGatewayArgv(GATEWAY_BINARY, "http://127.0.0.1:9", temp_.File("events.db"));
    argv.push_back(absl::StrCat("--shutdown-grace-ms=", kGraceMs));
    argv.push_back("--streams-queue-max-bytes=524288");
    process_ = std::make_unique<Subprocess>(
        argv, std::vector<std::string>{"INSPECTION_API_KEY=stream-churn-vendor-key",
                                       std::string("INSPECTION_WEBHOOK_KEY=") + kWebhookKey});
    const ServingPorts ports = WaitUntilServing(*process_, kDeadline);
    grpc_port_ = ports.grpc;
    webhook_port_ = ports.webhook;
    admin_port_ = ports.admin;
  }

  bool ok() const { return grpc_port_ > 0 && webhook_port_ > 0 && admin_port_ > 0; }
  Subprocess& process() { return *process_; }

  int Post(const nlohmann::json& body) {
    httplib::Client client("127.0.0.1", webhook_port_);
    auto response =
        client.Post("/webhooks/v2", {{"x-api-key", kWebhookKey}}, body.dump(), "application/json");
    return response ? response->status : -1;
  }

  std::string Metrics() {
    httplib::Client client("127.0.0.1", admin_port_);
    auto response = client.Get("/metrics");
    return response ? response->body : "";
  }
  double Metric(const std::string& series) { return PrometheusSample(Metrics(), series); }
  // Messages the gateway has sent on Subscribe streams.
  double SubscribeMessagesSent() {
    return PrometheusSum(Metrics(), "grpc_server_msg_sent_total", R"(grpc_method="Subscribe")");
  }
  double OpenSubscribeStreams() {
    return Metric(R"(inspection_stream_subscribers{rpc="Subscribe"})");
  }

  std::shared_ptr<grpc::Channel> Channel() {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // a connection of its own
    return grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", grpc_port_),
                                     grpc::InsecureChannelCredentials(), args);
  }

 private:
  TempDir temp_;  // before process_: removed after the process stopped
  std::unique_ptr<Subprocess> process_;
  int grpc_port_ = 0;
  int webhook_port_ = 0;
  int admin_port_ = 0;
};

// A Subscribe{from_start} stream that never reads: the gateway's writes to it stay in
// flight once gRPC's flow-control window is full.
class NonReader final : public grpc::ClientReadReactor<v1::SubscribeResponse> {
 public:
  NonReader(v1::EventService::Stub* stub, std::atomic<int>* done) : done_(done) {
    request_.set_from_start(true);
    stub->async()->Subscribe(&context_, &request_, this);
    StartCall();
  }
  void Cancel() { context_.TryCancel(); }
  void OnDone(const grpc::Status&) override { done_->fetch_add(1); }

 private:
  std::atomic<int>* const done_;
  grpc::ClientContext context_;
  v1::SubscribeRequest request_;
};

// A live subscriber that reads everything, counting the events of inspection "live".
class LiveReader final : public grpc::ClientReadReactor<v1::SubscribeResponse> {
 public:
  explicit LiveReader(v1::EventService::Stub* stub) {
    request_.set_inspection_id("live");
    stub->async()->Subscribe(&context_, &request_, this);
    StartRead(&response_);
    StartCall();
  }
  void OnReadDone(bool ok) override {
    if (!ok) return;
    received_.fetch_add(1);
    StartRead(&response_);
  }
  void OnDone(const grpc::Status& status) override {
    code_ = status.error_code();
    done_ = true;
  }
  void Cancel() { context_.TryCancel(); }
  int received() const { return received_.load(); }
  bool done() const { return done_.load(); }
  grpc::StatusCode code() const { return code_.load(); }

 private:
  grpc::ClientContext context_;
  v1::SubscribeRequest request_;
  v1::SubscribeResponse response_;
  std::atomic<int> received_{0};
  std::atomic<bool> done_{false};
  std::atomic<grpc::StatusCode> code_{grpc::StatusCode::OK};
};

// Opens `count` non-reading streams, waits until the gateway writes to all of them, then
// cancels them all and waits until every one has ended on both sides.
// `*peak_rss` (KiB) is raised to the gateway's RSS while all of them are open.
void Churn(StreamingGateway& gateway, v1::EventService::Stub* stub, int count, double live,
           int64_t* peak_rss) {
  std::atomic<int> done{0};
  std::vector<std::unique_ptr<NonReader>> streams;
  const double sent_before = gateway.SubscribeMessagesSent();
  for (int i = 0; i < count; ++i) streams.push_back(std::make_unique<NonReader>(stub, &done));
  ASSERT_TRUE(WaitUntil([&] { return gateway.OpenSubscribeStreams() >= live + count; },
                        std::chrono::seconds(30)));
  // Each stream has been written to (the first event of its catch-up at least).
  ASSERT_TRUE(WaitUntil([&] { return gateway.SubscribeMessagesSent() >= sent_before + count; },
                        std::chrono::seconds(30)));
  *peak_rss = std::max(*peak_rss, gateway.process().ResidentKiB());
  for (auto& stream : streams) stream->Cancel();
  ASSERT_TRUE(WaitUntil([&] { return done.load() == count; }, std::chrono::seconds(30)));
  ASSERT_TRUE(
      WaitUntil([&] { return gateway.OpenSubscribeStreams() == live; }, std::chrono::seconds(30)))
      << "streams left open on the gateway: " << gateway.OpenSubscribeStreams() - live;
}

TEST(StreamChurnHostileTest, AThousandStreamsCancelledMidWriteLeaveNothingBehind) {
  StreamingGateway gateway;
  ASSERT_TRUE(gateway.ok()) << gateway.process().output();
  // 4 MiB of events (64 KiB each): more than a stream's flow-control window and its
  // 512 KiB queue, so every from_start stream has a write in flight when it is cancelled.
  const std::string padding(64 * 1024, 'x');
  for (int i = 0; i < 64; ++i) {
    ASSERT_EQ(gateway.Post({{"event", "newInspection"},
                            {"inspectionId", absl::StrCat("old-", i)},
                            {"padding", padding}}),
              200);
  }
  auto live_channel = gateway.Channel();
  auto live_stub = v1::EventService::NewStub(live_channel);
  LiveReader live(live_stub.get());
  ASSERT_TRUE(
      WaitUntil([&] { return gateway.OpenSubscribeStreams() == 1; }, std::chrono::seconds(10)));

  auto churn_channel = gateway.Channel();
  auto stub = v1::EventService::NewStub(churn_channel);
  // A first round warms up what any such load allocates once (thread caches, HTTP/2
  // buffers); the starting level is measured after it.
  int64_t warm_up_peak = 0;
  Churn(gateway, stub.get(), 200, 1, &warm_up_peak);
  const int64_t start_rss = gateway.process().ResidentKiB();
  int64_t peak_rss = start_rss;
  constexpr int kRounds = 5;
  for (int round = 0; round < kRounds; ++round) {
    ASSERT_NO_FATAL_FAILURE(Churn(gateway, stub.get(), 200, 1, &peak_rss)) << "round " << round;
    // Legitimate traffic meanwhile: a live event still reaches the live subscriber.
    ASSERT_EQ(gateway.Post({{"event", "newInspection"}, {"inspectionId", "live"}, {"n", round}}),
              200);
    ASSERT_TRUE(WaitUntil([&] { return live.received() == round + 1; }, std::chrono::seconds(10)))
        << "round " << round;
  }
  const int64_t end_rss = gateway.process().ResidentKiB();
  std::cout << "1,000 streams cancelled mid-write: gateway RSS " << start_rss / 1024
            << " MiB after the warm-up, peak " << peak_rss / 1024
            << " MiB with 200 streams open mid-write, " << end_rss / 1024 << " MiB at the end\n";
  EXPECT_EQ(gateway.OpenSubscribeStreams(), 1);
  // Back to the starting level (allocator slack allowed), not growing round by round.
  EXPECT_RSS_GROWTH_LT(end_rss - start_rss, 24 * 1024);
  // While open, 200 streams hold at most their queues (512 KiB each) and their windows.
  EXPECT_RSS_GROWTH_LT(peak_rss - start_rss, 200 * 1024);

  // Non-reading streams still open mid-write when SIGTERM arrives: the process still ends
  // within its grace period (plus the time to exit).
  std::atomic<int> done{0};
  std::vector<std::unique_ptr<NonReader>> open;
  for (int i = 0; i < 100; ++i) open.push_back(std::make_unique<NonReader>(stub.get(), &done));
  ASSERT_TRUE(
      WaitUntil([&] { return gateway.OpenSubscribeStreams() >= 101; }, std::chrono::seconds(30)));
  const auto sent = std::chrono::steady_clock::now();
  const int code = gateway.process().Stop(SIGTERM, milliseconds(kGraceMs + 5000));
  const auto took = std::chrono::steady_clock::now() - sent;
  std::cout << "SIGTERM with 101 open streams: exit " << code << " after "
            << std::chrono::duration_cast<milliseconds>(took).count() << " ms\n";
  EXPECT_EQ(code, 0) << gateway.process().output();
  EXPECT_LT(took, milliseconds(kGraceMs + 2000));
  ASSERT_TRUE(
      WaitUntil([&] { return done.load() == 100 && live.done(); }, std::chrono::seconds(10)));
  EXPECT_EQ(live.code(), grpc::StatusCode::UNAVAILABLE) << "ended as resumable on shutdown";
}

}  // namespace
}  // namespace inspection::testing
