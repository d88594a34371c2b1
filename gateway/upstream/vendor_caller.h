#ifndef GATEWAY_UPSTREAM_VENDOR_CALLER_H_
#define GATEWAY_UPSTREAM_VENDOR_CALLER_H_

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/functional/any_invocable.h"
#include "adapters/http/http_transport.h"
#include "adapters/vendor/vendor_request.h"
#include "gateway/errors/api_error.h"
#include "gateway/routes/route_table.h"
#include "gateway/tracing/trace_context.h"
#include "nlohmann/json.hpp"

namespace inspection::upstream {

// How the response cache took part in a call (the `x-cache` response metadata).
enum class CacheStatus {
  kNotCached,  // the route is not cacheable, or the cache is off
  kMiss,       // fetched from the vendor (and stored when it succeeded)
  kHit,        // a fresh cached answer; the vendor was not called
  kCoalesced,  // shared an identical call that was already in flight
  kStale,      // the vendor failed; a cached answer past its TTL was served instead
  kBypass,     // the caller asked to skip the cache; fetched from the vendor
};
std::string_view CacheStatusName(CacheStatus status);  // "hit", "miss", ...

// What one vendor call produced: either the parsed JSON of a 2xx answer, or an error
// ready for the gRPC caller.
struct VendorResult {
  std::optional<errors::ApiError> error;
  // 2xx: the parsed body, immutable and shared: the response cache keeps this tree and hands
  // it to every hit instead of parsing the bytes again. Null for an empty body (or an error).
  std::shared_ptr<const nlohmann::json> body;
  http::HttpResponse response;  // the raw answer, when one arrived (status 200 for a hit)
  CacheStatus cache = CacheStatus::kNotCached;
  // For kStale: the ErrorInfo reason of the vendor failure the stale answer stands in for.
  std::string stale_cause;
  // Vendor attempts the call made (retries included); 0 when none (a cache hit, an open
  // circuit). Set by the retry loop.
  int attempts = 0;
  bool ok() const { return !error.has_value(); }
  // `*body`, or a JSON null when there is no body.
  const nlohmann::json& json_body() const;
};

// Per-call settings that travel through the pipeline with the request.
struct CallOptions {
  std::string request_id;  // sent as X-Request-Id; "" for none
  // The vendor account (metadata `x-vendor-account`); "" is the default account.
  std::string account;
  // Skip the response cache and the coalescing of identical calls (metadata
  // `cache-control: no-cache`); the answer still refreshes the cache.
  bool bypass_cache = false;
  // The call's trace (the caller's W3C traceparent, or one the gateway started): each
  // vendor attempt sends a child traceparent of it and records a client span under it.
  // nullopt: the vendor client starts a trace of its own per attempt.
  std::optional<tracing::TraceContext> trace;
  // Which attempt this is (1 = the first; set by the retry loop for the layer below it).
  int attempt = 1;
};

using VendorCallback = absl::AnyInvocable<void(VendorResult) &&>;

// The request pipeline's one interface (docs/design.md §4): the vendor client is the innermost
// implementation, and each concern (retry, circuit breaker, cache, metrics) is a decorator
// over it, composed in server/vendor_stub.cc. Idempotency keys wrap the call core instead
// (services/idempotent_call.h): a repeat gets back the RPC's own outcome, which this
// interface never sees. Thread-safe; `done` is
// called exactly once, possibly on another thread, and must not block.
class VendorCaller {
 public:
  virtual ~VendorCaller() = default;
  virtual void Call(routes::RouteId route, const vendor::VendorRequest& request,
                    std::chrono::system_clock::time_point deadline, const CallOptions& options,
                    VendorCallback done) = 0;
};

}  // namespace inspection::upstream

#endif  // GATEWAY_UPSTREAM_VENDOR_CALLER_H_
