// The real inspection-gateway binary, started as a process: concurrency within a thread
// budget, health, reflection (through grpcurl), configuration errors, SIGTERM.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <fstream>
#include <mutex>

#include <gmock/gmock.h>
#include <grpcpp/generic/generic_stub.h>

#include "absl/strings/str_split.h"
#include "gateway/version/version.h"
#include "tests/integration/gateway_fixture.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_pki.h"

namespace inspection::testing {
namespace {

// A gateway process on free ports in front of a fake vendor.
class GatewayProcess {
 public:
  explicit GatewayProcess(const std::string& upstream_url, std::vector<std::string> extra = {},
                          std::vector<std::string> env = {}) {
    std::vector<std::string> argv = {GATEWAY_BINARY,
                                     "--upstream-url=" + upstream_url,
                                     std::string("--webapp-url=") + kWebappUrl,
                                     "--grpc-addr=127.0.0.1:0",
                                     "--webhook-addr=127.0.0.1:0",
                                     "--admin-addr=127.0.0.1:0",
                                     "--event-log=sqlite:" + temp_.File("events.db")};
    for (auto& arg : extra) argv.push_back(arg);
    env.push_back(std::string("INSPECTION_API_KEY=") + kApiKey);
    process_ = std::make_unique<Subprocess>(argv, std::move(env));
    std::string line = process_->WaitForLine(
        [](const std::string& l) { return l.find("inspection-gateway serving") != l.npos; },
        std::chrono::seconds(30));
    if (!line.empty()) {
      auto json = nlohmann::json::parse(line, nullptr, false);
      if (!json.is_discarded() && json.contains("grpc_port")) port_ = json["grpc_port"];
    }
  }
  int port() const { return port_; }
  const TempDir& temp() const { return temp_; }
  Subprocess& process() { return *process_; }
  std::string target() const { return absl::StrCat("127.0.0.1:", port_); }

 private:
  TempDir temp_;  // before process_: removed after the process stopped
  std::unique_ptr<Subprocess> process_;
  int port_ = 0;
};

TEST(GatewayProcessTest, FiveHundredSlowVendorCallsStayWithinSixtyFourThreads) {
  FakeVendorOptions vendor_options;
  vendor_options.threads = 600;  // the fake must hold 500 connections at once
  FakeVendor vendor(vendor_options);
  ASSERT_TRUE(vendor.Start());
  ScriptedResponse held;
  held.kind = ScriptedResponse::Kind::kHold;
  held.body = R"({"id": "q", "status": 200, "data": []})";
  vendor.RespondWith(held);

  GatewayProcess gateway(vendor.BaseUrl());
  ASSERT_GT(gateway.port(), 0) << gateway.process().output();
  auto channel = grpc::CreateChannel(gateway.target(), grpc::InsecureChannelCredentials());
  auto stub = v1::ImageService::NewStub(channel);

  constexpr int kCalls = 500;
  struct Call {
    grpc::ClientContext context;
    v1::AssessQualityRequest request;
    v1::AssessQualityResponse response;
  };
  std::vector<std::unique_ptr<Call>> calls;
  std::mutex mu;
  std::condition_variable cv;
  int done = 0;
  int ok = 0;
  for (int i = 0; i < kCalls; ++i) {
    auto call = std::make_unique<Call>();
    call->context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    call->request.set_url(absl::StrCat("https://img.example.test/", i, ".jpg"));
    stub->async()->AssessQuality(&call->context, &call->request, &call->response,
                                 [&](grpc::Status status) {
                                   std::lock_guard<std::mutex> lock(mu);
                                   ++done;
                                   if (status.ok()) ++ok;
                                   cv.notify_all();
                                 });
    calls.push_back(std::move(call));
  }
  // Every call is in flight at the vendor at the same time...
  ASSERT_TRUE(vendor.WaitForHeld(kCalls, std::chrono::seconds(60)))
      << "held: " << vendor.HeldCount();
  // ...and the gateway serves them all without a thread per call.
  const int threads = gateway.process().ThreadCount();
  EXPECT_GT(threads, 0);
  EXPECT_LE(threads, 64) << "gateway threads with " << kCalls << " vendor calls in flight";
  ::testing::Test::RecordProperty("gateway_threads_with_500_in_flight", threads);
  std::cout << "gateway threads with " << kCalls << " vendor calls in flight: " << threads << "\n";

  vendor.ReleaseHeld();
  std::unique_lock<std::mutex> lock(mu);
  ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(60), [&] { return done == kCalls; }));
  EXPECT_EQ(ok, kCalls);
  lock.unlock();
  vendor.Stop();
}

TEST(GatewayProcessTest, VersionPrintsTheBuildAndExits) {
  Subprocess process({GATEWAY_BINARY, "--version"});
  const std::string output = process.WaitForLine(
      [](const std::string& line) { return line.rfind("inspection-gateway ", 0) == 0; },
      std::chrono::seconds(30));
  EXPECT_EQ(process.Wait(std::chrono::seconds(30)), 0);
  EXPECT_THAT(output, ::testing::StartsWith(version::VersionText()));
  EXPECT_THAT(output, ::testing::StartsWith(
                          absl::StrCat("inspection-gateway ", version::Version(), " (revision ")));
  EXPECT_THAT(output, ::testing::HasSubstr("gRPC " + version::GrpcVersion()));
  EXPECT_THAT(output, ::testing::HasSubstr("protobuf " + version::ProtobufVersion()));
  EXPECT_THAT(std::string(version::Version()), ::testing::MatchesRegex("[0-9]+\\.[0-9]+\\.[0-9]+"));
}

// The start-up line names the vendor HTTP client and why; calls go through either client.
TEST(GatewayProcessTest, TheVendorHttpClientIsChosenLoggedAndCarriesCalls) {
  for (const char* name : {"http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"}) {
    const char* value = std::getenv(name);
    if (value != nullptr && value[0] != '\0') GTEST_SKIP() << name << " is set for the tests";
  }
  FakeVendor vendor;
  ASSERT_TRUE(vendor.Start());
  ScriptedResponse reply;
  reply.body = R"({"id": "q", "status": 200, "data": []})";
  vendor.RespondWith(reply);
  struct Case {
    std::vector<std::string> flags;
    std::vector<std::string> env;
    std::string client;
    std::string reason;
  };
  const std::vector<Case> cases = {
      {{}, {}, "beast", "auto: every vendor URL is http:// and no proxy is set"},
      {{"--upstream-http-client=curl"}, {}, "curl", "upstream.http_client is curl"},
      {{"--upstream-http-client=beast"}, {}, "beast", "upstream.http_client is beast"},
      // A proxy the calls must go through: auto leaves it to libcurl, which honours it.
      {{}, {"all_proxy=http://127.0.0.1:9"}, "curl", "auto: all_proxy is set (a proxy)"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.client + " / " + c.reason);
    GatewayProcess gateway(vendor.BaseUrl(), c.flags, c.env);
    ASSERT_GT(gateway.port(), 0) << gateway.process().output();
    nlohmann::json logged;
    for (absl::string_view line : absl::StrSplit(gateway.process().output(), '\n')) {
      if (line.find("\"vendor HTTP client\"") != absl::string_view::npos) {
        logged = nlohmann::json::parse(line.begin(), line.end(), nullptr, false);
      }
    }
    ASSERT_TRUE(logged.is_object()) << gateway.process().output();
    EXPECT_EQ(logged.value("client", ""), c.client);
    EXPECT_EQ(logged.value("reason", ""), c.reason);
    if (!c.env.empty()) continue;  // the proxy at 127.0.0.1:9 does not exist

    auto stub = v1::ImageService::NewStub(
        grpc::CreateChannel(gateway.target(), grpc::InsecureChannelCredentials()));
    const size_t before = vendor.RequestCount();
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    v1::AssessQualityRequest request;
    request.set_url("https://img.example.test/1.jpg");
    v1::AssessQualityResponse response;
    const grpc::Status status = stub->AssessQuality(&context, request, &response);
    EXPECT_TRUE(status.ok()) << status.error_code() << " " << status.error_message();
    EXPECT_EQ(vendor.RequestCount(), before + 1);
  }
}

TEST(GatewayProcessTest, HealthServingAndSigtermStopsCleanly) {
  FakeVendor vendor;
  ASSERT_TRUE(vendor.Start());
  GatewayProcess gateway(vendor.BaseUrl());
  ASSERT_GT(gateway.port(), 0) << gateway.process().output();

  // grpc.health.v1.Health/Check with an empty HealthCheckRequest (service ""): the
  // answer is HealthCheckResponse{status: SERVING = 1}, bytes 08 01.
  auto channel = grpc::CreateChannel(gateway.target(), grpc::InsecureChannelCredentials());
  grpc::GenericStub generic(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  grpc::ByteBuffer request, response;
  grpc::Slice empty("", 0);
  request = grpc::ByteBuffer(&empty, 1);
  std::mutex mu;
  std::condition_variable cv;
  bool finished = false;
  grpc::Status status;
  generic.UnaryCall(&context, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request,
                    &response, [&](grpc::Status s) {
                      std::lock_guard<std::mutex> lock(mu);
                      status = s;
                      finished = true;
                      cv.notify_all();
                    });
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(10), [&] { return finished; }));
  }
  ASSERT_TRUE(status.ok()) << status.error_message();
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(response.Dump(&slices).ok());
  std::string bytes;
  for (auto& slice : slices)
    bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  EXPECT_EQ(bytes, std::string("\x08\x01", 2));

  EXPECT_EQ(gateway.process().Stop(SIGTERM, std::chrono::seconds(20)), 0)
      << gateway.process().output();
  EXPECT_NE(gateway.process().output().find("shutting down"), std::string::npos);
}

TEST(GatewayProcessTest, ReflectionListsEveryServiceThroughGrpcurl) {
  const char* grpcurl = std::getenv("GRPCURL");
  ASSERT_NE(grpcurl, nullptr) << "GRPCURL must name the grpcurl binary (make test sets it)";
  FakeVendor vendor;
  ASSERT_TRUE(vendor.Start());
  GatewayProcess gateway(vendor.BaseUrl(), {"--grpc-reflection=on"});
  ASSERT_GT(gateway.port(), 0) << gateway.process().output();
  Subprocess list({grpcurl, "-plaintext", gateway.target(), "list"});
  ASSERT_EQ(list.Wait(std::chrono::seconds(30)), 0) << list.output();
  for (const char* service : {"inspection.v1.TokenService", "inspection.v1.ImageService",
                              "inspection.v1.DamageService", "inspection.v1.InspectionService",
                              "inspection.v1.EventConfigService", "grpc.health.v1.Health"}) {
    EXPECT_NE(list.output().find(service), std::string::npos) << service << "\n" << list.output();
  }
  // Reflection also describes the health service, so the plain grpcurl health check (the
  // README's and NOTES.txt's) works: the server and each service answer SERVING.
  for (const char* service : {"", "inspection.v1.TokenService", "inspection.v1.EventService"}) {
    Subprocess check({grpcurl, "-plaintext", "-d",
                      absl::StrCat(R"({"service": ")", service, R"("})"), gateway.target(),
                      "grpc.health.v1.Health/Check"});
    ASSERT_EQ(check.Wait(std::chrono::seconds(30)), 0) << service << ": " << check.output();
    EXPECT_NE(check.output().find(R"("status": "SERVING")"), std::string::npos)
        << service << ": " << check.output();
  }
  // describe: each file comes with what it imports.
  Subprocess token(
      {grpcurl, "-plaintext", gateway.target(), "describe", "inspection.v1.TokenService"});
  ASSERT_EQ(token.Wait(std::chrono::seconds(30)), 0) << token.output();
  EXPECT_NE(token.output().find("rpc CreateToken ( .inspection.v1.CreateTokenRequest )"),
            std::string::npos)
      << token.output();
  Subprocess message(
      {grpcurl, "-plaintext", gateway.target(), "describe", "inspection.v1.CreateTokenRequest"});
  ASSERT_EQ(message.Wait(std::chrono::seconds(30)), 0) << message.output();
  EXPECT_NE(message.output().find("is a message"), std::string::npos) << message.output();
  Subprocess health({grpcurl, "-plaintext", gateway.target(), "describe", "grpc.health.v1.Health"});
  ASSERT_EQ(health.Wait(std::chrono::seconds(30)), 0) << health.output();
  EXPECT_NE(health.output().find("rpc Watch"), std::string::npos) << health.output();
}

// Under an authorization policy whose only rule is the README's "probes", grpcurl may ask
// health (given the proto, since reflection is refused to it) but not list the services.
TEST(GatewayProcessTest, GrpcurlUnderAProbesOnlyPolicyChecksHealthButCannotList) {
  const char* grpcurl = std::getenv("GRPCURL");
  ASSERT_NE(grpcurl, nullptr) << "GRPCURL must name the grpcurl binary (make test sets it)";
  TempDir dir;
  const std::string policy = dir.File("policy.json");
  std::ofstream(policy) << R"({"name": "probes-only", "allow_rules": [
      {"name": "probes", "request": {"paths": ["/grpc.health.v1.Health/*"]}}]})";
  FakeVendor vendor;
  ASSERT_TRUE(vendor.Start());
  GatewayProcess gateway(vendor.BaseUrl(),
                         {"--grpc-reflection=on", "--grpc-authz-policy-file=" + policy});
  ASSERT_GT(gateway.port(), 0) << gateway.process().output();
  Subprocess list({grpcurl, "-plaintext", gateway.target(), "list"});
  EXPECT_NE(list.Wait(std::chrono::seconds(30)), 0) << list.output();
  EXPECT_NE(list.output().find("PermissionDenied"), std::string::npos) << list.output();
  EXPECT_EQ(list.output().find("inspection.v1.TokenService"), std::string::npos) << list.output();
  Subprocess check({grpcurl, "-plaintext", "-import-path", GRPC_PROTO_DIR, "-proto",
                    "grpc/health/v1/health.proto", "-d", "{}", gateway.target(),
                    "grpc.health.v1.Health/Check"});
  ASSERT_EQ(check.Wait(std::chrono::seconds(30)), 0) << check.output();
  EXPECT_NE(check.output().find(R"("status": "SERVING")"), std::string::npos) << check.output();
}

// grpc.reflection defaults to off outside the sandbox: a production gateway does not hand
// its API description to whoever can reach the port.
TEST(GatewayProcessTest, ReflectionIsOffByDefaultOutsideTheSandbox) {
  const char* grpcurl = std::getenv("GRPCURL");
  ASSERT_NE(grpcurl, nullptr) << "GRPCURL must name the grpcurl binary (make test sets it)";
  FakeVendor vendor;
  ASSERT_TRUE(vendor.Start());
  GatewayProcess gateway(vendor.BaseUrl());
  ASSERT_GT(gateway.port(), 0) << gateway.process().output();
  Subprocess list({grpcurl, "-plaintext", gateway.target(), "list"});
  EXPECT_NE(list.Wait(std::chrono::seconds(30)), 0) << list.output();
  EXPECT_NE(list.output().find("does not support the reflection API"), std::string::npos)
      << list.output();
}

// The real binary over mTLS, with grpcurl as the client. (The warning for a plaintext
// listener on a non-loopback address is decided by settings::IsLoopbackHostPort, tested in
// config_tests: binding a real non-loopback address has no place in a hermetic test.)
TEST(GatewayProcessTest, GrpcurlOverMtlsAndNothingWithoutAClientCertificate) {
  const char* grpcurl = std::getenv("GRPCURL");
  ASSERT_NE(grpcurl, nullptr) << "GRPCURL must name the grpcurl binary (make test sets it)";
  TempDir certs;
  TestPki pki(certs.path());
  ASSERT_TRUE(pki.ok()) << pki.error();
  ASSERT_TRUE(pki.Issue("server", "gateway", "DNS:localhost,IP:127.0.0.1")) << pki.error();
  ASSERT_TRUE(pki.Issue("client", "client", "URI:spiffe://test/client")) << pki.error();
  FakeVendor vendor;
  ASSERT_TRUE(vendor.Start());
  GatewayProcess gateway(vendor.BaseUrl(),
                         {"--grpc-reflection=on", "--grpc-tls-cert-file=" + pki.Path("server.pem"),
                          "--grpc-tls-key-file=" + pki.Path("server.key"),
                          "--grpc-tls-client-ca-file=" + pki.Path("ca.pem")});
  ASSERT_GT(gateway.port(), 0) << gateway.process().output();
  Subprocess with_cert({grpcurl, "-cacert", pki.Path("ca.pem"), "-cert", pki.Path("client.pem"),
                        "-key", pki.Path("client.key"), "-authority", "localhost", gateway.target(),
                        "list"});
  ASSERT_EQ(with_cert.Wait(std::chrono::seconds(30)), 0) << with_cert.output();
  EXPECT_NE(with_cert.output().find("inspection.v1.EventConfigService"), std::string::npos);
  // Refused at the handshake (bounded, so the test does not wait out grpcurl's default).
  Subprocess without_cert({grpcurl, "-connect-timeout", "3", "-cacert", pki.Path("ca.pem"),
                           "-authority", "localhost", gateway.target(), "list"});
  EXPECT_NE(without_cert.Wait(std::chrono::seconds(30)), 0) << without_cert.output();
  Subprocess plaintext({grpcurl, "-connect-timeout", "3", "-plaintext", gateway.target(), "list"});
  EXPECT_NE(plaintext.Wait(std::chrono::seconds(30)), 0) << plaintext.output();
  // TLS on: no warning. The key file's content is nowhere in the output.
  EXPECT_EQ(gateway.process().output().find("plaintext on a non-loopback"), std::string::npos);
  // The default answer limit fits the default budget.
  EXPECT_EQ(gateway.process().output().find("more than one answer can hold"), std::string::npos);
  EXPECT_EQ(gateway.process().output().find("PRIVATE KEY"), std::string::npos);
}

TEST(GatewayProcessTest, GrpcurlCallReachesTheVendor) {
  const char* grpcurl = std::getenv("GRPCURL");
  ASSERT_NE(grpcurl, nullptr) << "GRPCURL must name the grpcurl binary (make test sets it)";
  FakeVendor vendor;
  ASSERT_TRUE(vendor.Start());
  ScriptedResponse reply;
  reply.body = R"({"status": "send"})";
  vendor.RespondWith(reply);
  GatewayProcess gateway(vendor.BaseUrl(), {"--grpc-reflection=on"});
  ASSERT_GT(gateway.port(), 0) << gateway.process().output();
  Subprocess call({grpcurl, "-plaintext", "-d",
                   R"({"event_name": "EVENT_NAME_CREATE_REPORT", "inspection_id": "insp_1"})",
                   gateway.target(), "inspection.v1.EventConfigService/TestWebhook"});
  ASSERT_EQ(call.Wait(std::chrono::seconds(30)), 0) << call.output();
  EXPECT_NE(call.output().find(R"("status": "send")"), std::string::npos) << call.output();
  ASSERT_EQ(vendor.RequestCount(), 1u);
  EXPECT_EQ(vendor.Requests()[0].query, "eventName=createReport&inspectionId=insp_1");
}

TEST(GatewayProcessTest, ANamedAccountFromTheConfigIsCalledWithItsOwnKey) {
  FakeVendor production;
  FakeVendor preprod;
  ASSERT_TRUE(production.Start());
  ASSERT_TRUE(preprod.Start());
  ScriptedResponse reply;
  reply.body = R"({"status": "send"})";
  production.RespondWith(reply);
  preprod.RespondWith(reply);
  TempDir secrets;
  constexpr char kPreprodKey[] = "preprod-key-5d1e0b";
  {
    std::ofstream key(secrets.File("preprod-api-key"));
    key << kPreprodKey << "\n";
  }
  const nlohmann::json accounts = {
      {"preprod",
       {{"upstream_url", preprod.BaseUrl()}, {"api_key_file", secrets.File("preprod-api-key")}}}};
  GatewayProcess gateway(production.BaseUrl(), {"--accounts=" + accounts.dump()});
  ASSERT_GT(gateway.port(), 0) << gateway.process().output();
  auto stub = v1::EventConfigService::NewStub(
      grpc::CreateChannel(gateway.target(), grpc::InsecureChannelCredentials()));
  v1::TestWebhookRequest request;
  request.set_event_name(v1::EVENT_NAME_CREATE_REPORT);
  request.set_inspection_id("insp_1");
  v1::TestWebhookResponse response;
  auto context = GatewayTest::Context(10000);
  context->AddMetadata("x-vendor-account", "preprod");
  ASSERT_TRUE(stub->TestWebhook(context.get(), request, &response).ok());
  ASSERT_EQ(preprod.RequestCount(), 1u);
  EXPECT_EQ(production.RequestCount(), 0u);
  const RecordedRequest sent = preprod.Requests()[0];
  ASSERT_NE(sent.Header("x-api-key"), nullptr);
  EXPECT_EQ(*sent.Header("x-api-key"), kPreprodKey);
  // An account nobody configured is refused before any vendor is called.
  auto unknown = GatewayTest::Context(10000);
  unknown->AddMetadata("x-vendor-account", "staging");
  EXPECT_EQ(stub->TestWebhook(unknown.get(), request, &response).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(preprod.RequestCount() + production.RequestCount(), 1u);
  // SIGTERM with this client's connection still open and idle: nothing is in flight, so
  // the drain does not wait for the connection (grace is 10 s; before the fix, 5 s).
  EXPECT_EQ(gateway.process().Stop(SIGTERM, std::chrono::seconds(3)), 0)
      << gateway.process().output();
  // The start-up log shows the account, never its key.
  EXPECT_NE(gateway.process().output().find("preprod-api-key"), std::string::npos);
  EXPECT_EQ(gateway.process().output().find(kPreprodKey), std::string::npos);
}

TEST(GatewayProcessTest, BadConfigExitsNonZeroNamingTheKey) {
  Subprocess bad({GATEWAY_BINARY, "--upstream-url=not a url", "--webapp-url=https://w.test"},
                 {std::string("INSPECTION_API_KEY=") + kApiKey});
  EXPECT_NE(bad.Wait(std::chrono::seconds(20)), 0);
  EXPECT_NE(bad.output().find("upstream_url"), std::string::npos) << bad.output();
  EXPECT_EQ(bad.output().find(kApiKey), std::string::npos);

  Subprocess unknown({GATEWAY_BINARY, "--upstream-url=https://v.test",
                      "--webapp-url=https://w.test", "--retries=3"},
                     {std::string("INSPECTION_API_KEY=") + kApiKey});
  EXPECT_NE(unknown.Wait(std::chrono::seconds(20)), 0);
  EXPECT_NE(unknown.output().find("retries"), std::string::npos) << unknown.output();

  Subprocess no_key(
      {GATEWAY_BINARY, "--upstream-url=https://v.test", "--webapp-url=https://w.test"},
      {"INSPECTION_API_KEY="});
  EXPECT_NE(no_key.Wait(std::chrono::seconds(20)), 0);
  EXPECT_NE(no_key.output().find("api_key"), std::string::npos) << no_key.output();

  // The binary checks its real environment for misspelled INSPECTION_* names.
  Subprocess misspelled(
      {GATEWAY_BINARY, "--upstream-url=https://v.test", "--webapp-url=https://w.test"},
      {std::string("INSPECTION_API_KEY=") + kApiKey, "INSPECTION_LOG_LEVLE=VALUE-NOT-SHOWN"});
  EXPECT_EQ(misspelled.Wait(std::chrono::seconds(20)), 2);
  EXPECT_NE(misspelled.output().find("INSPECTION_LOG_LEVLE"), std::string::npos)
      << misspelled.output();
  EXPECT_NE(misspelled.output().find("did you mean INSPECTION_LOG_LEVEL?"), std::string::npos)
      << misspelled.output();
  EXPECT_EQ(misspelled.output().find("VALUE-NOT-SHOWN"), std::string::npos);
  EXPECT_EQ(misspelled.output().find(kApiKey), std::string::npos);
}

// Kubernetes gives a pod the addresses of the Services in its namespace as env variables
// (INSPECTION_SANDBOX_SERVICE_HOST for a Service inspection-sandbox): they are no typos.
TEST(GatewayProcessTest, KubernetesServiceLinkVariablesDoNotStopStartUp) {
  FakeVendor vendor;
  ASSERT_TRUE(vendor.Start());
  GatewayProcess gateway(
      vendor.BaseUrl(), {},
      {"INSPECTION_SANDBOX_SERVICE_HOST=10.96.0.7", "INSPECTION_SANDBOX_SERVICE_PORT=8080",
       "INSPECTION_SANDBOX_PORT=tcp://10.96.0.7:8080",
       "INSPECTION_SANDBOX_PORT_8080_TCP=tcp://10.96.0.7:8080",
       "INSPECTION_SANDBOX_PORT_8080_TCP_PROTO=tcp", "INSPECTION_SANDBOX_PORT_8080_TCP_PORT=8080",
       "INSPECTION_SANDBOX_PORT_8080_TCP_ADDR=10.96.0.7"});
  EXPECT_GT(gateway.port(), 0) << gateway.process().output();
}

}  // namespace
}  // namespace inspection::testing

namespace inspection::testing {
namespace {

// Issue 34: `--sandbox` wrote its event log (and the work ledger beside it) into the working
// directory. Without `event_log` it now lives in a temporary directory under $TMPDIR, named
// in the welcome text, and removed when the process ends.
TEST(GatewayProcessTest, TheSandboxKeepsItsEventLogInATemporaryDirectory) {
  TempDir tmp;
  Subprocess gateway({GATEWAY_BINARY, "--sandbox", "--grpc-addr=127.0.0.1:0",
                      "--webhook-addr=127.0.0.1:0", "--admin-addr=127.0.0.1:0"},
                     {absl::StrCat("TMPDIR=", tmp.path())});
  const std::string line = gateway.WaitForLine(
      [](const std::string& l) { return l.find("Events are kept in") != std::string::npos; },
      std::chrono::seconds(30));
  ASSERT_FALSE(line.empty()) << gateway.output();
  const std::string prefix =
      absl::StrCat("Events are kept in sqlite:", tmp.path(), "/inspection-gateway-sandbox-");
  const size_t at = line.find(prefix);
  ASSERT_NE(at, std::string::npos) << line;
  const std::string rest = line.substr(at + std::string("Events are kept in sqlite:").size());
  const std::string file = rest.substr(0, rest.find(' '));
  const std::string dir = file.substr(0, file.rfind('/'));
  EXPECT_TRUE(std::ifstream(file).good()) << file;

  EXPECT_EQ(gateway.Stop(SIGTERM, std::chrono::seconds(20)), 0) << gateway.output();
  EXPECT_FALSE(std::ifstream(file).good()) << file << " outlived the process";
  EXPECT_NE(::access(dir.c_str(), F_OK), 0) << dir << " outlived the process";
}

// With event_log set, the sandbox uses it as given.
TEST(GatewayProcessTest, TheSandboxUsesAnEventLogThatIsSet) {
  TempDir tmp;
  const std::string file = tmp.File("kept.db");
  Subprocess gateway(
      {GATEWAY_BINARY, "--sandbox", "--grpc-addr=127.0.0.1:0", "--webhook-addr=127.0.0.1:0",
       "--admin-addr=127.0.0.1:0", "--event-log=sqlite:" + file},
      {absl::StrCat("TMPDIR=", tmp.path())});
  const std::string line = gateway.WaitForLine(
      [](const std::string& l) { return l.find("Events are kept in") != std::string::npos; },
      std::chrono::seconds(30));
  EXPECT_NE(line.find("sqlite:" + file), std::string::npos) << line;
  EXPECT_EQ(gateway.Stop(SIGTERM, std::chrono::seconds(20)), 0) << gateway.output();
  EXPECT_TRUE(std::ifstream(file).good()) << "the event log that was set is kept";
}

}  // namespace
}  // namespace inspection::testing
