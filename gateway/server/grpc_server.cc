#include "gateway/server/grpc_server.h"

#include <algorithm>
#include <fstream>
#include <iterator>
#include <utility>

#include <grpc/grpc.h>
#include <grpcpp/impl/server_builder_option.h>
#include <grpcpp/impl/server_builder_plugin.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_credentials_options.h>

#include "absl/strings/str_cat.h"
#include "adapters/vendor/vendor_routes.h"
#include "gateway/services/damage_service.h"
#include "gateway/services/event_service.h"
#include "gateway/services/generic_unary_service.h"
#include "gateway/services/token_service.h"
#include "gateway/settings/bounded_file.h"

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
  struct TlsFile {
    const char* key;
    const std::string* path;
    std::size_t max_bytes;
  };
  for (const TlsFile& tls_file :
       {TlsFile{"cert_file", &tls.cert_file, settings::kMaxCertificateFileBytes},
        TlsFile{"key_file", &tls.key_file, settings::kMaxKeyFileBytes},
        TlsFile{"client_ca_file", &tls.client_ca_file, settings::kMaxCertificateFileBytes}}) {
    const char* key = tls_file.key;
    const std::string* path = tls_file.path;
    if (path->empty()) continue;
    absl::StatusOr<std::string> text = settings::ReadBoundedFile(*path, tls_file.max_bytes);
    if (!text.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("grpc.tls.", key, ": cannot read ", *path, ": ", text.status().message()));
    }
    if (text->find("-----BEGIN ") == std::string::npos) {
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

// Deliberate limits instead of gRPC's defaults (4 MiB messages, unbounded streams, pings
// from clients as often as they like).
void SetLimits(const GrpcServerLimits& limits, grpc::ServerBuilder& builder) {
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
}

}  // namespace

const std::vector<std::string>& PublicServiceNames() {
  static const auto* const kNames = [] {
    auto* names = new std::vector<std::string>();
    for (const google::protobuf::MethodDescriptor* method : vendor::ApiMethods()) {
      const std::string& service = method->service()->full_name();
      if (std::find(names->begin(), names->end(), service) == names->end()) {
        names->push_back(service);
      }
    }
    return names;
  }();
  return *kNames;
}

std::vector<metrics::GrpcMethodSpec> PublicMethods() {
  std::vector<metrics::GrpcMethodSpec> methods;
  const auto* pool = google::protobuf::DescriptorPool::generated_pool();
  for (const std::string& name : PublicServiceNames()) {
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

std::vector<grpc::Service*> GrpcServices::all() const {
  std::vector<grpc::Service*> services;
  for (const auto& service : public_services) services.push_back(service.get());
  services.push_back(health.get());
  if (reflection != nullptr) {
    for (grpc::Service* service : reflection->grpc_services()) services.push_back(service);
  }
  return services;
}

GrpcServices MakeGrpcServices(const services::ServiceDeps& deps, bool reflection) {
  GrpcServices made;
  // Every annotated unary RPC, of any service: one generic handler. The services below
  // implement the streams only.
  made.public_services.push_back(std::make_unique<services::GenericUnaryService>(deps));
  made.public_services.push_back(std::make_unique<services::TokenServiceImpl>(deps));
  made.public_services.push_back(std::make_unique<services::DamageServiceImpl>(deps));
  made.public_services.push_back(std::make_unique<services::EventServiceImpl>(deps, deps));
  made.health = std::make_unique<services::HealthService>(deps);
  if (reflection) {
    std::vector<std::string> names = PublicServiceNames();
    names.push_back(services::HealthService::kServiceName);
    names.push_back(services::ReflectionService::kV1ServiceName);
    names.push_back(services::ReflectionService::kV1AlphaServiceName);
    made.reflection = std::make_unique<services::ReflectionService>(deps, std::move(names));
  }
  return made;
}

absl::StatusOr<std::unique_ptr<grpc::Server>> MakeGrpcServer(
    const GatewayServerOptions& options, const std::vector<grpc::Service*>& services,
    std::shared_ptr<metrics::GrpcServerMetrics> metrics,
    std::shared_ptr<metrics::InFlightCalls> in_flight, int* port) {
  grpc::ServerBuilder builder;
  builder.SetOption(std::make_unique<WithoutReflection>());
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials =
      ListenerCredentials(options.tls);
  if (!credentials.ok()) return credentials.status();
  builder.AddListeningPort(options.grpc_addr, *credentials, port);
  SetLimits(options.grpc_limits, builder);
  for (grpc::Service* service : services) builder.RegisterService(service);
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(std::make_unique<metrics::GrpcServerMetricsInterceptorFactory>(
      std::move(metrics), std::move(in_flight)));
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || *port == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen for gRPC on ", options.grpc_addr,
                     " (grpc_addr): the address is in use by another process, or not a local "
                     "address"));
  }
  return server;
}

}  // namespace inspection::server
