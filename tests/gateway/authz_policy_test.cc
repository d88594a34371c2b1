// The authorization policy: gRPC's authz policy JSON (gRFC A43), parsed and evaluated, and
// its file watched without a restart.
#include "gateway/security/authz_policy.h"

#include <chrono>
#include <fstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/synchronization/mutex.h"
#include "tests/support/temp_dir.h"
#include "tests/support/wait.h"

namespace inspection::security {
namespace {

using ::inspection::testing::TempDir;
using ::inspection::testing::WaitUntil;
using ::testing::HasSubstr;

constexpr char kPolicy[] = R"({
  "name": "gateway",
  "deny_rules": [
    {"name": "b-no-webhook-writes",
     "source": {"principals": ["spiffe://test/client-b"]},
     "request": {"paths": ["/inspection.v1.EventConfigService/Update*"]}}
  ],
  "allow_rules": [
    {"name": "a-preprod-only",
     "source": {"principals": ["spiffe://test/client-a"]},
     "request": {"headers": [{"key": "x-vendor-account", "values": ["preprod"]}]}},
    {"name": "b-everything", "source": {"principals": ["*/client-b"]}},
    {"name": "anyone-health", "request": {"paths": ["/grpc.health.v1.Health/*"]}}
  ]
})";

// A TLS caller whose certificate has these URI SANs and subject.
AuthzPeer Cert(std::vector<std::string> uri_sans, std::string subject = "CN=workload") {
  AuthzPeer peer;
  peer.authenticated = true;
  peer.uri_sans = std::move(uri_sans);
  peer.subject = std::move(subject);
  return peer;
}

AuthzRequest Call(AuthzPeer peer, std::string path,
                  std::vector<std::pair<std::string, std::string>> headers = {}) {
  return AuthzRequest{std::move(peer), std::move(path), std::move(headers)};
}

TEST(AuthzPolicyTest, DenyRulesFirstThenAllowRulesThenDeny) {
  auto policy = AuthzPolicy::Parse(kPolicy);
  ASSERT_TRUE(policy.ok()) << policy.status();
  const auto& p = **policy;
  const std::string update = "/inspection.v1.EventConfigService/UpdateWebhookConfig";
  const std::string get = "/inspection.v1.EventConfigService/GetWebhookConfig";
  // A: only with x-vendor-account: preprod.
  EXPECT_TRUE(
      p.Evaluate(Call(Cert({"spiffe://test/client-a"}), get, {{"x-vendor-account", "preprod"}}))
          .allowed);
  EXPECT_FALSE(p.Evaluate(Call(Cert({"spiffe://test/client-a"}), get)).allowed);
  EXPECT_FALSE(
      p.Evaluate(Call(Cert({"spiffe://test/client-a"}), get, {{"x-vendor-account", "prod"}}))
          .allowed);
  // B: everything but the EventConfigService writes (deny rules win).
  EXPECT_TRUE(p.Evaluate(Call(Cert({"spiffe://test/client-b"}), get)).allowed);
  const AuthzDecision denied = p.Evaluate(Call(Cert({"spiffe://test/client-b"}), update));
  EXPECT_FALSE(denied.allowed);
  EXPECT_EQ(denied.rule, "b-no-webhook-writes");
  // Without a certificate: only what a rule without a source allows.
  EXPECT_TRUE(p.Evaluate(Call(AuthzPeer(), "/grpc.health.v1.Health/Check")).allowed);
  EXPECT_FALSE(p.Evaluate(Call(AuthzPeer(), get)).allowed);
  // A principal matches when any of the caller's URI SANs does.
  EXPECT_TRUE(
      p.Evaluate(Call(Cert({"spiffe://test/other", "spiffe://test/client-b"}), get)).allowed);
  // Never the common name on its own: the subject is matched whole.
  EXPECT_FALSE(p.Evaluate(Call(Cert({}, "CN=spiffe://test/client-a"), get,
                               {{"x-vendor-account", "preprod"}}))
                   .allowed);
}

TEST(AuthzPolicyTest, MalformedPoliciesAreRefusedNamingThePlace) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"not json", "not a JSON object"},
      {R"({"name": "p"})", "allow_rules"},
      {R"({"name": "p", "allow_rules": [{"name": "r"}], "extra": 1})", "unknown field \"extra\""},
      {R"({"allow_rules": []})", "\"name\""},
      {R"({"name": "p", "allow_rules": [{"name": "r", "request": {"headers": [{"key": ":path",
          "values": ["x"]}]}}]})",
       "allow_rules[0].request.headers[0]"},
      {R"({"name": "p", "allow_rules": [{"name": "r", "request": {"headers": [{"key":
          "grpc-timeout", "values": ["x"]}]}}]})",
       "cannot be matched"},
      {R"({"name": "p", "deny_rules": [{"name": "r", "source": {"principals": "x"}}],
          "allow_rules": [{"name": "r"}]})",
       "deny_rules[0].source.principals"},
  };
  for (const auto& [text, message] : cases) {
    auto policy = AuthzPolicy::Parse(text);
    ASSERT_FALSE(policy.ok()) << text;
    EXPECT_EQ(policy.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(policy.status().message()), HasSubstr(message)) << text;
  }
}

TEST(AuthzPolicyWatcherTest, AChangedFileTakesEffectAndABrokenOneKeepsTheLastGoodPolicy) {
  TempDir dir;
  const std::string path = dir.File("policy.json");
  auto write = [&](const std::string& text) {
    std::ofstream(path + ".tmp") << text;
    std::rename((path + ".tmp").c_str(), path.c_str());
  };
  write(kPolicy);
  absl::Mutex mu;
  int errors = 0;
  auto watcher = AuthzPolicyWatcher::Start(path, std::chrono::seconds(1), [&](const absl::Status&) {
    absl::MutexLock lock(&mu);
    ++errors;
  });
  ASSERT_TRUE(watcher.ok()) << watcher.status();
  const AuthzRequest a_default =
      Call(Cert({"spiffe://test/client-a"}), "/inspection.v1.TokenService/CreateToken");
  EXPECT_FALSE((*watcher)->Evaluate(a_default).allowed);
  write(R"({"name": "open", "allow_rules": [{"name": "all"}]})");
  EXPECT_TRUE(
      WaitUntil([&] { return (*watcher)->Evaluate(a_default).allowed; }, std::chrono::seconds(20)));
  write("{ broken");
  EXPECT_TRUE(WaitUntil(
      [&] {
        absl::MutexLock lock(&mu);
        return errors == 1;
      },
      std::chrono::seconds(20)));
  EXPECT_TRUE((*watcher)->Evaluate(a_default).allowed) << "the last good policy stays";

  EXPECT_EQ(
      AuthzPolicyWatcher::Start(dir.File("missing.json"), std::chrono::seconds(1)).status().code(),
      absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace inspection::security
