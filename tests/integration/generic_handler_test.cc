// The generic unary handler over the real API (tests/generic_unary covers an RPC no code
// names): every routed RPC is served by it, whichever service declares it, and an answer
// finished on the handler's own thread (a cache hit) goes out like any other.
#include <future>
#include <string>

#include <grpcpp/generic/generic_stub.h>

#include "gateway/routes/route_table.h"
#include "tests/integration/gateway_fixture.h"

namespace inspection::testing {
namespace {

class GenericHandlerTest : public GatewayTest {
 protected:
  // One call of `method` with the empty message (zero bytes), through gRPC's generic stub.
  grpc::Status CallEmpty(const std::string& method) {
    grpc::GenericStub generic(channel_);
    grpc::Slice empty("");
    grpc::ByteBuffer request(&empty, 1);
    grpc::ByteBuffer response;
    std::promise<grpc::Status> done;
    auto context = Context(5000);
    generic.UnaryCall(context.get(), method, grpc::StubOptions(), &request, &response,
                      [&done](grpc::Status status) { done.set_value(std::move(status)); });
    return done.get_future().get();
  }
};

TEST_F(GenericHandlerTest, EveryRoutedRpcIsServed) {
  VendorReplies(200, "{}");
  ASSERT_GE(routes::AllRoutes().size(), 15u);
  for (const routes::Route& route : routes::AllRoutes()) {
    const grpc::Status status = CallEmpty(route.grpc_method);
    EXPECT_NE(status.error_code(), grpc::StatusCode::UNIMPLEMENTED)
        << route.grpc_method << ": " << status.error_message();
    EXPECT_NE(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << route.grpc_method;
  }
  // And a method no route serves is still gRPC's UNIMPLEMENTED.
  EXPECT_EQ(CallEmpty("/inspection.v1.ImageService/NoSuchRpc").error_code(),
            grpc::StatusCode::UNIMPLEMENTED);
}

TEST_F(GenericHandlerTest, ACacheHitFinishedOnTheHandlersThreadIsAnswered) {
  VendorReplies(200, R"({"webhookUrlV2": "https://hooks.example.test/v2"})");
  for (const char* expected : {"miss", "hit", "hit"}) {
    v1::GetWebhookConfigResponse response;
    auto context = Context(3000);
    const grpc::Status status =
        event_config_->GetWebhookConfig(context.get(), v1::GetWebhookConfigRequest(), &response);
    ASSERT_TRUE(status.ok()) << expected << ": " << status.error_message();
    EXPECT_EQ(response.config().webhook_url_v2(), "https://hooks.example.test/v2");
    const auto& headers = context->GetServerInitialMetadata();
    auto cache = headers.find("x-cache");
    ASSERT_NE(cache, headers.end());
    EXPECT_EQ(std::string(cache->second.data(), cache->second.size()), expected);
  }
  EXPECT_EQ(vendor_.Requests().size(), 1u);
}

}  // namespace
}  // namespace inspection::testing
