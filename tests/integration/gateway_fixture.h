#ifndef TESTS_INTEGRATION_GATEWAY_FIXTURE_H_
#define TESTS_INTEGRATION_GATEWAY_FIXTURE_H_

#include <memory>
#include <optional>
#include <string>

#include <google/protobuf/text_format.h>
#include <google/protobuf/util/message_differencer.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "adapters/http/curl_transport.h"
#include "gateway/server/gateway_server.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "inspection/v1/damage.grpc.pb.h"
#include "inspection/v1/event_config.grpc.pb.h"
#include "inspection/v1/image.grpc.pb.h"
#include "inspection/v1/inspection.grpc.pb.h"
#include "inspection/v1/token.grpc.pb.h"
#include "nlohmann/json.hpp"
#include "tests/support/fake_vendor.h"
#include "tests/support/status_details.h"
#include "tests/support/temp_dir.h"

namespace inspection::testing {

inline constexpr char kApiKey[] = "test-api-key-7f3a9c";
inline constexpr char kWebappUrl[] = "https://webapp.example.test";

// An in-process gateway on a free port in front of a scripted fake vendor, with one
// stub per service on a real gRPC channel.
class GatewayTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(vendor_.Start());
    StartGateway(vendor_.BaseUrl());
  }

  void StartGateway(const std::string& upstream_url,
                    std::function<void(server::GatewayServerOptions&)> tweak = nullptr) {
    gateway_.reset();
    server::GatewayServerOptions options;
    options.grpc_addr = "127.0.0.1:0";
    options.vendor.base_url = upstream_url;
    options.vendor.api_key = kApiKey;
    options.webapp_url = kWebappUrl;
    options.connect_timeout = std::chrono::milliseconds(1000);
    options.admin_port = 0;
    options.event_log_url = "sqlite:" + temp_.File(absl::StrCat("events-", ++gateways_, ".db"));
    if (tweak) tweak(options);
    auto started = server::GatewayServer::Start(std::move(options));
    ASSERT_TRUE(started.ok()) << started.status();
    gateway_ = std::move(*started);
    channel_ = grpc::CreateChannel(absl::StrCat("127.0.0.1:", gateway_->grpc_port()),
                                   grpc::InsecureChannelCredentials());
    token_ = v1::TokenService::NewStub(channel_);
    image_ = v1::ImageService::NewStub(channel_);
    damage_ = v1::DamageService::NewStub(channel_);
    inspection_ = v1::InspectionService::NewStub(channel_);
    event_config_ = v1::EventConfigService::NewStub(channel_);
  }

  void TearDown() override {
    gateway_.reset();
    vendor_.Stop();
  }

  // Answers every vendor request with `status` and `body`.
  void VendorReplies(int status, const std::string& body) {
    ScriptedResponse response;
    response.status = status;
    response.body = body;
    vendor_.RespondWith(response);
  }

  // The one request the vendor received.
  RecordedRequest OnlyRequest() {
    auto requests = vendor_.Requests();
    EXPECT_EQ(requests.size(), 1u);
    return requests.empty() ? RecordedRequest{} : requests.front();
  }

 public:
  // Shared helpers, also used outside the fixture's tests.
  static std::unique_ptr<grpc::ClientContext> Context(int timeout_ms = 5000) {
    auto context = std::make_unique<grpc::ClientContext>();
    context->set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(timeout_ms));
    return context;
  }

  template <class Message>
  static Message Parse(const std::string& text) {
    Message message;
    EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &message)) << text;
    return message;
  }

  template <class Message>
  static void ExpectProtoEq(const Message& actual, const Message& expected) {
    google::protobuf::util::MessageDifferencer differencer;
    std::string diff;
    differencer.ReportDifferencesToString(&diff);
    EXPECT_TRUE(differencer.Compare(expected, actual)) << diff;
  }

  static google::rpc::Status Details(const grpc::Status& status) {
    google::rpc::Status details;
    EXPECT_TRUE(details.ParseFromString(status.error_details()));
    return details;
  }

  static google::rpc::ErrorInfo ErrorInfoOf(const grpc::Status& status) {
    std::optional<google::rpc::ErrorInfo> info = FindStatusDetail<google::rpc::ErrorInfo>(status);
    if (!info.has_value()) ADD_FAILURE() << "no ErrorInfo in the status details";
    return info.value_or(google::rpc::ErrorInfo());
  }

  static google::rpc::BadRequest BadRequestOf(const grpc::Status& status) {
    std::optional<google::rpc::BadRequest> bad_request =
        FindStatusDetail<google::rpc::BadRequest>(status);
    if (!bad_request.has_value()) ADD_FAILURE() << "no BadRequest in the status details";
    return bad_request.value_or(google::rpc::BadRequest());
  }

  static nlohmann::json Json(const std::string& text) { return nlohmann::json::parse(text); }

  // A valid CreateToken request with the spec's placeholders for the customer's data.
  static v1::CreateTokenRequest PlaceholderTokenRequest() {
    return Parse<v1::CreateTokenRequest>(R"pb(
      options { shoot_inspect: true fast_track: false }
      trade_in { immat: "AB-123-CD" vin: "VF1AB000123456789" sending_type: SENDING_TYPE_NONE }
      customer {
        email: "<EMAIL>"
        firstname: "<FIRST_NAME>"
        lastname: "<LAST_NAME>"
        phone: "<PHONE>"
        locale: LOCALE_NL_BE
      }
      validity: 90
    )pb");
  }

 protected:
  TempDir temp_;
  int gateways_ = 0;
  FakeVendor vendor_;
  std::unique_ptr<server::GatewayServer> gateway_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::TokenService::Stub> token_;
  std::unique_ptr<v1::ImageService::Stub> image_;
  std::unique_ptr<v1::DamageService::Stub> damage_;
  std::unique_ptr<v1::InspectionService::Stub> inspection_;
  std::unique_ptr<v1::EventConfigService::Stub> event_config_;
};

}  // namespace inspection::testing

#endif  // TESTS_INTEGRATION_GATEWAY_FIXTURE_H_
