#include "adapters/http/curl_transport.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <mutex>
#include <system_error>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace inspection::http {
namespace {

using Clock = std::chrono::steady_clock;

constexpr char kShutDown[] = "transport shut down";

// CURLOPT_PROTOCOLS_STR and the other options used here are all in 7.68.0.
constexpr unsigned int kMinCurlVersion = 0x074400;

// Upper bound of one epoll wait. The timerfd (libcurl's timer) and the wake fd end it sooner,
// so the value only matters if both fail to; it is not a polling interval.
constexpr int kMaxPollMs = 10000;

// curl_global_init is not meant to run twice or concurrently with itself; std::call_once makes
// the first Create() do it, whichever thread that is. The matching curl_global_cleanup is never
// called: transports may live until exit, and libcurl's global state is process-lifetime.
CURLcode GlobalInitOnce() {
  static std::once_flag once;
  static CURLcode result = CURLE_OK;
  std::call_once(once, [] { result = curl_global_init(CURL_GLOBAL_DEFAULT); });
  return result;
}

}  // namespace

namespace internal {

// Everything one exchange needs; heap-allocated and never moved, because libcurl keeps raw
// pointers into it (error buffer, callback user data, POSTFIELDS pointing into request.body).
struct CurlExchange {
  // The easy handle goes back to the transport's pool before this runs (ReleaseHandle);
  // one still here was never handed out to libcurl's multi handle, or belongs to a
  // transport that is going away.
  ~CurlExchange() {
    if (easy != nullptr) curl_easy_cleanup(easy);
    curl_slist_free_all(header_list);
  }

  HttpRequest request;
  HttpCallback done;
  Clock::time_point start;
  size_t max_response_bytes = 0;
  size_t max_response_head_bytes = 0;
  size_t max_response_header_count = 0;

  CURL* easy = nullptr;
  curl_slist* header_list = nullptr;
  // Non-null when the request could not be turned into a transfer; the loop fails it.
  const char* prepare_error = nullptr;

  HttpResponse response;
  size_t header_bytes = 0;
  size_t header_fields = 0;  // interim answers' and trailers included
  bool too_large = false;
  bool head_too_large = false;  // too_large, by the head alone
  // The body's share of the transport's ResponseBudget; given back when the exchange goes.
  ResponseBudgetLease lease;
  bool over_budget = false;
  char error_buffer[CURL_ERROR_SIZE] = {};
};

}  // namespace internal

namespace {

using internal::CurlExchange;

// CURLOPT_HEADERFUNCTION: one call per header line, status lines and the blank line included.
size_t OnHeaderLine(char* data, size_t size, size_t count, void* user) {
  auto* exchange = static_cast<CurlExchange*>(user);
  const size_t n = size * count;
  // Headers count against the response budget too, or a server could grow memory without
  // bound through them. Returning a short count makes libcurl abort with CURLE_WRITE_ERROR.
  exchange->header_bytes += n;
  if (exchange->header_bytes > exchange->max_response_head_bytes) {
    exchange->too_large = true;
    exchange->head_too_large = true;
    return 0;
  }
  if (exchange->header_bytes + exchange->response.body.size() > exchange->max_response_bytes) {
    exchange->too_large = true;
    return 0;
  }
  absl::string_view line(data, n);
  Headers& headers = exchange->response.headers;
  if (absl::StartsWith(line, "HTTP/")) {
    // A new status line: the headers so far belonged to an interim (1xx) response, or to a
    // proxy's CONNECT answer. Only the final response's headers are returned.
    headers.clear();
    return n;
  }
  if (!line.empty() && (line[0] == ' ' || line[0] == '\t')) {
    // Obsolete line folding: the line continues the previous header's value.
    absl::string_view more = absl::StripAsciiWhitespace(line);
    if (!headers.empty() && !more.empty()) absl::StrAppend(&headers.back().second, " ", more);
    return n;
  }
  const size_t colon = line.find(':');
  if (colon == absl::string_view::npos) return n;  // the blank line that ends the head
  if (++exchange->header_fields > exchange->max_response_header_count) {
    exchange->too_large = true;
    exchange->head_too_large = true;
    return 0;
  }
  std::string name = absl::AsciiStrToLower(absl::StripAsciiWhitespace(line.substr(0, colon)));
  if (name.empty()) return n;
  headers.emplace_back(std::move(name),
                       std::string(absl::StripAsciiWhitespace(line.substr(colon + 1))));
  return n;
}

// CURLOPT_WRITEFUNCTION: body bytes, already de-chunked.
size_t OnBodyBytes(char* data, size_t size, size_t count, void* user) {
  auto* exchange = static_cast<CurlExchange*>(user);
  const size_t n = size * count;
  std::string& body = exchange->response.body;
  if (body.size() + exchange->header_bytes + n > exchange->max_response_bytes) {
    // Checked per chunk, so a body without Content-Length (chunked, or read until close)
    // is refused as soon as it crosses the limit instead of after it has been buffered.
    exchange->too_large = true;
    return 0;
  }
  if (body.size() + n > body.capacity()) {
    // The memory the body will hold is its capacity: grown here, in steps the budget sees
    // before they are taken (doubling, as std::string would, within max_response_bytes).
    const size_t grown =
        std::min(std::max(body.size() + n, 2 * body.capacity()), exchange->max_response_bytes);
    if (!exchange->lease.GrowTo(grown)) {
      exchange->over_budget = true;
      return 0;
    }
    body.reserve(grown);
  }
  body.append(data, n);
  return n;
}

// Whether any byte of the request may have left this process. Conservative on purpose: a
// false "true" only costs a retry of a non-idempotent call, a false "false" could repeat it.
bool MaybeWritten(CURL* easy) {
  long request_size = 0;
  curl_off_t pretransfer_us = 0;
  curl_easy_getinfo(easy, CURLINFO_REQUEST_SIZE, &request_size);
  curl_easy_getinfo(easy, CURLINFO_PRETRANSFER_TIME_T, &pretransfer_us);
  // PRETRANSFER is stamped once the connection (and TLS) is up and sending starts, so a
  // failure after it may have written part of the request even if REQUEST_SIZE is still 0.
  return request_size > 0 || pretransfer_us > 0;
}

std::string CurlDetail(CURLcode code, const char* error_buffer) {
  std::string detail = curl_easy_strerror(code);
  // The error buffer holds libcurl's specific message (host, port, errno text). libcurl never
  // copies request header values into it, so the API key cannot leak through here.
  if (error_buffer[0] != '\0') {
    absl::string_view specific = absl::StripTrailingAsciiWhitespace(error_buffer);
    absl::StrAppend(&detail, ": ", specific);
  }
  return detail;
}

std::chrono::microseconds Since(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start);
}

}  // namespace

absl::StatusOr<std::unique_ptr<CurlTransport>> CurlTransport::Create(CurlTransportOptions options) {
  if (options.connect_timeout <= std::chrono::milliseconds::zero()) {
    return absl::InvalidArgumentError("connect_timeout must be > 0");
  }
  if (options.max_total_connections < 0 || options.max_host_connections < 0) {
    return absl::InvalidArgumentError("connection limits must be >= 0");
  }
  if (options.max_response_bytes == 0 || options.max_response_head_bytes == 0) {
    return absl::InvalidArgumentError("max_response_bytes and max_response_head_bytes must be > 0");
  }
  if (const CURLcode init = GlobalInitOnce(); init != CURLE_OK) {
    return absl::InternalError(absl::StrCat("curl_global_init failed: ", curl_easy_strerror(init)));
  }
  const curl_version_info_data* info = curl_version_info(CURLVERSION_NOW);
  if (info == nullptr || info->version_num < kMinCurlVersion) {
    return absl::FailedPreconditionError(absl::StrCat("libcurl >= 7.68.0 required, found ",
                                                      info == nullptr ? "unknown" : info->version));
  }
  if (!options.ca_file.empty()) {
    if (absl::Status readable = CheckReadableCaFile(options.ca_file); !readable.ok()) {
      return readable;
    }
  }
  CURLM* multi = curl_multi_init();
  if (multi == nullptr) return absl::InternalError("curl_multi_init failed");
  curl_multi_setopt(multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, options.max_total_connections);
  curl_multi_setopt(multi, CURLMOPT_MAX_HOST_CONNECTIONS, options.max_host_connections);
  // libcurl's default since 7.62, stated so that HTTP/2 streams share one connection.
  curl_multi_setopt(multi, CURLMOPT_PIPELINING, CURLPIPE_MULTIPLEX);

  // From here the transport owns `multi`; its destructor cleans it up on every path.
  std::unique_ptr<CurlTransport> transport(new CurlTransport(std::move(options), multi));
  // The event loop's own epoll set: libcurl says which sockets to watch (SOCKETFUNCTION) and
  // when it next needs a call (TIMERFUNCTION, kept in the timerfd); the eventfd wakes the loop.
  transport->epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  transport->wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  transport->timer_fd_ = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
  if (transport->epoll_fd_ < 0 || transport->wake_fd_ < 0 || transport->timer_fd_ < 0) {
    return absl::InternalError(absl::StrCat("epoll/eventfd/timerfd: ", std::strerror(errno)));
  }
  for (int fd : {transport->wake_fd_, transport->timer_fd_}) {
    epoll_event event{};
    event.events = EPOLLIN;
    event.data.fd = fd;
    if (epoll_ctl(transport->epoll_fd_, EPOLL_CTL_ADD, fd, &event) != 0) {
      return absl::InternalError(absl::StrCat("epoll_ctl: ", std::strerror(errno)));
    }
  }
  curl_multi_setopt(multi, CURLMOPT_SOCKETFUNCTION, &CurlTransport::OnSocket);
  curl_multi_setopt(multi, CURLMOPT_SOCKETDATA, transport.get());
  curl_multi_setopt(multi, CURLMOPT_TIMERFUNCTION, &CurlTransport::OnTimer);
  curl_multi_setopt(multi, CURLMOPT_TIMERDATA, transport.get());
  // DNS answers and TLS sessions shared by all easy handles. Handles are set up on callers'
  // threads and run on the loop thread, hence the locks.
  CURLSH* share = curl_share_init();
  if (share == nullptr) return absl::InternalError("curl_share_init failed");
  transport->share_ = share;
  curl_share_setopt(share, CURLSHOPT_LOCKFUNC, &CurlTransport::LockShare);
  curl_share_setopt(share, CURLSHOPT_UNLOCKFUNC, &CurlTransport::UnlockShare);
  curl_share_setopt(share, CURLSHOPT_USERDATA, transport.get());
  curl_share_setopt(share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
  curl_share_setopt(share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
  try {
    transport->loop_ = std::thread([t = transport.get()] { t->Run(); });
    transport->loop_id_ = transport->loop_.get_id();
  } catch (const std::system_error& e) {
    return absl::InternalError(absl::StrCat("cannot start the transport thread: ", e.what()));
  }
  return transport;
}

CurlTransport::CurlTransport(CurlTransportOptions options, CURLM* multi)
    : options_(std::move(options)), multi_(multi) {}

CurlTransport::~CurlTransport() {
  Shutdown();
  // The loop has failed and released every exchange; no easy handle is attached any more.
  {
    absl::MutexLock lock(&handles_mu_);
    for (CURL* easy : idle_handles_) curl_easy_cleanup(easy);
    idle_handles_.clear();
  }
  curl_multi_cleanup(multi_);
  // After every handle that used it is gone.
  if (share_ != nullptr) curl_share_cleanup(share_);
  if (epoll_fd_ >= 0) close(epoll_fd_);
  if (wake_fd_ >= 0) close(wake_fd_);
  if (timer_fd_ >= 0) close(timer_fd_);
}

int CurlTransport::OnSocket(CURL*, curl_socket_t socket, int what, void* self, void*) {
  auto* transport = static_cast<CurlTransport*>(self);
  if (what == CURL_POLL_REMOVE) {
    // ENOENT/EBADF: libcurl may have closed it already, which removed it from the set.
    epoll_ctl(transport->epoll_fd_, EPOLL_CTL_DEL, socket, nullptr);
    return 0;
  }
  epoll_event event{};
  event.events = (what & CURL_POLL_IN ? EPOLLIN : 0u) | (what & CURL_POLL_OUT ? EPOLLOUT : 0u);
  event.data.fd = socket;
  if (epoll_ctl(transport->epoll_fd_, EPOLL_CTL_MOD, socket, &event) != 0 && errno == ENOENT) {
    epoll_ctl(transport->epoll_fd_, EPOLL_CTL_ADD, socket, &event);
  }
  return 0;
}

int CurlTransport::OnTimer(CURLM*, long timeout_ms, void* self)
    ABSL_NO_THREAD_SAFETY_ANALYSIS {  // called by libcurl inside a multi call, under mu_
  auto* transport = static_cast<CurlTransport*>(self);
  transport->timer_deadline_ = timeout_ms < 0
                                   ? Clock::time_point::max()
                                   : Clock::now() + std::chrono::milliseconds(timeout_ms);
  return 0;
}

void CurlTransport::WakeLoop() const {
  const uint64_t one = 1;
  // EAGAIN: the counter is already non-zero, the loop will wake anyway.
  [[maybe_unused]] ssize_t written = write(wake_fd_, &one, sizeof one);
}

void CurlTransport::ArmTimerLocked() {
  if (timer_deadline_ == armed_deadline_) return;
  itimerspec spec{};  // all zero: disarmed
  if (timer_deadline_ != Clock::time_point::max()) {
    // steady_clock is CLOCK_MONOTONIC. A deadline already past fires at once; zero would
    // disarm instead, hence at least 1 ns.
    const auto ns = std::max<int64_t>(
        1, std::chrono::duration_cast<std::chrono::nanoseconds>(timer_deadline_.time_since_epoch())
               .count());
    spec.it_value.tv_sec = static_cast<time_t>(ns / 1000000000);
    spec.it_value.tv_nsec = static_cast<long>(ns % 1000000000);
  }
  if (timerfd_settime(timer_fd_, TFD_TIMER_ABSTIME, &spec, nullptr) == 0) {
    armed_deadline_ = timer_deadline_;
  } else {
    WakeLoop();  // cannot happen with valid values; the loop's wait then recomputes it
  }
}

absl::Mutex& CurlTransport::ShareMutex(int data) const {
  switch (data) {
    case CURL_LOCK_DATA_DNS:
      return share_dns_mu_;
    case CURL_LOCK_DATA_SSL_SESSION:
      return share_ssl_mu_;
    default:
      return share_other_mu_;
  }
}

void CurlTransport::LockShare(CURL*, curl_lock_data data, curl_lock_access,
                              void* self) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  static_cast<const CurlTransport*>(self)->ShareMutex(data).Lock();
}

void CurlTransport::UnlockShare(CURL*, curl_lock_data data,
                                void* self) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  static_cast<const CurlTransport*>(self)->ShareMutex(data).Unlock();
}

CURL* CurlTransport::AcquireHandle() const {
  {
    absl::MutexLock lock(&handles_mu_);
    if (!idle_handles_.empty()) {
      CURL* easy = idle_handles_.back();
      idle_handles_.pop_back();
      return easy;
    }
  }
  CURL* easy = curl_easy_init();
  if (easy != nullptr) handles_created_.fetch_add(1, std::memory_order_acq_rel);
  return easy;
}

// Whether a finished easy handle may serve another exchange. Not before libcurl 8.1.0:
// its header store keeps a pointer to the previous transfer's last header past that
// transfer (curl/curl#11101, fixed by #11103), and an answer on the reused handle whose
// first header line is folded (" X: 1" right after the status line) appends to the freed
// header: a heap use-after-free on the loop thread that any vendor answer can trigger
// (found by fuzz/curl_transport_fuzzer, fuzz/corpus/curl_transport/regress-folded-first-header).
// Debian bookworm ships 7.88.1, so there every exchange gets a fresh handle.
namespace {
bool HandlesMayBeReused() {
  static const bool may = curl_version_info(CURLVERSION_NOW)->version_num >= 0x080100;
  return may;
}
}  // namespace

void CurlTransport::ReleaseHandle(CURL* easy) const {
  if (!HandlesMayBeReused()) {
    curl_easy_cleanup(easy);
    return;
  }
  // Back to a freshly initialised state (options, private pointer, callbacks); libcurl keeps
  // the handle's buffers, and the connections stay in the multi handle's pool.
  curl_easy_reset(easy);
  {
    absl::MutexLock lock(&handles_mu_);
    if (idle_handles_.size() < options_.max_idle_handles) {
      idle_handles_.push_back(easy);
      return;
    }
  }
  curl_easy_cleanup(easy);
}

void CurlTransport::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    WakeLoop();
  }
  // From a callback the loop cannot be joined; it sees stopping_ once the callback returns.
  if (std::this_thread::get_id() == loop_id_) return;
  absl::MutexLock lock(&join_mu_);
  if (loop_.joinable()) loop_.join();
}

void CurlTransport::Send(HttpRequest request, HttpCallback done) {
  in_flight_.fetch_add(1, std::memory_order_acq_rel);
  auto exchange = std::make_unique<Exchange>();
  exchange->start = Clock::now();
  exchange->request = std::move(request);
  exchange->done = std::move(done);
  exchange->max_response_bytes = options_.max_response_bytes;
  exchange->max_response_head_bytes = options_.max_response_head_bytes;
  exchange->max_response_header_count = options_.max_response_header_count;
  exchange->lease = ResponseBudgetLease(&response_budget_);
  // Setting up the easy handle here spreads that CPU work over the callers' threads and keeps
  // the single loop thread for I/O. Handles come from a pool of idle ones, reset when they
  // were put back (curl_easy_reset), so no option leaks from one request into the next.
  Prepare(*exchange);
  {
    absl::MutexLock lock(&mu_);
    if (!stopping_) {
      if (exchange->prepare_error != nullptr) {
        // Failed by the loop: callbacks run on the loop thread, never inside Send().
        refused_.push_back(std::move(exchange));
        WakeLoop();
        return;
      }
      const CURLMcode added = curl_multi_add_handle(multi_, exchange->easy);
      if (added != CURLM_OK) {
        exchange->prepare_error = curl_multi_strerror(added);
        refused_.push_back(std::move(exchange));
        WakeLoop();
        return;
      }
      CURL* easy = exchange->easy;
      active_.emplace(easy, std::move(exchange));
      // Start the transfer on this thread: on a kept-alive connection the request is
      // written now, without waking the loop thread; the loop takes over when the answer
      // (or anything else) arrives on the socket.
      int running = 0;
      curl_multi_socket_action(multi_, CURL_SOCKET_TIMEOUT, 0, &running);
      // Whatever that finished (a refused connection, an expired timer of another
      // exchange) completes on the loop thread.
      if (CollectFinishedLocked()) WakeLoop();
      ArmTimerLocked();
      return;
    }
  }
  // Shutting down: the loop will never see this exchange, so fail it here, on this thread.
  FailOther(std::move(exchange), kShutDown);
}

void CurlTransport::Prepare(Exchange& exchange) const {
  const HttpRequest& request = exchange.request;
  if (!IsHttpToken(request.method)) {
    exchange.prepare_error = "invalid HTTP method";
    return;
  }
  if (request.url.empty()) {
    exchange.prepare_error = "empty URL";
    return;
  }
  if (request.timeout <= std::chrono::milliseconds::zero()) {
    exchange.prepare_error = "request timeout must be > 0";
    return;
  }
  bool has_content_type = false;
  bool has_expect = false;
  for (const auto& [name, value] : request.headers) {
    // The detail names neither the header nor its value: values may be secrets.
    if (!IsHttpToken(name) || !IsSafeHeaderValue(value)) {
      exchange.prepare_error = "invalid header name or value";
      return;
    }
    has_content_type |= absl::EqualsIgnoreCase(name, "content-type");
    has_expect |= absl::EqualsIgnoreCase(name, "expect");
  }

  CURL* easy = AcquireHandle();
  if (easy == nullptr) {
    exchange.prepare_error = "curl_easy_init failed";
    return;
  }
  exchange.easy = easy;
  curl_easy_setopt(easy, CURLOPT_SHARE, share_);
  if (!options_.ca_file.empty()) curl_easy_setopt(easy, CURLOPT_CAINFO, options_.ca_file.c_str());

  curl_easy_setopt(easy, CURLOPT_PRIVATE, &exchange);
  curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, exchange.error_buffer);
  curl_easy_setopt(easy, CURLOPT_URL, request.url.c_str());
  // Only HTTP(S): a URL built from vendor data must not reach file:// or other schemes.
  curl_easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "http,https");
  // Signals and threads do not mix; without this libcurl uses SIGALRM for DNS timeouts.
  curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
  // Redirects are answers for the caller to see, never followed (they could also carry the
  // API key to another host).
  curl_easy_setopt(easy, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(easy, CURLOPT_TCP_NODELAY, 1L);
  curl_easy_setopt(easy, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(options_.connect_timeout.count()));
  curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, static_cast<long>(request.timeout.count()));
  // libcurl re-sends a request once, on its own, when a reused connection dies before any
  // answer byte; only a fresh connection rules that out for non-idempotent requests.
  curl_easy_setopt(easy, CURLOPT_FRESH_CONNECT, request.reuse_connection ? 0L : 1L);
  curl_easy_setopt(easy, CURLOPT_USERAGENT, options_.user_agent.c_str());
  if (options_.http2) {
    // HTTP/2 only where ALPN can negotiate it (https); http:// stays HTTP/1.1.
    curl_easy_setopt(easy, CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_2TLS));
    if (absl::StartsWithIgnoreCase(request.url, "https://")) {
      // During a burst, wait for the first connection's ALPN answer and multiplex on it
      // instead of opening one connection per request. Not for http://: there libcurl only
      // learns "no multiplexing" from the first response, so a slow first request would
      // stall every other one behind it.
      curl_easy_setopt(easy, CURLOPT_PIPEWAIT, 1L);
    }
  } else {
    curl_easy_setopt(easy, CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_1_1));
  }
  // Content-Length known up front: refuse an oversized body before reading it.
  curl_easy_setopt(easy, CURLOPT_MAXFILESIZE_LARGE,
                   static_cast<curl_off_t>(options_.max_response_bytes));
  curl_easy_setopt(easy, CURLOPT_HEADERFUNCTION, &OnHeaderLine);
  curl_easy_setopt(easy, CURLOPT_HEADERDATA, &exchange);
  curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, &OnBodyBytes);
  curl_easy_setopt(easy, CURLOPT_WRITEDATA, &exchange);

  const std::string& method = request.method;
  const bool body_method = method == "POST" || method == "PUT" || method == "PATCH";
  bool uses_post_fields = false;
  if (method == "GET" && request.body.empty()) {
    curl_easy_setopt(easy, CURLOPT_HTTPGET, 1L);
  } else if (method == "HEAD") {
    curl_easy_setopt(easy, CURLOPT_NOBODY, 1L);
  } else {
    if (!request.body.empty() || body_method) {
      // POSTFIELDS sends the body from request.body in place (no copy) with a Content-Length;
      // an empty one still sends "Content-Length: 0", which servers expect on POST/PUT.
      uses_post_fields = true;
      curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE_LARGE,
                       static_cast<curl_off_t>(request.body.size()));
      curl_easy_setopt(easy, CURLOPT_POSTFIELDS, request.body.data());
    }
    // POSTFIELDS implies POST; any other method keeps the body but states its own verb.
    if (method != "POST") curl_easy_setopt(easy, CURLOPT_CUSTOMREQUEST, method.c_str());
  }

  curl_slist* list = nullptr;
  auto append = [&list](const std::string& line) {
    curl_slist* grown = curl_slist_append(list, line.c_str());
    if (grown == nullptr) return false;
    list = grown;
    return true;
  };
  bool ok = true;
  for (const auto& [name, value] : request.headers) {
    // "Name;" is libcurl's spelling of a header with an empty value ("Name:" would remove it).
    ok = ok && append(value.empty() ? absl::StrCat(name, ";") : absl::StrCat(name, ": ", value));
  }
  // libcurl sends "Expect: 100-continue" for bodies over 1 MiB and then waits up to a second
  // for an interim answer many servers never send. An empty header disables it.
  if (!has_expect) ok = ok && append("Expect:");
  // libcurl labels POSTFIELDS bodies application/x-www-form-urlencoded, which would be a lie
  // here; without a caller-given type the body goes unlabelled instead.
  if (uses_post_fields && !has_content_type) ok = ok && append("Content-Type:");
  exchange.header_list = list;
  if (!ok) {
    exchange.prepare_error = "out of memory building headers";
    return;
  }
  curl_easy_setopt(easy, CURLOPT_HTTPHEADER, list);
}

void CurlTransport::Run() {
  constexpr int kMaxEvents = 64;
  epoll_event events[kMaxEvents];
  for (;;) {
    int timeout_ms = kMaxPollMs;
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) break;
      // libcurl's own answer, each turn: the timer callback alone can leave a stale value
      // (libcurl does not repeat a timeout it reported before, even when our wait for it
      // ended a fraction of a millisecond early and nothing was due yet).
      long curl_ms = -1;
      curl_multi_timeout(multi_, &curl_ms);
      timer_deadline_ = curl_ms < 0 ? Clock::time_point::max()
                                    : Clock::now() + std::chrono::milliseconds(curl_ms);
      // The timerfd wakes the wait when libcurl's timer is due; a Send() that moves the
      // timer re-arms it (ArmTimerLocked) without waking this thread.
      ArmTimerLocked();
      if (!finished_.empty() || !refused_.empty()) timeout_ms = 0;
    }
    const int ready = epoll_wait(epoll_fd_, events, kMaxEvents, timeout_ms);
    std::vector<std::pair<std::unique_ptr<Exchange>, CURLcode>> finished;
    std::vector<std::unique_ptr<Exchange>> refused;
    {
      absl::MutexLock lock(&mu_);
      int running = 0;
      for (int i = 0; i < ready; ++i) {
        const int fd = events[i].data.fd;
        if (fd == wake_fd_ || fd == timer_fd_) {
          uint64_t count = 0;
          [[maybe_unused]] ssize_t read_bytes = read(fd, &count, sizeof count);
          continue;
        }
        int flags = 0;
        if (events[i].events & (EPOLLIN | EPOLLHUP | EPOLLRDHUP)) flags |= CURL_CSELECT_IN;
        if (events[i].events & EPOLLOUT) flags |= CURL_CSELECT_OUT;
        if (events[i].events & EPOLLERR) flags |= CURL_CSELECT_ERR;
        curl_multi_socket_action(multi_, fd, flags, &running);
      }
      if (timer_deadline_ <= Clock::now()) {
        curl_multi_socket_action(multi_, CURL_SOCKET_TIMEOUT, 0, &running);
      }
      CollectFinishedLocked();
      finished.swap(finished_);
      refused.swap(refused_);
    }
    // Callbacks run outside every lock: they may Send() again.
    for (auto& exchange : refused) {
      const char* detail = exchange->prepare_error;
      FailOther(std::move(exchange), detail);
    }
    for (auto& [exchange, code] : finished) Finish(std::move(exchange), code);
  }
  FailAllPending();
}

bool CurlTransport::CollectFinishedLocked() {
  bool any = false;
  int remaining = 0;
  while (CURLMsg* message = curl_multi_info_read(multi_, &remaining)) {
    if (message->msg != CURLMSG_DONE) continue;
    // Copy out: the message is invalidated by curl_multi_remove_handle.
    CURL* easy = message->easy_handle;
    const CURLcode code = message->data.result;
    auto it = active_.find(easy);
    if (it == active_.end()) continue;
    std::unique_ptr<Exchange> exchange = std::move(it->second);
    active_.erase(it);
    curl_multi_remove_handle(multi_, easy);
    finished_.emplace_back(std::move(exchange), code);
    any = true;
  }
  return any;
}

void CurlTransport::Finish(std::unique_ptr<Exchange> exchange, CURLcode code) {
  // Out of the multi handle already (CollectFinishedLocked): the handle is this thread's.
  CURL* easy = exchange->easy;

  HttpResult result;
  result.elapsed = Since(exchange->start);
  const bool maybe_written = MaybeWritten(easy);
  switch (code) {
    case CURLE_OK:
      result.error = TransportError::kNone;
      result.request_sent = true;
      curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &result.response.status);
      if (result.response.status < 100 || result.response.status > 999) {
        // libcurl completes some status lines that carry no HTTP status: "HTTP/2 1 200 OK"
        // on an HTTP/1.1 connection gives 1, "HTTP/1.1 000" gives 0 (which is also
        // HttpResponse's "no answer"). A garbled reply, as for Beast's parser.
        result.error = TransportError::kReceive;
        result.error_detail = absl::StrCat("garbled reply: status ", result.response.status,
                                           " is not a three-digit HTTP status");
        result.response.status = 0;
        break;
      }
      result.response.headers = std::move(exchange->response.headers);
      result.response.body = std::move(exchange->response.body);
      break;
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_CONNECT:
    // A failed TLS handshake, or a peer certificate that is not trusted, is a failed
    // connect: no HTTP byte has been written yet.
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
      result.error = TransportError::kConnect;
      result.request_sent = false;
      break;
    case CURLE_OPERATION_TIMEDOUT:
      // Connect timeouts land here too; MaybeWritten() tells the two apart for retries.
      result.error = TransportError::kTimeout;
      result.request_sent = maybe_written;
      break;
    case CURLE_SEND_ERROR:
      // Part of the request may have been delivered before the write failed.
      result.error = TransportError::kSend;
      result.request_sent = true;
      break;
    case CURLE_RECV_ERROR:    // reset while waiting for or reading the response
    case CURLE_PARTIAL_FILE:  // body shorter than its Content-Length
    case CURLE_GOT_NOTHING:   // connection closed before any response byte
    case CURLE_WEIRD_SERVER_REPLY:
    case CURLE_HTTP2:         // HTTP/2 framing error: the HTTP/2 form of a garbled reply
    case CURLE_HTTP2_STREAM:  // RST_STREAM: the HTTP/2 form of a reset
      result.error = TransportError::kReceive;
      result.request_sent = true;
      break;
    case CURLE_UNSUPPORTED_PROTOCOL:
      // After the request went out: libcurl's "Received HTTP/0.9 when not allowed" (the
      // peer answered with something that is not HTTP). Before it: the URL's scheme is not
      // http(s).
    case CURLE_BAD_FUNCTION_ARGUMENT:
      // After the request went out: libcurl 7.88's header store refusing a folded first
      // header line (" X: 1" right after the status line). Either way a garbled reply.
      if (maybe_written) {
        result.error = TransportError::kReceive;
        result.request_sent = true;
        break;
      }
      result.error = TransportError::kOther;
      result.request_sent = false;
      break;
    case CURLE_WRITE_ERROR:        // our callbacks refused data: only when over a limit
    case CURLE_FILESIZE_EXCEEDED:  // Content-Length above CURLOPT_MAXFILESIZE_LARGE
      if (exchange->over_budget) {
        result.error = TransportError::kReceive;
        result.request_sent = true;
        result.error_detail = response_budget_.RefusalDetail();
        break;
      }
      if (exchange->too_large || code == CURLE_FILESIZE_EXCEEDED) {
        result.error = TransportError::kTooLarge;
        result.request_sent = true;
        result.error_detail =
            exchange->head_too_large
                ? absl::StrCat("response too large: its head is over the limit of ",
                               options_.max_response_head_bytes, " bytes or ",
                               options_.max_response_header_count, " fields")
                : absl::StrCat("response too large (limit ", options_.max_response_bytes,
                               " bytes)");
        break;
      }
      [[fallthrough]];
    default:
      result.error = TransportError::kOther;
      result.request_sent = maybe_written;
      break;
  }
  if (code != CURLE_OK && result.error_detail.empty()) {
    result.error_detail = CurlDetail(code, exchange->error_buffer);
  }
  HttpCallback done = std::move(exchange->done);
  // Release the handle and buffers before user code runs.
  ReleaseHandle(exchange->easy);
  exchange->easy = nullptr;
  exchange.reset();
  in_flight_.fetch_sub(1, std::memory_order_acq_rel);
  std::move(done)(std::move(result));
}

void CurlTransport::FailOther(std::unique_ptr<Exchange> exchange, const char* detail) {
  HttpResult result;
  result.error = TransportError::kOther;
  result.error_detail = detail;
  result.elapsed = Since(exchange->start);
  // An exchange cut short by shutdown may already be on the wire.
  result.request_sent = exchange->easy != nullptr && MaybeWritten(exchange->easy);
  HttpCallback done = std::move(exchange->done);
  if (exchange->easy != nullptr) {
    ReleaseHandle(exchange->easy);
    exchange->easy = nullptr;
  }
  exchange.reset();
  in_flight_.fetch_sub(1, std::memory_order_acq_rel);
  std::move(done)(std::move(result));
}

void CurlTransport::FailAllPending() {
  // Detach everything first, so that a callback calling Send() (which now fails inline) or
  // inspecting InFlight() sees a consistent transport.
  std::vector<std::unique_ptr<Exchange>> pending;
  {
    absl::MutexLock lock(&mu_);
    pending.reserve(active_.size() + finished_.size() + refused_.size());
    for (auto& [easy, exchange] : active_) {
      curl_multi_remove_handle(multi_, easy);
      pending.push_back(std::move(exchange));
    }
    active_.clear();
    // Finished or refused while the loop was stopping: they end as shut down too.
    for (auto& [exchange, code] : finished_) pending.push_back(std::move(exchange));
    finished_.clear();
    for (auto& exchange : refused_) pending.push_back(std::move(exchange));
    refused_.clear();
  }
  for (auto& exchange : pending) FailOther(std::move(exchange), kShutDown);
}

}  // namespace inspection::http
