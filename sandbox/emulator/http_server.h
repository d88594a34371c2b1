#ifndef SANDBOX_EMULATOR_HTTP_SERVER_H_
#define SANDBOX_EMULATOR_HTTP_SERVER_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace httplib {
struct Request;
struct Response;
}  // namespace httplib

namespace inspection::sandbox {

// The emulator's HTTP/1.1 server: cpp-httplib's request parser and response writer, with
// the connection loop replaced by our own (see the .cc) so that the emulator controls
// what a vendor fault needs and httplib 0.11.4 cannot do:
//   - a GET request's body is read (httplib ignores it; testwebhook may carry one);
//   - a handler can end its connection with a TCP reset instead of an answer;
//   - Stop() wakes idle keep-alive connections at once instead of after their timeout;
//   - the listen backlog is raised from httplib's 5 (a burst of connects would otherwise
//     cost clients SYN retransmits), TCP_NODELAY is set, keep-alive is long.
// One worker thread per open connection (`threads` of them).
//
// Thread-safety: Start() and Stop() from one owner thread; the handler runs on worker
// threads, concurrently with itself; ResetConnection() and Pause() from inside it.
class HttpServer {
 public:
  using Handler = std::function<void(const httplib::Request&, httplib::Response&)>;

  explicit HttpServer(Handler handler);
  ~HttpServer();  // Stop()
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds host:port (0 = any free port) and returns the bound port. Connections queue
  // until Serve(). Call once. Unavailable when the address cannot be bound.
  absl::StatusOr<int> Bind(const std::string& host, int port);
  // Starts serving with `threads` workers; returns once connections are accepted. Call
  // once, after Bind().
  absl::Status Serve(int threads);

  // Stops accepting, cuts Pause()s short, lets answers being written finish, closes idle
  // connections and joins every thread. Idempotent.
  void Stop();

  bool stopping() const;

  // From inside the handler: the connection serving the current request is reset (TCP
  // RST) instead of being answered; whatever the handler puts in the response is dropped.
  static void ResetConnection();

  // Waits `duration`, or less when Stop() is called. False when cut short by Stop().
  bool Pause(std::chrono::milliseconds duration) const;

 private:
  class Server;  // the httplib::Server subclass

  std::unique_ptr<Server> server_;
  std::thread listener_;
  int wake_read_fd_ = -1;  // readable once Stop() has begun: wakes every connection
  int wake_write_fd_ = -1;

  mutable absl::Mutex mu_;
  bool serving_ ABSL_GUARDED_BY(mu_) = false;
  bool listener_done_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace inspection::sandbox

#endif  // SANDBOX_EMULATOR_HTTP_SERVER_H_
