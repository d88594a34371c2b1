#ifndef GATEWAY_SERVICES_ENDPOINTS_H_
#define GATEWAY_SERVICES_ENDPOINTS_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "adapters/vendor/request_validation.h"
#include "adapters/vendor/vendor_request.h"

#include "gateway/services/unary_call.h"

namespace inspection::services {

// Every vendor route's Endpoint (unary_call.h), indexed by RouteId: what the generic unary
// handler serves and what the streams and background calls submit through. Each starts as
// the generic mapping, read from the RPC's annotations alone:
//   validate: validation::ValidateRequest (the `(rules)` of the request's fields);
//   encode:   vendor::EncodeRequest (path parameters, the query of a GET, the JSON body);
//   decode:   vendor::DecodeResponse (the whole answer, or its `(vendor_body)` field);
//   idempotency: the request's `idempotency_key` field (gateway_only), when it has one.
// then ApplyEndpointOverrides (endpoint_overrides.cc) replaces the hooks of the few RPCs
// that need code.
//
// What the mapping reads besides the annotations: the request limits, the assumptions about
// the vendor where the spec is silent, the web application's address, and where the work
// the gateway waits for is recorded.
struct EndpointOptions {
  validation::ValidationLimits limits;
  vendor::MapperOptions mapper;
  std::string webapp_url;  // no trailing slash
  // A damage submission that succeeded (DetectDamage, StreamDamageResults), a token created
  // (CreateToken): the reconciler records them (reconcile/reconciler.h). Called on the
  // vendor call's completion thread: must not block. Null: not recorded.
  std::function<void(const std::string& account, const std::string& inspection_id)>
      on_damage_submitted;
  std::function<void(const std::string& account, const std::string& uid)> on_token_created;
};

class Endpoints {
 public:
  explicit Endpoints(EndpointOptions options);
  Endpoints(const Endpoints&) = delete;  // the hooks refer to options_
  Endpoints& operator=(const Endpoints&) = delete;
  const Endpoint& Get(routes::RouteId id) const { return endpoints_[static_cast<size_t>(id)]; }
  size_t size() const { return endpoints_.size(); }

 private:
  const EndpointOptions options_;
  std::vector<Endpoint> endpoints_;
};

// The hooks of the RPCs whose mapping needs code (endpoint_overrides.cc says which, and
// why), over `endpoints` (every route's generic Endpoint, indexed by RouteId).
// `options` must outlive `endpoints`.
void ApplyEndpointOverrides(const EndpointOptions& options, std::vector<Endpoint>& endpoints);

}  // namespace inspection::services

#endif  // GATEWAY_SERVICES_ENDPOINTS_H_
