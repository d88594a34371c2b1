#include "tests/support/fake_vendor.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <string>

#include <httplib.h>

namespace inspection::testing {
namespace {

// httplib copies connection facts into Request::headers under these names; the client never
// sent them.
bool IsSyntheticHeader(const std::string& name) {
  return name == "REMOTE_ADDR" || name == "REMOTE_PORT" || name == "LOCAL_ADDR" ||
         name == "LOCAL_PORT";
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Local and peer port of a connected IPv4 socket, or false.
bool SocketPorts(int fd, int* local_port, int* peer_port) {
  sockaddr_in local{};
  sockaddr_in peer{};
  socklen_t local_length = sizeof(local);
  socklen_t peer_length = sizeof(peer);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_length) != 0 ||
      local.sin_family != AF_INET ||
      ::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_length) != 0) {
    return false;
  }
  *local_port = ntohs(local.sin_port);
  *peer_port = ntohs(peer.sin_port);
  return true;
}

// Calls `visit(fd)` for every open file descriptor of this process that is a connected
// IPv4 socket whose local port is `local_port`.
template <class Visit>
void ForEachConnectionOnPort(int local_port, Visit visit) {
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return;
  const int dir_fd = ::dirfd(dir);
  while (const dirent* entry = ::readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0' || fd == dir_fd) continue;
    int local = 0;
    int peer = 0;
    if (SocketPorts(static_cast<int>(fd), &local, &peer) && local == local_port) {
      visit(static_cast<int>(fd), peer);
    }
  }
  ::closedir(dir);
}

ScriptedResponse DefaultResponse() {
  ScriptedResponse response;
  response.status = 404;
  response.body = R"({"error":"no scripted response"})";
  return response;
}

}  // namespace

const std::string* RecordedRequest::Header(std::string_view lower_name) const {
  for (const auto& [name, value] : headers) {
    if (name == lower_name) return &value;
  }
  return nullptr;
}

FakeVendor::FakeVendor(FakeVendorOptions options)
    : options_(options), server_(std::make_unique<httplib::Server>()) {}

FakeVendor::~FakeVendor() { Stop(); }

bool FakeVendor::Start() {
  httplib::Server& server = *server_;
  server.set_tcp_nodelay(true);
  // httplib closes a connection after 5 requests by default, which makes clients reconnect
  // in the middle of a test; keep connections for the whole test instead.
  server.set_keep_alive_max_count(10000);
  // Replacing the default socket options is the only way to learn the listening socket's fd
  // (needed below); SO_REUSEADDR is what the default set too (SO_REUSEPORT makes no sense
  // for port 0).
  server.set_socket_options([this](int fd) {
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    listen_fd_ = fd;
  });
  // httplib calls this from the listener thread once it is running (is_running() is true, so
  // stop() works from then on); the pool's threads all exist when the constructor returns.
  // That is the "ready" signal httplib 0.11.4 lacks.
  const int threads = options_.threads > 0 ? options_.threads : 1;
  server.new_task_queue = [this, threads] {
    auto* pool = new httplib::ThreadPool(static_cast<size_t>(threads));
    {
      std::lock_guard<std::mutex> lock(mu_);
      serving_ = true;
    }
    progress_cv_.notify_all();
    return pool;
  };
  // httplib calls the logger after it has written a response (or failed to): the moment a
  // request that reached Serve() is finished with. Stop() waits for that before it cuts the
  // remaining connections.
  server.set_logger([this](const httplib::Request& request, const httplib::Response&) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (unfinished_.erase(&request) == 0) return;
    }
    progress_cv_.notify_all();
  });
  // One catch-all route per method; the body is read before the handler runs.
  const char* kAnyPath = R"([\s\S]*)";
  auto serve = [this](const httplib::Request& request, httplib::Response& response) {
    Serve(request, response);
  };
  server.Get(kAnyPath, serve);
  server.Post(kAnyPath, serve);
  server.Put(kAnyPath, serve);
  server.Patch(kAnyPath, serve);
  server.Delete(kAnyPath, serve);
  server.Options(kAnyPath, serve);

  port_ = server.bind_to_any_port("127.0.0.1");
  if (port_ <= 0 || listen_fd_ < 0) return false;
  // httplib listens with a backlog of 5, baked into the Debian .so. A burst of connects then
  // overflows the accept queue and the kernel drops SYNs, which costs the client a 1 s (then
  // 3 s...) retransmit, enough to trip a connect timeout. Calling listen() again on a
  // listening socket only updates its backlog (the kernel caps it at net.core.somaxconn).
  ::listen(listen_fd_, 4096);

  listener_ = std::thread([this] {
    server_->listen_after_bind();
    {
      std::lock_guard<std::mutex> lock(mu_);
      listener_done_ = true;
    }
    progress_cv_.notify_all();
  });
  std::unique_lock<std::mutex> lock(mu_);
  progress_cv_.wait(lock, [this] { return serving_ || listener_done_; });
  return serving_;
}

void FakeVendor::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopped_) return;
    stopped_ = true;
    stopping_ = true;
  }
  // Held and delayed handlers answer now, so their workers can finish.
  release_cv_.notify_all();
  if (!listener_.joinable()) return;
  // Closes the listening socket; the listener thread then joins the worker pool, and a worker
  // exits once its current request is answered.
  server_->stop();
  // Let the released requests' answers go out: the shutdown below makes httplib consider a
  // connection dead, and it would drop a response it has not written yet. Bounded, in case a
  // handler or a client that stopped reading keeps a worker busy.
  {
    std::unique_lock<std::mutex> lock(mu_);
    progress_cv_.wait_for(lock, std::chrono::seconds(5), [this] { return unfinished_.empty(); });
  }
  // A worker idling on a keep-alive connection only notices the stop after the keep-alive
  // timeout (5 s), and httplib offers no way to interrupt it; shutting down the read side of
  // the connection wakes it at once (it reads EOF and exits).
  ShutdownAcceptedSockets();
  listener_.join();
}

void FakeVendor::SetHandler(Handler handler) {
  auto shared = std::make_shared<const Handler>(std::move(handler));
  std::lock_guard<std::mutex> lock(mu_);
  handler_ = std::move(shared);
}

void FakeVendor::RespondWith(ScriptedResponse response) {
  SetHandler([response = std::move(response)](const RecordedRequest&) { return response; });
}

std::vector<RecordedRequest> FakeVendor::Requests() const {
  std::lock_guard<std::mutex> lock(mu_);
  return requests_;
}

size_t FakeVendor::RequestCount() const {
  std::lock_guard<std::mutex> lock(mu_);
  return requests_.size();
}

bool FakeVendor::WaitForRequests(size_t n, std::chrono::milliseconds deadline) const {
  std::unique_lock<std::mutex> lock(mu_);
  return progress_cv_.wait_for(lock, deadline, [&] { return requests_.size() >= n; });
}

int FakeVendor::HeldCount() const {
  std::lock_guard<std::mutex> lock(mu_);
  return held_count_;
}

bool FakeVendor::WaitForHeld(int n, std::chrono::milliseconds deadline) const {
  std::unique_lock<std::mutex> lock(mu_);
  return progress_cv_.wait_for(lock, deadline, [&] { return held_count_ >= n; });
}

void FakeVendor::ReleaseHeld() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++release_generation_;
  }
  release_cv_.notify_all();
}

std::string FakeVendor::BaseUrl() const { return "http://127.0.0.1:" + std::to_string(port_); }

void FakeVendor::Serve(const httplib::Request& request, httplib::Response& response) {
  RecordedRequest recorded;
  recorded.method = request.method;
  // `target` is the request-target as sent; `path` is httplib's decoded copy, a fallback.
  const std::string& target = request.target.empty() ? request.path : request.target;
  const size_t question = target.find('?');
  recorded.path = target.substr(0, question);
  if (question != std::string::npos) recorded.query = target.substr(question + 1);
  for (const auto& [name, value] : request.headers) {
    if (!IsSyntheticHeader(name)) recorded.headers.emplace_back(Lower(name), value);
  }
  recorded.body = request.body;

  std::shared_ptr<const Handler> handler;
  {
    std::lock_guard<std::mutex> lock(mu_);
    unfinished_.insert(&request);
    requests_.push_back(recorded);
    handler = handler_;
  }
  progress_cv_.notify_all();

  const ScriptedResponse scripted = handler != nullptr ? (*handler)(recorded) : DefaultResponse();
  Hold(scripted);

  response.status = scripted.status;
  for (const auto& [name, value] : scripted.headers) response.set_header(name, value);
  switch (scripted.kind) {
    case ScriptedResponse::Kind::kReset:
      ResetConnection(request);
      // httplib still writes this response; the write fails on the reset socket.
      response.set_header("Connection", "close");
      return;
    case ScriptedResponse::Kind::kTruncated: {
      // Promise one byte more than the body (at least one), send the body, then fail the
      // provider: httplib closes the connection mid-body.
      const size_t declared = scripted.body.size() + 1;
      response.set_content_provider(
          declared, scripted.content_type,
          [body = scripted.body](size_t offset, size_t, httplib::DataSink& sink) {
            if (offset < body.size()) sink.write(body.data() + offset, body.size() - offset);
            return false;
          });
      return;
    }
    case ScriptedResponse::Kind::kNormal:
    case ScriptedResponse::Kind::kHold:
      if (scripted.content_type.empty()) {
        response.body = scripted.body;
      } else {
        response.set_content(scripted.body, scripted.content_type);
      }
      return;
  }
}

void FakeVendor::Hold(const ScriptedResponse& scripted) {
  std::unique_lock<std::mutex> lock(mu_);
  if (scripted.kind == ScriptedResponse::Kind::kHold) {
    const unsigned long generation = release_generation_;
    ++held_count_;
    progress_cv_.notify_all();
    release_cv_.wait(lock, [&] { return stopping_ || release_generation_ != generation; });
    --held_count_;
    progress_cv_.notify_all();
  } else if (scripted.kind == ScriptedResponse::Kind::kNormal &&
             scripted.hold_for > std::chrono::milliseconds::zero()) {
    release_cv_.wait_for(lock, scripted.hold_for, [&] { return stopping_; });
  }
}

void FakeVendor::ResetConnection(const httplib::Request& request) const {
  // httplib hands handlers no socket, so find this connection among the process's fds by its
  // two ports (local = our port, peer = the client's). The worker serving it is blocked in
  // this handler, so the fd cannot be closed or reused meanwhile. connect(AF_UNSPEC)
  // disconnects a TCP socket with an RST but keeps the fd open: httplib closes it as usual
  // later, so nobody closes an fd twice.
  ForEachConnectionOnPort(port_, [&](int fd, int peer_port) {
    if (peer_port != request.remote_port) return;
    sockaddr unspecified{};
    unspecified.sa_family = AF_UNSPEC;
    ::connect(fd, &unspecified, sizeof(unspecified));
  });
}

void FakeVendor::ShutdownAcceptedSockets() const {
  // Only connections whose local port is ours are server-side ones: clients in this process
  // connect from ephemeral ports. shutdown() leaves the fd to httplib.
  ForEachConnectionOnPort(port_, [](int fd, int) { ::shutdown(fd, SHUT_RD); });
}

}  // namespace inspection::testing
