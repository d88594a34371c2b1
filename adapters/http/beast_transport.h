#ifndef ADAPTERS_HTTP_BEAST_TRANSPORT_H_
#define ADAPTERS_HTTP_BEAST_TRANSPORT_H_

#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "adapters/http/http_transport.h"
#include "adapters/http/response_budget.h"

namespace inspection::http {

namespace internal {
class BeastClient;  // the event loop, the connection pools and the exchanges (beast_transport.cc)
}  // namespace internal

// Immutable settings of one BeastTransport, fixed at Create().
struct BeastTransportOptions {
  // TCP (+TLS handshake) connect budget of one exchange; it is also capped by the request's
  // own timeout.
  std::chrono::milliseconds connect_timeout{2000};
  // Open connections across all hosts. A request beyond it waits (in arrival order) for a
  // connection to come free, and that wait counts against its timeout. 0 means unlimited.
  size_t max_total_connections = 4096;
  // Open connections to one scheme://host:port. 0 means unlimited.
  size_t max_host_connections = 0;
  // A response body larger than this fails the exchange with kTooLarge "response too large":
  // refused from its Content-Length, or as soon as the streamed bytes cross it. The head
  // (status line and headers) has its own bound, max_response_head_bytes.
  size_t max_response_bytes = size_t{64} << 20;
  // The head: the status line and every field (interim 1xx answers included), and the
  // trailers of a chunked answer on their own; past it kTooLarge. A connection's read buffer
  // (bytes not parsed yet: a partial head line, a chunk-size line, trailers) holds at most
  // this plus 16 KiB, and a chunk extension is at most 1 KiB.
  size_t max_response_head_bytes = size_t{64} << 10;
  // Header fields of one answer, trailer fields included; past it kTooLarge.
  size_t max_response_header_count = 256;
  // The bodies all unfinished exchanges may hold together (response_budget.h): an exchange
  // whose next read would cross it fails with kReceive "answers being read at once exceed
  // ...". 0 means unlimited.
  size_t max_buffered_response_bytes = size_t{256} << 20;
  // Each answer's first bytes that may use the whole budget; the bytes past them hold at
  // most three quarters of it (response_budget.h), so huge answers cannot refuse small ones.
  // 0: every byte competes for the whole budget.
  size_t guaranteed_response_bytes = size_t{64} << 10;
  // A kept-alive connection idle for longer than this is closed instead of reused (servers
  // close idle connections on their own timers; reusing one they are about to close costs a
  // failed attempt). Idle connections are also checked every max_idle / 2, and closed when
  // past it or closed by the server, so a quiet gateway holds no stale sockets.
  std::chrono::milliseconds max_idle{30000};
  std::string user_agent = "inspection-gateway";
  // PEM file of the certificate authorities trusted for https:// peers; empty: the system's
  // default verify paths (OpenSSL's).
  std::string ca_file;
};

// HttpTransport on Boost.Beast (HTTP/1.1 parsing) and Asio (sockets, TLS through OpenSSL),
// driven by ONE event-loop thread: the gateway's low-overhead vendor client for http:// and
// https:// vendors that need neither HTTP/2 nor a proxy (CurlTransport has both).
//
// Connections are kept alive and pooled per scheme://host:port. Send() may be called from
// any thread; when an idle connection is at hand it writes the request on the calling thread
// (plain TCP: as much as the socket takes, the rest from the loop; TLS: the write is started
// there) and starts the read there; over plain TCP the loop thread wakes only for the
// answer. New
// connections (DNS, TCP connect, TLS handshake) and everything after the request is written
// run on the loop thread; Asio's resolver adds one thread of its own, started at the first
// host name to resolve (getaddrinfo blocks). TLS: peer verification (chain and host name,
// SNI), TLS 1.2 or later, ALPN "http/1.1", and the session of the last handshake to a host
// resumed by the next connection to it. Idle connections past max_idle, or closed by the
// server, are closed by a sweep every max_idle / 2. Redirects are never followed; 1xx
// interim answers are skipped; only http:// and https:// URLs work; no proxy.
//
// Error mapping (HttpResult::error), as CurlTransport's:
//   complete response, any status            -> kNone (status in response.status)
//   DNS failure, TCP refused, TLS handshake,
//   untrusted peer certificate               -> kConnect (request_sent == false)
//   request timeout (waiting, connect, later)-> kTimeout (request_sent tells the phase)
//   write failure while sending              -> kSend
//   reset / truncated body / garbled or
//   non-HTTP reply / over the shared budget  -> kReceive
//   body or head over its limit              -> kTooLarge
//   anything else (bad URL, bad method...)   -> kOther
// HttpResult::elapsed runs from Send() to the callback, queueing included. Like libcurl, the
// transport re-sends a request once, on a new connection, when a *reused* kept-alive
// connection turns out dead before any byte of the answer arrived, unless the request asked
// for a fresh connection (reuse_connection == false), which it always gets.
//
// Callbacks run on the loop thread, outside every lock the transport holds, exactly once each.
// Shutdown() (also run by the destructor) completes every unfinished exchange with kOther
// "transport shut down". A Send() after Shutdown() has begun completes at once, on the
// calling thread, with the same error.
class BeastTransport final : public HttpTransport {
 public:
  // Sets up the TLS context (CA file or system paths) and starts the loop thread. Errors:
  // INVALID_ARGUMENT for a non-positive connect_timeout, max_idle or size limit, or an
  // unreadable CA file; INTERNAL if the TLS context or the thread cannot be set up.
  static absl::StatusOr<std::unique_ptr<BeastTransport>> Create(BeastTransportOptions options = {});

  // Shutdown(). Must not run inside one of this transport's callbacks (it would wait for its
  // own thread).
  ~BeastTransport() override;
  BeastTransport(const BeastTransport&) = delete;
  BeastTransport& operator=(const BeastTransport&) = delete;

  // Thread-safe, never blocks on the network. See HttpTransport.
  void Send(HttpRequest request, HttpCallback done) override;

  // Fails every unfinished exchange (kOther "transport shut down") and stops the loop; when it
  // returns, every callback of an exchange sent before the call has run. Idempotent and
  // thread-safe. Called from inside a callback it only starts the stop, which completes when
  // the destructor (or another Shutdown() call from another thread) joins the loop.
  void Shutdown() override;

  // Exchanges accepted by Send() whose callback has not started yet. Thread-safe.
  size_t InFlight() const;
  // Connections opened so far (TCP connects that succeeded). Thread-safe.
  size_t ConnectionsOpened() const;
  // TLS handshakes that resumed a previous session. Thread-safe.
  size_t TlsSessionsResumed() const;
  // Kept-alive connections waiting in the pool for their next request. Thread-safe.
  size_t IdleConnections() const;
  size_t BufferedResponseBytes() const override;

 private:
  explicit BeastTransport(std::unique_ptr<internal::BeastClient> client);

  std::unique_ptr<internal::BeastClient> client_;
};

}  // namespace inspection::http

#endif  // ADAPTERS_HTTP_BEAST_TRANSPORT_H_
