// The vendor leg against an upstream built to cost the gateway memory, against the real
// inspection-gateway process: answers that never end, streamed on many connections at once.
// Each answer was bounded on its own (64 MiB), so eight of them could make the gateway hold
// 512 MiB; upstream.max_buffered_response_bytes bounds them together. The answer each
// caller gets, the gateway's RSS growth (VmRSS from /proc, sampled during the attack), the
// gauge the operator watches, and a call answered normally afterwards.
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "google/rpc/error_details.pb.h"
#include "inspection/v1/event_config.grpc.pb.h"
#include "tests/support/gateway_binary.h"
#include "tests/support/loopback_listener.h"
#include "tests/support/status_details.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace inspection::testing {
namespace {

using std::chrono::milliseconds;

constexpr milliseconds kDeadline{30000};
constexpr int64_t kMiB = 1024;  // in KiB

TEST(VendorAnswersHostileTest, EndlessAnswersOnManyConnectionsAreBoundedTogether) {
  constexpr int kCalls = 8;
  constexpr int64_t kBudget = 8 << 20;
  LoopbackListener listener(/*backlog=*/kCalls + 4);
  ASSERT_TRUE(listener.ok());
  TempDir temp;
  std::vector<std::string> argv =
      LoopbackGatewayArgv(GATEWAY_BINARY, listener.BaseUrl(), temp.File("events.db"));
  for (const char* flag :
       {"--upstream-http-client=beast", "--upstream-max-buffered-response-bytes=8388608",
        // One attempt per call and no shared fetch: each caller makes exactly one answer.
        "--retry-max-attempts=1", "--cache-enabled=false",
        // The eight failures must not open the breaker for the call that follows.
        "--circuit-breaker-consecutive-failures=100"}) {
    argv.emplace_back(flag);
  }
  Subprocess gateway(argv, {"INSPECTION_API_KEY=answers-suite-vendor-key"});
  const ServingPorts ports = WaitUntilServing(gateway, kDeadline);
  ASSERT_GT(ports.grpc, 0) << gateway.output();
  auto stub = v1::EventConfigService::NewStub(grpc::CreateChannel(
      absl::StrCat("127.0.0.1:", ports.grpc), grpc::InsecureChannelCredentials()));

  // Started once the gateway serves: an assertion above returns with no thread to join.
  std::atomic<size_t> streamed{0};
  std::vector<std::thread> vendor;
  for (int i = 0; i < kCalls; ++i) {
    vendor.emplace_back([&] { ServeOneEndlessAnswer(listener, size_t{256} << 20, streamed); });
  }
  const int64_t before = gateway.ResidentKiB();
  struct Call {
    grpc::ClientContext context;
    v1::GetWebhookConfigRequest request;
    v1::GetWebhookConfigResponse response;
    grpc::Status status;
  };
  std::vector<std::unique_ptr<Call>> calls;
  std::mutex mu;
  std::condition_variable cv;
  int done = 0;
  for (int i = 0; i < kCalls; ++i) {
    auto call = std::make_unique<Call>();
    call->context.set_deadline(std::chrono::system_clock::now() + kDeadline);
    Call* raw = call.get();
    stub->async()->GetWebhookConfig(&raw->context, &raw->request, &raw->response,
                                    [&, raw](grpc::Status status) {
                                      std::lock_guard<std::mutex> lock(mu);
                                      raw->status = std::move(status);
                                      ++done;
                                      cv.notify_all();
                                    });
    calls.push_back(std::move(call));
  }
  // The gateway's RSS, sampled every 2 ms until every call has its answer (each call's
  // deadline bounds the wait; returning earlier would leave calls and threads running).
  int64_t peak = before;
  {
    std::unique_lock<std::mutex> lock(mu);
    while (!cv.wait_for(lock, milliseconds(2), [&] { return done == kCalls; })) {
      peak = std::max(peak, gateway.ResidentKiB());
    }
  }
  peak = std::max(peak, gateway.ResidentKiB());
  for (std::thread& t : vendor) t.join();  // each ends when the gateway closes its connection

  for (const auto& call : calls) {
    EXPECT_EQ(call->status.error_code(), grpc::StatusCode::UNAVAILABLE)
        << call->status.error_message();
    EXPECT_EQ(FindStatusDetail<google::rpc::ErrorInfo>(call->status)
                  .value_or(google::rpc::ErrorInfo())
                  .reason(),
              "VENDOR_CONNECTION_LOST");
    EXPECT_NE(call->status.error_message().find(
                  "answers being read at once exceed the transport's budget of 8388608"),
              std::string::npos)
        << call->status.error_message();
  }
  std::cout << kCalls << " endless answers, " << streamed.load()
            << " bytes sent by the vendor, gateway RSS +" << peak - before << " KiB\n";
  // 8 x 64 MiB without the budget; with it: the budget (Beast may double one body between
  // two checks), read buffers, blocks malloc keeps.
  EXPECT_LT(peak - before, 64 * kMiB);
  EXPECT_GE(streamed.load(), static_cast<size_t>(kBudget)) << "the attack did not happen";

  // Every byte was given back (the gauge, per scrape), and the next answer goes through.
  httplib::Client admin("127.0.0.1", ports.admin);
  auto scrape = admin.Get("/metrics");
  ASSERT_TRUE(scrape);
  EXPECT_EQ(PrometheusSample(scrape->body, "inspection_upstream_buffered_response_bytes"), 0);
  EXPECT_EQ(PrometheusSample(scrape->body, "inspection_upstream_buffered_response_limit_bytes"),
            kBudget);
  std::thread healthy([&] {
    const int fd = listener.Accept(30000);
    if (fd < 0) return;
    char head[4096];
    [[maybe_unused]] ssize_t read_bytes = ::recv(fd, head, sizeof head, 0);
    const std::string body = R"({"webhookHeaderKey":null,"webhookUrl":null,)"
                             R"("webhookUrlV2":"https://hooks.example.test/v2"})";
    const std::string answer = absl::StrCat(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: ", body.size(),
        "\r\nConnection: close\r\n\r\n", body);
    [[maybe_unused]] ssize_t sent = ::send(fd, answer.data(), answer.size(), MSG_NOSIGNAL);
    ::close(fd);
  });
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + kDeadline);
  v1::GetWebhookConfigResponse response;
  const grpc::Status status = stub->GetWebhookConfig(&context, {}, &response);
  healthy.join();
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.config().webhook_url_v2(), "https://hooks.example.test/v2");
}

}  // namespace
}  // namespace inspection::testing
