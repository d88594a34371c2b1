#include "gateway/routes/route_table.h"

#include <cstdlib>

namespace inspection::routes {
namespace {

using std::chrono::milliseconds;
using std::chrono::minutes;
using std::chrono::seconds;

constexpr milliseconds kNoCache{0};

// Timeouts: token and config calls are small JSON exchanges; image analysis runs
// models on remote images and gets more time. The caller's deadline always wins.
// Cache TTLs are used by the cache layer; image analysis is deterministic for a URL,
// search results change as inspections progress, so they get a short TTL. Token status
// is not cached: a caller that just moved the customer on expects to see it at once
// (WatchTokenStatus already shares one poll per token among its watchers).
std::vector<Route> BuildRoutes() {
  return {
      {RouteId::kCreateToken, "/inspection.v1.TokenService/CreateToken", HttpMethod::kPost,
       "/apiV1/tokenmanager/token", Idempotency::kNonIdempotent, false, kNoCache, seconds(10),
       "create_token", /*seals_webhook_key=*/false, /*audited=*/true},
      {RouteId::kGetTokenStatus, "/inspection.v1.TokenService/GetTokenStatus", HttpMethod::kGet,
       "/apiV1/tokenmanager/test", Idempotency::kSafe, false, kNoCache, seconds(5),
       "get_token_status"},
      {RouteId::kRemoveBackground, "/inspection.v1.ImageService/RemoveBackground",
       HttpMethod::kPost, "/apiV1/remarketing/removeBackground", Idempotency::kSafe, true,
       minutes(10), seconds(30), "remove_background"},
      {RouteId::kAssessQuality, "/inspection.v1.ImageService/AssessQuality", HttpMethod::kPost,
       "/apiV1/quality/image", Idempotency::kSafe, true, minutes(10), seconds(15),
       "assess_quality"},
      {RouteId::kAssessQualityBatch, "/inspection.v1.ImageService/AssessQualityBatch",
       HttpMethod::kPost, "/apiV1/quality/image/list", Idempotency::kSafe, true, minutes(10),
       seconds(30), "assess_quality_batch"},
      {RouteId::kSegmentVehicle, "/inspection.v1.ImageService/SegmentVehicle", HttpMethod::kPost,
       "/apiV1/seg/image", Idempotency::kSafe, true, minutes(10), seconds(30), "segment_vehicle"},
      {RouteId::kSegmentParts, "/inspection.v1.ImageService/SegmentParts", HttpMethod::kPost,
       "/apiV1/part/image", Idempotency::kSafe, true, minutes(10), seconds(30), "segment_parts"},
      {RouteId::kDetectDamage, "/inspection.v1.DamageService/DetectDamage", HttpMethod::kPost,
       "/apiV1/damage/vehicle", Idempotency::kNonIdempotent, false, kNoCache, seconds(30),
       "detect_damage", /*seals_webhook_key=*/false, /*audited=*/true},
      {RouteId::kSearchInspections, "/inspection.v1.InspectionService/SearchInspections",
       HttpMethod::kGet, "/apiv1/inspection/search", Idempotency::kSafe, true, seconds(5),
       seconds(10), "search_inspections"},
      {RouteId::kGetDamagesReport, "/inspection.v1.InspectionService/GetDamagesReport",
       HttpMethod::kGet, "/apiv1/inspection/apiV1_sdk/inspection/damagesReport/{inspectionId}",
       Idempotency::kSafe, true, seconds(30), seconds(10), "get_damages_report"},
      {RouteId::kGetWebhookConfig, "/inspection.v1.EventConfigService/GetWebhookConfig",
       HttpMethod::kGet, "/apiV1/eventmanager/configwebhook", Idempotency::kSafe, true, seconds(30),
       seconds(5), "get_webhook_config", /*seals_webhook_key=*/true},
      {RouteId::kUpdateWebhookConfig, "/inspection.v1.EventConfigService/UpdateWebhookConfig",
       HttpMethod::kPut, "/apiV1/eventmanager/configwebhook", Idempotency::kIdempotent, false,
       kNoCache, seconds(5), "update_webhook_config", /*seals_webhook_key=*/true,
       /*audited=*/true},
      {RouteId::kListEventConfigs, "/inspection.v1.EventConfigService/ListEventConfigs",
       HttpMethod::kGet, "/apiV1/eventmanager/configevent", Idempotency::kSafe, true, seconds(30),
       seconds(5), "list_event_configs"},
      {RouteId::kUpdateEventConfig, "/inspection.v1.EventConfigService/UpdateEventConfig",
       HttpMethod::kPut, "/apiV1/eventmanager/configevent", Idempotency::kIdempotent, false,
       kNoCache, seconds(5), "update_event_config", /*seals_webhook_key=*/false,
       /*audited=*/true},
      // Sends an event: not cacheable, and not re-sent (a retry would deliver twice).
      {RouteId::kTestWebhook, "/inspection.v1.EventConfigService/TestWebhook", HttpMethod::kGet,
       "/apiV1/eventmanager/testwebhook", Idempotency::kNonIdempotent, false, kNoCache, seconds(10),
       "test_webhook", /*seals_webhook_key=*/false, /*audited=*/true},
  };
}

}  // namespace

const std::vector<Route>& AllRoutes() {
  static const std::vector<Route>* const routes = [] {
    auto* built = new std::vector<Route>(BuildRoutes());
    // The table is indexed by RouteId: a mismatch is a programming error caught at
    // start-up (and by route_table_test).
    for (size_t i = 0; i < built->size(); ++i) {
      if (static_cast<size_t>((*built)[i].id) != i) std::abort();
    }
    return built;
  }();
  return *routes;
}

const Route& GetRoute(RouteId id) { return AllRoutes()[static_cast<size_t>(id)]; }

const Route* FindRouteByGrpcMethod(std::string_view grpc_method) {
  for (const Route& route : AllRoutes()) {
    if (route.grpc_method == grpc_method) return &route;
  }
  return nullptr;
}

std::string_view HttpMethodName(HttpMethod method) {
  switch (method) {
    case HttpMethod::kGet:
      return "GET";
    case HttpMethod::kPost:
      return "POST";
    case HttpMethod::kPut:
      return "PUT";
  }
  return "GET";
}

}  // namespace inspection::routes
