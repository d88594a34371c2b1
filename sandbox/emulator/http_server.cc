#include "sandbox/emulator/http_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

#include <httplib.h>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace inspection::sandbox {
namespace {

// httplib's defaults are 5 s for reads, writes and idle keep-alive; 5 requests per
// connection, which makes clients reconnect mid-test. A test or a gateway keeps its
// connections for as long as it likes.
constexpr size_t kKeepAliveMaxCount = 100000;
constexpr int kKeepAliveTimeoutMs = 30000;
constexpr int kReadTimeoutMs = 10000;
constexpr int kWriteTimeoutMs = 10000;
// Beyond these a request head is left to httplib (which refuses it), and a GET body ends
// the connection.
constexpr size_t kMaxHeadBytes = 64 * 1024;
constexpr size_t kMaxBodyBytes = 16 * 1024 * 1024;
// The kernel caps it at net.core.somaxconn.
constexpr int kListenBacklog = 4096;

// Per-connection facts a handler may change; the worker serving the connection owns it.
struct ConnectionState {
  bool reset = false;
};

// The connection whose request the current worker thread is handling. httplib calls the
// handler synchronously on the worker that runs the connection loop, so a thread_local is
// exactly "this request's connection".
thread_local ConnectionState* current_connection = nullptr;

// Methods whose body httplib 0.11.4 reads itself (its detail::expect_content); for every
// other method it leaves the body in the stream, where it would be parsed as the next
// request.
bool HttplibReadsBody(absl::string_view method) {
  return method == "POST" || method == "PUT" || method == "PATCH" || method == "PRI" ||
         method == "DELETE";
}

// An httplib::Stream over one accepted socket, with its own read buffer, so that the
// connection loop can look at a request head before httplib parses it. Reads also wake
// up when the server stops (the wake pipe becomes readable); writes do not, so answers
// being written when Stop() begins still go out.
class ConnectionStream final : public httplib::Stream {
 public:
  ConnectionStream(int fd, int wake_fd, ConnectionState* state)
      : fd_(fd), wake_fd_(wake_fd), state_(state) {}

  bool is_readable() const override {
    return offset_ < buffer_.size() || WaitReadable(kReadTimeoutMs);
  }

  bool is_writable() const override { return !state_->reset && WaitWritable(); }

  ssize_t read(char* ptr, size_t size) override {
    if (offset_ == buffer_.size()) {
      const ssize_t n = Fill(kReadTimeoutMs);
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
    if (state_->reset) return -1;
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

  // Waits for the first byte of the next request. False on idle timeout or Stop().
  bool WaitForRequest() const {
    return offset_ < buffer_.size() || WaitReadable(kKeepAliveTimeoutMs);
  }

  // Buffers the whole head of the next request, and smooths over two gaps of httplib
  // 0.11.4: for a method whose body httplib does not read (GET...), reads the body
  // (Content-Length) and takes it out of the stream into `body`; for one whose body it
  // does read but that declares no length (`curl -X POST` without data), declares
  // `Content-Length: 0`, which is what no length means on a request (RFC 9112 6.3) and
  // httplib would otherwise answer 400. False when the connection ended first.
  bool PrepareRequest(std::string* body) {
    size_t head_end;
    while ((head_end = buffer_.find("\r\n\r\n", offset_)) == std::string::npos) {
      if (buffer_.size() - offset_ > kMaxHeadBytes) return true;  // httplib refuses it
      if (Fill(kReadTimeoutMs) <= 0) return false;
    }
    const absl::string_view head(buffer_.data() + offset_, head_end - offset_);
    const absl::string_view method = head.substr(0, head.find(' '));
    bool has_length = false;
    bool chunked = false;
    size_t content_length = 0;
    for (absl::string_view line : absl::StrSplit(head, "\r\n")) {
      const size_t colon = line.find(':');
      if (colon == absl::string_view::npos) continue;
      const absl::string_view name = absl::StripAsciiWhitespace(line.substr(0, colon));
      const absl::string_view value = absl::StripAsciiWhitespace(line.substr(colon + 1));
      if (absl::EqualsIgnoreCase(name, "transfer-encoding")) chunked = true;
      if (absl::EqualsIgnoreCase(name, "content-length")) {
        if (!absl::SimpleAtoi(value, &content_length)) return false;
        has_length = true;
      }
    }
    if (HttplibReadsBody(method)) {
      if (!has_length && !chunked) buffer_.insert(head_end + 2, "Content-Length: 0\r\n");
      return true;
    }
    if (content_length == 0) return true;
    if (content_length > kMaxBodyBytes) return false;
    const size_t body_start = head_end + 4;
    while (buffer_.size() < body_start + content_length) {
      if (Fill(kReadTimeoutMs) <= 0) return false;
    }
    body->assign(buffer_, body_start, content_length);
    buffer_.erase(body_start, content_length);
    return true;
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
      const int n = ::poll(&fd, 1, kWriteTimeoutMs);
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
  ConnectionState* const state_;
  std::string buffer_;
  size_t offset_ = 0;
};

}  // namespace

// httplib::Server with our connection loop. httplib's accept loop hands each accepted
// socket to process_and_close_socket() on a pool thread; its parser and writer are
// reached through the protected process_request(), once per request.
class HttpServer::Server final : public httplib::Server {
 public:
  Server(HttpServer* owner, int wake_fd) : owner_(owner), wake_fd_(wake_fd) {}

 protected:
  bool process_and_close_socket(socket_t sock) override {
    const int one = 1;
    ::setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    ConnectionState state;
    current_connection = &state;
    ConnectionStream stream(sock, wake_fd_, &state);
    bool ok = false;
    for (size_t remaining = kKeepAliveMaxCount; remaining > 0; --remaining) {
      if (!stream.WaitForRequest()) break;
      std::string body;
      if (!stream.PrepareRequest(&body)) break;
      const bool close_connection = remaining == 1 || owner_->stopping();
      bool connection_closed = false;
      ok = process_request(stream, close_connection, connection_closed,
                           [&body](httplib::Request& request) {
                             if (!body.empty()) request.body = std::move(body);
                           });
      if (!ok || connection_closed || close_connection || state.reset) break;
    }
    current_connection = nullptr;
    if (state.reset) {
      // Closing with a zero linger time sends RST instead of FIN.
      const linger abort_close{1, 0};
      ::setsockopt(sock, SOL_SOCKET, SO_LINGER, &abort_close, sizeof(abort_close));
    } else {
      ::shutdown(sock, SHUT_RDWR);
    }
    ::close(sock);
    return ok;
  }

 private:
  HttpServer* const owner_;
  const int wake_fd_;
};

HttpServer::HttpServer(Handler handler) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) == 0) {
    wake_read_fd_ = fds[0];
    wake_write_fd_ = fds[1];
  }
  server_ = std::make_unique<Server>(this, wake_read_fd_);
  const char* kAnyPath = R"([\s\S]*)";
  auto serve = [handler = std::move(handler)](const httplib::Request& request,
                                              httplib::Response& response) {
    handler(request, response);
  };
  server_->Get(kAnyPath, serve);
  server_->Post(kAnyPath, serve);
  server_->Put(kAnyPath, serve);
  server_->Patch(kAnyPath, serve);
  server_->Delete(kAnyPath, serve);
  server_->Options(kAnyPath, serve);
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
  server.set_keep_alive_max_count(kKeepAliveMaxCount);
  server.set_keep_alive_timeout(kKeepAliveTimeoutMs / 1000);
  server.set_payload_max_length(kMaxBodyBytes);
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

absl::Status HttpServer::Serve(int threads) {
  // httplib builds the pool from the listener thread once it runs (stop() works from then
  // on) and all workers exist when the pool's constructor returns: the "ready" signal
  // httplib 0.11.4 lacks.
  const size_t pool_size = static_cast<size_t>(threads > 0 ? threads : 1);
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
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return;
    stopped_ = true;
    stopping_ = true;
  }
  // Wakes every connection waiting for a request (and Pause()rs, through mu_ above):
  // idle keep-alive connections close at once.
  if (wake_write_fd_ >= 0) {
    const char byte = 1;
    [[maybe_unused]] const ssize_t written = ::write(wake_write_fd_, &byte, 1);
  }
  if (!listener_.joinable()) return;
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

}  // namespace inspection::sandbox
