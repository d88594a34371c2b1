#ifndef ADAPTERS_HTTP_HTTP_SERVER_H_
#define ADAPTERS_HTTP_HTTP_SERVER_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "adapters/http/server_message.h"

namespace inspection::http {

// Every resource a client can make the server hold has a bound here. The defaults are
// those of the Internet-facing webhook port (README, "Webhook ingress limits").
struct HttpServerLimits {
  // From the connection's first byte of a request (for a new connection: from the
  // accept) to the end of its head, in total, however the bytes trickle in. Past it the
  // connection is closed without an answer.
  std::chrono::milliseconds head_timeout{10000};
  // An idle kept-alive connection (between requests) is closed after this long.
  std::chrono::milliseconds keep_alive_timeout{75000};
  // A body must arrive at this average rate at least, counted from the end of the head
  // with `body_grace` of slack: by time t, min_body_rate * (t - body_grace) bytes.
  // Otherwise 408 and the connection ends. >= 1.
  uint64_t min_body_bytes_per_second = 1024;
  std::chrono::milliseconds body_grace{5000};
  // An answer must be taken by the client within this (a client that does not read).
  std::chrono::milliseconds write_timeout{10000};
  // The request line and headers together; past it 431. Also bounds a chunk-size line.
  size_t max_head_bytes = 16 * 1024;
  // Header lines of one request (chunked trailers count too); past it 431.
  size_t max_header_count = 100;
  // Request body (decoded). A larger Content-Length: 413 before any of it is read; a
  // chunked body: 413 as it passes the limit. 0: no request may carry a body (413).
  size_t max_body_bytes = 8 * 1024 * 1024;
  // Open connections in total, and from one client address (an IPv4 address, or an IPv6
  // /64: one host usually holds a whole /64). A connection over the per-client limit is
  // answered 503 and closed at once (never queued). At the total, room is made for it by
  // closing an idle kept-alive connection or, if there is none, the connection that has
  // waited longest without sending a complete request head (so holding the port costs an
  // attacker a fresh connection each time); only when every connection is busy (a body, a
  // handler, an answer) is the new one answered 503 and closed.
  size_t max_connections = 10000;
  size_t max_connections_per_client = 256;
  // Requests past the head check at once (their bodies being read or their handlers
  // running or queued). Over it: 503 with Retry-After: 1, before the body is read. Bounds
  // the body memory to max_requests_in_flight * max_body_bytes.
  size_t max_requests_in_flight = 128;
  // After an answer to a request whose body was not read, what the client still sends is
  // read and dropped, up to these bounds, so that it gets to read the answer instead of a
  // TCP reset.
  size_t linger_max_bytes = 64 * 1024;
  std::chrono::milliseconds linger_timeout{2000};
};

// Checks a HttpServerLimits for values that make no sense (zero timeouts...);
// InvalidArgument naming the field.
absl::Status ValidateLimits(const HttpServerLimits& limits);

// What the server counts (HttpServerStats), told as it happens, for a caller that keeps
// series of its own (the webhook receiver's Prometheus counters: nothing copies them later).
enum class HttpServerEvent {
  kAccepted,                   // a connection accepted (before any limit)
  kConnectionOpened,           // admitted: one more connection open
  kConnectionClosed,           // one fewer open
  kShedMaxConnections,         // 503 + close: max_connections reached
  kShedPerClient,              // 503 + close: max_connections_per_client reached
  kShedInFlight,               // 503: max_requests_in_flight reached
  kIdleClosedForRoom,          // an idle kept-alive connection closed to admit another
  kAwaitingHeadClosedForRoom,  // the oldest head-waiting connection closed for room
  kAnsweringClosedForRoom,     // the oldest answering connection closed for room
  kHeadTimeout,                // closed: no complete head within head_timeout
  kBodyTimeout,                // 408: the body came slower than the minimum rate
  kWriteTimeout,               // closed: the client did not take the answer
  kHeadTooLarge,               // 431
  kBodyTooLarge,               // 413
  kMalformed,                  // 400/505
  kNotImplemented,             // 501
  kAcceptError,                // accept() failed (retried with backoff)
  kAccepting,                  // the listener accepts (again)
  kNotAccepting,               // the listener does not accept now (an error, or Stop)
};

struct HttpServerOptions {
  // Threads running the sockets: accepting, reading, parsing, writing, timers. An idle or
  // slow connection costs no thread.
  int io_threads = 1;
  // Threads running `HttpServer::Handler` (which may block: a disk write, a pause).
  int worker_threads = 4;
  HttpServerLimits limits;
  // Fills the body of an answer the server produces itself (400, 408, 413, 431, 501,
  // 503...), given its status. Unset: those answers have no body.
  std::function<void(ServerResponse& response)> error_body;
  // Fills the 500 that answers a handler that threw (never the exception's text).
  std::function<void(ServerResponse& response)> exception_body;
  // Told each HttpServerEvent where it happens, on an I/O thread, sometimes under the
  // server's registry lock: must be quick, thread-safe, never block and never call the
  // server. Unset: only stats() counts.
  std::function<void(HttpServerEvent event)> on_event;
};

// Counts since Serve() (a snapshot), for metrics and tests.
struct HttpServerStats {
  int64_t connections_open = 0;
  int64_t connections_accepted = 0;
  int64_t shed_max_connections = 0;  // 503 + close: max_connections reached
  int64_t shed_per_client = 0;       // 503 + close: max_connections_per_client reached
  int64_t shed_in_flight = 0;        // 503: max_requests_in_flight reached
  int64_t idle_closed_for_room = 0;  // idle kept-alive connections closed to admit others
  // Connections closed to admit others at max_connections, with no idle kept-alive one to
  // close: the one that had waited longest without a complete request head.
  int64_t awaiting_head_closed_for_room = 0;
  // Closed to admit others at max_connections, with no idle or head-waiting one to close:
  // the one that had been writing an answer (or draining after its last) the longest.
  int64_t answering_closed_for_room = 0;
  int64_t head_timeouts = 0;    // closed: the head did not arrive in head_timeout
  int64_t body_timeouts = 0;    // 408: the body came slower than the minimum rate
  int64_t write_timeouts = 0;   // closed: the client did not take the answer
  int64_t head_too_large = 0;   // 431: max_head_bytes or max_header_count
  int64_t body_too_large = 0;   // 413
  int64_t malformed = 0;        // 400: not HTTP/1.1 as RFC 9112 has it
  int64_t not_implemented = 0;  // 501: a method no route serves anywhere
  int64_t accept_errors = 0;    // accept() failed (each is retried with backoff)
  bool accepting = false;       // the listener accepts now (false after an error)
};

// An HTTP/1.1 server on Boost.Beast's parser and Boost.Asio: event-driven, so an idle,
// slow or kept-alive connection costs a socket and a little memory, never a thread.
// Shared by the webhook receiver (Internet-facing), the admin endpoint and the vendor
// emulator.
//
// A request goes through two steps:
//   1. `head_check(request)` on an I/O thread, as soon as the head is complete and before
//      any of the body is read (request.body is empty). It must be quick and never block.
//      It returns an answer to send at once (the body is then never read and, when one
//      was announced, the connection ends after the answer), or nullopt to go on. An
//      `Expect: 100-continue` is answered only after it let the request go on.
//   2. the body is read (within the limits), then `handler(request, response)` runs on
//      a worker thread; it may block.
// Before step 1 the server itself answers: 501 for a method it does not know, 400 for
// framing it cannot read (several Content-Lengths, an unknown Transfer-Encoding), 413
// for a Content-Length over the limit, 431 for a head over the limits, 505 for a version
// other than HTTP/1.x; those too end the connection without reading the body.
// HEAD is answered without the body. Keep-alive is HTTP/1.1's default; HTTP/1.0
// connections close after one answer.
//
// Thread-safety: Bind(), Serve() and Stop() from the owner; Stop() is idempotent and may
// race with another Stop(). Pause() and stats() from any thread.
class HttpServer {
 public:
  using HeadCheck = std::function<std::optional<ServerResponse>(const ServerRequest& head)>;
  // The request is the handler's to take from (its body can be moved out).
  using Handler = std::function<void(ServerRequest& request, ServerResponse& response)>;

  // `head_check` may be null (every request goes on to the handler).
  HttpServer(HeadCheck head_check, Handler handler, HttpServerOptions options);
  ~HttpServer();  // Stop()
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds host:port (host an IP address, or "localhost" for 127.0.0.1; port 0 = a free port
  // chosen by the OS), listens, and returns the bound port. Connections queue until Serve(). Call
  // once. Unavailable when it cannot be bound; InvalidArgument for options that make no sense.
  absl::StatusOr<int> Bind(const std::string& host, int port);

  // Starts the threads; connections are accepted from then on. Call once, after Bind().
  absl::Status Serve();

  // Stops accepting, closes idle connections and those still receiving a request (a body
  // being received is cut off; its handler never runs), cuts Pause()s and the emulator's
  // chunk pauses short, lets handlers running finish and their answers go out (with
  // `Connection: close`, each bounded by write_timeout), and joins every thread.
  void Stop();

  bool stopping() const;

  // Waits `duration`, or less when Stop() is called. False when cut short by Stop().
  bool Pause(std::chrono::milliseconds duration) const;

  HttpServerStats stats() const;

  // The listener is accepting connections (false before Serve(), after Stop(), and while
  // accept() keeps failing).
  bool accepting() const;

 private:
  class Impl;
  std::shared_ptr<Impl> impl_;
};

// What max_connections_per_client counts a connection from `address` (text, as in
// ServerRequest::remote_address) as: IPv4 addresses as they are, IPv6 ones by their /64
// ("2001:db8:1:2::/64").
std::string ClientKey(const std::string& address);

// Raises this process's soft limit of open files to its hard limit (a server holding
// thousands of connections needs more than the usual 1024). Returns the new soft limit.
uint64_t RaiseOpenFileLimit();

}  // namespace inspection::http

#endif  // ADAPTERS_HTTP_HTTP_SERVER_H_
