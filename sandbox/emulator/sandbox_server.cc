#include "sandbox/emulator/sandbox_server.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <map>
#include <optional>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "adapters/http/curl_transport.h"
#include "adapters/http/http_server.h"
#include "adapters/vendor/event_config_mapper.h"
#include "adapters/vendor/vendor_routes.h"
#include "sandbox/analysis/image_analysis.h"
#include "sandbox/emulator/admin_api.h"
#include "sandbox/emulator/request_checks.h"
#include "sandbox/emulator/sandbox_state.h"

namespace inspection::sandbox {
namespace {

using nlohmann::json;

// A JSON text, never throwing: strings from clients may hold invalid UTF-8.
std::string Dump(const json& body) {
  return body.dump(-1, ' ', false, json::error_handler_t::replace);
}

// The transport webhooks go through. Two jobs:
//  - Order. The dispatcher hands over attempts in due order but the HTTP transport runs
//    them concurrently, so events emitted together (newInspection, detectionFinished,
//    createReport) could reach the receiver in any order. Here one attempt is in flight at
//    a time, the next starts when it ends: the receiver sees the vendor's order. The cost:
//    a receiver that hangs delays later deliveries by up to the attempt timeout.
//  - Stop. After Close() every attempt fails at once, so deliveries end with Stop() while
//    the dispatcher (and its delivery log) lives until the server is destroyed.
class OrderedTransport final : public http::HttpTransport {
 public:
  explicit OrderedTransport(http::HttpTransport* inner)
      : shared_(std::make_shared<Shared>(inner)) {}

  void Send(http::HttpRequest request, http::HttpCallback done) override {
    Shared::Submit(shared_, Pending{std::move(request), std::move(done)});
  }

  void Close() { shared_->Close(); }

 private:
  struct Pending {
    http::HttpRequest request;
    http::HttpCallback done;
  };

  // Held by every callback in flight too: a transport callback may run after the server
  // that owns this has gone.
  struct Shared {
    explicit Shared(http::HttpTransport* inner_in) : inner(inner_in) {}

    static void Fail(Pending pending) {
      http::HttpResult result;
      result.error = http::TransportError::kOther;
      result.error_detail = "sandbox stopped";
      std::move(pending.done)(std::move(result));
    }

    static void Submit(const std::shared_ptr<Shared>& self, Pending pending) {
      bool rejected = false;
      bool start = false;
      {
        absl::MutexLock lock(&self->mu);
        if (self->closed) {
          rejected = true;
        } else {
          self->queue.push_back(std::move(pending));
          start = !self->in_flight;
          self->in_flight = true;
        }
      }
      if (rejected) {
        Fail(std::move(pending));  // never queued, so not moved from
      } else if (start) {
        StartNext(self);
      }
    }

    static void StartNext(const std::shared_ptr<Shared>& self) {
      Pending next;
      {
        absl::MutexLock lock(&self->mu);
        if (self->closed || self->queue.empty()) {
          self->in_flight = false;
          return;
        }
        next = std::move(self->queue.front());
        self->queue.pop_front();
      }
      self->inner->Send(std::move(next.request),
                        [self, done = std::move(next.done)](http::HttpResult result) mutable {
                          std::move(done)(std::move(result));
                          StartNext(self);
                        });
    }

    void Close() {
      std::deque<Pending> dropped;
      {
        absl::MutexLock lock(&mu);
        closed = true;
        dropped.swap(queue);
      }
      for (Pending& pending : dropped) Fail(std::move(pending));
    }

    http::HttpTransport* const inner;
    absl::Mutex mu;
    std::deque<Pending> queue ABSL_GUARDED_BY(mu);
    bool in_flight ABSL_GUARDED_BY(mu) = false;
    bool closed ABSL_GUARDED_BY(mu) = false;
  };

  const std::shared_ptr<Shared> shared_;
};

// The id a token's APITokenPtr carries for the key that created it: stable per key, and
// not the key (which is a secret and never leaves the request).
std::string ApiTokenId(const std::string& api_key) {
  static constexpr char kAlphabet[] =
      "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
  uint64_t hash = StableHash("api-token:" + api_key);
  std::string id;
  for (int i = 0; i < 10; ++i) {
    id.push_back(kAlphabet[hash % (sizeof(kAlphabet) - 1)]);
    hash /= sizeof(kAlphabet) - 1;
  }
  return id;
}

// One request as the vendor handlers see it.
struct VendorCall {
  const http::ServerRequest& http;
  std::string api_key;
  std::vector<std::string> path_params;  // `{id}` segments, in order
};

}  // namespace

struct SandboxServer::Impl {
  using Handler = Reply (Impl::*)(const VendorCall&, std::vector<WebhookEvent>*);

  // A vendor endpoint: method, path (the spec's spelling; see PathMatches) and label (the
  // fault rules' `route`), all from the RPC's vendor_route annotation, and its handler.
  struct Route {
    std::string method;
    std::string path;
    std::string label;
    Handler handler;
  };

  explicit Impl(SandboxOptions options_in) : options(std::move(options_in)), faults(options.seed) {}

  // --- Serving ---
  void Handle(const http::ServerRequest& request, http::ServerResponse& response);
  Reply HandleVendor(const http::ServerRequest& request, std::vector<WebhookEvent>* events,
                     std::optional<FaultDecision>* fault);
  void Enqueue(std::vector<WebhookEvent> events);

  // --- Vendor endpoints ---
  Reply CreateToken(const VendorCall& call, std::vector<WebhookEvent>* events);
  Reply GetTokenStatus(const VendorCall& call, std::vector<WebhookEvent>* events);
  Reply RemoveBackground(const VendorCall& call, std::vector<WebhookEvent>* events);
  Reply AssessQuality(const VendorCall& call, std::vector<WebhookEvent>* events);
  Reply AssessQualityBatch(const VendorCall& call, std::vector<WebhookEvent>* events);
  Reply SegmentVehicle(const VendorCall& call, std::vector<WebhookEvent>* events);
  Reply SegmentParts(const VendorCall& call, std::vector<WebhookEvent>* events);
  Reply DetectDamage(const VendorCall& call, std::vector<WebhookEvent>* events);
  Reply SearchInspections(const VendorCall& call, std::vector<WebhookEvent>* events);
  Reply GetDamagesReport(const VendorCall& call, std::vector<WebhookEvent>* events);
  Reply GetWebhookConfig(const VendorCall& call, std::vector<WebhookEvent>* events);
  Reply UpdateWebhookConfig(const VendorCall& call, std::vector<WebhookEvent>* events);
  Reply ListEventConfigs(const VendorCall& call, std::vector<WebhookEvent>* events);
  Reply UpdateEventConfig(const VendorCall& call, std::vector<WebhookEvent>* events);
  Reply TestWebhook(const VendorCall& call, std::vector<WebhookEvent>* events);

  static const std::vector<Route>& Routes();
  // RPC full name -> the handler of its vendor endpoint.
  static const std::map<std::string, Handler>& Handlers();

  // Declared in construction order; destroyed in reverse: the HTTP server stops first,
  // then the dispatcher (before the transport it sends through).
  const SandboxOptions options;
  SandboxClock clock;
  FaultInjector faults;
  std::shared_ptr<http::HttpTransport> transport;
  std::unique_ptr<OrderedTransport> ordered;
  std::unique_ptr<SandboxState> state;
  std::unique_ptr<WebhookDispatcher> dispatcher;
  std::unique_ptr<http::HttpServer> http;
  int port = 0;
  std::string base_url;
};

namespace {

// Largest request body read (the image endpoints take URLs, not images); larger: 413.
constexpr size_t kMaxBodyBytes = 16 * 1024 * 1024;

// Parses the JSON body of a POST/PUT. False (with the 400 in `error`) when it is not JSON.
bool ParseJsonBody(const http::ServerRequest& request, json* body, Reply* error) {
  *body = json::parse(request.body, nullptr, /*allow_exceptions=*/false);
  if (body->is_discarded()) {
    *error = InvalidRequestReply(
        {{"body", request.body.empty() ? "The request body must be a JSON object."
                                       : "The request body is not valid JSON."}});
    return false;
  }
  return true;
}

// `path` matches `pattern` segment by segment; `{...}` matches any non-empty segment
// (collected in `params`). The spec spells the version prefix both `apiV1` and `apiv1`
// (and `apiV1_sdk`), so segments starting with it match in either spelling.
bool PathMatches(const std::string& pattern, const std::string& path,
                 std::vector<std::string>* params) {
  const std::vector<absl::string_view> want = absl::StrSplit(pattern, '/');
  const std::vector<absl::string_view> have = absl::StrSplit(path, '/');
  if (want.size() != have.size()) return false;
  params->clear();
  for (size_t i = 0; i < want.size(); ++i) {
    if (absl::StartsWith(want[i], "{")) {
      if (have[i].empty()) return false;
      params->emplace_back(have[i]);
    } else if (want[i] != have[i] && !(absl::StartsWithIgnoreCase(want[i], "apiv1") &&
                                       absl::EqualsIgnoreCase(want[i], have[i]))) {
      return false;
    }
  }
  return true;
}

// Header names are case-insensitive.
const std::string* FindApiKey(const http::ServerRequest& request) {
  return request.Header("X-API-Key");
}

void WriteReply(const Reply& reply, http::ServerResponse& response) {
  response.status = reply.status;
  for (const auto& [name, value] : reply.headers) response.SetHeader(name, value);
  response.SetContent(Dump(reply.body), "application/json");
}

std::vector<std::string> Strings(const google::protobuf::RepeatedPtrField<std::string>& list) {
  return {list.begin(), list.end()};
}

}  // namespace

const std::vector<SandboxServer::Impl::Route>& SandboxServer::Impl::Routes() {
  static const auto* const kRoutes = [] {
    const std::map<std::string, Handler>& handlers = Handlers();
    auto* routes = new std::vector<Route>();
    for (const google::protobuf::MethodDescriptor* method : vendor::ApiMethods()) {
      const v1::VendorRoute* annotation = vendor::VendorRouteOf(*method);
      if (annotation == nullptr) continue;
      auto handler = handlers.find(method->full_name());
      if (handler == handlers.end()) {
        // An endpoint the sandbox does not emulate: caught by sandbox_server_test.
        std::fprintf(stderr, "sandbox: no handler for %s\n", method->full_name().c_str());
        std::abort();
      }
      routes->push_back({vendor::HttpMethodName(annotation->method()), annotation->path(),
                         annotation->metric_label(), handler->second});
    }
    return routes;
  }();
  return *kRoutes;
}

const std::map<std::string, SandboxServer::Impl::Handler>& SandboxServer::Impl::Handlers() {
  // The endpoint each annotated RPC reaches. Its method, path and label come from the
  // RPC's vendor_route annotation (the protos), never spelled here a second time.
  static const auto* const kHandlers = new std::map<std::string, Handler>{
      {"inspection.v1.TokenService.CreateToken", &Impl::CreateToken},
      {"inspection.v1.TokenService.GetTokenStatus", &Impl::GetTokenStatus},
      {"inspection.v1.ImageService.RemoveBackground", &Impl::RemoveBackground},
      {"inspection.v1.ImageService.AssessQuality", &Impl::AssessQuality},
      {"inspection.v1.ImageService.AssessQualityBatch", &Impl::AssessQualityBatch},
      {"inspection.v1.ImageService.SegmentVehicle", &Impl::SegmentVehicle},
      {"inspection.v1.ImageService.SegmentParts", &Impl::SegmentParts},
      {"inspection.v1.DamageService.DetectDamage", &Impl::DetectDamage},
      {"inspection.v1.InspectionService.SearchInspections", &Impl::SearchInspections},
      {"inspection.v1.InspectionService.GetDamagesReport", &Impl::GetDamagesReport},
      {"inspection.v1.EventConfigService.GetWebhookConfig", &Impl::GetWebhookConfig},
      {"inspection.v1.EventConfigService.UpdateWebhookConfig", &Impl::UpdateWebhookConfig},
      {"inspection.v1.EventConfigService.ListEventConfigs", &Impl::ListEventConfigs},
      {"inspection.v1.EventConfigService.UpdateEventConfig", &Impl::UpdateEventConfig},
      {"inspection.v1.EventConfigService.TestWebhook", &Impl::TestWebhook},
  };
  return *kHandlers;
}

bool SandboxServer::Emulates(const std::string& rpc) { return Impl::Handlers().count(rpc) > 0; }

void SandboxServer::Impl::Enqueue(std::vector<WebhookEvent> events) {
  // In emission order: the dispatcher keeps it (due times grow with each call) and so
  // does OrderedTransport.
  for (WebhookEvent& event : events) dispatcher->Enqueue(std::move(event));
}

void SandboxServer::Impl::Handle(const http::ServerRequest& request,
                                 http::ServerResponse& response) {
  std::vector<WebhookEvent> events;
  if (request.path == "/_sandbox" || absl::StartsWith(request.path, "/_sandbox/")) {
    const AdminContext context{state.get(), &clock, &faults, dispatcher.get()};
    WriteReply(HandleAdminRequest(context, request.method, request.path, request.body, &events),
               response);
    Enqueue(std::move(events));
    return;
  }

  std::optional<FaultDecision> fault;
  const Reply reply = HandleVendor(request, &events, &fault);
  Enqueue(std::move(events));
  if (!fault.has_value()) {
    WriteReply(reply, response);
    return;
  }
  const FaultRule& rule = fault->rule;
  switch (rule.kind) {
    case FaultKind::kReset:
      response.reset = true;  // no answer: the connection is reset
      return;
    case FaultKind::kMalformed:
      response.status = 200;
      response.SetContent("{not json", "application/json");
      return;
    case FaultKind::kTruncate:
      // Declares the whole length, sends half, then the connection is closed under the
      // client mid-body.
      WriteReply(reply, response);
      response.truncate_body_at = response.body.size() / 2;
      return;
    case FaultKind::kSlowBody:
      // The whole body, in about eight chunks with `latency` between them.
      WriteReply(reply, response);
      response.chunk_bytes = std::max<size_t>(16, (response.body.size() + 7) / 8);
      response.chunk_pause = rule.latency;
      return;
    default:
      WriteReply(reply, response);  // not reached: the others are answered in HandleVendor
      return;
  }
}

// Auth, routing, the fault decision, then the endpoint. `fault` is set only for faults
// that shape the real answer (truncate, slow_body); the others are answered here.
Reply SandboxServer::Impl::HandleVendor(const http::ServerRequest& request,
                                        std::vector<WebhookEvent>* events,
                                        std::optional<FaultDecision>* fault) {
  const std::string* key = FindApiKey(request);
  if (key == nullptr) {
    return ErrorReply(401, "unauthorized", "The X-API-Key header is required.");
  }
  if (std::find(options.api_keys.begin(), options.api_keys.end(), *key) == options.api_keys.end()) {
    // Never echo the key: it is a secret even when wrong (a typo of the real one).
    return ErrorReply(401, "unauthorized", "The X-API-Key header does not hold a known API key.");
  }

  const Route* route = nullptr;
  bool path_known = false;
  std::vector<std::string> params;
  for (const Route& candidate : Routes()) {
    if (!PathMatches(candidate.path, request.path, &params)) continue;
    path_known = true;
    if (request.method == candidate.method) {
      route = &candidate;
      break;
    }
  }
  if (route == nullptr) {
    return path_known ? ErrorReply(405, "method_not_allowed",
                                   request.method + " is not allowed on " + request.path + ".")
                      : ErrorReply(404, "not_found", "No endpoint at " + request.path + ".");
  }

  // Decided before the endpoint runs: a fault that answers instead of the endpoint leaves
  // the state untouched (a token creation failed by a fault creates nothing).
  std::optional<FaultDecision> decision = faults.DecideHttp(route->label);
  if (decision.has_value()) {
    const FaultRule& rule = decision->rule;
    switch (rule.kind) {
      case FaultKind::kLatency:
        http->Pause(rule.latency);  // then answers normally
        break;
      case FaultKind::kError: {
        Reply reply;
        reply.status = rule.status;
        json body = json::parse(rule.body, nullptr, /*allow_exceptions=*/false);
        reply.body = rule.body.empty() || body.is_discarded()
                         ? json{{"error", "injected_fault"},
                                {"message",
                                 rule.body.empty() ? "Fault injected by the sandbox." : rule.body}}
                         : std::move(body);
        return reply;
      }
      case FaultKind::kRateLimit: {
        Reply reply = ErrorReply(429, "rate_limited",
                                 "Too many requests; retry after " + rule.retry_after + ".");
        reply.headers.emplace_back("Retry-After", rule.retry_after);
        return reply;
      }
      case FaultKind::kReset:
        // Handle() resets the connection instead of answering; the endpoint does not run.
        *fault = decision;
        return Reply{};
      case FaultKind::kMalformed:
        // Handle() writes the non-JSON body (a Reply holds only JSON); the endpoint does
        // not run.
        *fault = decision;
        return Reply{};
      case FaultKind::kTruncate:
      case FaultKind::kSlowBody:
        *fault = decision;
        break;
    }
  }
  const VendorCall call{request, *key, std::move(params)};
  return (this->*(route->handler))(call, events);
}

// --- Vendor endpoints ---

Reply SandboxServer::Impl::CreateToken(const VendorCall& call, std::vector<WebhookEvent>* events) {
  json body;
  Reply error;
  if (!ParseJsonBody(call.http, &body, &error)) return error;
  v1::CreateTokenRequest typed;
  if (auto violations = CheckCreateToken(body, &typed); !violations.empty()) {
    return InvalidRequestReply(violations);
  }
  return state->CreateToken(typed, ApiTokenId(call.api_key), events);
}

Reply SandboxServer::Impl::GetTokenStatus(const VendorCall& call, std::vector<WebhookEvent>*) {
  std::optional<std::string> device_id = call.http.QueryParam("deviceId");
  std::string uid;
  if (auto violations = CheckDeviceId(device_id ? &*device_id : nullptr, &uid);
      !violations.empty()) {
    return InvalidRequestReply(violations);
  }
  return state->GetTokenStatus(uid);
}

Reply SandboxServer::Impl::RemoveBackground(const VendorCall& call, std::vector<WebhookEvent>*) {
  json body;
  Reply error;
  if (!ParseJsonBody(call.http, &body, &error)) return error;
  v1::RemoveBackgroundRequest typed;
  if (auto violations = CheckRemoveBackground(body, &typed); !violations.empty()) {
    return InvalidRequestReply(violations);
  }
  return OkReply(sandbox::RemoveBackground(body, base_url + "/cdn"));
}

Reply SandboxServer::Impl::AssessQuality(const VendorCall& call, std::vector<WebhookEvent>*) {
  json body;
  Reply error;
  if (!ParseJsonBody(call.http, &body, &error)) return error;
  v1::AssessQualityRequest typed;
  if (auto violations = CheckAssessQuality(body, &typed); !violations.empty()) {
    return InvalidRequestReply(violations);
  }
  return OkReply(AnalyzeQuality(typed.url()));
}

Reply SandboxServer::Impl::AssessQualityBatch(const VendorCall& call, std::vector<WebhookEvent>*) {
  json body;
  Reply error;
  if (!ParseJsonBody(call.http, &body, &error)) return error;
  v1::AssessQualityBatchRequest typed;
  if (auto violations = CheckAssessQualityBatch(body, &typed); !violations.empty()) {
    return InvalidRequestReply(violations);
  }
  return OkReply(AnalyzeQualityBatch(Strings(typed.urls())));
}

Reply SandboxServer::Impl::SegmentVehicle(const VendorCall& call, std::vector<WebhookEvent>*) {
  json body;
  Reply error;
  if (!ParseJsonBody(call.http, &body, &error)) return error;
  v1::SegmentVehicleRequest typed;
  if (auto violations = CheckSegmentVehicle(body, &typed); !violations.empty()) {
    return InvalidRequestReply(violations);
  }
  return OkReply(sandbox::SegmentVehicle(Strings(typed.urls())));
}

Reply SandboxServer::Impl::SegmentParts(const VendorCall& call, std::vector<WebhookEvent>*) {
  json body;
  Reply error;
  if (!ParseJsonBody(call.http, &body, &error)) return error;
  v1::SegmentPartsRequest typed;
  if (auto violations = CheckSegmentParts(body, &typed); !violations.empty()) {
    return InvalidRequestReply(violations);
  }
  return OkReply(sandbox::SegmentParts(Strings(typed.urls())));
}

Reply SandboxServer::Impl::DetectDamage(const VendorCall& call, std::vector<WebhookEvent>* events) {
  json body;
  Reply error;
  if (!ParseJsonBody(call.http, &body, &error)) return error;
  v1::DetectDamageRequest typed;
  if (auto violations = CheckDetectDamage(body, &typed); !violations.empty()) {
    return InvalidRequestReply(violations);
  }
  return state->DetectDamage(Strings(typed.urls()), events);
}

Reply SandboxServer::Impl::SearchInspections(const VendorCall& call, std::vector<WebhookEvent>*) {
  std::map<std::string, std::string> query;
  for (const char* key : {"licensePlate", "username", "page", "limit"}) {
    if (auto value = call.http.QueryParam(key)) query[key] = *std::move(value);
  }
  v1::SearchInspectionsRequest typed;
  if (auto violations = CheckSearchInspections(query, &typed); !violations.empty()) {
    return InvalidRequestReply(violations);
  }
  return state->SearchInspections(typed);
}

Reply SandboxServer::Impl::GetDamagesReport(const VendorCall& call, std::vector<WebhookEvent>*) {
  const std::string& id = call.path_params.front();
  if (auto violations = CheckDamagesReportId(id); !violations.empty()) {
    return InvalidRequestReply(violations);
  }
  return state->GetDamagesReport(id);
}

Reply SandboxServer::Impl::GetWebhookConfig(const VendorCall&, std::vector<WebhookEvent>*) {
  return state->GetWebhookConfig();
}

Reply SandboxServer::Impl::UpdateWebhookConfig(const VendorCall& call, std::vector<WebhookEvent>*) {
  json body;
  Reply error;
  if (!ParseJsonBody(call.http, &body, &error)) return error;
  v1::UpdateWebhookConfigRequest typed;
  if (auto violations = CheckUpdateWebhookConfig(body, &typed); !violations.empty()) {
    return InvalidRequestReply(violations);
  }
  std::optional<std::string> header_key;
  if (typed.has_webhook_header_key()) header_key = typed.webhook_header_key();
  return state->UpdateWebhookConfig(typed.webhook_url_v2(), header_key);
}

Reply SandboxServer::Impl::ListEventConfigs(const VendorCall&, std::vector<WebhookEvent>*) {
  return state->ListEventConfigs();
}

Reply SandboxServer::Impl::UpdateEventConfig(const VendorCall& call, std::vector<WebhookEvent>*) {
  json body;
  Reply error;
  if (!ParseJsonBody(call.http, &body, &error)) return error;
  v1::UpdateEventConfigRequest typed;
  if (auto violations = CheckUpdateEventConfig(body, &typed); !violations.empty()) {
    return InvalidRequestReply(violations);
  }
  return state->UpdateEventConfig(
      vendor::EventNameString(typed.event_name(), typed.event_name_raw()), typed.webhook());
}

Reply SandboxServer::Impl::TestWebhook(const VendorCall& call, std::vector<WebhookEvent>* events) {
  // The spec does not show where eventName and inspectionId go: both the query string and
  // a JSON body are read (the body wins when both carry a key).
  json params = json::object();
  for (const char* key : {"eventName", "inspectionId"}) {
    if (auto value = call.http.QueryParam(key)) params[key] = *std::move(value);
  }
  if (!absl::StripAsciiWhitespace(call.http.body).empty()) {
    json body;
    Reply error;
    if (!ParseJsonBody(call.http, &body, &error)) return error;
    if (!body.is_object()) {
      return InvalidRequestReply({{"body", "The request body must be a JSON object."}});
    }
    for (auto it = body.begin(); it != body.end(); ++it) params[it.key()] = it.value();
  }
  v1::TestWebhookRequest typed;
  if (auto violations = CheckTestWebhook(params, &typed); !violations.empty()) {
    return InvalidRequestReply(violations);
  }
  return state->TestWebhook(vendor::EventNameString(typed.event_name(), typed.event_name_raw()),
                            typed.inspection_id(), events);
}

// --- SandboxServer ---

SandboxServer::SandboxServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

SandboxServer::~SandboxServer() { Stop(); }

absl::StatusOr<std::unique_ptr<SandboxServer>> SandboxServer::Start(SandboxOptions options) {
  std::vector<FaultRule> rules;
  if (!options.faults.is_null() && !(options.faults.is_array() && options.faults.empty())) {
    absl::StatusOr<std::vector<FaultRule>> parsed = ParseFaultRules(options.faults);
    if (!parsed.ok()) return parsed.status();
    rules = *std::move(parsed);
  }
  if (options.api_keys.empty()) {
    return absl::InvalidArgumentError("at least one API key is required");
  }
  auto impl = std::make_unique<Impl>(std::move(options));
  Impl& server = *impl;
  server.faults.AddRules(std::move(rules));

  server.transport = server.options.transport;
  if (server.transport == nullptr) {
    absl::StatusOr<std::unique_ptr<http::CurlTransport>> curl = http::CurlTransport::Create();
    if (!curl.ok()) return curl.status();
    server.transport = std::shared_ptr<http::HttpTransport>(*std::move(curl));
  }
  server.ordered = std::make_unique<OrderedTransport>(server.transport.get());
  WebhookDispatcherOptions delivery;
  delivery.initial_delay = server.options.webhook_delay;
  delivery.retry_schedule = server.options.webhook_retry_schedule;
  SandboxClock* clock = &server.clock;
  server.dispatcher = std::make_unique<WebhookDispatcher>(
      delivery, server.ordered.get(), &server.faults, [clock] { return IsoTime(clock->Now()); });

  http::HttpServerOptions http_options;
  // Endpoints run on workers: a latency fault holds one for its pause.
  http_options.worker_threads = server.options.threads;
  // A development tool on loopback, in front of one gateway with up to
  // upstream.max_connections connections: limits against accidents, not attacks. Idle
  // connections are kept 30 s, longer than the gateway keeps them, so a test never sees
  // the sandbox close a connection the gateway is about to reuse.
  http::HttpServerLimits& limits = http_options.limits;
  limits.keep_alive_timeout = std::chrono::seconds(30);
  limits.max_head_bytes = 64 * 1024;
  limits.max_body_bytes = kMaxBodyBytes;
  limits.max_connections = 100000;
  limits.max_connections_per_client = 100000;
  limits.max_requests_in_flight = 100000;
  limits.linger_max_bytes = kMaxBodyBytes + 64 * 1024;
  server.http = std::make_unique<http::HttpServer>(
      nullptr,
      [&server](http::ServerRequest& request, http::ServerResponse& response) {
        server.Handle(request, response);
      },
      std::move(http_options));
  absl::StatusOr<int> port = server.http->Bind(server.options.host, server.options.port);
  if (!port.ok()) return port.status();
  server.port = *port;
  // A wildcard listen address is reachable on loopback; an IPv6 literal needs brackets.
  std::string host = server.options.host;
  if (host == "0.0.0.0" || host.empty()) host = "127.0.0.1";
  if (host == "::") host = "::1";
  if (host.find(':') != std::string::npos) host = "[" + host + "]";
  server.base_url = absl::StrCat("http://", host, ":", server.port);

  StateSettings settings;
  settings.seed = server.options.seed;
  settings.base_url = server.base_url;
  settings.webapp_url = server.base_url + "/webapp";
  server.state = std::make_unique<SandboxState>(std::move(settings), &server.clock);

  if (absl::Status serving = server.http->Serve(); !serving.ok()) {
    return serving;
  }
  return std::unique_ptr<SandboxServer>(new SandboxServer(std::move(impl)));
}

int SandboxServer::port() const { return impl_->port; }

std::string SandboxServer::BaseUrl() const { return impl_->base_url; }

std::string SandboxServer::WebappUrl() const { return impl_->base_url + "/webapp"; }

void SandboxServer::ConfigureWebhook(const std::string& url, const std::string& header_key,
                                     const std::vector<std::string>& events) {
  impl_->state->ConfigureWebhook(url, header_key, events);
}

FaultInjector& SandboxServer::faults() { return impl_->faults; }

WebhookDispatcher& SandboxServer::webhooks() { return *impl_->dispatcher; }

SandboxClock& SandboxServer::clock() { return impl_->clock; }

void SandboxServer::Stop() {
  if (impl_ == nullptr) return;
  impl_->http->Stop();
  // Deliveries end here; the dispatcher and its log live until the server is destroyed.
  impl_->ordered->Close();
}

}  // namespace inspection::sandbox
