// The shared HTTP/1.1 server (the webhook receiver's and the emulator's), over raw sockets
// so that every byte is ours: bodies read (or not) by the handler for every method,
// bodiless POSTs, unread bodies ending the connection, resets, pauses, error bodies, and a
// Stop() that does not wait for idle connections.
#include "adapters/http/http_server.h"

#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "tests/support/raw_tcp_client.h"
#include "tests/support/wait.h"

namespace inspection::http {
namespace {

using ::inspection::testing::ConnectToLoopback;
using ::inspection::testing::PeerCloses;
using ::inspection::testing::ReadToEnd;
using ::inspection::testing::ReadUntil;
using ::inspection::testing::SendAll;
using ::inspection::testing::WaitUntil;
using ::testing::HasSubstr;
using ::testing::Not;

// Generous for a loaded 2-core machine; every wait returns as soon as its condition holds.
constexpr std::chrono::milliseconds kDeadline{20000};

size_t Count(const std::string& text, const std::string& what) {
  size_t count = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) {
    ++count;
  }
  return count;
}

// Answers "<method> <path> body=[<body>]" after reading the whole body (any method), or
// 400 "read failed" when it cannot be read; unless the path says otherwise.
class HttpServerTest : public ::testing::Test {
 protected:
  void TearDown() override {
    Release();
    if (server_ != nullptr) server_->Stop();
  }

  void Start(HttpServerSettings settings = HttpServerSettings(), int threads = 4) {
    settings.threads = threads;
    server_ = std::make_unique<HttpServer>(
        [this](const httplib::Request& request, httplib::Response& response,
               const httplib::ContentReader& read_body) { Handle(request, response, read_body); },
        std::move(settings));
    auto port = server_->Bind("127.0.0.1", 0);
    ASSERT_TRUE(port.ok()) << port.status();
    port_ = *port;
    ASSERT_TRUE(server_->Serve().ok());
  }

  void Handle(const httplib::Request& request, httplib::Response& response,
              const httplib::ContentReader& read_body) {
    if (request.path == "/reset") {
      HttpServer::ResetConnection();
      response.set_content("never sent", "text/plain");
      return;
    }
    if (request.path == "/pause") {
      paused_.Notify();
      pause_completed_ = server_->Pause(std::chrono::minutes(5));
    }
    if (request.path == "/hold") {
      absl::MutexLock lock(&mu_);
      ++holding_;
      mu_.Await(absl::Condition(&released_));
    }
    if (request.path == "/throw") throw std::runtime_error("secret exception text");
    if (request.path == "/unread") {
      response.set_content("unread", "text/plain");
      return;
    }
    if (request.path == "/reading") reading_.Notify();
    std::string body;
    bool over_limit = false;
    const bool complete = read_body([&](const char* data, size_t size) {
      if (request.path == "/limit" && body.size() + size > 16) {
        over_limit = true;
        return false;
      }
      body.append(data, size);
      return true;
    });
    if (over_limit) {
      response.status = 413;
      response.set_content("too large", "text/plain");
      return;
    }
    if (!complete) {
      response.status = 400;
      response.set_content("read failed: " + request.method + " " + request.path, "text/plain");
      return;
    }
    std::string text = request.method + " " + request.path + " body=[" + body + "]";
    if (request.path == "/twice") {
      const bool again = read_body([](const char*, size_t) { return true; });
      absl::StrAppend(&text, " again=", again ? "true" : "false");
    }
    response.set_content(text, "text/plain");
  }

  // Sends `requests` on a new connection and returns all that comes back until the server
  // closes the connection (which it must: every exchange here ends with one).
  std::string Exchange(const std::string& requests) {
    const int fd = ConnectToLoopback(port_);
    EXPECT_GE(fd, 0);
    EXPECT_TRUE(SendAll(fd, requests));
    std::string received;
    EXPECT_TRUE(PeerCloses(fd, kDeadline, &received)) << "still open after: " << requests;
    ::close(fd);
    return received;
  }

  void Release() {
    absl::MutexLock lock(&mu_);
    released_ = true;
  }

  int Holding() {
    absl::MutexLock lock(&mu_);
    return holding_;
  }

  std::unique_ptr<HttpServer> server_;
  int port_ = 0;
  absl::Notification paused_;
  absl::Notification reading_;
  std::atomic<bool> pause_completed_{true};
  absl::Mutex mu_;
  int holding_ ABSL_GUARDED_BY(mu_) = 0;
  bool released_ ABSL_GUARDED_BY(mu_) = false;
};

// ---------------------------------------------------------------------------------------
// Bodies.

TEST_F(HttpServerTest, ReadsTheBodyOfAGetAndServesTheNextRequestOnTheConnection) {
  Start();
  const std::string answers = Exchange(
      "GET /first HTTP/1.1\r\nHost: t\r\nContent-Length: 17\r\n\r\n"
      "{\"eventName\":\"x\"}"
      "GET /second HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
  EXPECT_THAT(answers, HasSubstr("GET /first body=[{\"eventName\":\"x\"}]"));
  EXPECT_THAT(answers, HasSubstr("GET /second body=[]"));
  EXPECT_EQ(Count(answers, "HTTP/1.1 200 OK"), 2u) << answers;
}

TEST_F(HttpServerTest, ReadsTheBodyOfEveryMethod) {
  Start();
  const std::vector<std::string> methods = {"POST", "PUT", "PATCH", "DELETE", "OPTIONS", "GET"};
  std::string requests;
  for (const std::string& method : methods) {
    absl::StrAppend(&requests, method, " /m HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\nabc");
  }
  absl::StrAppend(&requests, "GET /last HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
  const std::string answers = Exchange(requests);
  for (const std::string& method : methods) {
    EXPECT_THAT(answers, HasSubstr(method + " /m body=[abc]")) << answers;
  }
  EXPECT_THAT(answers, HasSubstr("GET /last body=[]"));
}

TEST_F(HttpServerTest, APostWithoutALengthHasAnEmptyBody) {
  Start();
  const std::string answers = Exchange(
      "POST /empty HTTP/1.1\r\nHost: t\r\n\r\n"
      "POST /full HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok");
  EXPECT_THAT(answers, HasSubstr("POST /empty body=[]"));
  EXPECT_THAT(answers, HasSubstr("POST /full body=[ok]"));
}

TEST_F(HttpServerTest, AChunkedPostBodyIsReadDecodedAndTheConnectionGoesOn) {
  Start();
  const std::string answers = Exchange(
      "POST /chunked HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
      "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"
      "GET /next HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
  EXPECT_THAT(answers, HasSubstr("POST /chunked body=[hello world]"));
  EXPECT_THAT(answers, HasSubstr("GET /next body=[]"));
}

TEST_F(HttpServerTest, AnUnreadBodyEndsTheConnectionAfterTheAnswer) {
  Start();
  for (const char* method : {"POST", "GET"}) {
    // Left in the stream, the body would be parsed as a second request.
    const std::string smuggled = "POST /smuggled HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n";
    const std::string answers = Exchange(
        absl::StrCat(method, " /unread HTTP/1.1\r\nHost: t\r\nContent-Length: ", smuggled.size(),
                     "\r\n\r\n", smuggled));
    EXPECT_THAT(answers, HasSubstr("unread")) << method;
    EXPECT_THAT(answers, HasSubstr("Connection: close")) << method;
    EXPECT_THAT(answers, Not(HasSubstr("Keep-Alive"))) << method;
    EXPECT_THAT(answers, Not(HasSubstr("smuggled"))) << method;
    EXPECT_EQ(Count(answers, "HTTP/1.1 "), 1u) << answers;
  }
}

TEST_F(HttpServerTest, ABodyCutOffAtTheHandlersLimitStillLetsTheSenderReadTheAnswer) {
  Start();
  // 4 MiB: far more than the socket buffers hold. Like most clients, this one sends the
  // whole request before reading the answer, which the server writes after 16 bytes.
  // Closing with unread data would reset the connection: the rest of the send would fail
  // and the answer be lost. The server drains what comes instead (linger_max_bytes: 8 MiB).
  const std::string body(4 * 1024 * 1024, 'x');
  const std::string answer = Exchange(absl::StrCat(
      "POST /limit HTTP/1.1\r\nHost: t\r\nContent-Length: ", body.size(), "\r\n\r\n", body));
  EXPECT_THAT(answer, HasSubstr("HTTP/1.1 413"));
  EXPECT_THAT(answer, HasSubstr("too large"));
  EXPECT_THAT(answer, HasSubstr("Connection: close"));
}

// The drain after an unread body holds a worker: with one worker, a second connection is
// served only once the first one's drain has ended.
TEST_F(HttpServerTest, TheDrainAfterAnUnreadBodyEndsAtItsTimeout) {
  HttpServerSettings settings;
  settings.linger_timeout = std::chrono::milliseconds(200);
  Start(std::move(settings), /*threads=*/1);
  const int fd = ConnectToLoopback(port_);
  ASSERT_GE(fd, 0);
  // A body announced and never sent: the drain ends at its timeout, not at the body's end.
  ASSERT_TRUE(SendAll(fd, "POST /unread HTTP/1.1\r\nHost: t\r\nContent-Length: 1000000\r\n\r\n"));
  ASSERT_THAT(ReadUntil(fd, "unread", kDeadline), HasSubstr("unread"));
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THAT(Exchange("GET /next HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"),
              HasSubstr("GET /next body=[]"));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  ::close(fd);
}

TEST_F(HttpServerTest, TheDrainAfterAnUnreadBodyEndsAtItsByteBound) {
  HttpServerSettings settings;
  settings.linger_timeout = std::chrono::minutes(5);
  settings.linger_max_bytes = 64 * 1024;
  Start(std::move(settings), /*threads=*/1);
  const int fd = ConnectToLoopback(port_);
  ASSERT_GE(fd, 0);
  const std::string body(4 * 1024 * 1024, 'x');
  std::thread sender([fd, &body] {
    SendAll(fd, absl::StrCat("POST /unread HTTP/1.1\r\nHost: t\r\nContent-Length: ", body.size(),
                             "\r\n\r\n", body));
  });
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THAT(Exchange("GET /next HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"),
              HasSubstr("GET /next body=[]"));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  ::shutdown(fd, SHUT_RDWR);  // ends the sender if the kernel still buffers its body
  sender.join();
  ::close(fd);
}

TEST_F(HttpServerTest, BodiesThatCannotBeReadFailTheReadAndEndTheConnection) {
  Start();
  const std::vector<std::string> requests = {
      // Our GET reader knows Content-Length only.
      "GET /chunked-get HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
      "3\r\nabc\r\n0\r\n\r\n",
      "POST /not-a-number HTTP/1.1\r\nHost: t\r\nContent-Length: 3x\r\n\r\nabc",
      "GET /not-a-number HTTP/1.1\r\nHost: t\r\nContent-Length: abc\r\n\r\nabc",
      "POST /two-lengths HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n"
      "abcd",
      "POST /multipart HTTP/1.1\r\nHost: t\r\nContent-Type: multipart/form-data; boundary=b\r\n"
      "Content-Length: 4\r\n\r\n--b-",
  };
  for (const std::string& request : requests) {
    const std::string answer = Exchange(request);
    EXPECT_THAT(answer, HasSubstr("HTTP/1.1 400")) << request;
    EXPECT_THAT(answer, HasSubstr("read failed")) << request;
    EXPECT_THAT(answer, HasSubstr("Connection: close")) << request;
  }
}

TEST_F(HttpServerTest, TheBodyCanBeReadOnlyOnce) {
  Start();
  const std::string answers = Exchange(
      "POST /twice HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\nok"
      "GET /twice HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\nok"
      "GET /twice HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
  EXPECT_THAT(answers, HasSubstr("POST /twice body=[ok] again=false"));
  EXPECT_THAT(answers, HasSubstr("GET /twice body=[ok] again=false"));
  EXPECT_THAT(answers, HasSubstr("GET /twice body=[] again=false"));
  EXPECT_EQ(Count(answers, "HTTP/1.1 200 OK"), 3u) << answers;
}

// ---------------------------------------------------------------------------------------
// Error answers.

// A method httplib parses but has no route for: it answers 400 itself.
constexpr char kUnroutedRequest[] = "TRACE /pot HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";

TEST_F(HttpServerTest, ErrorBodyFillsTheAnswersHttplibProducesItself) {
  HttpServerSettings settings;
  settings.error_body = [](httplib::Response& response) {
    response.set_content(absl::StrCat("{\"status\":", response.status, "}"), "application/json");
  };
  Start(std::move(settings));
  const std::string answer = Exchange(kUnroutedRequest);
  EXPECT_THAT(answer, HasSubstr("HTTP/1.1 400"));
  EXPECT_THAT(answer, HasSubstr("{\"status\":400}"));
  // An error answer with a body of its own keeps it.
  const std::string own =
      Exchange("POST /limit HTTP/1.1\r\nHost: t\r\nContent-Length: 20\r\n\r\n01234567890123456789");
  EXPECT_THAT(own, HasSubstr("HTTP/1.1 413"));
  EXPECT_THAT(own, HasSubstr("too large"));
  EXPECT_THAT(own, Not(HasSubstr("status")));
}

TEST_F(HttpServerTest, WithoutErrorBodyHttplibsAnswersHaveNoBody) {
  Start();
  const std::string answer = Exchange(kUnroutedRequest);
  EXPECT_THAT(answer, HasSubstr("HTTP/1.1 400"));
  EXPECT_TRUE(answer.size() >= 4 && answer.substr(answer.size() - 4) == "\r\n\r\n") << answer;
}

TEST_F(HttpServerTest, AHandlerThatThrowsIsAnswered500WithoutTheExceptionsText) {
  HttpServerSettings settings;
  settings.exception_body = [](httplib::Response& response) {
    response.set_content("{\"error\":\"internal\"}", "application/json");
  };
  Start(std::move(settings));
  const std::string answers = Exchange(
      "GET /throw HTTP/1.1\r\nHost: t\r\n\r\n"
      "GET /after HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
  EXPECT_THAT(answers, HasSubstr("HTTP/1.1 500"));
  EXPECT_THAT(answers, HasSubstr("{\"error\":\"internal\"}"));
  EXPECT_THAT(answers, Not(HasSubstr("secret")));
  EXPECT_THAT(answers, Not(HasSubstr("EXCEPTION_WHAT")));
  EXPECT_THAT(answers, HasSubstr("GET /after body=[]"));  // the server goes on
}

TEST_F(HttpServerTest, WithoutExceptionBodyTheThrowersAnswerIsABare500) {
  Start();
  const std::string answer =
      Exchange("GET /throw HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
  EXPECT_THAT(answer, HasSubstr("HTTP/1.1 500"));
  EXPECT_THAT(answer, Not(HasSubstr("secret")));
  EXPECT_THAT(answer, Not(HasSubstr("EXCEPTION_WHAT")));
}

// ---------------------------------------------------------------------------------------
// Connections.

TEST_F(HttpServerTest, ResetConnectionAnswersNothingAndResets) {
  Start();
  const int fd = ConnectToLoopback(port_);
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(SendAll(fd, "GET /reset HTTP/1.1\r\nHost: t\r\n\r\n"));
  int error = 0;
  const std::string answer = ReadToEnd(fd, kDeadline, &error);
  ::close(fd);
  EXPECT_EQ(answer, "");
  EXPECT_EQ(error, ECONNRESET);
  // The server goes on.
  EXPECT_THAT(Exchange("GET /after HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"),
              HasSubstr("GET /after body=[]"));
}

TEST_F(HttpServerTest, KeepAliveCarriesManyRequestsOnOneConnection) {
  Start();
  const int fd = ConnectToLoopback(port_);
  ASSERT_GE(fd, 0);
  // httplib alone closes a connection after 5 requests.
  for (int i = 0; i < 20; ++i) {
    const std::string echo = absl::StrCat("POST /n", i, " body=[x]");
    ASSERT_TRUE(SendAll(
        fd, absl::StrCat("POST /n", i, " HTTP/1.1\r\nHost: t\r\nContent-Length: 1\r\n\r\nx")));
    const std::string answer = ReadUntil(fd, echo, kDeadline);
    ASSERT_THAT(answer, HasSubstr(echo));
    EXPECT_THAT(answer, Not(HasSubstr("Connection: close")));
  }
  ::close(fd);
}

TEST_F(HttpServerTest, AnIdleConnectionIsClosedAfterTheKeepAliveTimeout) {
  HttpServerSettings settings;
  settings.keep_alive_timeout = std::chrono::milliseconds(200);
  Start(std::move(settings));
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THAT(Exchange("GET /one HTTP/1.1\r\nHost: t\r\n\r\n"), HasSubstr("GET /one body=[]"));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST_F(HttpServerTest, ServesAsManyConnectionsAtOnceAsItHasThreads) {
  Start();  // 4 threads
  std::vector<std::thread> clients;
  std::atomic<int> answered{0};
  for (int i = 0; i < 4; ++i) {
    clients.emplace_back([this, &answered] {
      const std::string answer =
          Exchange("GET /hold HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
      if (answer.find("GET /hold body=[]") != std::string::npos) ++answered;
    });
  }
  EXPECT_TRUE(WaitUntil([this] { return Holding() == 4; }, kDeadline));
  Release();
  for (std::thread& client : clients) client.join();
  EXPECT_EQ(answered.load(), 4);
}

TEST_F(HttpServerTest, StopCutsPausesShortAndClosesIdleConnections) {
  Start();
  // An idle keep-alive connection, after one answered request.
  const int idle = ConnectToLoopback(port_);
  ASSERT_GE(idle, 0);
  ASSERT_TRUE(SendAll(idle, "GET /one HTTP/1.1\r\nHost: t\r\n\r\n"));
  ASSERT_THAT(ReadUntil(idle, "body=[]", kDeadline), HasSubstr("GET /one body=[]"));
  // A request held in a five-minute pause.
  const int held = ConnectToLoopback(port_);
  ASSERT_GE(held, 0);
  ASSERT_TRUE(SendAll(held, "GET /pause HTTP/1.1\r\nHost: t\r\n\r\n"));
  ASSERT_TRUE(paused_.WaitForNotificationWithTimeout(absl::FromChrono(kDeadline)));

  const auto start = std::chrono::steady_clock::now();
  server_->Stop();
  // Bounded by nothing but the work itself: no keep-alive or pause timeout is waited out.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  EXPECT_FALSE(pause_completed_);
  EXPECT_TRUE(server_->stopping());
  // The held request was still answered; both connections are closed.
  EXPECT_THAT(ReadToEnd(held, kDeadline), HasSubstr("GET /pause body=[]"));
  EXPECT_EQ(ReadToEnd(idle, kDeadline), "");
  ::close(held);
  ::close(idle);
  server_->Stop();                         // idempotent
  EXPECT_LT(ConnectToLoopback(port_), 0);  // nothing listens any more
}

TEST_F(HttpServerTest, StopCutsOffABodyBeingReceivedAndTheAnswerStillGoesOut) {
  Start();
  const int fd = ConnectToLoopback(port_);
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(SendAll(fd, "POST /reading HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\nabc"));
  ASSERT_TRUE(reading_.WaitForNotificationWithTimeout(absl::FromChrono(kDeadline)));
  const auto start = std::chrono::steady_clock::now();
  server_->Stop();
  // Not the 10 s read timeout.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(4));
  std::string answer;
  EXPECT_TRUE(PeerCloses(fd, kDeadline, &answer));
  ::close(fd);
  EXPECT_THAT(answer, HasSubstr("read failed: POST /reading"));
}

TEST_F(HttpServerTest, ASecondStopWaitsForTheFirst) {
  Start();
  const int fd = ConnectToLoopback(port_);
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(SendAll(fd, "GET /hold HTTP/1.1\r\nHost: t\r\n\r\n"));
  ASSERT_TRUE(WaitUntil([this] { return Holding() == 1; }, kDeadline));
  // The first Stop() waits for the held answer; so must the second.
  std::atomic<int> stopped{0};
  std::thread first([&] {
    server_->Stop();
    ++stopped;
  });
  ASSERT_TRUE(WaitUntil([this] { return server_->stopping(); }, kDeadline));
  std::thread second([&] {
    server_->Stop();
    ++stopped;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(stopped.load(), 0);
  Release();
  first.join();
  second.join();
  EXPECT_EQ(stopped.load(), 2);
  std::string answer;
  EXPECT_TRUE(PeerCloses(fd, kDeadline, &answer));
  ::close(fd);
  EXPECT_THAT(answer, HasSubstr("GET /hold body=[]"));
}

TEST_F(HttpServerTest, StopBeforeServeClosesTheBoundSocket) {
  HttpServer server(
      [](const httplib::Request&, httplib::Response&, const httplib::ContentReader&) {},
      HttpServerSettings());
  auto port = server.Bind("127.0.0.1", 0);
  ASSERT_TRUE(port.ok()) << port.status();
  server.Stop();
  EXPECT_LT(ConnectToLoopback(*port), 0);
  server.Stop();  // idempotent
}

TEST_F(HttpServerTest, BindFailsOnAPortInUse) {
  Start();
  HttpServer other(
      [](const httplib::Request&, httplib::Response&, const httplib::ContentReader&) {},
      HttpServerSettings());
  EXPECT_EQ(other.Bind("127.0.0.1", port_).status().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace inspection::http
