#ifndef TESTS_SUPPORT_RAW_TCP_SERVER_H_
#define TESTS_SUPPORT_RAW_TCP_SERVER_H_

#include <atomic>
#include <cstddef>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/loopback_listener.h"

namespace inspection::testing {

// A loopback TCP server that answers with exact bytes, for replies an HTTP server library
// will not produce: garbled status lines, interim 1xx responses, odd header spacing. (For
// resets and truncated bodies on an otherwise normal API, FakeVendor's kReset/kTruncated are
// simpler.)
//
// Each connection is served in turn on one thread: read the request head (up to the blank
// line) and a Content-Length body if announced, then either write `reply` and close (kReply),
// or abort the connection with a TCP RST (kReset). One exchange per connection, except in
// kReplyThenDropSecond: `reply` is written and the connection left open (a kept-alive
// connection, as the client sees it); the next request on it is read, recorded and answered
// by closing the connection, the way a server that timed the connection out would.
//
// Thread-safety: all methods may be called from any thread.
class RawTcpServer {
 public:
  enum class Mode { kReply, kReset, kReplyThenDropSecond };

  explicit RawTcpServer(Mode mode, std::string reply = "");
  // Stop().
  ~RawTcpServer();
  RawTcpServer(const RawTcpServer&) = delete;
  RawTcpServer& operator=(const RawTcpServer&) = delete;

  // Binds 127.0.0.1:0 and starts accepting. False if the socket cannot be set up. Call once.
  [[nodiscard]] bool Start();
  // Stops accepting and joins the thread. Idempotent.
  void Stop();

  int port() const { return port_; }
  // "http://127.0.0.1:<port>"
  std::string BaseUrl() const;
  // Request heads read so far (request line and headers, raw).
  std::vector<std::string> RequestHeads() const;

 private:
  void Loop();
  void ServeConnection(int fd);
  // Reads one request (head and Content-Length body) and records its head; false if nothing
  // came.
  bool ReadRequest(int fd);
  void SendReply(int fd);

  const Mode mode_;
  const std::string reply_;
  std::optional<LoopbackListener> listener_;  // set by Start()
  int wake_fd_ = -1;                          // eventfd: Stop() wakes the loop through it
  int port_ = -1;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
  mutable std::mutex mu_;
  std::vector<std::string> heads_;  // guarded by mu_
};

}  // namespace inspection::testing

#endif  // TESTS_SUPPORT_RAW_TCP_SERVER_H_
