#include "tests/support/raw_tcp_server.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <utility>

namespace inspection::testing {
namespace {

// How long a connection may take to send its request. Only a stuck client hits it.
constexpr int kReadTimeoutMs = 5000;

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// The Content-Length announced in a request head, or 0.
size_t ContentLength(const std::string& head) {
  const std::string lower = Lower(head);
  const std::string key = "\r\ncontent-length:";
  const size_t at = lower.find(key);
  if (at == std::string::npos) return 0;
  return static_cast<size_t>(std::strtoull(lower.c_str() + at + key.size(), nullptr, 10));
}

}  // namespace

RawTcpServer::RawTcpServer(Mode mode, std::string reply) : mode_(mode), reply_(std::move(reply)) {}

RawTcpServer::~RawTcpServer() {
  Stop();
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

bool RawTcpServer::Start() {
  listener_.emplace(/*backlog=*/128);
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (!listener_->ok() || wake_fd_ < 0) return false;
  port_ = listener_->port();
  // The socket listens already: connects succeed from here on, before the thread runs.
  thread_ = std::thread([this] { Loop(); });
  return true;
}

void RawTcpServer::Stop() {
  if (stopping_.exchange(true)) return;
  if (wake_fd_ >= 0) {
    const uint64_t one = 1;
    (void)!::write(wake_fd_, &one, sizeof(one));
  }
  if (thread_.joinable()) thread_.join();
}

std::string RawTcpServer::BaseUrl() const { return "http://127.0.0.1:" + std::to_string(port_); }

std::vector<std::string> RawTcpServer::RequestHeads() const {
  std::lock_guard<std::mutex> lock(mu_);
  return heads_;
}

void RawTcpServer::Loop() {
  while (!stopping_.load()) {
    pollfd fds[2] = {{listener_->fd(), POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) continue;  // EINTR
    if (fds[1].revents != 0) break;
    if (fds[0].revents == 0) continue;
    const int fd = ::accept4(listener_->fd(), nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    ServeConnection(fd);
  }
}

bool RawTcpServer::ReadRequest(int fd) {
  // Read the head, then the announced body: closing a socket with unread input sends an RST,
  // which could overtake the reply on the client side.
  std::string data;
  size_t head_end = std::string::npos;
  size_t wanted = 0;
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(kReadTimeoutMs);
  for (;;) {
    if (head_end == std::string::npos) {
      const size_t found = data.find("\r\n\r\n");
      if (found != std::string::npos) {
        head_end = found + 4;
        wanted = head_end + ContentLength(data.substr(0, head_end));
      }
    }
    if (head_end != std::string::npos && data.size() >= wanted) break;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0 || stopping_.load()) break;
    pollfd fds[2] = {{fd, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    if (::poll(fds, 2, static_cast<int>(left.count())) <= 0 || fds[1].revents != 0) break;
    char buffer[4096];
    const ssize_t n = ::recv(fd, buffer, sizeof(buffer), 0);
    if (n <= 0) break;
    data.append(buffer, static_cast<size_t>(n));
  }
  if (data.empty()) return false;
  std::lock_guard<std::mutex> lock(mu_);
  heads_.push_back(data.substr(0, head_end == std::string::npos ? data.size() : head_end - 2));
  return true;
}

void RawTcpServer::SendReply(int fd) {
  size_t sent = 0;
  while (sent < reply_.size()) {
    const ssize_t n = ::send(fd, reply_.data() + sent, reply_.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += static_cast<size_t>(n);
  }
}

void RawTcpServer::ServeConnection(int fd) {
  ReadRequest(fd);
  switch (mode_) {
    case Mode::kReset: {
      // Zero linger time turns close() into an abort: RST instead of FIN.
      const linger abort_on_close{1, 0};
      ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &abort_on_close, sizeof(abort_on_close));
      break;
    }
    case Mode::kReply:
      SendReply(fd);
      ::shutdown(fd, SHUT_WR);
      break;
    case Mode::kReplyThenDropSecond:
      // The connection stays open as if kept alive; the request that comes next on it is
      // read and the connection closed without an answer.
      SendReply(fd);
      ReadRequest(fd);
      break;
  }
  ::close(fd);
}

}  // namespace inspection::testing
