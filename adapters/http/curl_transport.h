#ifndef ADAPTERS_HTTP_CURL_TRANSPORT_H_
#define ADAPTERS_HTTP_CURL_TRANSPORT_H_

#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <curl/curl.h>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "adapters/http/http_transport.h"
#include "adapters/http/response_budget.h"

namespace inspection::http {

namespace internal {
struct CurlExchange;  // per-request state, defined in curl_transport.cc
}  // namespace internal

// Immutable settings of one CurlTransport, fixed at Create().
struct CurlTransportOptions {
  // TCP (+TLS) connect budget of one exchange; it is also capped by the request's own timeout.
  std::chrono::milliseconds connect_timeout{2000};
  // Open connections across all hosts (CURLMOPT_MAX_TOTAL_CONNECTIONS). Requests beyond it wait
  // inside libcurl for a free connection, and that wait counts against their timeout. libcurl's
  // own default is unlimited; 4096 keeps the gateway well below a typical fd limit (ulimit -n)
  // while leaving room for the 2,000 concurrent calls of docs/design.md §9. 0 means unlimited.
  long max_total_connections = 4096;
  // Open connections to one host:port (CURLMOPT_MAX_HOST_CONNECTIONS). 0 means unlimited.
  long max_host_connections = 0;
  // A response (headers + body) larger than this fails the exchange with kTooLarge "response
  // too large": refused from its Content-Length, or as soon as the streamed bytes cross it.
  size_t max_response_bytes = size_t{64} << 20;
  // The head (status line and headers, interim responses included) alone may not be larger
  // than this either: kTooLarge.
  size_t max_response_head_bytes = size_t{64} << 10;
  // Header fields of one answer (interim answers and trailers included); past it kTooLarge.
  size_t max_response_header_count = 256;
  // The bodies all unfinished exchanges may hold together (response_budget.h): an exchange
  // whose next bytes would cross it fails with kReceive "answers being read at once exceed
  // ...". 0 means unlimited.
  size_t max_buffered_response_bytes = size_t{256} << 20;
  // Each answer's first bytes that may use the whole budget; the bytes past them hold at
  // most three quarters of it (response_budget.h), so huge answers cannot refuse small ones.
  // 0: every byte competes for the whole budget.
  size_t guaranteed_response_bytes = size_t{64} << 10;
  // Offer HTTP/2 through ALPN on https:// URLs (CURL_HTTP_VERSION_2TLS). Plain http:// always
  // uses HTTP/1.1. false: HTTP/1.1 everywhere.
  bool http2 = true;
  std::string user_agent = "inspection-gateway";
  // PEM file of the certificate authorities trusted for https:// peers; empty: the system's
  // bundle (libcurl's default). For a vendor behind a private CA or a TLS-inspecting proxy.
  std::string ca_file;
  // Easy handles kept for reuse once their exchange ends (each keeps its buffers, so a reused
  // one costs a reset instead of an allocation and setup). Past this many idle ones, finished
  // handles are freed.
  size_t max_idle_handles = 256;
};

// HttpTransport on libcurl's multi interface, driven by ONE event-loop thread.
//
// Send() may be called from any thread: it prepares the request and starts the transfer on
// the calling thread (under the transport's mutex: on a kept-alive connection the request is
// written before Send() returns, with no hand-off to another thread); the loop thread waits
// on every socket libcurl names (epoll, CURLMOPT_SOCKETFUNCTION/TIMERFUNCTION), reads the
// answers and runs the callbacks. However many exchanges are in flight, the transport owns
// exactly one thread. Connections are pooled and kept alive by the multi handle (HTTP/2 streams
// share one connection when the peer offers h2 through ALPN); easy handles are reused (a pool
// of idle ones, reset between exchanges); DNS answers and TLS sessions are shared by all
// handles (a CURLSH), so a new connection to a known host resumes its TLS session instead of
// a full handshake. Redirects are never followed; `Expect: 100-continue` is never sent; only
// http:// and https:// URLs work.
//
// Error mapping (HttpResult::error):
//   complete response, any status            -> kNone (status in response.status)
//   DNS failure, TCP refused, TLS handshake,
//   untrusted peer certificate               -> kConnect (request_sent == false)
//   request timeout (connect or later)       -> kTimeout (request_sent tells the phase)
//   write failure while sending              -> kSend
//   reset / empty reply / truncated body /
//   garbled or non-HTTP reply / HTTP/2 stream
//   reset / over the shared budget           -> kReceive
//   response over max_response_bytes         -> kTooLarge
//   anything else (bad URL, bad method...)   -> kOther
// HttpResult::elapsed runs from Send() to the callback, queueing included.
// request_sent is false only when no byte of the request can have reached the peer. Note that
// libcurl itself re-sends a request once, transparently, when a *reused* keep-alive connection
// turns out to be dead before any response byte arrived.
//
// Callbacks run on the loop thread, outside every lock the transport holds, exactly once each.
// Shutdown() (also run by the destructor) stops the loop and completes every unfinished
// exchange with kOther "transport shut down". A Send() after Shutdown() has begun (e.g. from
// inside such a callback) completes at once, on the calling thread, with the same error.
// Proxies: libcurl's usual environment variables (https_proxy, no_proxy...) apply.
class CurlTransport final : public HttpTransport {
 public:
  // Initialises libcurl once per process (thread-safe), creates the multi handle and starts the
  // loop thread. Errors: INVALID_ARGUMENT for a non-positive connect_timeout or
  // max_response_bytes or a negative connection limit, FAILED_PRECONDITION if the libcurl in
  // use is older than 7.68, INTERNAL if libcurl or the thread cannot be set up.
  static absl::StatusOr<std::unique_ptr<CurlTransport>> Create(CurlTransportOptions options = {});

  // Shutdown(), then releases libcurl's resources. Must not run inside one of this transport's
  // callbacks (it would wait for its own thread).
  ~CurlTransport() override;
  CurlTransport(const CurlTransport&) = delete;
  CurlTransport& operator=(const CurlTransport&) = delete;

  // Thread-safe, never blocks on the network. See HttpTransport.
  void Send(HttpRequest request, HttpCallback done) override;

  // Stops the loop and fails every unfinished exchange (kOther "transport shut down"); when it
  // returns, every callback of an exchange sent before the call has run. Idempotent and
  // thread-safe. Called from inside a callback it only requests the stop, which happens when
  // that callback returns.
  void Shutdown() override;

  // Exchanges accepted by Send() whose callback has not started yet. Thread-safe.
  size_t InFlight() const { return in_flight_.load(std::memory_order_acquire); }

  // Easy handles created so far (reused ones are counted once). Thread-safe.
  size_t HandlesCreated() const { return handles_created_.load(std::memory_order_acquire); }

  size_t BufferedResponseBytes() const override { return response_budget_.used(); }

 private:
  using Exchange = internal::CurlExchange;

  CurlTransport(CurlTransportOptions options, CURLM* multi);

  // Prepares the easy handle on the caller's thread; records why if it cannot.
  void Prepare(Exchange& exchange) const;
  // The event loop: waits on the sockets libcurl names (epoll), drives the multi handle and
  // runs the callbacks, outside every lock.
  void Run();
  // Moves the transfers libcurl reports done out of the multi handle into finished_.
  // Returns whether there were any.
  bool CollectFinishedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Builds the result of a finished exchange and runs its callback.
  void Finish(std::unique_ptr<Exchange> exchange, CURLcode code);
  // Fails `exchange` with kOther and `detail`, then runs its callback.
  void FailOther(std::unique_ptr<Exchange> exchange, const char* detail);
  // On shutdown: fails every exchange still active, finished or refused.
  void FailAllPending();
  // CURLMOPT_SOCKETFUNCTION: adds, changes or removes a socket in the epoll set.
  static int OnSocket(CURL* easy, curl_socket_t socket, int what, void* self, void* socketp);
  // CURLMOPT_TIMERFUNCTION: when libcurl next wants CURL_SOCKET_TIMEOUT (-1: never).
  static int OnTimer(CURLM* multi, long timeout_ms, void* self);
  void WakeLoop() const;
  // Sets the loop's timerfd to libcurl's timer (timer_deadline_) when that moved. The loop
  // waits on the timerfd in its epoll set, so a Send() that moves libcurl's timer re-arms it
  // with one syscall instead of waking the loop thread to recompute its wait.
  void ArmTimerLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // CURLSHOPT_LOCKFUNC / UNLOCKFUNC: one mutex per kind of shared data.
  absl::Mutex& ShareMutex(int data) const;
  static void LockShare(CURL* easy, curl_lock_data data, curl_lock_access access, void* self);
  static void UnlockShare(CURL* easy, curl_lock_data data, void* self);
  // An idle easy handle (reset), or a new one; null if libcurl cannot allocate one.
  CURL* AcquireHandle() const;
  // Takes back a handle whose exchange ended (it is out of the multi handle).
  void ReleaseHandle(CURL* easy) const;

  const CurlTransportOptions options_;
  CURLM* const multi_;
  // Declared before the exchange containers below, so it outlives every exchange's lease.
  ResponseBudget response_budget_{options_.max_buffered_response_bytes,
                                  options_.guaranteed_response_bytes};
  // DNS and TLS session caches shared by every easy handle (locks below).
  CURLSH* share_ = nullptr;
  mutable absl::Mutex share_dns_mu_;
  mutable absl::Mutex share_ssl_mu_;
  mutable absl::Mutex share_other_mu_;

  mutable absl::Mutex handles_mu_;
  mutable std::vector<CURL*> idle_handles_ ABSL_GUARDED_BY(handles_mu_);

  // Guards the multi handle (every curl_multi_* call, from Send() or the loop) and what
  // follows. libcurl's callbacks (socket, timer, header and body bytes) run under it.
  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // Exchanges inside the multi handle.
  std::unordered_map<CURL*, std::unique_ptr<Exchange>> active_ ABSL_GUARDED_BY(mu_);
  // Out of the multi handle, their callbacks due on the loop thread.
  std::vector<std::pair<std::unique_ptr<Exchange>, CURLcode>> finished_ ABSL_GUARDED_BY(mu_);
  // Could not be started (prepare_error says why); failed on the loop thread.
  std::vector<std::unique_ptr<Exchange>> refused_ ABSL_GUARDED_BY(mu_);
  // libcurl's next timeout (TIMERFUNCTION; max: none), and what timer_fd_ is set to.
  std::chrono::steady_clock::time_point timer_deadline_ ABSL_GUARDED_BY(mu_) =
      std::chrono::steady_clock::time_point::max();
  std::chrono::steady_clock::time_point armed_deadline_ ABSL_GUARDED_BY(mu_) =
      std::chrono::steady_clock::time_point::max();
  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  int timer_fd_ = -1;  // CLOCK_MONOTONIC timerfd, in the epoll set

  std::atomic<size_t> in_flight_{0};
  mutable std::atomic<size_t> handles_created_{0};
  // Serialises Shutdown() callers around loop_.join().
  absl::Mutex join_mu_;
  std::thread loop_;
  // Fixed before Create() returns; read without a lock (loop_ itself changes when joined).
  std::thread::id loop_id_;
};

}  // namespace inspection::http

#endif  // ADAPTERS_HTTP_CURL_TRANSPORT_H_
