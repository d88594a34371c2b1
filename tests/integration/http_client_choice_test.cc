// upstream.http_client: which HTTP client the gateway builds for its vendor calls
// (server::ChooseHttpClient), and the real binary's start-up line that reports it.
#include <cstdlib>
#include <map>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "gateway/server/gateway_server.h"

namespace inspection::server {
namespace {

using ::testing::HasSubstr;

// The environment ChooseHttpClient reads in these tests instead of the process's.
std::map<std::string, std::string>& FakeEnvironment() {
  static std::map<std::string, std::string> environment;
  return environment;
}
const char* FakeGetenv(const char* name) {
  auto it = FakeEnvironment().find(name);
  return it == FakeEnvironment().end() ? nullptr : it->second.c_str();
}

class HttpClientChoiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    FakeEnvironment().clear();
    options_.vendor.base_url = "http://vendor.internal:8080";
  }
  HttpClientChoice Choose() const { return ChooseHttpClient(options_, &FakeGetenv); }

  GatewayServerOptions options_;
};

TEST_F(HttpClientChoiceTest, AutoPicksBeastForPlainHttpVendorsWithoutAProxy) {
  options_.accounts.push_back({"fleet", "HTTP://fleet.internal", "k"});
  const HttpClientChoice choice = Choose();
  EXPECT_EQ(choice.client, VendorHttpClient::kBeast);
  EXPECT_THAT(choice.reason, HasSubstr("http://"));
}

TEST_F(HttpClientChoiceTest, AutoPicksCurlWhenAnyVendorUrlIsHttps) {
  options_.accounts.push_back({"fleet", "https://api.vendor.example", "k"});
  const HttpClientChoice choice = Choose();
  EXPECT_EQ(choice.client, VendorHttpClient::kCurl);
  EXPECT_THAT(choice.reason, HasSubstr("https://"));

  options_.accounts.clear();
  options_.vendor.base_url = "https://api.vendor.example";
  EXPECT_EQ(Choose().client, VendorHttpClient::kCurl);
}

TEST_F(HttpClientChoiceTest, AutoPicksCurlWhenAProxyVariableIsSet) {
  for (const char* name : {"http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"}) {
    FakeEnvironment().clear();
    FakeEnvironment()[name] = "http://proxy.internal:3128";
    const HttpClientChoice choice = Choose();
    EXPECT_EQ(choice.client, VendorHttpClient::kCurl) << name;
    EXPECT_THAT(choice.reason, HasSubstr(name));
    // The reason names the variable, never its value (a proxy URL may carry credentials).
    EXPECT_THAT(choice.reason, ::testing::Not(HasSubstr("proxy.internal")));
  }
  // Set but empty counts as unset, as for libcurl; https_proxy does not apply to http://.
  FakeEnvironment().clear();
  FakeEnvironment()["http_proxy"] = "";
  FakeEnvironment()["https_proxy"] = "http://proxy.internal:3128";
  EXPECT_EQ(Choose().client, VendorHttpClient::kBeast);
}

TEST_F(HttpClientChoiceTest, AnExplicitChoiceWinsOverUrlsAndProxies) {
  FakeEnvironment()["http_proxy"] = "http://proxy.internal:3128";
  options_.http_client = VendorHttpClient::kBeast;
  EXPECT_EQ(Choose().client, VendorHttpClient::kBeast);
  EXPECT_THAT(Choose().reason, HasSubstr("upstream.http_client is beast"));
  options_.http_client = VendorHttpClient::kCurl;
  FakeEnvironment().clear();
  EXPECT_EQ(Choose().client, VendorHttpClient::kCurl);
  EXPECT_THAT(Choose().reason, HasSubstr("upstream.http_client is curl"));
}

}  // namespace
}  // namespace inspection::server
