#include "gateway/server/gateway_server.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <future>
#include <iterator>
#include <map>
#include <thread>

#include <unistd.h>

#include <grpc/grpc.h>
#include <grpcpp/impl/server_builder_option.h>
#include <grpcpp/impl/server_builder_plugin.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_credentials_options.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "adapters/hashing/sha256.h"
#include "adapters/http/beast_transport.h"
#include "adapters/http/curl_transport.h"
#include "adapters/vendor/inspection_mapper.h"
#include "adapters/vendor/token_mapper.h"
#include "gateway/logging/log.h"
#include "gateway/metrics/grpc_server_metrics.h"
#include "gateway/services/damage_service.h"
#include "gateway/services/event_config_service.h"
#include "gateway/services/event_service.h"
#include "gateway/services/health_service.h"
#include "gateway/services/image_service.h"
#include "gateway/services/inspection_service.h"
#include "gateway/services/reflection_service.h"
#include "gateway/services/token_service.h"
#include "gateway/token_watch/token_watch.h"
#include "gateway/tracing/trace_context.h"
#include "google/protobuf/wrappers.pb.h"

namespace inspection::server {
namespace {

// The gRPC listener's credentials: plaintext, TLS, or mTLS (GrpcTlsOptions). The files
// must be readable now (a typo is a start-up error, not a listener that fails every
// handshake); later changes are picked up by gRPC's file watcher.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ListenerCredentials(
    const GrpcTlsOptions& tls) {
  if (!tls.enabled()) return grpc::InsecureServerCredentials();
  if (tls.key_file.empty()) {
    return absl::InvalidArgumentError("grpc.tls: cert_file needs key_file");
  }
  for (const auto& [key, path] :
       {std::pair<const char*, const std::string*>{"cert_file", &tls.cert_file},
        {"key_file", &tls.key_file},
        {"client_ca_file", &tls.client_ca_file}}) {
    if (path->empty()) continue;
    std::ifstream file(*path);
    std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
    if (!file.good() && !file.eof()) {
      return absl::InvalidArgumentError(absl::StrCat("grpc.tls.", key, ": cannot read ", *path));
    }
    if (text.find("-----BEGIN ") == std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("grpc.tls.", key, ": ", *path, " holds no PEM block"));
    }
  }
  const auto refresh =
      static_cast<unsigned int>(std::max<int64_t>(1, tls.refresh_interval.count()));
  std::shared_ptr<grpc::experimental::CertificateProviderInterface> provider;
  if (tls.client_ca_file.empty()) {
    provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
        tls.key_file, tls.cert_file, refresh);
  } else {
    provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
        tls.key_file, tls.cert_file, tls.client_ca_file, refresh);
  }
  grpc::experimental::TlsServerCredentialsOptions options(provider);
  options.watch_identity_key_cert_pairs();
  if (tls.client_ca_file.empty()) {
    options.set_cert_request_type(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  } else {
    options.watch_root_certs();
    options.set_cert_request_type(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  }
  return grpc::experimental::TlsServerCredentials(options);
}

// A ServerBuilderOption that removes gRPC's server reflection plugin from one builder. The
// gateway serves reflection itself (services/reflection_service.h, behind the authorization
// policy) and does not link libgrpc++_reflection; should anything load it into the process
// (its static initializer registers the plugin for every server), its ungated service
// must still not be served.
class WithoutReflection final : public grpc::ServerBuilderOption {
 public:
  void UpdateArguments(grpc::ChannelArguments*) override {}
  void UpdatePlugins(std::vector<std::unique_ptr<grpc::ServerBuilderPlugin>>* plugins) override {
    plugins->erase(std::remove_if(plugins->begin(), plugins->end(),
                                  [](const std::unique_ptr<grpc::ServerBuilderPlugin>& plugin) {
                                    return plugin->name() == "proto_server_reflection";
                                  }),
                   plugins->end());
  }
};

constexpr const char* kServiceNames[] = {
    "inspection.v1.TokenService",       "inspection.v1.ImageService",
    "inspection.v1.DamageService",      "inspection.v1.InspectionService",
    "inspection.v1.EventConfigService", "inspection.v1.EventService"};

// Every RPC of the public services, for the gRPC metrics (bounded label values).
std::vector<metrics::GrpcMethodSpec> PublicMethods() {
  std::vector<metrics::GrpcMethodSpec> methods;
  const auto* pool = google::protobuf::DescriptorPool::generated_pool();
  for (const char* name : kServiceNames) {
    const auto* service = pool->FindServiceByName(name);
    if (service == nullptr) continue;
    for (int i = 0; i < service->method_count(); ++i) {
      const auto* method = service->method(i);
      methods.push_back({service->full_name(), method->name(),
                         method->server_streaming() ? metrics::GrpcType::kServerStream
                                                    : metrics::GrpcType::kUnary});
    }
  }
  return methods;
}

// Forwards finished RPCs to the caller's observer and counts vendor drift.
class MetricsObserver final : public services::RpcObserver {
 public:
  MetricsObserver(metrics::GatewayMetrics* metrics, services::RpcObserver* next)
      : metrics_(metrics), next_(next) {}
  void OnRpcFinished(const services::RpcRecord& record) override {
    const auto& drift = record.decode_report;
    const size_t unknown = drift.unknown_paths.size() + drift.type_mismatch_paths.size() +
                           drift.unknown_enum_paths.size();
    if (record.route != nullptr && (unknown > 0 || record.idempotency_replayed)) {
      metrics::RouteMetrics& route = metrics_->ForRoute(static_cast<size_t>(record.route->id),
                                                        metrics_->AccountIndex(record.account));
      route.RecordVendorUnknownFields(unknown);
      if (record.idempotency_replayed) route.RecordIdempotencyReplay();
    }
    if (next_ != nullptr) next_->OnRpcFinished(record);
  }

 private:
  metrics::GatewayMetrics* const metrics_;
  services::RpcObserver* const next_;
};

// The `upstream` label of a named account's breaker: "vendor.<name>", '-' shown as '_'
// (label values are [A-Za-z0-9_.], which keeps ids such as UUIDs out of them). Two names
// differing only there are refused by GatewayMetrics::Create as a duplicate label.
std::string UpstreamLabel(const std::string& account) {
  std::string label = absl::StrCat("vendor.", account);
  std::replace(label.begin(), label.end(), '-', '_');
  return label;
}

// The cache scope of a vendor account: a hash of its upstream URL and API key (never the
// key itself), so accounts share no entry even when one key serves two upstreams.
std::string CacheScope(const std::string& base_url, const std::string& api_key) {
  return hashing::Sha256Hex(absl::StrCat(base_url, "\n", api_key)).substr(0, 32);
}

// A vendor call no RPC waits for (a poll of the token watch or the reconciler), through
// the call core like the RPCs (pipeline, log line with `origin`, drift metrics, error
// mapping), bypassing the cache: a poll wants the vendor's current answer, and refreshes
// the cache.
template <class Request, class Response>
void BackgroundCall(const services::ServiceDeps& deps,
                    const services::UnaryEndpoint<Request, Response>& endpoint,
                    std::shared_ptr<const Request> request, std::string_view origin,
                    const std::string& account,
                    absl::AnyInvocable<void(services::EndpointResult<Response>) &&> done) {
  services::RpcRecord record;
  record.origin = origin;
  record.account = account;
  services::CallEndpoint<Request, Response>(
      deps, endpoint, std::move(request),
      std::chrono::system_clock::now() + routes::GetRoute(endpoint.route).timeout,
      upstream::CallOptions{.request_id = "", .account = account, .bypass_cache = true},
      /*idempotency_key=*/"", std::move(record), std::chrono::steady_clock::now(), std::move(done));
}

absl::Status ToAbsl(const grpc::Status& status) {
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

const services::UnaryEndpoint<v1::GetTokenStatusRequest, v1::GetTokenStatusResponse>&
TokenStatusEndpoint() {
  static const auto* const kEndpoint =
      new services::UnaryEndpoint<v1::GetTokenStatusRequest, v1::GetTokenStatusResponse>(
          services::GetTokenStatusEndpoint());
  return *kEndpoint;
}

// WatchTokenStatus's poll of one account: GetTokenStatus through the pipeline (its log
// line at debug level).
token_watch::FetchStatus TokenStatusFetch(const services::ServiceDeps* deps, std::string account) {
  return [deps, account = std::move(account)](
             const std::string& uid, absl::AnyInvocable<void(token_watch::PollResult) &&> done) {
    auto request = std::make_shared<v1::GetTokenStatusRequest>();
    request->set_uid(uid);
    BackgroundCall<v1::GetTokenStatusRequest, v1::GetTokenStatusResponse>(
        *deps, TokenStatusEndpoint(), std::move(request), "token_watch", account,
        [done = std::move(done)](services::EndpointResult<v1::GetTokenStatusResponse> out) mutable {
          // The error as GetTokenStatus answers it (details included): the watch ends with it.
          if (!out.status.ok()) {
            std::move(done)(std::move(out.status));
            return;
          }
          std::move(done)(std::move(out.response));
        });
  };
}

// The reconciler's poll of one inspection's damages report: GetDamagesReport, the body
// kept as JSON text (lossless: the reconciler appends it unchanged).
reconcile::FetchReport ReportFetch(const services::ServiceDeps* deps) {
  using Endpoint =
      services::UnaryEndpoint<v1::GetDamagesReportRequest, google::protobuf::StringValue>;
  static const auto* const kEndpoint = new Endpoint{
      routes::RouteId::kGetDamagesReport,
      [](const v1::GetDamagesReportRequest& r) { return validation::ValidateGetDamagesReport(r); },
      [](const v1::GetDamagesReportRequest& r) { return vendor::EncodeGetDamagesReportRequest(r); },
      [](const nlohmann::json& j, const v1::GetDamagesReportRequest&,
         google::protobuf::StringValue* out, vendor::DecodeReport*) {
        out->set_value(j.dump());
        return absl::OkStatus();
      },
      /*idempotency_key=*/nullptr,
      /*on_success=*/nullptr};
  return [deps](const std::string& account, const std::string& inspection_id,
                absl::AnyInvocable<void(absl::StatusOr<std::string>) &&> done) {
    auto request = std::make_shared<v1::GetDamagesReportRequest>();
    request->set_inspection_id(inspection_id);
    BackgroundCall<v1::GetDamagesReportRequest, google::protobuf::StringValue>(
        *deps, *kEndpoint, std::move(request), "reconcile", account,
        [done =
             std::move(done)](services::EndpointResult<google::protobuf::StringValue> out) mutable {
          if (!out.status.ok()) {
            std::move(done)(ToAbsl(out.status));
            return;
          }
          std::move(done)(std::move(*out.response.mutable_value()));
        });
  };
}

// The reconciler's poll of one token: GetTokenStatus.
reconcile::FetchToken TokenFetch(const services::ServiceDeps* deps) {
  return [deps](const std::string& account, const std::string& uid,
                absl::AnyInvocable<void(absl::StatusOr<reconcile::TokenState>) &&> done) {
    auto request = std::make_shared<v1::GetTokenStatusRequest>();
    request->set_uid(uid);
    BackgroundCall<v1::GetTokenStatusRequest, v1::GetTokenStatusResponse>(
        *deps, TokenStatusEndpoint(), std::move(request), "reconcile", account,
        [done = std::move(done)](services::EndpointResult<v1::GetTokenStatusResponse> out) mutable {
          if (!out.status.ok()) {
            std::move(done)(ToAbsl(out.status));
            return;
          }
          const v1::Token& token = out.response.token();
          reconcile::TokenState state;
          state.completed = token.tradein_status() == v1::TRADEIN_STATUS_COMPLETED;
          state.expired = token.expired();
          state.inspection_id = token.inspection_ptr().id();
          std::move(done)(std::move(state));
        });
  };
}

// This replica's name in the work ledger's claims: host, pid and a random part (a
// restarted process with the same pid is another owner).
std::string ReplicaName() {
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  return absl::StrCat(host[0] != '\0' ? host : "gateway", "-", getpid(), "-",
                      tracing::Hex(tracing::NewSpanId()).substr(0, 8));
}

}  // namespace

absl::StatusOr<std::unique_ptr<eventlog::WorkLedger>> OpenWorkLedger(
    const std::string& ledger_url, const std::string& event_log_url) {
  const std::string& url = ledger_url.empty() ? event_log_url : ledger_url;
  if (url.rfind("sqlite:", 0) == 0) {
    // Beside the event log: a file of its own, so the two never wait for each other's lock.
    return eventlog::OpenSqliteWorkLedger(ledger_url.empty() ? absl::StrCat(url.substr(7), ".work")
                                                             : url.substr(7));
  }
  if (url.rfind("redis://", 0) == 0) return eventlog::OpenRedisWorkLedger(url);
  return absl::InvalidArgumentError("reconcile.ledger must be sqlite:<path> or redis://host:port");
}

absl::StatusOr<std::unique_ptr<eventlog::EventLog>> OpenEventLog(
    const std::string& url, const eventlog::RetentionPolicy& retention) {
  if (url.rfind("sqlite:", 0) == 0) return eventlog::OpenSqliteEventLog(url.substr(7), retention);
  if (url.rfind("redis://", 0) == 0) return eventlog::OpenRedisEventLog(url, retention);
  return absl::InvalidArgumentError("event_log must be sqlite:<path> or redis://host:port");
}

HttpClientChoice ChooseHttpClient(const GatewayServerOptions& options,
                                  const char* (*getenv)(const char*)) {
  if (getenv == nullptr) getenv = [](const char* name) -> const char* { return std::getenv(name); };
  switch (options.http_client) {
    case VendorHttpClient::kBeast:
      return {VendorHttpClient::kBeast, "upstream.http_client is beast"};
    case VendorHttpClient::kCurl:
      return {VendorHttpClient::kCurl, "upstream.http_client is curl"};
    case VendorHttpClient::kAuto:
      break;
  }
  std::vector<std::string> urls = {options.vendor.base_url};
  for (const VendorAccountOptions& account : options.accounts) urls.push_back(account.base_url);
  for (const std::string& url : urls) {
    if (!absl::StartsWithIgnoreCase(url, "http://")) {
      return {VendorHttpClient::kCurl,
              "auto: an https:// vendor URL (HTTP/2 where the vendor offers it)"};
    }
  }
  for (const char* name : {"http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"}) {
    const char* value = getenv(name);
    if (value != nullptr && value[0] != '\0') {
      return {VendorHttpClient::kCurl, absl::StrCat("auto: ", name, " is set (a proxy)")};
    }
  }
  return {VendorHttpClient::kBeast, "auto: every vendor URL is http:// and no proxy is set"};
}

GatewayServer::GatewayServer(GatewayServerOptions options) : options_(std::move(options)) {}

absl::StatusOr<std::unique_ptr<GatewayServer>> GatewayServer::Start(GatewayServerOptions options) {
  std::unique_ptr<GatewayServer> server(new GatewayServer(std::move(options)));
  GatewayServerOptions& opts = server->options_;

  server->transport_ = opts.transport;
  if (server->transport_ == nullptr) {
    const HttpClientChoice choice = ChooseHttpClient(opts);
    logging::Info("vendor HTTP client",
                  {{"client", choice.client == VendorHttpClient::kBeast ? "beast" : "curl"},
                   {"reason", choice.reason}});
    absl::StatusOr<std::unique_ptr<http::HttpTransport>> transport;
    if (choice.client == VendorHttpClient::kBeast) {
      http::BeastTransportOptions beast;
      beast.connect_timeout = opts.connect_timeout;
      beast.max_total_connections = static_cast<size_t>(opts.max_connections);
      beast.ca_file = opts.upstream_ca_file;
      beast.max_response_bytes = opts.max_response_bytes;
      beast.max_response_head_bytes = opts.max_response_head_bytes;
      beast.max_response_header_count = opts.max_response_header_count;
      beast.max_buffered_response_bytes = opts.max_buffered_response_bytes;
      beast.guaranteed_response_bytes = opts.guaranteed_response_bytes;
      transport = http::BeastTransport::Create(beast);
    } else {
      http::CurlTransportOptions curl;
      curl.connect_timeout = opts.connect_timeout;
      curl.max_total_connections = opts.max_connections;
      curl.ca_file = opts.upstream_ca_file;
      curl.max_response_bytes = opts.max_response_bytes;
      curl.max_response_head_bytes = opts.max_response_head_bytes;
      curl.max_response_header_count = opts.max_response_header_count;
      curl.max_buffered_response_bytes = opts.max_buffered_response_bytes;
      curl.guaranteed_response_bytes = opts.guaranteed_response_bytes;
      transport = http::CurlTransport::Create(curl);
    }
    if (!transport.ok()) return transport.status();
    server->transport_ = std::shared_ptr<http::HttpTransport>(std::move(*transport));
  }
  // Metrics, registered once with bounded label sets (route labels from the route table,
  // upstream labels from the configured accounts).
  metrics::GatewayMetricsConfig metrics_config;
  for (const routes::Route& route : routes::AllRoutes()) {
    metrics_config.routes.emplace_back(route.metric_label);
  }
  metrics_config.grpc_methods = PublicMethods();
  metrics_config.accounts = {std::string(metrics::kDefaultAccountLabel)};
  metrics_config.upstreams = {"vendor"};
  for (const VendorAccountOptions& account : opts.accounts) {
    metrics_config.accounts.push_back(account.name);
    metrics_config.upstreams.push_back(UpstreamLabel(account.name));
  }
  metrics_config.stream_rpcs = {"Subscribe", "StreamDamageResults", "WatchTokenStatus"};
  auto gateway_metrics = metrics::GatewayMetrics::Create(metrics_config);
  if (!gateway_metrics.ok()) return gateway_metrics.status();
  server->metrics_ = std::move(*gateway_metrics);
  opts.retry.metrics = server->metrics_.get();

  // The one place the pipeline is composed (DESIGN §4): per vendor account, a retry loop
  // and circuit breaker over its vendor client; an account router over those; the
  // response cache over the router (idempotency keys sit above it, in the services).
  server->scheduler_ = std::make_unique<timers::TimerThreadScheduler>();
  if (!resilience::BackoffPolicy::Create(opts.retry.backoff).ok()) {
    return absl::InvalidArgumentError("invalid retry backoff settings");
  }
  // Spans: the injected sink, or an OTLP exporter when tracing.otlp_endpoint is set.
  server->spans_ = opts.span_sink;
  if (server->spans_ == nullptr && !opts.tracing.endpoint.empty()) {
    auto exporter = tracing::OtlpExporter::Create(opts.tracing, server->transport_.get());
    if (!exporter.ok()) return exporter.status();
    server->exporter_ = std::move(*exporter);
    server->spans_ = server->exporter_.get();
  }
  opts.vendor.spans = server->spans_;
  opts.vendor.account_label = std::string(metrics::kDefaultAccountLabel);
  if (absl::Status added = server->AddAccount("", opts.vendor, 0); !added.ok()) return added;
  std::map<std::string, std::string> scopes = {
      {"", CacheScope(opts.vendor.base_url, opts.vendor.api_key)}};
  for (size_t i = 0; i < opts.accounts.size(); ++i) {
    const VendorAccountOptions& account = opts.accounts[i];
    if (account.name.empty() || account.name == services::kDefaultAccountName ||
        scopes.count(account.name) > 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("vendor account names must be unique, non-empty and not \"default\": \"",
                       account.name, "\""));
    }
    upstream::VendorClientOptions vendor = opts.vendor;
    vendor.base_url = account.base_url;
    vendor.api_key = account.api_key;
    vendor.account_label = account.name;
    if (absl::Status added = server->AddAccount(account.name, std::move(vendor), i + 1);
        !added.ok()) {
      return added;
    }
    scopes[account.name] = CacheScope(account.base_url, account.api_key);
  }
  std::map<std::string, upstream::VendorCaller*> routed;
  for (const auto& account : server->accounts_) routed[account->name] = account->retrying.get();
  server->router_ = std::make_unique<pipeline::AccountRouter>(std::move(routed));
  // The cache sits above the retry loop: a hit or a coalesced call costs no attempt,
  // and stale-if-error sees the final outcome of the retries. Entries are scoped by a
  // hash of the account's upstream and API key: two accounts never share one.
  pipeline::CachingOptions cache_options = opts.cache;
  cache_options.metrics = server->metrics_.get();
  cache_options.clock = opts.retry.clock;
  cache_options.timers = server->scheduler_.get();
  cache_options.account_scope = [scopes = std::move(scopes)](const std::string& account) {
    auto it = scopes.find(account);
    // The router refuses unknown accounts; their (failed) calls are never stored.
    return it == scopes.end() ? absl::StrCat("unknown:", account) : it->second;
  };
  server->caching_ =
      std::make_unique<pipeline::CachingCaller>(server->router_.get(), std::move(cache_options));
  server->pipeline_ = server->caching_.get();

  server->event_log_ = opts.event_log;
  if (server->event_log_ == nullptr) {
    auto log = OpenEventLog(opts.event_log_url, opts.retention);
    if (!log.ok()) {
      return absl::Status(log.status().code(), absl::StrCat("event_log: ", log.status().message()));
    }
    server->event_log_ = std::shared_ptr<eventlog::EventLog>(std::move(*log));
  }
  server->webhook_less_ = opts.webhook_less || opts.webhook.current_key.empty();
  if (absl::Status started = server->StartReconciler(); !started.ok()) return started;
  streaming::EventHub::Options hub_options = opts.hub;
  hub_options.metrics = server->metrics_.get();
  pipeline::CachingCaller* caching = server->caching_.get();
  reconcile::Reconciler* reconciler = server->reconciler_.get();
  // Every replica tails the shared log, so each one drops what an event makes stale, and
  // a createReport resolves its inspection in the work ledger (queued: no I/O here).
  hub_options.on_event = [caching, reconciler](const eventlog::StoredEvent& stored) {
    caching->OnInspectionEvent(stored.event.inspection_id);
    if (reconciler != nullptr) reconciler->QueueObserved(stored.event);
  };
  server->hub_ = std::make_unique<streaming::EventHub>(server->event_log_.get(), hub_options);
  if (absl::Status started = server->hub_->Start(); !started.ok()) return started;
  for (const webhooks::WebhookAccount& account : opts.webhook.accounts) {
    if (std::none_of(opts.accounts.begin(), opts.accounts.end(),
                     [&](const VendorAccountOptions& a) { return a.name == account.name; })) {
      return absl::InvalidArgumentError(
          absl::StrCat("webhook receiver: account \"", account.name,
                       "\" receives webhooks but is not a configured vendor account"));
    }
  }
  if (!opts.webhook.accounts.empty() && opts.webhook.current_key.empty()) {
    return absl::InvalidArgumentError(
        "webhook receiver: named accounts receive webhooks only when the default account's "
        "webhook key is set (it starts the receiver)");
  }
  if (!server->webhook_less_) {
    opts.webhook.rejected_lines_per_second = opts.rejected_log_lines_per_second;
    auto receiver = webhooks::WebhookReceiver::Start(opts.webhook, server->event_log_.get());
    if (!receiver.ok()) {
      return absl::Status(receiver.status().code(),
                          absl::StrCat("webhook receiver: ", receiver.status().message()));
    }
    server->receiver_ = std::move(*receiver);
  }
  server->metrics_->SetUpstreamBufferedResponseLimitBytes(opts.max_buffered_response_bytes);
  {
    GatewayServer* self = server.get();
    server->metrics_->SetCollectHook([self] {
      self->SyncReceiverMetrics();
      self->SyncReconcileMetrics();
      self->SyncTracingMetrics();
      self->metrics_->SetUpstreamBufferedResponseBytes(self->transport_->BufferedResponseBytes());
    });
  }

  // WatchTokenStatus: one poller per account. Polls go through the pipeline like
  // GetTokenStatus (same route, same errors), on the poller's timer thread, never
  // blocking it.
  for (auto& account : server->accounts_) {
    account->poller = std::make_unique<token_watch::TokenStatusPoller>(
        opts.token_watch, TokenStatusFetch(&server->deps_, account->name),
        server->scheduler_.get());
  }

  auto idempotency = pipeline::OpenIdempotencyStore(
      opts.idempotency_store_url, opts.idempotency_ttl, opts.idempotency_memory_max_bytes);
  if (!idempotency.ok()) {
    return absl::Status(idempotency.status().code(),
                        absl::StrCat("idempotency_store: ", idempotency.status().message()));
  }
  server->idempotency_ = std::move(*idempotency);

  services::ServiceDeps& deps = server->deps_;
  deps.idempotency = server->idempotency_.get();
  for (const auto& account : server->accounts_) {
    deps.token_pollers[account->name] = account->poller.get();
    if (!account->name.empty()) deps.vendor_accounts.insert(account->name);
  }
  deps.hub = server->hub_.get();
  if (reconciler != nullptr) {
    // On the vendor call's completion thread: queued, written by the reconciler's thread.
    deps.on_damage_submitted = [reconciler](const std::string& account, const std::string& id) {
      reconciler->QueueSubmitted(account, id);
    };
    deps.on_token_created = [reconciler](const std::string& account, const std::string& uid) {
      reconciler->QueueTokenCreated(account, uid);
    };
  }
  deps.stream_queue = opts.stream_queue;
  server->stream_slots_ = std::make_shared<streaming::StreamSlots>(opts.stream_slots);
  deps.stream_slots = server->stream_slots_.get();
  deps.vendor = server->pipeline_;
  deps.mapper_options = opts.mapper;
  deps.limits = opts.limits;
  deps.webapp_url = opts.webapp_url;
  server->metrics_observer_ =
      std::make_unique<MetricsObserver>(server->metrics_.get(), opts.observer);
  deps.observer = server->metrics_observer_.get();
  deps.spans = server->spans_;
  server->refused_call_lines_ =
      std::make_unique<logging::LineRateLimiter>(opts.rejected_log_lines_per_second);
  deps.rejected_lines = server->refused_call_lines_.get();
  if (opts.caller_limits.requests_per_second > 0 || opts.caller_limits.max_streams > 0) {
    server->limiter_ = std::make_shared<security::CallerLimiter>(opts.caller_limits);
    deps.limiter = server->limiter_.get();
  }
  if (!opts.authz_policy_file.empty()) {
    auto authz = security::AuthzPolicyWatcher::Start(
        opts.authz_policy_file, opts.authz_refresh_interval, [](const absl::Status& status) {
          logging::DefaultLogger().Error(
              "the authorization policy file no longer parses; the last good policy stays in "
              "force",
              {{"error", std::string(status.message())}});
        });
    if (!authz.ok()) {
      return absl::Status(authz.status().code(),
                          absl::StrCat("grpc.authz_policy_file: ", authz.status().message()));
    }
    server->authz_ = *std::move(authz);
    deps.authz = server->authz_.get();
    metrics::GatewayMetrics* metrics = server->metrics_.get();
    deps.on_denied = [metrics](std::string_view method) { metrics->RecordAuthzDenied(method); };
  }

  server->services_.push_back(std::make_unique<services::TokenServiceImpl>(deps));
  server->services_.push_back(std::make_unique<services::ImageServiceImpl>(deps));
  server->services_.push_back(std::make_unique<services::DamageServiceImpl>(deps));
  server->services_.push_back(std::make_unique<services::InspectionServiceImpl>(deps));
  server->services_.push_back(std::make_unique<services::EventConfigServiceImpl>(deps));
  server->services_.push_back(std::make_unique<services::EventServiceImpl>(deps));

  // gRPC's health service and server reflection, served by our own code so that the
  // authorization policy (and the stream limits) decide who may call them like any RPC:
  // gRPC's built-in health service and reflection plugin never call into the gateway.
  server->health_ = std::make_unique<services::HealthService>(deps);
  if (opts.reflection) {
    std::vector<std::string> names(std::begin(kServiceNames), std::end(kServiceNames));
    names.push_back(services::HealthService::kServiceName);
    names.push_back(services::ReflectionService::kV1ServiceName);
    names.push_back(services::ReflectionService::kV1AlphaServiceName);
    server->reflection_ = std::make_unique<services::ReflectionService>(deps, std::move(names));
  }
  grpc::ServerBuilder builder;
  builder.SetOption(std::make_unique<WithoutReflection>());
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials =
      ListenerCredentials(opts.tls);
  if (!credentials.ok()) return credentials.status();
  builder.AddListeningPort(opts.grpc_addr, *credentials, &server->grpc_port_);
  // Deliberate limits instead of gRPC's defaults (4 MiB messages, unbounded streams, pings
  // from clients as often as they like).
  const GrpcServerLimits& limits = opts.grpc_limits;
  builder.SetMaxReceiveMessageSize(limits.max_receive_message_bytes);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, limits.max_concurrent_streams);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
                             limits.keepalive_min_client_interval_ms);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 2);
  // The port is this process's alone. gRPC allows SO_REUSEPORT by default, so a second
  // gateway started on the same port by mistake would start "fine" and silently take half
  // of the connections; without it, that second start fails (grpc_addr in use).
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  // Long-lived streams (Subscribe) may be idle between events: their pings are welcome.
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, limits.keepalive_time_ms);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, limits.keepalive_timeout_ms);
  for (auto& service : server->services_) builder.RegisterService(service.get());
  builder.RegisterService(server->health_.get());
  if (server->reflection_ != nullptr) {
    for (grpc::Service* service : server->reflection_->grpc_services()) {
      builder.RegisterService(service);
    }
  }
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
  server->in_flight_ = std::make_shared<metrics::InFlightCalls>();
  interceptors.push_back(std::make_unique<metrics::GrpcServerMetricsInterceptorFactory>(
      server->metrics_, server->in_flight_));
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr || server->grpc_port_ == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen for gRPC on ", opts.grpc_addr,
                     " (grpc_addr): the address is in use by another process, or not a local "
                     "address"));
  }
  if (opts.admin_port >= 0) {
    metrics::AdminServer::Options admin;
    admin.host = opts.admin_host;
    admin.port = opts.admin_port;
    eventlog::EventLog* log = server->event_log_.get();
    const webhooks::WebhookReceiver* receiver = server->receiver_.get();
    // Ready = serving gRPC (we are past BuildAndStart), the event log takes writes, and
    // the webhook listener (when there is one) accepts connections.
    server->admin_ = std::make_unique<metrics::AdminServer>(
        admin, server->metrics_, [log, receiver]() -> absl::Status {
          if (receiver != nullptr && !receiver->accepting()) {
            return absl::UnavailableError(
                "the webhook listener is not accepting connections (accept() fails)");
          }
          return log->CheckWritable();
        });
    if (absl::Status started = server->admin_->Start(); !started.ok()) {
      return absl::Status(started.code(),
                          absl::StrCat("admin endpoint (admin_addr): ", started.message()));
    }
  }
  if (reconciler != nullptr) reconciler->Start();
  server->health_->SetServingStatus("", true);
  for (const char* name : kServiceNames) server->health_->SetServingStatus(name, true);
  server->StartHealthChecks();
  return server;
}

absl::Status GatewayServer::AddAccount(const std::string& name,
                                       upstream::VendorClientOptions vendor,
                                       size_t upstream_index) {
  auto account = std::make_unique<AccountPipeline>();
  account->name = name;
  account->client = std::make_unique<upstream::VendorClient>(std::move(vendor), transport_.get());
  auto budget = resilience::RetryBudget::Create(options_.retry_budget);
  if (!budget.ok()) return budget.status();
  account->budget = std::move(*budget);
  metrics::GatewayMetrics* metrics = metrics_.get();
  auto breaker = resilience::CircuitBreaker::Create(
      options_.circuit_breaker, options_.retry.clock,
      [metrics, upstream_index](resilience::CircuitState, resilience::CircuitState to) {
        metrics->ForUpstream(upstream_index).RecordTransition(to);
      });
  if (!breaker.ok()) return breaker.status();
  account->breaker = std::move(*breaker);
  pipeline::RetryOptions retry = options_.retry;
  retry.metrics_account = upstream_index;  // accounts and upstreams share their order
  account->retrying = std::make_unique<pipeline::RetryingCaller>(
      account->client.get(), std::move(retry), account->budget.get(), account->breaker.get(),
      scheduler_.get());
  accounts_.push_back(std::move(account));
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
      const absl::Status writable = event_log_->CheckWritable();
      health_mu_.Lock();
      if (health_stop_) return;
      if (writable.ok() != serving) {
        serving = writable.ok();
        // Ignored once Shutdown has set every service NOT_SERVING.
        health_->SetServingStatus(kEventService, serving);
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

absl::Status GatewayServer::StartReconciler() {
  const ReconcileSettings& settings = options_.reconcile;
  if (!settings.enabled) return absl::OkStatus();
  ledger_ = settings.ledger;
  if (ledger_ == nullptr) {
    if (options_.event_log != nullptr && settings.ledger_url.empty()) {
      logging::Info(
          "reconciliation is off: the event log is injected and no work ledger is configured");
      return absl::OkStatus();
    }
    auto ledger = OpenWorkLedger(settings.ledger_url, options_.event_log_url);
    if (!ledger.ok()) {
      return absl::Status(ledger.status().code(),
                          absl::StrCat("reconcile.ledger: ", ledger.status().message()));
    }
    ledger_ = std::shared_ptr<eventlog::WorkLedger>(std::move(*ledger));
  }
  reconcile::ReconcilerOptions reconciler = settings.reconciler;
  reconciler.webhook_less = webhook_less_;
  reconciler.owner = ReplicaName();
  reconciler_ = std::make_unique<reconcile::Reconciler>(std::move(reconciler), ledger_.get(),
                                                        event_log_.get(), ReportFetch(&deps_),
                                                        TokenFetch(&deps_));
  logging::Info(
      "reconciliation on",
      {{"mode", webhook_less_ ? "poll (no webhooks)" : "webhook"},
       {"after_ms", std::to_string(absl::ToInt64Milliseconds(settings.reconciler.after))}});
  return absl::OkStatus();
}

void GatewayServer::SyncTracingMetrics() {
  if (exporter_ == nullptr) return;
  const tracing::OtlpExporter::Stats now = exporter_->stats();
  absl::MutexLock lock(&tracing_metrics_mu_);
  tracing::OtlpExporter::Stats& seen = tracing_reported_;
  metrics_->RecordTraceSpans(now.exported - seen.exported,
                             now.dropped_queue_full - seen.dropped_queue_full,
                             now.dropped_export_failed - seen.dropped_export_failed,
                             now.export_requests_failed - seen.export_requests_failed);
  seen = now;
}

void GatewayServer::SyncReconcileMetrics() {
  if (reconciler_ == nullptr) return;
  const reconcile::Reconciler::Stats now = reconciler_->stats();
  absl::MutexLock lock(&reconcile_metrics_mu_);
  reconcile::Reconciler::Stats& seen = reconcile_reported_;
  auto delta = [](int64_t now_value, int64_t& seen_value) {
    const uint64_t d = now_value > seen_value ? static_cast<uint64_t>(now_value - seen_value) : 0;
    seen_value = std::max(seen_value, now_value);
    return d;
  };
  metrics::GatewayMetrics& m = *metrics_;
  m.RecordReconcilePolls(/*token=*/false, delta(now.polls, seen.polls));
  m.RecordReconcilePolls(/*token=*/true, delta(now.token_polls, seen.token_polls));
  m.RecordReconcileRecovered(webhook_less_, delta(now.recovered, seen.recovered));
  m.RecordReconcileLedgerErrors(delta(now.ledger_errors, seen.ledger_errors));
  m.RecordReconcileGivenUp(delta(now.given_up, seen.given_up));
  m.SetReconcileOverdue(now.overdue);
}

const GatewayServer::AccountPipeline& GatewayServer::Account(const std::string& name) const {
  for (const auto& account : accounts_) {
    if (account->name == name) return *account;
  }
  // A programming error in a caller (tests): the accessors take configured names only.
  std::fprintf(stderr, "GatewayServer: no vendor account named \"%s\"\n", name.c_str());
  std::abort();
}

void GatewayServer::SyncReceiverMetrics() {
  if (receiver_ == nullptr) return;
  const webhooks::WebhookReceiverStats now = receiver_->stats();
  absl::MutexLock lock(&receiver_metrics_mu_);
  webhooks::WebhookReceiverStats& seen = receiver_reported_;
  auto delta = [](int64_t now_value, int64_t& seen_value) {
    const uint64_t d = now_value > seen_value ? static_cast<uint64_t>(now_value - seen_value) : 0;
    seen_value = std::max(seen_value, now_value);
    return d;
  };
  using metrics::WebhookOutcome;
  metrics::GatewayMetrics& m = *metrics_;
  const uint64_t accepted = delta(now.accepted, seen.accepted);
  const uint64_t store_failures = delta(now.store_failures, seen.store_failures);
  m.RecordWebhookDelivery(WebhookOutcome::kAccepted, accepted);
  m.RecordWebhookDelivery(WebhookOutcome::kDuplicate, delta(now.duplicates, seen.duplicates));
  m.RecordWebhookDelivery(WebhookOutcome::kUnauthorized,
                          delta(now.unauthorized, seen.unauthorized));
  m.RecordWebhookDelivery(WebhookOutcome::kTooLarge, delta(now.too_large, seen.too_large));
  m.RecordWebhookDelivery(WebhookOutcome::kBadJson, delta(now.bad_json, seen.bad_json));
  m.RecordWebhookDelivery(WebhookOutcome::kNoEventName,
                          delta(now.no_event_name, seen.no_event_name));
  m.RecordWebhookDelivery(WebhookOutcome::kStoreFailure, store_failures);
  m.RecordWebhookDelivery(WebhookOutcome::kBadRequest, delta(now.bad_requests, seen.bad_requests));
  m.RecordWebhookDelivery(WebhookOutcome::kNotFound, delta(now.not_found, seen.not_found));
  m.RecordWebhookDelivery(WebhookOutcome::kMethodNotAllowed,
                          delta(now.method_not_allowed, seen.method_not_allowed));
  m.RecordWebhookDelivery(WebhookOutcome::kJsonTooComplex,
                          delta(now.json_too_complex, seen.json_too_complex));
  m.RecordUnknownWebhookEventName(delta(now.unknown_event_names, seen.unknown_event_names));
  // The HTTP layer under it: connections, shedding, timeouts, the listener.
  const http::HttpServerStats http_now = receiver_->http_stats();
  http::HttpServerStats& http_seen = receiver_http_reported_;
  using metrics::WebhookRefusal;
  const std::pair<WebhookRefusal, int64_t http::HttpServerStats::*> refusals[] = {
      {WebhookRefusal::kMaxConnections, &http::HttpServerStats::shed_max_connections},
      {WebhookRefusal::kMaxConnectionsPerClient, &http::HttpServerStats::shed_per_client},
      {WebhookRefusal::kMaxRequestsInFlight, &http::HttpServerStats::shed_in_flight},
      {WebhookRefusal::kIdleClosedForRoom, &http::HttpServerStats::idle_closed_for_room},
      {WebhookRefusal::kHeadTimeout, &http::HttpServerStats::head_timeouts},
      {WebhookRefusal::kBodyTimeout, &http::HttpServerStats::body_timeouts},
      {WebhookRefusal::kWriteTimeout, &http::HttpServerStats::write_timeouts},
      {WebhookRefusal::kHeadTooLarge, &http::HttpServerStats::head_too_large},
      {WebhookRefusal::kNotImplemented, &http::HttpServerStats::not_implemented},
      {WebhookRefusal::kAwaitingHeadClosedForRoom,
       &http::HttpServerStats::awaiting_head_closed_for_room},
      {WebhookRefusal::kAnsweringClosedForRoom, &http::HttpServerStats::answering_closed_for_room},
  };
  for (const auto& [reason, field] : refusals) {
    m.RecordWebhookRefusal(reason, delta(http_now.*field, http_seen.*field));
  }
  // Malformed requests are also deliveries with outcome bad_request (above).
  m.RecordWebhookRefusal(WebhookRefusal::kMalformed,
                         delta(http_now.malformed, http_seen.malformed));
  m.RecordWebhookAcceptErrors(delta(http_now.accept_errors, http_seen.accept_errors));
  m.SetWebhookConnections(http_now.connections_open);
  m.SetWebhookListenerAccepting(http_now.accepting);
  // The receiver is the only writer of the event log: its accepted deliveries are the
  // appends, its store failures the append errors.
  m.RecordEventLogAppend(accepted);
  m.RecordEventLogAppendError(store_failures);
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
  health_->Shutdown();
  // No new webhooks (the vendor retries them, here or on another replica), then every
  // stream ends with UNAVAILABLE and its resumable cursor.
  if (admin_ != nullptr) admin_->Stop();
  if (receiver_ != nullptr) receiver_->Stop();
  // No new polls; what is recorded stays in the ledger for the next start or a replica.
  if (reconciler_ != nullptr) reconciler_->Stop();
  if (hub_ != nullptr) hub_->Stop();
  for (auto& account : accounts_) {
    if (account->poller != nullptr) account->poller->Shutdown();
  }
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
  // The last spans go out (one batch, waiting at most OtlpExporter::kLastBatchTimeout)
  // while the transport still runs.
  if (exporter_ != nullptr) exporter_->Stop();
  // Vendor calls no RPC waits for (a reconciler poll, a token watch poll) may still be in
  // flight: fail them now, while the pipeline their callbacks go through still exists.
  transport_->Shutdown();
}

GatewayServer::~GatewayServer() {
  Shutdown(std::chrono::milliseconds(0));
  if (metrics_ != nullptr) metrics_->SetCollectHook(nullptr);
  server_.reset();
  services_.clear();
  health_.reset();
  reflection_.reset();
  receiver_.reset();
  hub_.reset();
  reconciler_.reset();
  for (auto& account : accounts_) account->poller.reset();
  // Pending retry timers hold calls: run down the timer thread before the pipeline.
  scheduler_.reset();
  caching_.reset();
  router_.reset();
  accounts_.clear();
  event_log_.reset();
  ledger_.reset();
  transport_.reset();
}

}  // namespace inspection::server
