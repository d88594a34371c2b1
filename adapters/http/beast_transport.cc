#include "adapters/http/beast_transport.h"

#include <openssl/ssl.h>
#include <poll.h>

#include <algorithm>
#include <deque>
#include <optional>
#include <system_error>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include <boost/asio/connect.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace inspection::http {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;
using ErrorCode = boost::system::error_code;

constexpr char kShutDown[] = "transport shut down";
// Read-buffer capacity an idle connection may keep (see ReleaseConnection).
constexpr size_t kIdleBufferBytes = 16 * 1024;

// A chunk extension means nothing to us; a chunk-size line carrying more than this fails
// the exchange (as the HTTP server refuses one from a client).
constexpr size_t kMaxChunkExtensionBytes = 1024;

// What one read may add to a connection's read buffer: with eager parsing the buffer holds
// only bytes not parsed yet (part of a head line, a chunk-size line, the trailers), so it is
// bounded by the head limit plus one read (BeastClient::NewConnection).
constexpr size_t kReadStep = 16 * 1024;

// Beast's HTTP/1 response parser with the bounds Beast itself does not keep. Beast limits
// the head bytes it holds unparsed at once (header_limit), but consumes every complete
// field line as it arrives: a head trickled in one line per read was never refused, its
// fields piling up in the message. This parser counts the whole head (status line, every
// field; interim answers included through `head_bytes_before`) against the head limit,
// counts the fields and the trailer fields, bounds chunk extensions, and keeps the body as
// a string (trailers are counted, then dropped).
class ResponseParser final : public bhttp::basic_parser<false> {
 public:
  ResponseParser(size_t max_head_bytes, size_t max_header_count, size_t head_bytes_before)
      : max_head_bytes_(max_head_bytes),
        max_header_count_(max_header_count),
        head_bytes_(head_bytes_before) {}

  unsigned status() const { return status_; }
  size_t head_bytes() const { return head_bytes_; }
  std::vector<std::pair<std::string, std::string>>& headers() { return headers_; }
  std::string& body() { return body_; }
  // Why the parser stopped with an error of its own, for the failure's detail; empty for
  // Beast's errors.
  const std::string& refusal() const { return refusal_; }

 private:
  void on_request_impl(bhttp::verb, beast::string_view, beast::string_view, int,
                       beast::error_code& ec) override {
    ec = bhttp::error::bad_method;  // never called for responses
  }

  void on_response_impl(int code, beast::string_view reason, int, beast::error_code& ec) override {
    status_ = static_cast<unsigned>(code);
    if (code < 100) {
      // Beast takes any three digits; "000" would read as status 0, the "no answer" of
      // HttpResponse (found by fuzz/beast_transport_fuzzer.cc). A garbled reply, as with curl.
      ec = bhttp::error::bad_status;
      return;
    }
    Count(sizeof "HTTP/1.1 200 \r\n" - 1 + reason.size(), ec);
  }

  void on_field_impl(bhttp::field, beast::string_view name, beast::string_view value,
                     beast::error_code& ec) override {
    if (++fields_ > max_header_count_) {
      refusal_ = absl::StrCat("more than ", max_header_count_, " header and trailer fields");
      ec = bhttp::error::header_limit;
      return;
    }
    Count(name.size() + value.size() + 4, ec);  // "name: value\r\n"
    if (ec || is_header_done()) return;         // a trailer: counted, not kept
    headers_.emplace_back(absl::AsciiStrToLower(absl::string_view(name.data(), name.size())),
                          std::string(value.data(), value.size()));
  }

  void on_header_impl(beast::error_code&) override {}

  void on_body_init_impl(const boost::optional<std::uint64_t>& length,
                         beast::error_code&) override {
    // Beast checked a declared length against body_limit before this.
    if (length) body_.reserve(static_cast<size_t>(*length));
  }

  size_t on_body_impl(beast::string_view body, beast::error_code&) override {
    body_.append(body.data(), body.size());
    return body.size();
  }

  void on_chunk_header_impl(std::uint64_t, beast::string_view extensions,
                            beast::error_code& ec) override {
    if (extensions.size() > kMaxChunkExtensionBytes) {
      refusal_ = absl::StrCat("a chunk extension over ", kMaxChunkExtensionBytes, " bytes");
      ec = bhttp::error::header_limit;
    }
  }

  size_t on_chunk_body_impl(std::uint64_t, beast::string_view body, beast::error_code&) override {
    body_.append(body.data(), body.size());
    return body.size();
  }

  void on_finish_impl(beast::error_code&) override {}

  // Head bytes (trailers included: they are a second head) against the limit.
  void Count(size_t bytes, beast::error_code& ec) {
    head_bytes_ += bytes;
    if (head_bytes_ > max_head_bytes_) {
      refusal_ = absl::StrCat("a head over ", max_head_bytes_, " bytes");
      ec = bhttp::error::header_limit;
    }
  }

  const size_t max_head_bytes_;
  const size_t max_header_count_;
  size_t head_bytes_;
  size_t fields_ = 0;
  unsigned status_ = 0;
  std::vector<std::pair<std::string, std::string>> headers_;
  std::string body_;
  std::string refusal_;
};

HttpResult Failure(TransportError error, std::string detail, bool request_sent = false) {
  HttpResult result;
  result.error = error;
  result.error_detail = std::move(detail);
  result.request_sent = request_sent;
  return result;
}

std::chrono::microseconds Since(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start);
}

// The parts of an absolute http(s) URL the exchange needs.
struct Target {
  bool tls = false;
  std::string host;         // without IPv6 brackets
  std::string port;         // digits
  std::string host_header;  // the authority as written (host[:port])
  std::string path;         // origin-form request target: path and query, never empty
  std::string origin;       // scheme://host:port, lower case: the connection pool's key
};

// Parses `url`; on failure returns nullopt and sets `error` (a fixed text: URLs may carry
// data the caller would not want in a log, so the detail never quotes it).
std::optional<Target> ParseTarget(absl::string_view url, const char*& error) {
  Target target;
  absl::string_view rest;
  if (absl::StartsWithIgnoreCase(url, "http://")) {
    rest = url.substr(7);
  } else if (absl::StartsWithIgnoreCase(url, "https://")) {
    target.tls = true;
    rest = url.substr(8);
  } else {
    error = "unsupported URL scheme (http:// and https:// only)";
    return std::nullopt;
  }
  const size_t authority_end = rest.find_first_of("/?#");
  const absl::string_view authority = rest.substr(0, authority_end);
  absl::string_view path =
      authority_end == absl::string_view::npos ? absl::string_view() : rest.substr(authority_end);
  if (authority.empty() || authority.find('@') != absl::string_view::npos) {
    error = "invalid URL host";
    return std::nullopt;
  }
  absl::string_view host = authority;
  absl::string_view port;
  if (authority.front() == '[') {
    const size_t close = authority.find(']');
    if (close == absl::string_view::npos) {
      error = "invalid URL host";
      return std::nullopt;
    }
    host = authority.substr(1, close - 1);
    absl::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') {
        error = "invalid URL host";
        return std::nullopt;
      }
      port = after.substr(1);
    }
  } else if (const size_t colon = authority.find(':'); colon != absl::string_view::npos) {
    host = authority.substr(0, colon);
    port = authority.substr(colon + 1);
  }
  uint32_t port_number = target.tls ? 443 : 80;
  if (!port.empty() && (!absl::SimpleAtoi(port, &port_number) || port_number == 0 ||
                        port_number > 65535 || port.find_first_not_of("0123456789") != port.npos)) {
    error = "invalid URL port";
    return std::nullopt;
  }
  if (host.empty()) {
    error = "invalid URL host";
    return std::nullopt;
  }
  path = path.substr(0, path.find('#'));  // a fragment is never sent
  for (char c : path) {
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f) {
      error = "invalid URL (unencoded space or control character)";
      return std::nullopt;
    }
  }
  target.host = absl::AsciiStrToLower(host);
  target.port = absl::StrCat(port_number);
  target.host_header = std::string(authority);
  target.path = path.empty() || path.front() == '?' ? absl::StrCat("/", path) : std::string(path);
  target.origin = absl::StrCat(target.tls ? "https://" : "http://", target.host, ":", target.port);
  return target;
}

// The request's bytes: request line, head, body. Host, User-Agent and Accept come from the
// caller when it gives them; Content-Length is always the transport's own.
std::string Serialize(const HttpRequest& request, const Target& target,
                      const std::string& user_agent) {
  bool has_host = false;
  bool has_user_agent = false;
  bool has_accept = false;
  size_t size = request.method.size() + target.path.size() + request.body.size() + 128;
  for (const auto& [name, value] : request.headers) size += name.size() + value.size() + 4;
  std::string wire;
  wire.reserve(size);
  absl::StrAppend(&wire, request.method, " ", target.path, " HTTP/1.1\r\n");
  for (const auto& [name, value] : request.headers) {
    if (absl::EqualsIgnoreCase(name, "content-length") ||
        absl::EqualsIgnoreCase(name, "transfer-encoding") ||
        absl::EqualsIgnoreCase(name, "connection")) {
      continue;  // framing and connection management are the transport's
    }
    has_host |= absl::EqualsIgnoreCase(name, "host");
    has_user_agent |= absl::EqualsIgnoreCase(name, "user-agent");
    has_accept |= absl::EqualsIgnoreCase(name, "accept");
    absl::StrAppend(&wire, name, ": ", value, "\r\n");
  }
  if (!has_host) absl::StrAppend(&wire, "Host: ", target.host_header, "\r\n");
  if (!has_user_agent && !user_agent.empty()) {
    absl::StrAppend(&wire, "User-Agent: ", user_agent, "\r\n");
  }
  if (!has_accept) wire.append("Accept: */*\r\n");
  const std::string& method = request.method;
  if (!request.body.empty() || method == "POST" || method == "PUT" || method == "PATCH") {
    absl::StrAppend(&wire, "Content-Length: ", request.body.size(), "\r\n");
  }
  wire.append("\r\n");
  wire.append(request.body);
  return wire;
}

// OpenSSL ex_data slots for the transport (on its SSL_CTX) and a connection's origin (on its
// SSL). Asio keeps its verify callbacks in the "app data" slots, so those are not ours.
int ClientIndex() {
  static const int index = SSL_CTX_get_ex_new_index(0, nullptr, nullptr, nullptr, nullptr);
  return index;
}
int OriginIndex() {
  static const int index = SSL_get_ex_new_index(0, nullptr, nullptr, nullptr, nullptr);
  return index;
}

bool IsPeerGone(const ErrorCode& ec) {
  return ec == bhttp::error::end_of_stream || ec == asio::error::eof ||
         ec == asio::error::connection_reset || ec == asio::error::broken_pipe ||
         ec == asio::ssl::error::stream_truncated;
}

}  // namespace

namespace internal {

// One TCP (+TLS) connection to one origin. Counted against the limits from the moment its
// slot is reserved (before the connect) until Close().
struct Connection {
  // `max_buffered`: the read buffer's bound (bytes read but not parsed yet).
  Connection(asio::io_context& io, std::string origin_key, size_t max_buffered)
      : socket(io), connect_timer(io), buffer(max_buffered), origin(std::move(origin_key)) {}

  tcp::socket socket;
  std::optional<asio::ssl::stream<tcp::socket&>> tls;
  asio::steady_timer connect_timer;  // connect + TLS handshake budget
  beast::flat_buffer buffer;         // bytes read past the current message (none when idle)
  std::string origin;
  Clock::time_point idle_since;
  bool reused = false;  // has carried an exchange before this one
  bool connect_timed_out = false;
  bool holds_slot = true;
};

struct Exchange {
  explicit Exchange(asio::io_context& io) : timer(io) {}

  absl::Mutex mu;
  // Fixed in Send(), before the exchange is visible to any other thread.
  HttpCallback done;
  Clock::time_point start;
  std::chrono::milliseconds timeout{0};
  Target target;
  std::string wire;
  bool head = false;
  bool reuse = true;

  asio::steady_timer timer ABSL_GUARDED_BY(mu);
  std::unique_ptr<Connection> conn ABSL_GUARDED_BY(mu);
  // Connections this exchange gave up (a dead kept-alive one before the re-send); kept until
  // the exchange ends, since a cancelled operation may still refer to them.
  std::vector<std::unique_ptr<Connection>> retired ABSL_GUARDED_BY(mu);
  std::optional<ResponseParser> parser ABSL_GUARDED_BY(mu);
  // The body's share of the client's ResponseBudget, grown after each read; given back when
  // the exchange finishes.
  ResponseBudgetLease lease ABSL_GUARDED_BY(mu);
  bool finished ABSL_GUARDED_BY(mu) = false;
  bool request_sent ABSL_GUARDED_BY(mu) = false;
  bool resent ABSL_GUARDED_BY(mu) = false;
  bool queued ABSL_GUARDED_BY(mu) = false;
};

class BeastClient {
 public:
  BeastClient(BeastTransportOptions options, asio::ssl::context tls_context)
      : options_(std::move(options)), tls_context_(std::move(tls_context)) {}

  ~BeastClient() {
    for (auto& [origin, pool] : pools_) {
      if (pool.session != nullptr) SSL_SESSION_free(pool.session);
    }
  }

  void Start() {
    SSL_CTX* ctx = tls_context_.native_handle();
    SSL_CTX_set_ex_data(ctx, ClientIndex(), this);
    // TLS 1.3 tickets arrive after the handshake: keep the newest per origin through the
    // new-session callback rather than the context's internal cache.
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
    SSL_CTX_sess_set_new_cb(ctx, &BeastClient::OnNewSession);
    ScheduleSweep();
    loop_ = std::thread([this] { io_.run(); });
    loop_id_ = loop_.get_id();
  }

  void Send(HttpRequest request, HttpCallback done);
  void Shutdown();

  size_t InFlight() const { return in_flight_.load(std::memory_order_acquire); }
  size_t ConnectionsOpened() const { return connections_opened_.load(std::memory_order_acquire); }
  size_t SessionsResumed() const { return sessions_resumed_.load(std::memory_order_acquire); }
  size_t BufferedResponseBytes() const { return budget_.used(); }
  size_t IdleConnections() {
    absl::MutexLock lock(&mu_);
    size_t idle = 0;
    for (const auto& [origin, pool] : pools_) idle += pool.idle.size();
    return idle;
  }

 private:
  using ExchangePtr = std::shared_ptr<Exchange>;
  using Step = std::optional<HttpResult>;  // a result ends the exchange; nullopt: it goes on

  struct HostPool {
    size_t open = 0;  // connections holding a slot: connecting, busy or idle
    std::vector<std::unique_ptr<Connection>> idle;  // most recently used last
    std::deque<ExchangePtr> waiting;                // for a connection or a slot
    SSL_SESSION* session = nullptr;                 // the newest, for the next handshake
  };

  static int OnNewSession(SSL* ssl, SSL_SESSION* session);

  // Runs `step` under the exchange's lock unless it has ended; a result ends it (callback
  // outside every lock), then connections or slots it freed go to waiting exchanges.
  template <typename F>
  void Advance(const ExchangePtr& ex, F step);
  void Deliver(const ExchangePtr& ex, HttpResult result);

  void StartOnLocked(const ExchangePtr& ex, std::unique_ptr<Connection> conn)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(ex->mu);
  // A fresh response parser with the limits; for each request written and each 1xx answer.
  // `head_bytes_before`: the head bytes of the interim answers before this one.
  void NewParserLocked(Exchange& ex, size_t head_bytes_before = 0)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(ex.mu);
  // A connection whose read buffer holds at most the head limit plus one read.
  std::unique_ptr<Connection> NewConnection(const std::string& origin) {
    return std::make_unique<Connection>(io_, origin, options_.max_response_head_bytes + kReadStep);
  }
  // Writes the request (plain TCP: as much as the socket takes, on this thread) and starts
  // reading the answer. A failure is handled on the loop thread.
  void WriteLocked(const ExchangePtr& ex) ABSL_EXCLUSIVE_LOCKS_REQUIRED(ex->mu);
  void ReadLocked(const ExchangePtr& ex) ABSL_EXCLUSIVE_LOCKS_REQUIRED(ex->mu);
  Step ConnectLocked(const ExchangePtr& ex) ABSL_EXCLUSIVE_LOCKS_REQUIRED(ex->mu);
  Step ResendLocked(const ExchangePtr& ex) ABSL_EXCLUSIVE_LOCKS_REQUIRED(ex->mu);
  Step OnConnected(const ExchangePtr& ex, const ErrorCode& ec)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(ex->mu);
  Step OnHandshake(const ExchangePtr& ex, const ErrorCode& ec)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(ex->mu);
  Step OnWritten(const ExchangePtr& ex, const ErrorCode& ec, size_t bytes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(ex->mu);
  Step OnRead(const ExchangePtr& ex, const ErrorCode& ec) ABSL_EXCLUSIVE_LOCKS_REQUIRED(ex->mu);
  Step OnTimeout(const ExchangePtr& ex) ABSL_EXCLUSIVE_LOCKS_REQUIRED(ex->mu);
  Step SendFailedLocked(const ExchangePtr& ex, const ErrorCode& ec)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(ex->mu);
  Step ConnectFailedLocked(const ExchangePtr& ex, const char* what, const ErrorCode& ec)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(ex->mu);

  // The exchange's connection is done with: back to the pool when it can carry another
  // exchange, else closed (its slot freed).
  void ReleaseConnection(std::unique_ptr<Connection> conn, bool keep);
  void CloseLocked(Connection& conn) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::unique_ptr<Connection> TakeIdleLocked(HostPool& pool) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool ReserveSlotLocked(HostPool& pool) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Starts waiting exchanges for which a connection or a slot has come free.
  void Dispatch();
  // Every max_idle / 2: idle connections past max_idle, or that the server closed, are
  // closed, so that quiet periods hold no stale sockets (only up to max_idle).
  void ScheduleSweep();
  // Whether an idle connection can carry another request: nothing readable on it (the
  // server's close, or bytes it had no reason to send) and idle for at most max_idle.
  bool Usable(Connection& conn, Clock::time_point now) const;
  void FailAll();

  const BeastTransportOptions options_;
  // Before io_: a handler destroyed with io_ may hold the last reference to an exchange,
  // whose lease gives its bytes back here.
  ResponseBudget budget_{options_.max_buffered_response_bytes, options_.guaranteed_response_bytes};
  asio::ssl::context tls_context_;
  asio::io_context io_{1};
  asio::executor_work_guard<asio::io_context::executor_type> work_{io_.get_executor()};
  tcp::resolver resolver_{io_};          // used on the loop thread only
  asio::steady_timer sweep_timer_{io_};  // loop thread only: closes stale idle connections

  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::unordered_map<std::string, HostPool> pools_ ABSL_GUARDED_BY(mu_);
  size_t total_open_ ABSL_GUARDED_BY(mu_) = 0;
  size_t waiting_ ABSL_GUARDED_BY(mu_) = 0;
  std::unordered_set<ExchangePtr> live_ ABSL_GUARDED_BY(mu_);

  std::atomic<size_t> in_flight_{0};
  std::atomic<size_t> connections_opened_{0};
  std::atomic<size_t> sessions_resumed_{0};

  absl::Mutex join_mu_;
  std::thread loop_;
  std::thread::id loop_id_;
};

int BeastClient::OnNewSession(SSL* ssl, SSL_SESSION* session) {
  auto* client =
      static_cast<BeastClient*>(SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), ClientIndex()));
  const auto* origin = static_cast<const std::string*>(SSL_get_ex_data(ssl, OriginIndex()));
  if (client == nullptr || origin == nullptr) return 0;
  absl::MutexLock lock(&client->mu_);
  SSL_SESSION*& kept = client->pools_[*origin].session;
  if (kept != nullptr) SSL_SESSION_free(kept);
  kept = session;
  return 1;  // the reference is ours now
}

void BeastClient::Send(HttpRequest request, HttpCallback done) {
  in_flight_.fetch_add(1, std::memory_order_acq_rel);
  auto ex = std::make_shared<Exchange>(io_);
  ex->start = Clock::now();
  ex->done = std::move(done);
  ex->timeout = request.timeout;
  ex->head = request.method == "HEAD";
  ex->reuse = request.reuse_connection;
  ex->lease = ResponseBudgetLease(&budget_);

  const char* error = nullptr;
  if (!IsHttpToken(request.method)) {
    error = "invalid HTTP method";
  } else if (request.url.empty()) {
    error = "empty URL";
  } else if (request.timeout <= std::chrono::milliseconds::zero()) {
    error = "request timeout must be > 0";
  } else if (std::optional<Target> target = ParseTarget(request.url, error)) {
    ex->target = std::move(*target);
    for (const auto& [name, value] : request.headers) {
      // The detail names neither the header nor its value: values may be secrets.
      if (!IsHttpToken(name) || !IsSafeHeaderValue(value)) error = "invalid header name or value";
    }
    if (error == nullptr) ex->wire = Serialize(request, ex->target, options_.user_agent);
  }

  Step step;
  {
    absl::MutexLock ex_lock(&ex->mu);
    std::unique_ptr<Connection> conn;
    bool open_new = false;
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) {
        step = Failure(TransportError::kOther, kShutDown);
      } else {
        live_.insert(ex);
        if (error == nullptr) {
          HostPool& pool = pools_[ex->target.origin];
          if (ex->reuse) conn = TakeIdleLocked(pool);
          if (conn == nullptr) open_new = ReserveSlotLocked(pool);
          if (conn == nullptr && !open_new) {
            pool.waiting.push_back(ex);
            ++waiting_;
            ex->queued = true;
          }
        }
      }
    }
    if (step) {
      ex->finished = true;
    } else if (error != nullptr) {
      // Failed on the loop thread: a callback never runs inside Send().
      asio::post(io_, [this, ex, error] {
        Advance(ex, [&]() -> Step { return Failure(TransportError::kOther, error); });
      });
    } else {
      ex->timer.expires_after(ex->timeout);
      ex->timer.async_wait([this, ex](const ErrorCode& ec) {
        if (ec == asio::error::operation_aborted) return;
        Advance(ex, [&] { return OnTimeout(ex); });
      });
      if (conn != nullptr) {
        // An idle kept-alive connection: the request is written on this thread.
        StartOnLocked(ex, std::move(conn));
      } else if (open_new) {
        ex->conn = NewConnection(ex->target.origin);
        asio::post(io_, [this, ex] { Advance(ex, [&] { return ConnectLocked(ex); }); });
      }
    }
  }
  // Only when shutting down: completed here, on the calling thread.
  if (step) Deliver(ex, std::move(*step));
}

template <typename F>
void BeastClient::Advance(const ExchangePtr& ex, F step) {
  Step result;
  {
    absl::MutexLock lock(&ex->mu);
    if (ex->finished) return;
    result = step();
    if (result) {
      ex->finished = true;
      ex->timer.cancel();
      // Its body has been handed on, or will be dropped once the cancelled read returns.
      ex->lease.Reset();
    }
  }
  if (result) Deliver(ex, std::move(*result));
  Dispatch();
}

void BeastClient::Deliver(const ExchangePtr& ex, HttpResult result) {
  {
    absl::MutexLock lock(&mu_);
    live_.erase(ex);
  }
  result.elapsed = Since(ex->start);
  // `done` is only ever touched here, once the exchange is finished.
  HttpCallback done = std::move(ex->done);
  in_flight_.fetch_sub(1, std::memory_order_acq_rel);
  std::move(done)(std::move(result));
}

void BeastClient::StartOnLocked(const ExchangePtr& ex, std::unique_ptr<Connection> conn) {
  ex->conn = std::move(conn);
  ex->queued = false;
  WriteLocked(ex);
}

void BeastClient::NewParserLocked(Exchange& ex, size_t head_bytes_before) {
  ex.parser.emplace(options_.max_response_head_bytes, options_.max_response_header_count,
                    head_bytes_before);
  ex.parser->header_limit(
      static_cast<uint32_t>(std::min<size_t>(options_.max_response_head_bytes, UINT32_MAX)));
  ex.parser->body_limit(options_.max_response_bytes);
  // Each read_some then parses into the body as well, so OnRead sees the body grow (and
  // takes it from the budget) one read at a time.
  ex.parser->eager(true);
  if (ex.head) ex.parser->skip(true);
  ex.lease.Reset();  // a new parser: the old body, if any, is gone
}

void BeastClient::WriteLocked(const ExchangePtr& ex) {
  NewParserLocked(*ex);
  Connection& conn = *ex->conn;
  if (conn.tls) {
    asio::async_write(*conn.tls, asio::buffer(ex->wire),
                      [this, ex](const ErrorCode& ec, size_t bytes) {
                        Advance(ex, [&] { return OnWritten(ex, ec, bytes); });
                      });
    return;
  }
  // Plain TCP (a non-blocking socket): as much as the socket takes now, on this thread; the
  // rest, if any, from the loop.
  size_t written = 0;
  ErrorCode ec;
  while (written < ex->wire.size() && !ec) {
    written += conn.socket.write_some(asio::buffer(ex->wire) + written, ec);
  }
  if (written > 0) ex->request_sent = true;
  if (ec == asio::error::would_block || ec == asio::error::try_again) {
    asio::async_write(conn.socket, asio::buffer(ex->wire) + written,
                      [this, ex](const ErrorCode& ec, size_t bytes) {
                        Advance(ex, [&] { return OnWritten(ex, ec, bytes); });
                      });
    return;
  }
  if (ec) {
    // Maybe on the caller's thread: what follows (a re-send, a callback) belongs to the loop.
    asio::post(io_, [this, ex, ec] { Advance(ex, [&] { return SendFailedLocked(ex, ec); }); });
    return;
  }
  ReadLocked(ex);
}

void BeastClient::ReadLocked(const ExchangePtr& ex) {
  Connection& conn = *ex->conn;
  auto on_read = [this, ex](const ErrorCode& ec, size_t) {
    Advance(ex, [&] { return OnRead(ex, ec); });
  };
  if (conn.tls) {
    bhttp::async_read_some(*conn.tls, conn.buffer, *ex->parser, std::move(on_read));
  } else {
    bhttp::async_read_some(conn.socket, conn.buffer, *ex->parser, std::move(on_read));
  }
}

BeastClient::Step BeastClient::OnWritten(const ExchangePtr& ex, const ErrorCode& ec, size_t bytes) {
  if (bytes > 0) ex->request_sent = true;
  if (ec) return SendFailedLocked(ex, ec);
  ex->request_sent = true;
  ReadLocked(ex);
  return std::nullopt;
}

BeastClient::Step BeastClient::SendFailedLocked(const ExchangePtr& ex, const ErrorCode& ec) {
  // A kept-alive connection the server had already closed: once, on a new connection.
  if (ex->conn->reused && ex->reuse && !ex->resent && IsPeerGone(ec)) return ResendLocked(ex);
  ReleaseConnection(std::move(ex->conn), false);
  HttpResult result{TransportError::kSend, absl::StrCat("send failed: ", ec.message())};
  result.request_sent = true;
  return result;
}

BeastClient::Step BeastClient::ResendLocked(const ExchangePtr& ex) {
  ex->resent = true;
  auto fresh = NewConnection(ex->target.origin);
  // The slot goes with the exchange to its new connection.
  ex->conn->holds_slot = false;
  ErrorCode ignored;
  ex->conn->socket.close(ignored);
  ex->retired.push_back(std::move(ex->conn));
  ex->conn = std::move(fresh);
  return ConnectLocked(ex);
}

BeastClient::Step BeastClient::ConnectLocked(const ExchangePtr& ex) {
  Connection& conn = *ex->conn;
  conn.connect_timer.expires_after(options_.connect_timeout);
  conn.connect_timer.async_wait([ex, c = &conn](const ErrorCode& ec) {
    if (ec == asio::error::operation_aborted) return;
    absl::MutexLock lock(&ex->mu);
    if (ex->finished || ex->conn.get() != c) return;
    c->connect_timed_out = true;
    ErrorCode ignored;
    c->socket.close(ignored);  // the pending connect or handshake ends with operation_aborted
  });
  auto on_connect = [this, ex](const ErrorCode& ec, auto&&...) {
    Advance(ex, [&] { return OnConnected(ex, ec); });
  };
  ErrorCode not_an_address;
  const asio::ip::address address = asio::ip::make_address(ex->target.host, not_an_address);
  if (!not_an_address) {
    const auto port = static_cast<uint16_t>(std::stoi(ex->target.port));
    conn.socket.async_connect(tcp::endpoint(address, port), on_connect);
    return std::nullopt;
  }
  resolver_.async_resolve(
      ex->target.host, ex->target.port,
      [this, ex, on_connect](const ErrorCode& ec, tcp::resolver::results_type endpoints) {
        Advance(ex, [&]() -> Step {
          if (ec) return ConnectFailedLocked(ex, "cannot resolve host", ec);
          if (ex->conn->connect_timed_out) {
            return ConnectFailedLocked(ex, "connect failed", asio::error::timed_out);
          }
          asio::async_connect(ex->conn->socket, endpoints, on_connect);
          return std::nullopt;
        });
      });
  return std::nullopt;
}

BeastClient::Step BeastClient::ConnectFailedLocked(const ExchangePtr& ex, const char* what,
                                                   const ErrorCode& ec) {
  const bool timed_out = ex->conn->connect_timed_out;
  ex->conn->connect_timer.cancel();
  ReleaseConnection(std::move(ex->conn), false);
  if (timed_out) {
    return HttpResult{
        TransportError::kTimeout,
        absl::StrCat("connect timed out after ", options_.connect_timeout.count(), " ms")};
  }
  return Failure(TransportError::kConnect, absl::StrCat(what, ": ", ec.message()));
}

BeastClient::Step BeastClient::OnConnected(const ExchangePtr& ex, const ErrorCode& ec) {
  if (ec) return ConnectFailedLocked(ex, "connect failed", ec);
  connections_opened_.fetch_add(1, std::memory_order_acq_rel);
  Connection& conn = *ex->conn;
  ErrorCode ignored;
  conn.socket.set_option(tcp::no_delay(true), ignored);
  conn.socket.set_option(asio::socket_base::keep_alive(true), ignored);
  if (!ex->target.tls) {
    conn.connect_timer.cancel();
    conn.socket.non_blocking(true, ignored);
    WriteLocked(ex);
    return std::nullopt;
  }
  conn.tls.emplace(conn.socket, tls_context_);
  SSL* ssl = conn.tls->native_handle();
  SSL_set_ex_data(ssl, OriginIndex(), &conn.origin);
  const std::string& host = ex->target.host;
  ErrorCode not_an_address;
  asio::ip::make_address(host, not_an_address);
  if (not_an_address) SSL_set_tlsext_host_name(ssl, host.c_str());  // SNI: names only
  conn.tls->set_verify_callback(asio::ssl::host_name_verification(host));
  static constexpr unsigned char kAlpn[] = "\x08http/1.1";
  SSL_set_alpn_protos(ssl, kAlpn, sizeof kAlpn - 1);
  {
    absl::MutexLock lock(&mu_);
    if (SSL_SESSION* session = pools_[conn.origin].session) SSL_set_session(ssl, session);
  }
  conn.tls->async_handshake(asio::ssl::stream_base::client, [this, ex](const ErrorCode& ec) {
    Advance(ex, [&] { return OnHandshake(ex, ec); });
  });
  return std::nullopt;
}

BeastClient::Step BeastClient::OnHandshake(const ExchangePtr& ex, const ErrorCode& ec) {
  if (ec) return ConnectFailedLocked(ex, "TLS handshake failed", ec);
  ex->conn->connect_timer.cancel();
  if (SSL_session_reused(ex->conn->tls->native_handle())) {
    sessions_resumed_.fetch_add(1, std::memory_order_acq_rel);
  }
  WriteLocked(ex);
  return std::nullopt;
}

BeastClient::Step BeastClient::OnRead(const ExchangePtr& ex, const ErrorCode& ec) {
  Connection& conn = *ex->conn;
  if (ec) {
    const bool nothing_back = !ex->parser->got_some() && conn.buffer.size() == 0;
    if (nothing_back && conn.reused && ex->reuse && !ex->resent && IsPeerGone(ec)) {
      return ResendLocked(ex);
    }
    HttpResult result = Failure(TransportError::kReceive, "", /*request_sent=*/true);
    if (ec == bhttp::error::body_limit || ec == bhttp::error::header_limit ||
        ec == bhttp::error::buffer_overflow) {
      result.error = TransportError::kTooLarge;
      result.error_detail = absl::StrCat(
          "response too large (",
          !ex->parser->refusal().empty()        ? ex->parser->refusal()
          : ec == bhttp::error::buffer_overflow ? "a head, chunk-size or trailer line over the "
                                                  "read buffer"
                                                : "",
          ex->parser->refusal().empty() && ec != bhttp::error::buffer_overflow ? "" : "; ",
          "limit ", options_.max_response_bytes, " bytes of body, ",
          options_.max_response_head_bytes, " bytes of head, ", options_.max_response_header_count,
          " fields)");
    } else if (nothing_back && IsPeerGone(ec)) {
      result.error_detail = "connection closed before any response byte";
    } else {
      result.error_detail = absl::StrCat("receive failed: ", ec.message());
    }
    ReleaseConnection(std::move(ex->conn), false);
    return result;
  }
  // The memory the body holds is its capacity (Beast reserves a declared Content-Length at
  // once, and grows an undeclared one by doubling).
  if (!ex->lease.GrowTo(ex->parser->body().capacity())) {
    HttpResult result = Failure(TransportError::kReceive, "", /*request_sent=*/true);
    result.error_detail = budget_.RefusalDetail();
    ReleaseConnection(std::move(ex->conn), false);
    return result;
  }
  if (!ex->parser->is_done()) {
    ReadLocked(ex);  // more of the answer to come
    return std::nullopt;
  }
  const unsigned status = ex->parser->status();
  if (status >= 100 && status < 200 && status != 101) {
    // An interim answer (100 Continue, 103 Early Hints): the final one follows, its head
    // counted with this one's.
    NewParserLocked(*ex, ex->parser->head_bytes());
    ReadLocked(ex);
    return std::nullopt;
  }
  HttpResult result;
  result.request_sent = true;
  result.response.status = static_cast<long>(status);
  result.response.headers = std::move(ex->parser->headers());
  const bool keep = ex->parser->keep_alive() && !ex->parser->need_eof() && conn.buffer.size() == 0;
  result.response.body = std::move(ex->parser->body());
  ReleaseConnection(std::move(ex->conn), keep);
  return result;
}

BeastClient::Step BeastClient::OnTimeout(const ExchangePtr& ex) {
  if (ex->queued) {
    absl::MutexLock lock(&mu_);
    auto& waiting = pools_[ex->target.origin].waiting;
    if (auto it = std::find(waiting.begin(), waiting.end(), ex); it != waiting.end()) {
      waiting.erase(it);
      --waiting_;
    }
  }
  if (ex->conn != nullptr) {
    // Cancels the pending connect, write or read; their handlers find the exchange finished.
    // The connection object stays with the exchange until those have run.
    ErrorCode ignored;
    ex->conn->socket.close(ignored);
    ex->conn->connect_timer.cancel();
    absl::MutexLock lock(&mu_);
    CloseLocked(*ex->conn);
  }
  HttpResult result{TransportError::kTimeout,
                    absl::StrCat("request timed out after ", ex->timeout.count(), " ms")};
  result.request_sent = ex->request_sent;
  return result;
}

void BeastClient::ReleaseConnection(std::unique_ptr<Connection> conn, bool keep) {
  absl::MutexLock lock(&mu_);
  if (keep && !stopping_) {
    conn->reused = true;
    conn->idle_since = Clock::now();
    conn->connect_timer.cancel();
    // The read buffer is empty between exchanges; an idle connection keeps at most a small
    // one (a large answer may have grown it), so a full pool stays cheap.
    if (conn->buffer.capacity() > kIdleBufferBytes) conn->buffer.shrink_to_fit();
    pools_[conn->origin].idle.push_back(std::move(conn));
    return;
  }
  ErrorCode ignored;
  conn->socket.close(ignored);
  CloseLocked(*conn);
}

void BeastClient::CloseLocked(Connection& conn) {
  if (!conn.holds_slot) return;
  conn.holds_slot = false;
  HostPool& pool = pools_[conn.origin];
  --pool.open;
  --total_open_;
}

std::unique_ptr<Connection> BeastClient::TakeIdleLocked(HostPool& pool) {
  const Clock::time_point now = Clock::now();
  while (!pool.idle.empty()) {
    std::unique_ptr<Connection> conn = std::move(pool.idle.back());
    pool.idle.pop_back();
    if (Usable(*conn, now)) return conn;
    ErrorCode ignored;
    conn->socket.close(ignored);
    CloseLocked(*conn);
  }
  return nullptr;
}

bool BeastClient::Usable(Connection& conn, Clock::time_point now) const {
  if (now - conn.idle_since > options_.max_idle) return false;
  pollfd fd{conn.socket.native_handle(), POLLIN, 0};
  return poll(&fd, 1, 0) == 0;
}

void BeastClient::ScheduleSweep() {
  sweep_timer_.expires_after(options_.max_idle / 2 + std::chrono::milliseconds(1));
  sweep_timer_.async_wait([this](const ErrorCode& ec) {
    if (ec) return;  // cancelled: shutting down
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
      const Clock::time_point now = Clock::now();
      for (auto& [origin, pool] : pools_) {
        auto stale = std::stable_partition(pool.idle.begin(), pool.idle.end(),
                                           [&](const auto& conn) { return !Usable(*conn, now); });
        for (auto it = pool.idle.begin(); it != stale; ++it) {
          ErrorCode ignored;
          (*it)->socket.close(ignored);
          CloseLocked(**it);
        }
        pool.idle.erase(pool.idle.begin(), stale);
      }
    }
    Dispatch();  // slots freed
    ScheduleSweep();
  });
}

bool BeastClient::ReserveSlotLocked(HostPool& pool) {
  auto drop_idle = [this](HostPool& from) {
    std::unique_ptr<Connection> oldest = std::move(from.idle.front());
    from.idle.erase(from.idle.begin());
    ErrorCode ignored;
    oldest->socket.close(ignored);
    CloseLocked(*oldest);
  };
  if (options_.max_host_connections != 0 && pool.open >= options_.max_host_connections) {
    if (pool.idle.empty()) return false;
    drop_idle(pool);  // a request for a fresh connection while the host is at its limit
  }
  if (options_.max_total_connections != 0 && total_open_ >= options_.max_total_connections) {
    // Room for this host by closing an idle connection of any host.
    auto it = std::find_if(pools_.begin(), pools_.end(),
                           [](const auto& entry) { return !entry.second.idle.empty(); });
    if (it == pools_.end()) return false;
    drop_idle(it->second);
  }
  ++pool.open;
  ++total_open_;
  return true;
}

void BeastClient::Dispatch() {
  for (;;) {
    ExchangePtr next;
    std::unique_ptr<Connection> conn;
    {
      absl::MutexLock lock(&mu_);
      if (waiting_ == 0 || stopping_) return;
      for (auto& [origin, pool] : pools_) {
        if (pool.waiting.empty()) continue;
        // `reuse` is fixed before an exchange is queued.
        const bool reuse = pool.waiting.front()->reuse;
        if (reuse) conn = TakeIdleLocked(pool);
        if (conn != nullptr || ReserveSlotLocked(pool)) {
          next = std::move(pool.waiting.front());
          pool.waiting.pop_front();
          --waiting_;
          break;
        }
      }
      if (next == nullptr) return;
    }
    Step result;
    {
      absl::MutexLock lock(&next->mu);
      if (next->finished) {
        // Timed out meanwhile: give back what it was given.
        absl::MutexLock pool_lock(&mu_);
        if (conn != nullptr) {
          pools_[conn->origin].idle.push_back(std::move(conn));
        } else {
          HostPool& pool = pools_[next->target.origin];
          --pool.open;
          --total_open_;
        }
        continue;
      }
      next->queued = false;
      if (conn != nullptr) {
        StartOnLocked(next, std::move(conn));
      } else {
        next->conn = NewConnection(next->target.origin);
        result = ConnectLocked(next);
      }
      if (result) {
        next->finished = true;
        next->timer.cancel();
      }
    }
    if (result) Deliver(next, std::move(*result));
  }
}

void BeastClient::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    if (!stopping_) {
      stopping_ = true;
      asio::post(io_, [this] { FailAll(); });
    }
  }
  // From a callback the loop cannot be joined; it ends once FailAll() has run.
  if (std::this_thread::get_id() == loop_id_) return;
  absl::MutexLock lock(&join_mu_);
  if (loop_.joinable()) loop_.join();
}

void BeastClient::FailAll() {
  std::vector<ExchangePtr> pending;
  {
    absl::MutexLock lock(&mu_);
    pending.assign(live_.begin(), live_.end());
    for (auto& [origin, pool] : pools_) {
      for (auto& conn : pool.idle) {
        ErrorCode ignored;
        conn->socket.close(ignored);
      }
      pool.idle.clear();
      pool.waiting.clear();
    }
    waiting_ = 0;
  }
  ErrorCode ignored;
  resolver_.cancel();
  sweep_timer_.cancel();
  for (const ExchangePtr& ex : pending) {
    Step result;
    {
      absl::MutexLock lock(&ex->mu);
      if (ex->finished) continue;
      ex->finished = true;
      ex->timer.cancel();
      if (ex->conn != nullptr) {
        ex->conn->connect_timer.cancel();
        ex->conn->socket.close(ignored);
      }
      result = Failure(TransportError::kOther, kShutDown, ex->request_sent);
    }
    Deliver(ex, std::move(*result));
  }
  // The loop returns once the cancelled operations' handlers have run.
  work_.reset();
}

}  // namespace internal

absl::StatusOr<std::unique_ptr<BeastTransport>> BeastTransport::Create(
    BeastTransportOptions options) {
  if (options.connect_timeout <= std::chrono::milliseconds::zero() ||
      options.max_idle <= std::chrono::milliseconds::zero()) {
    return absl::InvalidArgumentError("connect_timeout and max_idle must be > 0");
  }
  if (options.max_response_bytes == 0 || options.max_response_head_bytes == 0) {
    return absl::InvalidArgumentError("max_response_bytes and max_response_head_bytes must be > 0");
  }
  asio::ssl::context tls(asio::ssl::context::tls_client);
  ErrorCode ec;
  tls.set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                      asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
                      asio::ssl::context::no_tlsv1_1,
                  ec);
  if (!ec) tls.set_verify_mode(asio::ssl::verify_peer, ec);
  if (ec) return absl::InternalError(absl::StrCat("TLS context: ", ec.message()));
  if (!options.ca_file.empty()) {
    if (absl::Status readable = CheckReadableCaFile(options.ca_file); !readable.ok()) {
      return readable;
    }
    tls.load_verify_file(options.ca_file, ec);
    if (ec) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot load the CA file ", options.ca_file, ": ", ec.message()));
    }
  } else {
    tls.set_default_verify_paths(ec);
    if (ec) return absl::InternalError(absl::StrCat("TLS verify paths: ", ec.message()));
  }
  auto client = std::make_unique<internal::BeastClient>(std::move(options), std::move(tls));
  try {
    client->Start();
  } catch (const std::system_error& e) {
    return absl::InternalError(absl::StrCat("cannot start the transport thread: ", e.what()));
  }
  return std::unique_ptr<BeastTransport>(new BeastTransport(std::move(client)));
}

BeastTransport::BeastTransport(std::unique_ptr<internal::BeastClient> client)
    : client_(std::move(client)) {}

BeastTransport::~BeastTransport() { client_->Shutdown(); }

void BeastTransport::Send(HttpRequest request, HttpCallback done) {
  client_->Send(std::move(request), std::move(done));
}

void BeastTransport::Shutdown() { client_->Shutdown(); }

size_t BeastTransport::InFlight() const { return client_->InFlight(); }
size_t BeastTransport::ConnectionsOpened() const { return client_->ConnectionsOpened(); }
size_t BeastTransport::TlsSessionsResumed() const { return client_->SessionsResumed(); }
size_t BeastTransport::IdleConnections() const { return client_->IdleConnections(); }
size_t BeastTransport::BufferedResponseBytes() const { return client_->BufferedResponseBytes(); }

}  // namespace inspection::http
