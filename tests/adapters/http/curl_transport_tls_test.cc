// CurlTransport's reuse of what is expensive: easy handles (a pool), and for an https://
// vendor the trust anchor (upstream.ca_file) and TLS sessions. The server is cpp-httplib's
// SSLServer with a throwaway CA made at test time (tests/support/test_pki).
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "adapters/http/curl_transport.h"
#include "tests/support/fake_vendor.h"
#include "tests/support/http_results.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_pki.h"
#include "tests/support/tls_ping_server.h"

namespace inspection::http {
namespace {

using ::inspection::testing::FakeVendor;
using ::inspection::testing::ScriptedResponse;
using ::inspection::testing::SendAndWait;
using ::inspection::testing::TempDir;
using ::inspection::testing::TestPki;
using ::inspection::testing::TlsPingServer;
using ::testing::HasSubstr;

constexpr std::chrono::milliseconds kTimeout{10000};

HttpResult Exchange(CurlTransport& transport, const std::string& url) {
  HttpRequest request;
  request.method = "GET";
  request.url = url;
  request.timeout = kTimeout;
  return SendAndWait(transport, std::move(request));
}

// libcurl 8.1.0 and later: finished easy handles serve the next exchanges.
bool HandlesReused() { return curl_version_info(CURLVERSION_NOW)->version_num >= 0x080100; }

TEST(CurlTransportTlsTest, AnHttpsVendorIsTrustedThroughTheConfiguredCaFileOnly) {
  TempDir dir;
  TestPki pki(dir.path());
  ASSERT_TRUE(pki.ok()) << pki.error();
  ASSERT_TRUE(pki.Issue("server", "vendor.test", "IP:127.0.0.1,DNS:localhost")) << pki.error();
  TlsPingServer server(pki);
  ASSERT_TRUE(server.ok());

  // The connect timeout (which covers the handshake) as generous as the call's: what is
  // checked here is whom the transport trusts, not how fast a loaded machine (or a sanitizer
  // build) loads the system's CA bundle and completes a handshake.
  CurlTransportOptions trusting;
  trusting.ca_file = pki.Path("ca.pem");
  trusting.connect_timeout = kTimeout;
  auto transport = CurlTransport::Create(trusting);
  ASSERT_TRUE(transport.ok()) << transport.status();
  for (int i = 0; i < 5; ++i) {
    const HttpResult result = Exchange(**transport, server.Url("/ping"));
    ASSERT_EQ(result.error, TransportError::kNone) << result.error_detail;
    EXPECT_EQ(result.response.status, 200);
    EXPECT_EQ(result.response.body, R"({"pong":true})");
  }
  // Sequential calls share one easy handle (the pool), whatever their number; before
  // libcurl 8.1.0 each gets a fresh one (curl_transport.cc, HandlesMayBeReused).
  EXPECT_EQ((*transport)->HandlesCreated(), HandlesReused() ? 1u : 5u);

  // Without the CA the certificate is refused before any byte of the request is sent: a
  // connect failure, safe to retry on another path.
  CurlTransportOptions system_ca;
  system_ca.connect_timeout = kTimeout;
  auto system_only = CurlTransport::Create(system_ca);
  ASSERT_TRUE(system_only.ok()) << system_only.status();
  const HttpResult refused = Exchange(**system_only, server.Url("/ping"));
  EXPECT_EQ(refused.error, TransportError::kConnect) << refused.error_detail;
  EXPECT_FALSE(refused.request_sent);
}

TEST(CurlTransportTlsTest, AnUnreadableCaFileIsRefusedAtCreation) {
  CurlTransportOptions options;
  options.ca_file = "/nonexistent/vendor-ca.pem";
  auto transport = CurlTransport::Create(options);
  ASSERT_FALSE(transport.ok());
  EXPECT_EQ(transport.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(transport.status().message(), HasSubstr("/nonexistent/vendor-ca.pem"));
}

// Handles are reused across exchanges, and a reused handle carries nothing over from its
// previous exchange (curl_easy_reset): a POST's body and method do not leak into a GET.
TEST(CurlTransportTlsTest, AReusedHandleCarriesNothingOverFromItsLastExchange) {
  FakeVendor vendor;
  ASSERT_TRUE(vendor.Start());
  ScriptedResponse reply;
  reply.status = 200;
  reply.body = "{}";
  vendor.RespondWith(reply);
  auto transport = CurlTransport::Create({});
  ASSERT_TRUE(transport.ok()) << transport.status();

  HttpRequest post;
  post.method = "POST";
  post.url = vendor.BaseUrl() + "/first";
  post.body = R"({"a":1})";
  post.headers.emplace_back("x-first", "1");
  post.timeout = kTimeout;
  ASSERT_EQ(SendAndWait(**transport, std::move(post)).error, TransportError::kNone);

  const HttpResult got = Exchange(**transport, vendor.BaseUrl() + "/second");
  ASSERT_EQ(got.error, TransportError::kNone) << got.error_detail;
  EXPECT_EQ((*transport)->HandlesCreated(), HandlesReused() ? 1u : 2u);
  const auto requests = vendor.Requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[1].method, "GET");
  EXPECT_EQ(requests[1].path, "/second");
  EXPECT_TRUE(requests[1].body.empty());
  for (const auto& [name, value] : requests[1].headers) EXPECT_NE(name, "x-first");
}

}  // namespace
}  // namespace inspection::http
