#include "gateway/token_watch/token_watch.h"

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gateway/timers/scheduler.h"
#include "gateway/token_watch/token_status_poller.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "inspection/v1/token.grpc.pb.h"
#include "tests/support/wait.h"

namespace inspection::token_watch {
namespace {

using ::testing::ElementsAre;
using Response = v1::GetTokenStatusResponse;
using Done = absl::AnyInvocable<void(PollResult) &&>;

constexpr std::chrono::seconds kDeadline{10};

// The service the lead wires for real, reduced to the streaming RPC.
class TestTokenService final : public v1::TokenService::CallbackService {
 public:
  explicit TestTokenService(TokenStatusPoller* poller) : poller_(poller) {}

  grpc::ServerWriteReactor<v1::WatchTokenStatusResponse>* WatchTokenStatus(
      grpc::CallbackServerContext* context, const v1::WatchTokenStatusRequest* request) override {
    return NewWatchTokenStatusReactor(poller_, context, request);
  }

 private:
  TokenStatusPoller* const poller_;
};

Response TokenStatus(const std::string& uid, int raw, bool expired = false) {
  Response response;
  response.mutable_token()->set_uid(uid);
  response.mutable_token()->set_tradein_status_raw(raw);
  response.mutable_token()->set_tradein_status(static_cast<v1::TradeinStatus>(raw + 1));
  response.mutable_token()->set_expired(expired);
  response.set_web_api_version("v2");
  return response;
}

// A real gRPC server on 127.0.0.1:0 with the real timer scheduler and a 20 ms poll interval,
// in front of a fake vendor that answers asynchronously (1 ms later, on the timer thread):
//   "walk-*":    0, 0, 1, 1, 2, then expired (the last repeats)
//   "steady-*":  0 forever
//   "missing-*": NOT_FOUND
class WatchTokenStatusTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TokenStatusPollerOptions options;
    options.interval = absl::Milliseconds(20);
    poller_ = std::make_unique<TokenStatusPoller>(
        options, [this](const std::string& uid, Done done) { Fetch(uid, std::move(done)); },
        &scheduler_);
    service_ = std::make_unique<TestTokenService>(poller_.get());
    int port = 0;
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_GT(port, 0);
    stub_ = v1::TokenService::NewStub(
        grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
  }

  void TearDown() override {
    // As in production: end the watches first, so that the server's shutdown does not wait.
    if (poller_ != nullptr) poller_->Shutdown();
    if (server_ != nullptr) server_->Shutdown(std::chrono::system_clock::now() + kDeadline);
  }

  void Fetch(const std::string& uid, Done done) {
    int call;
    {
      absl::MutexLock lock(&mu_);
      call = calls_[uid]++;
    }
    std::optional<PollResult> result;
    if (absl::StartsWith(uid, "walk-")) {
      static constexpr int kWalk[] = {0, 0, 1, 1, 2};
      result = call < 5 ? TokenStatus(uid, kWalk[call]) : TokenStatus(uid, 2, /*expired=*/true);
    } else if (absl::StartsWith(uid, "steady-")) {
      result = TokenStatus(uid, 0);
    } else {
      // As the call core answers a vendor 404: code, message and google.rpc.Status details.
      google::rpc::Status rich;
      rich.set_code(grpc::StatusCode::NOT_FOUND);
      rich.set_message("token not found");
      google::rpc::ErrorInfo info;
      info.set_reason("VENDOR_NOT_FOUND");
      info.set_domain("inspection-gateway");
      rich.add_details()->PackFrom(info);
      result =
          grpc::Status(grpc::StatusCode::NOT_FOUND, "token not found", rich.SerializeAsString());
    }
    scheduler_.RunAfter(absl::Milliseconds(1),
                        [done = std::move(done), result = *std::move(result)]() mutable {
                          std::move(done)(std::move(result));
                        });
  }

  int calls(const std::string& uid) {
    absl::MutexLock lock(&mu_);
    return calls_[uid];
  }

  bool WaitForWatchers(size_t watchers) {
    return testing::WaitUntil([&] { return poller_->stats().watchers == watchers; },
                              std::chrono::seconds(5));
  }

  std::unique_ptr<grpc::ClientReader<v1::WatchTokenStatusResponse>> StartWatch(
      grpc::ClientContext* context, const std::string& uid) {
    context->set_deadline(std::chrono::system_clock::now() + kDeadline);
    v1::WatchTokenStatusRequest request;
    request.set_uid(uid);
    return stub_->WatchTokenStatus(context, request);
  }

  static std::string Describe(const v1::WatchTokenStatusResponse& message) {
    return absl::StrCat(message.token().tradein_status_raw(),
                        message.token().expired() ? " expired" : "");
  }

  // Declaration order = reverse destruction order: the scheduler outlives the poller, the
  // poller outlives the server.
  timers::TimerThreadScheduler scheduler_;
  std::unique_ptr<TokenStatusPoller> poller_;
  std::unique_ptr<TestTokenService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::TokenService::Stub> stub_;
  absl::Mutex mu_;
  std::map<std::string, int> calls_ ABSL_GUARDED_BY(mu_);
};

TEST_F(WatchTokenStatusTest, StreamsEachChangeOnceThenEndsOkWhenTheTokenExpires) {
  grpc::ClientContext context;
  auto reader = StartWatch(&context, "walk-1");
  std::vector<std::string> seen;
  v1::WatchTokenStatusResponse message;
  while (reader->Read(&message)) {
    seen.push_back(Describe(message));
    EXPECT_EQ(message.token().uid(), "walk-1");
    EXPECT_EQ(message.web_api_version(), "v2");
  }
  const grpc::Status status = reader->Finish();

  EXPECT_TRUE(status.ok()) << status.error_code() << ": " << status.error_message();
  EXPECT_THAT(seen, ElementsAre("0", "1", "2", "2 expired"));
  EXPECT_EQ(calls("walk-1"), 6);  // polling stopped at the expiry
  EXPECT_TRUE(WaitForWatchers(0));
  EXPECT_EQ(poller_->stats().active_uids, 0u);
}

TEST_F(WatchTokenStatusTest, InvalidUidIsRejectedWithFieldViolations) {
  for (const std::string uid : {"", "a/b", "a?b", "a#b", "a&b", "a b", "a\tb", "..", "abc-pwa"}) {
    SCOPED_TRACE(uid);
    grpc::ClientContext context;
    auto reader = StartWatch(&context, uid);
    v1::WatchTokenStatusResponse message;
    EXPECT_FALSE(reader->Read(&message));
    const grpc::Status status = reader->Finish();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);

    google::rpc::Status details;
    ASSERT_TRUE(details.ParseFromString(status.error_details()));
    EXPECT_EQ(details.code(), grpc::StatusCode::INVALID_ARGUMENT);
    bool found = false;
    for (const auto& any : details.details()) {
      google::rpc::BadRequest bad_request;
      if (!any.UnpackTo(&bad_request)) continue;
      found = true;
      ASSERT_GE(bad_request.field_violations_size(), 1);
      EXPECT_EQ(bad_request.field_violations(0).field(), "uid");
    }
    EXPECT_TRUE(found);
  }
  EXPECT_EQ(poller_->stats().polls_issued, 0u);
}

TEST_F(WatchTokenStatusTest, VendorNotFoundEndsTheStreamWithNotFound) {
  grpc::ClientContext context;
  auto reader = StartWatch(&context, "missing-1");
  v1::WatchTokenStatusResponse message;
  EXPECT_FALSE(reader->Read(&message));
  const grpc::Status status = reader->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(status.error_message(), "token not found");
  // The details the fetch answered with reach the client unchanged (nothing re-encoded).
  google::rpc::Status details;
  ASSERT_TRUE(details.ParseFromString(status.error_details()));
  ASSERT_EQ(details.details_size(), 1);
  google::rpc::ErrorInfo info;
  ASSERT_TRUE(details.details(0).UnpackTo(&info));
  EXPECT_EQ(info.reason(), "VENDOR_NOT_FOUND");
}

TEST_F(WatchTokenStatusTest, ClientCancelReleasesTheWatch) {
  grpc::ClientContext context;
  auto reader = StartWatch(&context, "steady-1");
  v1::WatchTokenStatusResponse message;
  ASSERT_TRUE(reader->Read(&message));
  EXPECT_EQ(Describe(message), "0");
  EXPECT_EQ(poller_->stats().watchers, 1u);

  context.TryCancel();
  while (reader->Read(&message)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_TRUE(WaitForWatchers(0));
  EXPECT_TRUE(testing::WaitUntil([&] { return poller_->stats().active_uids == 0; },
                                 std::chrono::seconds(5)));
}

TEST_F(WatchTokenStatusTest, ClientDeadlineReleasesTheWatch) {
  grpc::ClientContext context;
  v1::WatchTokenStatusRequest request;
  request.set_uid("steady-2");
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(300));
  auto reader = stub_->WatchTokenStatus(&context, request);
  std::vector<std::string> seen;
  v1::WatchTokenStatusResponse message;
  while (reader->Read(&message)) seen.push_back(Describe(message));
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_THAT(seen, ElementsAre("0"));  // the unchanged status is not repeated
  EXPECT_TRUE(WaitForWatchers(0));
}

TEST_F(WatchTokenStatusTest, StreamsOfOneTokenShareOnePollLoop) {
  constexpr int kStreams = 10;
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<std::unique_ptr<grpc::ClientReader<v1::WatchTokenStatusResponse>>> readers;
  for (int i = 0; i < kStreams; ++i) {
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    readers.push_back(StartWatch(contexts.back().get(), "steady-shared"));
    v1::WatchTokenStatusResponse message;
    ASSERT_TRUE(readers.back()->Read(&message));
    EXPECT_EQ(Describe(message), "0");
  }
  TokenStatusPoller::Stats stats = poller_->stats();
  EXPECT_EQ(stats.watchers, static_cast<size_t>(kStreams));
  EXPECT_EQ(stats.active_uids, 1u);

  for (auto& context : contexts) context->TryCancel();
  for (auto& reader : readers) {
    v1::WatchTokenStatusResponse message;
    while (reader->Read(&message)) {
    }
    EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  }
  EXPECT_TRUE(WaitForWatchers(0));
}

TEST_F(WatchTokenStatusTest, PollerShutdownEndsOpenStreamsWithUnavailable) {
  grpc::ClientContext context;
  auto reader = StartWatch(&context, "steady-3");
  v1::WatchTokenStatusResponse message;
  ASSERT_TRUE(reader->Read(&message));

  poller_->Shutdown();
  while (reader->Read(&message)) {
  }
  const grpc::Status status = reader->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(status.error_message(), "gateway shutting down");

  // New calls are refused the same way.
  grpc::ClientContext late_context;
  auto late = StartWatch(&late_context, "steady-3");
  EXPECT_FALSE(late->Read(&message));
  EXPECT_EQ(late->Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
}

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

TEST(ValidateWatchUidTest, AcceptsTokenUids) {
  for (const std::string uid : {"abc123", "9f1c2e7a-41b2-4c55-9d0e-1f2a3b4c5d6e", "a.b_c~d", "x"}) {
    EXPECT_TRUE(ValidateWatchUid(uid).ok()) << uid;
  }
}

TEST(ValidateWatchUidTest, ReportsEachBrokenRule) {
  const grpc::Status status = ValidateWatchUid("a/b-pwa");
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  google::rpc::Status details;
  ASSERT_TRUE(details.ParseFromString(status.error_details()));
  std::vector<std::string> fields;
  std::string reason;
  for (const auto& any : details.details()) {
    google::rpc::BadRequest bad_request;
    google::rpc::ErrorInfo info;
    if (any.UnpackTo(&bad_request)) {
      for (const auto& violation : bad_request.field_violations()) {
        fields.push_back(violation.field());
      }
    } else if (any.UnpackTo(&info)) {
      reason = absl::StrCat(info.domain(), "/", info.reason());
    }
  }
  EXPECT_THAT(fields, ElementsAre("uid", "uid"));
  EXPECT_EQ(reason, "inspection-gateway/INVALID_REQUEST");
}

}  // namespace
}  // namespace inspection::token_watch
