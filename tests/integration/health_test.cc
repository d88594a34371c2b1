// The gRPC health service's per-service status means something: inspection.v1.EventService
// is NOT_SERVING while the event log refuses writes and SERVING again once it takes them (a
// Watch sees each change); every service is NOT_SERVING once the gateway drains (a Watch
// sees it, then its stream ends).
#include <atomic>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/generic/generic_stub.h>

#include "absl/synchronization/mutex.h"
#include "adapters/eventlog/sqlite/sqlite_event_log.h"
#include "grpc/health/v1/health.pb.h"
#include "tests/integration/gateway_fixture.h"
#include "tests/support/temp_dir.h"
#include "tests/support/wait.h"

namespace inspection::testing {
namespace {

using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

// A real SQLite event log whose writability check can be made to fail.
class BreakableLog final : public eventlog::EventLog {
 public:
  explicit BreakableLog(std::unique_ptr<eventlog::EventLog> log) : log_(std::move(log)) {}
  absl::StatusOr<eventlog::AppendResult> Append(const eventlog::NewEvent& event) override {
    return log_->Append(event);
  }
  absl::StatusOr<std::vector<eventlog::StoredEvent>> ReadAfter(const std::string& after,
                                                               size_t limit) override {
    return log_->ReadAfter(after, limit);
  }
  absl::StatusOr<std::string> LastCursor() override { return log_->LastCursor(); }
  void WaitForAppend(const std::string& after, std::chrono::milliseconds timeout) override {
    log_->WaitForAppend(after, timeout);
  }
  absl::StatusOr<int64_t> ApplyRetention(absl::Time now) override {
    return log_->ApplyRetention(now);
  }
  absl::Status CheckWritable() override {
    if (broken_) return absl::UnavailableError("disk full (test)");
    return log_->CheckWritable();
  }
  std::string Describe() const override { return log_->Describe(); }
  std::atomic<bool> broken_{false};

 private:
  std::unique_ptr<eventlog::EventLog> log_;
};

// An in-process gateway on a free port in front of `vendor`, without the admin port.
server::GatewayServerOptions Options(const FakeVendor& vendor) {
  server::GatewayServerOptions options;
  options.grpc_addr = "127.0.0.1:0";
  options.vendor.base_url = vendor.BaseUrl();
  options.vendor.api_key = kApiKey;
  options.webapp_url = kWebappUrl;
  options.admin_port = -1;
  return options;
}

// The health status of `service`, or -1 when the call fails.
int HealthOf(grpc::GenericStub& stub, const std::string& service) {
  HealthCheckRequest request;
  request.set_service(service);
  const std::string bytes = request.SerializeAsString();
  grpc::Slice slice(bytes);
  grpc::ByteBuffer in(&slice, 1);
  grpc::ByteBuffer out;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  std::promise<grpc::Status> done;
  stub.UnaryCall(&context, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &in, &out,
                 [&](grpc::Status status) { done.set_value(status); });
  if (!done.get_future().get().ok()) return -1;
  std::vector<grpc::Slice> slices;
  if (!out.Dump(&slices).ok()) return -1;
  std::string text;
  for (const grpc::Slice& s : slices)
    text.append(reinterpret_cast<const char*>(s.begin()), s.size());
  HealthCheckResponse response;
  return response.ParseFromString(text) ? static_cast<int>(response.status()) : -1;
}

TEST(HealthTest, EventServiceFollowsTheEventLog) {
  TempDir temp;
  auto sqlite = eventlog::OpenSqliteEventLog(temp.File("events.db"), eventlog::RetentionPolicy{});
  ASSERT_TRUE(sqlite.ok()) << sqlite.status();
  auto log = std::make_shared<BreakableLog>(std::move(*sqlite));
  FakeVendor vendor;
  ASSERT_TRUE(vendor.Start());
  server::GatewayServerOptions options = Options(vendor);
  options.event_log = log;
  options.health_check_interval = std::chrono::milliseconds(20);
  auto gateway = server::GatewayServer::Start(std::move(options));
  ASSERT_TRUE(gateway.ok()) << gateway.status();
  grpc::GenericStub stub(grpc::CreateChannel(absl::StrCat("127.0.0.1:", (*gateway)->grpc_port()),
                                             grpc::InsecureChannelCredentials()));
  constexpr int kServing = HealthCheckResponse::SERVING;
  constexpr int kNotServing = HealthCheckResponse::NOT_SERVING;
  EXPECT_EQ(HealthOf(stub, ""), kServing);
  EXPECT_EQ(HealthOf(stub, "inspection.v1.EventService"), kServing);

  log->broken_ = true;
  EXPECT_TRUE(WaitUntil([&] { return HealthOf(stub, "inspection.v1.EventService") == kNotServing; },
                        std::chrono::seconds(10)));
  EXPECT_EQ(HealthOf(stub, "inspection.v1.TokenService"), kServing)
      << "the unary services do not need the event log";
  log->broken_ = false;
  EXPECT_TRUE(WaitUntil([&] { return HealthOf(stub, "inspection.v1.EventService") == kServing; },
                        std::chrono::seconds(10)));

  vendor.Stop();
}

// A Health/Watch stream over the generic callback API (client side: a bidi call with one
// request, the server streams): records every status it is sent.
class HealthWatch final : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  HealthWatch(grpc::GenericStub& stub, const std::string& service) {
    HealthCheckRequest request;
    request.set_service(service);
    const std::string bytes = request.SerializeAsString();
    grpc::Slice slice(bytes);
    request_ = grpc::ByteBuffer(&slice, 1);
    stub.PrepareBidiStreamingCall(&context_, "/grpc.health.v1.Health/Watch", grpc::StubOptions(),
                                  this);
    StartWrite(&request_);
    StartRead(&response_);
    StartCall();
  }
  ~HealthWatch() override {
    context_.TryCancel();
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(&done_));
  }
  void OnWriteDone(bool) override { StartWritesDone(); }
  void OnReadDone(bool ok) override {
    if (!ok) return;
    std::vector<grpc::Slice> slices;
    std::string text;
    if (response_.Dump(&slices).ok()) {
      for (const grpc::Slice& s : slices) {
        text.append(reinterpret_cast<const char*>(s.begin()), s.size());
      }
    }
    HealthCheckResponse parsed;
    {
      absl::MutexLock lock(&mu_);
      statuses_.push_back(parsed.ParseFromString(text) ? static_cast<int>(parsed.status()) : -1);
    }
    StartRead(&response_);
  }
  void OnDone(const grpc::Status& status) override {
    absl::MutexLock lock(&mu_);
    code_ = status.error_code();
    done_ = true;
  }
  // How the stream ended; nullopt while it is open.
  std::optional<grpc::StatusCode> ended() {
    absl::MutexLock lock(&mu_);
    if (!done_) return std::nullopt;
    return code_;
  }
  std::vector<int> statuses() {
    absl::MutexLock lock(&mu_);
    return statuses_;
  }

 private:
  grpc::ClientContext context_;
  grpc::ByteBuffer request_;
  grpc::ByteBuffer response_;
  absl::Mutex mu_;
  std::vector<int> statuses_ ABSL_GUARDED_BY(mu_);
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  grpc::StatusCode code_ ABSL_GUARDED_BY(mu_) = grpc::StatusCode::OK;
};

TEST(HealthTest, EveryServiceIsNotServingOnceTheGatewayDrains) {
  TempDir temp;
  FakeVendor vendor;
  ASSERT_TRUE(vendor.Start());
  ScriptedResponse held;
  held.kind = ScriptedResponse::Kind::kHold;  // an RPC in flight: the drain waits for it
  held.body = R"({"uid": "u1", "tradeinStatus": 1})";
  vendor.RespondWith(held);
  server::GatewayServerOptions options = Options(vendor);
  options.event_log_url = "sqlite:" + temp.File("events.db");
  auto gateway = server::GatewayServer::Start(std::move(options));
  ASSERT_TRUE(gateway.ok()) << gateway.status();
  auto channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", (*gateway)->grpc_port()),
                                     grpc::InsecureChannelCredentials());
  grpc::GenericStub stub(channel);
  constexpr int kServing = HealthCheckResponse::SERVING;
  constexpr int kNotServing = HealthCheckResponse::NOT_SERVING;
  std::vector<std::unique_ptr<HealthWatch>> watches;
  const std::vector<std::string> services = {"", "inspection.v1.EventService",
                                             "inspection.v1.TokenService",
                                             "inspection.v1.DamageService"};
  for (const std::string& service : services) {
    watches.push_back(std::make_unique<HealthWatch>(stub, service));
  }
  for (auto& watch : watches) {
    ASSERT_TRUE(WaitUntil([&] { return !watch->statuses().empty(); }, std::chrono::seconds(10)));
    EXPECT_EQ(watch->statuses().front(), kServing);
  }
  // An RPC held at the vendor: the drain waits for it.
  auto token = v1::TokenService::NewStub(channel);
  grpc::ClientContext call_context;
  call_context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  v1::GetTokenStatusRequest request;
  request.set_uid("u1");
  v1::GetTokenStatusResponse response;
  std::promise<grpc::Status> call_done;
  token->async()->GetTokenStatus(&call_context, &request, &response,
                                 [&](grpc::Status status) { call_done.set_value(status); });
  ASSERT_TRUE(vendor.WaitForHeld(1, std::chrono::seconds(10)));
  std::thread drain([&] { (*gateway)->Shutdown(std::chrono::seconds(2)); });
  for (size_t i = 0; i < watches.size(); ++i) {
    EXPECT_TRUE(WaitUntil(
        [&] {
          const std::vector<int> seen = watches[i]->statuses();
          return !seen.empty() && seen.back() == kNotServing;
        },
        std::chrono::seconds(10)))
        << "service \"" << services[i] << "\" never turned NOT_SERVING during the drain";
  }
  vendor.ReleaseHeld();
  drain.join();
  // Then each watch ends, so that it does not hold the drain up: UNAVAILABLE, as the other
  // streams (watch another replica).
  for (size_t i = 0; i < watches.size(); ++i) {
    EXPECT_TRUE(
        WaitUntil([&] { return watches[i]->ended().has_value(); }, std::chrono::seconds(10)));
    EXPECT_EQ(watches[i]->ended(), grpc::StatusCode::UNAVAILABLE) << services[i];
  }
  EXPECT_TRUE(call_done.get_future().get().ok()) << "the call in flight finished during the drain";
  watches.clear();
  vendor.Stop();
}

// Watch is the gateway's own (services/health_service.h): a watcher is sent the current
// status at once, then each change, here NOT_SERVING while the event log refuses writes and
// SERVING again after.
TEST(HealthTest, AWatchSeesEventServiceTurnNotServingAndServingAgain) {
  TempDir temp;
  auto sqlite = eventlog::OpenSqliteEventLog(temp.File("events.db"), eventlog::RetentionPolicy{});
  ASSERT_TRUE(sqlite.ok()) << sqlite.status();
  auto log = std::make_shared<BreakableLog>(std::move(*sqlite));
  FakeVendor vendor;
  ASSERT_TRUE(vendor.Start());
  server::GatewayServerOptions options = Options(vendor);
  options.event_log = log;
  options.health_check_interval = std::chrono::milliseconds(20);
  auto gateway = server::GatewayServer::Start(std::move(options));
  ASSERT_TRUE(gateway.ok()) << gateway.status();
  grpc::GenericStub stub(grpc::CreateChannel(absl::StrCat("127.0.0.1:", (*gateway)->grpc_port()),
                                             grpc::InsecureChannelCredentials()));
  constexpr int kServing = HealthCheckResponse::SERVING;
  constexpr int kNotServing = HealthCheckResponse::NOT_SERVING;
  auto watch = std::make_unique<HealthWatch>(stub, "inspection.v1.EventService");
  auto last_is = [&](int status) {
    const std::vector<int> seen = watch->statuses();
    return !seen.empty() && seen.back() == status;
  };
  ASSERT_TRUE(WaitUntil([&] { return last_is(kServing); }, std::chrono::seconds(10)));
  EXPECT_EQ((*gateway)->open_streams(), 1u) << "a watch holds a stream slot";
  log->broken_ = true;
  ASSERT_TRUE(WaitUntil([&] { return last_is(kNotServing); }, std::chrono::seconds(10)));
  log->broken_ = false;
  ASSERT_TRUE(WaitUntil([&] { return last_is(kServing); }, std::chrono::seconds(10)));
  EXPECT_EQ(watch->statuses(), (std::vector<int>{kServing, kNotServing, kServing}));
  watch.reset();  // cancelled: the slot is given back
  EXPECT_TRUE(WaitUntil([&] { return (*gateway)->open_streams() == 0; }, std::chrono::seconds(10)));
  vendor.Stop();
}

}  // namespace
}  // namespace inspection::testing
