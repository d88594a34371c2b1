#include "gateway/routes/route_table.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <optional>

#include "absl/strings/match.h"
#include "adapters/vendor/vendor_mapping.h"
#include "adapters/vendor/vendor_routes.h"

namespace inspection::routes {
namespace {

// The RPC of each named RouteId (RouteId order): the routes code refers to by name.
// Everything else about a route is read from its RPC's vendor_route annotation.
constexpr std::string_view kRpcOfRoute[] = {
    "inspection.v1.TokenService.CreateToken",
    "inspection.v1.TokenService.GetTokenStatus",
    "inspection.v1.ImageService.RemoveBackground",
    "inspection.v1.ImageService.AssessQuality",
    "inspection.v1.ImageService.AssessQualityBatch",
    "inspection.v1.ImageService.SegmentVehicle",
    "inspection.v1.ImageService.SegmentParts",
    "inspection.v1.DamageService.DetectDamage",
    "inspection.v1.InspectionService.SearchInspections",
    "inspection.v1.InspectionService.GetDamagesReport",
    "inspection.v1.EventConfigService.GetWebhookConfig",
    "inspection.v1.EventConfigService.UpdateWebhookConfig",
    "inspection.v1.EventConfigService.ListEventConfigs",
    "inspection.v1.EventConfigService.UpdateEventConfig",
    "inspection.v1.EventConfigService.TestWebhook",
};

[[noreturn]] void Broken(std::string_view rpc, std::string_view what) {
  // A programming error in the protos, caught by route_table_test before it ships.
  std::fprintf(stderr, "route table: %.*s: %.*s\n", static_cast<int>(rpc.size()), rpc.data(),
               static_cast<int>(what.size()), what.data());
  std::abort();
}

// Every `{name}` of the path is filled from the request field whose JSON name is `name`: a
// singular string the codec writes (not gateway_only, vendor_body or an enum's `_raw`
// sibling), which the validator requires and keeps free of URL delimiters and dot-segments
// (`(rules)`: required, url_segment), so that no request can leave a placeholder empty or
// climb the vendor's path.
void CheckPathParameters(const google::protobuf::MethodDescriptor& method, std::string_view rpc) {
  const std::string& path = vendor::VendorRouteOf(method)->path();
  const std::vector<std::string> names = vendor::PathParameters(path);
  if (static_cast<size_t>(std::count(path.begin(), path.end(), '{')) != names.size()) {
    Broken(rpc, "vendor_route.path has an unclosed '{'");
  }
  const google::protobuf::Descriptor* request = method.input_type();
  for (const std::string& name : names) {
    const google::protobuf::FieldDescriptor* field = nullptr;
    for (int i = 0; i < request->field_count(); ++i) {
      if (request->field(i)->json_name() == name) field = request->field(i);
    }
    const bool written =
        field != nullptr && !field->options().GetExtension(v1::gateway_only) &&
        !field->options().GetExtension(v1::vendor_body) &&
        !(absl::EndsWith(field->name(), "_raw") &&
          request->FindFieldByName(field->name().substr(0, field->name().size() - 4)) != nullptr);
    if (!written || field->is_repeated() ||
        field->cpp_type() != google::protobuf::FieldDescriptor::CPPTYPE_STRING) {
      Broken(rpc, "a vendor_route.path parameter names no singular string field the codec writes");
    }
    const v1::FieldRules& rules = field->options().GetExtension(v1::rules);
    if (rules.required().empty() || !rules.url_segment()) {
      Broken(rpc, "a vendor_route.path parameter's field needs (rules) required and url_segment");
    }
  }
}

std::optional<RouteId> RouteOfRpc(std::string_view rpc) {
  for (size_t i = 0; i < std::size(kRpcOfRoute); ++i) {
    if (kRpcOfRoute[i] == rpc) return static_cast<RouteId>(i);
  }
  return std::nullopt;
}

Route FromAnnotation(RouteId id, std::string_view rpc) {
  const google::protobuf::MethodDescriptor* method = vendor::FindApiMethod(std::string(rpc));
  if (method == nullptr) Broken(rpc, "no such RPC");
  const v1::VendorRoute* annotation = vendor::VendorRouteOf(*method);
  if (annotation == nullptr) Broken(rpc, "no vendor_route annotation");
  Route route;
  route.id = id;
  route.grpc_method = vendor::GrpcPath(*method);
  route.method = method;
  switch (annotation->method()) {
    case v1::VENDOR_HTTP_METHOD_GET:
      route.http_method = HttpMethod::kGet;
      break;
    case v1::VENDOR_HTTP_METHOD_POST:
      route.http_method = HttpMethod::kPost;
      break;
    case v1::VENDOR_HTTP_METHOD_PUT:
      route.http_method = HttpMethod::kPut;
      break;
    default:
      Broken(rpc, "vendor_route.method is unset");
  }
  route.path_template = annotation->path();
  CheckPathParameters(*method, rpc);
  switch (annotation->idempotency()) {
    case v1::VENDOR_IDEMPOTENCY_SAFE:
      route.idempotency = Idempotency::kSafe;
      break;
    case v1::VENDOR_IDEMPOTENCY_IDEMPOTENT:
      route.idempotency = Idempotency::kIdempotent;
      break;
    case v1::VENDOR_IDEMPOTENCY_NON_IDEMPOTENT:
      route.idempotency = Idempotency::kNonIdempotent;
      break;
    default:
      Broken(rpc, "vendor_route.idempotency is unset");
  }
  if (annotation->timeout_ms() == 0) Broken(rpc, "vendor_route.timeout_ms is unset");
  route.timeout = std::chrono::milliseconds(annotation->timeout_ms());
  route.cache_ttl = std::chrono::milliseconds(annotation->cache_ttl_ms());
  route.cacheable = annotation->cache_ttl_ms() > 0;
  if (route.cacheable && route.idempotency != Idempotency::kSafe) {
    Broken(rpc, "only safe routes may be cached");
  }
  route.metric_label = annotation->metric_label();
  if (route.metric_label.empty()) Broken(rpc, "vendor_route.metric_label is unset");
  route.seals_webhook_key = annotation->seals_webhook_key();
  route.audited = annotation->audited();
  route.image_analysis = annotation->image_analysis();
  route.cache_tags.assign(annotation->cache_tags().begin(), annotation->cache_tags().end());
  return route;  // invalidates: ResolveInvalidates, once every route has its id
}

// "inspection.v1.EventConfigService.GetWebhookConfig" -> its route's id.
std::optional<RouteId> FindRoute(const std::vector<Route>& routes, const std::string& rpc) {
  for (const Route& route : routes) {
    if (route.method->full_name() == rpc) return route.id;
  }
  return std::nullopt;
}

void ResolveInvalidates(std::vector<Route>& routes) {
  for (const google::protobuf::MethodDescriptor* method : vendor::ApiMethods()) {
    const v1::VendorRoute* annotation = vendor::VendorRouteOf(*method);
    if (annotation == nullptr) continue;
    std::optional<RouteId> self = FindRoute(routes, method->full_name());
    for (const std::string& other : annotation->invalidates()) {
      std::optional<RouteId> target = FindRoute(routes, other);
      if (!target.has_value()) {
        Broken(method->full_name(), "vendor_route.invalidates names no routed RPC");
      }
      routes[static_cast<size_t>(*self)].invalidates.push_back(*target);
    }
  }
}

}  // namespace

const std::vector<Route>& AllRoutes() {
  static const std::vector<Route>* const routes = [] {
    auto* built = new std::vector<Route>();
    for (size_t i = 0; i < std::size(kRpcOfRoute); ++i) {
      built->push_back(FromAnnotation(static_cast<RouteId>(i), kRpcOfRoute[i]));
    }
    // Every other annotated RPC gets the next id: code never names it, the generic unary
    // handler serves it from its annotation alone.
    for (const google::protobuf::MethodDescriptor* method : vendor::ApiMethods()) {
      if (vendor::VendorRouteOf(*method) != nullptr && !RouteOfRpc(method->full_name())) {
        built->push_back(FromAnnotation(static_cast<RouteId>(built->size()), method->full_name()));
      }
    }
    ResolveInvalidates(*built);
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
