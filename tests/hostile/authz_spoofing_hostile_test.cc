// The authorization policy against callers that try to slip past it, through the real
// inspection-gateway process with mTLS (certificates made at test time with the openssl
// CLI) in front of a fake vendor (issue 31, items 2 and 3):
// - metadata `x-vendor-account` sent twice ("default" then "preprod") to a caller allowed
//   only with "preprod": the gateway used to let the policy see "preprod" and run the call
//   on the default account. It is refused as INVALID_ARGUMENT (before the policy is asked),
//   on a unary RPC and on a stream, and nothing reaches the vendor;
// - a certificate whose subject CN is another caller's SPIFFE ID: the CN is not a
//   principal (gRFC A43 matches URI SANs, DNS SANs, then the whole subject), so it does not
//   get that caller's rule.
#include <chrono>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "google/rpc/error_details.pb.h"
#include "inspection/v1/event.grpc.pb.h"
#include "inspection/v1/event_config.grpc.pb.h"
#include "tests/support/fake_vendor.h"
#include "tests/support/gateway_binary.h"
#include "tests/support/status_details.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_pki.h"

namespace inspection::testing {
namespace {

constexpr std::chrono::milliseconds kDeadline{30000};

constexpr char kPolicy[] = R"({
  "name": "hostile",
  "allow_rules": [
    {"name": "claims-api", "source": {"principals": ["spiffe://test/claims-api"]}},
    {"name": "qa-uses-preprod-only",
     "source": {"principals": ["spiffe://test/ns/qa/*"]},
     "request": {"headers": [{"key": "x-vendor-account", "values": ["preprod"]}]}}
  ]
})";

class AuthzSpoofingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(pki_.ok()) << pki_.error();
    ASSERT_TRUE(pki_.Issue("server", "gateway", "DNS:localhost,IP:127.0.0.1")) << pki_.error();
    ASSERT_TRUE(pki_.Issue("qa", "qa-tests", "URI:spiffe://test/ns/qa/sa/tests")) << pki_.error();
    ASSERT_TRUE(pki_.Issue("claims", "claims-api", "URI:spiffe://test/claims-api")) << pki_.error();
    // openssl -subj: "\/" is a "/" inside the value.
    ASSERT_TRUE(pki_.Issue("spoof", R"(spiffe:\/\/test\/claims-api)", "URI:spiffe://test/other"))
        << pki_.error();
    ASSERT_TRUE(pki_.Issue("cn-only", R"(spiffe:\/\/test\/claims-api)", "email:x@test.example"))
        << pki_.error();
    std::ofstream(temp_.File("policy.json")) << kPolicy;
    std::ofstream(temp_.File("preprod.key")) << "hostile-preprod-vendor-key";
    ASSERT_TRUE(vendor_.Start());
    ScriptedResponse reply;
    reply.body = R"({"webhookHeaderKey": null, "webhookUrl": null, "webhookUrlV2": null})";
    vendor_.RespondWith(reply);
    std::vector<std::string> argv =
        LoopbackGatewayArgv(GATEWAY_BINARY, vendor_.BaseUrl(), temp_.File("events.db"));
    for (std::string flag : {
             "--grpc-tls-cert-file=" + pki_.Path("server.pem"),
             "--grpc-tls-key-file=" + pki_.Path("server.key"),
             "--grpc-tls-client-ca-file=" + pki_.Path("ca.pem"),
             "--grpc-authz-policy-file=" + temp_.File("policy.json"),
             absl::StrCat(R"(--accounts={"preprod": {"upstream_url": ")", vendor_.BaseUrl(),
                          R"(", "api_key_file": ")", temp_.File("preprod.key"), R"("}})"),
         }) {
      argv.push_back(flag);
    }
    gateway_ = std::make_unique<Subprocess>(
        argv, std::vector<std::string>{"INSPECTION_API_KEY=hostile-default-vendor-key"});
    port_ = WaitUntilServing(*gateway_, kDeadline).grpc;
    ASSERT_GT(port_, 0) << gateway_->output();
  }

  // A new mTLS connection presenting the certificate `client`.
  std::shared_ptr<grpc::Channel> Channel(const std::string& client) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = pki_.Read("ca.pem");
    ssl.pem_private_key = pki_.Read(client + ".key");
    ssl.pem_cert_chain = pki_.Read(client + ".pem");
    grpc::ChannelArguments args;
    args.SetSslTargetNameOverride("localhost");
    args.SetInt("grpc.use_local_subchannel_pool", 1);
    return grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", port_), grpc::SslCredentials(ssl),
                                     args);
  }

  // GetWebhookConfig (a unary read that calls the vendor) as `client`, with one
  // `x-vendor-account` entry per element of `accounts`.
  grpc::Status GetWebhookConfig(const std::string& client,
                                const std::vector<std::string>& accounts) {
    auto stub = v1::EventConfigService::NewStub(Channel(client));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + kDeadline);
    context.AddMetadata("cache-control", "no-cache");
    for (const std::string& account : accounts) context.AddMetadata("x-vendor-account", account);
    v1::GetWebhookConfigResponse response;
    return stub->GetWebhookConfig(&context, {}, &response);
  }

  // EventService/Subscribe as `client`: the status it ends with (it must end at once).
  grpc::Status Subscribe(const std::string& client, const std::vector<std::string>& accounts) {
    auto stub = v1::EventService::NewStub(Channel(client));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + kDeadline);
    for (const std::string& account : accounts) context.AddMetadata("x-vendor-account", account);
    auto stream = stub->Subscribe(&context, v1::SubscribeRequest());
    v1::SubscribeResponse ignored;
    EXPECT_FALSE(stream->Read(&ignored));
    return stream->Finish();
  }

  static void ExpectRepeatedAccountRefusal(const grpc::Status& status) {
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
    const auto info = FindStatusDetail<google::rpc::ErrorInfo>(status);
    ASSERT_TRUE(info.has_value());
    EXPECT_EQ(info->reason(), "INVALID_REQUEST");
    const auto bad_request = FindStatusDetail<google::rpc::BadRequest>(status);
    ASSERT_TRUE(bad_request.has_value());
    ASSERT_EQ(bad_request->field_violations_size(), 1);
    EXPECT_EQ(bad_request->field_violations(0).field(), "x-vendor-account");
    EXPECT_EQ(bad_request->field_violations(0).description(),
              "metadata sent 2 times; send it once");
  }

  TempDir temp_;
  TestPki pki_{temp_.path()};
  FakeVendor vendor_;
  std::unique_ptr<Subprocess> gateway_;
  int port_ = 0;
};

TEST_F(AuthzSpoofingTest, ARepeatedVendorAccountIsRefusedOnUnaryCallsAndStreams) {
  // The policy as written: qa with preprod, not with the default account.
  const grpc::Status preprod = GetWebhookConfig("qa", {"preprod"});
  ASSERT_TRUE(preprod.ok()) << preprod.error_message() << gateway_->output();
  ASSERT_EQ(vendor_.RequestCount(), 1u);
  EXPECT_EQ(GetWebhookConfig("qa", {"default"}).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(Subscribe("qa", {"default"}).error_code(), grpc::StatusCode::PERMISSION_DENIED);

  // Issue 31 item 2: "default" then "preprod". gRPC's engine would see "default,preprod"
  // and deny; the gateway refuses the repetition itself, before the policy, naming it.
  ExpectRepeatedAccountRefusal(GetWebhookConfig("qa", {"default", "preprod"}));
  ExpectRepeatedAccountRefusal(GetWebhookConfig("qa", {"preprod", "preprod"}));
  ExpectRepeatedAccountRefusal(Subscribe("qa", {"default", "preprod"}));
  // A caller the policy would deny anyway gets the same answer: the refusal comes first.
  ExpectRepeatedAccountRefusal(GetWebhookConfig("spoof", {"default", "preprod"}));
  // None of them reached the vendor.
  EXPECT_EQ(vendor_.RequestCount(), 1u);
}

TEST_F(AuthzSpoofingTest, ACommonNameIsNotAPrincipal) {
  // Issue 31 item 3: CN spiffe://test/claims-api, URI SAN spiffe://test/other.
  const grpc::Status spoofed = GetWebhookConfig("spoof", {});
  EXPECT_EQ(spoofed.error_code(), grpc::StatusCode::PERMISSION_DENIED) << spoofed.error_message();
  const auto info = FindStatusDetail<google::rpc::ErrorInfo>(spoofed);
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->reason(), "PERMISSION_DENIED_BY_POLICY");
  // Nor without any URI or DNS SAN: the subject is "CN=spiffe://test/claims-api".
  EXPECT_EQ(GetWebhookConfig("cn-only", {}).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(vendor_.RequestCount(), 0u);
  // The certificate that carries the identity as its URI SAN gets the rule.
  const grpc::Status claims = GetWebhookConfig("claims", {});
  EXPECT_TRUE(claims.ok()) << claims.error_message();
  EXPECT_EQ(vendor_.RequestCount(), 1u);
}

}  // namespace
}  // namespace inspection::testing
