// Issue 32's done-when: a test-only proto with one annotated RPC (gadget_test.proto), which
// no gateway code names, is served end to end against a fake vendor by the generic unary
// handler alone: routed by its annotation, validated by its field rules, encoded (path
// parameter, query), decoded (unknown keys kept), its errors mapped, its metadata sent.
#include <future>
#include <memory>
#include <string>

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "adapters/vendor/request_validation.h"
#include "adapters/vendor/vendor_routes.h"
#include "gateway/routes/route_table.h"
#include "gateway/server/gateway_server.h"
#include "gatewaytest/v1/gadget_test.grpc.pb.h"
#include "google/rpc/error_details.pb.h"
#include "nlohmann/json.hpp"
#include "tests/support/fake_vendor.h"
#include "tests/support/status_details.h"
#include "tests/support/temp_dir.h"

namespace inspection::testing {
namespace {

// Before anything reads the API's methods (the route table is built once per process).
const bool kRegistered =
    (vendor::RegisterApiFile(gatewaytest::v1::LookUpGadgetRequest::descriptor()->file()), true);

using gatewaytest::v1::GadgetService;
using gatewaytest::v1::LookUpGadgetRequest;
using gatewaytest::v1::LookUpGadgetResponse;

class GenericUnaryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(kRegistered);
    ASSERT_TRUE(vendor_.Start());
    server::GatewayServerOptions options;
    options.grpc_addr = "127.0.0.1:0";
    options.vendor.base_url = vendor_.BaseUrl();
    options.vendor.api_key = "generic-test-key-41b7";
    options.admin_port = -1;
    options.event_log_url = "sqlite:" + temp_.File("events.db");
    auto started = server::GatewayServer::Start(std::move(options));
    ASSERT_TRUE(started.ok()) << started.status();
    gateway_ = std::move(*started);
    channel_ = grpc::CreateChannel(absl::StrCat("127.0.0.1:", gateway_->grpc_port()),
                                   grpc::InsecureChannelCredentials());
    stub_ = GadgetService::NewStub(channel_);
  }
  void TearDown() override {
    gateway_.reset();
    vendor_.Stop();
  }

  static std::unique_ptr<grpc::ClientContext> Context() {
    auto context = std::make_unique<grpc::ClientContext>();
    context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    return context;
  }

  void VendorReplies(int status, const std::string& body) {
    ScriptedResponse response;
    response.status = status;
    response.body = body;
    vendor_.RespondWith(response);
  }

  TempDir temp_;
  FakeVendor vendor_;
  std::unique_ptr<server::GatewayServer> gateway_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<GadgetService::Stub> stub_;
};

TEST_F(GenericUnaryTest, TheAnnotatedRpcIsRoutedLikeTheApis) {
  const routes::Route* route =
      routes::FindRouteByGrpcMethod("/gatewaytest.v1.GadgetService/LookUpGadget");
  ASSERT_NE(route, nullptr);
  EXPECT_EQ(route->metric_label, "look_up_gadget");
  EXPECT_EQ(route->path_template, "/apiV1/gadgets/{gadgetId}");
  EXPECT_GE(static_cast<size_t>(route->id), 15u)
      << "an RPC no code names gets an id past the named ones";
  EXPECT_TRUE(validation::RuleProblems(*LookUpGadgetRequest::descriptor()).empty());
}

TEST_F(GenericUnaryTest, ServesTheRpcFromItsAnnotationsAlone) {
  VendorReplies(200, R"({"name": "rover", "wheels": 6, "colourHint": "red"})");
  LookUpGadgetRequest request;
  request.set_gadget_id("g-42");
  request.set_limit(3);
  request.set_colour("red");
  LookUpGadgetResponse response;
  auto context = Context();
  const grpc::Status status = stub_->LookUpGadget(context.get(), request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.name(), "rover");
  EXPECT_EQ(response.wheels(), 6);
  // Nothing the vendor sent is lost.
  ASSERT_TRUE(response.unknown_fields().fields().contains("colourHint"));
  EXPECT_EQ(response.unknown_fields().fields().at("colourHint").string_value(), "red");
  // The same response metadata as every RPC.
  const auto& headers = context->GetServerInitialMetadata();
  EXPECT_EQ(headers.count("x-request-id"), 1u);
  EXPECT_EQ(headers.count("x-trace-id"), 1u);
  ASSERT_EQ(vendor_.Requests().size(), 1u);
  const RecordedRequest sent = vendor_.Requests().front();
  EXPECT_EQ(sent.method, "GET");
  EXPECT_EQ(sent.path, "/apiV1/gadgets/g-42");
  EXPECT_EQ(sent.query, "limit=3&colour=red");
  ASSERT_NE(sent.Header("x-api-key"), nullptr) << "the vendor client's headers, as for every route";
  EXPECT_TRUE(*sent.Header("x-api-key") == "generic-test-key-41b7");  // a key is never printed
}

TEST_F(GenericUnaryTest, ValidatesByTheFieldRulesBeforeAnyVendorCall) {
  LookUpGadgetRequest request;
  request.set_limit(0);
  LookUpGadgetResponse response;
  auto context = Context();
  const grpc::Status status = stub_->LookUpGadget(context.get(), request, &response);
  ASSERT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  std::optional<google::rpc::BadRequest> bad = FindStatusDetail<google::rpc::BadRequest>(status);
  ASSERT_TRUE(bad.has_value());
  ASSERT_EQ(bad->field_violations_size(), 2);
  EXPECT_EQ(bad->field_violations(0).field(), "gadget_id");
  EXPECT_EQ(bad->field_violations(0).description(),
            "gadget_id is required: the gadget to look up.");
  EXPECT_EQ(bad->field_violations(1).field(), "limit");
  EXPECT_EQ(bad->field_violations(1).description(),
            "limit must be 1 or greater when set; it is 0.");
  request.set_gadget_id("a/b");
  request.clear_limit();
  auto again = Context();
  const grpc::Status slash = stub_->LookUpGadget(again.get(), request, &response);
  ASSERT_EQ(slash.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(vendor_.Requests().empty());
}

TEST_F(GenericUnaryTest, VendorErrorsAreMappedAndTheBodyKept) {
  VendorReplies(404, R"({"message": "no such gadget"})");
  LookUpGadgetRequest request;
  request.set_gadget_id("missing");
  LookUpGadgetResponse response;
  auto context = Context();
  const grpc::Status status = stub_->LookUpGadget(context.get(), request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND) << status.error_message();
  std::optional<google::rpc::ErrorInfo> info = FindStatusDetail<google::rpc::ErrorInfo>(status);
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->metadata().at("route"), "look_up_gadget");
}

TEST_F(GenericUnaryTest, BytesThatAreNotTheRequestTypeAreRefused) {
  grpc::GenericStub generic(channel_);
  const std::string garbage = "\xff\xff\xff\xff\x0f not a message";
  grpc::Slice slice(garbage);
  grpc::ByteBuffer request(&slice, 1);
  grpc::ByteBuffer response;
  std::promise<grpc::Status> done;
  auto context = Context();
  generic.UnaryCall(context.get(), "/gatewaytest.v1.GadgetService/LookUpGadget",
                    grpc::StubOptions(), &request, &response,
                    [&done](grpc::Status status) { done.set_value(std::move(status)); });
  const grpc::Status status = done.get_future().get();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  EXPECT_NE(status.error_message().find("gatewaytest.v1.LookUpGadgetRequest"), std::string::npos)
      << status.error_message();
  EXPECT_TRUE(vendor_.Requests().empty());
}

}  // namespace
}  // namespace inspection::testing
