#ifndef GATEWAY_METRICS_ADMIN_SERVER_H_
#define GATEWAY_METRICS_ADMIN_SERVER_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include <prometheus/collectable.h>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "adapters/http/http_server.h"

namespace inspection::metrics {

// The Prometheus text exposition (format 0.0.4) of everything `collectable` collects.
std::string RenderPrometheusText(const prometheus::Collectable& collectable);

// The admin HTTP endpoint (default port 9464; internal only, never exposed publicly):
//   GET /metrics  200, Content-Type "text/plain; version=0.0.4; charset=utf-8", the text
//                 exposition of `metrics`, collected at request time.
//   GET /healthz  200 "ok" while the process can answer HTTP (liveness).
//   GET /readyz   200 "ready" when `readiness()` returns OK; otherwise 503 with
//                 "not ready: <status message>" (readiness).
// Anything else: 404 (405 for a non-GET on a known path). HEAD works like GET. A request
// body is never read: a request announcing one gets its answer (or 413) and the
// connection ends.
//
// The server is the event-driven one of the webhook port (adapters/http), with the
// limits of AdminLimits(): slow or idle connections cost no thread, so they cannot stall
// the kubelet's probes or the scrape.
//
// What it serves comes only from the collectable and the readiness check: the check's
// messages are shown verbatim (truncated to 200 bytes, control characters replaced), so it
// must not put secrets in them.
//
// Thread-safety: Start() and Stop() may be called from any thread; the collectable and the
// readiness check are called concurrently from the server's worker threads and must be
// thread-safe and quick.
class AdminServer {
 public:
  struct Options {
    // Interface to bind: "0.0.0.0" in a pod (the scraper and kubelet come from outside),
    // "127.0.0.1" on a laptop or in tests.
    std::string host = "127.0.0.1";
    int port = 9464;  // 0 = an OS-chosen free port, see port()
    // Threads rendering /metrics and running the readiness check (/healthz needs none).
    int worker_threads = 2;
    http::HttpServerLimits limits = AdminLimits();
  };

  // The admin port's limits: an 8 KiB head of at most 64 lines, no body, 256 connections
  // (64 from one address), 5 s for a head, 60 s of keep-alive idle.
  static http::HttpServerLimits AdminLimits();
  using ReadinessCheck = std::function<absl::Status()>;

  // `metrics` must not be null. A null `readiness` means always ready.
  AdminServer(Options options, std::shared_ptr<const prometheus::Collectable> metrics,
              ReadinessCheck readiness);
  ~AdminServer();  // Stop()
  AdminServer(const AdminServer&) = delete;
  AdminServer& operator=(const AdminServer&) = delete;

  // Binds and starts serving; returns once connections are accepted. UNAVAILABLE when the
  // address cannot be bound, FAILED_PRECONDITION when already started (a stopped server
  // cannot be restarted: build a new one).
  absl::Status Start();
  // Stops accepting, closes idle connections, lets answers being computed go out, and
  // joins the threads. Idempotent.
  void Stop();

  // The bound port while serving (the chosen one when Options::port was 0); 0 before Start()
  // and after Stop().
  int port() const;

 private:
  const Options options_;
  const std::shared_ptr<const prometheus::Collectable> metrics_;
  const ReadinessCheck readiness_;
  std::optional<http::ServerResponse> CheckHead(const http::ServerRequest& head) const;
  void Handle(const http::ServerRequest& request, http::ServerResponse& response) const;

  std::unique_ptr<http::HttpServer> server_;

  mutable absl::Mutex mu_;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  int port_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace inspection::metrics

#endif  // GATEWAY_METRICS_ADMIN_SERVER_H_
