#ifndef FUZZ_VERBATIM_PEER_H_
#define FUZZ_VERBATIM_PEER_H_

// Loopback helpers of the fuzz targets that drive the real network code in-process.
//   VerbatimPeer:  plays the vendor for the transport targets: each connection's request is
//                  read to its blank line, answered with the current fuzz input verbatim,
//                  and closed.
//   OneShotClient: plays the client for the HTTP server target: one fresh connection, the
//                  input written, the write side shut, the answer read until close.
// Both bound every wait, so a stuck peer shows as a failed check, not as a hung fuzzer.

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

#include "tests/support/loopback_listener.h"

namespace inspection::fuzzing {

// Waits for `events` on `fd` until `deadline`; false when the time ran out first.
inline bool WaitFor(int fd, short events, std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, static_cast<int>(left.count()));
    if (n > 0) return true;
    if (n == 0) return false;
    // EINTR: again.
  }
}

class VerbatimPeer {
 public:
  VerbatimPeer() : listener_(/*backlog=*/64) {
    wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    thread_ = std::thread([this] { Loop(); });
  }
  ~VerbatimPeer() {
    stopping_ = true;
    const uint64_t one = 1;
    (void)!::write(wake_fd_, &one, sizeof(one));
    thread_.join();
    ::close(wake_fd_);
  }
  VerbatimPeer(const VerbatimPeer&) = delete;
  VerbatimPeer& operator=(const VerbatimPeer&) = delete;

  bool ok() const { return listener_.ok() && wake_fd_ >= 0; }
  std::string BaseUrl() const { return listener_.BaseUrl(); }

  // What every connection accepted from now on is answered with.
  void SetAnswer(std::string answer) {
    std::lock_guard<std::mutex> lock(mu_);
    answer_ = std::move(answer);
  }

 private:
  void Loop() {
    while (!stopping_) {
      pollfd fds[2] = {{listener_.fd(), POLLIN, 0}, {wake_fd_, POLLIN, 0}};
      if (::poll(fds, 2, -1) < 0) continue;
      if (fds[1].revents != 0) break;
      if (fds[0].revents == 0) continue;
      const int fd = ::accept4(listener_.fd(), nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      Serve(fd);
      ::close(fd);
    }
  }

  void Serve(int fd) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    // The request head (a GET: no body). A client that gives up early is fine too.
    std::string head;
    char buffer[4096];
    while (head.find("\r\n\r\n") == std::string::npos && head.size() < 64 * 1024) {
      if (!WaitFor(fd, POLLIN, deadline)) return;
      const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
      if (n <= 0) return;
      head.append(buffer, static_cast<size_t>(n));
    }
    std::string answer;
    {
      std::lock_guard<std::mutex> lock(mu_);
      answer = answer_;
    }
    size_t sent = 0;
    while (sent < answer.size()) {
      if (!WaitFor(fd, POLLOUT, deadline)) return;
      const ssize_t n =
          ::send(fd, answer.data() + sent, answer.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n <= 0) {
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
        return;  // the client went away (it may stop reading at a limit)
      }
      sent += static_cast<size_t>(n);
    }
    // The end of the answer: the client sees EOF after the last byte.
    ::shutdown(fd, SHUT_WR);
  }

  testing::LoopbackListener listener_;
  int wake_fd_ = -1;
  std::atomic<bool> stopping_{false};
  std::mutex mu_;
  std::string answer_;
  std::thread thread_;  // last: it uses everything above
};

struct OneShotResult {
  bool connected = false;
  bool closed = false;  // the server closed (EOF or reset) before the deadline
  std::string answer;
};

// Connects to 127.0.0.1:port, writes `input` (as far as the server takes it), shuts the
// write side and reads until the server closes or `within` passes.
inline OneShotResult OneShotExchange(int port, const std::string& input,
                                     std::chrono::milliseconds within) {
  OneShotResult result;
  const auto deadline = std::chrono::steady_clock::now() + within;
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return result;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<uint16_t>(port));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 &&
      errno != EINPROGRESS) {
    ::close(fd);
    return result;
  }
  if (!WaitFor(fd, POLLOUT, deadline)) {
    ::close(fd);
    return result;
  }
  result.connected = true;
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  // Write and read at once: a server may answer (and stop reading) before the input ends.
  size_t sent = 0;
  bool write_open = true;
  char buffer[16 * 1024];
  for (;;) {
    if (write_open && sent == input.size()) {
      ::shutdown(fd, SHUT_WR);
      write_open = false;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd p{fd, static_cast<short>(POLLIN | (write_open ? POLLOUT : 0)), 0};
    const int n = ::poll(&p, 1, static_cast<int>(left.count()));
    if (n < 0) continue;
    if (n == 0) break;
    if ((p.revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
      const ssize_t got = ::recv(fd, buffer, sizeof buffer, 0);
      if (got > 0) {
        result.answer.append(buffer, static_cast<size_t>(got));
        continue;
      }
      if (got == 0 || (errno != EAGAIN && errno != EINTR)) {
        result.closed = true;  // EOF or a reset
        break;
      }
    }
    if (write_open && (p.revents & POLLOUT) != 0) {
      const ssize_t put = ::send(fd, input.data() + sent, input.size() - sent, MSG_NOSIGNAL);
      if (put > 0) {
        sent += static_cast<size_t>(put);
      } else if (put < 0 && errno != EAGAIN && errno != EINTR) {
        write_open = false;  // the server stopped reading and reset: read what it said
      }
    }
  }
  ::close(fd);
  return result;
}

}  // namespace inspection::fuzzing

#endif  // FUZZ_VERBATIM_PEER_H_
