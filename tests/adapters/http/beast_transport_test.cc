// What BeastTransport does beyond the HttpTransport contract (http_transport_test.cc runs
// that against both transports): its connection pool (keep-alive, limits, the queue of
// requests waiting for a connection, dead kept-alive connections), its settings, and TLS
// (trust, session resumption, the handshake's time budget).
#include "adapters/http/beast_transport.h"

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/support/fake_vendor.h"
#include "tests/support/http_results.h"
#include "tests/support/loopback_listener.h"
#include "tests/support/raw_tcp_server.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_pki.h"
#include "tests/support/tls_ping_server.h"
#include "tests/support/wait.h"

namespace inspection::http {
namespace {

using ::inspection::testing::FakeVendor;
using ::inspection::testing::HttpResults;
using ::inspection::testing::LoopbackListener;
using ::inspection::testing::RawTcpServer;
using ::inspection::testing::ScriptedResponse;
using ::inspection::testing::SendAndWait;
using ::inspection::testing::TempDir;
using ::inspection::testing::TestPki;
using ::inspection::testing::TlsPingServer;
using ::inspection::testing::WaitUntil;
using ::testing::HasSubstr;

constexpr std::chrono::milliseconds kDeadline{30000};

HttpRequest Get(std::string url, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  HttpRequest request;
  request.method = "GET";
  request.url = std::move(url);
  request.timeout = timeout;
  return request;
}

ScriptedResponse Reply(int status, std::string body) {
  ScriptedResponse response;
  response.status = status;
  response.body = std::move(body);
  return response;
}

std::unique_ptr<BeastTransport> Make(BeastTransportOptions options = {}) {
  auto created = BeastTransport::Create(std::move(options));
  EXPECT_TRUE(created.ok()) << created.status();
  return created.ok() ? std::move(*created) : nullptr;
}

HttpResult Exchange(HttpTransport& transport, HttpRequest request) {
  return SendAndWait(transport, std::move(request));
}

TEST(BeastTransportTest, SequentialRequestsShareOneKeptAliveConnection) {
  FakeVendor vendor;
  ASSERT_TRUE(vendor.Start());
  vendor.RespondWith(Reply(200, R"({"ok":true})"));
  auto transport = Make();
  ASSERT_NE(transport, nullptr);

  for (int i = 0; i < 20; ++i) {
    const HttpResult result = Exchange(*transport, Get(vendor.BaseUrl() + "/x"));
    ASSERT_EQ(result.error, TransportError::kNone) << result.error_detail;
    EXPECT_EQ(result.response.body, R"({"ok":true})");
  }
  EXPECT_EQ(transport->ConnectionsOpened(), 1u);
  EXPECT_EQ(vendor.RequestCount(), 20u);
}

TEST(BeastTransportTest, ARequestThatMustNotBeResentAlwaysGetsAFreshConnection) {
  FakeVendor vendor;
  ASSERT_TRUE(vendor.Start());
  vendor.RespondWith(Reply(200, "{}"));
  auto transport = Make();
  ASSERT_NE(transport, nullptr);
  ASSERT_EQ(Exchange(*transport, Get(vendor.BaseUrl() + "/warm")).error, TransportError::kNone);

  HttpRequest once = Get(vendor.BaseUrl() + "/damage");
  once.method = "POST";
  once.body = "{}";
  once.reuse_connection = false;
  const HttpResult result = Exchange(*transport, std::move(once));

  ASSERT_EQ(result.error, TransportError::kNone) << result.error_detail;
  EXPECT_EQ(transport->ConnectionsOpened(), 2u);
  EXPECT_EQ(vendor.RequestCount(), 2u);
}

// The server answers the first request on a connection as if keeping it alive, then closes
// the connection when the second request arrives on it (what a server whose idle timer just
// fired does). The transport sends that request again, once, on a new connection.
TEST(BeastTransportTest, ARequestOnAKeptAliveConnectionTheServerDroppedIsSentAgainOnce) {
  RawTcpServer server(RawTcpServer::Mode::kReplyThenDropSecond,
                      "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
  ASSERT_TRUE(server.Start());
  auto transport = Make();
  ASSERT_NE(transport, nullptr);

  const HttpResult first = Exchange(*transport, Get(server.BaseUrl() + "/first"));
  ASSERT_EQ(first.error, TransportError::kNone) << first.error_detail;
  const HttpResult second = Exchange(*transport, Get(server.BaseUrl() + "/second"));

  ASSERT_EQ(second.error, TransportError::kNone) << second.error_detail;
  EXPECT_EQ(second.response.body, "ok");
  EXPECT_TRUE(second.request_sent);
  const std::vector<std::string> heads = server.RequestHeads();
  ASSERT_EQ(heads.size(), 3u);
  EXPECT_THAT(heads[0], HasSubstr("GET /first "));
  EXPECT_THAT(heads[1], HasSubstr("GET /second "));
  EXPECT_THAT(heads[2], HasSubstr("GET /second "));
  EXPECT_EQ(transport->ConnectionsOpened(), 2u);
}

// The server closes every connection after its answer, without saying so (no
// "Connection: close"). The next request finds the closed connection in the pool before
// using it, or re-sends once; either way it gets its answer and the server saw it once.
TEST(BeastTransportTest, AConnectionTheServerClosedWhileIdleCostsNoFailedRequest) {
  RawTcpServer server(RawTcpServer::Mode::kReply, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
  ASSERT_TRUE(server.Start());
  auto transport = Make();
  ASSERT_NE(transport, nullptr);

  for (int i = 0; i < 3; ++i) {
    const HttpResult result = Exchange(*transport, Get(server.BaseUrl() + "/x"));
    ASSERT_EQ(result.error, TransportError::kNone) << i << ": " << result.error_detail;
    EXPECT_EQ(result.response.body, "ok");
  }
  EXPECT_EQ(server.RequestHeads().size(), 3u);
  EXPECT_EQ(transport->ConnectionsOpened(), 3u);
}

// A quiet transport does not keep sockets past max_idle: the sweep closes them, and the
// next request opens a new connection.
TEST(BeastTransportTest, IdleConnectionsArePrunedAfterMaxIdle) {
  FakeVendor vendor;
  ASSERT_TRUE(vendor.Start());
  vendor.RespondWith(Reply(200, "{}"));
  BeastTransportOptions options;
  options.max_idle = std::chrono::milliseconds(200);
  auto transport = Make(options);
  ASSERT_NE(transport, nullptr);

  ASSERT_EQ(Exchange(*transport, Get(vendor.BaseUrl() + "/a")).error, TransportError::kNone);
  EXPECT_EQ(transport->IdleConnections(), 1u);
  EXPECT_TRUE(WaitUntil([&] { return transport->IdleConnections() == 0; }, kDeadline));

  ASSERT_EQ(Exchange(*transport, Get(vendor.BaseUrl() + "/b")).error, TransportError::kNone);
  EXPECT_EQ(transport->ConnectionsOpened(), 2u);
}

TEST(BeastTransportTest, RequestsBeyondTheConnectionLimitWaitForAFreeConnection) {
  FakeVendor vendor;
  ASSERT_TRUE(vendor.Start());
  ScriptedResponse hold = Reply(200, "{}");
  hold.kind = ScriptedResponse::Kind::kHold;
  vendor.RespondWith(hold);
  BeastTransportOptions options;
  options.max_total_connections = 2;
  auto transport = Make(options);
  ASSERT_NE(transport, nullptr);

  HttpResults results;
  constexpr int kRequests = 6;
  for (int i = 0; i < kRequests; ++i) {
    transport->Send(Get(vendor.BaseUrl() + "/q?i=" + std::to_string(i), kDeadline),
                    results.Callback());
  }
  ASSERT_TRUE(vendor.WaitForHeld(2, kDeadline));
  // Two connections carry two requests; the other four wait in the transport, unsent.
  EXPECT_EQ(transport->ConnectionsOpened(), 2u);
  EXPECT_EQ(transport->InFlight(), static_cast<size_t>(kRequests));

  vendor.RespondWith(Reply(200, R"({"done":true})"));
  vendor.ReleaseHeld();
  ASSERT_TRUE(results.WaitFor(kRequests));
  for (const HttpResult& result : results.Take()) {
    EXPECT_EQ(result.error, TransportError::kNone) << result.error_detail;
    EXPECT_EQ(result.response.status, 200);
  }
  EXPECT_EQ(transport->ConnectionsOpened(), 2u);
  EXPECT_EQ(vendor.RequestCount(), static_cast<size_t>(kRequests));
  EXPECT_EQ(transport->InFlight(), 0u);
}

TEST(BeastTransportTest, ARequestStillWaitingForAConnectionTimesOutUnsent) {
  FakeVendor vendor;
  ASSERT_TRUE(vendor.Start());
  ScriptedResponse hold = Reply(200, "{}");
  hold.kind = ScriptedResponse::Kind::kHold;
  vendor.RespondWith(hold);
  BeastTransportOptions options;
  options.max_host_connections = 1;
  auto transport = Make(options);
  ASSERT_NE(transport, nullptr);
  HttpResults held;
  transport->Send(Get(vendor.BaseUrl() + "/held", kDeadline), held.Callback());
  ASSERT_TRUE(vendor.WaitForHeld(1, kDeadline));

  const HttpResult queued =
      Exchange(*transport, Get(vendor.BaseUrl() + "/queued", std::chrono::milliseconds(300)));

  EXPECT_EQ(queued.error, TransportError::kTimeout) << queued.error_detail;
  EXPECT_FALSE(queued.request_sent);
  EXPECT_GE(queued.elapsed, std::chrono::milliseconds(300));
  EXPECT_EQ(vendor.RequestCount(), 1u);
  vendor.RespondWith(Reply(200, "{}"));
  vendor.ReleaseHeld();
  ASSERT_TRUE(held.WaitFor(1));
  EXPECT_EQ(held.Take().front().error, TransportError::kNone);
}

// A peer that completes the TCP handshake (the kernel's backlog) and never reads: an 8 MiB
// request fills the socket buffers, the rest waits on the loop, and the request's timeout
// ends it. Another vendor's calls on the same transport go through meanwhile.
TEST(BeastTransportTest, ANonReadingPeerCostsItsTimeoutAndBlocksNobodyElse) {
  LoopbackListener silent;  // never accepts, so never reads
  ASSERT_TRUE(silent.ok());
  const std::string silent_url = silent.BaseUrl();
  FakeVendor vendor;
  ASSERT_TRUE(vendor.Start());
  vendor.RespondWith(Reply(200, R"({"ok":true})"));
  auto transport = Make();
  ASSERT_NE(transport, nullptr);

  HttpResults stuck;
  HttpRequest upload = Get(silent_url + "/upload", std::chrono::milliseconds(500));
  upload.method = "POST";
  upload.body.assign(size_t{8} << 20, 'x');
  const auto sent = std::chrono::steady_clock::now();
  transport->Send(std::move(upload), stuck.Callback());
  // Sent while the upload is stuck: answered at once, not after it.
  for (int i = 0; i < 5; ++i) {
    const HttpResult ok = Exchange(*transport, Get(vendor.BaseUrl() + "/meanwhile"));
    EXPECT_EQ(ok.error, TransportError::kNone) << ok.error_detail;
    EXPECT_LT(ok.elapsed, std::chrono::milliseconds(400));
  }
  ASSERT_TRUE(stuck.WaitFor(1));
  const HttpResult timed_out = stuck.Take().front();
  EXPECT_EQ(timed_out.error, TransportError::kTimeout) << timed_out.error_detail;
  EXPECT_TRUE(timed_out.request_sent);
  EXPECT_GE(std::chrono::steady_clock::now() - sent, std::chrono::milliseconds(500));
  EXPECT_EQ(transport->InFlight(), 0u);
}

TEST(BeastTransportTest, UrlsItCannotSendAreRefusedWithoutQuotingThem) {
  auto transport = Make();
  ASSERT_NE(transport, nullptr);
  for (const char* url : {"ftp://127.0.0.1/x", "http://user:secret-pw@127.0.0.1/x",
                          "http://127.0.0.1:99999/x", "http:///x", "http://127.0.0.1/a b"}) {
    const HttpResult result = Exchange(*transport, Get(url));
    EXPECT_EQ(result.error, TransportError::kOther) << url;
    EXPECT_FALSE(result.request_sent) << url;
    EXPECT_THAT(result.error_detail, ::testing::Not(HasSubstr("secret-pw")));
  }
  EXPECT_EQ(transport->ConnectionsOpened(), 0u);
}

TEST(BeastTransportTest, CreateRefusesSettingsThatCannotWork) {
  BeastTransportOptions no_connect;
  no_connect.connect_timeout = std::chrono::milliseconds(0);
  EXPECT_EQ(BeastTransport::Create(no_connect).status().code(), absl::StatusCode::kInvalidArgument);
  BeastTransportOptions no_body;
  no_body.max_response_bytes = 0;
  EXPECT_EQ(BeastTransport::Create(no_body).status().code(), absl::StatusCode::kInvalidArgument);
  BeastTransportOptions missing_ca;
  missing_ca.ca_file = "/nonexistent/vendor-ca.pem";
  const auto refused = BeastTransport::Create(missing_ca);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(), HasSubstr("/nonexistent/vendor-ca.pem"));
}

TEST(BeastTransportTlsTest, TrustsTheConfiguredCaReusesTheConnectionAndResumesTheSession) {
  TempDir dir;
  TestPki pki(dir.path());
  ASSERT_TRUE(pki.ok()) << pki.error();
  ASSERT_TRUE(pki.Issue("server", "vendor.test", "IP:127.0.0.1,DNS:localhost")) << pki.error();
  TlsPingServer server(pki);
  ASSERT_TRUE(server.ok());
  BeastTransportOptions trusting;
  trusting.ca_file = pki.Path("ca.pem");
  auto transport = Make(trusting);
  ASSERT_NE(transport, nullptr);

  // By address (no SNI; the certificate's IP entry) and by name (SNI, DNS entry).
  for (const char* host : {"127.0.0.1", "localhost"}) {
    for (int i = 0; i < 3; ++i) {
      const HttpResult result = Exchange(*transport, Get(server.Url("/ping", host)));
      ASSERT_EQ(result.error, TransportError::kNone) << host << ": " << result.error_detail;
      EXPECT_EQ(result.response.status, 200);
      EXPECT_EQ(result.response.body, R"({"pong":true})");
    }
  }
  EXPECT_EQ(transport->ConnectionsOpened(), 2u);
  EXPECT_EQ(transport->TlsSessionsResumed(), 0u);

  // A request that asks for a fresh connection: a new handshake, resuming the last session.
  HttpRequest fresh = Get(server.Url("/ping", "127.0.0.1"));
  fresh.reuse_connection = false;
  const HttpResult result = Exchange(*transport, std::move(fresh));
  ASSERT_EQ(result.error, TransportError::kNone) << result.error_detail;
  EXPECT_EQ(transport->ConnectionsOpened(), 3u);
  EXPECT_EQ(transport->TlsSessionsResumed(), 1u);
}

TEST(BeastTransportTlsTest, AnUntrustedOrMisnamedCertificateIsAConnectErrorBeforeSending) {
  TempDir dir;
  TestPki pki(dir.path());
  ASSERT_TRUE(pki.ok()) << pki.error();
  ASSERT_TRUE(pki.Issue("server", "vendor.test", "DNS:localhost")) << pki.error();
  TlsPingServer server(pki);
  ASSERT_TRUE(server.ok());

  // The system's CAs do not know the throwaway one.
  auto system_only = Make();
  ASSERT_NE(system_only, nullptr);
  const HttpResult untrusted = Exchange(*system_only, Get(server.Url("/ping", "localhost")));
  EXPECT_EQ(untrusted.error, TransportError::kConnect) << untrusted.error_detail;
  EXPECT_FALSE(untrusted.request_sent);

  // Trusted CA, but the certificate names localhost only: 127.0.0.1 does not match it.
  BeastTransportOptions trusting;
  trusting.ca_file = pki.Path("ca.pem");
  auto transport = Make(trusting);
  ASSERT_NE(transport, nullptr);
  const HttpResult misnamed = Exchange(*transport, Get(server.Url("/ping", "127.0.0.1")));
  EXPECT_EQ(misnamed.error, TransportError::kConnect) << misnamed.error_detail;
  EXPECT_FALSE(misnamed.request_sent);
  const HttpResult named = Exchange(*transport, Get(server.Url("/ping", "localhost")));
  EXPECT_EQ(named.error, TransportError::kNone) << named.error_detail;
}

// A peer that accepts the TCP connection and never answers the TLS handshake: the connect
// budget ends it, before any byte of the request was sent.
TEST(BeastTransportTlsTest, AHandshakeThatNeverCompletesEndsAtTheConnectTimeout) {
  RawTcpServer silent(RawTcpServer::Mode::kReply, "");
  ASSERT_TRUE(silent.Start());
  BeastTransportOptions options;
  options.connect_timeout = std::chrono::milliseconds(300);
  auto transport = Make(options);
  ASSERT_NE(transport, nullptr);

  const HttpResult result = Exchange(
      *transport, Get("https://127.0.0.1:" + std::to_string(silent.port()) + "/x", kDeadline));

  EXPECT_EQ(result.error, TransportError::kTimeout) << result.error_detail;
  EXPECT_THAT(result.error_detail, HasSubstr("connect timed out"));
  EXPECT_FALSE(result.request_sent);
  EXPECT_LT(result.elapsed, std::chrono::milliseconds(4000));
}

}  // namespace
}  // namespace inspection::http
