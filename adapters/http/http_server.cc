#include "adapters/http/http_server.h"

#include <sys/resource.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/basic_parser.hpp>
#include <boost/beast/http/error.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace inspection::http {
namespace {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;

// What one read asks the socket for. The read buffer grows in these steps up to its bound
// (max_head_bytes plus one step), and is given back while a connection is idle.
constexpr size_t kReadStep = 16 * 1024;
// Chunk extensions mean nothing to us; a chunk-size line carrying more than this is 400.
constexpr size_t kMaxChunkExtensionBytes = 1024;
// accept() failures are retried after this, doubling up to the cap.
constexpr std::chrono::milliseconds kAcceptRetryFirst{10};
constexpr std::chrono::milliseconds kAcceptRetryCap{1000};

// Beast's HTTP/1 parser with our own handling of what it finds: the header count limit
// (Beast has only a byte limit), a bound on chunk extensions, and the body appended to
// the request as it is decoded.
class RequestParser final : public bhttp::basic_parser<true> {
 public:
  RequestParser(ServerRequest* request, size_t max_header_count)
      : request_(request), max_header_count_(max_header_count) {}

  bhttp::verb method_verb() const { return verb_; }
  int version() const { return version_; }
  bool too_many_headers() const { return too_many_headers_; }
  bool chunk_extension_too_long() const { return chunk_extension_too_long_; }

 private:
  void on_request_impl(bhttp::verb verb, beast::string_view method, beast::string_view target,
                       int version, beast::error_code&) override {
    verb_ = verb;
    version_ = version;
    request_->method.assign(method.data(), method.size());
    request_->target.assign(target.data(), target.size());
  }

  void on_response_impl(int, beast::string_view, int, beast::error_code& ec) override {
    ec = bhttp::error::bad_method;  // never called for requests
  }

  void on_field_impl(bhttp::field, beast::string_view name, beast::string_view value,
                     beast::error_code& ec) override {
    if (request_->headers.size() >= max_header_count_) {
      too_many_headers_ = true;
      ec = bhttp::error::header_limit;
      return;
    }
    request_->headers.emplace_back(std::string(name.data(), name.size()),
                                   std::string(value.data(), value.size()));
  }

  void on_header_impl(beast::error_code&) override {}

  void on_body_init_impl(const boost::optional<std::uint64_t>& length,
                         beast::error_code&) override {
    // The length was checked against the limit before the body is read.
    if (length) request_->body.reserve(static_cast<size_t>(*length));
  }

  size_t on_body_impl(beast::string_view body, beast::error_code&) override {
    request_->body.append(body.data(), body.size());
    return body.size();
  }

  void on_chunk_header_impl(std::uint64_t, beast::string_view extensions,
                            beast::error_code& ec) override {
    if (extensions.size() > kMaxChunkExtensionBytes) {
      chunk_extension_too_long_ = true;
      ec = bhttp::error::bad_chunk_extension;
    }
  }

  size_t on_chunk_body_impl(std::uint64_t, beast::string_view body, beast::error_code&) override {
    request_->body.append(body.data(), body.size());
    return body.size();
  }

  void on_finish_impl(beast::error_code&) override {}

  ServerRequest* const request_;
  const size_t max_header_count_;
  bhttp::verb verb_ = bhttp::verb::unknown;
  int version_ = 11;
  bool too_many_headers_ = false;
  bool chunk_extension_too_long_ = false;
};

// Runs handlers. Its queue never holds more than max_requests_in_flight tasks: a request
// reserves its place before its body is read.
class WorkerPool {
 public:
  void Start(int threads) {
    for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Run(); });
  }

  void Post(std::function<void()> task) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      tasks_.push_back(std::move(task));
    }
    cv_.notify_one();
  }

  // Runs what is queued, then joins.
  void StopAndJoin() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    for (std::thread& thread : threads_) thread.join();
    threads_.clear();
  }

 private:
  void Run() {
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return stopping_ || !tasks_.empty(); });
        if (tasks_.empty()) return;
        task = std::move(tasks_.front());
        tasks_.pop_front();
      }
      task();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

std::string AddressText(const tcp::endpoint& endpoint) {
  net::ip::address address = endpoint.address();
  if (address.is_v6() && address.to_v6().is_v4_mapped()) {
    address = net::ip::make_address_v4(net::ip::v4_mapped, address.to_v6());
  }
  return address.to_string();
}

bool IsHeader(const std::string& name, absl::string_view wanted) {
  return absl::EqualsIgnoreCase(name, wanted);
}

// The connection asks to end after this exchange: `Connection: close` (any of its tokens),
// or HTTP/1.0 (which we do not keep alive).
bool WantsClose(const ServerRequest& request, int version) {
  if (version < 11) return true;
  for (const auto& [name, value] : request.headers) {
    if (!IsHeader(name, "Connection")) continue;
    for (absl::string_view token : absl::StrSplit(value, ',')) {
      if (absl::EqualsIgnoreCase(absl::StripAsciiWhitespace(token), "close")) return true;
    }
  }
  return false;
}

}  // namespace

std::string ClientKey(const std::string& address_text) {
  beast::error_code ec;
  const net::ip::address address = net::ip::make_address(address_text, ec);
  if (ec || !address.is_v6()) return address_text;
  // One host or site usually holds a whole /64: counting single IPv6 addresses would be
  // no limit at all.
  net::ip::address_v6::bytes_type bytes = address.to_v6().to_bytes();
  std::fill(bytes.begin() + 8, bytes.end(), 0);
  return net::ip::address_v6(bytes).to_string() + "/64";
}

absl::Status ValidateLimits(const HttpServerLimits& limits) {
  auto positive = [](const char* name, int64_t value) {
    return value > 0 ? absl::OkStatus()
                     : absl::InvalidArgumentError(
                           absl::StrCat("HTTP server: ", name, " must be positive"));
  };
  for (const absl::Status& status :
       {positive("head_timeout", limits.head_timeout.count()),
        positive("keep_alive_timeout", limits.keep_alive_timeout.count()),
        positive("min_body_bytes_per_second",
                 static_cast<int64_t>(limits.min_body_bytes_per_second)),
        positive("write_timeout", limits.write_timeout.count()),
        positive("max_head_bytes", static_cast<int64_t>(limits.max_head_bytes)),
        positive("max_header_count", static_cast<int64_t>(limits.max_header_count)),
        positive("max_connections", static_cast<int64_t>(limits.max_connections)),
        positive("max_connections_per_client",
                 static_cast<int64_t>(limits.max_connections_per_client)),
        positive("max_requests_in_flight", static_cast<int64_t>(limits.max_requests_in_flight)),
        positive("linger_timeout", limits.linger_timeout.count())}) {
    if (!status.ok()) return status;
  }
  if (limits.body_grace.count() < 0) {
    return absl::InvalidArgumentError("HTTP server: body_grace must not be negative");
  }
  return absl::OkStatus();
}

// A counter of HttpServerStats that also tells HttpServerOptions::on_event.
class EventCounter {
 public:
  EventCounter(HttpServerEvent event, const std::function<void(HttpServerEvent)>& on_event)
      : event_(event), on_event_(on_event) {}
  void operator++() {
    count_.fetch_add(1, std::memory_order_relaxed);
    if (on_event_) on_event_(event_);
  }
  int64_t load() const { return count_.load(std::memory_order_relaxed); }

 private:
  const HttpServerEvent event_;
  const std::function<void(HttpServerEvent)>& on_event_;
  std::atomic<int64_t> count_{0};
};

class HttpServer::Impl {
 public:
  class Connection;

  Impl(HeadCheck head_check, Handler handler, HttpServerOptions options)
      : head_check_(std::move(head_check)),
        handler_(std::move(handler)),
        options_(std::move(options)),
        acceptor_(net::make_strand(io_)),
        accept_timer_(acceptor_.get_executor()) {}

  absl::StatusOr<int> Bind(const std::string& host, int port);
  absl::Status Serve();
  void Stop();
  bool Pause(std::chrono::milliseconds duration) const {
    absl::MutexLock lock(&stop_mu_);
    return !stop_mu_.AwaitWithTimeout(absl::Condition(&stopping_), absl::FromChrono(duration));
  }
  bool stopping() const {
    absl::MutexLock lock(&stop_mu_);
    return stopping_;
  }
  HttpServerStats Stats() const;
  bool accepting() const { return accepting_.load(); }

  const HttpServerLimits& limits() const { return options_.limits; }

  // The answer the server gives itself, with the owner's error body.
  ServerResponse ErrorResponse(int status) const {
    ServerResponse response;
    response.status = status;
    if (options_.error_body) options_.error_body(response);
    return response;
  }

  // Counts a request past the head check; false when max_requests_in_flight is reached.
  bool ReserveInFlight() {
    if (in_flight_.fetch_add(1) >= static_cast<int64_t>(limits().max_requests_in_flight)) {
      in_flight_.fetch_sub(1);
      ++shed_in_flight_;
      return false;
    }
    return true;
  }
  void ReleaseInFlight() { in_flight_.fetch_sub(1); }

  void RunHandler(const std::shared_ptr<Connection>& connection);

  // Idle kept-alive connections, which may be closed to make room for new ones.
  void SetIdle(Connection* connection, bool idle) {
    std::lock_guard<std::mutex> lock(registry_mu_);
    if (idle) {
      idle_.insert(connection);
    } else {
      idle_.erase(connection);
    }
  }
  // Connections without a complete request head (new ones that sent nothing yet, kept-alive
  // ones part way through their next head), in the order they began to wait: at
  // max_connections, with no idle kept-alive connection to close, the one that has waited
  // longest is closed to admit a new one.
  void SetAwaitingHead(Connection* connection, bool awaiting) {
    std::lock_guard<std::mutex> lock(registry_mu_);
    awaiting_head_.Set(connection, awaiting);
  }
  // Connections in a stretch of answers: from the first answer written until the client,
  // having taken the last one, has no pipelined request waiting (then it waits like any
  // other), or the connection ends; draining after the last answer (Linger) included. At
  // max_connections, with no idle kept-alive connection, the connection that has been stuck
  // the longest here or waiting for a head is closed (Admit). A client that does not read its
  // answers (requests pipelined into a small receive window; no key needed for a 405) would
  // otherwise hold its connection for write_timeout per answer, and 40 of them kept the
  // vendor out.
  void SetAnswering(Connection* connection, bool answering) {
    std::lock_guard<std::mutex> lock(registry_mu_);
    answering_.Set(connection, answering);
  }
  void Unregister(Connection* connection, const std::string& client);

  const HeadCheck head_check_;
  const Handler handler_;
  const HttpServerOptions options_;

  EventCounter head_timeouts_{HttpServerEvent::kHeadTimeout, options_.on_event};
  EventCounter body_timeouts_{HttpServerEvent::kBodyTimeout, options_.on_event};
  EventCounter write_timeouts_{HttpServerEvent::kWriteTimeout, options_.on_event};
  EventCounter head_too_large_{HttpServerEvent::kHeadTooLarge, options_.on_event};
  EventCounter body_too_large_{HttpServerEvent::kBodyTooLarge, options_.on_event};
  EventCounter malformed_{HttpServerEvent::kMalformed, options_.on_event};
  EventCounter not_implemented_{HttpServerEvent::kNotImplemented, options_.on_event};

 private:
  void Accept();
  void OnAccept(beast::error_code error, tcp::socket socket);
  void Admit(tcp::socket socket);
  void Shed(tcp::socket& socket, EventCounter* counter);

  // Connections in the order they entered a state (SetAwaitingHead, SetAnswering). Places
  // come from one counter shared by every queue (`places`), so that the oldest entries of
  // two queues can be compared.
  class Queue {
   public:
    explicit Queue(uint64_t* places) : places_(places) {}
    void Set(Connection* connection, bool in) {
      const auto at = place_.find(connection);
      if (in && at == place_.end()) {
        place_.emplace(connection, ++*places_);
        order_.emplace(*places_, connection);
      } else if (!in && at != place_.end()) {
        order_.erase(at->second);
        place_.erase(at);
      }
    }
    // The place of the connection that entered first; 0 when the queue is empty.
    uint64_t OldestPlace() const { return order_.empty() ? 0 : order_.begin()->first; }
    // The connection that entered first, taken out of the queue; null when it is empty.
    Connection* TakeOldest() {
      if (order_.empty()) return nullptr;
      Connection* oldest = order_.begin()->second;
      Set(oldest, false);
      return oldest;
    }

   private:
    uint64_t* const places_;
    std::unordered_map<Connection*, uint64_t> place_;
    std::map<uint64_t, Connection*> order_;
  };

  net::io_context io_;
  // Keeps the I/O threads running while nothing is pending (a handler running after the
  // acceptor closed still has its answer to write); released at the end of Stop().
  net::executor_work_guard<net::io_context::executor_type> work_ = net::make_work_guard(io_);
  tcp::acceptor acceptor_;
  net::steady_timer accept_timer_;
  std::chrono::milliseconds accept_retry_{kAcceptRetryFirst};
  std::vector<std::thread> io_threads_;
  WorkerPool workers_;
  bool served_ = false;

  mutable absl::Mutex stop_mu_;
  bool stopping_ ABSL_GUARDED_BY(stop_mu_) = false;
  std::mutex stop_once_mu_;  // held for all of Stop(): a second caller waits for the first
  bool stopped_ = false;     // guarded by stop_once_mu_

  mutable std::mutex registry_mu_;
  std::condition_variable registry_empty_;
  std::unordered_map<Connection*, std::weak_ptr<Connection>> connections_;  // registry_mu_
  std::unordered_map<std::string, size_t> per_client_;                      // registry_mu_
  std::unordered_set<Connection*> idle_;                                    // registry_mu_
  uint64_t places_ = 0;                                                     // registry_mu_ (Queue)
  Queue awaiting_head_{&places_};  // registry_mu_ (SetAwaitingHead)
  Queue answering_{&places_};      // registry_mu_ (SetAnswering)

  std::atomic<int64_t> in_flight_{0};
  std::atomic<bool> accepting_{false};
  // Stores `accepting` and tells on_event when it changed. Once stopping, never true again:
  // an accept completing while Stop runs must not leave the listener (and its gauge) shown
  // as accepting.
  void SetAccepting(bool accepting) {
    if (accepting && stopping()) return;
    if (accepting_.exchange(accepting) != accepting && options_.on_event) {
      options_.on_event(accepting ? HttpServerEvent::kAccepting : HttpServerEvent::kNotAccepting);
    }
    // Stop may have cleared it between the check and the exchange.
    if (accepting && stopping() && accepting_.exchange(false) && options_.on_event) {
      options_.on_event(HttpServerEvent::kNotAccepting);
    }
  }
  EventCounter accepted_{HttpServerEvent::kAccepted, options_.on_event};
  EventCounter shed_max_connections_{HttpServerEvent::kShedMaxConnections, options_.on_event};
  EventCounter shed_per_client_{HttpServerEvent::kShedPerClient, options_.on_event};
  EventCounter shed_in_flight_{HttpServerEvent::kShedInFlight, options_.on_event};
  EventCounter idle_closed_for_room_{HttpServerEvent::kIdleClosedForRoom, options_.on_event};
  EventCounter awaiting_head_closed_for_room_{HttpServerEvent::kAwaitingHeadClosedForRoom,
                                              options_.on_event};
  EventCounter answering_closed_for_room_{HttpServerEvent::kAnsweringClosedForRoom,
                                          options_.on_event};
  EventCounter accept_errors_{HttpServerEvent::kAcceptError, options_.on_event};
};

// One accepted connection. Every member is used on its strand only, except `request_` and
// `response_`, which the worker running the handler uses while the connection waits for it
// (state kHandling: nothing else touches them then).
class HttpServer::Impl::Connection : public std::enable_shared_from_this<Connection> {
 public:
  enum class State { kIdle, kHead, kBody, kHandling, kWriting, kLingering, kClosed };

  Connection(Impl* server, tcp::socket socket, std::string client, std::string address)
      : server_(server),
        socket_(std::move(socket)),
        timer_(socket_.get_executor()),
        deadline_(socket_.get_executor()),
        buffer_(server->limits().max_head_bytes + kReadStep),
        client_(std::move(client)),
        address_(std::move(address)) {}

  ~Connection() { server_->Unregister(this, client_); }

  const std::string& client() const { return client_; }

  void Start() {
    net::dispatch(socket_.get_executor(), [self = shared_from_this()] {
      if (self->state_ == State::kClosed) return;  // Stop() came first
      const auto deadline = Clock::now() + self->server_->limits().head_timeout;
      self->head_deadline_ = deadline;
      self->WaitForRequest(deadline, /*kept_alive=*/false);
    });
  }

  // From any thread: closes the connection if it is idle (used to make room).
  void CloseIfIdle() {
    net::post(socket_.get_executor(), [self = shared_from_this()] {
      if (self->state_ == State::kIdle && self->kept_alive_) self->Close();
    });
  }

  // From any thread: closes the connection if it still has no complete request head (used
  // to make room; one that completed its head meanwhile stays).
  void CloseIfAwaitingHead() {
    net::post(socket_.get_executor(), [self = shared_from_this()] {
      if (self->state_ == State::kHead || (self->state_ == State::kIdle && !self->kept_alive_)) {
        self->Close();
      }
    });
  }

  // From any thread: closes the connection if it is still in its stretch of answers (used
  // to make room): writing one, draining after the last, or reading the head of a request it
  // pipelined. One reading a body or waiting for its handler stays.
  void CloseIfAnswering() {
    net::post(socket_.get_executor(), [self = shared_from_this()] {
      switch (self->state_) {
        case State::kWriting:
        case State::kLingering:
        case State::kHead:
        case State::kIdle:
          self->Close();
          break;
        case State::kBody:
        case State::kHandling:
        case State::kClosed:
          break;
      }
    });
  }

  // From any thread, when the server stops.
  void OnStop() {
    net::post(socket_.get_executor(), [self = shared_from_this()] {
      switch (self->state_) {
        case State::kIdle:
        case State::kHead:
        case State::kBody:
        case State::kLingering:
          self->Close();
          break;
        case State::kHandling:
        case State::kWriting:
          self->close_after_ = true;
          self->no_more_pauses_ = true;
          self->timer_.cancel();
          break;
        case State::kClosed:
          break;
      }
    });
  }

  // On a worker thread, then back on the strand.
  void RunHandler() {
    try {
      server_->handler_(request_, response_);
    } catch (...) {
      response_ = ServerResponse();
      response_.status = 500;
      if (server_->options_.exception_body) {
        server_->options_.exception_body(response_);
      } else if (server_->options_.error_body) {
        server_->options_.error_body(response_);
      }
    }
    net::post(socket_.get_executor(), [self = shared_from_this()] { self->WriteResponse(); });
  }

 private:
  // --- Waiting for a request (no buffer held, no thread) ---
  void WaitForRequest(Clock::time_point deadline, bool kept_alive) {
    state_ = State::kIdle;
    kept_alive_ = kept_alive;
    if (buffer_.size() > 0) {  // a pipelined request is already here
      StartHead();
      return;
    }
    buffer_.shrink_to_fit();
    if (kept_alive) server_->SetIdle(this, true);
    timer_.expires_at(deadline);
    timer_.async_wait([self = shared_from_this(), kept_alive](beast::error_code ec) {
      if (ec || self->state_ != State::kIdle) return;
      if (!kept_alive) ++self->server_->head_timeouts_;
      self->Close();
    });
    socket_.async_wait(tcp::socket::wait_read, [self = shared_from_this()](beast::error_code ec) {
      if (self->state_ != State::kIdle) return;
      self->timer_.cancel();
      if (ec) {
        self->Close();
        return;
      }
      self->StartHead();
    });
  }

  void StartHead() {
    if (kept_alive_) {
      server_->SetIdle(this, false);
      server_->SetAwaitingHead(this, true);  // a new connection waits from its accept
      // The head timeout of a kept-alive connection counts from its next request's bytes.
      head_deadline_ = Clock::now() + server_->limits().head_timeout;
    }
    state_ = State::kHead;
    request_ = ServerRequest();
    response_ = ServerResponse();
    body_unread_ = false;
    holds_in_flight_ = false;
    head_bytes_ = 0;
    parser_.emplace(&request_, server_->limits().max_header_count);
    parser_->header_limit(
        static_cast<std::uint32_t>(std::min<size_t>(server_->limits().max_head_bytes, UINT32_MAX)));
    parser_->body_limit(boost::none);  // checked by us after the head (see OnHead)
    Parse();
  }

  // --- Reading ---
  Clock::time_point ReadDeadline() const {
    if (state_ == State::kHead) return head_deadline_;
    // kBody: the minimum rate, with the grace.
    const auto& limits = server_->limits();
    const auto allowed = std::chrono::milliseconds(
        request_.body.size() * 1000 / std::max<uint64_t>(1, limits.min_body_bytes_per_second));
    return body_start_ + limits.body_grace + allowed;
  }

  void Read() {
    const size_t room = buffer_.max_size() - buffer_.size();
    if (room == 0) {
      // A head line or a chunk-size line longer than the buffer (the parser reports an
      // over-long head itself, before this).
      ++server_->malformed_;
      Refuse(400);
      return;
    }
    ArmDeadline(ReadDeadline());
    socket_.async_read_some(
        buffer_.prepare(std::min(room, kReadStep)),
        [self = shared_from_this()](beast::error_code ec, size_t n) { self->OnRead(ec, n); });
  }

  void OnRead(beast::error_code ec, size_t n) {
    const bool timed_out = DisarmDeadline();
    if (state_ == State::kClosed) return;
    buffer_.commit(n);
    if (timed_out) {
      if (state_ == State::kHead) {
        ++server_->head_timeouts_;
        Close();
      } else {
        ++server_->body_timeouts_;
        Refuse(408);
      }
      return;
    }
    if (ec) {
      // EOF or an error: nothing complete to answer (an EOF in a head or body is a
      // client that gave up).
      Close();
      return;
    }
    Parse();
  }

  void Parse() {
    for (;;) {
      if (buffer_.size() == 0) {
        Read();
        return;
      }
      beast::error_code ec;
      const size_t used = parser_->put(buffer_.data(), ec);
      buffer_.consume(used);
      if (state_ == State::kHead && HeadTooLarge(used)) {
        ++server_->head_too_large_;
        Refuse(431);
        return;
      }
      if (ec == bhttp::error::need_more) {
        Read();
        return;
      }
      if (ec) {
        OnParseError(ec);
        return;
      }
      if (state_ == State::kHead && parser_->is_header_done()) {
        OnHead();
        return;
      }
      if (parser_->is_done()) {
        OnBodyDone();
        return;
      }
    }
  }

  // Beast bounds only the head bytes it holds unparsed at once (header_limit): a field line
  // it has parsed is consumed, so a head trickled in one complete line per read is never
  // refused by it, and every line is kept in request_.headers. The head as a whole (request
  // line, every field, and what is not parsed yet) is counted here against max_head_bytes.
  bool HeadTooLarge(size_t parsed) {
    head_bytes_ += parsed;
    const size_t pending = parser_->is_header_done() ? 0 : buffer_.size();
    return head_bytes_ + pending > server_->limits().max_head_bytes;
  }

  void OnParseError(beast::error_code ec) {
    if (ec == bhttp::error::header_limit) {
      ++server_->head_too_large_;
      Refuse(431);
    } else if (ec == bhttp::error::body_limit) {
      ++server_->body_too_large_;
      Refuse(413);
    } else {
      ++server_->malformed_;
      Refuse(400);
    }
  }

  // --- The head is complete ---
  void OnHead() {
    server_->SetAwaitingHead(this, false);
    const size_t query = request_.target.find('?');
    request_.path = PercentDecode(request_.target.substr(0, query), /*plus_is_space=*/false);
    if (query != std::string::npos) request_.query = request_.target.substr(query + 1);
    request_.remote_address = address_;
    version_ = parser_->version();
    const bool chunked = parser_->chunked();
    const boost::optional<std::uint64_t> length = parser_->content_length();
    body_unread_ = chunked || (length && *length > 0);
    if (version_ != 10 && version_ != 11) {
      ++server_->malformed_;
      Refuse(505);
      return;
    }
    if (parser_->method_verb() == bhttp::verb::unknown) {
      ++server_->not_implemented_;
      Refuse(501);
      return;
    }
    // Only `chunked` is a transfer coding we read; with another one, or next to a
    // Content-Length, the body's end is ambiguous (RFC 9112 6.1, 6.3): refuse, close.
    const size_t codings = request_.HeaderCount("Transfer-Encoding");
    if (codings > 0 && (!chunked || codings > 1 || request_.HeaderCount("Content-Length") > 0)) {
      body_unread_ = true;
      ++server_->malformed_;
      Refuse(400);
      return;
    }
    if (server_->head_check_) {
      std::optional<ServerResponse> answer = server_->head_check_(request_);
      if (answer.has_value()) {
        response_ = *std::move(answer);
        WriteResponse();
        return;
      }
    }
    const size_t max_body = server_->limits().max_body_bytes;
    if (length && *length > max_body) {
      ++server_->body_too_large_;
      Refuse(413);
      return;
    }
    if (chunked && max_body == 0) {
      ++server_->body_too_large_;
      Refuse(413);
      return;
    }
    if (!server_->ReserveInFlight()) {
      ServerResponse busy = server_->ErrorResponse(503);
      busy.SetHeader("Retry-After", "1");
      busy.close = body_unread_;
      response_ = std::move(busy);
      WriteResponse();
      return;
    }
    holds_in_flight_ = true;
    if (!body_unread_) {
      Handle();
      return;
    }
    parser_->body_limit(max_body);
    state_ = State::kBody;
    body_start_ = Clock::now();
    const std::string* expect = request_.Header("Expect");
    if (expect != nullptr) {
      if (!absl::EqualsIgnoreCase(absl::StripAsciiWhitespace(*expect), "100-continue")) {
        Refuse(417);
        return;
      }
      // The sender waits for this before it sends the body: only now, past the checks.
      out_ = "HTTP/1.1 100 Continue\r\n\r\n";
      Write([self = shared_from_this()] { self->Parse(); });
      return;
    }
    Parse();
  }

  void OnBodyDone() {
    body_unread_ = false;
    Handle();
  }

  void Handle() {
    state_ = State::kHandling;
    server_->RunHandler(shared_from_this());
  }

  // An answer of the server's own; the connection ends after it. A request not read to
  // its end is drained after the answer (Linger), so that the client can read it.
  void Refuse(int status) {
    if (state_ == State::kHead || state_ == State::kBody) body_unread_ = true;
    response_ = server_->ErrorResponse(status);
    response_.close = true;
    WriteResponse();
  }

  // --- Writing ---
  void WriteResponse() {
    if (state_ == State::kClosed) return;
    state_ = State::kWriting;
    server_->SetAnswering(this, true);
    if (response_.reset) {
      Reset();
      return;
    }
    if (response_.close || body_unread_ || WantsClose(request_, version_) || server_->stopping()) {
      close_after_ = true;
    }
    if (response_.truncate_body_at.has_value()) close_after_ = true;
    const bool head_only = request_.method == "HEAD";
    const bool chunked = response_.chunk_bytes > 0 && !head_only;
    std::string out =
        absl::StrCat("HTTP/1.1 ", response_.status, " ", ReasonPhrase(response_.status), "\r\n");
    for (const auto& [name, value] : response_.headers) {
      if (IsHeader(name, "Content-Length") || IsHeader(name, "Transfer-Encoding") ||
          IsHeader(name, "Connection")) {
        continue;
      }
      absl::StrAppend(&out, name, ": ", value, "\r\n");
    }
    if (chunked) {
      absl::StrAppend(&out, "Transfer-Encoding: chunked\r\n");
    } else {
      absl::StrAppend(&out, "Content-Length: ", response_.body.size(), "\r\n");
    }
    if (close_after_) absl::StrAppend(&out, "Connection: close\r\n");
    absl::StrAppend(&out, "\r\n");
    if (!head_only && !chunked) {
      const size_t sent = std::min(response_.body.size(),
                                   response_.truncate_body_at.value_or(response_.body.size()));
      out.append(response_.body, 0, sent);
    }
    out_ = std::move(out);
    chunk_offset_ = 0;
    Write([self = shared_from_this(), chunked] {
      if (chunked) {
        self->WriteNextChunk();
      } else {
        self->AfterAnswer();
      }
    });
  }

  // Writes out_, then `next()`; a client that does not take it within write_timeout is
  // disconnected.
  template <class Next>
  void Write(Next next) {
    ArmDeadline(Clock::now() + server_->limits().write_timeout);
    net::async_write(socket_, net::buffer(out_),
                     [self = shared_from_this(), next](beast::error_code ec, size_t) {
                       const bool timed_out = self->DisarmDeadline();
                       if (self->state_ == State::kClosed) return;
                       if (timed_out) ++self->server_->write_timeouts_;
                       if (ec || timed_out) {
                         self->Close();
                         return;
                       }
                       next();
                     });
  }

  // Reads and writes are bounded by one deadline at a time: when it passes, the pending
  // operation is cancelled (the socket stays open, so that a 408 can still be written).
  void ArmDeadline(Clock::time_point at) {
    timed_out_ = false;
    deadline_.expires_at(at);
    deadline_.async_wait(
        [self = shared_from_this(), generation = ++deadline_generation_](beast::error_code ec) {
          if (ec || generation != self->deadline_generation_) return;
          self->timed_out_ = true;
          beast::error_code ignored;
          self->socket_.cancel(ignored);
        });
  }

  // True when the deadline had passed (and cancelled the operation that just ended).
  bool DisarmDeadline() {
    ++deadline_generation_;
    deadline_.cancel();
    const bool timed_out = timed_out_;
    timed_out_ = false;
    return timed_out;
  }

  // The emulator's slow body: the next piece after a pause.
  void WriteNextChunk() {
    const std::string& body = response_.body;
    if (chunk_offset_ >= body.size()) {
      out_ = "0\r\n\r\n";
      Write([self = shared_from_this()] { self->AfterAnswer(); });
      return;
    }
    auto send = [self = shared_from_this()] {
      if (self->state_ == State::kClosed) return;
      const std::string& text = self->response_.body;
      const size_t size = std::min(self->response_.chunk_bytes, text.size() - self->chunk_offset_);
      self->out_ =
          absl::StrCat(absl::Hex(size), "\r\n", text.substr(self->chunk_offset_, size), "\r\n");
      self->chunk_offset_ += size;
      self->Write([self] { self->WriteNextChunk(); });
    };
    if (chunk_offset_ == 0 || no_more_pauses_ || response_.chunk_pause.count() <= 0) {
      send();
      return;
    }
    timer_.expires_after(response_.chunk_pause);
    timer_.async_wait([send](beast::error_code) { send(); });  // cut short by Stop()
  }

  void AfterAnswer() {
    if (holds_in_flight_) {
      holds_in_flight_ = false;
      server_->ReleaseInFlight();
    }
    if (close_after_ || server_->stopping()) {
      if (body_unread_ && !response_.truncate_body_at.has_value()) {
        Linger();
      } else {
        Close();
      }
      return;
    }
    // A client that waits for each answer leaves the queue of answering connections here; one
    // that pipelined its next request stays in it with its first place: reading one answer
    // now and then does not make it younger than a vendor waiting for its head.
    if (buffer_.size() == 0) server_->SetAnswering(this, false);
    WaitForRequest(Clock::now() + server_->limits().keep_alive_timeout, /*kept_alive=*/true);
  }

  // After the last answer on a connection whose request body was not read: tell the
  // client we are done (FIN), then read and drop what it still sends, within bounds.
  // Closing with unread data would make the kernel send a reset, and a client still
  // sending its body would often lose our answer with it.
  void Linger() {
    state_ = State::kLingering;
    beast::error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_send, ignored);
    buffer_.clear();
    linger_deadline_ = Clock::now() + server_->limits().linger_timeout;
    lingered_ = 0;
    DrainSome();
  }

  void DrainSome() {
    if (lingered_ >= server_->limits().linger_max_bytes) {
      Close();
      return;
    }
    ArmDeadline(linger_deadline_);
    socket_.async_read_some(buffer_.prepare(kReadStep),
                            [self = shared_from_this()](beast::error_code ec, size_t n) {
                              const bool timed_out = self->DisarmDeadline();
                              if (self->state_ == State::kClosed) return;
                              if (timed_out) ec = net::error::timed_out;
                              self->lingered_ += n;
                              self->buffer_.clear();
                              if (ec) {
                                self->Close();
                                return;
                              }
                              self->DrainSome();
                            });
  }

  void Close() {
    if (state_ == State::kClosed) return;
    if (state_ == State::kIdle && kept_alive_) server_->SetIdle(this, false);
    server_->SetAwaitingHead(this, false);
    server_->SetAnswering(this, false);
    state_ = State::kClosed;
    timer_.cancel();
    DisarmDeadline();
    if (holds_in_flight_) {
      holds_in_flight_ = false;
      server_->ReleaseInFlight();
    }
    beast::error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
    buffer_.clear();
    buffer_.shrink_to_fit();
  }

  // Closing with a zero linger time sends RST instead of FIN.
  void Reset() {
    beast::error_code ignored;
    socket_.set_option(net::socket_base::linger(true, 0), ignored);
    if (holds_in_flight_) {
      holds_in_flight_ = false;
      server_->ReleaseInFlight();
    }
    state_ = State::kClosed;
    timer_.cancel();
    DisarmDeadline();
    socket_.close(ignored);
  }

  Impl* const server_;
  tcp::socket socket_;
  net::steady_timer timer_;     // idle wait, the emulator's chunk pauses
  net::steady_timer deadline_;  // the read or write under way (ArmDeadline)
  uint64_t deadline_generation_ = 0;
  bool timed_out_ = false;
  beast::flat_buffer buffer_;
  const std::string client_;   // what the per-client limit counts (ClientKey)
  const std::string address_;  // the peer's address
  State state_ = State::kIdle;
  bool kept_alive_ = false;
  Clock::time_point head_deadline_;
  Clock::time_point body_start_;
  Clock::time_point linger_deadline_;
  size_t lingered_ = 0;
  std::optional<RequestParser> parser_;
  size_t head_bytes_ = 0;  // of the request being read, parsed so far (HeadTooLarge)
  ServerRequest request_;
  ServerResponse response_;
  int version_ = 11;
  bool body_unread_ = false;
  bool holds_in_flight_ = false;
  bool close_after_ = false;
  bool no_more_pauses_ = false;
  std::string out_;
  size_t chunk_offset_ = 0;
};

void HttpServer::Impl::RunHandler(const std::shared_ptr<Connection>& connection) {
  workers_.Post([connection] { connection->RunHandler(); });
}

void HttpServer::Impl::Unregister(Connection* connection, const std::string& client) {
  std::lock_guard<std::mutex> lock(registry_mu_);
  if (connections_.erase(connection) > 0 && options_.on_event) {
    options_.on_event(HttpServerEvent::kConnectionClosed);
  }
  idle_.erase(connection);
  awaiting_head_.Set(connection, false);
  answering_.Set(connection, false);
  auto at = per_client_.find(client);
  if (at != per_client_.end() && --at->second == 0) per_client_.erase(at);
  if (connections_.empty()) registry_empty_.notify_all();
}

absl::StatusOr<int> HttpServer::Impl::Bind(const std::string& host, int port) {
  if (absl::Status valid = ValidateLimits(options_.limits); !valid.ok()) return valid;
  if (options_.io_threads < 1 || options_.worker_threads < 1) {
    return absl::InvalidArgumentError("HTTP server: io_threads and worker_threads must be >= 1");
  }
  beast::error_code ec;
  // localhost is the one name a listen address may hold (the gateway's config refuses
  // others): the IPv4 loopback address.
  const net::ip::address address = net::ip::make_address(
      host.empty() ? "0.0.0.0" : (host == "localhost" ? "127.0.0.1" : host), ec);
  if (ec) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot listen on ", host, ":", port, ": not an IP address"));
  }
  const tcp::endpoint endpoint(address, static_cast<unsigned short>(port));
  const char* step = "socket";
  acceptor_.open(endpoint.protocol(), ec);
  // SO_REUSEADDR only: a restart can rebind at once, but a second process asking for a
  // port in use gets an error instead of silently sharing it (SO_REUSEPORT would).
  if (!ec) acceptor_.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) {
    step = "bind";
    acceptor_.bind(endpoint, ec);
  }
  // The largest backlog the kernel allows (net.core.somaxconn): a burst of connects must
  // not cost clients SYN retransmits.
  if (!ec) {
    step = "listen";
    acceptor_.listen(net::socket_base::max_listen_connections, ec);
  }
  if (ec) {
    // Closing gets its own error code: reusing `ec` reported the close's success ("cannot
    // listen on ...: Success") instead of why the bind failed.
    beast::error_code ignored;
    acceptor_.close(ignored);
    const std::string shown =
        address.is_v6() ? absl::StrCat("[", host, "]") : (host.empty() ? "0.0.0.0" : host);
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", shown, ":", port, ": ", step, ": ", ec.message()));
  }
  return static_cast<int>(acceptor_.local_endpoint().port());
}

absl::Status HttpServer::Impl::Serve() {
  if (!acceptor_.is_open()) return absl::FailedPreconditionError("HTTP server: not bound");
  served_ = true;
  SetAccepting(true);
  workers_.Start(options_.worker_threads);
  Accept();
  for (int i = 0; i < options_.io_threads; ++i) {
    io_threads_.emplace_back([this] { io_.run(); });
  }
  return absl::OkStatus();
}

void HttpServer::Impl::Accept() {
  acceptor_.async_accept(net::make_strand(io_), [this](beast::error_code ec, tcp::socket socket) {
    OnAccept(ec, std::move(socket));
  });
}

void HttpServer::Impl::OnAccept(beast::error_code ec, tcp::socket socket) {
  if (ec == net::error::operation_aborted || !acceptor_.is_open()) return;
  if (ec) {
    // EMFILE, ENFILE, ENOBUFS, ENOMEM...: the listener is not accepting now. Try again
    // after a pause (the pending connection stays in the backlog); readiness shows it.
    ++accept_errors_;
    SetAccepting(false);
    accept_timer_.expires_after(accept_retry_);
    accept_retry_ = std::min(accept_retry_ * 2, kAcceptRetryCap);
    accept_timer_.async_wait([this](beast::error_code wait_error) {
      if (!wait_error && acceptor_.is_open()) Accept();
    });
    return;
  }
  SetAccepting(true);
  accept_retry_ = kAcceptRetryFirst;
  Admit(std::move(socket));
  Accept();
}

void HttpServer::Impl::Admit(tcp::socket socket) {
  ++accepted_;
  beast::error_code ec;
  const tcp::endpoint peer = socket.remote_endpoint(ec);
  if (ec) return;  // already gone
  socket.set_option(tcp::no_delay(true), ec);
  const std::string address = AddressText(peer);
  const std::string client = ClientKey(address);
  if (stopping()) return;  // closed by the socket's destructor
  std::shared_ptr<Connection> connection;
  std::shared_ptr<Connection> make_room;
  {
    std::lock_guard<std::mutex> lock(registry_mu_);
    const size_t from_client = per_client_.count(client) ? per_client_[client] : 0;
    if (from_client >= limits().max_connections_per_client) {
      Shed(socket, &shed_per_client_);
      return;
    }
    enum class Room { kNone, kIdle, kAwaitingHead, kAnswering } room = Room::kNone;
    if (connections_.size() >= limits().max_connections) {
      // Room is made by closing an idle kept-alive connection, as nginx does, or else the
      // connection that has been stuck the longest: waiting for a complete request head, or
      // writing an answer its client does not read (or draining after it), whichever began
      // first. A client holding connections open without using them, or without reading
      // what it asked for, cannot keep the vendor out, and holding the port costs it a fresh
      // connection every time one is taken back. Oldest across both, not heads first: an
      // attacker whose connections all sit on unread answers, connecting again and again,
      // would otherwise close every vendor connection in the milliseconds before its head.
      // Shed only when every connection is reading a body or waiting for its handler.
      Connection* closed = nullptr;
      const uint64_t head_place = awaiting_head_.OldestPlace();
      const uint64_t answer_place = answering_.OldestPlace();
      if (!idle_.empty()) {
        closed = *idle_.begin();
        idle_.erase(idle_.begin());
        room = Room::kIdle;
        ++idle_closed_for_room_;
      } else if (head_place != 0 && (answer_place == 0 || head_place < answer_place)) {
        closed = awaiting_head_.TakeOldest();
        room = Room::kAwaitingHead;
        ++awaiting_head_closed_for_room_;
      } else if (answer_place != 0) {
        closed = answering_.TakeOldest();
        room = Room::kAnswering;
        ++answering_closed_for_room_;
      } else {
        Shed(socket, &shed_max_connections_);
        return;
      }
      make_room = connections_[closed].lock();
    }
    connection = std::make_shared<Connection>(this, std::move(socket), client, address);
    if (connections_.emplace(connection.get(), connection).second && options_.on_event) {
      options_.on_event(HttpServerEvent::kConnectionOpened);
    }
    ++per_client_[client];
    awaiting_head_.Set(connection.get(), true);
    if (make_room != nullptr) {
      switch (room) {
        case Room::kIdle:
          make_room->CloseIfIdle();
          break;
        case Room::kAwaitingHead:
          make_room->CloseIfAwaitingHead();
          break;
        case Room::kAnswering:
          make_room->CloseIfAnswering();
          break;
        case Room::kNone:
          break;
      }
    }
  }
  connection->Start();
}

// 503 and close, at once: what the client already sent is read (without waiting) so that
// the close is a FIN rather than a reset that could destroy the answer.
void HttpServer::Impl::Shed(tcp::socket& socket, EventCounter* counter) {
  ++*counter;
  const int fd = socket.native_handle();
  char drain[16 * 1024];
  for (int i = 0; i < 4 && ::recv(fd, drain, sizeof(drain), MSG_DONTWAIT) > 0; ++i) {
  }
  ServerResponse response = ErrorResponse(503);
  response.SetHeader("Retry-After", "1");
  std::string out = absl::StrCat("HTTP/1.1 503 ", ReasonPhrase(503), "\r\n");
  for (const auto& [name, value] : response.headers)
    absl::StrAppend(&out, name, ": ", value, "\r\n");
  absl::StrAppend(&out, "Content-Length: ", response.body.size(), "\r\nConnection: close\r\n\r\n",
                  response.body);
  [[maybe_unused]] const ssize_t sent =
      ::send(fd, out.data(), out.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  ::shutdown(fd, SHUT_WR);
  beast::error_code ignored;
  socket.close(ignored);
}

void HttpServer::Impl::Stop() {
  std::lock_guard<std::mutex> once(stop_once_mu_);
  if (stopped_) return;
  stopped_ = true;
  {
    absl::MutexLock lock(&stop_mu_);  // also wakes the Pause()s
    stopping_ = true;
  }
  SetAccepting(false);
  if (!served_) {
    beast::error_code ignored;
    acceptor_.close(ignored);
    return;
  }
  // The listener closes first (on its strand, and before anything else goes on): from
  // here on connections are refused, and no accept completes into a new connection.
  std::promise<void> closed;
  net::post(acceptor_.get_executor(), [this, &closed] {
    beast::error_code ignored;
    acceptor_.close(ignored);
    accept_timer_.cancel();
    closed.set_value();
  });
  closed.get_future().wait();
  std::vector<std::shared_ptr<Connection>> open;
  {
    std::lock_guard<std::mutex> lock(registry_mu_);
    for (auto& [raw, weak] : connections_) {
      if (auto connection = weak.lock()) open.push_back(std::move(connection));
    }
  }
  for (const auto& connection : open) connection->OnStop();
  open.clear();
  {
    // Handlers running finish, and their answers go out (each bounded by write_timeout).
    std::unique_lock<std::mutex> lock(registry_mu_);
    registry_empty_.wait(lock, [this] { return connections_.empty(); });
  }
  work_.reset();
  io_.stop();
  for (std::thread& thread : io_threads_) thread.join();
  io_threads_.clear();
  workers_.StopAndJoin();
}

HttpServerStats HttpServer::Impl::Stats() const {
  HttpServerStats stats;
  {
    std::lock_guard<std::mutex> lock(registry_mu_);
    stats.connections_open = static_cast<int64_t>(connections_.size());
  }
  stats.connections_accepted = accepted_.load();
  stats.shed_max_connections = shed_max_connections_.load();
  stats.shed_per_client = shed_per_client_.load();
  stats.shed_in_flight = shed_in_flight_.load();
  stats.awaiting_head_closed_for_room = awaiting_head_closed_for_room_.load();
  stats.answering_closed_for_room = answering_closed_for_room_.load();
  stats.idle_closed_for_room = idle_closed_for_room_.load();
  stats.head_timeouts = head_timeouts_.load();
  stats.body_timeouts = body_timeouts_.load();
  stats.write_timeouts = write_timeouts_.load();
  stats.head_too_large = head_too_large_.load();
  stats.body_too_large = body_too_large_.load();
  stats.malformed = malformed_.load();
  stats.not_implemented = not_implemented_.load();
  stats.accept_errors = accept_errors_.load();
  stats.accepting = accepting_.load();
  return stats;
}

// --- HttpServer ---

HttpServer::HttpServer(HeadCheck head_check, Handler handler, HttpServerOptions options)
    : impl_(std::make_shared<Impl>(std::move(head_check), std::move(handler), std::move(options))) {
}

HttpServer::~HttpServer() { Stop(); }

absl::StatusOr<int> HttpServer::Bind(const std::string& host, int port) {
  return impl_->Bind(host, port);
}

absl::Status HttpServer::Serve() { return impl_->Serve(); }

void HttpServer::Stop() { impl_->Stop(); }

bool HttpServer::stopping() const { return impl_->stopping(); }

bool HttpServer::Pause(std::chrono::milliseconds duration) const { return impl_->Pause(duration); }

HttpServerStats HttpServer::stats() const { return impl_->Stats(); }

bool HttpServer::accepting() const { return impl_->accepting(); }

uint64_t RaiseOpenFileLimit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return 0;
  if (limit.rlim_cur < limit.rlim_max) {
    rlimit raised = limit;
    raised.rlim_cur = limit.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) limit = raised;
  }
  return static_cast<uint64_t>(limit.rlim_cur);
}

}  // namespace inspection::http
