#include "tests/support/raw_tcp_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <limits>

namespace inspection::testing {
namespace {

// Milliseconds left until `end`, for poll().
int MillisecondsUntil(std::chrono::steady_clock::time_point end) {
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
  return static_cast<int>(std::clamp<int64_t>(left.count(), 0, std::numeric_limits<int>::max()));
}

// Reads what arrives into `out` until `done(out)`, the peer closes (true), or `deadline`
// passes (false).
template <class Done>
bool ReadWhile(int fd, std::chrono::milliseconds deadline, std::string* out, int* error,
               Done done) {
  const auto end = std::chrono::steady_clock::now() + deadline;
  char buffer[4096];
  while (!done(*out)) {
    pollfd p = {fd, POLLIN, 0};
    if (::poll(&p, 1, MillisecondsUntil(end)) <= 0) return false;
    const ssize_t n = ::recv(fd, buffer, sizeof(buffer), 0);
    if (n < 0 && error != nullptr) *error = errno;
    if (n <= 0) return true;
    out->append(buffer, static_cast<size_t>(n));
  }
  return false;
}

}  // namespace

int ConnectToLoopback(int port) { return ConnectToLoopbackFrom("127.0.0.1", port); }

int ConnectToLoopbackFrom(const std::string& source, int port, int receive_buffer) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (receive_buffer > 0 &&
      ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof(receive_buffer)) != 0) {
    ::close(fd);
    return -1;
  }
  if (source != "127.0.0.1") {
    sockaddr_in from{};
    from.sin_family = AF_INET;
    if (::inet_pton(AF_INET, source.c_str(), &from.sin_addr) != 1 ||
        ::bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof(from)) != 0) {
      ::close(fd);
      return -1;
    }
  }
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<uint16_t>(port));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

bool PipelineUntilTheServerStopsReading(int fd, const std::string& request,
                                        std::chrono::milliseconds deadline) {
  const auto end = std::chrono::steady_clock::now() + deadline;
  std::string batch;
  while (batch.size() < 16384) batch += request;
  size_t offset = 0;  // into batch, so that requests stay whole on the wire
  while (std::chrono::steady_clock::now() < end) {
    const ssize_t n =
        ::send(fd, batch.data() + offset, batch.size() - offset, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno != EAGAIN && errno != EWOULDBLOCK) return false;
      // Full: give the server a moment to read more; if it still takes nothing, it stopped.
      pollfd p = {fd, POLLOUT, 0};
      if (::poll(&p, 1, std::min(200, MillisecondsUntil(end))) == 0) return true;
      continue;
    }
    offset = (offset + static_cast<size_t>(n)) % batch.size();
  }
  return false;
}

bool SendAll(int fd, const std::string& data) {
  size_t sent = 0;
  while (sent < data.size()) {
    const ssize_t n = ::send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
  }
  return true;
}

std::string ReadToEnd(int fd, std::chrono::milliseconds deadline, int* error) {
  std::string out;
  ReadWhile(fd, deadline, &out, error, [](const std::string&) { return false; });
  return out;
}

std::string ReadUntil(int fd, const std::string& needle, std::chrono::milliseconds deadline) {
  std::string out;
  ReadWhile(fd, deadline, &out, nullptr, [&needle](const std::string& received) {
    return received.find(needle) != std::string::npos;
  });
  return out;
}

bool PeerCloses(int fd, std::chrono::milliseconds deadline, std::string* received) {
  std::string ignored;
  return ReadWhile(fd, deadline, received != nullptr ? received : &ignored, nullptr,
                   [](const std::string&) { return false; });
}

}  // namespace inspection::testing
