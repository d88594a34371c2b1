#include "gateway/metrics/admin_server.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <utility>
#include <vector>

#include <prometheus/text_serializer.h>

#include "absl/strings/str_cat.h"

namespace inspection::metrics {
namespace {

constexpr char kMetricsContentType[] = "text/plain; version=0.0.4; charset=utf-8";
constexpr char kTextContentType[] = "text/plain; charset=utf-8";
constexpr size_t kMaxReasonBytes = 200;

// The readiness reason goes to whoever can reach the admin port: keep it one short line so
// a check that returns a multi-line or huge message cannot turn /readyz into a dump.
std::string SanitizeReason(std::string_view reason) {
  std::string out(reason.substr(0, kMaxReasonBytes));
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  }
  if (reason.size() > kMaxReasonBytes) out += "...";
  return out;
}

}  // namespace

std::string RenderPrometheusText(const prometheus::Collectable& collectable) {
  return prometheus::TextSerializer().Serialize(collectable.Collect());
}

http::HttpServerLimits AdminServer::AdminLimits() {
  http::HttpServerLimits limits;
  limits.head_timeout = std::chrono::seconds(5);
  limits.keep_alive_timeout = std::chrono::seconds(60);
  limits.write_timeout = std::chrono::seconds(10);
  limits.max_head_bytes = 8 * 1024;
  limits.max_header_count = 64;
  limits.max_body_bytes = 0;  // GET only: no body is ever read
  limits.max_connections = 256;
  limits.max_connections_per_client = 64;
  limits.max_requests_in_flight = 64;
  return limits;
}

AdminServer::AdminServer(Options options, std::shared_ptr<const prometheus::Collectable> metrics,
                         ReadinessCheck readiness)
    : options_(std::move(options)),
      metrics_(std::move(metrics)),
      readiness_(std::move(readiness)) {}

AdminServer::~AdminServer() { Stop(); }

std::optional<http::ServerResponse> AdminServer::CheckHead(const http::ServerRequest& head) const {
  http::ServerResponse response;
  if (head.path != "/metrics" && head.path != "/healthz" && head.path != "/readyz") {
    response.status = 404;
    response.SetContent("not found\n", kTextContentType);
    return response;
  }
  // A write to a read-only endpoint is a client bug: say so (405) rather than 404.
  if (head.method != "GET" && head.method != "HEAD") {
    response.status = 405;
    response.SetHeader("Allow", "GET, HEAD");
    return response;
  }
  if (head.path == "/healthz") {
    // Liveness: answered here, on the I/O thread, so that nothing queued (a slow scrape,
    // a readiness check waiting on the event log) can delay it.
    response.SetContent("ok\n", kTextContentType);
    return response;
  }
  return std::nullopt;  // /metrics and /readyz: on a worker
}

void AdminServer::Handle(const http::ServerRequest& request, http::ServerResponse& response) const {
  if (request.path == "/metrics") {
    response.SetContent(metrics_ ? RenderPrometheusText(*metrics_) : std::string(),
                        kMetricsContentType);
    return;
  }
  const absl::Status status = readiness_ ? readiness_() : absl::OkStatus();
  if (status.ok()) {
    response.SetContent("ready\n", kTextContentType);
    return;
  }
  response.status = 503;
  const std::string reason = status.message().empty() ? absl::StatusCodeToString(status.code())
                                                      : std::string(status.message());
  response.SetContent(absl::StrCat("not ready: ", SanitizeReason(reason), "\n"), kTextContentType);
}

absl::Status AdminServer::Start() {
  absl::MutexLock lock(&mu_);
  if (started_ || stopped_) {
    return absl::FailedPreconditionError("admin server already started");
  }
  started_ = true;
  http::HttpServerOptions server_options;
  server_options.worker_threads = std::max(1, options_.worker_threads);
  server_options.limits = options_.limits;
  server_options.error_body = [](http::ServerResponse& response) {
    response.SetContent(
        absl::StrCat(response.status, " ", http::ReasonPhrase(response.status), "\n"),
        kTextContentType);
  };
  server_ = std::make_unique<http::HttpServer>(
      [this](const http::ServerRequest& head) { return CheckHead(head); },
      [this](http::ServerRequest& request, http::ServerResponse& response) {
        Handle(request, response);
      },
      std::move(server_options));
  absl::StatusOr<int> port = server_->Bind(options_.host, options_.port);
  if (!port.ok()) {
    stopped_ = true;
    return absl::UnavailableError(absl::StrCat("admin server: ", port.status().message()));
  }
  if (absl::Status serving = server_->Serve(); !serving.ok()) {
    stopped_ = true;
    return serving;
  }
  port_ = *port;
  return absl::OkStatus();
}

void AdminServer::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (stopped_ && server_ == nullptr) return;
    stopped_ = true;
    port_ = 0;
  }
  if (server_ != nullptr) server_->Stop();
}

int AdminServer::port() const {
  absl::MutexLock lock(&mu_);
  return port_;
}

}  // namespace inspection::metrics
