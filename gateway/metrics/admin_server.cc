#include "gateway/metrics/admin_server.h"

#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <utility>
#include <vector>

#include <httplib.h>
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

AdminServer::AdminServer(Options options, std::shared_ptr<const prometheus::Collectable> metrics,
                         ReadinessCheck readiness)
    : options_(std::move(options)),
      metrics_(std::move(metrics)),
      readiness_(std::move(readiness)),
      server_(std::make_unique<httplib::Server>()) {
  server_->Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics_ ? RenderPrometheusText(*metrics_) : std::string(),
                    kMetricsContentType);
  });
  server_->Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("ok\n", kTextContentType);
  });
  server_->Get("/readyz", [this](const httplib::Request&, httplib::Response& res) {
    const absl::Status status = readiness_ ? readiness_() : absl::OkStatus();
    if (status.ok()) {
      res.set_content("ready\n", kTextContentType);
      return;
    }
    res.status = 503;
    const std::string reason = status.message().empty() ? absl::StatusCodeToString(status.code())
                                                        : std::string(status.message());
    res.set_content(absl::StrCat("not ready: ", SanitizeReason(reason), "\n"), kTextContentType);
  });
  // A write to a read-only endpoint is a client bug: say so (405) rather than 404.
  const httplib::Server::Handler not_allowed = [](const httplib::Request&, httplib::Response& res) {
    res.status = 405;
    res.set_header("Allow", "GET, HEAD");
  };
  for (const char* path : {"/metrics", "/healthz", "/readyz"}) {
    server_->Post(path, not_allowed);
    server_->Put(path, not_allowed);
    server_->Patch(path, not_allowed);
    server_->Delete(path, not_allowed);
  }

  // Without TCP_NODELAY a response written in two segments waits for the peer's delayed
  // ACK (~40 ms per scrape).
  server_->set_tcp_nodelay(true);
  // SO_REUSEADDR only: a restart can rebind at once, but a second process asking for a port
  // that is in use gets an error instead of silently sharing it (SO_REUSEPORT would).
  server_->set_socket_options([](int sock) {
    const int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  // One request per connection. httplib 0.11.4 parks a worker on an idle keep-alive
  // connection until its keep-alive timeout and stop() joins the workers, so keep-alive
  // would make Stop() wait that long. This port serves a scrape every few seconds and
  // probes that do not reuse connections anyway: a fresh connection per request costs
  // nothing that matters. The remaining waits are bounded by the short timeouts: a
  // connection that sends nothing (1 s), a peer that stalls mid-request (2 s).
  server_->set_keep_alive_max_count(1);
  server_->set_keep_alive_timeout(1);
  server_->set_read_timeout(2, 0);
  server_->set_write_timeout(2, 0);
  const size_t workers = static_cast<size_t>(std::max(1, options_.worker_threads));
  server_->new_task_queue = [workers] { return new httplib::ThreadPool(workers); };
}

AdminServer::~AdminServer() { Stop(); }

absl::Status AdminServer::Start() {
  absl::MutexLock lock(&mu_);
  if (started_ || stopped_) {
    return absl::FailedPreconditionError("admin server already started");
  }
  int port = -1;
  if (options_.port == 0) {
    port = server_->bind_to_any_port(options_.host);
  } else if (server_->bind_to_port(options_.host, options_.port)) {
    port = options_.port;
  }
  if (port <= 0) {
    return absl::UnavailableError(
        absl::StrCat("admin server: cannot bind ", options_.host, ":", options_.port));
  }
  // bind_to_*() already listens (connections queue in the backlog), but httplib 0.11.4 has
  // no wait_until_ready(), and its stop() is a no-op until listen_after_bind() has marked
  // the server running: wait for that, so that a Stop() right after Start() cannot leave the
  // listener thread behind. It takes one thread start-up, so poll briefly.
  auto listen_returned = std::make_shared<std::atomic<bool>>(false);
  listener_ = std::thread([server = server_.get(), listen_returned] {
    server->listen_after_bind();
    listen_returned->store(true);
  });
  std::chrono::microseconds pause(20);
  while (!server_->is_running() && !listen_returned->load()) {
    std::this_thread::sleep_for(pause);
    pause = std::min<std::chrono::microseconds>(pause * 2, std::chrono::milliseconds(1));
  }
  started_ = true;
  if (!server_->is_running()) {
    listener_.join();
    stopped_ = true;
    return absl::UnavailableError("admin server: listener ended at start-up");
  }
  port_ = port;
  return absl::OkStatus();
}

void AdminServer::Stop() {
  std::thread listener;
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return;
    stopped_ = true;
    if (!started_) return;
    listener = std::move(listener_);
    port_ = 0;
  }
  server_->stop();
  if (listener.joinable()) listener.join();
}

int AdminServer::port() const {
  absl::MutexLock lock(&mu_);
  return port_;
}

}  // namespace inspection::metrics
