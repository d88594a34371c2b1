// grpc.health.v1.Health/Watch against a caller that opens watches without end, on the real
// inspection-gateway process (issue 31): each watch is a stream held open, so the gateway
// bounds them like every stream (here grpc.per_caller.max_streams): past the caller's cap a
// watch is refused at once (RESOURCE_EXHAUSTED, CALLER_STREAM_LIMIT) and holds nothing, a
// Check still answers quickly meanwhile, the gateway's RSS (VmRSS from /proc) stays within a
// stated bound and comes back, and the slots are given back when the watches end.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "google/rpc/error_details.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "tests/support/gateway_binary.h"
#include "tests/support/rss_bounds.h"
#include "tests/support/status_details.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"
#include "tests/support/wait.h"

namespace inspection::testing {
namespace {

using grpc::health::v1::Health;
using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;
using std::chrono::milliseconds;

constexpr milliseconds kDeadline{30000};
constexpr int kMaxStreams = 64;  // grpc.per_caller.max_streams
constexpr int kAttempts = 2000;  // watches one caller tries to open per round
constexpr int kConnections = 8;  // spread over its connections (250 each: below
                                 // streams.max_per_connection, so the caller's cap decides)

// One Watch: what it was sent first and how it ended.
class Watcher final : public grpc::ClientReadReactor<HealthCheckResponse> {
 public:
  Watcher(Health::Stub* stub, std::atomic<int>* first_status, std::atomic<int>* done)
      : first_status_(first_status), done_(done) {
    stub->async()->Watch(&context_, &request_, this);
    StartRead(&response_);
    StartCall();
  }
  void OnReadDone(bool ok) override {
    if (!ok) return;
    if (!read_.exchange(true)) first_status_->fetch_add(1);
    StartRead(&response_);
  }
  void OnDone(const grpc::Status& status) override {
    {
      absl::MutexLock lock(&mu_);
      status_ = status;
      finished_ = true;
    }
    done_->fetch_add(1);
  }
  void Cancel() { context_.TryCancel(); }
  grpc::Status status() {
    absl::MutexLock lock(&mu_);
    return status_;
  }
  bool finished() {
    absl::MutexLock lock(&mu_);
    return finished_;
  }
  bool read() const { return read_.load(); }

 private:
  std::atomic<int>* const first_status_;
  std::atomic<int>* const done_;
  grpc::ClientContext context_;
  HealthCheckRequest request_;
  HealthCheckResponse response_;
  std::atomic<bool> read_{false};
  absl::Mutex mu_;
  grpc::Status status_ ABSL_GUARDED_BY(mu_);
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

class HealthWatchGateway {
 public:
  HealthWatchGateway() {
    std::vector<std::string> argv =
        LoopbackGatewayArgv(GATEWAY_BINARY, "http://127.0.0.1:9", temp_.File("events.db"));
    argv.push_back(absl::StrCat("--grpc-per-caller-max-streams=", kMaxStreams));
    process_ = std::make_unique<Subprocess>(
        argv, std::vector<std::string>{"INSPECTION_API_KEY=health-watch-vendor-key"});
    grpc_port_ = WaitUntilServing(*process_, kDeadline).grpc;
  }
  bool ok() const { return grpc_port_ > 0; }
  Subprocess& process() { return *process_; }

  std::shared_ptr<grpc::Channel> Channel() {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // a connection of its own
    return grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", grpc_port_),
                                     grpc::InsecureChannelCredentials(), args);
  }

 private:
  TempDir temp_;
  std::unique_ptr<Subprocess> process_;
  int grpc_port_ = 0;
};

// A Check of the whole server on `stub`, with how long it took.
grpc::Status Check(Health::Stub* stub, HealthCheckResponse* response, milliseconds* took) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  const auto start = std::chrono::steady_clock::now();
  grpc::Status status = stub->Check(&context, HealthCheckRequest(), response);
  *took = std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - start);
  return status;
}

struct Round {
  int admitted = 0;          // watches sent their first status
  int refused = 0;           // ended RESOURCE_EXHAUSTED / CALLER_STREAM_LIMIT
  int other = 0;             // anything else
  int64_t peak_rss_kib = 0;  // the gateway's, with every admitted watch open
  milliseconds check_took{0};
  bool check_ok = false;
};

// Opens kAttempts watches over kConnections connections of one caller, waits until each is
// either admitted (its first status came) or refused, checks health meanwhile, then cancels
// the admitted ones and waits until every watch has ended.
Round WatchFlood(HealthWatchGateway& gateway, Health::Stub* checker) {
  Round round;
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  std::vector<std::unique_ptr<Health::Stub>> stubs;
  for (int i = 0; i < kConnections; ++i) {
    channels.push_back(gateway.Channel());
    stubs.push_back(Health::NewStub(channels.back()));
  }
  std::atomic<int> first{0};
  std::atomic<int> done{0};
  std::vector<std::unique_ptr<Watcher>> watchers;
  for (int i = 0; i < kAttempts; ++i) {
    watchers.push_back(std::make_unique<Watcher>(stubs[i % kConnections].get(), &first, &done));
  }
  // Settled: every watch admitted (first status read) or over.
  const bool settled = WaitUntil(
      [&] {
        int n = 0;
        for (auto& w : watchers) n += (w->read() || w->finished()) ? 1 : 0;
        return n == kAttempts;
      },
      std::chrono::seconds(60));
  EXPECT_TRUE(settled) << "watches neither admitted nor refused";
  round.peak_rss_kib = gateway.process().ResidentKiB();
  HealthCheckResponse health;
  round.check_ok = Check(checker, &health, &round.check_took).ok() &&
                   health.status() == HealthCheckResponse::SERVING;
  for (auto& w : watchers) {
    if (w->read() && !w->finished()) {
      ++round.admitted;
      continue;
    }
    const grpc::Status status = w->status();
    const auto info = FindStatusDetail<google::rpc::ErrorInfo>(status);
    if (status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED && info.has_value() &&
        info->reason() == "CALLER_STREAM_LIMIT") {
      ++round.refused;
    } else {
      if (round.other == 0) {
        ADD_FAILURE() << "a watch ended " << status.error_code() << " " << status.error_message();
      }
      ++round.other;
    }
  }
  for (auto& w : watchers) w->Cancel();
  EXPECT_TRUE(WaitUntil([&] { return done.load() == kAttempts; }, std::chrono::seconds(30)));
  return round;
}

TEST(HealthWatchHostileTest, AWatchFloodFromOneCallerIsBoundedAndCheckStillAnswers) {
  HealthWatchGateway gateway;
  ASSERT_TRUE(gateway.ok()) << gateway.process().output();
  auto checker_channel = gateway.Channel();
  auto checker = Health::NewStub(checker_channel);
  // A first round warms up what any such load allocates once (thread caches, HTTP/2
  // buffers); the starting level is measured after it.
  const Round warm_up = WatchFlood(gateway, checker.get());
  EXPECT_EQ(warm_up.admitted, kMaxStreams);
  const int64_t start_rss = gateway.process().ResidentKiB();
  int64_t peak_rss = start_rss;
  milliseconds slowest_check{0};
  constexpr int kRounds = 3;
  for (int i = 0; i < kRounds; ++i) {
    const Round round = WatchFlood(gateway, checker.get());
    // Exactly the caller's cap is held; every other watch is refused, none is lost.
    EXPECT_EQ(round.admitted, kMaxStreams) << "round " << i;
    EXPECT_EQ(round.refused, kAttempts - kMaxStreams) << "round " << i;
    EXPECT_EQ(round.other, 0) << "round " << i;
    EXPECT_TRUE(round.check_ok) << "round " << i;
    peak_rss = std::max(peak_rss, round.peak_rss_kib);
    slowest_check = std::max(slowest_check, round.check_took);
  }
  const int64_t end_rss = gateway.process().ResidentKiB();
  std::cout << kRounds << " rounds of " << kAttempts << " watches from one caller (cap "
            << kMaxStreams << "): gateway RSS " << start_rss / 1024
            << " MiB after the warm-up, peak " << peak_rss / 1024 << " MiB, " << end_rss / 1024
            << " MiB at the end; slowest Check " << slowest_check.count() << " ms\n";
  // A Check during the flood answers within a second.
  EXPECT_LT(slowest_check, milliseconds(1000));
  // Refused watches hold nothing and admitted ones little: the growth is allocator slack.
  EXPECT_RSS_GROWTH_LT(peak_rss - start_rss, 32 * 1024);
  EXPECT_RSS_GROWTH_LT(end_rss - start_rss, 16 * 1024);
  // The slots were given back: the caller can hold its cap again.
  const Round after = WatchFlood(gateway, checker.get());
  EXPECT_EQ(after.admitted, kMaxStreams);
}

}  // namespace
}  // namespace inspection::testing
