// The vendor leg against an upstream built to cost the gateway memory, against the real
// inspection-gateway process: answers that never end, streamed on many connections at once.
// Each answer was bounded on its own (64 MiB), so eight of them could make the gateway hold
// 512 MiB; upstream.max_buffered_response_bytes bounds them together. The answer each
// caller gets, the gateway's RSS growth (VmRSS from /proc, sampled during the attack), the
// gauge the operator watches, and a call answered normally afterwards.
#include <httplib.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <initializer_list>
#include <iostream>
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
#include "tests/support/fake_vendor.h"
#include "tests/support/gateway_binary.h"
#include "tests/support/loopback_listener.h"
#include "tests/support/rss_bounds.h"
#include "tests/support/status_details.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace inspection::testing {
namespace {

using std::chrono::milliseconds;

constexpr milliseconds kDeadline{30000};
constexpr int64_t kMiB = 1024;  // in KiB

// The gateway of these tests, in front of `vendor_url`: Beast, an 8 MiB answer budget, one
// attempt per call and no shared fetch (each caller makes exactly one answer), and
// `breaker` (flags that keep the failures the test makes from opening the breaker).
std::vector<std::string> BudgetedGatewayArgv(const std::string& vendor_url, const TempDir& temp,
                                             std::initializer_list<const char*> breaker) {
  std::vector<std::string> argv =
      LoopbackGatewayArgv(GATEWAY_BINARY, vendor_url, temp.File("events.db"));
  for (const char* flag :
       {"--upstream-http-client=beast", "--upstream-max-buffered-response-bytes=8388608",
        "--retry-max-attempts=1", "--cache-enabled=false"}) {
    argv.emplace_back(flag);
  }
  argv.insert(argv.end(), breaker.begin(), breaker.end());
  return argv;
}

TEST(VendorAnswersHostileTest, EndlessAnswersOnManyConnectionsAreBoundedTogether) {
  constexpr int kCalls = 8;
  constexpr int64_t kBudget = 8 << 20;
  LoopbackListener listener(/*backlog=*/kCalls + 4);
  ASSERT_TRUE(listener.ok());
  TempDir temp;
  // The eight failures must not open the breaker for the call that follows.
  Subprocess gateway(
      BudgetedGatewayArgv(listener.BaseUrl(), temp, {"--circuit-breaker-consecutive-failures=100"}),
      {"INSPECTION_API_KEY=answers-suite-vendor-key"});
  const ServingPorts ports = WaitUntilServing(gateway, kDeadline);
  ASSERT_GT(ports.grpc, 0) << gateway.output();
  // An 8 MiB budget holds at most 6 MiB + 64 KiB of one answer, less than the 64 MiB an
  // answer may have: the start-up says so.
  EXPECT_NE(gateway.output().find("upstream.max_response_bytes is more than one answer can hold"),
            std::string::npos)
      << gateway.output();
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
  EXPECT_RSS_GROWTH_LT(peak - before, 64 * kMiB);
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

// A vendor that answers ListEventConfigs (GET .../configevent) with an answer that never
// ends, and anything else with a short webhook configuration: one thread per connection,
// until `stop`. Every endless byte sent is added to `streamed`.
class SplitVendor {
 public:
  SplitVendor() : accept_thread_([this] { AcceptLoop(); }) {}
  ~SplitVendor() { Stop(); }
  SplitVendor(const SplitVendor&) = delete;
  SplitVendor& operator=(const SplitVendor&) = delete;

  bool ok() const { return listener_.ok(); }
  std::string BaseUrl() const { return listener_.BaseUrl(); }
  size_t streamed() const { return streamed_.load(); }
  size_t endless_answers() const { return endless_.load(); }
  void Stop() {
    stop_ = true;
    if (accept_thread_.joinable()) accept_thread_.join();
    std::lock_guard<std::mutex> lock(mu_);
    for (std::thread& t : connections_) t.join();  // each ends when the gateway closes
    connections_.clear();
  }

 private:
  void AcceptLoop() {
    while (!stop_) {
      const int fd = listener_.Accept(50);
      if (fd < 0) continue;
      std::lock_guard<std::mutex> lock(mu_);
      connections_.emplace_back([this, fd] { Serve(fd); });
    }
  }
  void Serve(int fd) {
    // A connection whose request never comes (or whose reader never reads) ends after 30 s,
    // so Stop() cannot wait forever on it.
    const timeval limit{30, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof limit);
    std::string head;
    char buffer[4096];
    while (head.find("\r\n\r\n") == std::string::npos) {
      const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
      if (n <= 0) break;
      head.append(buffer, static_cast<size_t>(n));
    }
    if (head.find("/configevent") != std::string::npos) {
      ++endless_;
      const std::string start = "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n";
      [[maybe_unused]] ssize_t sent = ::send(fd, start.data(), start.size(), MSG_NOSIGNAL);
      const std::string chunk(64 * 1024, 'x');
      for (size_t mine = 0; mine < (size_t{256} << 20);) {
        const ssize_t n = ::send(fd, chunk.data(), chunk.size(), MSG_NOSIGNAL);
        if (n <= 0) break;
        mine += static_cast<size_t>(n);
        streamed_ += static_cast<size_t>(n);
      }
    } else {
      // 48 KiB: an ordinary answer, under the first 64 KiB every answer may take from the
      // whole budget, and larger than most gaps that endless answers leave in it.
      const std::string body =
          absl::StrCat(R"({"webhookHeaderKey":null,"webhookUrl":null,)",
                       R"("webhookUrlV2":"https://hooks.example.test/v2","note":")",
                       std::string(48 * 1024, 'n'), R"("})");
      const std::string answer = absl::StrCat(
          "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: ", body.size(),
          "\r\nConnection: close\r\n\r\n", body);
      [[maybe_unused]] ssize_t sent = ::send(fd, answer.data(), answer.size(), MSG_NOSIGNAL);
    }
    ::close(fd);
  }

  LoopbackListener listener_{/*backlog=*/64};
  std::atomic<bool> stop_{false};
  std::atomic<size_t> streamed_{0};
  std::atomic<size_t> endless_{0};
  std::mutex mu_;
  std::vector<std::thread> connections_;
  std::thread accept_thread_;  // last: starts once the members above exist
};

// While endless answers keep the budget as full as they can (each refused at the budget,
// then asked for again), ordinary answers are still read: the first
// upstream.guaranteed_response_bytes of each answer may use the quarter of the budget that
// the bytes past them may not. The attack's calls fail with the budget's error, the gateway's
// RSS stays bounded, and every ordinary call sent during the attack is answered.
TEST(VendorAnswersHostileTest, OrdinaryAnswersAreReadWhileEndlessOnesHoldTheBudget) {
  constexpr int kAttackers = 8;
  constexpr int kOrdinaryCalls = 30;
  SplitVendor vendor;
  ASSERT_TRUE(vendor.ok());
  TempDir temp;
  // The attack's calls all fail: keep the breaker out of it (off, and a window that never
  // holds enough calls), or it would stop the ordinary calls too.
  Subprocess gateway(BudgetedGatewayArgv(vendor.BaseUrl(), temp,
                                         {"--circuit-breaker-consecutive-failures=0",
                                          "--circuit-breaker-minimum-requests=1000000"}),
                     {"INSPECTION_API_KEY=answers-suite-vendor-key"});
  const ServingPorts ports = WaitUntilServing(gateway, kDeadline);
  ASSERT_GT(ports.grpc, 0) << gateway.output();
  auto channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", ports.grpc),
                                     grpc::InsecureChannelCredentials());
  auto stub = v1::EventConfigService::NewStub(channel);
  const int64_t before = gateway.ResidentKiB();

  std::atomic<bool> attacking{true};
  std::atomic<int> refused_by_budget{0};
  std::atomic<int> other_attack_outcomes{0};
  std::vector<std::thread> attackers;
  for (int i = 0; i < kAttackers; ++i) {
    attackers.emplace_back([&] {
      while (attacking) {
        grpc::ClientContext context;
        context.set_deadline(std::chrono::system_clock::now() + kDeadline);
        v1::ListEventConfigsResponse response;
        const grpc::Status status = stub->ListEventConfigs(&context, {}, &response);
        if (status.error_message().find("exceed the transport's budget of 8388608") !=
            std::string::npos) {
          ++refused_by_budget;
        } else {
          ++other_attack_outcomes;
        }
      }
    });
  }
  // The attack is under way once the vendor has pushed several budgets' worth.
  const auto attack_deadline = std::chrono::steady_clock::now() + kDeadline;
  while (vendor.streamed() < 4 * (size_t{8} << 20) &&
         std::chrono::steady_clock::now() < attack_deadline) {
    std::this_thread::sleep_for(milliseconds(1));
  }
  int64_t peak = gateway.ResidentKiB();
  const size_t endless_before = vendor.endless_answers();
  int answered = 0;
  std::string first_failure;
  for (int i = 0; i < kOrdinaryCalls; ++i) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + kDeadline);
    v1::GetWebhookConfigResponse response;
    const grpc::Status status = stub->GetWebhookConfig(&context, {}, &response);
    if (status.ok() && response.config().webhook_url_v2() == "https://hooks.example.test/v2") {
      ++answered;
    } else if (first_failure.empty()) {
      first_failure = status.error_message();
    }
    peak = std::max(peak, gateway.ResidentKiB());
  }
  const size_t endless_during = vendor.endless_answers();
  attacking = false;
  for (std::thread& t : attackers) t.join();
  vendor.Stop();

  std::cout << kOrdinaryCalls << " ordinary calls of 48 KiB during "
            << endless_during - endless_before << " endless answers: " << answered
            << " answered; gateway RSS +" << peak - before << " KiB\n";
  EXPECT_EQ(answered, kOrdinaryCalls) << "first failure: " << first_failure;
  EXPECT_GT(refused_by_budget.load(), kAttackers) << "the attack did not reach the budget";
  EXPECT_EQ(other_attack_outcomes.load(), 0);
  // Each attacker asked for at least one more endless answer while the ordinary calls ran.
  EXPECT_GE(endless_during - endless_before, static_cast<size_t>(kAttackers))
      << "the attack was not going on";
  EXPECT_RSS_GROWTH_LT(peak - before, 64 * kMiB);
}

// A vendor answer well under upstream.max_response_bytes made of many tiny JSON values:
// the parsed tree costs up to ~80 bytes a value, 30 times the text, so one 60 MB answer of
// `{}` took the gateway to 1.9 GB (outside review of issue 31). upstream.max_json_elements
// stops the parse at its limit; the caller gets VENDOR_RESPONSE_TOO_LARGE, the next call
// its answer.
TEST(VendorAnswersHostileTest, AnAnswerOfManyTinyValuesStopsAtTheElementLimit) {
  constexpr int kValues = 3'000'000;  // 9 MB of text, ~240 MB as a tree
  std::string many = "[{}";
  many.reserve(3 * kValues);
  for (int i = 1; i < kValues; ++i) many += ",{}";
  many += "]";
  std::atomic<bool> hostile{true};
  FakeVendor vendor;
  ASSERT_TRUE(vendor.Start());
  vendor.SetHandler([&](const RecordedRequest&) {
    ScriptedResponse answer;
    answer.body = hostile ? many
                          : R"({"webhookHeaderKey":null,"webhookUrl":null,)"
                            R"("webhookUrlV2":"https://hooks.example.test/v2"})";
    return answer;
  });
  TempDir temp;
  std::vector<std::string> argv =
      LoopbackGatewayArgv(GATEWAY_BINARY, vendor.BaseUrl(), temp.File("events.db"));
  for (const char* flag :
       {"--upstream-max-json-elements=100000", "--retry-max-attempts=1", "--cache-enabled=false"}) {
    argv.emplace_back(flag);
  }
  Subprocess gateway(argv, {"INSPECTION_API_KEY=answers-suite-vendor-key"});
  const ServingPorts ports = WaitUntilServing(gateway, kDeadline);
  ASSERT_GT(ports.grpc, 0) << gateway.output();
  auto stub = v1::EventConfigService::NewStub(grpc::CreateChannel(
      absl::StrCat("127.0.0.1:", ports.grpc), grpc::InsecureChannelCredentials()));

  const int64_t before = gateway.ResidentKiB();
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + kDeadline);
  v1::GetWebhookConfigRequest request;
  v1::GetWebhookConfigResponse response;
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  grpc::Status status;
  stub->async()->GetWebhookConfig(&context, &request, &response, [&](grpc::Status s) {
    std::lock_guard<std::mutex> lock(mu);
    status = std::move(s);
    done = true;
    cv.notify_all();
  });
  int64_t peak = before;
  {
    std::unique_lock<std::mutex> lock(mu);
    while (!cv.wait_for(lock, milliseconds(2), [&] { return done; })) {
      peak = std::max(peak, gateway.ResidentKiB());
    }
  }
  peak = std::max(peak, gateway.ResidentKiB());
  std::cout << "an answer of " << kValues << " empty objects (" << many.size()
            << " bytes): gateway RSS +" << peak - before << " KiB\n";
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
  EXPECT_EQ(
      FindStatusDetail<google::rpc::ErrorInfo>(status).value_or(google::rpc::ErrorInfo()).reason(),
      "VENDOR_RESPONSE_TOO_LARGE");
  EXPECT_NE(status.error_message().find("upstream.max_json_elements"), std::string::npos)
      << status.error_message();
  // The text (9 MB, held by the transport and in the error's vendor body excerpt), 100,000
  // values of tree, read buffers. Without the limit: about 240 MB.
  EXPECT_RSS_GROWTH_LT(peak - before, 64 * kMiB);
  EXPECT_EQ(vendor.RequestCount(), 1u) << "retried: the same request would get it again";

  hostile = false;
  grpc::ClientContext next_context;
  next_context.set_deadline(std::chrono::system_clock::now() + kDeadline);
  v1::GetWebhookConfigResponse next;
  const grpc::Status next_status = stub->GetWebhookConfig(&next_context, request, &next);
  EXPECT_TRUE(next_status.ok()) << next_status.error_message();
  EXPECT_EQ(next.config().webhook_url_v2(), "https://hooks.example.test/v2");
  EXPECT_EQ(gateway.Stop(SIGTERM, kDeadline), 0) << gateway.output();
}

}  // namespace
}  // namespace inspection::testing
