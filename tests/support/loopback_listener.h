#ifndef TESTS_SUPPORT_LOOPBACK_LISTENER_H_
#define TESTS_SUPPORT_LOOPBACK_LISTENER_H_

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <string>

namespace inspection::testing {

// A TCP socket listening on 127.0.0.1 at a port the OS picked (bind port 0), closed when the
// object goes. For tests that play the peer's socket calls themselves: a peer that never
// accepts or never reads (the kernel's backlog completes the handshake), one that streams an
// endless body. ok() is false when any step failed; the port is then 0.
class LoopbackListener {
 public:
  explicit LoopbackListener(int backlog = 8) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) return;
    const int one = 1;
    ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof(address);
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
        ::listen(fd_, backlog) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
      ::close(fd_);
      fd_ = -1;
      return;
    }
    port_ = ntohs(address.sin_port);
  }
  ~LoopbackListener() {
    if (fd_ >= 0) ::close(fd_);
  }
  LoopbackListener(const LoopbackListener&) = delete;
  LoopbackListener& operator=(const LoopbackListener&) = delete;

  bool ok() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  int port() const { return port_; }
  // "http://127.0.0.1:<port>"
  std::string BaseUrl() const { return "http://127.0.0.1:" + std::to_string(port_); }

  // The next connection's socket, or -1 when none comes within `within_ms` (so a test whose
  // client never connected still ends).
  int Accept(int within_ms) const {
    pollfd incoming{fd_, POLLIN, 0};
    if (::poll(&incoming, 1, within_ms) != 1) return -1;
    return ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
  }

 private:
  int fd_ = -1;
  int port_ = 0;
};

// Plays a vendor whose answer never ends: accepts one connection on `listener` (giving up
// after 30 s without one), reads the request, sends `start` (by default a head without a
// length: the body runs until the connection closes) and then `chunk` (64 KiB of 'x') over
// and over until the client goes away (EPIPE/ECONNRESET), or `cap` bytes if it never does;
// every byte sent is added to `streamed`. Another `start` and `chunk` make other endless
// answers: an endless chunk extension, trailer, or head of complete lines.
inline void ServeOneEndlessAnswer(const LoopbackListener& listener, size_t cap,
                                  std::atomic<size_t>& streamed,
                                  const std::string& start =
                                      "HTTP/1.1 200 OK\r\nConnection: "
                                      "close\r\n\r\n",
                                  const std::string& chunk = std::string(64 * 1024, 'x')) {
  const int fd = listener.Accept(30000);
  if (fd < 0) return;
  char head[4096];
  [[maybe_unused]] ssize_t read_bytes = ::recv(fd, head, sizeof head, 0);
  [[maybe_unused]] ssize_t sent = ::send(fd, start.data(), start.size(), MSG_NOSIGNAL);
  for (size_t mine = 0; mine < cap;) {
    const ssize_t n = ::send(fd, chunk.data(), chunk.size(), MSG_NOSIGNAL);
    if (n <= 0) break;
    mine += static_cast<size_t>(n);
    streamed += static_cast<size_t>(n);
  }
  ::close(fd);
}

}  // namespace inspection::testing

#endif  // TESTS_SUPPORT_LOOPBACK_LISTENER_H_
