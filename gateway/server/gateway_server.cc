#include "gateway/server/gateway_server.h"

#include <algorithm>
#include <future>
#include <utility>

#include "absl/strings/str_cat.h"
#include "gateway/logging/log.h"
#include "gateway/services/background_calls.h"
#include "gateway/services/endpoints.h"

namespace inspection::server {
namespace {

// Forwards finished RPCs to the caller's observer and counts vendor drift.
class MetricsObserver final : public services::RpcObserver {
 public:
  MetricsObserver(pipeline::PipelineMetrics* metrics, services::RpcObserver* next)
      : metrics_(metrics), next_(next) {}
  void OnRpcFinished(const services::RpcRecord& record) override {
    const auto& drift = record.decode_report;
    const size_t unknown = drift.unknown_paths.size() + drift.type_mismatch_paths.size() +
                           drift.unknown_enum_paths.size();
    if (record.route != nullptr && (unknown > 0 || record.idempotency_replayed)) {
      pipeline::RouteMetrics& route = metrics_->ForRoute(static_cast<size_t>(record.route->id),
                                                         metrics_->AccountIndex(record.account));
      route.RecordVendorUnknownFields(unknown);
      if (record.idempotency_replayed) route.RecordIdempotencyReplay();
    }
    if (next_ != nullptr) next_->OnRpcFinished(record);
  }

 private:
  pipeline::PipelineMetrics* const metrics_;
  services::RpcObserver* const next_;
};

// What the endpoints' mapping reads: the settings it needs, and the reconciler's record of
// the work the gateway waits for (null reconciler: not recorded).
services::EndpointOptions EndpointOptionsOf(const GatewayServerOptions& options,
                                            reconcile::Reconciler* reconciler) {
  services::EndpointOptions out;
  out.limits = options.limits;
  out.mapper = options.mapper;
  out.webapp_url = options.webapp_url;
  if (reconciler != nullptr) {
    // On the vendor call's completion thread: queued, written by the reconciler's thread.
    out.on_damage_submitted = [reconciler](const std::string& account, const std::string& id) {
      reconciler->QueueSubmitted(account, id);
    };
    out.on_token_created = [reconciler](const std::string& account, const std::string& uid) {
      reconciler->QueueTokenCreated(account, uid);
    };
  }
  return out;
}

}  // namespace

GatewayServer::GatewayServer(GatewayServerOptions options) : options_(std::move(options)) {}

// The order is the dependency order: the vendor stub, the event pipeline (whose hub drops
// cache entries and whose reconciler polls through the stub), what the services use, the
// services and the gRPC server; then the admin endpoint, the reconciler's polls and the
// health status once everything they use exists.
absl::StatusOr<std::unique_ptr<GatewayServer>> GatewayServer::Start(GatewayServerOptions options) {
  std::unique_ptr<GatewayServer> server(new GatewayServer(std::move(options)));
  GatewayServer& s = *server;
  const GatewayServerOptions& opts = s.options_;

  auto transport = MakeTransport(opts);
  if (!transport.ok()) return transport.status();
  s.transport_ = *std::move(transport);
  auto metrics = MakeServerMetrics(opts);
  if (!metrics.ok()) return metrics.status();
  s.metrics_ = *std::move(metrics);
  s.scheduler_ = std::make_unique<timers::TimerThreadScheduler>();
  if (absl::Status made = s.MakeSpanSink(); !made.ok()) return made;
  auto stub = MakeVendorStub(
      opts, {s.transport_.get(), s.metrics_->pipeline.get(), s.scheduler_.get(), s.spans_});
  if (!stub.ok()) return stub.status();
  s.vendor_ = *std::move(stub);

  auto events = MakeEventPipeline(opts, s.metrics_->hub.get(), &s.metrics_->reconcile,
                                  s.metrics_->webhook.get(), s.vendor_.caching.get(),
                                  services::ReportFetch(&s.deps_), services::TokenFetch(&s.deps_));
  if (!events.ok()) return events.status();
  s.events_ = *std::move(events);
  s.InstallCollectHook();

  if (absl::Status wired = s.WireServiceDeps(); !wired.ok()) return wired;
  s.endpoints_ =
      std::make_unique<services::Endpoints>(EndpointOptionsOf(opts, s.events_.reconciler.get()));
  s.deps_.endpoints = s.endpoints_.get();
  s.grpc_services_ = MakeGrpcServices(s.deps_, opts.reflection);
  s.in_flight_ = std::make_shared<metrics::InFlightCalls>();
  auto grpc =
      MakeGrpcServer(opts, s.grpc_services_.all(), s.metrics_->grpc, s.in_flight_, &s.grpc_port_);
  if (!grpc.ok()) return grpc.status();
  s.server_ = *std::move(grpc);

  if (absl::Status started = s.StartAdmin(); !started.ok()) return started;
  if (s.events_.reconciler != nullptr) s.events_.reconciler->Start();
  s.grpc_services_.health->SetServingStatus("", true);
  for (const std::string& name : PublicServiceNames()) {
    s.grpc_services_.health->SetServingStatus(name, true);
  }
  s.StartHealthChecks();
  return server;
}

absl::Status GatewayServer::MakeSpanSink() {
  spans_ = options_.span_sink;
  if (spans_ != nullptr || options_.tracing.endpoint.empty()) return absl::OkStatus();
  tracing::OtlpExporterOptions tracing = options_.tracing;
  tracing.metrics = &metrics_->tracing;
  auto exporter = tracing::OtlpExporter::Create(std::move(tracing), transport_.get());
  if (!exporter.ok()) return exporter.status();
  exporter_ = std::move(*exporter);
  spans_ = exporter_.get();
  return absl::OkStatus();
}

void GatewayServer::InstallCollectHook() {
  metrics_->registry->SetCollectHook([this] {
    metrics_->transport->buffered_response_bytes.Set(
        static_cast<double>(transport_->BufferedResponseBytes()));
    if (idempotency_ != nullptr) {
      metrics_->idempotency->unsaved_outcomes.Set(
          static_cast<double>(idempotency_->UnsavedOutcomes()));
    }
  });
}

namespace {

// The idempotency store `opts` names; its failures are counted in `errors` and logged
// (at most one line a second).
absl::StatusOr<std::unique_ptr<pipeline::IdempotencyStore>> MakeIdempotencyStore(
    const GatewayServerOptions& opts, prometheus::Counter* errors) {
  pipeline::IdempotencyStoreOptions store;
  store.ttl = opts.idempotency_ttl;
  store.max_bytes = opts.idempotency_memory_max_bytes;
  store.redis_threads = static_cast<size_t>(opts.idempotency_redis_threads);
  store.max_queued_begins = static_cast<size_t>(opts.idempotency_max_queued_begins);
  store.redis = opts.redis;
  store.on_error = [errors, lines = std::make_shared<logging::LineRateLimiter>(1.0)](
                       const absl::Status& status) {
    errors->Increment();
    uint64_t suppressed = 0;
    if (!lines->Admit(&suppressed)) return;
    // Messages name host:port/db and the key, never a password.
    logging::DefaultLogger().Warn("idempotency store: " + std::string(status.message()),
                                  {{"suppressed_before", std::to_string(suppressed)}});
  };
  return pipeline::OpenIdempotencyStore(
      ResolveIdempotencyStoreUrl(opts.idempotency_store_url, opts.event_log_url), std::move(store));
}

}  // namespace

absl::Status GatewayServer::WireServiceDeps() {
  const GatewayServerOptions& opts = options_;
  services::ServiceDeps& deps = deps_;
  // WatchTokenStatus: one poller per account. Polls go through the pipeline like
  // GetTokenStatus (same route, same errors), on the poller's timer thread, never
  // blocking it.
  for (auto& account : vendor_.accounts) {
    account->poller = std::make_unique<token_watch::TokenStatusPoller>(
        opts.token_watch, services::TokenStatusFetch(&deps_, account->name), scheduler_.get());
    deps.token_pollers[account->name] = account->poller.get();
    if (!account->name.empty()) deps.vendor_accounts.insert(account->name);
  }
  auto idempotency = MakeIdempotencyStore(opts, &metrics_->idempotency->errors);
  if (!idempotency.ok()) return Prefixed(idempotency.status(), "idempotency_store: ");
  idempotency_ = std::move(*idempotency);
  deps.idempotency = idempotency_.get();
  deps.hub = events_.hub.get();
  deps.stream_queue = opts.stream_queue;
  stream_slots_ = std::make_shared<streaming::StreamSlots>(opts.stream_slots);
  deps.stream_slots = stream_slots_.get();
  deps.vendor = vendor_.caching.get();
  metrics_observer_ = std::make_unique<MetricsObserver>(metrics_->pipeline.get(), opts.observer);
  deps.observer = metrics_observer_.get();
  deps.spans = spans_;
  refused_call_lines_ =
      std::make_unique<logging::LineRateLimiter>(opts.rejected_log_lines_per_second);
  deps.rejected_lines = refused_call_lines_.get();
  if (opts.caller_limits.requests_per_second > 0 || opts.caller_limits.max_streams > 0) {
    limiter_ = std::make_shared<security::CallerLimiter>(opts.caller_limits);
    deps.limiter = limiter_.get();
  }
  if (opts.authz_policy_file.empty()) return absl::OkStatus();
  auto authz = security::AuthzPolicyWatcher::Start(
      opts.authz_policy_file, opts.authz_refresh_interval, [](const absl::Status& status) {
        logging::DefaultLogger().Error(
            "the authorization policy file no longer parses; the last good policy stays in "
            "force",
            {{"error", std::string(status.message())}});
      });
  if (!authz.ok()) return Prefixed(authz.status(), "grpc.authz_policy_file: ");
  authz_ = *std::move(authz);
  deps.authz = authz_.get();
  services::AuthzMetrics* denials = metrics_->authz.get();
  deps.on_denied = [denials](std::string_view method) { denials->RecordDenied(method); };
  return absl::OkStatus();
}

absl::Status GatewayServer::StartAdmin() {
  if (options_.admin_port < 0) return absl::OkStatus();
  metrics::AdminServer::Options admin;
  admin.host = options_.admin_host;
  admin.port = options_.admin_port;
  eventlog::EventLog* log = events_.log.get();
  const webhooks::WebhookReceiver* receiver = events_.receiver.get();
  // Ready = serving gRPC (we are past BuildAndStart), the event log takes writes, and the
  // webhook listener (when there is one) accepts connections.
  admin_ = std::make_unique<metrics::AdminServer>(
      admin, metrics_->registry, [log, receiver]() -> absl::Status {
        if (receiver != nullptr && !receiver->accepting()) {
          return absl::UnavailableError(
              "the webhook listener is not accepting connections (accept() fails)");
        }
        return log->CheckWritable();
      });
  if (absl::Status started = admin_->Start(); !started.ok()) {
    return Prefixed(started, "admin endpoint (admin_addr): ");
  }
  return absl::OkStatus();
}

void GatewayServer::StartHealthChecks() {
  constexpr char kEventService[] = "inspection.v1.EventService";
  health_thread_ = std::thread([this, kEventService] {
    bool serving = true;
    absl::MutexLock lock(&health_mu_);
    while (true) {
      // The check is I/O (a write probe): without the lock, on this thread of its own.
      health_mu_.Unlock();
      const absl::Status writable = events_.log->CheckWritable();
      health_mu_.Lock();
      if (health_stop_) return;
      if (writable.ok() != serving) {
        serving = writable.ok();
        // Ignored once Shutdown has set every service NOT_SERVING.
        grpc_services_.health->SetServingStatus(kEventService, serving);
        if (serving) {
          logging::Info("health: the event log takes writes again; EventService SERVING");
        } else {
          logging::Warn("health: the event log refuses writes; EventService NOT_SERVING",
                        {{"error", std::string(writable.message())}});
        }
      }
      auto stopping = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(health_mu_) { return health_stop_; };
      health_mu_.AwaitWithTimeout(absl::Condition(&stopping),
                                  absl::FromChrono(options_.health_check_interval));
      if (health_stop_) return;
    }
  });
}

void GatewayServer::StopIntake() {
  // No new webhooks (the vendor retries them, here or on another replica), then every
  // stream ends with UNAVAILABLE and its resumable cursor.
  if (admin_ != nullptr) admin_->Stop();
  if (events_.receiver != nullptr) events_.receiver->Stop();
  // No new polls; what is recorded stays in the ledger for the next start or a replica,
  // and what is queued for it is written now (Reconciler::Stop).
  if (events_.reconciler != nullptr) events_.reconciler->Stop();
  if (events_.hub != nullptr) events_.hub->Stop();
  for (auto& account : vendor_.accounts) {
    if (account->poller != nullptr) account->poller->Shutdown();
  }
  // Keyed calls waiting for the idempotency store (queued, or for another replica's claim)
  // end now; its begins in progress finish first, while the services they continue into
  // are all still there. Saves go on until the store goes.
  if (idempotency_ != nullptr) idempotency_->BeginShutdown();
}

void GatewayServer::Shutdown(std::chrono::milliseconds grace) {
  if (shut_down_) return;
  shut_down_ = true;
  if (server_ == nullptr) return;
  // Load balancers and health probes see NOT_SERVING before connections close.
  {
    absl::MutexLock lock(&health_mu_);
    health_stop_ = true;
  }
  if (health_thread_.joinable()) health_thread_.join();
  // Every service NOT_SERVING; health watches are told so and end.
  grpc_services_.health->Shutdown();
  StopIntake();
  // grpc::Server::Shutdown waits for every started call to finish. Calls waiting on
  // the vendor finish when their HTTP exchange ends; after the grace period the
  // transport is told to fail what is left so shutdown is bounded.
  const auto started = std::chrono::steady_clock::now();
  auto done = std::async(std::launch::async, [this, grace] {
    server_->Shutdown(std::chrono::system_clock::now() + grace);
  });
  // Shutdown also waits for idle client connections to go away, which a connected client
  // (a pooled gRPC channel) may only do at the deadline. Once no call is in flight there
  // is nothing left to drain: close those connections. Repeated, because a client may
  // reconnect if this runs before Shutdown has closed the listener; a call that slips in
  // meanwhile sees its connection drop and is retried by its client, as on any pod
  // going away.
  const absl::Time deadline = absl::Now() + absl::FromChrono(grace);
  while (in_flight_ != nullptr && in_flight_->WaitForNone(deadline) &&
         done.wait_for(std::chrono::milliseconds(0)) != std::future_status::ready) {
    grpc_server_cancel_all_calls(server_->c_server());
    if (done.wait_for(std::chrono::milliseconds(50)) == std::future_status::ready) break;
  }
  const auto left = grace + std::chrono::milliseconds(100) -
                    std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::steady_clock::now() - started);
  if (done.wait_for(std::max(left, std::chrono::milliseconds(0))) != std::future_status::ready) {
    transport_->Shutdown();
  }
  done.wait();
  // The submissions and tokens of the RPCs answered while gRPC drained were queued for the
  // ledger after the reconciler stopped: a second Stop writes them.
  if (events_.reconciler != nullptr) events_.reconciler->Stop();
  // The last spans go out (one batch, waiting at most OtlpExporter::kLastBatchTimeout)
  // while the transport still runs.
  if (exporter_ != nullptr) exporter_->Stop();
  // Vendor calls no RPC waits for (a reconciler poll, a token watch poll) may still be in
  // flight: fail them now, while the pipeline their callbacks go through still exists.
  transport_->Shutdown();
}

GatewayServer::~GatewayServer() {
  Shutdown(std::chrono::milliseconds(0));
  if (metrics_ != nullptr) metrics_->registry->SetCollectHook(nullptr);
  server_.reset();
  grpc_services_ = GrpcServices();
  events_.receiver.reset();
  events_.hub.reset();
  events_.reconciler.reset();
  for (auto& account : vendor_.accounts) account->poller.reset();
  // Pending retry timers hold calls: run down the timer thread before the pipeline.
  scheduler_.reset();
  vendor_.caching.reset();
  vendor_.router.reset();
  vendor_.accounts.clear();
  events_.log.reset();
  events_.ledger.reset();
  // The exporter sends through the transport: gone first (also on a start that failed
  // before Shutdown had anything to stop).
  exporter_.reset();
  transport_.reset();
}

}  // namespace inspection::server
