#include "gateway/upstream/vendor_client.h"

#include <cstdint>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "adapters/vendor/event_config_mapper.h"
#include "gateway/logging/log.h"

namespace inspection::upstream {

std::string PercentEncode(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size());
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 0xF]);
    }
  }
  return out;
}

VendorClient::VendorClient(VendorClientOptions options, http::HttpTransport* transport)
    : options_(std::move(options)),
      json_limits_{options_.max_json_depth, options_.max_json_elements},
      transport_(transport) {}

std::string VendorClient::BuildUrl(const routes::Route& route,
                                   const vendor::VendorRequest& request) const {
  std::string path(route.path_template);
  for (const auto& [name, value] : request.path_params) {
    path = absl::StrReplaceAll(path, {{absl::StrCat("{", name, "}"), PercentEncode(value)}});
  }
  std::string url = options_.base_url + path;
  char separator = '?';
  for (const auto& [name, value] : request.query) {
    absl::StrAppend(&url, std::string(1, separator), PercentEncode(name), "=",
                    PercentEncode(value));
    separator = '&';
  }
  return url;
}

void VendorClient::Scrub(std::string* text) const {
  // A vendor that echoes our key in an error body must not make us leak it.
  if (!options_.api_key.empty() && text->find(options_.api_key) != std::string::npos) {
    *text = absl::StrReplaceAll(*text, {{options_.api_key, "[redacted]"}});
  }
}

void VendorClient::Call(routes::RouteId route_id, const vendor::VendorRequest& request,
                        std::chrono::system_clock::time_point deadline, const CallOptions& call,
                        VendorCallback done) {
  const routes::Route& route = routes::GetRoute(route_id);
  auto timeout = std::min(route.timeout, options_.max_attempt_timeout);
  if (deadline != std::chrono::system_clock::time_point::max()) {
    const auto remaining = std::chrono::duration_cast<std::chrono::milliseconds>(
                               deadline - std::chrono::system_clock::now()) -
                           options_.deadline_margin;
    if (remaining <= std::chrono::milliseconds(0)) {
      errors::ApiError error;
      error.code = absl::StatusCode::kDeadlineExceeded;
      error.reason = std::string(errors::kReasonDeadlineTooShort);
      error.failure.kind = resilience::VendorFailure::Kind::kNotCalled;
      error.metadata["route"] = std::string(route.metric_label);
      error.message = absl::StrCat("the call's deadline leaves no time to call the vendor (",
                                   std::string(route.metric_label), ")");
      VendorResult result;
      result.error = std::move(error);
      std::move(done)(std::move(result));
      return;
    }
    timeout = std::min(timeout, remaining);
  }

  http::HttpRequest http_request;
  http_request.method = std::string(routes::HttpMethodName(route.http_method));
  http_request.url = BuildUrl(route, request);
  http_request.timeout = timeout;
  // Never risk a silent re-send of a request that creates something at the vendor.
  http_request.reuse_connection = route.idempotency != routes::Idempotency::kNonIdempotent;
  http_request.headers.emplace_back("X-API-Key", options_.api_key);
  http_request.headers.emplace_back("Accept", "application/json");
  if (!call.request_id.empty()) http_request.headers.emplace_back("X-Request-Id", call.request_id);
  // Trace context: a child of the call's span (or a trace of its own), new per attempt.
  const tracing::TraceContext trace =
      call.trace.has_value() ? *call.trace : tracing::TraceContext::NewRoot();
  const tracing::SpanId attempt_span = tracing::NewSpanId();
  http_request.headers.emplace_back("traceparent", trace.ChildTraceparent(attempt_span));
  if (!trace.tracestate.empty()) http_request.headers.emplace_back("tracestate", trace.tracestate);
  if (request.body.has_value()) {
    http_request.headers.emplace_back("Content-Type", "application/json");
    // replace, not throw: a body must never abort the call on a bad byte.
    http_request.body =
        request.body->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  const std::string method = http_request.method;
  transport_->Send(
      std::move(http_request),
      [this, &route, done = std::move(done), trace, attempt_span, attempt = call.attempt,
       request_id = call.request_id, started = std::chrono::system_clock::now(),
       method](http::HttpResult result) mutable {
        VendorResult out = Interpret(route, std::move(result));
        ReportAttempt(route, out, trace, attempt_span, attempt, request_id, started, method);
        std::move(done)(std::move(out));
      });
}

void VendorClient::ReportAttempt(const routes::Route& route, const VendorResult& result,
                                 const tracing::TraceContext& trace, const tracing::SpanId& span_id,
                                 int attempt, const std::string& request_id,
                                 std::chrono::system_clock::time_point started,
                                 const std::string& method) const {
  const auto ended = std::chrono::system_clock::now();
  const std::string reason = result.ok() ? "" : result.error->reason;
  if (logging::DefaultLogger().Enabled(logging::Level::kDebug)) {
    logging::Log(
        logging::Level::kDebug, "vendor attempt",
        {{"request_id", request_id},
         {"route", std::string(route.metric_label)},
         {"account", options_.account_label},
         {"attempt", attempt},
         {"http_status", static_cast<int64_t>(result.response.status)},
         {"reason", reason},
         {"duration_ms", std::chrono::duration<double, std::milli>(ended - started).count()},
         {"trace_id", trace.TraceIdHex()},
         {"span_id", tracing::Hex(span_id)}});
  }
  if (options_.spans == nullptr || !trace.sampled()) return;
  tracing::Span span;
  span.trace_id = trace.trace_id;
  span.span_id = span_id;
  span.parent_span_id = trace.span_id;
  span.tracestate = trace.tracestate;
  span.name = absl::StrCat(method, " ", route.path_template);
  span.kind = tracing::SpanKind::kClient;
  auto nanos = [](std::chrono::system_clock::time_point t) {
    return static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count());
  };
  span.start_unix_nano = nanos(started);
  span.end_unix_nano = nanos(ended);
  span.status = result.ok() ? tracing::SpanStatus::kUnset : tracing::SpanStatus::kError;
  span.status_message = reason;
  span.attributes = {
      {"http.request.method", method},
      {"url.template", route.path_template},
      {"inspection.route", std::string(route.metric_label)},
      {"inspection.account", options_.account_label},
      {"inspection.attempt", static_cast<int64_t>(attempt)},
      {"http.request.resend_count", static_cast<int64_t>(attempt - 1)},
  };
  if (result.response.status != 0) {
    span.attributes.emplace_back("http.response.status_code",
                                 static_cast<int64_t>(result.response.status));
  }
  if (!request_id.empty()) span.attributes.emplace_back("inspection.request_id", request_id);
  options_.spans->Record(std::move(span));
}

VendorResult VendorClient::Interpret(const routes::Route& route, http::HttpResult result) const {
  VendorResult out;
  Scrub(&result.error_detail);
  Scrub(&result.response.body);
  if (result.error != http::TransportError::kNone) {
    out.error = errors::ApiError::FromTransport(route, result);
    return out;
  }
  out.response = std::move(result.response);
  const long status = out.response.status;
  if (status < 200 || status > 299) {
    out.error = errors::ApiError::FromVendorResponse(route, out.response, options_.clock());
    return out;
  }
  if (out.response.body.find_first_not_of(" \t\r\n") == std::string::npos) {
    return out;  // an empty 2xx body (no `body`): the mapper decides whether that is fine
  }
  nlohmann::json body;
  switch (vendor::ParseBoundedJson(out.response.body, json_limits_, &body)) {
    case vendor::BoundedParseResult::kOk:
      break;
    case vendor::BoundedParseResult::kTooDeep:
      out.error = errors::ApiError::FromBadVendorBody(
          route, out.response, errors::kReasonVendorMalformedResponse,
          absl::StrCat("the body nests objects and arrays deeper than ", json_limits_.max_depth,
                       " levels (upstream.max_json_depth)"));
      return out;
    case vendor::BoundedParseResult::kTooManyElements:
      // As an answer over max_response_bytes: the same request would get it again.
      out.error = errors::ApiError::FromBadVendorBody(
          route, out.response, errors::kReasonVendorResponseTooLarge,
          absl::StrCat("the body holds more than ", json_limits_.max_elements,
                       " JSON values (upstream.max_json_elements); the same request would get "
                       "it again"));
      out.error->code = absl::StatusCode::kResourceExhausted;
      out.error->failure.kind = resilience::VendorFailure::Kind::kTooLarge;
      return out;
    case vendor::BoundedParseResult::kInvalid:
      out.error = errors::ApiError::FromBadVendorBody(
          route, out.response, errors::kReasonVendorMalformedResponse,
          "the body is not valid JSON (malformed or truncated)");
      return out;
  }
  if (route.seals_webhook_key) {
    // The raw text goes too: the cache and the metrics of the layers above see only this.
    vendor::SealWebhookHeaderKey(&body);
    out.response.body = body.dump();
  }
  out.body = std::make_shared<const nlohmann::json>(std::move(body));
  return out;
}

}  // namespace inspection::upstream
