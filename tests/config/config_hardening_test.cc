// The settings loader against hostile or careless input: what a hostile review of it found
// (oversized and non-regular files, control characters and invalid UTF-8, duplicate keys,
// misspelled env variables, listen addresses that can never bind, rules between keys).
// Every error names the key and where the value came from, is bounded in size, and never
// holds a secret.
#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "adapters/vendor/event_mapper.h"
#include "gateway/config/config.h"
#include "gateway/settings/bounded_file.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace inspection::config {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kApiKey[] = "sk_live_hardening_K3y_value";
constexpr char kWebhookKey[] = "wh_hardening_K3y_value_42";

template <typename T>
std::string ErrorOf(const absl::StatusOr<T>& result) {
  return std::string(result.status().message());
}

class HardeningTest : public ::testing::Test {
 protected:
  HardeningTest() {
    std::string pattern = (std::filesystem::temp_directory_path() / "hardening.XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) ADD_FAILURE() << "mkdtemp failed";
    dir_ = pattern;
    env_["INSPECTION_API_KEY"] = kApiKey;
  }
  ~HardeningTest() override {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  std::string Write(const std::string& name, const std::string& contents) const {
    const std::string file = (std::filesystem::path(dir_) / name).string();
    std::ofstream(file, std::ios::binary) << contents;
    return file;
  }

  EnvLookup Env() const {
    return [this](const std::string& name) -> std::optional<std::string> {
      auto it = env_.find(name);
      if (it == env_.end()) return std::nullopt;
      return it->second;
    };
  }

  // The required flags, then `extra`.
  absl::StatusOr<GatewayConfig> Load(const std::vector<std::string>& extra) const {
    std::vector<std::string> args = {"--upstream-url=https://vendor.example.com",
                                     "--webapp-url=https://app.example.com"};
    args.insert(args.end(), extra.begin(), extra.end());
    return LoadConfig(args, Env());
  }

  // Load(), with the names of the variables in env_ (LoadConfig's check of unknown ones).
  absl::StatusOr<GatewayConfig> LoadWithEnvNames(const std::vector<std::string>& extra) const {
    std::vector<std::string> args = {"--upstream-url=https://vendor.example.com",
                                     "--webapp-url=https://app.example.com"};
    args.insert(args.end(), extra.begin(), extra.end());
    return LoadConfig(args, Env(), [this] {
      std::vector<std::string> names;
      for (const auto& [name, value] : env_) names.push_back(name);
      return names;
    });
  }

  absl::StatusOr<GatewayConfig> LoadWithFile(const std::string& contents,
                                             std::vector<std::string> extra = {}) const {
    extra.push_back("--config=" + Write("config.json", contents));
    return Load(extra);
  }

  std::string dir_;
  std::map<std::string, std::string> env_;
};

// ---------------------------------------------------------------------------------------------
// (10) Files are read up to a bound: a config file or a secret file that never ends (/dev/zero)
// or is merely huge stops start-up with an error, not std::bad_alloc.
// ---------------------------------------------------------------------------------------------

TEST_F(HardeningTest, AConfigFileThatNeverEndsIsRefusedAsNotARegularFile) {
  // A device is not read at all (it was read up to the 4 MiB bound before).
  const auto started = std::chrono::steady_clock::now();
  absl::StatusOr<GatewayConfig> config = Load({"--config", "/dev/zero"});
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(ErrorOf(config),
              AllOf(HasSubstr("config file /dev/zero"), HasSubstr("not a regular file")));
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(20));
}

// A FIFO without a writer blocked open() forever (and main blocked SIGINT and SIGTERM before
// loading: only SIGKILL ended it). Before the fix, these loads never returned: the test
// binary's timeout failed them.
TEST_F(HardeningTest, AFifoAsTheConfigFileOrASecretFileIsRefusedWithoutBlocking) {
  const std::string fifo = (std::filesystem::path(dir_) / "fifo").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  absl::StatusOr<GatewayConfig> config = Load({"--config=" + fifo});
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(ErrorOf(config),
              AllOf(HasSubstr("cannot read config file " + fifo), HasSubstr("not a regular file")));
  for (const char* flag : {"--api-key-file=", "--webhook-key-file="}) {
    config = Load({std::string(flag) + fifo});
    ASSERT_FALSE(config.ok()) << flag;
    EXPECT_THAT(ErrorOf(config), HasSubstr("not a regular file")) << flag;
  }
  env_["INSPECTION_CONFIG"] = fifo;
  config = Load({});
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(ErrorOf(config), HasSubstr("not a regular file"));
  // A directory too.
  config = Load({"--config=" + dir_});
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(ErrorOf(config), HasSubstr("is a directory"));
}

TEST_F(HardeningTest, AConfigFileJustOverTheBoundIsRefusedAndOneAtItIsRead) {
  std::string padded = R"({"log": {"level": "warn"}})";
  padded.resize(4 * 1024 * 1024, ' ');
  absl::StatusOr<GatewayConfig> config = LoadWithFile(padded);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->log_level, logging::Level::kWarn);

  padded.push_back(' ');
  config = LoadWithFile(padded);
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(ErrorOf(config), HasSubstr("larger than 4194304 bytes (4 MiB)"));
}

TEST_F(HardeningTest, SecretFilesAreReadUpToTheirBound) {
  // Every secret file key: the default account's and a named account's.
  // A device is not a regular file: not read.
  absl::StatusOr<GatewayConfig> config = Load({"--api-key-file=/dev/zero"});
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(ErrorOf(config),
              AllOf(HasSubstr("`api_key_file` /dev/zero"), HasSubstr("not a regular file")));

  config = Load({"--webhook-key-file=/dev/zero"});
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(ErrorOf(config),
              AllOf(HasSubstr("`webhook_key_file` /dev/zero"), HasSubstr("not a regular file")));

  const std::string huge_default = Write("huge-default-key", std::string(64 * 1024 + 1, 'k'));
  config = Load({"--api-key-file=" + huge_default});
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(ErrorOf(config), AllOf(HasSubstr("`api_key_file` " + huge_default),
                                     HasSubstr("larger than 65536 bytes (64 KiB)")));

  const std::string huge = Write("huge-key", std::string(64 * 1024 + 1, 'k'));
  config =
      Load({"--accounts={\"a\": {\"upstream_url\": \"https://a.example\", "
            "\"api_key_file\": \"" +
            huge + "\"}}"});
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(ErrorOf(config),
              AllOf(HasSubstr("`accounts.a.api_key_file` " + huge),
                    HasSubstr("larger than 65536 bytes (64 KiB)"), Not(HasSubstr("kkkk"))));

  const std::string at_bound = Write("key-at-bound", std::string(64 * 1024, 'k'));
  config = Load({"--api-key-file=" + at_bound});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->api_key.Reveal().size(), 64u * 1024);
}

TEST_F(HardeningTest, HelpStatesTheFileBounds) {
  EXPECT_THAT(UsageText(), AllOf(HasSubstr("at most 4194304 bytes (4 MiB)"),
                                 HasSubstr("at most 65536 bytes (64 KiB)")));
}

// ---------------------------------------------------------------------------------------------
// (11) Control characters and invalid UTF-8 in a string value are refused, naming the key and
// where it came from, without echoing the value. (12) An unknown key is shown escaped and cut,
// and a long one gets no "did you mean" (its edit distance took 20 s for 5 MB).
// ---------------------------------------------------------------------------------------------

// Each bad text, through a flag, env and the config file, for a path, a URL, a list item and
// an account's sub-key.
TEST_F(HardeningTest, ControlCharactersInAnyStringValueAreRefusedUnechoed) {
  for (const std::string& bad :
       {std::string("/tmp/MARK\x01x"), std::string("/tmp/MARK\x7f"), std::string("/tmp/MARK\n"),
        std::string("/tmp/MARK\0x", 11), std::string("/tmp/MARK\x1b[2J")}) {
    SCOPED_TRACE(nlohmann::json(bad).dump());
    absl::StatusOr<GatewayConfig> config = Load({"--api-key-file=" + bad});
    ASSERT_FALSE(config.ok());
    EXPECT_THAT(ErrorOf(config), AllOf(HasSubstr("invalid `api_key_file` from flag --api-key-file"),
                                       HasSubstr("control character"), Not(HasSubstr("MARK"))));

    env_["INSPECTION_WEBHOOK_PATH"] = bad;
    config = Load({});
    env_.erase("INSPECTION_WEBHOOK_PATH");
    ASSERT_FALSE(config.ok());
    EXPECT_THAT(ErrorOf(config),
                AllOf(HasSubstr("invalid `webhook.path` from env INSPECTION_WEBHOOK_PATH"),
                      HasSubstr("control character"), Not(HasSubstr("MARK"))));

    config =
        LoadWithFile(nlohmann::json({{"register_webhook_events", {"createReport", bad}}}).dump());
    ASSERT_FALSE(config.ok());
    EXPECT_THAT(ErrorOf(config),
                AllOf(HasSubstr("invalid `register_webhook_events` in "), HasSubstr("item 1"),
                      HasSubstr("control character"), Not(HasSubstr("MARK"))));

    config = LoadWithFile(
        nlohmann::json(
            {{"accounts", {{"a", {{"upstream_url", "https://a.example"}, {"api_key_file", bad}}}}}})
            .dump());
    ASSERT_FALSE(config.ok());
    EXPECT_THAT(ErrorOf(config), AllOf(HasSubstr("invalid `accounts.a.api_key_file` in "),
                                       HasSubstr("control character"), Not(HasSubstr("MARK"))));

    config = Load({"--upstream-url=https://vendor.example.com/MARK" + bad});
    ASSERT_FALSE(config.ok());
    EXPECT_THAT(ErrorOf(config), AllOf(HasSubstr("`upstream_url`"), Not(HasSubstr("MARK"))));
  }
}

TEST_F(HardeningTest, InvalidUtf8InAnyStringValueIsRefusedUnechoed) {
  for (const std::string& bad :
       {std::string("/tmp/MARK\xff"), std::string("/tmp/MARK\xc3("),
        std::string("/tmp/MARK\xed\xa0\x80"), std::string("/tmp/MARK\xc0\xaf"),
        std::string("/tmp/MARK\xe2\x82")}) {
    SCOPED_TRACE(nlohmann::json(bad).dump(-1, ' ', true, nlohmann::json::error_handler_t::replace));
    absl::StatusOr<GatewayConfig> config = Load({"--grpc-tls-cert-file=" + bad});
    ASSERT_FALSE(config.ok());
    EXPECT_THAT(ErrorOf(config),
                AllOf(HasSubstr("invalid `grpc.tls.cert_file` from flag --grpc-tls-cert-file"),
                      HasSubstr("not valid UTF-8"), Not(HasSubstr("MARK"))));

    env_["INSPECTION_DAMAGE_INSPECTION_ID_POINTERS"] = "/a," + bad;
    config = Load({});
    env_.erase("INSPECTION_DAMAGE_INSPECTION_ID_POINTERS");
    ASSERT_FALSE(config.ok());
    EXPECT_THAT(ErrorOf(config),
                AllOf(HasSubstr("invalid `damage.inspection_id_pointers` from env"),
                      HasSubstr("item 1"), HasSubstr("not valid UTF-8"), Not(HasSubstr("MARK"))));

    config =
        Load({"--accounts={\"a\": {\"upstream_url\": \"https://a.example\", "
              "\"api_key_file\": \"" +
              bad + "\"}}"});
    ASSERT_FALSE(config.ok());
    EXPECT_THAT(ErrorOf(config), Not(HasSubstr("MARK")));
  }
  // Valid UTF-8 beyond ASCII is a path like any other.
  const std::string key_file = Write("cl\xc3\xa9-api", "k\n");
  absl::StatusOr<GatewayConfig> config = Load({"--api-key-file=" + key_file});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->api_key_file, key_file);
}

TEST_F(HardeningTest, TheConfigPathItselfIsCheckedAndShownSafely) {
  absl::StatusOr<GatewayConfig> config = Load({"--config=/tmp/MARK\x1b[2J.json"});
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(ErrorOf(config),
              AllOf(HasSubstr("--config"), HasSubstr("control character"), Not(HasSubstr("\x1b"))));
  const std::string long_path = "/tmp/" + std::string(100000, 'p') + ".json";
  config = Load({"--config=" + long_path});
  ASSERT_FALSE(config.ok());
  EXPECT_LT(ErrorOf(config).size(), 1024u) << ErrorOf(config).substr(0, 300);
  EXPECT_THAT(ErrorOf(config), HasSubstr("\xe2\x80\xa6"));  // "…"
}

TEST_F(HardeningTest, UnknownKeysAreShownEscapedAndCut) {
  absl::StatusOr<GatewayConfig> config = LoadWithFile("{\"a\\u001b[2Jb\": 1}");
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(ErrorOf(config),
              AllOf(HasSubstr("unknown key `\"a\\u001b[2Jb\"`"), Not(HasSubstr("\x1b"))));

  config = LoadWithFile("{\"upstream\": {\"t\\u0000imeout_ms\\u007f\": 1}}");
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(ErrorOf(config),
              AllOf(HasSubstr("unknown key `upstream.\"t\\u0000imeout_ms\\u007f\"`"),
                    Not(HasSubstr(std::string(1, '\0')))));

  // Within the bound, a long name is shown whole; past it, cut with "…".
  const std::string long_name(200, 'z');
  config = LoadWithFile(nlohmann::json({{long_name, 1}}).dump());
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(ErrorOf(config),
              AllOf(HasSubstr("unknown key `" + std::string(128, 'z') + "\xe2\x80\xa6`"),
                    Not(HasSubstr(std::string(129, 'z')))));
}

TEST_F(HardeningTest, AHugeUnknownKeyIsAnsweredAtOnceWithABoundedMessage) {
  const std::string huge(3 << 20, 'q');  // under the config file's 4 MiB
  for (const std::string& text :
       {nlohmann::json({{huge, 1}}).dump(), nlohmann::json({{"upstream", {{huge, 1}}}}).dump(),
        nlohmann::json({{"accounts", {{"a", {{huge, "x"}}}}}}).dump(),
        nlohmann::json({{"accounts", {{huge, nlohmann::json::object()}}}}).dump()}) {
    const auto started = std::chrono::steady_clock::now();
    absl::StatusOr<GatewayConfig> config = LoadWithFile(text);
    const auto took = std::chrono::steady_clock::now() - started;
    ASSERT_FALSE(config.ok());
    EXPECT_LT(ErrorOf(config).size(), 1024u) << ErrorOf(config).substr(0, 300);
    EXPECT_THAT(ErrorOf(config), AllOf(HasSubstr("\xe2\x80\xa6"), Not(HasSubstr("did you mean"))));
    EXPECT_LT(took, std::chrono::seconds(5));
  }
  // A long unknown flag is cut too, with no suggestion.
  const auto started = std::chrono::steady_clock::now();
  absl::StatusOr<GatewayConfig> config = Load({"--" + std::string(1 << 20, 'f')});
  ASSERT_FALSE(config.ok());
  EXPECT_LT(ErrorOf(config).size(), 1024u);
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(5));
}

// Values echoed in a message (an enum's, an address, a pointer, an integer's text) are cut.
TEST_F(HardeningTest, EchoedValuesAreBounded) {
  const std::string huge(1 << 20, 'v');
  for (const std::vector<std::string>& args : {std::vector<std::string>{"--log-level=" + huge},
                                               {"--grpc-addr=" + huge},
                                               {"--admin-addr=" + huge + ":x"},
                                               {"--damage-inspection-id-pointers=" + huge},
                                               {"--upstream-timeout-ms=" + huge},
                                               {"--sandbox=" + huge},
                                               {"--upstream-http-client=caf\xc3\xa9" + huge}}) {
    absl::StatusOr<GatewayConfig> config = Load(args);
    ASSERT_FALSE(config.ok()) << args[0].substr(0, 30);
    EXPECT_LT(ErrorOf(config).size(), 1024u) << ErrorOf(config).substr(0, 300);
    EXPECT_THAT(ErrorOf(config), HasSubstr("\xe2\x80\xa6")) << ErrorOf(config).substr(0, 300);
  }
}

// ---------------------------------------------------------------------------------------------
// (4) Listen addresses are IP literals or localhost: a host name is refused at load, not when
// the listener starts (or, for gRPC, resolved to whatever the name means at that moment).
// ---------------------------------------------------------------------------------------------

TEST_F(HardeningTest, ListenAddressesMustBeIpLiteralsOrLocalhost) {
  for (const std::string& key : {"grpc_addr", "admin_addr", "webhook_addr"}) {
    std::string flag = key;
    flag.replace(flag.find('_'), 1, "-");
    std::string env = "INSPECTION_" + key;
    for (char& c : env) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    absl::StatusOr<GatewayConfig> config = Load({"--" + flag + "=gateway.internal:8080"});
    ASSERT_FALSE(config.ok()) << key;
    EXPECT_THAT(ErrorOf(config),
                AllOf(HasSubstr("invalid `" + key + "` from flag --" + flag),
                      HasSubstr("an IPv4 address, a bracketed IPv6 address ([::1]) or localhost"),
                      HasSubstr("gateway.internal:8080")));

    env_[env] = "metrics:9464";
    config = Load({});
    env_.erase(env);
    ASSERT_FALSE(config.ok()) << key;
    EXPECT_THAT(ErrorOf(config), HasSubstr("invalid `" + key + "` from env " + env));

    config = LoadWithFile(nlohmann::json({{key, "999.1.1.1:80"}}).dump());
    ASSERT_FALSE(config.ok()) << key;
    EXPECT_THAT(ErrorOf(config), HasSubstr("invalid `" + key + "` in "));
  }
  absl::StatusOr<GatewayConfig> config =
      Load({"--grpc-addr=localhost:0", "--admin-addr=[::1]:0", "--webhook-addr=127.0.0.1:0"});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->server.grpc_addr, "localhost:0");
  EXPECT_EQ(config->server.admin_host, "::1");
}

// ---------------------------------------------------------------------------------------------
// (5) Two listeners on one address and port are refused at load, naming both keys.
// ---------------------------------------------------------------------------------------------

TEST_F(HardeningTest, TwoListenersOnOneAddressAndPortAreRefused) {
  env_["INSPECTION_WEBHOOK_KEY"] = kWebhookKey;  // the webhook receiver is started
  struct Case {
    std::vector<std::string> flags;
    std::string first, second;  // the keys named
  };
  for (const Case& c : std::vector<Case>{
           {{"--grpc-addr=127.0.0.1:9000", "--admin-addr=127.0.0.1:9000"},
            "grpc_addr",
            "admin_addr"},
           {{"--webhook-addr=0.0.0.0:9464"}, "admin_addr", "webhook_addr"},  // admin's default
           {{"--grpc-addr=[::1]:7000", "--webhook-addr=[0:0::1]:7000"},
            "grpc_addr",
            "webhook_addr"},
           // A wildcard address takes the port on every address (:: on IPv4 too).
           {{"--grpc-addr=0.0.0.0:7000", "--admin-addr=127.0.0.1:7000"}, "grpc_addr", "admin_addr"},
           {{"--grpc-addr=[::]:7000", "--webhook-addr=10.1.2.3:7000"}, "grpc_addr", "webhook_addr"},
           {{"--grpc-addr=localhost:7000", "--admin-addr=[::1]:7000"}, "grpc_addr", "admin_addr"},
           {{"--admin-addr=localhost:7000", "--webhook-addr=127.0.0.1:7000"},
            "admin_addr",
            "webhook_addr"},
           {{"--grpc-addr=[::ffff:127.0.0.1]:7000", "--admin-addr=127.0.0.1:7000"},
            "grpc_addr",
            "admin_addr"}}) {
    SCOPED_TRACE(c.flags.front());
    absl::StatusOr<GatewayConfig> config = Load(c.flags);
    ASSERT_FALSE(config.ok());
    EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(ErrorOf(config), AllOf(HasSubstr("`" + c.first + "`"),
                                       HasSubstr("`" + c.second + "`"), HasSubstr("same port"),
                                       Not(HasSubstr(kWebhookKey)), Not(HasSubstr(kApiKey))));
  }
  // Port 0 (any free port) twice, or the same port on different addresses, is fine.
  for (const std::vector<std::string>& flags : std::vector<std::vector<std::string>>{
           {"--grpc-addr=127.0.0.1:0", "--admin-addr=127.0.0.1:0", "--webhook-addr=127.0.0.1:0"},
           {"--grpc-addr=127.0.0.1:7000", "--admin-addr=127.0.0.2:7000",
            "--webhook-addr=[::1]:7000"},
           {"--grpc-addr=0.0.0.0:7000", "--admin-addr=[::1]:7000",
            "--webhook-addr=0.0.0.0:7001"}}) {
    absl::StatusOr<GatewayConfig> config = Load(flags);
    EXPECT_TRUE(config.ok()) << flags.front() << ": " << config.status();
  }
  // A webhook receiver that is not started holds no port.
  env_.erase("INSPECTION_WEBHOOK_KEY");
  absl::StatusOr<GatewayConfig> config = Load({"--webhook-addr=0.0.0.0:9464"});
  EXPECT_TRUE(config.ok()) << config.status();
  env_["INSPECTION_WEBHOOK_KEY"] = kWebhookKey;
  config = Load({"--webhook-addr=0.0.0.0:9464", "--webhook-mode=poll"});
  EXPECT_TRUE(config.ok()) << config.status();
}

// ---------------------------------------------------------------------------------------------
// (6) A key that appears twice (JSON keeps the last silently) is refused, in the config file
// and in the accounts' JSON from env or a flag, naming the key or account.
// ---------------------------------------------------------------------------------------------

TEST_F(HardeningTest, DuplicateKeysInTheConfigFileAreRefused) {
  const std::string key_file = Write("a-key", "a-key-value");
  const std::string account =
      R"({"upstream_url": "https://a.example", "api_key_file": ")" + key_file + R"("})";
  struct Case {
    std::string text;
    std::string key;
  };
  for (
      const Case& c : std::vector<Case>{
          {R"({"log": {"level": "warn"}, "log": {"level": "error"}})", "log"},
          {R"({"upstream": {"timeout_ms": 1000, "timeout_ms": 2000}})", "upstream.timeout_ms"},
          {R"({"grpc_addr": "127.0.0.1:1", "webapp_url": "https://w.example", "grpc_addr": "127.0.0.1:2"})",
           "grpc_addr"},
          {R"({"accounts": {"a": )" + account + R"(, "b": )" + account + R"(, "a": )" + account +
               "}}",
           "accounts.a"},
          {R"({"accounts": {"a": {"upstream_url": "https://a.example", "upstream_url": "https://b.example"}}})",
           "accounts.a.upstream_url"},
          {R"({"grpc": {"tls": {"cert_file": "/c", "key_file": "/k", "cert_file": "/d"}}})",
           "grpc.tls.cert_file"},
          {"{\"x\\u0001\": 1, \"x\\u0001\": 2}", "\"x\\u0001\""}}) {
    SCOPED_TRACE(c.text);
    absl::StatusOr<GatewayConfig> config = LoadWithFile(c.text);
    ASSERT_FALSE(config.ok());
    EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(ErrorOf(config), AllOf(HasSubstr("duplicate key `" + c.key + "` in "),
                                       HasSubstr("config.json"), HasSubstr("appears twice")));
  }
  // The same key as a dotted name and within its section is set twice too.
  absl::StatusOr<GatewayConfig> config =
      LoadWithFile(R"({"upstream.timeout_ms": 1000, "upstream": {"timeout_ms": 2000}})");
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(ErrorOf(config), HasSubstr("duplicate key `upstream.timeout_ms` in "));
  // The same name in different objects is no duplicate.
  config =
      LoadWithFile(R"({"upstream": {"max_json_depth": 10}, "webhook": {"max_json_depth": 10}})");
  EXPECT_TRUE(config.ok()) << config.status();
}

TEST_F(HardeningTest, DuplicateAccountsFromEnvOrAFlagAreRefused) {
  const std::string key_file = Write("a-key", "a-key-value");
  const std::string account =
      R"({"upstream_url": "https://a.example", "api_key_file": ")" + key_file + R"("})";
  const std::string twice = R"({"prod": )" + account + R"(, "prod": )" + account + "}";
  absl::StatusOr<GatewayConfig> config = Load({"--accounts=" + twice});
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(ErrorOf(config), AllOf(HasSubstr("invalid `accounts` from flag --accounts"),
                                     HasSubstr("`accounts.prod` appears twice")));

  env_["INSPECTION_ACCOUNTS"] =
      R"({"prod": {"upstream_url": "https://a.example", "api_key_file": ")" + key_file +
      R"(", "api_key_file": "/other"}})";
  config = Load({});
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(ErrorOf(config), AllOf(HasSubstr("invalid `accounts` from env INSPECTION_ACCOUNTS"),
                                     HasSubstr("`accounts.prod.api_key_file` appears twice")));
}

// ---------------------------------------------------------------------------------------------
// (7) A misspelled INSPECTION_* variable is an error naming it (with a suggestion), never its
// value. Kubernetes's service links (a Service named inspection-...) and the repository's
// own tooling names (INSPECTION_GATEWAY_*) are not settings and pass.
// ---------------------------------------------------------------------------------------------

TEST_F(HardeningTest, AnUnknownInspectionEnvVariableIsAnErrorWithoutItsValue) {
  env_["INSPECTION_UPSTREAM_TIMEOUT"] = "VALUE-NOT-SHOWN";
  absl::StatusOr<GatewayConfig> config = LoadWithEnvNames({});
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(ErrorOf(config),
              AllOf(HasSubstr("unknown environment variable INSPECTION_UPSTREAM_TIMEOUT"),
                    HasSubstr("did you mean INSPECTION_UPSTREAM_TIMEOUT_MS?"),
                    Not(HasSubstr("VALUE-NOT-SHOWN"))));
  env_.erase("INSPECTION_UPSTREAM_TIMEOUT");

  // A secret's misspelled name: its value (a key) is never shown either.
  env_["INSPECTION_API_KEYS"] = kApiKey;
  config = LoadWithEnvNames({});
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(ErrorOf(config),
              AllOf(HasSubstr("INSPECTION_API_KEYS"), HasSubstr("did you mean INSPECTION_API_KEY?"),
                    Not(HasSubstr(kApiKey))));
  env_.erase("INSPECTION_API_KEYS");

  // Names are shown escaped and cut; a long one gets no suggestion.
  env_["INSPECTION_\x1b[2J" + std::string(100000, 'X')] = "v";
  config = LoadWithEnvNames({});
  ASSERT_FALSE(config.ok());
  EXPECT_LT(ErrorOf(config).size(), 1024u);
  EXPECT_THAT(ErrorOf(config),
              AllOf(HasSubstr("\\u001b"), Not(HasSubstr("\x1b")), Not(HasSubstr("did you mean"))));
}

TEST_F(HardeningTest, KnownKubernetesAndToolingEnvVariablesPass) {
  // Every setting's variable, the config file's and the secrets' are known.
  env_["INSPECTION_LOG_LEVEL"] = "warn";
  env_["INSPECTION_WEBHOOK_KEY"] = kWebhookKey;
  env_["INSPECTION_CONFIG"] = Write("c.json", "{}");
  // Service links of Services named inspection-sandbox and inspection-gateway.
  env_["INSPECTION_SANDBOX_SERVICE_HOST"] = "10.96.0.7";
  env_["INSPECTION_SANDBOX_SERVICE_PORT"] = "8080";
  env_["INSPECTION_SANDBOX_SERVICE_PORT_HTTP"] = "8080";
  env_["INSPECTION_SANDBOX_PORT"] = "tcp://10.96.0.7:8080";
  env_["INSPECTION_SANDBOX_PORT_8080_TCP"] = "tcp://10.96.0.7:8080";
  env_["INSPECTION_SANDBOX_PORT_8080_TCP_PROTO"] = "tcp";
  env_["INSPECTION_SANDBOX_PORT_8080_TCP_PORT"] = "8080";
  env_["INSPECTION_SANDBOX_PORT_8080_TCP_ADDR"] = "10.96.0.7";
  env_["INSPECTION_GATEWAY_SERVICE_HOST"] = "10.96.0.8";
  env_["INSPECTION_GATEWAY_PORT_50051_TCP"] = "tcp://10.96.0.8:50051";
  // The repository's tooling (scripts/check-helm.sh).
  env_["INSPECTION_GATEWAY_BIN"] = "/usr/local/bin/inspection-gateway";
  // Unset (empty) counts as not set; other prefixes are not ours.
  env_["INSPECTION_TYPO_BUT_EMPTY"] = "";
  env_["INSPECTIONS_X"] = "1";
  absl::StatusOr<GatewayConfig> config = LoadWithEnvNames({});
  ASSERT_TRUE(config.ok()) << config.status();

  // A _PORT variable that does not hold a Kubernetes address is a typo, not a service link.
  env_["INSPECTION_WEBHOOK_PORT"] = "8080";
  config = LoadWithEnvNames({});
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(ErrorOf(config), HasSubstr("unknown environment variable INSPECTION_WEBHOOK_PORT"));
}

// ---------------------------------------------------------------------------------------------
// (8) Rules between keys.
// ---------------------------------------------------------------------------------------------

TEST_F(HardeningTest, TheReconcileIntervalCannotExceedItsMaximum) {
  absl::StatusOr<GatewayConfig> config =
      Load({"--reconcile-interval-ms=60000", "--reconcile-max-interval-ms=59999"});
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(ErrorOf(config), AllOf(HasSubstr("`reconcile.max_interval_ms` (59999)"),
                                     HasSubstr("`reconcile.interval_ms` (60000)")));
  config = Load({"--reconcile-interval-ms=700000"});  // over the default maximum
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(ErrorOf(config), HasSubstr("`reconcile.max_interval_ms` (600000)"));
  config = Load({"--reconcile-interval-ms=5000", "--reconcile-max-interval-ms=5000"});
  EXPECT_TRUE(config.ok()) << config.status();
}

TEST_F(HardeningTest, RegisteringAWebhookNeedsAKeyAndTheWebhookMode) {
  absl::StatusOr<GatewayConfig> config = Load({"--register-webhook=https://gw.example.com/hook"});
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(ErrorOf(config),
              AllOf(HasSubstr("`register_webhook`"), HasSubstr("`webhook_key_file`"),
                    HasSubstr("INSPECTION_WEBHOOK_KEY")));

  env_["INSPECTION_WEBHOOK_KEY"] = kWebhookKey;
  config = Load({"--register-webhook=https://gw.example.com/hook", "--webhook-mode=poll"});
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(ErrorOf(config), AllOf(HasSubstr("`register_webhook`"), HasSubstr("`webhook.mode`"),
                                     HasSubstr("poll"), Not(HasSubstr(kWebhookKey))));

  config = Load({"--register-webhook=https://gw.example.com/hook"});
  EXPECT_TRUE(config.ok()) << config.status();

  // An account's registration needs the account's own webhook key, and the webhook mode.
  const std::string key_file = Write("a-key", "a-key-value");
  const std::string accounts =
      R"(--accounts={"a": {"upstream_url": "https://a.example", "api_key_file": ")" + key_file +
      R"(", "register_webhook": "https://gw.example.com/a"}})";
  config = Load({accounts});
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(ErrorOf(config), AllOf(HasSubstr("`accounts.a.register_webhook`"),
                                     HasSubstr("`accounts.a.webhook_key_file`")));
}

TEST_F(HardeningTest, APreviousWebhookKeyNeedsTheCurrentOne) {
  const std::string previous = Write("previous", "previous-key-value");
  absl::StatusOr<GatewayConfig> config = Load({"--webhook-previous-key-file=" + previous});
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(ErrorOf(config),
              AllOf(HasSubstr("`webhook_previous_key_file`"), HasSubstr("`webhook_key_file`"),
                    Not(HasSubstr("previous-key-value"))));

  env_["INSPECTION_WEBHOOK_PREVIOUS_KEY"] = "previous-key-from-env";
  config = Load({});
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(ErrorOf(config), AllOf(HasSubstr("env INSPECTION_WEBHOOK_PREVIOUS_KEY"),
                                     Not(HasSubstr("previous-key-from-env"))));

  env_["INSPECTION_WEBHOOK_KEY"] = kWebhookKey;
  config = Load({"--webhook-previous-key-file=" + previous});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->webhook_previous_key.Reveal(), "previous-key-value");
}

// Streams allowed per connection at or above the calls a connection may hold: the stream
// limit never answers, and streams can hold every call slot. A warning, not an error.
TEST_F(HardeningTest, StreamsPerConnectionAtOrAboveConcurrentStreamsIsAWarning) {
  absl::StatusOr<GatewayConfig> config = Load({});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->warnings.empty());

  config = Load({"--streams-max-per-connection=1000", "--grpc-max-concurrent-streams=1000"});
  ASSERT_TRUE(config.ok()) << config.status();
  ASSERT_EQ(config->warnings.size(), 1u);
  EXPECT_THAT(config->warnings[0], AllOf(HasSubstr("`streams.max_per_connection` (1000)"),
                                         HasSubstr("`grpc.max_concurrent_streams` (1000)")));

  config = Load({"--streams-max-per-connection=0", "--grpc-max-concurrent-streams=10"});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->warnings.empty());  // 0: no per-connection limit, nothing to compare
}

// ---------------------------------------------------------------------------------------------
// (9) register_webhook_events takes the spec's event names only: the vendor_string of each
// EventName value (vendor::SpecEventNames), listed in the error.
// ---------------------------------------------------------------------------------------------

TEST_F(HardeningTest, RegisterWebhookEventsAreTheSpecsEventNames) {
  const std::vector<std::string>& events = vendor::SpecEventNames();
  ASSERT_FALSE(events.empty());
  for (const std::string& bad : {"bogus", "CreateReport", "createreport", "create Report"}) {
    SCOPED_TRACE(bad);
    absl::StatusOr<GatewayConfig> config = Load({"--register-webhook-events=createReport," + bad});
    ASSERT_FALSE(config.ok());
    const std::string message = ErrorOf(config);
    EXPECT_THAT(message, AllOf(HasSubstr("invalid `register_webhook_events` from flag"),
                               HasSubstr("item 1"), HasSubstr("unknown event")));
    for (const std::string& event : events) EXPECT_THAT(message, HasSubstr(event));
  }
  absl::StatusOr<GatewayConfig> config =
      LoadWithFile(nlohmann::json({{"register_webhook_events", events}}).dump());
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->register_webhook_events, events);
  // The default list is made of spec names too.
  for (const std::string& event : GatewayConfig().register_webhook_events) {
    EXPECT_NE(std::find(events.begin(), events.end(), event), events.end()) << event;
  }
}

// ---------------------------------------------------------------------------------------------
// Minor: an integer too large for int64 states the accepted range; a boolean flag given a
// separate value says how to write it.
// ---------------------------------------------------------------------------------------------

TEST_F(HardeningTest, AnOverflowingIntegerStatesTheAcceptedRange) {
  absl::StatusOr<GatewayConfig> config = Load({"--upstream-timeout-ms=99999999999999999999"});
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(ErrorOf(config),
              AllOf(HasSubstr("invalid `upstream.timeout_ms` from flag --upstream-timeout-ms"),
                    HasSubstr("expected integer, got \"99999999999999999999\""),
                    HasSubstr("accepted: an integer in 1..86400000")));

  env_["INSPECTION_STREAMS_MAX_TOTAL"] = "-99999999999999999999";
  config = Load({});
  env_.erase("INSPECTION_STREAMS_MAX_TOTAL");
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(ErrorOf(config), HasSubstr("accepted: an integer in 0..10000000"));

  // In the file, such a number is read as a float.
  for (const std::string& number : {"99999999999999999999", "1e30", "1.5"}) {
    config = LoadWithFile(R"({"upstream": {"timeout_ms": )" + number + "}}");
    ASSERT_FALSE(config.ok()) << number;
    EXPECT_THAT(ErrorOf(config), AllOf(HasSubstr("expected integer, got number"),
                                       HasSubstr("accepted: an integer in 1..86400000")))
        << number;
  }
  // An unbounded key says so too.
  config = Load({"--webhook-min-body-bytes-per-second=99999999999999999999"});
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(ErrorOf(config), HasSubstr("accepted: an integer >= 1"));
}

TEST_F(HardeningTest, ABooleanFlagGivenASeparateValueSaysHowToWriteIt) {
  for (const std::string& flag : {"--cache-enabled", "--sandbox", "--print-config"}) {
    for (const std::string& value : {"false", "true", "no"}) {
      SCOPED_TRACE(flag + " " + value);
      absl::StatusOr<GatewayConfig> config = Load({flag, value});
      ASSERT_FALSE(config.ok());
      EXPECT_THAT(ErrorOf(config), AllOf(HasSubstr("after " + flag), HasSubstr("boolean flag"),
                                         HasSubstr(flag + "=false"), HasSubstr(flag + "=true")));
    }
  }
  absl::StatusOr<GatewayConfig> config = Load({"--cache-enabled=false"});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_FALSE(config->server.cache.enabled);
  // A stray argument elsewhere is still not echoed (it may be a secret).
  config = Load({"--log-level=info", kApiKey});
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(ErrorOf(config),
              AllOf(HasSubstr("not a flag"), Not(HasSubstr(kApiKey)), Not(HasSubstr("boolean"))));
  config = Load({"--sandbox", kApiKey});
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(ErrorOf(config), Not(HasSubstr(kApiKey)));
}

// ---------------------------------------------------------------------------------------------
// Second hostile review of the loader.
// ---------------------------------------------------------------------------------------------

// "{"x": {"k000000": {}, "k000001": {}, ...}}" with `count` sibling objects.
std::string SiblingObjects(int count) {
  std::string text = R"({"x": {)";
  text.reserve(static_cast<std::size_t>(count) * 14 + 16);
  for (int i = 0; i < count; ++i) {
    absl::StrAppend(&text, i == 0 ? "" : ",", "\"k", 1000000 + i, "\":{}");
  }
  return text + "}}";
}

// nlohmann 3.11's callback parser rescanned the parent object each time an object ended: 40,000
// sibling objects took 5.5 s, 200,000 minutes (past the test's timeout). Now linear.
TEST_F(HardeningTest, ManySiblingObjectsParseInLinearTimeAndDuplicatesAreStillFound) {
  absl::StatusOr<GatewayConfig> config = LoadWithFile(SiblingObjects(200000));
  ASSERT_FALSE(config.ok());
  // Parsed whole: the error is the unknown key, not the JSON.
  EXPECT_THAT(ErrorOf(config), AllOf(HasSubstr("unknown key `x`"), Not(HasSubstr("JSON"))));

  std::string duplicated = SiblingObjects(200000);
  duplicated.insert(duplicated.size() - 2, R"(,"k1000007":{})");
  config = LoadWithFile(duplicated);
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(ErrorOf(config), HasSubstr("duplicate key `x.k1000007`"));

  // Deeper down and in arrays too; and in a JSON-valued flag.
  config = LoadWithFile(R"({"a": [{"b": {"c": 1, "d": {}, "c": 2}}]})");
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(ErrorOf(config), HasSubstr("duplicate key `a.[].b.c`"));
  config =
      Load({R"(--accounts={"a": {"upstream_url": "https://a.example", "upstream_url": "x"}})"});
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(ErrorOf(config), HasSubstr("`accounts.a.upstream_url` appears twice"));
  // Values are kept as json::parse keeps them.
  config = LoadWithFile(R"({"upstream": {"timeout_ms": 1234}, "log": {"level": "warn"}})");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->log_level, logging::Level::kWarn);
}

// "{"zz":" then `depth` - 1 '[': nested `depth` deep (and never closed).
std::string Nested(std::size_t depth, bool closed) {
  std::string text = R"({"zz":)" + std::string(depth - 1, '[');
  if (closed) text += std::string(depth - 1, ']') + "}";
  return text;
}

// `{"zz":` and 4 MiB of '[' built 4 million nested arrays (826 MB). Refused at depth 65,
// before anything deeper is built.
TEST_F(HardeningTest, NestingDeeperThan64IsRefusedNamingTheDepth) {
  absl::StatusOr<GatewayConfig> config = LoadWithFile(Nested(4194200, /*closed=*/false));
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(ErrorOf(config),
              AllOf(HasSubstr("is not valid JSON"), HasSubstr("nested deeper than 64 levels")));

  config = LoadWithFile(Nested(65, /*closed=*/true));
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(ErrorOf(config), HasSubstr("nested deeper than 64 levels"));

  // 64 levels parse (the error is then the unknown key).
  config = LoadWithFile(Nested(64, /*closed=*/true));
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(ErrorOf(config), AllOf(HasSubstr("unknown key `zz`"), Not(HasSubstr("nested"))));

  // JSON-valued flags and env variables too.
  config = Load({"--accounts={\"a\":" + std::string(100000, '[')});
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(ErrorOf(config), HasSubstr("nested deeper than 64 levels"));
  config = Load({"--register-webhook-events=" + std::string(100000, '[')});
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(ErrorOf(config), HasSubstr("invalid `register_webhook_events`"));
}

// The parse error's excerpt of the text ("last read: '...'") echoed a string: only the kind of
// error and where it is are reported.
TEST_F(HardeningTest, AJsonParseErrorNeverEchoesTheText) {
  const std::string text =
      "{\"event_log\":\"redis://:hunter2'; expected MY-REDIS-PASSWORD\x01@h\"}";
  absl::StatusOr<GatewayConfig> config = LoadWithFile(text);
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(ErrorOf(config),
              AllOf(HasSubstr("is not valid JSON: syntax error"), HasSubstr("line 1, column "),
                    Not(HasSubstr("hunter2")), Not(HasSubstr("MY-REDIS-PASSWORD")),
                    Not(HasSubstr("redis://")), Not(HasSubstr("last read"))));

  config = LoadWithFile("{\n  \"log\": {\"level\": \"warn\"\n");
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(ErrorOf(config), AllOf(HasSubstr("unexpected end of input"), HasSubstr("line 3")));

  config = Load({"--accounts={\"a\": \"sk_live_SECRET\x01\"}"});
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(ErrorOf(config), AllOf(HasSubstr("expected a JSON object (syntax error"),
                                     Not(HasSubstr("sk_live_SECRET"))));
}

// A secret given where its file's path goes was echoed ("cannot read `webhook_key_file`
// whsec_...: No such file"). A value without a '/' is not shown.
TEST_F(HardeningTest, ASecretFileValueThatIsNotAPathIsNotShown) {
  env_["INSPECTION_WEBHOOK_KEY_FILE"] = "whsec_THE_SECRET_ITSELF";
  absl::StatusOr<GatewayConfig> config = Load({});
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(ErrorOf(config), AllOf(HasSubstr("cannot read `webhook_key_file`"),
                                     HasSubstr("is it the secret itself?"),
                                     HasSubstr("No such file"), Not(HasSubstr("whsec_"))));
  env_.erase("INSPECTION_WEBHOOK_KEY_FILE");

  config = Load({"--api-key-file=sk_live_ALSO_A_SECRET"});
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(ErrorOf(config), AllOf(HasSubstr("`api_key_file` (the value is not shown"),
                                     Not(HasSubstr("sk_live"))));

  // A path is still shown.
  const std::string missing = (std::filesystem::path(dir_) / "missing-key").string();
  config = Load({"--api-key-file=" + missing});
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(ErrorOf(config), HasSubstr("`api_key_file` " + missing));
}

// The blanket INSPECTION_GATEWAY_* exemption hid settings written with the project's name.
TEST_F(HardeningTest, OnlyTheToolingsInspectionGatewayNamesPass) {
  for (const char* name : {"INSPECTION_GATEWAY_BIN", "INSPECTION_GATEWAY_BUILD_TESTS",
                           "INSPECTION_GATEWAY_FUZZ", "INSPECTION_GATEWAY_SANITIZE",
                           "INSPECTION_GATEWAY_REVISION", "INSPECTION_GATEWAY_VERSION"}) {
    env_[name] = "1";
  }
  env_["INSPECTION_GATEWAY_SERVICE_HOST"] = "10.96.0.8";
  absl::StatusOr<GatewayConfig> config = LoadWithEnvNames({});
  ASSERT_TRUE(config.ok()) << config.status();

  env_["INSPECTION_GATEWAY_LOG_LEVEL"] = "debug";
  config = LoadWithEnvNames({});
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(ErrorOf(config),
              AllOf(HasSubstr("unknown environment variable INSPECTION_GATEWAY_LOG_LEVEL"),
                    HasSubstr("did you mean INSPECTION_LOG_LEVEL?")));
  env_.erase("INSPECTION_GATEWAY_LOG_LEVEL");

  env_["INSPECTION_GATEWAY_NOT_A_SETTING"] = "1";
  config = LoadWithEnvNames({});
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(ErrorOf(config),
              HasSubstr("unknown environment variable INSPECTION_GATEWAY_NOT_A_SETTING"));
}

// The bounded reader the TLS and policy files use too (tests/integration/tls_test.cc and
// tests/gateway/authz_policy_test.cc check those callers).
TEST_F(HardeningTest, TheBoundedReaderRefusesDevicesFifosAndFilesPastTheBound) {
  EXPECT_THAT(std::string(settings::ReadBoundedFile("/dev/zero", 16).status().message()),
              HasSubstr("not a regular file"));
  const std::string fifo = (std::filesystem::path(dir_) / "fifo").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_THAT(std::string(settings::ReadBoundedFile(fifo, 16).status().message()),
              HasSubstr("not a regular file"));
  const std::string at = Write("at", std::string(16, 'a'));
  ASSERT_TRUE(settings::ReadBoundedFile(at, 16).ok());
  const absl::Status past =
      settings::ReadBoundedFile(Write("past", std::string(17, 'a')), 16).status();
  EXPECT_TRUE(settings::IsTooLarge(past));
  EXPECT_THAT(std::string(past.message()), HasSubstr("larger than 16 bytes"));
  EXPECT_EQ(settings::kMaxKeyFileBytes, 64u * 1024);
  EXPECT_EQ(settings::kMaxCertificateFileBytes, 1024u * 1024);
  EXPECT_EQ(settings::kMaxPolicyFileBytes, 1024u * 1024);
}

}  // namespace
}  // namespace inspection::config
