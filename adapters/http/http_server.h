#ifndef ADAPTERS_HTTP_HTTP_SERVER_H_
#define ADAPTERS_HTTP_HTTP_SERVER_H_

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace httplib {
struct Request;
struct Response;
class ContentReader;
}  // namespace httplib

namespace inspection::http {

struct HttpServerSettings {
  int threads = 16;  // workers; each serves one connection at a time
  // A kept-alive connection with no new request for this long is closed.
  std::chrono::milliseconds keep_alive_timeout{5000};
  // Longest wait for the next bytes of a request, or for the socket to take a write.
  std::chrono::milliseconds io_timeout{10000};
  // A connection whose request body was not read (rejected before reading, or cut off at
  // a limit) is closed after the answer. What the client still sends is read and dropped,
  // up to these bounds, so that it gets to read the answer instead of a TCP reset. Set
  // the byte bound a little above the largest body the handler accepts.
  size_t linger_max_bytes = 8 * 1024 * 1024 + 64 * 1024;
  std::chrono::milliseconds linger_timeout{2000};
  // Fills the body of an error answer (status >= 400) that has none, mostly those httplib
  // produces itself (400 on a malformed request line, 414...). Unset: they have no body.
  std::function<void(httplib::Response& response)> error_body;
  // A handler that throws (std::bad_alloc...) is answered 500, without the exception's
  // text (httplib alone would put it in a header); this fills that answer's body. Unset:
  // the 500 has no body (unless `error_body` gives it one).
  std::function<void(httplib::Response& response)> exception_body;
};

// An HTTP/1.1 server: cpp-httplib 0.11.4's request parser and response writer, with the
// connection loop replaced by ours, because the stock loop cannot do what the webhook
// receiver (Internet-facing) and the vendor emulator need:
//   - the handler decides whether a body is read at all, and reads it through a receiver
//     that can stop at a size limit; httplib alone buffers chunked bodies without any
//     limit and skips (reads and drops) a too-large Content-Length body before answering;
//   - the body of any method can be read, GET's too (httplib leaves it in the stream,
//     where it would be parsed as the next request; the vendor's testwebhook may carry
//     one);
//   - a connection whose body was not read is closed after the answer (with
//     `Connection: close`), never parsed further, and drained so the answer arrives;
//   - a bodiless POST counts as Content-Length 0 (RFC 9112 6.3), where httplib would wait
//     for the end of the connection;
//   - a handler can end its connection with a TCP reset instead of an answer, and wait in
//     a Pause() that Stop() cuts short (the emulator's vendor faults);
//   - Stop() wakes idle keep-alive connections at once instead of after their timeout;
//   - the listen backlog is raised from httplib's 5 (a burst of connects would otherwise
//     cost clients SYN retransmits) and TCP_NODELAY is set;
//   - keep-alive is bounded by the idle timeout, not by httplib's 5 requests.
// Answers httplib produces itself and the 500 of a handler that threw can get a body of
// the owner's format (settings).
//
// Thread-safety: Bind(), Serve() and Stop() from the owner; Stop() is idempotent and may
// race with another Stop(). The handler runs on worker threads, concurrently with itself;
// ResetConnection() from inside it; Pause() from any thread.
class HttpServer {
 public:
  // `read_body(receiver)` reads the request body (decoded: chunked framing and any
  // Content-Encoding removed, see below) into `receiver`, one piece at a time, and is true
  // once all of it went in; at once when the request has no body. False when the
  // receiver returned false, or the body could not be read (malformed or invalid
  // Content-Length, multipart/form-data, connection ended, timeout, Stop()). Call it at
  // most once: later calls are false. A body that the handler does not read completely
  // ends the connection after the answer.
  // POST, PUT, PATCH and DELETE bodies are read by httplib (chunked, Content-Encoding
  // undone); the body of other methods (GET, HEAD, OPTIONS) by us, with Content-Length
  // framing only: a chunked one cannot be read.
  using Handler = std::function<void(const httplib::Request& request, httplib::Response& response,
                                     const httplib::ContentReader& read_body)>;

  HttpServer(Handler handler, HttpServerSettings settings);
  ~HttpServer();  // Stop()
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds host:port (0 = a free port chosen by the OS) and returns the bound port.
  // Connections queue until Serve(). Call once. Unavailable when it cannot be bound.
  absl::StatusOr<int> Bind(const std::string& host, int port);

  // Starts the workers (settings.threads); returns once connections are being accepted.
  // Call once, after Bind().
  absl::Status Serve();

  // Stops accepting, wakes idle connections (they close), cuts Pause()s short, lets
  // answers being computed and written finish, and joins every thread. A body still being
  // received is cut off (its read fails). Idempotent.
  void Stop();

  bool stopping() const;

  // From inside the handler: the connection serving the current request is reset (TCP
  // RST) instead of being answered; whatever the handler puts in the response is dropped.
  static void ResetConnection();

  // Waits `duration`, or less when Stop() is called. False when cut short by Stop().
  bool Pause(std::chrono::milliseconds duration) const;

 private:
  class Server;  // the httplib::Server subclass with our connection loop

  const HttpServerSettings settings_;
  std::unique_ptr<Server> server_;
  std::thread listener_;
  int wake_read_fd_ = -1;  // readable once Stop() has begun: wakes every connection
  int wake_write_fd_ = -1;

  absl::Mutex stop_mu_;  // held for all of Stop(), so a second caller waits for the first
  mutable absl::Mutex mu_;
  bool serving_ ABSL_GUARDED_BY(mu_) = false;
  bool listener_done_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool stopped_ ABSL_GUARDED_BY(stop_mu_) = false;
};

}  // namespace inspection::http

#endif  // ADAPTERS_HTTP_HTTP_SERVER_H_
