#ifndef GATEWAY_UPSTREAM_VENDOR_CALLER_H_
#define GATEWAY_UPSTREAM_VENDOR_CALLER_H_

#include <chrono>
#include <string>

#include "absl/functional/any_invocable.h"
#include "adapters/http/http_transport.h"
#include "adapters/vendor/vendor_request.h"
#include "gateway/errors/api_error.h"
#include "gateway/routes/route_table.h"
#include "nlohmann/json.hpp"

namespace inspection::upstream {

// What one vendor call produced: either the parsed JSON of a 2xx answer, or an error
// ready for the gRPC caller.
struct VendorResult {
  std::optional<errors::ApiError> error;
  nlohmann::json body;          // 2xx: parsed body (null for an empty body)
  http::HttpResponse response;  // the raw answer, when one arrived
  bool ok() const { return !error.has_value(); }
};

using VendorCallback = absl::AnyInvocable<void(VendorResult) &&>;

// The request pipeline's one interface (DESIGN §4): the vendor client is the innermost
// implementation, and each concern (retry, circuit breaker, cache, idempotency,
// metrics) is a decorator over it, composed in GatewayServer. Thread-safe; `done` is
// called exactly once, possibly on another thread, and must not block.
class VendorCaller {
 public:
  virtual ~VendorCaller() = default;
  virtual void Call(routes::RouteId route, const vendor::VendorRequest& request,
                    std::chrono::system_clock::time_point deadline, const std::string& request_id,
                    VendorCallback done) = 0;
};

}  // namespace inspection::upstream

#endif  // GATEWAY_UPSTREAM_VENDOR_CALLER_H_
