// GatewayServer::Shutdown: the drain lets calls in flight finish, then ends. (That it does
// not wait for an idle client connection is checked with the real process, where the
// wait showed: GatewayProcessTest.ANamedAccountFromTheConfigIsCalledWithItsOwnKey.)
#include <sys/socket.h>
#include <unistd.h>

#include <future>
#include <thread>

#include <gmock/gmock.h>

#include "tests/integration/gateway_fixture.h"
#include "tests/support/wait.h"

namespace inspection::testing {
namespace {

// True when nothing accepts connections on 127.0.0.1:`port` any more.
bool Refused(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<uint16_t>(port));
  const bool refused = ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0;
  ::close(fd);
  return refused;
}

// The gRPC listener does not share its port (no SO_REUSEPORT): a second gateway started on
// the first one's address fails at once with a clear error, and the first keeps serving.
TEST_F(GatewayTest, ASecondGatewayOnTheSameAddressFailsToStart) {
  server::GatewayServerOptions options;
  options.grpc_addr = absl::StrCat("127.0.0.1:", gateway_->grpc_port());
  options.vendor.base_url = vendor_.BaseUrl();
  options.vendor.api_key = kApiKey;
  options.webapp_url = kWebappUrl;
  options.admin_port = -1;
  options.event_log_url = "sqlite:" + temp_.File("second.db");
  auto second = server::GatewayServer::Start(std::move(options));
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(second.status().message()),
              ::testing::HasSubstr(absl::StrCat(
                  "cannot listen for gRPC on 127.0.0.1:", gateway_->grpc_port(), " (grpc_addr)")));
  VendorReplies(200, R"({"token": {"uid": "u-1"}})");
  v1::GetTokenStatusRequest request;
  request.set_uid("u-1");
  v1::GetTokenStatusResponse response;
  EXPECT_TRUE(token_->GetTokenStatus(Context().get(), request, &response).ok());
}

TEST_F(GatewayTest, ShutdownLetsACallInFlightFinishThenEnds) {
  ScriptedResponse held;
  held.kind = ScriptedResponse::Kind::kHold;
  held.body = R"({"status": "send"})";
  vendor_.RespondWith(held);
  v1::TestWebhookRequest request;
  request.set_event_name(v1::EVENT_NAME_CREATE_REPORT);
  request.set_inspection_id("insp_1");
  v1::TestWebhookResponse response;
  auto call = std::async(std::launch::async, [&] {
    return event_config_->TestWebhook(Context(30000).get(), request, &response);
  });
  ASSERT_TRUE(vendor_.WaitForHeld(1, std::chrono::seconds(10)));

  const int admin_port = gateway_->admin_port();
  auto shutdown =
      std::async(std::launch::async, [&] { gateway_->Shutdown(std::chrono::seconds(20)); });
  // Shutdown has begun (the admin endpoint closes first) while the vendor holds the call.
  ASSERT_TRUE(WaitUntil([&] { return Refused(admin_port); }, std::chrono::seconds(10)));
  EXPECT_NE(shutdown.wait_for(std::chrono::milliseconds(0)), std::future_status::ready);
  vendor_.ReleaseHeld();

  // The call in flight was drained, not cut off...
  const grpc::Status status = call.get();
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.status(), "send");
  // ...and with nothing left in flight the shutdown ends, well before the 20 s grace,
  // although this test's channel still holds its (now idle) connection.
  EXPECT_EQ(shutdown.wait_for(std::chrono::seconds(3)), std::future_status::ready);
}

}  // namespace
}  // namespace inspection::testing
