#ifndef GATEWAY_WEBHOOKS_WEBHOOK_HTTP_SERVER_H_
#define GATEWAY_WEBHOOKS_WEBHOOK_HTTP_SERVER_H_

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

namespace inspection::webhooks {

struct WebhookHttpServerSettings {
  int threads = 16;  // workers; each serves one connection at a time
  // A kept-alive connection with no new request for this long is closed.
  std::chrono::milliseconds keep_alive_timeout{5000};
  // Longest wait for the next bytes of a request, or for the socket to take a write.
  std::chrono::milliseconds io_timeout{10000};
  // A connection whose request body was not read (rejected before reading, or cut off at
  // a limit) is closed after the answer. What the client still sends is read and dropped,
  // up to these bounds, so that it gets to read the answer instead of a TCP reset.
  size_t linger_max_bytes = 8 * 1024 * 1024 + 64 * 1024;
  std::chrono::milliseconds linger_timeout{2000};
};

// The webhook receiver's HTTP/1.1 server: cpp-httplib 0.11.4's request parser and response
// writer, with the connection loop replaced by ours (the technique of
// sandbox/emulator/http_server.cc, whose library this one cannot link), because the stock
// loop cannot do what an Internet-facing receiver needs:
//   - the handler decides whether a body is read at all, and reads it through a receiver
//     that can stop at a size limit; httplib alone buffers chunked bodies without any
//     limit and skips (reads and drops) a too-large Content-Length body before answering;
//   - a connection whose body was not read is closed after the answer (with
//     `Connection: close`), never parsed further, and drained so the answer arrives;
//   - a bodiless POST counts as Content-Length 0 (RFC 9112 6.3), where httplib would wait
//     for the end of the connection;
//   - Stop() wakes idle keep-alive connections at once instead of after their timeout;
//   - the listen backlog is raised from httplib's 5 and TCP_NODELAY is set.
// Errors httplib produces itself (malformed request line...) and exceptions get a small
// JSON body.
//
// Thread-safety: Bind(), Serve() and Stop() from the owner; Stop() is idempotent and may
// race with another Stop(). The handler runs on worker threads, concurrently with itself.
class WebhookHttpServer {
 public:
  // `read_body(receiver)` reads the request body (decoded: chunked framing and any
  // Content-Encoding removed) into `receiver`, one piece at a time. False when there is
  // no body to read (GET...), the receiver returned false, or the body could not be read
  // (malformed, connection ended, timeout, Stop()). A body that the handler does not read
  // completely ends the connection after the answer.
  using Handler = std::function<void(const httplib::Request& request, httplib::Response& response,
                                     const httplib::ContentReader& read_body)>;

  WebhookHttpServer(Handler handler, WebhookHttpServerSettings settings);
  ~WebhookHttpServer();  // Stop()
  WebhookHttpServer(const WebhookHttpServer&) = delete;
  WebhookHttpServer& operator=(const WebhookHttpServer&) = delete;

  // Binds host:port (0 = a free port chosen by the OS) and returns the bound port.
  // Connections queue until Serve(). Call once. Unavailable when it cannot be bound.
  absl::StatusOr<int> Bind(const std::string& host, int port);

  // Starts the workers; returns once connections are being accepted. Call once, after
  // Bind().
  absl::Status Serve();

  // Stops accepting, wakes idle connections (they close), lets answers being computed and
  // written finish, and joins every thread. A body still being received is cut off (its
  // read fails). Idempotent.
  void Stop();

  bool stopping() const;

 private:
  class Server;  // the httplib::Server subclass with our connection loop

  const WebhookHttpServerSettings settings_;
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

}  // namespace inspection::webhooks

#endif  // GATEWAY_WEBHOOKS_WEBHOOK_HTTP_SERVER_H_
