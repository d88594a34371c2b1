#include "gateway/routes/route_table.h"

#include <set>
#include <string>

#include <google/protobuf/descriptor.h>
#include <gtest/gtest.h>

// Linking the generated code registers the files in the generated pool.
#include "inspection/v1/damage.grpc.pb.h"
#include "inspection/v1/event_config.grpc.pb.h"
#include "inspection/v1/image.grpc.pb.h"
#include "inspection/v1/inspection.grpc.pb.h"
#include "inspection/v1/token.grpc.pb.h"

namespace inspection::routes {
namespace {

// Every unary method of every public service, as "/package.Service/Method".
std::set<std::string> PublicUnaryMethods() {
  const auto* pool = google::protobuf::DescriptorPool::generated_pool();
  // A message of each API file anchors it (and its services) in the generated pool.
  const google::protobuf::FileDescriptor* files[] = {
      v1::CreateTokenRequest::descriptor()->file(),
      v1::AssessQualityRequest::descriptor()->file(),
      v1::DetectDamageRequest::descriptor()->file(),
      v1::SearchInspectionsRequest::descriptor()->file(),
      v1::GetWebhookConfigRequest::descriptor()->file(),
  };
  for (const char* name :
       {v1::TokenService::service_full_name(), v1::ImageService::service_full_name(),
        v1::DamageService::service_full_name(), v1::InspectionService::service_full_name(),
        v1::EventConfigService::service_full_name()}) {
    EXPECT_NE(pool->FindServiceByName(name), nullptr) << name;
  }
  std::set<std::string> methods;
  for (const auto* file : files) {
    EXPECT_EQ(pool->FindFileByName(file->name()), file);
    for (int s = 0; s < file->service_count(); ++s) {
      const auto* service = file->service(s);
      for (int m = 0; m < service->method_count(); ++m) {
        const auto* method = service->method(m);
        if (method->client_streaming() || method->server_streaming()) continue;
        methods.insert("/" + service->full_name() + "/" + method->name());
      }
    }
  }
  return methods;
}

TEST(RouteTableTest, EveryRpcHasARouteAndEveryRouteAnRpc) {
  const std::set<std::string> rpcs = PublicUnaryMethods();
  EXPECT_EQ(rpcs.size(), AllRoutes().size());
  std::set<std::string> routed;
  for (const Route& route : AllRoutes()) {
    const std::string method(route.grpc_method);
    EXPECT_TRUE(rpcs.count(method)) << "route without an RPC: " << method;
    EXPECT_TRUE(routed.insert(method).second) << "two routes for " << method;
  }
  for (const std::string& rpc : rpcs) {
    EXPECT_NE(FindRouteByGrpcMethod(rpc), nullptr) << "RPC without a route: " << rpc;
  }
}

TEST(RouteTableTest, RoutesAreIndexedByIdAndWellFormed) {
  std::set<std::string_view> labels;
  for (size_t i = 0; i < AllRoutes().size(); ++i) {
    const Route& route = AllRoutes()[i];
    EXPECT_EQ(static_cast<size_t>(route.id), i);
    EXPECT_EQ(&GetRoute(route.id), &route);
    EXPECT_TRUE(labels.insert(route.metric_label).second) << route.metric_label;
    EXPECT_EQ(route.path_template.rfind("/api", 0), 0u) << route.path_template;
    EXPECT_GT(route.timeout.count(), 0);
    if (route.cacheable) {
      EXPECT_GT(route.cache_ttl.count(), 0) << route.metric_label;
      EXPECT_NE(route.idempotency, Idempotency::kNonIdempotent) << route.metric_label;
    }
    for (char c : route.metric_label) {
      EXPECT_TRUE((c >= 'a' && c <= 'z') || c == '_') << route.metric_label;
    }
  }
}

TEST(RouteTableTest, CreationsAreNeverMarkedRetryable) {
  EXPECT_EQ(GetRoute(RouteId::kCreateToken).idempotency, Idempotency::kNonIdempotent);
  EXPECT_EQ(GetRoute(RouteId::kDetectDamage).idempotency, Idempotency::kNonIdempotent);
  EXPECT_EQ(GetRoute(RouteId::kTestWebhook).idempotency, Idempotency::kNonIdempotent);
  EXPECT_EQ(GetRoute(RouteId::kAssessQuality).idempotency, Idempotency::kSafe);
  EXPECT_EQ(GetRoute(RouteId::kUpdateWebhookConfig).idempotency, Idempotency::kIdempotent);
}

TEST(RouteTableTest, PathSpellingsFollowTheSpec) {
  // The spec writes the search and report paths with a lower-case `apiv1`.
  EXPECT_EQ(GetRoute(RouteId::kSearchInspections).path_template, "/apiv1/inspection/search");
  EXPECT_EQ(GetRoute(RouteId::kGetDamagesReport).path_template,
            "/apiv1/inspection/apiV1_sdk/inspection/damagesReport/{inspectionId}");
  EXPECT_EQ(GetRoute(RouteId::kCreateToken).path_template, "/apiV1/tokenmanager/token");
}

}  // namespace
}  // namespace inspection::routes
