#ifndef GATEWAY_ROUTES_ROUTE_TABLE_H_
#define GATEWAY_ROUTES_ROUTE_TABLE_H_

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include <google/protobuf/descriptor.h>

#include "gateway/resilience/retry_policy.h"

namespace inspection::routes {

// Every vendor endpoint the gateway calls, one per unary RPC. What the gateway knows of
// each is declared once, as the RPC's `vendor_route` annotation in the proto
// (proto/inspection/v1/vendor_options.proto); the route table is built from those
// descriptors at start-up, and the services, the vendor client, retries, the cache, the
// circuit breaker and metrics read it. To add an endpoint: CONTRIBUTING.md.
//
// The named ids are the routes code refers to (overrides, background calls, tests); every
// other annotated RPC gets the next id past them, in ApiMethods() order, and needs no name.
enum class RouteId {
  kCreateToken,
  kGetTokenStatus,
  kRemoveBackground,
  kAssessQuality,
  kAssessQualityBatch,
  kSegmentVehicle,
  kSegmentParts,
  kDetectDamage,
  kSearchInspections,
  kGetDamagesReport,
  kGetWebhookConfig,
  kUpdateWebhookConfig,
  kListEventConfigs,
  kUpdateEventConfig,
  kTestWebhook,
};

// What re-sending a request does at the vendor: the retry policy's own enum (one type,
// no mirror to convert).
using Idempotency = resilience::Idempotency;

enum class HttpMethod { kGet, kPost, kPut };

// One route, from its RPC's `vendor_route` annotation (see VendorRoute there).
struct Route {
  RouteId id;
  // Full gRPC method name, "/inspection.v1.TokenService/CreateToken".
  std::string grpc_method;
  // Its descriptor (request and response types, the annotation); never null.
  const google::protobuf::MethodDescriptor* method = nullptr;
  HttpMethod http_method;
  // Path relative to the upstream base URL. `{name}` is replaced by the URL-encoded
  // path parameter `name`. The spelling (apiV1 vs apiv1) is the spec's, per endpoint.
  std::string path_template;
  Idempotency idempotency;
  // Whether a response may be cached, and for how long (used by the cache layer).
  bool cacheable;
  std::chrono::milliseconds cache_ttl;
  // Per-attempt timeout; the caller's gRPC deadline shortens it further.
  std::chrono::milliseconds timeout;
  // Value of the `route` label in metrics: bounded, snake_case.
  std::string metric_label;
  // The vendor's answer carries the webhook header key (configwebhook): the vendor client
  // seals it (vendor::SealWebhookHeaderKey) as soon as it arrives, so that no cache entry,
  // log line or caller ever holds it.
  bool seals_webhook_key = false;
  // A write (it creates, changes or sends something at the vendor): every call leaves an
  // audit line (who, which RPC, which account, which resource, the outcome).
  bool audited = false;
  // Image analysis: cached under cache.image_analysis / cache.image_analysis_ttl_ms.
  bool image_analysis = false;
  // Tags a cached answer carries (`{name}`: that path parameter's value).
  std::vector<std::string> cache_tags;
  // Routes whose cached answers a call of this route drops, whatever its outcome.
  std::vector<RouteId> invalidates;
};

// All routes, in RouteId order (the named ones first).
const std::vector<Route>& AllRoutes();
const Route& GetRoute(RouteId id);
// nullptr when no route serves that gRPC method.
const Route* FindRouteByGrpcMethod(std::string_view grpc_method);

std::string_view HttpMethodName(HttpMethod method);

}  // namespace inspection::routes

#endif  // GATEWAY_ROUTES_ROUTE_TABLE_H_
