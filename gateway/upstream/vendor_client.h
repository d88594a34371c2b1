#ifndef GATEWAY_UPSTREAM_VENDOR_CLIENT_H_
#define GATEWAY_UPSTREAM_VENDOR_CLIENT_H_

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/functional/any_invocable.h"
#include "absl/time/time.h"
#include "adapters/http/http_transport.h"
#include "adapters/vendor/bounded_json.h"
#include "adapters/vendor/vendor_request.h"
#include "gateway/errors/api_error.h"
#include "gateway/routes/route_table.h"
#include "gateway/tracing/span.h"
#include "gateway/upstream/vendor_caller.h"
#include "nlohmann/json.hpp"

namespace inspection::upstream {

struct VendorClientOptions {
  std::string base_url;  // no trailing slash
  std::string api_key;   // sent as X-API-Key; scrubbed from anything we return
  // Upper bound on any single attempt (config upstream.timeout_ms); routes with a
  // longer timeout are clamped to it.
  std::chrono::milliseconds max_attempt_timeout{30000};
  // Margin kept from the caller's deadline so that our own answer reaches it.
  std::chrono::milliseconds deadline_margin{5};
  std::function<absl::Time()> clock = [] { return absl::Now(); };
  // Where each attempt's client span goes (tracing.otlp_endpoint); null: spans are not
  // recorded (the traceparent header is sent all the same).
  tracing::SpanSink* spans = nullptr;
  // The vendor account's name for span attributes and log lines ("default" or its name).
  std::string account_label = "default";
  // Deepest nesting of objects and arrays accepted in a 2xx answer (config
  // upstream.max_json_depth), checked while parsing; deeper: VENDOR_MALFORMED_RESPONSE. The
  // code that walks an answer later recurses once per level (the webhook-key seal
  // re-serializes the body, the reconciler stores a report as text), so an answer nested
  // hundreds of thousands of levels deep would otherwise crash the gateway.
  int max_json_depth = 512;
  // Most JSON values (objects, arrays, scalars: each counts one) accepted in a 2xx answer
  // (config upstream.max_json_elements), counted while parsing; more: the call fails with
  // VENDOR_RESPONSE_TOO_LARGE. Decoded, a value costs up to about 320 bytes (the JSON tree,
  // then its protobuf copy: a 3 MB answer of 1,000,000 `{}` peaked at +308 MiB), which
  // max_response_bytes, counting text, cannot see: 250,000 values is about 80 MB per answer
  // at worst, and a segmentation of tens of thousands of points still fits.
  int64_t max_json_elements = 250'000;
};

// Turns (route, VendorRequest) into one HTTP exchange with the vendor: URL from the
// route's path template and the percent-encoded parameters, `X-API-Key`,
// `Content-Type: application/json` with a body, `Accept: application/json`,
// `X-Request-Id`, and a W3C `traceparent` (plus the caller's `tracestate`): a child of the
// call's trace with a new span id per attempt. The attempt's timeout is the route's, shortened to
// the caller's deadline; a deadline that has already passed fails with DEADLINE_EXCEEDED without
// calling the vendor. Non-2xx answers, transport failures and unreadable bodies become ApiErrors
// with the vendor's body preserved (secrets scrubbed). Thread-safe. `done` runs on the transport's
// event-loop thread.
class VendorClient final : public VendorCaller {
 public:
  VendorClient(VendorClientOptions options, http::HttpTransport* transport);

  void Call(routes::RouteId route_id, const vendor::VendorRequest& request,
            std::chrono::system_clock::time_point deadline, const CallOptions& options,
            VendorCallback done) override;

  // The full URL a request goes to (exposed for tests and logs; no secrets in it).
  std::string BuildUrl(const routes::Route& route, const vendor::VendorRequest& request) const;

 private:
  VendorResult Interpret(const routes::Route& route, http::HttpResult result) const;
  // The attempt's debug log line and client span.
  void ReportAttempt(const routes::Route& route, const VendorResult& result,
                     const tracing::TraceContext& trace, const tracing::SpanId& span_id,
                     int attempt, const std::string& request_id,
                     std::chrono::system_clock::time_point started,
                     const std::string& method) const;
  void Scrub(std::string* text) const;

  const VendorClientOptions options_;
  // options_.max_json_depth and options_.max_json_elements.
  const vendor::JsonLimits json_limits_;
  http::HttpTransport* const transport_;
};

// RFC 3986 percent-encoding of everything but unreserved characters.
std::string PercentEncode(std::string_view text);

}  // namespace inspection::upstream

#endif  // GATEWAY_UPSTREAM_VENDOR_CLIENT_H_
