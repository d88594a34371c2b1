// AdminServer end to end over real HTTP on an OS-chosen loopback port: exact sample values
// parsed from /metrics after a scripted sequence, `promtool check metrics` over the same
// output, /healthz, /readyz following the injected check, and the server's lifecycle.
#include "gateway/metrics/admin_server.h"
#include "gateway/webhooks/webhook_metrics.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "gateway/reconcile/reconcile_metrics.h"
#include "gateway/tracing/otlp_exporter.h"
#include "tests/metrics/all_metrics.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace inspection::metrics {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using LabelMap = std::map<std::string, std::string>;
using namespace std::chrono_literals;

// --- a small parser for the text exposition format -------------------------------------------

struct Sample {
  std::string name;
  LabelMap labels;
  double value = 0;
};

// Parses `name{a="x",b="y"} value` lines; '#' lines and blank lines are skipped. Returns
// nullopt (and fails the test) on a line it cannot read: the exposition must be well formed.
std::optional<std::vector<Sample>> ParseExposition(const std::string& text) {
  std::vector<Sample> samples;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    Sample sample;
    size_t pos = line.find_first_of("{ ");
    if (pos == std::string::npos) {
      ADD_FAILURE() << "bad line: " << line;
      return std::nullopt;
    }
    sample.name = line.substr(0, pos);
    if (line[pos] == '{') {
      ++pos;
      while (line[pos] != '}') {
        const size_t eq = line.find("=\"", pos);
        if (eq == std::string::npos) {
          ADD_FAILURE() << "bad labels: " << line;
          return std::nullopt;
        }
        const std::string label = line.substr(pos, eq - pos);
        std::string value;
        size_t i = eq + 2;
        for (; i < line.size() && line[i] != '"'; ++i) {
          if (line[i] == '\\' && i + 1 < line.size()) ++i;
          value += line[i];
        }
        if (i >= line.size()) {
          ADD_FAILURE() << "unterminated label value: " << line;
          return std::nullopt;
        }
        sample.labels[label] = value;
        pos = i + 1;
        if (line[pos] == ',') ++pos;
      }
      ++pos;
    }
    const std::string value = line.substr(pos + 1);
    char* end = nullptr;
    sample.value = std::strtod(value.c_str(), &end);
    if (value.empty() || *end != '\0') {
      ADD_FAILURE() << "bad value: " << line;
      return std::nullopt;
    }
    samples.push_back(std::move(sample));
  }
  return samples;
}

// The value of the one sample `name{labels}`; NaN (and a test failure) if it is not there
// exactly once.
double SampleValue(const std::vector<Sample>& samples, const std::string& name,
                   const LabelMap& labels = {}) {
  std::optional<double> found;
  for (const Sample& sample : samples) {
    if (sample.name != name || sample.labels != labels) continue;
    if (found) ADD_FAILURE() << name << " appears twice with the same labels";
    found = sample.value;
  }
  if (!found) {
    std::string printed;
    for (const auto& [k, v] : labels) printed += k + "=" + v + " ";
    ADD_FAILURE() << "no sample " << name << " {" << printed << "}";
    return std::nan("");
  }
  return *found;
}

// --- fixtures --------------------------------------------------------------------------------

AllMetricsConfig TestConfig() {
  AllMetricsConfig config;
  config.routes = {"create_token", "get_token_status", "detect_damage"};
  config.grpc_methods = {
      {"inspection.v1.TokenService", "CreateToken", GrpcType::kUnary},
      {"inspection.v1.EventService", "Subscribe", GrpcType::kServerStream},
  };
  config.upstreams = {"vendor"};
  config.stream_rpcs = {"Subscribe", "StreamDamageResults", "WatchTokenStatus"};
  return config;
}

// A readiness check the test can flip.
class FakeReadiness {
 public:
  void Set(absl::Status status) {
    absl::MutexLock lock(&mu_);
    status_ = std::move(status);
  }
  absl::Status Check() const {
    absl::MutexLock lock(&mu_);
    return status_;
  }

 private:
  mutable absl::Mutex mu_;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
};

class AdminServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::shared_ptr<AllMetrics>> metrics = AllMetrics::Create(TestConfig());
    ASSERT_TRUE(metrics.ok()) << metrics.status();
    metrics_ = *std::move(metrics);
    webhook_ = &metrics_->webhook();
    AdminServer::Options options;
    options.host = "127.0.0.1";
    options.port = 0;
    server_ = std::make_unique<AdminServer>(options, metrics_->registry(),
                                            [this] { return readiness_.Check(); });
    ASSERT_TRUE(server_->Start().ok());
    ASSERT_GT(server_->port(), 0);
    client_ = std::make_unique<httplib::Client>("127.0.0.1", server_->port());
    client_->set_connection_timeout(5, 0);
    client_->set_read_timeout(10, 0);
  }
  void TearDown() override {
    client_.reset();
    if (server_) server_->Stop();
  }

  // GET /metrics, parsed.
  std::vector<Sample> Scrape(std::string* raw = nullptr) {
    httplib::Result res = client_->Get("/metrics");
    if (!res) {
      ADD_FAILURE() << "GET /metrics failed: " << httplib::to_string(res.error());
      return {};
    }
    EXPECT_EQ(res->status, 200);
    if (raw != nullptr) *raw = res->body;
    std::optional<std::vector<Sample>> samples = ParseExposition(res->body);
    return samples ? *samples : std::vector<Sample>();
  }

  // Records at least one sample in every family, so that promtool sees every shape.
  void RecordSomethingEverywhere() {
    RouteMetrics& route = metrics_->ForRoute(0);
    route.RecordAttempt(200, 120ms);
    route.RecordAttempt(0, 2s);
    route.RecordRetry(RetryReason::kReset);
    route.RecordRetryBudgetExhausted();
    route.RecordAttemptsPerCall(2);
    route.RecordCacheHit();
    route.RecordCacheMiss();
    route.RecordCacheCoalesced();
    route.RecordCacheStaleServed();
    route.RecordIdempotencyReplay();
    route.RecordVendorUnknownFields(2);
    metrics_->ForUpstream(0).RecordTransition(CircuitState::kOpen);
    metrics_->RecordCacheEvictions(1);
    metrics_->SetCacheBytes(123);
    webhook_->Delivery(webhooks::WebhookOutcome::kDuplicate);
    webhook_->UnknownEventName();
    webhook_->Delivery(webhooks::WebhookOutcome::kAccepted);      // and an event log append
    webhook_->Delivery(webhooks::WebhookOutcome::kStoreFailure);  // and an append error
    metrics_->ForStreamRpc(2).SubscriberStarted();
    metrics_->RecordFanoutLag(2ms);
    metrics_->RecordDroppedSubscriber(StreamDropReason::kShutdown);
    GrpcMethodMetrics& grpc = metrics_->ForGrpcMethod(1);
    grpc.RecordStarted();
    grpc.RecordMsgReceived();
    grpc.RecordMsgSent();
    grpc.RecordHandled(grpc::StatusCode::RESOURCE_EXHAUSTED, 3s);
  }

  FakeReadiness readiness_;
  std::shared_ptr<AllMetrics> metrics_;
  webhooks::WebhookMetrics* webhook_ = nullptr;  // the receiver's series
  std::unique_ptr<AdminServer> server_;
  std::unique_ptr<httplib::Client> client_;
};

// Runs `promtool check metrics` with `exposition` on stdin. Returns the exit code (127 when
// promtool is not installed) and fills `output` with what it printed.
int RunPromtool(const std::string& exposition, std::string* output) {
  testing::TempDir dir;
  if (dir.path().empty()) {
    *output = "no temp dir";
    return -1;
  }
  const std::string file = dir.File("metrics.txt");
  {
    std::ofstream out(file, std::ios::binary);
    out << exposition;
  }
  inspection::testing::Subprocess promtool(
      {"/bin/sh", "-c",
       "command -v promtool >/dev/null 2>&1 || exit 127; exec promtool check metrics < \"$0\"",
       file});
  const int code = promtool.Wait(60s);
  *output = promtool.output();
  return code;
}

// --- /metrics --------------------------------------------------------------------------------

TEST_F(AdminServerTest, MetricsReportExactValuesAfterAScriptedSequence) {
  // The sequence: 3 attempts on create_token answered 2xx, 1 answered 5xx, 2 retries
  // because of 503; one logical call that took 3 attempts; the breaker opened and half-opened.
  RouteMetrics& create_token = metrics_->ForRoute(0);
  create_token.RecordAttempt(200, 100ms);
  create_token.RecordAttempt(201, 200ms);
  create_token.RecordAttempt(503, 300ms);
  create_token.RecordAttempt(200, 40ms);
  create_token.RecordRetry(RetryReason::kStatus503);
  create_token.RecordRetry(RetryReason::kStatus503);
  create_token.RecordAttemptsPerCall(3);
  UpstreamMetrics& vendor = metrics_->ForUpstream(0);
  vendor.RecordTransition(CircuitState::kOpen);
  vendor.RecordTransition(CircuitState::kHalfOpen);
  webhook_->Delivery(webhooks::WebhookOutcome::kAccepted);
  webhook_->Delivery(webhooks::WebhookOutcome::kBadJson);
  webhook_->Delivery(webhooks::WebhookOutcome::kAccepted);

  const std::vector<Sample> s = Scrape();
  ASSERT_FALSE(s.empty());
  auto requests = [&](const std::string& status_class) {
    return SampleValue(
        s, "inspection_upstream_requests_total",
        {{"account", "default"}, {"route", "create_token"}, {"status_class", status_class}});
  };
  EXPECT_EQ(requests("2xx"), 3);
  EXPECT_EQ(requests("5xx"), 1);
  EXPECT_EQ(requests("4xx"), 0);
  EXPECT_EQ(requests("transport_error"), 0);
  EXPECT_EQ(
      SampleValue(s, "inspection_upstream_requests_total",
                  {{"account", "default"}, {"route", "get_token_status"}, {"status_class", "2xx"}}),
      0);
  EXPECT_EQ(
      SampleValue(s, "inspection_upstream_retries_total",
                  {{"account", "default"}, {"route", "create_token"}, {"reason", "status_503"}}),
      2);
  EXPECT_EQ(
      SampleValue(s, "inspection_upstream_retries_total",
                  {{"account", "default"}, {"route", "create_token"}, {"reason", "status_429"}}),
      0);

  // Histogram: _count, _sum and cumulative buckets with their le labels as printed.
  const LabelMap route = {{"account", "default"}, {"route", "create_token"}};
  EXPECT_EQ(SampleValue(s, "inspection_upstream_request_duration_seconds_count", route), 4);
  EXPECT_NEAR(SampleValue(s, "inspection_upstream_request_duration_seconds_sum", route), 0.64,
              1e-9);
  auto bucket = [&](const std::string& le) {
    return SampleValue(s, "inspection_upstream_request_duration_seconds_bucket",
                       {{"account", "default"}, {"route", "create_token"}, {"le", le}});
  };
  EXPECT_EQ(bucket("0.025"), 0);
  EXPECT_EQ(bucket("0.05"), 1);
  EXPECT_EQ(bucket("0.1"), 2);
  EXPECT_EQ(bucket("0.25"), 3);
  EXPECT_EQ(bucket("0.5"), 4);
  EXPECT_EQ(bucket("60"), 4);
  EXPECT_EQ(bucket("+Inf"), 4);
  EXPECT_EQ(SampleValue(s, "inspection_upstream_attempts_per_call_count", route), 1);
  EXPECT_EQ(SampleValue(s, "inspection_upstream_attempts_per_call_sum", route), 3);
  EXPECT_EQ(SampleValue(s, "inspection_upstream_attempts_per_call_bucket",
                        {{"account", "default"}, {"route", "create_token"}, {"le", "2"}}),
            0);
  EXPECT_EQ(SampleValue(s, "inspection_upstream_attempts_per_call_bucket",
                        {{"account", "default"}, {"route", "create_token"}, {"le", "3"}}),
            1);

  EXPECT_EQ(SampleValue(s, "inspection_upstream_circuit_state",
                        {{"account", "default"}, {"upstream", "vendor"}}),
            1);
  EXPECT_EQ(SampleValue(s, "inspection_upstream_circuit_transitions_total",
                        {{"account", "default"}, {"upstream", "vendor"}, {"to", "open"}}),
            1);
  EXPECT_EQ(SampleValue(s, "inspection_upstream_circuit_transitions_total",
                        {{"account", "default"}, {"upstream", "vendor"}, {"to", "closed"}}),
            0);
  EXPECT_EQ(SampleValue(s, "inspection_webhook_deliveries_total", {{"outcome", "accepted"}}), 2);
  EXPECT_EQ(SampleValue(s, "inspection_webhook_deliveries_total", {{"outcome", "bad_json"}}), 1);
  EXPECT_EQ(SampleValue(s, "grpc_server_handled_total",
                        {{"grpc_type", "unary"},
                         {"grpc_service", "inspection.v1.TokenService"},
                         {"grpc_method", "CreateToken"},
                         {"grpc_code", "OK"}}),
            0);
  EXPECT_GT(SampleValue(s, "process_resident_memory_bytes"), 0);
  EXPECT_GT(SampleValue(s, "process_threads"), 0);
  EXPECT_GT(SampleValue(s, "process_start_time_seconds"), 1.6e9);

  // Collected per request: a second scrape sees what happened in between.
  create_token.RecordAttempt(200, 1ms);
  const std::vector<Sample> s2 = Scrape();
  EXPECT_EQ(
      SampleValue(s2, "inspection_upstream_requests_total",
                  {{"account", "default"}, {"route", "create_token"}, {"status_class", "2xx"}}),
      4);
}

TEST_F(AdminServerTest, MetricsUseTheTextFormatContentTypeAndDescribeEveryFamily) {
  httplib::Result res = client_->Get("/metrics");
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->get_header_value("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
  // Every family has HELP and TYPE lines; counters end in _total.
  std::istringstream in(res->body);
  std::string line;
  std::map<std::string, std::string> types;
  std::set<std::string> helps;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string hash, kind, name, type;
    words >> hash >> kind >> name >> type;
    if (hash != "#") continue;
    if (kind == "HELP") helps.insert(name);
    if (kind == "TYPE") types[name] = type;
  }
  // 47 of the gateway (each a component's, and the build info) + 7 process_*
  EXPECT_EQ(types.size(), 54u);
  for (const auto& [name, type] : types) {
    EXPECT_TRUE(helps.count(name)) << name;
    if (type == "counter") {
      EXPECT_THAT(name, ::testing::EndsWith("_total"));
    }
  }
  EXPECT_EQ(types["grpc_server_handling_seconds"], "histogram");
  EXPECT_EQ(types["inspection_upstream_circuit_state"], "gauge");
  EXPECT_EQ(types["process_cpu_seconds_total"], "counter");

  httplib::Result head = client_->Head("/metrics");
  ASSERT_TRUE(head);
  EXPECT_EQ(head->status, 200);
  EXPECT_TRUE(head->body.empty());
}

TEST_F(AdminServerTest, PromtoolCheckMetricsPasses) {
  RecordSomethingEverywhere();
  std::string exposition;
  Scrape(&exposition);
  ASSERT_FALSE(exposition.empty());
  std::string output;
  const int code = RunPromtool(exposition, &output);
  ASSERT_NE(code, 127) << "promtool is not installed: run scripts/install-deps.sh (Debian "
                          "package `prometheus`, installed with --no-install-recommends)";
  EXPECT_EQ(code, 0) << "promtool check metrics failed:\n" << output;
}

TEST(PromtoolHarnessTest, RejectsABrokenExposition) {
  // The check above can fail: promtool flags a counter without the _total suffix and a
  // metric without HELP.
  std::string output;
  const int code = RunPromtool("# TYPE requests counter\nrequests 1\n", &output);
  ASSERT_NE(code, 127) << "promtool is not installed: run scripts/install-deps.sh";
  EXPECT_NE(code, 0);
  EXPECT_THAT(output, HasSubstr("_total"));
}

// --- /healthz and /readyz --------------------------------------------------------------------

TEST_F(AdminServerTest, HealthzAnswersOkWhateverTheReadiness) {
  readiness_.Set(absl::UnavailableError("event log not writable"));
  httplib::Result res = client_->Get("/healthz");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->body, "ok\n");
}

TEST_F(AdminServerTest, ReadyzFollowsTheInjectedCheck) {
  httplib::Result res = client_->Get("/readyz");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->body, "ready\n");

  readiness_.Set(absl::UnavailableError("event log not writable"));
  res = client_->Get("/readyz");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 503);
  EXPECT_EQ(res->body, "not ready: event log not writable\n");

  readiness_.Set(absl::FailedPreconditionError("gRPC server not listening yet"));
  res = client_->Get("/readyz");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 503);
  EXPECT_EQ(res->body, "not ready: gRPC server not listening yet\n");

  readiness_.Set(absl::OkStatus());
  res = client_->Get("/readyz");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
}

TEST_F(AdminServerTest, ReadyzReasonIsOneBoundedLine) {
  readiness_.Set(absl::UnavailableError("line one\nline two\r\n" + std::string(500, 'x')));
  httplib::Result res = client_->Get("/readyz");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 503);
  EXPECT_THAT(res->body, StartsWith("not ready: line one line two  xxx"));
  EXPECT_EQ(res->body.find('\n'), res->body.size() - 1);
  EXPECT_LE(res->body.size(), std::string("not ready: ").size() + 200 + 3 + 1);

  readiness_.Set(absl::Status(absl::StatusCode::kUnavailable, ""));
  res = client_->Get("/readyz");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->body, "not ready: UNAVAILABLE\n");
}

TEST_F(AdminServerTest, OtherPathsAndMethodsAreRefused) {
  httplib::Result res = client_->Get("/debug/pprof");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 404);
  res = client_->Post("/metrics", "x", "text/plain");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 405);
  EXPECT_EQ(res->get_header_value("Allow"), "GET, HEAD");
  res = client_->Delete("/readyz");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 405);
}

TEST(AdminServerStandaloneTest, NullReadinessMeansReady) {
  auto metrics = AllMetrics::Create(AllMetricsConfig{});
  ASSERT_TRUE(metrics.ok());
  AdminServer server({"127.0.0.1", 0, 1}, (*metrics)->registry(), nullptr);
  ASSERT_TRUE(server.Start().ok());
  httplib::Client client("127.0.0.1", server.port());
  httplib::Result res = client.Get("/readyz");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
}

// --- lifecycle -------------------------------------------------------------------------------

TEST(AdminServerLifecycleTest, PortsComeFromTheOsAndAnOccupiedPortIsAnError) {
  auto metrics = AllMetrics::Create(AllMetricsConfig{});
  ASSERT_TRUE(metrics.ok());
  AdminServer first({"127.0.0.1", 0, 1}, (*metrics)->registry(), nullptr);
  AdminServer second({"127.0.0.1", 0, 1}, (*metrics)->registry(), nullptr);
  EXPECT_EQ(first.port(), 0);
  ASSERT_TRUE(first.Start().ok());
  ASSERT_TRUE(second.Start().ok());
  EXPECT_GT(first.port(), 0);
  EXPECT_GT(second.port(), 0);
  EXPECT_NE(first.port(), second.port());

  AdminServer clash({"127.0.0.1", first.port(), 1}, (*metrics)->registry(), nullptr);
  const absl::Status status = clash.Start();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_EQ(clash.port(), 0);

  EXPECT_EQ(first.Start().code(), absl::StatusCode::kFailedPrecondition);
  // The first server still answers.
  httplib::Client client("127.0.0.1", first.port());
  httplib::Result res = client.Get("/healthz");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
}

TEST(AdminServerLifecycleTest, StopIsPromptAfterAKeepAliveClientsRequest) {
  auto metrics = AllMetrics::Create(AllMetricsConfig{});
  ASSERT_TRUE(metrics.ok());
  AdminServer server({"127.0.0.1", 0, 2}, (*metrics)->registry(), nullptr);
  ASSERT_TRUE(server.Start().ok());
  const int port = server.port();
  // A client that keeps its connection (Prometheus does): it may, an idle connection
  // costs no thread, and Stop() closes it at once.
  httplib::Client client("127.0.0.1", port);
  client.set_keep_alive(true);
  httplib::Result res = client.Get("/metrics");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200);
  EXPECT_NE(res->get_header_value("Connection"), "close");

  const auto start = std::chrono::steady_clock::now();
  server.Stop();
  const auto took = std::chrono::steady_clock::now() - start;
  // Far below the 60 s keep-alive: Stop() does not wait for an idle connection.
  EXPECT_LT(took, 900ms) << "Stop() waited for an idle connection";
  EXPECT_EQ(server.port(), 0);
  server.Stop();  // idempotent

  httplib::Client fresh("127.0.0.1", port);
  fresh.set_connection_timeout(2, 0);
  EXPECT_FALSE(fresh.Get("/healthz")) << "still serving after Stop()";
  EXPECT_EQ(server.Start().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(AdminServerLifecycleTest, AConnectionThatSendsNothingDelaysStopByAtMostItsTimeout) {
  auto metrics = AllMetrics::Create(AllMetricsConfig{});
  ASSERT_TRUE(metrics.ok());
  AdminServer server({"127.0.0.1", 0, 1}, (*metrics)->registry(), nullptr);
  ASSERT_TRUE(server.Start().ok());
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<uint16_t>(server.port()));
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);

  const auto start = std::chrono::steady_clock::now();
  server.Stop();
  const auto took = std::chrono::steady_clock::now() - start;
  ::close(fd);
  EXPECT_LT(took, 2500ms) << "documented bound: 1 s for a connection that sends nothing";
}

TEST(AdminServerLifecycleTest, StopRightAfterStartDoesNotHang) {
  auto metrics = AllMetrics::Create(AllMetricsConfig{});
  ASSERT_TRUE(metrics.ok());
  for (int i = 0; i < 20; ++i) {
    AdminServer server({"127.0.0.1", 0, 1}, (*metrics)->registry(), nullptr);
    ASSERT_TRUE(server.Start().ok());
    server.Stop();
  }
  AdminServer never_started({"127.0.0.1", 0, 1}, (*metrics)->registry(), nullptr);
  never_started.Stop();
}

}  // namespace
}  // namespace inspection::metrics
