// The authorization policy: gRPC's authz policy JSON (gRFC A43), parsed and evaluated, and
// its file watched without a restart.
#include "gateway/security/authz_policy.h"

#include <sys/stat.h>

#include <chrono>
#include <cstdio>
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

// The policy file was read without a bound (grpc.authz_policy_file=/dev/zero grew without
// end), at start-up and on every refresh; a FIFO blocked. Now at most 1 MiB of a regular file.
TEST(AuthzPolicyWatcherTest, APolicyFilePastOneMiBOrNotARegularFileIsRefusedAtStartAndRefresh) {
  TempDir dir;
  for (const std::string& path : {std::string("/dev/zero"), dir.File("fifo")}) {
    if (path != "/dev/zero") ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
    auto watcher = AuthzPolicyWatcher::Start(path, std::chrono::seconds(1));
    ASSERT_FALSE(watcher.ok()) << path;
    EXPECT_THAT(std::string(watcher.status().message()), HasSubstr("not a regular file")) << path;
  }
  std::string huge = R"({"name": "big", "allow_rules": [{"name": "all"}]})";
  huge.resize((1 << 20) + 1, ' ');
  const std::string path = dir.File("policy.json");
  std::ofstream(path) << huge;
  auto refused = AuthzPolicyWatcher::Start(path, std::chrono::seconds(1));
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(std::string(refused.status().message()),
              HasSubstr("larger than 1048576 bytes (1 MiB), the most a policy file may hold"));

  // On refresh: the last good policy stays, the error is reported.
  std::ofstream(path, std::ios::trunc) << kPolicy;
  absl::Mutex mu;
  std::string error;
  auto watcher =
      AuthzPolicyWatcher::Start(path, std::chrono::seconds(1), [&](const absl::Status& status) {
        absl::MutexLock lock(&mu);
        error = std::string(status.message());
      });
  ASSERT_TRUE(watcher.ok()) << watcher.status();
  const AuthzRequest a_default =
      Call(Cert({"spiffe://test/client-a"}), "/inspection.v1.TokenService/CreateToken");
  EXPECT_FALSE((*watcher)->Evaluate(a_default).allowed);
  std::ofstream(path + ".tmp") << huge;
  std::rename((path + ".tmp").c_str(), path.c_str());
  EXPECT_TRUE(WaitUntil(
      [&] {
        absl::MutexLock lock(&mu);
        return error.find("larger than 1048576 bytes") != std::string::npos;
      },
      std::chrono::seconds(20)));
  EXPECT_FALSE((*watcher)->Evaluate(a_default).allowed) << "the last good policy stays";
}

}  // namespace
}  // namespace inspection::security
