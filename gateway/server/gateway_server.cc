#include "gateway/server/gateway_server.h"

#include <future>
#include <thread>

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>

#include "absl/strings/str_cat.h"
#include "adapters/http/curl_transport.h"
#include "gateway/services/damage_service.h"
#include "gateway/services/event_config_service.h"
#include "gateway/services/image_service.h"
#include "gateway/services/inspection_service.h"
#include "gateway/services/token_service.h"

namespace inspection::server {
namespace {

constexpr const char* kServiceNames[] = {
    "inspection.v1.TokenService", "inspection.v1.ImageService", "inspection.v1.DamageService",
    "inspection.v1.InspectionService", "inspection.v1.EventConfigService"};

}  // namespace

GatewayServer::GatewayServer(GatewayServerOptions options) : options_(std::move(options)) {}

absl::StatusOr<std::unique_ptr<GatewayServer>> GatewayServer::Start(GatewayServerOptions options) {
  std::unique_ptr<GatewayServer> server(new GatewayServer(std::move(options)));
  GatewayServerOptions& opts = server->options_;

  server->transport_ = opts.transport;
  if (server->transport_ == nullptr) {
    http::CurlTransportOptions curl;
    curl.connect_timeout = opts.connect_timeout;
    curl.max_total_connections = opts.max_connections;
    auto transport = http::CurlTransport::Create(curl);
    if (!transport.ok()) return transport.status();
    server->transport_ = std::shared_ptr<http::HttpTransport>(std::move(*transport));
  }
  server->vendor_client_ =
      std::make_unique<upstream::VendorClient>(opts.vendor, server->transport_.get());

  services::ServiceDeps& deps = server->deps_;
  deps.vendor = server->vendor_client_.get();
  deps.mapper_options = opts.mapper;
  deps.limits = opts.limits;
  deps.webapp_url = opts.webapp_url;
  deps.observer = opts.observer;

  server->services_.push_back(std::make_unique<services::TokenServiceImpl>(deps));
  server->services_.push_back(std::make_unique<services::ImageServiceImpl>(deps));
  server->services_.push_back(std::make_unique<services::DamageServiceImpl>(deps));
  server->services_.push_back(std::make_unique<services::InspectionServiceImpl>(deps));
  server->services_.push_back(std::make_unique<services::EventConfigServiceImpl>(deps));

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(opts.grpc_addr, grpc::InsecureServerCredentials(), &server->grpc_port_);
  for (auto& service : server->services_) builder.RegisterService(service.get());
  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr || server->grpc_port_ == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen for gRPC on ", opts.grpc_addr, " (grpc_addr)"));
  }
  auto* health = server->server_->GetHealthCheckService();
  health->SetServingStatus("", true);
  for (const char* name : kServiceNames) health->SetServingStatus(name, true);
  return server;
}

void GatewayServer::Shutdown(std::chrono::milliseconds grace) {
  if (shut_down_) return;
  shut_down_ = true;
  if (server_ == nullptr) return;
  // Load balancers and health probes see NOT_SERVING before connections close.
  server_->GetHealthCheckService()->Shutdown();
  // grpc::Server::Shutdown waits for every started call to finish. Calls waiting on
  // the vendor finish when their HTTP exchange ends; after the grace period the
  // transport is told to fail what is left so shutdown is bounded.
  auto done = std::async(std::launch::async, [this, grace] {
    server_->Shutdown(std::chrono::system_clock::now() + grace);
  });
  if (done.wait_for(grace + std::chrono::milliseconds(100)) != std::future_status::ready) {
    if (auto* curl = dynamic_cast<http::CurlTransport*>(transport_.get())) curl->Shutdown();
  }
  done.wait();
}

GatewayServer::~GatewayServer() {
  Shutdown(std::chrono::milliseconds(0));
  server_.reset();
  services_.clear();
  vendor_client_.reset();
  transport_.reset();
}

}  // namespace inspection::server
