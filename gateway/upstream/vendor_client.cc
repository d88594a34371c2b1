#include "gateway/upstream/vendor_client.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "adapters/vendor/event_config_mapper.h"

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
    : options_(std::move(options)), transport_(transport) {}

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
      error.failure.kind = errors::VendorFailure::Kind::kNotCalled;
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
  if (request.body.has_value()) {
    http_request.headers.emplace_back("Content-Type", "application/json");
    // replace, not throw: a body must never abort the call on a bad byte.
    http_request.body =
        request.body->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  transport_->Send(std::move(http_request),
                   [this, &route, done = std::move(done)](http::HttpResult result) mutable {
                     std::move(done)(Interpret(route, std::move(result)));
                   });
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
    out.body = nullptr;  // an empty 2xx body: the mapper decides whether that is fine
    return out;
  }
  out.body = nlohmann::json::parse(out.response.body, nullptr, /*allow_exceptions=*/false);
  if (out.body.is_discarded()) {
    out.error = errors::ApiError::FromBadVendorBody(
        route, out.response, errors::kReasonVendorMalformedResponse,
        "the body is not valid JSON (malformed or truncated)");
    out.body = nullptr;
    return out;
  }
  if (route.seals_webhook_key) {
    // The raw text goes too: the cache and the metrics of the layers above see only this.
    vendor::SealWebhookHeaderKey(&out.body);
    out.response.body = out.body.dump();
  }
  return out;
}

}  // namespace inspection::upstream
