// README.md's examples: the "Call it" block runs, in order, as a shell script against the
// real `inspection-gateway --sandbox` (what `make run` starts); the tables document every
// reason and every configuration key.
#include <fstream>
#include <set>

#include "absl/strings/str_replace.h"
#include "gateway/config/config.h"
#include "gateway/security/authz_policy.h"
#include "nlohmann/json.hpp"
#include "tests/integration/gateway_fixture.h"
#include "tests/support/gateway_binary.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace inspection::testing {
namespace {

// The ```sh block of README.md's "Call it" section, as written.
std::string CallItBlock() {
  std::ifstream readme(std::string(SOURCE_DIR) + "/README.md");
  std::string block;
  bool in_section = false, in_block = false;
  for (std::string line; std::getline(readme, line);) {
    if (line.rfind("## ", 0) == 0) in_section = line == "## Call it";
    if (!in_section) continue;
    if (!in_block && line == "```sh") {
      in_block = true;
    } else if (in_block && line == "```") {
      break;
    } else if (in_block) {
      block += line + "\n";
    }
  }
  return block;
}

TEST(ReadmeExamplesTest, TheCallItBlockRunsInOrderAgainstTheSandboxAsPrinted) {
  const char* grpcurl = std::getenv("GRPCURL");
  ASSERT_NE(grpcurl, nullptr) << "GRPCURL must name the grpcurl binary (make test sets it)";
  const std::string block = CallItBlock();
  ASSERT_FALSE(block.empty()) << "no ```sh block in README.md's \"Call it\" section";

  // make run: `inspection-gateway --sandbox`, here on free ports.
  TempDir temp;
  Subprocess gateway(
      {GATEWAY_BINARY, "--sandbox", "--grpc-addr=127.0.0.1:0", "--webhook-addr=127.0.0.1:0",
       "--admin-addr=127.0.0.1:0", "--event-log=sqlite:" + temp.File("events.db")},
      {"INSPECTION_API_KEY="});
  const ServingPorts ports = WaitUntilServing(gateway, std::chrono::seconds(30));
  ASSERT_GT(ports.grpc, 0) << gateway.output();
  const std::string target = absl::StrCat("127.0.0.1:", ports.grpc);

  // The block as a script: `grpcurl` from the test's tools, the address of this gateway.
  std::string grpcurl_dir(grpcurl);
  grpcurl_dir = grpcurl_dir.substr(0, grpcurl_dir.rfind('/'));
  const std::string script_file = temp.File("call-it.sh");
  {
    std::ofstream script(script_file);
    script << "set -euo pipefail\nexport PATH=\"" << grpcurl_dir << ":$PATH\"\nset -x\n"
           << absl::StrReplaceAll(block, {{"localhost:50051", target}});
  }
  Subprocess run({"/bin/bash", script_file});
  const int code = run.Wait(std::chrono::seconds(120));
  const std::string output = run.output();
  ASSERT_EQ(code, 0) << output;

  // Every service had its example, each one answered, and the token read back by uid is
  // the one just created.
  std::set<std::string> services;
  for (const char* service : {"TokenService", "ImageService", "DamageService", "InspectionService",
                              "EventConfigService"}) {
    if (block.find(absl::StrCat("inspection.v1.", service, "/")) != std::string::npos) {
      services.insert(service);
    }
  }
  EXPECT_EQ(services.size(), 5u) << block;
  EXPECT_NE(output.find("\"tradein_status\""), std::string::npos) << output;
  EXPECT_NE(output.find("\"inspection_id\""), std::string::npos) << output;
  EXPECT_NE(output.find("\"webhook_url_v2\""), std::string::npos) << output;

  // The examples leave the sandbox's webhooks pointing at this gateway (so the stream
  // examples that follow in the README receive events).
  const std::string webhook = absl::StrCat("127.0.0.1:", ports.webhook);
  EXPECT_NE(output.find(webhook), std::string::npos)
      << "GetWebhookConfig does not show the gateway's own webhook address " << webhook << "\n"
      << output;
  EXPECT_EQ(gateway.Stop(SIGTERM, std::chrono::seconds(20)), 0) << gateway.output();
}

// "The README documents every knob with its default": each key of the configuration (as
// --print-config shows it) has a row in the Configuration table, and a number or boolean
// default is the one in the row.
// The one list of ErrorInfo reasons (gateway/errors/api_error.h): each has its row in the
// README's Errors table.
TEST(ReadmeExamplesTest, TheErrorsTableDocumentsEveryReason) {
  std::ifstream readme(std::string(SOURCE_DIR) + "/README.md");
  std::string table;
  bool in_section = false;
  for (std::string line; std::getline(readme, line);) {
    if (line.rfind("## ", 0) == 0) in_section = line == "## Errors";
    if (in_section && line.rfind("| `", 0) == 0) table += line.substr(0, line.find(" | ")) + "\n";
  }
  ASSERT_FALSE(table.empty()) << "no Errors table in README.md";
  for (std::string_view reason : errors::kAllReasons) {
    EXPECT_NE(table.find("`" + std::string(reason) + "`"), std::string::npos)
        << "README.md's Errors table has no row for " << reason;
  }
}

TEST(ReadmeExamplesTest, TheConfigurationTableDocumentsEveryKeyWithItsDefault) {
  std::ifstream readme(std::string(SOURCE_DIR) + "/README.md");
  ASSERT_TRUE(readme.good());
  std::vector<std::string> rows;
  bool in_section = false;
  for (std::string line; std::getline(readme, line);) {
    if (line.rfind("## ", 0) == 0) in_section = line == "## Configuration";
    if (in_section && line.rfind("| `", 0) == 0) rows.push_back(line);
  }
  ASSERT_FALSE(rows.empty());
  // The defaults: only the required keys are given.
  auto config = config::LoadConfig(
      {"--upstream-url=https://vendor.example.com", "--webapp-url=https://webapp.example.com"},
      [](const std::string& name) {
        return name == "INSPECTION_API_KEY" ? std::optional<std::string>("k")
                                            : std::optional<std::string>();
      });
  ASSERT_TRUE(config.ok()) << config.status();
  const nlohmann::json dump = nlohmann::json::parse(config::DumpConfig(*config));
  std::vector<std::pair<std::string, nlohmann::json>> keys;
  std::function<void(const nlohmann::json&, const std::string&)> flatten =
      [&](const nlohmann::json& node, const std::string& prefix) {
        for (const auto& [name, value] : node.items()) {
          const std::string key = prefix.empty() ? name : prefix + "." + name;
          if (value.is_object()) {
            flatten(value, key);
          } else {
            keys.emplace_back(key, value);
          }
        }
      };
  flatten(dump, "");
  for (const auto& [key, value] : keys) {
    // The secrets themselves are documented through their *_file keys.
    if (key == "api_key" || key == "webhook_key" || key == "webhook_previous_key" ||
        key == "redis.sentinel_password") {
      continue;
    }
    const std::string last = key.substr(key.rfind('.') == std::string::npos ? 0 : key.rfind('.'));
    const std::string* row = nullptr;
    for (const std::string& candidate : rows) {
      const std::string first = candidate.substr(0, candidate.find(" | "));
      if (first.find("`" + key + "`") != std::string::npos ||
          (last[0] == '.' && first.find("`" + last + "`") != std::string::npos &&
           first.find("`" + key.substr(0, key.find('.') + 1)) != std::string::npos)) {
        row = &candidate;
        break;
      }
    }
    ASSERT_NE(row, nullptr) << "README's Configuration table has no row for `" << key << "`";
    if (value.is_number() || value.is_boolean()) {
      EXPECT_NE(row->find("`" + value.dump() + "`"), std::string::npos)
          << "`" << key << "` defaults to " << value.dump() << " but its README row says: " << *row;
    }
  }
}

// The authorization policies we ship or show: the README's example (section "Access
// control") and the production overlay's, read by the gateway's own parser, and meaning
// what their rule names say.
TEST(ReadmeExamplesTest, TheShippedAuthorizationPoliciesParseAndMeanWhatTheySay) {
  std::ifstream readme(std::string(SOURCE_DIR) + "/README.md");
  ASSERT_TRUE(readme.good());
  std::string policy_text;
  bool in_section = false;
  bool in_block = false;
  for (std::string line; std::getline(readme, line);) {
    if (line.rfind("## ", 0) == 0) in_section = line == "## Access control";
    if (!in_section) continue;
    if (line == "```json") {
      in_block = true;
      continue;
    }
    if (in_block && line == "```") break;
    if (in_block) absl::StrAppend(&policy_text, line, "\n");
  }
  ASSERT_FALSE(policy_text.empty()) << "no ```json block in README \"Access control\"";
  auto readme_policy = security::AuthzPolicy::Parse(policy_text);
  ASSERT_TRUE(readme_policy.ok()) << readme_policy.status();
  // A caller with a certificate whose URI SAN is `spiffe_id`.
  auto peer = [](const std::string& spiffe_id) {
    security::AuthzPeer out;
    out.authenticated = true;
    out.uri_sans = {spiffe_id};
    out.subject = "CN=workload";
    return out;
  };
  const security::AuthzPeer claims = peer("spiffe://corp.example/ns/claims/sa/claims-api");
  const std::string update = "/inspection.v1.EventConfigService/UpdateWebhookConfig";
  EXPECT_FALSE((*readme_policy)->Evaluate({claims, update, {}}).allowed);
  EXPECT_TRUE(
      (*readme_policy)->Evaluate({claims, "/inspection.v1.TokenService/CreateToken", {}}).allowed);
  EXPECT_TRUE((*readme_policy)
                  ->Evaluate({peer("spiffe://corp.example/ns/qa/sa/tests"),
                              "/inspection.v1.TokenService/CreateToken",
                              {{"x-vendor-account", "preprod"}}})
                  .allowed);
  EXPECT_FALSE((*readme_policy)
                   ->Evaluate({peer("spiffe://corp.example/ns/qa/sa/tests"),
                               "/inspection.v1.TokenService/CreateToken",
                               {}})
                   .allowed);

  std::string text;
  auto overlay = security::ReadAuthzPolicyFile(
      std::string(SOURCE_DIR) + "/deploy/kustomize/overlays/production/authz-policy.json", &text);
  ASSERT_TRUE(overlay.ok()) << overlay.status();
  const security::AuthzPeer reporting = peer("spiffe://corp.example/ns/reporting/sa/dashboards");
  EXPECT_FALSE((*overlay)->Evaluate({reporting, update, {}}).allowed);
  EXPECT_TRUE((*overlay)
                  ->Evaluate({reporting, "/inspection.v1.InspectionService/SearchInspections", {}})
                  .allowed);
  EXPECT_TRUE(
      (*overlay)->Evaluate({security::AuthzPeer(), "/grpc.health.v1.Health/Check", {}}).allowed);
}

}  // namespace
}  // namespace inspection::testing
