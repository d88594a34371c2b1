// gRPC's health service and server reflection are decided by the authorization policy like
// every RPC (issue 31, item 4): a caller the policy does not allow gets PERMISSION_DENIED
// with reason PERMISSION_DENIED_BY_POLICY (and the deciding deny rule), counted in
// inspection_authz_denied_total; an allowed caller, or any caller without a policy, gets
// what gRPC's own services answered. Health checks are not rate-limited per caller;
// reflection is.
#include <algorithm>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor.pb.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include "absl/strings/str_cat.h"
#include "google/rpc/error_details.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpc/reflection/v1/reflection.grpc.pb.h"
#include "grpc/reflection/v1alpha/reflection.grpc.pb.h"
#include "tests/integration/gateway_fixture.h"
#include "tests/support/gateway_binary.h"
#include "tests/support/status_details.h"

namespace inspection::testing {
namespace {

using grpc::health::v1::Health;
using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;
namespace reflection_v1 = grpc::reflection::v1;
namespace reflection_v1alpha = grpc::reflection::v1alpha;

constexpr char kReason[] = "PERMISSION_DENIED_BY_POLICY";

// Allows only a principal a plaintext caller cannot have: this caller may do nothing.
constexpr char kAllowsNothing[] = R"({
  "name": "nothing-for-anonymous",
  "allow_rules": [
    {"name": "claims", "source": {"principals": ["spiffe://corp.example/ns/claims/sa/claims-api"]}}
  ]
})";

// Allows everything but names a deny rule for health and reflection.
constexpr char kDeniesIntrospection[] = R"({
  "name": "no-introspection",
  "deny_rules": [
    {"name": "no-health-or-reflection",
     "request": {"paths": ["/grpc.health.v1.Health/*", "/grpc.reflection.*"]}}
  ],
  "allow_rules": [{"name": "anyone"}]
})";

// The README's example policy (section "Access control"), as printed.
std::string ReadmePolicy() {
  std::ifstream readme(std::string(SOURCE_DIR) + "/README.md");
  std::string text;
  bool in_section = false;
  bool in_block = false;
  for (std::string line; std::getline(readme, line);) {
    if (line.rfind("## ", 0) == 0) in_section = line == "## Access control";
    if (!in_section) continue;
    if (line == "```json") {
      in_block = true;
      continue;
    }
    if (in_block && line == "```") break;
    if (in_block) absl::StrAppend(&text, line, "\n");
  }
  return text;
}

std::chrono::system_clock::time_point Soon() {
  return std::chrono::system_clock::now() + std::chrono::seconds(10);
}

class HealthReflectionPolicyTest : public GatewayTest {
 protected:
  void SetUp() override { ASSERT_TRUE(vendor_.Start()); }

  // A gateway with reflection on, `policy` as its authorization policy ("" for none).
  void Start(const std::string& policy, security::CallerLimitsOptions limits = {},
             bool reflection = true) {
    std::string policy_file;
    if (!policy.empty()) {
      policy_file = temp_.File(absl::StrCat("policy-", ++policies_, ".json"));
      std::ofstream(policy_file) << policy;
    }
    StartGateway(vendor_.BaseUrl(), [&](server::GatewayServerOptions& options) {
      options.admin_host = "127.0.0.1";
      options.reflection = reflection;
      options.authz_policy_file = policy_file;
      options.caller_limits = limits;
    });
  }

  grpc::Status Check(const std::string& service, HealthCheckResponse* response) {
    auto stub = Health::NewStub(channel_);
    grpc::ClientContext context;
    context.set_deadline(Soon());
    HealthCheckRequest request;
    request.set_service(service);
    return stub->Check(&context, request, response);
  }

  // The first status a Watch of `service` is sent (-1 for none), and how the stream ended
  // (OK when it was still open: the test cancelled it).
  grpc::Status Watch(const std::string& service, int* first) {
    auto stub = Health::NewStub(channel_);
    grpc::ClientContext context;
    context.set_deadline(Soon());
    HealthCheckRequest request;
    request.set_service(service);
    auto reader = stub->Watch(&context, request);
    HealthCheckResponse response;
    *first = reader->Read(&response) ? static_cast<int>(response.status()) : -1;
    if (*first != -1) {
      context.TryCancel();
      reader->Finish();
      return grpc::Status::OK;
    }
    return reader->Finish();
  }

  // One reflection request on a fresh stream of API version `Api`: the answer (when there
  // was one) and the stream's status.
  template <class Api, class Request, class Response>
  grpc::Status Reflect(const Request& request, Response* response) {
    auto stub = Api::NewStub(channel_);
    grpc::ClientContext context;
    context.set_deadline(Soon());
    auto stream = stub->ServerReflectionInfo(&context);
    stream->Write(request);
    stream->WritesDone();
    bool answered = stream->Read(response);
    Response extra;
    while (stream->Read(&extra)) answered = false;  // exactly one answer expected
    grpc::Status status = stream->Finish();
    if (status.ok() && !answered) return grpc::Status(grpc::StatusCode::INTERNAL, "no answer");
    return status;
  }
  grpc::Status ReflectV1(const reflection_v1::ServerReflectionRequest& request,
                         reflection_v1::ServerReflectionResponse* response) {
    return Reflect<reflection_v1::ServerReflection>(request, response);
  }
  grpc::Status ListServicesV1(reflection_v1::ServerReflectionResponse* response) {
    reflection_v1::ServerReflectionRequest request;
    request.set_list_services("*");
    return ReflectV1(request, response);
  }
  grpc::Status SymbolV1(const std::string& symbol,
                        reflection_v1::ServerReflectionResponse* response) {
    reflection_v1::ServerReflectionRequest request;
    request.set_file_containing_symbol(symbol);
    return ReflectV1(request, response);
  }
  grpc::Status ListServicesV1Alpha(reflection_v1alpha::ServerReflectionResponse* response) {
    reflection_v1alpha::ServerReflectionRequest request;
    request.set_list_services("*");
    return Reflect<reflection_v1alpha::ServerReflection>(request, response);
  }

  double Denied(const std::string& method) {
    httplib::Client admin("127.0.0.1", gateway_->admin_port());
    auto scraped = admin.Get("/metrics");
    if (!scraped) return -2;
    const double value = PrometheusSample(
        scraped->body,
        absl::StrCat(R"(inspection_authz_denied_total{grpc_method=")", method, R"("})"));
    return value < 0 ? 0 : value;
  }

  int policies_ = 0;
};

// PERMISSION_DENIED with the policy's ErrorInfo; `deny_rule` "" when no deny rule decided.
void ExpectDeniedByPolicy(const grpc::Status& status, const std::string& deny_rule,
                          const std::string& what) {
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED)
      << what << ": " << status.error_code() << " " << status.error_message();
  const auto info = FindStatusDetail<google::rpc::ErrorInfo>(status);
  ASSERT_TRUE(info.has_value()) << what << ": no ErrorInfo";
  EXPECT_EQ(info->reason(), kReason) << what;
  const auto rule = info->metadata().find("deny_rule");
  if (deny_rule.empty()) {
    EXPECT_EQ(rule, info->metadata().end()) << what;
  } else {
    ASSERT_NE(rule, info->metadata().end()) << what;
    EXPECT_EQ(rule->second, deny_rule) << what;
  }
}

TEST_F(HealthReflectionPolicyTest, APolicyThatAllowsTheCallerNothingDeniesHealthAndReflection) {
  ASSERT_NO_FATAL_FAILURE(Start(kAllowsNothing));
  HealthCheckResponse health;
  ExpectDeniedByPolicy(Check("", &health), "", "Check");
  ExpectDeniedByPolicy(Check("inspection.v1.EventService", &health), "", "Check EventService");
  int first = 0;
  ExpectDeniedByPolicy(Watch("", &first), "", "Watch");
  EXPECT_EQ(first, -1) << "a denied watcher is sent no status";
  reflection_v1::ServerReflectionResponse v1;
  ExpectDeniedByPolicy(ListServicesV1(&v1), "", "v1 list_services");
  EXPECT_EQ(v1.list_services_response().service_size(), 0);
  ExpectDeniedByPolicy(SymbolV1("inspection.v1.TokenService", &v1), "",
                       "v1 file_containing_symbol");
  EXPECT_EQ(v1.file_descriptor_response().file_descriptor_proto_size(), 0);
  reflection_v1alpha::ServerReflectionResponse v1alpha;
  ExpectDeniedByPolicy(ListServicesV1Alpha(&v1alpha), "", "v1alpha list_services");
  EXPECT_EQ(v1alpha.list_services_response().service_size(), 0);
  // Counted like every denied RPC, by method.
  EXPECT_EQ(Denied("/grpc.health.v1.Health/Check"), 2);
  EXPECT_EQ(Denied("/grpc.health.v1.Health/Watch"), 1);
  EXPECT_EQ(Denied("/grpc.reflection.v1.ServerReflection/ServerReflectionInfo"), 2);
  EXPECT_EQ(Denied("/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"), 1);
  // A refused Watch or reflection stream holds no stream slot.
  EXPECT_EQ(gateway_->open_streams(), 0u);
}

TEST_F(HealthReflectionPolicyTest, TheDenyRuleThatDecidedIsNamedInTheRefusal) {
  ASSERT_NO_FATAL_FAILURE(Start(kDeniesIntrospection));
  HealthCheckResponse health;
  ExpectDeniedByPolicy(Check("", &health), "no-health-or-reflection", "Check");
  int first = 0;
  ExpectDeniedByPolicy(Watch("", &first), "no-health-or-reflection", "Watch");
  reflection_v1::ServerReflectionResponse v1;
  ExpectDeniedByPolicy(SymbolV1("inspection.v1.TokenService", &v1), "no-health-or-reflection",
                       "v1 file_containing_symbol");
}

TEST_F(HealthReflectionPolicyTest, TheReadmeProbesRuleLetsAnyoneCheckHealthButNotReflect) {
  const std::string policy = ReadmePolicy();
  ASSERT_NE(policy.find(R"("name": "probes")"), std::string::npos) << policy;
  ASSERT_NO_FATAL_FAILURE(Start(policy));
  HealthCheckResponse health;
  for (const std::string service : {"", "inspection.v1.EventService"}) {
    const grpc::Status status = Check(service, &health);
    ASSERT_TRUE(status.ok()) << service << ": " << status.error_message();
    EXPECT_EQ(health.status(), HealthCheckResponse::SERVING) << service;
  }
  int first = 0;
  EXPECT_TRUE(Watch("inspection.v1.TokenService", &first).ok());
  EXPECT_EQ(first, HealthCheckResponse::SERVING);
  // No rule lets an anonymous caller describe the API, nor call it.
  reflection_v1::ServerReflectionResponse v1;
  ExpectDeniedByPolicy(ListServicesV1(&v1), "", "v1 list_services");
  ExpectDeniedByPolicy(SymbolV1("inspection.v1.TokenService", &v1), "",
                       "v1 file_containing_symbol");
  reflection_v1alpha::ServerReflectionResponse v1alpha;
  ExpectDeniedByPolicy(ListServicesV1Alpha(&v1alpha), "", "v1alpha list_services");
  grpc::ClientContext context;
  context.set_deadline(Soon());
  v1::GetTokenStatusRequest request;
  request.set_uid("u1");
  v1::GetTokenStatusResponse response;
  ExpectDeniedByPolicy(token_->GetTokenStatus(&context, request, &response), "", "GetTokenStatus");
  EXPECT_EQ(Denied("/grpc.health.v1.Health/Check"), 0);
  EXPECT_EQ(vendor_.RequestCount(), 0u);
}

TEST_F(HealthReflectionPolicyTest, WithoutAPolicyHealthAnswersAsGrpcsOwnService) {
  ASSERT_NO_FATAL_FAILURE(Start(""));
  HealthCheckResponse health;
  ASSERT_TRUE(Check("", &health).ok());
  EXPECT_EQ(health.status(), HealthCheckResponse::SERVING);
  ASSERT_TRUE(Check("inspection.v1.DamageService", &health).ok());
  EXPECT_EQ(health.status(), HealthCheckResponse::SERVING);
  // A service never set: NOT_FOUND for Check, SERVICE_UNKNOWN for Watch.
  EXPECT_EQ(Check("no.such.Service", &health).error_code(), grpc::StatusCode::NOT_FOUND);
  int first = 0;
  EXPECT_TRUE(Watch("no.such.Service", &first).ok());
  EXPECT_EQ(first, HealthCheckResponse::SERVICE_UNKNOWN);
  EXPECT_TRUE(Watch("", &first).ok());
  EXPECT_EQ(first, HealthCheckResponse::SERVING);
}

TEST_F(HealthReflectionPolicyTest, WithoutAPolicyReflectionDescribesEveryService) {
  ASSERT_NO_FATAL_FAILURE(Start(""));
  reflection_v1::ServerReflectionResponse listed;
  ASSERT_TRUE(ListServicesV1(&listed).ok());
  std::set<std::string> names;
  for (const auto& service : listed.list_services_response().service()) {
    names.insert(service.name());
  }
  EXPECT_EQ(names,
            (std::set<std::string>{"inspection.v1.TokenService", "inspection.v1.ImageService",
                                   "inspection.v1.DamageService", "inspection.v1.InspectionService",
                                   "inspection.v1.EventConfigService", "inspection.v1.EventService",
                                   "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection",
                                   "grpc.reflection.v1alpha.ServerReflection"}));
  EXPECT_EQ(listed.original_request().list_services(), "*");
  reflection_v1alpha::ServerReflectionResponse listed_alpha;
  ASSERT_TRUE(ListServicesV1Alpha(&listed_alpha).ok());
  EXPECT_EQ(listed_alpha.list_services_response().service_size(), static_cast<int>(names.size()));

  // Every file a symbol needs comes with it: a fresh pool builds the service from the
  // answer alone.
  for (const std::string symbol : {"inspection.v1.TokenService", "grpc.health.v1.Health",
                                   "inspection.v1.EventService.Subscribe"}) {
    reflection_v1::ServerReflectionResponse file;
    ASSERT_TRUE(SymbolV1(symbol, &file).ok());
    ASSERT_FALSE(file.has_error_response())
        << symbol << ": " << file.error_response().error_message();
    std::vector<google::protobuf::FileDescriptorProto> protos;
    for (const std::string& bytes : file.file_descriptor_response().file_descriptor_proto()) {
      protos.emplace_back();
      ASSERT_TRUE(protos.back().ParseFromString(bytes));
    }
    ASSERT_FALSE(protos.empty());
    // The answer's order is the server's (the file first): build each file once the files
    // it imports are built, as a client does; every import must be in the answer.
    google::protobuf::DescriptorPool pool;
    std::set<std::string> built;
    for (bool progress = true; progress && built.size() < protos.size();) {
      progress = false;
      for (const auto& proto : protos) {
        if (built.count(proto.name()) != 0) continue;
        bool ready = true;
        for (const std::string& import : proto.dependency()) ready &= built.count(import) != 0;
        if (!ready) continue;
        ASSERT_NE(pool.BuildFile(proto), nullptr) << symbol << ": " << proto.name();
        built.insert(proto.name());
        progress = true;
      }
    }
    ASSERT_EQ(built.size(), protos.size()) << symbol << ": an import is missing from the answer";
    EXPECT_NE(pool.FindFileContainingSymbol(symbol), nullptr) << symbol;
    EXPECT_EQ(pool.FindFileContainingSymbol(symbol)->name(), protos.front().name()) << symbol;
  }

  reflection_v1::ServerReflectionRequest request;
  reflection_v1::ServerReflectionResponse answer;
  request.set_host("gateway.example.test");
  request.set_file_by_filename("grpc/health/v1/health.proto");
  ASSERT_TRUE(ReflectV1(request, &answer).ok());
  EXPECT_EQ(answer.valid_host(), "gateway.example.test");
  EXPECT_EQ(answer.file_descriptor_response().file_descriptor_proto_size(), 1);
  // What the pool does not have: NOT_FOUND as an error response; the stream itself is OK.
  for (const std::string name : {"no/such/file.proto"}) {
    request.set_file_by_filename(name);
    ASSERT_TRUE(ReflectV1(request, &answer).ok());
    EXPECT_EQ(answer.error_response().error_code(), static_cast<int>(grpc::StatusCode::NOT_FOUND));
  }
  ASSERT_TRUE(SymbolV1("no.such.Symbol", &answer).ok());
  EXPECT_EQ(answer.error_response().error_code(), static_cast<int>(grpc::StatusCode::NOT_FOUND));

  // Extensions: the vendor options of inspection.v1 extend google.protobuf.FieldOptions.
  request.set_all_extension_numbers_of_type("google.protobuf.FieldOptions");
  ASSERT_TRUE(ReflectV1(request, &answer).ok());
  EXPECT_EQ(answer.all_extension_numbers_response().base_type_name(),
            "google.protobuf.FieldOptions");
  const auto& numbers = answer.all_extension_numbers_response().extension_number();
  EXPECT_NE(std::find(numbers.begin(), numbers.end(), 51010), numbers.end());
  request.mutable_file_containing_extension()->set_containing_type("google.protobuf.FieldOptions");
  request.mutable_file_containing_extension()->set_extension_number(51010);
  ASSERT_TRUE(ReflectV1(request, &answer).ok());
  ASSERT_GE(answer.file_descriptor_response().file_descriptor_proto_size(), 2);
  google::protobuf::FileDescriptorProto first;
  ASSERT_TRUE(first.ParseFromString(answer.file_descriptor_response().file_descriptor_proto(0)));
  EXPECT_EQ(first.name(), "inspection/v1/vendor_options.proto");
  request.mutable_file_containing_extension()->set_extension_number(1);
  ASSERT_TRUE(ReflectV1(request, &answer).ok());
  EXPECT_EQ(answer.error_response().error_code(), static_cast<int>(grpc::StatusCode::NOT_FOUND));
  request.set_all_extension_numbers_of_type("no.such.Type");
  ASSERT_TRUE(ReflectV1(request, &answer).ok());
  EXPECT_EQ(answer.error_response().error_code(), static_cast<int>(grpc::StatusCode::NOT_FOUND));
}

TEST_F(HealthReflectionPolicyTest, ReflectionOffIsNotServed) {
  ASSERT_NO_FATAL_FAILURE(Start("", {}, /*reflection=*/false));
  reflection_v1::ServerReflectionResponse v1;
  EXPECT_EQ(ListServicesV1(&v1).error_code(), grpc::StatusCode::UNIMPLEMENTED);
  reflection_v1alpha::ServerReflectionResponse v1alpha;
  EXPECT_EQ(ListServicesV1Alpha(&v1alpha).error_code(), grpc::StatusCode::UNIMPLEMENTED);
  HealthCheckResponse health;
  EXPECT_TRUE(Check("", &health).ok()) << "health is served either way";
}

// Probes are not throttled per caller: a caller over its rate still gets its health
// answered; reflection streams are rate-limited like any RPC.
TEST_F(HealthReflectionPolicyTest, HealthChecksAreNotRateLimitedButReflectionIs) {
  security::CallerLimitsOptions limits;
  limits.requests_per_second = 0.01;  // one call, then one per 100 s
  limits.burst = 1;
  ASSERT_NO_FATAL_FAILURE(Start("", limits));
  reflection_v1::ServerReflectionResponse v1;
  ASSERT_TRUE(ListServicesV1(&v1).ok());  // the one call of the burst
  const grpc::Status limited = ListServicesV1(&v1);
  EXPECT_EQ(limited.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  const auto info = FindStatusDetail<google::rpc::ErrorInfo>(limited);
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->reason(), "CALLER_RATE_LIMITED");
  HealthCheckResponse health;
  for (int i = 0; i < 20; ++i) {
    const grpc::Status status = Check("", &health);
    ASSERT_TRUE(status.ok()) << i << ": " << status.error_message();
  }
  int first = 0;
  EXPECT_TRUE(Watch("", &first).ok());
  EXPECT_EQ(first, HealthCheckResponse::SERVING);
}

}  // namespace
}  // namespace inspection::testing
