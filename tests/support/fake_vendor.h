#ifndef TESTS_SUPPORT_FAKE_VENDOR_H_
#define TESTS_SUPPORT_FAKE_VENDOR_H_

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_set>
#include <utility>
#include <vector>

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace inspection::testing {

// One request as the fake vendor received it.
struct RecordedRequest {
  std::string method;
  // The request target's path exactly as sent, still percent-encoded, without the query.
  std::string path;
  // The raw query string after '?' (undecoded, as sent); empty when there is none.
  std::string query;
  // Every header the client sent, names lower-cased, values as httplib parsed them (leading
  // blanks removed). Ordered by name, not by arrival: httplib keeps headers in a multimap.
  std::vector<std::pair<std::string, std::string>> headers;
  // The body, de-chunked if it was sent chunked.
  std::string body;

  // The first header named `lower_name` (lower-case), or nullptr.
  const std::string* Header(std::string_view lower_name) const;
};

// How the fake answers one request.
struct ScriptedResponse {
  enum class Kind {
    kNormal,
    // Declares a Content-Length larger than `body`, sends the head and all of `body`, then
    // closes the connection (the client sees a truncated body).
    kTruncated,
    // Resets the connection (TCP RST) without sending any response byte, after the whole
    // request has been read.
    kReset,
    // Does not answer until ReleaseHeld() or Stop() is called, then answers normally.
    kHold,
  };

  int status = 200;
  std::string body;
  // Content-Type of `body`; empty sends no Content-Type.
  std::string content_type = "application/json";
  // Extra response headers, sent as given (set Content-Type through `content_type`).
  std::vector<std::pair<std::string, std::string>> headers;
  Kind kind = Kind::kNormal;
  // kNormal only: answer after this delay. Stop() cuts the delay short.
  std::chrono::milliseconds hold_for{0};
};

struct FakeVendorOptions {
  // Worker threads: one per connection being served (httplib is thread-per-connection), so
  // this bounds how many requests can be held at once. Idle keep-alive connections occupy a
  // worker too.
  int threads = 16;
};

// A scripted fake of the vendor's HTTP API on 127.0.0.1, for tests (cpp-httplib based).
//
// Binds an OS-chosen port; records every request; answers with a scripted response (default:
// 404 with a JSON body). TCP_NODELAY and keep-alive (up to 10,000 requests per connection)
// are on, and the listen backlog is raised to 4096 so that hundreds of simultaneous connects
// are accepted without SYN retransmits.
//
// Thread-safety: every method may be called from any thread. The handler runs on the
// server's worker threads, possibly concurrently with itself, and must be thread-safe.
class FakeVendor {
 public:
  using RecordedRequest = ::inspection::testing::RecordedRequest;
  using ScriptedResponse = ::inspection::testing::ScriptedResponse;
  using Handler = std::function<ScriptedResponse(const RecordedRequest&)>;

  FakeVendor() : FakeVendor(FakeVendorOptions{}) {}
  explicit FakeVendor(FakeVendorOptions options);
  // Stop().
  ~FakeVendor();
  FakeVendor(const FakeVendor&) = delete;
  FakeVendor& operator=(const FakeVendor&) = delete;

  // Binds 127.0.0.1:0 and starts serving. Returns once connections are accepted and served
  // (all worker threads exist by then), false if the socket cannot be bound. Call once.
  [[nodiscard]] bool Start();

  // Stops serving: held and delayed requests are answered at once, idle keep-alive
  // connections are closed, all threads are joined. Idempotent; never waits on a client.
  void Stop();

  // Replaces the script. The handler sees each request after it has been recorded.
  void SetHandler(Handler handler);
  // Answers every request with `response`.
  void RespondWith(ScriptedResponse response);

  std::vector<RecordedRequest> Requests() const;
  size_t RequestCount() const;
  // Waits until at least `n` requests have been received (recorded before they are answered).
  bool WaitForRequests(size_t n, std::chrono::milliseconds deadline) const;

  // Requests currently held by kHold.
  int HeldCount() const;
  // Waits until at least `n` requests are held at the same time.
  bool WaitForHeld(int n, std::chrono::milliseconds deadline) const;
  // Answers every request held now. Requests that arrive later with kHold are held again.
  void ReleaseHeld();

  // "http://127.0.0.1:<port>"; valid after Start().
  std::string BaseUrl() const;
  int port() const { return port_; }

 private:
  void Serve(const httplib::Request& request, httplib::Response& response);
  // Waits for ReleaseHeld()/Stop() (kHold) or for the delay to pass (kNormal hold_for).
  void Hold(const ScriptedResponse& scripted);
  // Resets the TCP connection of `request`, found by its ports; see the .cc.
  void ResetConnection(const httplib::Request& request) const;
  // Shuts the read side of every accepted connection, so idle keep-alive workers exit.
  void ShutdownAcceptedSockets() const;

  const FakeVendorOptions options_;
  std::unique_ptr<httplib::Server> server_;
  std::thread listener_;
  int port_ = -1;
  int listen_fd_ = -1;

  mutable std::mutex mu_;
  // Signalled on every new request and every change of held_count_ (test-side waiters).
  mutable std::condition_variable progress_cv_;
  // Signalled by ReleaseHeld() and Stop() (server-side held and delayed requests).
  std::condition_variable release_cv_;
  std::shared_ptr<const Handler> handler_;  // guarded by mu_
  std::vector<RecordedRequest> requests_;   // guarded by mu_
  // Requests that reached Serve() and whose response httplib has not written yet.
  std::unordered_set<const httplib::Request*> unfinished_;  // guarded by mu_
  int held_count_ = 0;                                      // guarded by mu_
  unsigned long release_generation_ = 0;                    // guarded by mu_
  bool serving_ = false;                                    // guarded by mu_; the worker pool is up
  bool listener_done_ = false;                              // guarded by mu_
  bool stopping_ = false;                                   // guarded by mu_
  bool stopped_ = false;                                    // guarded by mu_
};

}  // namespace inspection::testing

#endif  // TESTS_SUPPORT_FAKE_VENDOR_H_
