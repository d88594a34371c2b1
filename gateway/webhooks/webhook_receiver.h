#ifndef GATEWAY_WEBHOOKS_WEBHOOK_RECEIVER_H_
#define GATEWAY_WEBHOOKS_WEBHOOK_RECEIVER_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "adapters/eventlog/event_log.h"
#include "adapters/http/http_server.h"
#include "adapters/vendor/bounded_json.h"
#include "gateway/logging/line_rate_limiter.h"
#include "gateway/webhooks/json_pointer.h"
#include "gateway/webhooks/webhook_key_matcher.h"
#include "gateway/webhooks/webhook_metrics.h"

namespace inspection::webhooks {

// The event names of the vendor's spec ("Events"); anything else is stored too, and
// counted as unknown.
std::set<std::string> SpecEventNames();

// A named vendor account (e.g. "preprod" next to the default production account): its
// webhooks arrive on their own path with their own key, and are stored with
// NewEvent::account = name. Deliveries never cross accounts: a path accepts only its own
// account's key(s).
struct WebhookAccount {
  // 1 or more of [A-Za-z0-9._-] (so never '\n', whitespace or anything that needs
  // escaping in a log line, a metric label or gRPC metadata); unique.
  std::string name;
  // Starts with '/'; unique, and not the default account's `path`.
  std::string path;
  // The account's webhookHeaderKey (required) and, during a rotation, the key being
  // replaced ("" when none). As for the default account: never logged, echoed or kept.
  // No key may be shared with another account (the default one included).
  std::string current_key;
  std::string previous_key;
};

// Plain configuration, filled by the composition root from the gateway config.
struct WebhookReceiverOptions {
  // The port's Prometheus series (webhook_metrics.h), updated where each delivery, refusal
  // and connection is decided; null: only stats() counts. Must outlive the receiver.
  WebhookMetrics* metrics = nullptr;
  // Listen address. Port 0 lets the OS pick a free port; read it back with port().
  std::string host = "0.0.0.0";
  int port = 8080;
  // The path the default account's deliveries are accepted on (the path of our
  // webhookUrlV2). Paths that are neither this nor a named account's are answered 404.
  // The query string is ignored.
  std::string path = "/webhooks/v2";
  // The default account's webhookHeaderKey, expected in the `x-api-key` header.
  // Required, even with named accounts: Start() fails without it. Never logged, echoed or
  // kept (only its SHA-256 is).
  std::string current_key;
  // During a key rotation the key being replaced, also accepted; "" when none.
  std::string previous_key;
  // Named vendor accounts, each on its own path with its own key(s); the default account
  // (account name "") is the one configured above. Empty: only the default account.
  std::vector<WebhookAccount> accounts;
  // Every resource a client can make the receiver hold: connections, head and body bytes,
  // header count, time (adapters/http/http_server.h). limits.max_body_bytes is the
  // largest accepted body; larger ones get 413.
  http::HttpServerLimits limits;
  // Structure of an accepted body: nesting depth and values, checked while parsing;
  // past either, 400 json_too_complex.
  vendor::JsonLimits json_limits;
  // RFC 6901 pointers into the body. The event name must be a non-empty string there;
  // the ids may be strings (taken as-is) or integers (decimal); otherwise they are "".
  std::string event_name_pointer = "/event";
  std::string inspection_id_pointer = "/inspectionId";
  std::string token_id_pointer = "/tokenId";
  std::string vehicle_id_pointer = "/vehicleId";
  // Names not in this set are stored and streamed all the same, and counted
  // (Stats::unknown_event_names). An empty set counts every name as unknown.
  std::set<std::string> known_event_names = SpecEventNames();
  // Threads running the sockets (an idle or slow connection costs none), and threads
  // parsing and storing deliveries (an append waits for its group commit).
  int io_threads = 1;
  int threads = 16;
  // Source of NewEvent::received_at_ms.
  std::function<absl::Time()> clock = [] { return absl::Now(); };
  // Log lines about rejected deliveries (wrong key, bad path or method, bad JSON, no event
  // name) and store failures, per second at most (log.rejected_lines_per_second): the
  // sender controls how many there are. A line that gets through carries `suppressed`,
  // the lines dropped before it. Stored and duplicate deliveries are always logged (info):
  // they come from the vendor, with its key.
  double rejected_lines_per_second = 10;
};

// Counts of deliveries by outcome since Start() (a snapshot), summed over all accounts.
struct WebhookReceiverStats {
  int64_t accepted = 0;             // 200, stored as a new event
  int64_t duplicates = 0;           // 200, same content already stored: not stored again
  int64_t unauthorized = 0;         // 401, missing or wrong x-api-key
  int64_t too_large = 0;            // 413, body over limits.max_body_bytes
  int64_t bad_json = 0;             // 400, body not a JSON object
  int64_t json_too_complex = 0;     // 400, body over json_limits (depth or values)
  int64_t no_event_name = 0;        // 400, no non-empty string at event_name_pointer
  int64_t unknown_event_names = 0;  // of `accepted`: names not in known_event_names
  int64_t store_failures = 0;       // 503, the event log did not take the event
  int64_t not_replicated = 0;       // 503, stored but not confirmed by enough Redis replicas
  int64_t bad_requests = 0;         // 400/505, malformed request or ambiguous framing
  int64_t not_found = 0;            // 404, another path
  int64_t method_not_allowed = 0;   // 405, not POST
};

// The HTTP endpoint the vendor delivers events (webhooks) to. For each request, in this
// order:
//   1. not POST -> 405 (with `Allow: POST`); a path that is neither the default path nor
//      a named account's -> 404. The path selects the account;
//   2. `x-api-key` missing, repeated, or matching neither the current nor the previous
//      key of the path's account (constant-time) -> 401, before any of the body is read.
//      Another account's key is a wrong key;
//   3. Content-Length over limits.max_body_bytes -> 413 before reading; a chunked body
//      that turns out larger -> 413 as soon as it passes the limit; invalid or
//      ambiguous framing -> 400 (the HTTP server, http_server.h, with its other limits:
//      431, 408, 501, 503 when connections or requests in flight are at their bound);
//      `Expect: 100-continue` is answered only now, after the key check;
//   4. body not JSON, or JSON but not an object -> 400 bad_json; deeper or with more
//      values than json_limits -> 400 json_too_complex (checked while parsing);
//   5. no non-empty string at event_name_pointer -> 400 (an event without a name can
//      be neither filtered nor routed, and the vendor should see its mistake);
//   6. EventLog::Append(NewEvent{account, name, ids, payload = the body exactly as
//      received (decoded), content_hash, received_at_ms = clock()}) and only then the
//      answer: 200 {"status":"stored","cursor":...,"duplicate":bool} (a duplicate is
//      answered 200 too, so the sender stops retrying), or, on any error, 503 with
//      `Retry-After: 1` so that an at-least-once sender delivers it again.
//      content_hash, the backends' duplicate key, is scoped by account:
//        default account (""):  Sha256Hex(payload)               (as before accounts)
//        named account `name`:  Sha256Hex(name + '\n' + payload)
//      so a body delivered twice to one account is one event, while byte-identical
//      bodies delivered to two accounts are two. The encoding is unambiguous: names
//      contain no '\n', so the first '\n' ends the name; and a default-account payload
//      is a JSON object, which starts with '{', whitespace or a byte-order mark, never
//      with a name's first character ([A-Za-z0-9._-]).
// Every other answer is {"error":"<reason>","message":"..."}; answers never contain the
// body or a key. A rejected request whose body was not read ends its connection.
//
// Thread-safety: all methods may be called from any thread. Requests are handled
// concurrently on the worker threads.
class WebhookReceiver {
 public:
  using Stats = WebhookReceiverStats;

  // Validates `options`, binds and starts serving; returns once connections are accepted.
  // FailedPrecondition when the default account, or a named account, has no webhook key
  // (the receiver never runs open); InvalidArgument for a null `log`, a path not
  // starting with '/', an invalid JSON pointer, a limit that is 0, threads < 1, or a
  // named account whose name is empty, not of [A-Za-z0-9._-] or repeated, whose path is
  // repeated or the default path, or whose key is another account's too; Unavailable
  // when the address cannot be bound. Messages name accounts, never keys. `log` is not
  // owned and must outlive the receiver.
  static absl::StatusOr<std::unique_ptr<WebhookReceiver>> Start(WebhookReceiverOptions options,
                                                                eventlog::EventLog* log);

  ~WebhookReceiver();  // Stop()
  WebhookReceiver(const WebhookReceiver&) = delete;
  WebhookReceiver& operator=(const WebhookReceiver&) = delete;

  // The bound port (the OS's choice when options.port was 0).
  int port() const { return port_; }

  Stats stats() const;
  // The HTTP layer's counts: connections, shedding, timeouts, the listener's state.
  http::HttpServerStats http_stats() const;
  // The listener accepts connections (false while accept() keeps failing, and after
  // Stop()): part of the gateway's readiness.
  bool accepting() const;

  // Stops accepting, closes idle connections, lets requests being handled finish (an
  // append in progress is answered), and joins the threads. A body still being received
  // is cut off and not stored. Idempotent; a concurrent caller returns once stopped.
  void Stop();

 private:
  struct Pointers {
    JsonPointer event_name;
    JsonPointer inspection_id;
    JsonPointer token_id;
    JsonPointer vehicle_id;
  };

  // What a path accepts: the account it belongs to, and that account's keys.
  struct Endpoint {
    std::string account;  // "" for the default account
    WebhookKeyMatcher keys;
  };
  using Endpoints = std::map<std::string, Endpoint, std::less<>>;  // by path

  WebhookReceiver(WebhookReceiverOptions options, Endpoints endpoints, Pointers pointers,
                  eventlog::EventLog* log);

  // Before the body is read (an I/O thread): method, path, key.
  std::optional<http::ServerResponse> CheckHead(const http::ServerRequest& head);
  // With the body (a worker thread): JSON, event name, append.
  void Handle(http::ServerRequest& request, http::ServerResponse& response);
  // A rate-limited line about a refused delivery (`account`: null when the path names none).
  void LogRejected(const http::ServerRequest& request, int status, std::string_view reason,
                   const std::string* account) const;

  const WebhookReceiverOptions options_;  // keys cleared (the accounts' too)
  const Endpoints endpoints_;
  const Pointers pointers_;
  eventlog::EventLog* const log_;
  int port_ = 0;

  // ++counter, and the delivery's outcome into options_.metrics.
  void Count(std::atomic<int64_t>& counter, WebhookOutcome outcome);
  std::atomic<int64_t> accepted_{0};
  std::atomic<int64_t> duplicates_{0};
  std::atomic<int64_t> unauthorized_{0};
  std::atomic<int64_t> bad_json_{0};
  std::atomic<int64_t> json_too_complex_{0};
  std::atomic<int64_t> no_event_name_{0};
  std::atomic<int64_t> unknown_event_names_{0};
  std::atomic<int64_t> store_failures_{0};
  std::atomic<int64_t> not_replicated_{0};
  std::atomic<int64_t> not_found_{0};
  std::atomic<int64_t> method_not_allowed_{0};
  mutable logging::LineRateLimiter rejected_lines_;

  std::unique_ptr<http::HttpServer> server_;  // last: its workers use everything above
};

}  // namespace inspection::webhooks

#endif  // GATEWAY_WEBHOOKS_WEBHOOK_RECEIVER_H_
