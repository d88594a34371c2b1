#include "adapters/http/http_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <exception>
#include <limits>
#include <memory>
#include <string>
#include <utility>

#include <httplib.h>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace inspection::http {
namespace {

// httplib's default is 5 requests per connection, which makes a client reconnect every
// few requests; the idle timeout (settings) is what bounds a connection instead.
constexpr size_t kMaxRequestsPerConnection = 100000;
// A request head beyond this is not examined; the connection then ends after the answer.
// (httplib itself refuses lines over 8 KiB.)
constexpr size_t kMaxHeadBytes = 64 * 1024;
// The kernel caps it at net.core.somaxconn.
constexpr int kListenBacklog = 4096;

class ConnectionStream;

// What the connection loop knows about the connection and the request being served;
// owned by the worker serving the connection. The request's fields are set by
// ConnectionStream::PrepareRequest().
struct ConnectionState {
  ConnectionStream* stream = nullptr;
  // The request declared a body (or framing we could not read) that has not been read
  // completely: the connection cannot carry another request and ends after the answer.
  bool body_unread = false;
  // read_body has been called: the body is gone (read, or abandoned part way).
  bool body_read_started = false;
  // A Content-Length that is not a number, or several that differ: the body's end is
  // unknown, so it cannot be read.
  bool length_invalid = false;
  bool has_transfer_encoding = false;
  uint64_t content_length = 0;  // valid unless length_invalid; 0 when none was declared
  // The handler called ResetConnection(): nothing more is written, the socket is reset.
  bool reset = false;
};

// The connection whose request the current worker thread is serving. httplib calls the
// handler, the post-routing handler and the content reader synchronously on the worker
// that runs the connection loop, so a thread_local is exactly "this request's connection".
thread_local ConnectionState* current_connection = nullptr;

int ToPollTimeout(std::chrono::milliseconds duration) {
  return static_cast<int>(
      std::clamp<int64_t>(duration.count(), 0, std::numeric_limits<int>::max()));
}

// Methods whose body httplib 0.11.4 reads (its detail::expect_content); for every other
// method it leaves the body in the stream, where it would be parsed as the next request.
bool HttplibReadsBody(absl::string_view method) {
  return method == "POST" || method == "PUT" || method == "PATCH" || method == "PRI" ||
         method == "DELETE";
}

// An httplib::Stream over one accepted socket with its own read buffer, so that the
// connection loop can look at a request head before httplib parses it. Reads wake up when
// the server stops (the wake pipe becomes readable); writes do not, so answers being
// written when Stop() begins still go out.
class ConnectionStream final : public httplib::Stream {
 public:
  ConnectionStream(int fd, int wake_fd, const HttpServerSettings& settings,
                   const ConnectionState& state)
      : fd_(fd), wake_fd_(wake_fd), settings_(settings), state_(state) {}

  bool is_readable() const override {
    return offset_ < buffer_.size() || WaitReadable(ToPollTimeout(settings_.io_timeout));
  }

  bool is_writable() const override { return !state_.reset && WaitWritable(); }

  ssize_t read(char* ptr, size_t size) override {
    if (offset_ == buffer_.size()) {
      const ssize_t n = Fill(ToPollTimeout(settings_.io_timeout));
      if (n <= 0) return n;
    }
    const size_t count = std::min(size, buffer_.size() - offset_);
    std::memcpy(ptr, buffer_.data() + offset_, count);
    offset_ += count;
    if (offset_ == buffer_.size()) {
      buffer_.clear();
      offset_ = 0;
    }
    return static_cast<ssize_t>(count);
  }

  ssize_t write(const char* ptr, size_t size) override {
    // A reset connection answers nothing: httplib's writes fail, the loop then resets it.
    if (state_.reset) return -1;
    if (!WaitWritable()) return -1;
    const ssize_t n = ::send(fd_, ptr, size, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) return 0;  // httplib's write loop tries again
    return n;
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage address{};
    socklen_t length = sizeof(address);
    if (::getpeername(fd_, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
      Describe(address, &ip, &port);
    }
  }

  void get_local_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage address{};
    socklen_t length = sizeof(address);
    if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
      Describe(address, &ip, &port);
    }
  }

  socket_t socket() const override { return fd_; }

  // Waits for the first byte of the next request. False on idle timeout, EOF or Stop().
  bool WaitForRequest() const {
    return offset_ < buffer_.size() || WaitReadable(ToPollTimeout(settings_.keep_alive_timeout));
  }

  // Buffers the whole head of the next request and records in `state` how its body is
  // framed. A POST (or other method whose body httplib reads) without any length gets
  // `Content-Length: 0`: that is what no length means on a request (RFC 9112 6.3), and
  // httplib would otherwise read until the connection ends. False when the connection
  // ended (or timed out) first.
  bool PrepareRequest(ConnectionState* state) {
    state->body_unread = false;
    state->body_read_started = false;
    state->length_invalid = false;
    state->has_transfer_encoding = false;
    state->content_length = 0;
    size_t head_end;
    while ((head_end = buffer_.find("\r\n\r\n", offset_)) == std::string::npos) {
      if (buffer_.size() - offset_ > kMaxHeadBytes) {
        // Framing unknown: answer (httplib refuses it), then end.
        state->body_unread = true;
        state->length_invalid = true;
        return true;
      }
      if (Fill(ToPollTimeout(settings_.io_timeout)) <= 0) return false;
    }
    const absl::string_view head(buffer_.data() + offset_, head_end - offset_);
    const absl::string_view method = head.substr(0, head.find(' '));
    bool has_length = false;
    for (absl::string_view line : absl::StrSplit(head, "\r\n")) {
      const size_t colon = line.find(':');
      if (colon == absl::string_view::npos) continue;
      const absl::string_view name = absl::StripAsciiWhitespace(line.substr(0, colon));
      const absl::string_view value = absl::StripAsciiWhitespace(line.substr(colon + 1));
      if (absl::EqualsIgnoreCase(name, "transfer-encoding")) state->has_transfer_encoding = true;
      if (absl::EqualsIgnoreCase(name, "content-length")) {
        // Several Content-Length headers are one length only if they all agree.
        uint64_t length = 0;
        if (!absl::SimpleAtoi(value, &length) || (has_length && length != state->content_length)) {
          state->length_invalid = true;
        }
        state->content_length = length;
        has_length = true;
      }
    }
    state->body_unread = state->has_transfer_encoding || state->length_invalid ||
                         (has_length && state->content_length != 0);
    if (HttplibReadsBody(method) && !has_length && !state->has_transfer_encoding) {
      buffer_.insert(head_end + 2, "Content-Length: 0\r\n");
    }
    return true;
  }

  // After the last answer on a connection whose request body was not read: tells the
  // client we are done (FIN), then reads and drops what it still sends, within bounds.
  // Closing with unread data would make the kernel send a reset, and a client still
  // sending its body would often lose our answer with it.
  void Linger() {
    ::shutdown(fd_, SHUT_WR);
    buffer_.clear();
    offset_ = 0;
    const auto deadline = std::chrono::steady_clock::now() + settings_.linger_timeout;
    size_t dropped = 0;
    char chunk[16 * 1024];
    while (dropped < settings_.linger_max_bytes) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0 || !WaitReadable(ToPollTimeout(left))) return;
      const ssize_t n = ::recv(fd_, chunk, sizeof(chunk), 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return;
      dropped += static_cast<size_t>(n);
    }
  }

 private:
  static void Describe(const sockaddr_storage& address, std::string* ip, int* port) {
    char text[INET6_ADDRSTRLEN] = {};
    if (address.ss_family == AF_INET) {
      const auto* v4 = reinterpret_cast<const sockaddr_in*>(&address);
      ::inet_ntop(AF_INET, &v4->sin_addr, text, sizeof(text));
      *port = ntohs(v4->sin_port);
    } else if (address.ss_family == AF_INET6) {
      const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&address);
      ::inet_ntop(AF_INET6, &v6->sin6_addr, text, sizeof(text));
      *port = ntohs(v6->sin6_port);
    }
    *ip = text;
  }

  // Readable within `timeout_ms`, and the server is not stopping.
  bool WaitReadable(int timeout_ms) const {
    pollfd fds[2] = {{fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    for (;;) {
      const int n = ::poll(fds, 2, timeout_ms);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0 || fds[1].revents != 0) return false;
      return fds[0].revents != 0;
    }
  }

  bool WaitWritable() const {
    pollfd fd = {fd_, POLLOUT, 0};
    for (;;) {
      const int n = ::poll(&fd, 1, ToPollTimeout(settings_.io_timeout));
      if (n < 0 && errno == EINTR) continue;
      return n > 0 && (fd.revents & POLLOUT) != 0;
    }
  }

  // Appends what the socket has to the buffer: > 0 bytes read, 0 at EOF, -1 on error,
  // timeout or Stop().
  ssize_t Fill(int timeout_ms) {
    if (!WaitReadable(timeout_ms)) return -1;
    char chunk[16 * 1024];
    ssize_t n;
    do {
      n = ::recv(fd_, chunk, sizeof(chunk), 0);
    } while (n < 0 && errno == EINTR);
    if (n > 0) {
      if (offset_ > 0 && offset_ == buffer_.size()) {
        buffer_.clear();
        offset_ = 0;
      }
      buffer_.append(chunk, static_cast<size_t>(n));
    }
    return n;
  }

  const int fd_;
  const int wake_fd_;
  const HttpServerSettings& settings_;
  const ConnectionState& state_;
  std::string buffer_;
  size_t offset_ = 0;
};

// The body of a request whose method httplib does not read it for (GET...), which the
// stream is positioned at when the handler runs: httplib reads the head byte by byte.
// Content-Length framing only.
bool ReadBodyHttplibLeaves(ConnectionState* state, const httplib::ContentReceiver& receiver) {
  if (state->has_transfer_encoding) return false;
  uint64_t left = state->content_length;
  char chunk[16 * 1024];
  while (left > 0) {
    const ssize_t n =
        state->stream->read(chunk, static_cast<size_t>(std::min<uint64_t>(left, sizeof(chunk))));
    if (n <= 0) return false;
    left -= static_cast<uint64_t>(n);
    if (!receiver(chunk, static_cast<size_t>(n))) return false;
  }
  return true;
}

// read_body for the handler (see the header). `httplib_reader` is httplib's reader for the
// methods whose body it reads, null for the others.
bool ReadBody(const httplib::Request& request, const httplib::ContentReader* httplib_reader,
              httplib::ContentReceiver receiver) {
  ConnectionState* state = current_connection;
  if (state == nullptr || state->body_read_started) return false;
  state->body_read_started = true;
  if (state->length_invalid) return false;
  // httplib 0.11.4 would hand a multipart body to the empty multipart callback
  // (std::bad_function_call) when read through the plain reader.
  if (request.is_multipart_form_data()) return false;
  if (httplib_reader != nullptr) {
    if (!(*httplib_reader)(std::move(receiver))) return false;
  } else if (!ReadBodyHttplibLeaves(state, receiver)) {
    return false;
  }
  state->body_unread = false;
  return true;
}

}  // namespace

// httplib::Server with our connection loop. httplib's accept loop hands each accepted
// socket to process_and_close_socket() on a pool thread; its parser and writer are
// reached through the protected process_request(), once per request.
class HttpServer::Server final : public httplib::Server {
 public:
  explicit Server(HttpServer* owner) : owner_(owner) {}

  // Closes a bound socket that was never served: httplib's stop() only closes it while
  // the listener runs.
  void CloseUnservedSocket() {
    const socket_t sock = svr_sock_.exchange(INVALID_SOCKET);
    if (sock != INVALID_SOCKET) ::close(sock);
  }

 private:
  bool process_and_close_socket(socket_t sock) override {
    const int one = 1;
    ::setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    ConnectionState state;
    ConnectionStream stream(sock, owner_->wake_read_fd_, owner_->settings_, state);
    state.stream = &stream;
    current_connection = &state;
    bool ok = false;
    for (size_t served = 0; served < kMaxRequestsPerConnection; ++served) {
      if (!stream.WaitForRequest()) break;
      if (!stream.PrepareRequest(&state)) break;
      const bool close_connection = served + 1 == kMaxRequestsPerConnection || owner_->stopping();
      bool connection_closed = false;
      ok = process_request(stream, close_connection, connection_closed, [](httplib::Request&) {});
      if (!ok || connection_closed || close_connection || state.body_unread || state.reset) break;
    }
    current_connection = nullptr;
    if (state.reset) {
      // Closing with a zero linger time sends RST instead of FIN.
      const linger abort_close{1, 0};
      ::setsockopt(sock, SOL_SOCKET, SO_LINGER, &abort_close, sizeof(abort_close));
    } else if (state.body_unread) {
      stream.Linger();
    } else {
      ::shutdown(sock, SHUT_RDWR);
    }
    ::close(sock);
    return ok;
  }

  HttpServer* const owner_;
};

HttpServer::HttpServer(Handler handler, HttpServerSettings settings)
    : settings_(std::move(settings)) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) == 0) {
    wake_read_fd_ = fds[0];
    wake_write_fd_ = fds[1];
  }
  server_ = std::make_unique<Server>(this);
  auto shared_handler = std::make_shared<const Handler>(std::move(handler));
  const char* kAnyPath = R"([\s\S]*)";
  // Refused: read_body is for the whole body.
  const httplib::ContentReader::MultipartReader no_multipart =
      [](httplib::MultipartContentHeader, httplib::ContentReceiver) { return false; };

  // Methods whose body httplib reads get its content-reader route, which calls the handler
  // before anything of the body is read.
  auto httplib_reads_body = [shared_handler, no_multipart](const httplib::Request& request,
                                                           httplib::Response& response,
                                                           const httplib::ContentReader& reader) {
    const httplib::ContentReader read_body(
        [&request, &reader](httplib::ContentReceiver receiver) {
          return ReadBody(request, &reader, std::move(receiver));
        },
        no_multipart);
    (*shared_handler)(request, response, read_body);
  };
  // httplib never reads a body on these: the handler reads it from our stream.
  auto we_read_body = [shared_handler, no_multipart](const httplib::Request& request,
                                                     httplib::Response& response) {
    const httplib::ContentReader read_body(
        [&request](httplib::ContentReceiver receiver) {
          return ReadBody(request, nullptr, std::move(receiver));
        },
        no_multipart);
    (*shared_handler)(request, response, read_body);
  };
  server_->Post(kAnyPath, httplib_reads_body);
  server_->Put(kAnyPath, httplib_reads_body);
  server_->Patch(kAnyPath, httplib_reads_body);
  server_->Delete(kAnyPath, httplib_reads_body);
  server_->Get(kAnyPath, we_read_body);  // HEAD too
  server_->Options(kAnyPath, we_read_body);

  // httplib calls this after its own response headers are set and before writing them:
  // the last moment to tell the client that this connection will not take another request.
  server_->set_post_routing_handler([](const httplib::Request&, httplib::Response& response) {
    if (current_connection == nullptr || !current_connection->body_unread) return;
    response.headers.erase("Keep-Alive");
    if (!response.has_header("Connection")) response.set_header("Connection", "close");
  });
  if (settings_.error_body) {
    // Answers httplib produces itself (400 on a malformed request, 414...) get a body of
    // the owner's format; answers that have one are left alone.
    server_->set_error_handler(httplib::Server::HandlerWithResponse(
        [error_body = settings_.error_body](const httplib::Request&, httplib::Response& response) {
          if (!response.body.empty() || response.content_provider_) {
            return httplib::Server::HandlerResponse::Unhandled;
          }
          error_body(response);
          return httplib::Server::HandlerResponse::Handled;
        }));
  }
  // A handler that throws answers 500 without details; httplib would otherwise put the
  // exception's text in a header.
  server_->set_exception_handler(
      [exception_body = settings_.exception_body](const httplib::Request&,
                                                  httplib::Response& response, std::exception_ptr) {
        response.status = 500;
        response.body.clear();
        response.headers.erase("Content-Type");
        if (exception_body) exception_body(response);
      });
}

HttpServer::~HttpServer() {
  Stop();
  if (wake_read_fd_ >= 0) ::close(wake_read_fd_);
  if (wake_write_fd_ >= 0) ::close(wake_write_fd_);
}

absl::StatusOr<int> HttpServer::Bind(const std::string& host, int port) {
  if (wake_read_fd_ < 0) return absl::InternalError("cannot create the server's wake pipe");
  httplib::Server& server = *server_;
  server.set_tcp_nodelay(true);
  // Only the Keep-Alive response header reads these (our loop applies the limits).
  server.set_keep_alive_max_count(kMaxRequestsPerConnection);
  server.set_keep_alive_timeout(std::max<time_t>(1, settings_.keep_alive_timeout.count() / 1000));
  int listen_fd = -1;
  // Replacing the default socket options is the only way to learn the listening socket
  // (to raise its backlog below); SO_REUSEADDR is what the default set too.
  server.set_socket_options([&listen_fd](int fd) {
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    listen_fd = fd;
  });
  int bound = -1;
  if (port == 0) {
    bound = server.bind_to_any_port(host);
  } else if (server.bind_to_port(host, port)) {
    bound = port;
  }
  if (bound <= 0 || listen_fd < 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", host, ":", port));
  }
  // httplib listens with a backlog of 5 (baked into the Debian .so): a burst of connects
  // overflows it and the kernel drops SYNs, costing clients a 1 s retransmit. listen() on
  // a listening socket only updates its backlog.
  ::listen(listen_fd, kListenBacklog);
  return bound;
}

absl::Status HttpServer::Serve() {
  // httplib builds the pool from the listener thread once it runs (stop() works from then
  // on), and all workers exist when the pool's constructor returns: the "ready" signal
  // httplib 0.11.4 lacks.
  const size_t pool_size = static_cast<size_t>(std::max(1, settings_.threads));
  server_->new_task_queue = [this, pool_size] {
    auto* pool = new httplib::ThreadPool(pool_size);
    absl::MutexLock lock(&mu_);
    serving_ = true;
    return pool;
  };
  listener_ = std::thread([this] {
    server_->listen_after_bind();
    absl::MutexLock lock(&mu_);
    listener_done_ = true;
  });
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](HttpServer* self) { return self->serving_ || self->listener_done_; }, this));
  if (!serving_) return absl::UnavailableError("the HTTP server stopped while starting");
  return absl::OkStatus();
}

void HttpServer::Stop() {
  absl::MutexLock stop_lock(&stop_mu_);
  if (stopped_) return;
  stopped_ = true;
  {
    // Also wakes the Pause()s, which wait on mu_ for stopping_.
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  // Wakes every connection waiting for a request (or lingering): they close at once.
  if (wake_write_fd_ >= 0) {
    const char byte = 1;
    [[maybe_unused]] const ssize_t written = ::write(wake_write_fd_, &byte, 1);
  }
  if (!listener_.joinable()) {
    server_->CloseUnservedSocket();
    return;
  }
  // Closes the listening socket; the listener then joins the pool, whose workers finish
  // the answer they are writing and leave their connection loop.
  server_->stop();
  listener_.join();
}

bool HttpServer::stopping() const {
  absl::MutexLock lock(&mu_);
  return stopping_;
}

void HttpServer::ResetConnection() {
  if (current_connection != nullptr) current_connection->reset = true;
}

bool HttpServer::Pause(std::chrono::milliseconds duration) const {
  absl::MutexLock lock(&mu_);
  return !mu_.AwaitWithTimeout(absl::Condition(&stopping_), absl::FromChrono(duration));
}

}  // namespace inspection::http
