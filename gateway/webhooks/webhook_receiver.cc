#include "gateway/webhooks/webhook_receiver.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "adapters/hashing/sha256.h"
#include "adapters/http/http_server.h"
#include "adapters/redis/redis_status.h"
#include "adapters/vendor/event_mapper.h"
#include "gateway/logging/log.h"
#include "nlohmann/json.hpp"

namespace inspection::webhooks {
namespace {

using nlohmann::json;

constexpr char kApiKeyHeader[] = "x-api-key";

// Serialises an answer. `replace` instead of the default `strict`: a configured string
// (a JSON pointer in a message) or a backend's cursor that is not valid UTF-8 must not
// turn into an exception on the request path.
std::string Dump(const json& value) {
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

void Reply(http::ServerResponse& response, int status, const std::string& error,
           const std::string& message) {
  response.status = status;
  response.SetContent(Dump(json{{"error", error}, {"message", message}}), "application/json");
}

http::ServerResponse Reply(int status, const std::string& error, const std::string& message) {
  http::ServerResponse response;
  Reply(response, status, error, message);
  return response;
}

// What the answers the HTTP layer produces itself say.
std::string ErrorMessage(int status) {
  switch (status) {
    case 400:
      return "the request is not valid HTTP/1.1, or its framing is ambiguous";
    case 408:
      return "the body arrived too slowly";
    case 413:
      return "the body is too large";
    case 417:
      return "only Expect: 100-continue is supported";
    case 431:
      return "the request head is too large or has too many header lines";
    case 501:
      return "the method is not implemented";
    case 503:
      return "the receiver is at its connection or request limit; deliver it again later";
    case 505:
      return "only HTTP/1.1 and HTTP/1.0 are served";
    default:
      return "the request was refused by the HTTP layer";
  }
}

// The `error` of the answers the HTTP layer produces itself (see Start()).
std::string ErrorName(int status) {
  switch (status) {
    case 400:
      return "bad_request";
    case 404:
      return "not_found";
    case 405:
      return "method_not_allowed";
    case 413:
      return "payload_too_large";
    case 408:
      return "request_timeout";
    case 417:
      return "expectation_failed";
    case 431:
      return "header_fields_too_large";
    case 500:
      return "internal";
    case 501:
      return "not_implemented";
    case 503:
      return "unavailable";
    case 505:
      return "http_version_not_supported";
    default:
      return absl::StrCat("http_", status);
  }
}

absl::StatusOr<JsonPointer> ParsePointer(const std::string& option, const std::string& text) {
  absl::StatusOr<JsonPointer> pointer = JsonPointer::Parse(text);
  if (!pointer.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("webhook receiver option ", option, ": ", pointer.status().message()));
  }
  return pointer;
}

// Account names end up in stored events, log lines, metric labels and gRPC metadata, and
// before the payload in the duplicate key (see the header): a plain identifier.
bool ValidAccountName(const std::string& name) {
  if (name.empty()) return false;
  for (const char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') {
      return false;
    }
  }
  return true;
}

// The duplicate key (see the header): the default account's is the payload's hash alone,
// exactly as before accounts existed, so that events already stored keep matching.
std::string ContentHash(const std::string& account, const std::string& payload) {
  if (account.empty()) return hashing::Sha256Hex(payload);
  return hashing::Sha256Hex(absl::StrCat(account, "\n", payload));
}

// How messages name an account.
std::string AccountLabel(const std::string& name) {
  return name.empty() ? "the default webhook account"
                      : absl::StrCat("webhook account \"", name, "\"");
}

}  // namespace

std::set<std::string> SpecEventNames() {
  const std::vector<std::string>& names = vendor::SpecEventNames();
  return {names.begin(), names.end()};
}

namespace {

// The options a receiver refuses to start with (after the default account's keys): an
// account without a key, no event log, a bad path or limit.
absl::Status CheckOptions(const WebhookReceiverOptions& options, const eventlog::EventLog* log) {
  for (size_t i = 0; i < options.accounts.size(); ++i) {
    const WebhookAccount& account = options.accounts[i];
    if (account.current_key.empty()) {
      // The name may be invalid still (it is checked below): escaped, and by position.
      return absl::FailedPreconditionError(absl::StrCat(
          "webhook account #", i + 1, " (\"", absl::CHexEscape(account.name),
          "\") has no webhook key (its webhookHeaderKey): the webhook receiver does not run "
          "an account without one"));
    }
  }
  if (log == nullptr) return absl::InvalidArgumentError("webhook receiver: no event log");
  if (options.path.empty() || options.path[0] != '/') {
    return absl::InvalidArgumentError(
        absl::StrCat("webhook receiver path \"", options.path, "\" must start with '/'"));
  }
  if (options.limits.max_body_bytes == 0) {
    return absl::InvalidArgumentError("webhook receiver max_body_bytes must be positive");
  }
  if (absl::Status limits = http::ValidateLimits(options.limits); !limits.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("webhook receiver: ", limits.message()));
  }
  if (options.json_limits.max_depth < 1 || options.json_limits.max_elements < 1) {
    return absl::InvalidArgumentError(
        "webhook receiver json_limits: max_depth and max_elements must be positive");
  }
  if (options.threads < 1 || options.io_threads < 1) {
    return absl::InvalidArgumentError("webhook receiver threads must be at least 1");
  }
  return absl::OkStatus();
}

// The HTTP server under the receiver: its threads and limits, and JSON bodies for the
// answers the HTTP layer produces itself.
http::HttpServerOptions HttpOptionsFor(const WebhookReceiverOptions& options) {
  http::HttpServerOptions server_options;
  server_options.io_threads = options.io_threads;
  server_options.worker_threads = options.threads;
  server_options.limits = options.limits;
  // A sender whose just-too-large body was refused still gets to read the 413: what it
  // keeps sending is drained (not stored) up to a little past the limit.
  server_options.limits.linger_max_bytes = std::max(
      server_options.limits.linger_max_bytes, server_options.limits.max_body_bytes + 64 * 1024);
  // Answers the HTTP layer produces itself (malformed request, limits...) and exceptions
  // get a small JSON body, like every other answer.
  server_options.error_body = [](http::ServerResponse& response) {
    Reply(response, response.status, ErrorName(response.status), ErrorMessage(response.status));
  };
  server_options.exception_body = [](http::ServerResponse& response) {
    Reply(response, 500, "internal", "internal error; nothing was stored");
  };
  if (WebhookMetrics* metrics = options.metrics; metrics != nullptr) {
    server_options.on_event = [metrics](http::HttpServerEvent event) {
      metrics->OnHttpEvent(event);
    };
  }
  return server_options;
}

}  // namespace

absl::StatusOr<std::unique_ptr<WebhookReceiver>> WebhookReceiver::Start(
    WebhookReceiverOptions options, eventlog::EventLog* log) {
  // The keys first: a receiver without one must not start, whatever else is wrong.
  absl::StatusOr<WebhookKeyMatcher> default_keys =
      WebhookKeyMatcher::Create(options.current_key, options.previous_key);
  if (!default_keys.ok()) return default_keys.status();
  if (absl::Status checked = CheckOptions(options, log); !checked.ok()) return checked;
  absl::StatusOr<JsonPointer> event_name =
      ParsePointer("event_name_pointer", options.event_name_pointer);
  if (!event_name.ok()) return event_name.status();
  absl::StatusOr<JsonPointer> inspection_id =
      ParsePointer("inspection_id_pointer", options.inspection_id_pointer);
  if (!inspection_id.ok()) return inspection_id.status();
  absl::StatusOr<JsonPointer> token_id = ParsePointer("token_id_pointer", options.token_id_pointer);
  if (!token_id.ok()) return token_id.status();
  absl::StatusOr<JsonPointer> vehicle_id =
      ParsePointer("vehicle_id_pointer", options.vehicle_id_pointer);
  if (!vehicle_id.ok()) return vehicle_id.status();
  if (!options.clock) options.clock = [] { return absl::Now(); };

  // The accounts: each on its own path, with keys of its own.
  Endpoints endpoints;
  endpoints.emplace(options.path, Endpoint{"", *std::move(default_keys)});
  // Every key seen so far, with its account's name: a key two accounts shared would let
  // a sender holding one account's key deliver into the other's. Compared in plain here,
  // once at startup (not per request, so timing reveals nothing); only digests are kept.
  std::vector<std::pair<const std::string*, std::string>> seen_keys = {{&options.current_key, ""}};
  if (!options.previous_key.empty()) seen_keys.emplace_back(&options.previous_key, "");
  std::set<std::string> names;
  for (size_t i = 0; i < options.accounts.size(); ++i) {
    const WebhookAccount& account = options.accounts[i];
    if (!ValidAccountName(account.name)) {
      return absl::InvalidArgumentError(absl::StrCat("webhook account #", i + 1, ": name \"",
                                                     absl::CHexEscape(account.name),
                                                     "\" must be 1 or more of [A-Za-z0-9._-]"));
    }
    if (!names.insert(account.name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("webhook account \"", account.name, "\" is configured twice"));
    }
    if (account.path.empty() || account.path[0] != '/') {
      return absl::InvalidArgumentError(absl::StrCat("webhook account \"", account.name,
                                                     "\": path \"", account.path,
                                                     "\" must start with '/'"));
    }
    absl::StatusOr<WebhookKeyMatcher> account_keys =
        WebhookKeyMatcher::Create(account.current_key, account.previous_key);
    if (!account_keys.ok()) return account_keys.status();  // not reached: checked above
    const auto [at, added] =
        endpoints.emplace(account.path, Endpoint{account.name, *std::move(account_keys)});
    if (!added) {
      return absl::InvalidArgumentError(
          absl::StrCat("webhook account \"", account.name, "\": path \"", account.path,
                       "\" is already the path of ", AccountLabel(at->second.account),
                       " (each account needs a path of its own)"));
    }
    for (const std::string* key : {&account.current_key, &account.previous_key}) {
      if (key->empty()) continue;
      for (const auto& [seen, owner] : seen_keys) {
        if (*seen == *key && owner != account.name) {
          return absl::InvalidArgumentError(absl::StrCat(
              AccountLabel(account.name), " shares a webhook key with ", AccountLabel(owner),
              ": each account needs keys of its own, or one account's key would deliver "
              "into the other's"));
        }
      }
      seen_keys.emplace_back(key, account.name);
    }
  }
  seen_keys.clear();

  // Only the digests are needed from here on; the keys are not kept in memory.
  options.current_key.clear();
  options.previous_key.clear();
  for (WebhookAccount& account : options.accounts) {
    account.current_key.clear();
    account.previous_key.clear();
  }

  const std::string host = options.host;
  const int port = options.port;
  Pointers pointers{*std::move(event_name), *std::move(inspection_id), *std::move(token_id),
                    *std::move(vehicle_id)};
  std::unique_ptr<WebhookReceiver> receiver(
      new WebhookReceiver(std::move(options), std::move(endpoints), std::move(pointers), log));

  http::HttpServerOptions server_options = HttpOptionsFor(receiver->options_);
  WebhookReceiver* self = receiver.get();
  receiver->server_ = std::make_unique<http::HttpServer>(
      [self](const http::ServerRequest& head) { return self->CheckHead(head); },
      [self](http::ServerRequest& request, http::ServerResponse& response) {
        self->Handle(request, response);
      },
      std::move(server_options));
  absl::StatusOr<int> bound = receiver->server_->Bind(host, port);
  if (!bound.ok()) return bound.status();
  receiver->port_ = *bound;
  const absl::Status serving = receiver->server_->Serve();
  if (!serving.ok()) return serving;
  return receiver;
}

WebhookReceiver::WebhookReceiver(WebhookReceiverOptions options, Endpoints endpoints,
                                 Pointers pointers, eventlog::EventLog* log)
    : options_(std::move(options)),
      endpoints_(std::move(endpoints)),
      pointers_(std::move(pointers)),
      log_(log),
      rejected_lines_(options_.rejected_lines_per_second) {}

WebhookReceiver::~WebhookReceiver() { Stop(); }

void WebhookReceiver::Stop() {
  if (server_ != nullptr) server_->Stop();
}

void WebhookReceiver::Count(std::atomic<int64_t>& counter, WebhookOutcome outcome) {
  ++counter;
  if (options_.metrics != nullptr) options_.metrics->Delivery(outcome);
}

WebhookReceiver::Stats WebhookReceiver::stats() const {
  Stats stats;
  stats.accepted = accepted_.load();
  stats.duplicates = duplicates_.load();
  stats.unauthorized = unauthorized_.load();
  const http::HttpServerStats http = server_->stats();
  stats.too_large = http.body_too_large;
  stats.bad_json = bad_json_.load();
  stats.json_too_complex = json_too_complex_.load();
  stats.no_event_name = no_event_name_.load();
  stats.unknown_event_names = unknown_event_names_.load();
  stats.store_failures = store_failures_.load();
  stats.not_replicated = not_replicated_.load();
  stats.bad_requests = http.malformed;
  stats.not_found = not_found_.load();
  stats.method_not_allowed = method_not_allowed_.load();
  return stats;
}

http::HttpServerStats WebhookReceiver::http_stats() const { return server_->stats(); }

bool WebhookReceiver::accepting() const { return server_->accepting(); }

namespace {

// At most 128 bytes of what a sender chose (a path, an event name), for a log line.
std::string Clip(std::string_view text) { return std::string(text.substr(0, 128)); }

}  // namespace

void WebhookReceiver::LogRejected(const http::ServerRequest& request, int status,
                                  std::string_view reason, const std::string* account) const {
  uint64_t suppressed = 0;
  if (!rejected_lines_.Admit(&suppressed)) return;
  logging::Log(status >= 500 ? logging::Level::kError : logging::Level::kWarn,
               status >= 500 ? "webhook not stored" : "webhook rejected",
               {{"reason", reason},
                {"http_status", status},
                {"path", Clip(request.path)},
                {"peer", request.remote_address},
                {"account", account == nullptr ? "" : (account->empty() ? "default" : *account)},
                {"suppressed", suppressed}});
}

std::optional<http::ServerResponse> WebhookReceiver::CheckHead(const http::ServerRequest& head) {
  // 1. Method, then path: cheap, and they say nothing about the key.
  if (head.method != "POST") {
    Count(method_not_allowed_, WebhookOutcome::kMethodNotAllowed);
    LogRejected(head, 405, "method_not_allowed", nullptr);
    http::ServerResponse response =
        Reply(405, "method_not_allowed", "webhook deliveries are POST requests");
    response.SetHeader("Allow", "POST");
    return response;
  }
  const auto endpoint_at = endpoints_.find(head.path);
  if (endpoint_at == endpoints_.end()) {
    Count(not_found_, WebhookOutcome::kNotFound);
    LogRejected(head, 404, "not_found", nullptr);
    return Reply(404, "not_found", "no webhook endpoint at this path");
  }

  // 2. The key of the path's account, before reading any of the body (and before a
  // 100 Continue): an unauthenticated sender costs us no body reading. A repeated header
  // is refused rather than guessing which one counts.
  const std::string* key = head.Header(kApiKeyHeader);
  if (key == nullptr || head.HeaderCount(kApiKeyHeader) != 1 ||
      !endpoint_at->second.keys.Matches(*key)) {
    Count(unauthorized_, WebhookOutcome::kUnauthorized);
    LogRejected(head, 401, key == nullptr ? "no_api_key" : "wrong_api_key",
                &endpoint_at->second.account);
    return Reply(401, "unauthorized", "missing or invalid x-api-key header");
  }
  // 3. Sizes and framing: the HTTP layer, from here on.
  return std::nullopt;
}

void WebhookReceiver::Handle(http::ServerRequest& request, http::ServerResponse& response) {
  // The head check let it through, so the path is an endpoint's.
  const auto endpoint_at = endpoints_.find(request.path);
  if (endpoint_at == endpoints_.end()) {  // not reached
    Count(not_found_, WebhookOutcome::kNotFound);
    Reply(response, 404, "not_found", "no webhook endpoint at this path");
    return;
  }
  const Endpoint& endpoint = endpoint_at->second;
  const std::string& body = request.body;

  // 4. A JSON object within the limits, checked while parsing. Parsing never throws here.
  json document;
  switch (vendor::ParseBoundedJson(body, options_.json_limits, &document)) {
    case vendor::BoundedParseResult::kOk:
      break;
    case vendor::BoundedParseResult::kInvalid:
      Count(bad_json_, WebhookOutcome::kBadJson);
      LogRejected(request, 400, "bad_json", &endpoint.account);
      Reply(response, 400, "bad_json", "the body is not valid JSON");
      return;
    case vendor::BoundedParseResult::kTooDeep:
      Count(json_too_complex_, WebhookOutcome::kJsonTooComplex);
      LogRejected(request, 400, "json_too_complex", &endpoint.account);
      Reply(response, 400, "json_too_complex",
            absl::StrCat("the body nests deeper than ", options_.json_limits.max_depth, " levels"));
      return;
    case vendor::BoundedParseResult::kTooManyElements:
      Count(json_too_complex_, WebhookOutcome::kJsonTooComplex);
      LogRejected(request, 400, "json_too_complex", &endpoint.account);
      Reply(response, 400, "json_too_complex",
            absl::StrCat("the body has more than ", options_.json_limits.max_elements, " values"));
      return;
  }
  if (!document.is_object()) {
    Count(bad_json_, WebhookOutcome::kBadJson);
    LogRejected(request, 400, "bad_json", &endpoint.account);
    Reply(response, 400, "bad_json", "the body is not a JSON object");
    return;
  }

  // 5. The event name: required, because an event without one can be neither filtered
  // by subscribers nor routed, and a 400 shows the sender its mistake at once.
  const json* name = pointers_.event_name.Resolve(document);
  if (name == nullptr || !name->is_string() || name->get_ref<const std::string&>().empty()) {
    Count(no_event_name_, WebhookOutcome::kNoEventName);
    LogRejected(request, 400, "no_event_name", &endpoint.account);
    Reply(response, 400, "no_event_name",
          absl::StrCat("no event name (a non-empty string) at \"", pointers_.event_name.text(),
                       "\""));
    return;
  }

  // 6. Stored before answered: a 2xx promises the event is in the log.
  eventlog::NewEvent event;
  event.account = endpoint.account;
  event.event_name = name->get<std::string>();
  event.inspection_id = pointers_.inspection_id.IdAt(document);
  event.token_id = pointers_.token_id.IdAt(document);
  event.vehicle_id = pointers_.vehicle_id.IdAt(document);
  event.content_hash = ContentHash(endpoint.account, body);
  event.payload = std::move(request.body);
  event.received_at_ms = absl::ToUnixMillis(options_.clock());
  const absl::StatusOr<eventlog::AppendResult> appended = log_->Append(event);
  if (!appended.ok() && redis::IsNotReplicated(appended.status())) {
    // On the primary, not confirmed by enough replicas: a 200 would promise what a failover
    // could lose. The vendor delivers it again; the dedupe keeps it once.
    Count(not_replicated_, WebhookOutcome::kNotReplicated);
    LogRejected(request, 503, "not_replicated", &endpoint.account);
    response.SetHeader("Retry-After", "1");
    Reply(response, 503, "not_replicated",
          "the event was not confirmed by enough store replicas in time; deliver it again "
          "later");
    return;
  }
  if (!appended.ok()) {
    // Any error, not only Unavailable: nothing was stored, so the only safe answer is one
    // that makes the sender try again. The backend's message stays out of the answer (it
    // could name the store's address).
    Count(store_failures_, WebhookOutcome::kStoreFailure);
    LogRejected(request, 503, "store_unavailable", &endpoint.account);
    response.SetHeader("Retry-After", "1");
    Reply(response, 503, "store_unavailable",
          "the event could not be stored; deliver it again later");
    return;
  }
  if (appended->duplicate) {
    Count(duplicates_, WebhookOutcome::kDuplicate);
  } else {
    Count(accepted_, WebhookOutcome::kAccepted);
    if (options_.known_event_names.count(event.event_name) == 0) {
      ++unknown_event_names_;
      if (options_.metrics != nullptr) options_.metrics->UnknownEventName();
    }
  }
  logging::Info("webhook delivered",
                {{"result", appended->duplicate ? "duplicate" : "stored"},
                 {"account", endpoint.account.empty() ? "default" : endpoint.account},
                 {"event_name", Clip(event.event_name)},
                 {"cursor", appended->cursor},
                 {"inspection_id", Clip(event.inspection_id)},
                 {"peer", request.remote_address}});
  response.status = 200;
  response.SetContent(
      Dump(json{
          {"status", "stored"}, {"cursor", appended->cursor}, {"duplicate", appended->duplicate}}),
      "application/json");
}

}  // namespace inspection::webhooks
