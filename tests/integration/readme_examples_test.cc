// Every `grpcurl` command of README.md's "Call it" section, run as printed (but for the address)
// against a gateway in front of a fake vendor that answers each endpoint with a spec-shaped body.
#include <fstream>
#include <set>

#include "gateway/config/config.h"
#include "gateway/security/authz_policy.h"
#include "nlohmann/json.hpp"
#include "tests/integration/gateway_fixture.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace inspection::testing {
namespace {

// Splits a shell command line on spaces, honouring single quotes (all the README uses).
std::vector<std::string> ShellWords(const std::string& line) {
  std::vector<std::string> words;
  std::string word;
  bool quoted = false, in_word = false;
  for (char c : line) {
    if (c == '\'') {
      quoted = !quoted;
      in_word = true;
    } else if (c == ' ' && !quoted) {
      if (in_word) words.push_back(word);
      word.clear();
      in_word = false;
    } else {
      word.push_back(c);
      in_word = true;
    }
  }
  if (in_word) words.push_back(word);
  return words;
}

std::string BodyFor(const RecordedRequest& request) {
  const std::string& path = request.path;
  if (path == "/apiV1/tokenmanager/token")
    return R"({"token": {"uid": "Zx81kQ", "tradeinStatus": 0}, "webApiVersion": "v2.5"})";
  if (path == "/apiV1/tokenmanager/test")
    return R"({"token": {"uid": "Zx81kQ", "tradeinStatus": 1}, "webApiVersion": "v2"})";
  if (path == "/apiV1/remarketing/removeBackground")
    return R"({"id": "rb", "path": "https://cdn.example.com/rb.jpg", "status": "success"})";
  if (path == "/apiV1/quality/image/list" || path == "/apiV1/quality/image")
    return R"({"id": "q", "status": 200, "data": []})";
  if (path == "/apiV1/damage/vehicle") return R"({"inspectionId": "insp_1"})";
  if (path == "/apiv1/inspection/search")
    return R"({"data": [], "paginationInfo": {"totalInspections": 0, "totalPages": 0,
               "currentPage": 1, "range": "0-0"}})";
  if (path == "/apiV1/eventmanager/configwebhook")
    return R"({"webhookHeaderKey": "change-me", "webhookUrl": null,
               "webhookUrlV2": "https://gateway.example.com/webhooks/v2"})";
  if (path == "/apiV1/eventmanager/configevent")
    return R"({"eventName": "createReport", "webhook": true})";
  return "{}";
}

TEST(ReadmeExamplesTest, EveryGrpcurlCommandWorksAsPrinted) {
  const char* grpcurl = std::getenv("GRPCURL");
  ASSERT_NE(grpcurl, nullptr) << "GRPCURL must name the grpcurl binary (make test sets it)";
  std::ifstream readme(std::string(SOURCE_DIR) + "/README.md");
  ASSERT_TRUE(readme.good());
  // The "Call it" section: one runnable example per service. (The streaming examples
  // further down hold placeholders and never end, by design.)
  std::vector<std::string> commands;
  bool in_section = false;
  for (std::string line; std::getline(readme, line);) {
    if (line.rfind("## ", 0) == 0) in_section = line == "## Call it";
    if (in_section && line.rfind("grpcurl ", 0) == 0) commands.push_back(line);
  }
  ASSERT_GE(commands.size(), 5u);

  FakeVendor vendor;
  ASSERT_TRUE(vendor.Start());
  vendor.SetHandler([](const RecordedRequest& request) {
    ScriptedResponse response;
    response.body = BodyFor(request);
    return response;
  });
  server::GatewayServerOptions options;
  options.grpc_addr = "127.0.0.1:0";
  options.vendor.base_url = vendor.BaseUrl();
  options.vendor.api_key = kApiKey;
  options.webapp_url = kWebappUrl;
  options.admin_port = 0;
  options.reflection = true;  // the README's commands use it (make run: --sandbox turns it on)
  TempDir temp;
  options.event_log_url = "sqlite:" + temp.File("events.db");
  auto gateway = server::GatewayServer::Start(std::move(options));
  ASSERT_TRUE(gateway.ok()) << gateway.status();
  const std::string target = absl::StrCat("127.0.0.1:", (*gateway)->grpc_port());

  std::set<std::string> services;
  for (const std::string& command : commands) {
    std::vector<std::string> words = ShellWords(command);
    words[0] = grpcurl;
    for (auto& word : words) {
      if (word == "localhost:50051") word = target;
      if (word.rfind("inspection.v1.", 0) == 0) services.insert(word.substr(0, word.find('/')));
    }
    const size_t before = vendor.RequestCount();
    Subprocess run(words);
    EXPECT_EQ(run.Wait(std::chrono::seconds(30)), 0) << command << "\n" << run.output();
    EXPECT_EQ(vendor.RequestCount(), before + 1) << "no vendor call for: " << command;
  }
  EXPECT_EQ(services,
            (std::set<std::string>{"inspection.v1.TokenService", "inspection.v1.ImageService",
                                   "inspection.v1.DamageService", "inspection.v1.InspectionService",
                                   "inspection.v1.EventConfigService"}));
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
    if (key == "api_key" || key == "webhook_key" || key == "webhook_previous_key") continue;
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
  const std::string claims = "spiffe://corp.example/ns/claims/sa/claims-api";
  const std::string update = "/inspection.v1.EventConfigService/UpdateWebhookConfig";
  EXPECT_FALSE((*readme_policy)->Evaluate({{claims}, update, {}}).allowed);
  EXPECT_TRUE((*readme_policy)
                  ->Evaluate({{claims}, "/inspection.v1.TokenService/CreateToken", {}})
                  .allowed);
  EXPECT_TRUE((*readme_policy)
                  ->Evaluate({{"spiffe://corp.example/ns/qa/sa/tests"},
                              "/inspection.v1.TokenService/CreateToken",
                              {{"x-vendor-account", "preprod"}}})
                  .allowed);
  EXPECT_FALSE((*readme_policy)
                   ->Evaluate({{"spiffe://corp.example/ns/qa/sa/tests"},
                               "/inspection.v1.TokenService/CreateToken",
                               {}})
                   .allowed);

  std::string text;
  auto overlay = security::ReadAuthzPolicyFile(
      std::string(SOURCE_DIR) + "/deploy/kustomize/overlays/production/authz-policy.json", &text);
  ASSERT_TRUE(overlay.ok()) << overlay.status();
  const std::string reporting = "spiffe://corp.example/ns/reporting/sa/dashboards";
  EXPECT_FALSE((*overlay)->Evaluate({{reporting}, update, {}}).allowed);
  EXPECT_TRUE(
      (*overlay)
          ->Evaluate({{reporting}, "/inspection.v1.InspectionService/SearchInspections", {}})
          .allowed);
  EXPECT_TRUE((*overlay)->Evaluate({{}, "/grpc.health.v1.Health/Check", {}}).allowed);
}

}  // namespace
}  // namespace inspection::testing
