#ifndef TESTS_SUPPORT_WAIT_H_
#define TESTS_SUPPORT_WAIT_H_

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>

namespace inspection::testing {

// Waits until `pred()` is true or `deadline` has passed; returns the last value of `pred()`.
//
// For conditions nobody signals (a count in /proc, a file another process writes...). It
// polls with an exponential backoff from 50 us up to 5 ms, so it reacts within a few ms
// without spinning; it is not a fixed sleep. When the code under test offers a notification
// (FakeVendor::WaitForRequests/WaitForHeld, a callback that can signal an absl::Mutex
// condition), wait on that instead. `pred` must be cheap and thread-safe.
template <class Pred>
bool WaitUntil(Pred pred, std::chrono::milliseconds deadline) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point end = Clock::now() + deadline;
  std::chrono::microseconds pause{50};
  for (;;) {
    if (pred()) return true;
    const Clock::time_point now = Clock::now();
    if (now >= end) return pred();
    std::this_thread::sleep_for(std::min<Clock::duration>(pause, end - now));
    pause = std::min<std::chrono::microseconds>(pause * 2, std::chrono::milliseconds(5));
  }
}

// A loopback TCP port that nothing listens on: the OS picks a free port, which is then closed
// again. Connecting to it is refused (unless another process grabs it in between, which the
// kernel's ephemeral port rotation makes unlikely). Returns -1 if no socket can be bound.
inline int UnusedClosedPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  socklen_t length = sizeof(address);
  int port = -1;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
    port = ntohs(address.sin_port);
  }
  ::close(fd);
  return port;
}

}  // namespace inspection::testing

#endif  // TESTS_SUPPORT_WAIT_H_
