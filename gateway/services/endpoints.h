#ifndef GATEWAY_SERVICES_ENDPOINTS_H_
#define GATEWAY_SERVICES_ENDPOINTS_H_

#include <memory>
#include <vector>

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
// that need code. `deps` must outlive the table (the overrides read its settings).
class Endpoints {
 public:
  explicit Endpoints(const ServiceDeps& deps);
  const Endpoint& Get(routes::RouteId id) const { return endpoints_[static_cast<size_t>(id)]; }
  size_t size() const { return endpoints_.size(); }

 private:
  std::vector<Endpoint> endpoints_;
};

// The hooks of the RPCs whose mapping needs code (endpoint_overrides.cc says which, and
// why), over `endpoints` (every route's generic Endpoint, indexed by RouteId).
void ApplyEndpointOverrides(const ServiceDeps& deps, std::vector<Endpoint>& endpoints);

}  // namespace inspection::services

#endif  // GATEWAY_SERVICES_ENDPOINTS_H_
