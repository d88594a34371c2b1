// The gRPC health service's per-service status means something: inspection.v1.EventService
// is NOT_SERVING while the event log refuses writes and SERVING again once it takes them.
#include <atomic>
#include <future>
#include <memory>

#include <grpcpp/generic/generic_stub.h>

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
  server::GatewayServerOptions options;
  options.grpc_addr = "127.0.0.1:0";
  options.vendor.base_url = vendor.BaseUrl();
  options.vendor.api_key = kApiKey;
  options.webapp_url = kWebappUrl;
  options.admin_port = -1;
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

}  // namespace
}  // namespace inspection::testing
