// The emulator's HTTP layer, over raw sockets so that every byte is ours: GET bodies,
// bodiless POSTs, resets, and a Stop() that does not wait for idle connections.
#include "sandbox/emulator/http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <string>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include "absl/synchronization/notification.h"

namespace inspection::sandbox {
namespace {

using ::testing::HasSubstr;

constexpr int kDeadlineMs = 20000;

// A blocking client socket connected to 127.0.0.1:port (-1 on failure).
int Connect(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
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

void SendAll(int fd, const std::string& data) {
  size_t sent = 0;
  while (sent < data.size()) {
    const ssize_t n = ::send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    ASSERT_GT(n, 0);
    sent += static_cast<size_t>(n);
  }
}

// Reads until the peer closes (or the deadline). `error` gets errno of a failed read.
std::string ReadToEnd(int fd, int* error = nullptr) {
  std::string out;
  char buffer[4096];
  for (;;) {
    pollfd p = {fd, POLLIN, 0};
    if (::poll(&p, 1, kDeadlineMs) <= 0) break;
    const ssize_t n = ::recv(fd, buffer, sizeof(buffer), 0);
    if (n < 0 && error != nullptr) *error = errno;
    if (n <= 0) break;
    out.append(buffer, static_cast<size_t>(n));
  }
  return out;
}

// Reads until `needle` has arrived (or the peer closes, or the deadline).
std::string ReadUntil(int fd, const std::string& needle) {
  std::string out;
  char buffer[4096];
  while (out.find(needle) == std::string::npos) {
    pollfd p = {fd, POLLIN, 0};
    if (::poll(&p, 1, kDeadlineMs) <= 0) break;
    const ssize_t n = ::recv(fd, buffer, sizeof(buffer), 0);
    if (n <= 0) break;
    out.append(buffer, static_cast<size_t>(n));
  }
  return out;
}

size_t Count(const std::string& text, const std::string& what) {
  size_t count = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) {
    ++count;
  }
  return count;
}

// Answers "<method> <path> body=[<body>]" unless the path says otherwise.
class HttpServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = std::make_unique<HttpServer>(
        [this](const httplib::Request& request, httplib::Response& response) {
          if (request.path == "/reset") {
            HttpServer::ResetConnection();
            return;
          }
          if (request.path == "/pause") {
            paused_.Notify();
            pause_completed_ = server_->Pause(std::chrono::minutes(5));
          }
          response.set_content(request.method + " " + request.path + " body=[" + request.body + "]",
                               "text/plain");
        });
    auto port = server_->Bind("127.0.0.1", 0);
    ASSERT_TRUE(port.ok()) << port.status();
    port_ = *port;
    ASSERT_TRUE(server_->Serve(4).ok());
  }

  std::unique_ptr<HttpServer> server_;
  int port_ = 0;
  absl::Notification paused_;
  std::atomic<bool> pause_completed_{true};
};

TEST_F(HttpServerTest, ReadsTheBodyOfAGetAndServesTheNextRequestOnTheConnection) {
  const int fd = Connect(port_);
  ASSERT_GE(fd, 0);
  SendAll(fd,
          "GET /first HTTP/1.1\r\nHost: t\r\nContent-Length: 17\r\n\r\n"
          "{\"eventName\":\"x\"}"
          "GET /second HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
  const std::string answers = ReadToEnd(fd);
  ::close(fd);
  EXPECT_THAT(answers, HasSubstr("GET /first body=[{\"eventName\":\"x\"}]"));
  EXPECT_THAT(answers, HasSubstr("GET /second body=[]"));
  EXPECT_EQ(Count(answers, "HTTP/1.1 200 OK"), 2u) << answers;
}

TEST_F(HttpServerTest, APostWithoutALengthHasAnEmptyBody) {
  const int fd = Connect(port_);
  ASSERT_GE(fd, 0);
  SendAll(fd,
          "POST /empty HTTP/1.1\r\nHost: t\r\n\r\n"
          "POST /full HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok");
  const std::string answers = ReadToEnd(fd);
  ::close(fd);
  EXPECT_THAT(answers, HasSubstr("POST /empty body=[]"));
  EXPECT_THAT(answers, HasSubstr("POST /full body=[ok]"));
}

TEST_F(HttpServerTest, ResetConnectionAnswersNothingAndResets) {
  const int fd = Connect(port_);
  ASSERT_GE(fd, 0);
  SendAll(fd, "GET /reset HTTP/1.1\r\nHost: t\r\n\r\n");
  int error = 0;
  const std::string answer = ReadToEnd(fd, &error);
  ::close(fd);
  EXPECT_EQ(answer, "");
  EXPECT_EQ(error, ECONNRESET);
  // The server goes on.
  const int next = Connect(port_);
  SendAll(next, "GET /after HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
  EXPECT_THAT(ReadToEnd(next), HasSubstr("GET /after body=[]"));
  ::close(next);
}

TEST_F(HttpServerTest, StopCutsPausesShortAndClosesIdleConnections) {
  // An idle keep-alive connection, after one answered request.
  const int idle = Connect(port_);
  ASSERT_GE(idle, 0);
  SendAll(idle, "GET /one HTTP/1.1\r\nHost: t\r\n\r\n");
  ASSERT_THAT(ReadUntil(idle, "body=[]"), HasSubstr("GET /one body=[]"));
  // A request held in a five-minute pause.
  const int held = Connect(port_);
  ASSERT_GE(held, 0);
  SendAll(held, "GET /pause HTTP/1.1\r\nHost: t\r\n\r\n");
  ASSERT_TRUE(paused_.WaitForNotificationWithTimeout(absl::Milliseconds(kDeadlineMs)));

  const auto start = std::chrono::steady_clock::now();
  server_->Stop();
  // Bounded by nothing but the work itself: no keep-alive or pause timeout is waited out.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  EXPECT_FALSE(pause_completed_);
  EXPECT_TRUE(server_->stopping());
  // The held request was still answered; both connections are closed.
  EXPECT_THAT(ReadToEnd(held), HasSubstr("GET /pause body=[]"));
  EXPECT_EQ(ReadToEnd(idle), "");
  ::close(held);
  ::close(idle);
  server_->Stop();  // idempotent
}

TEST_F(HttpServerTest, BindFailsOnAPortInUse) {
  HttpServer other([](const httplib::Request&, httplib::Response&) {});
  EXPECT_EQ(other.Bind("127.0.0.1", port_).status().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace inspection::sandbox
