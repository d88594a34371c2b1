#include "gateway/config/config.h"

#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "adapters/redis/redis_url.h"
#include "gateway/idempotency/redis_idempotency_store.h"
#include "gateway/server/server_options.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace inspection::config {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kApiKey[] = "sk_live_5ecret_K3y_value";

// The error message as a std::string, so gmock prints it readably.
template <typename T>
std::string ErrorOf(const absl::StatusOr<T>& result) {
  return std::string(result.status().message());
}

// A directory from mkdtemp, removed with everything in it when the test ends.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "config_test.XXXXXX").string();
    const char* dir = ::mkdtemp(pattern.data());
    if (dir == nullptr) ADD_FAILURE() << "mkdtemp failed";
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }

  // Writes `contents` to `name` in the directory and returns the full path.
  std::string Write(const std::string& name, const std::string& contents) const {
    const std::string file = (std::filesystem::path(path_) / name).string();
    std::ofstream(file, std::ios::binary) << contents;
    return file;
  }
  std::string PathOf(const std::string& name) const {
    return (std::filesystem::path(path_) / name).string();
  }

 private:
  std::string path_;
};

// The value of `key` as --print-config shows it (a string).
std::string Shown(const GatewayConfig& config, const std::string& key) {
  nlohmann::json node = nlohmann::json::parse(DumpConfig(config));
  for (absl::string_view part : absl::StrSplit(key, '.')) node = node.at(std::string(part));
  return node.get<std::string>();
}

class ConfigTest : public ::testing::Test {
 protected:
  // Env with the API key; the required URLs come from flags (RequiredFlags()).
  ConfigTest() { env_["INSPECTION_API_KEY"] = kApiKey; }

  EnvLookup Env() const {
    return [this](const std::string& name) -> std::optional<std::string> {
      auto it = env_.find(name);
      if (it == env_.end()) return std::nullopt;
      return it->second;
    };
  }

  static std::vector<std::string> RequiredFlags() {
    return {"--upstream-url=https://vendor.example.com/api",
            "--webapp-url=https://app.example.com"};
  }

  // With the names of the variables in env_: no test sets a misspelled INSPECTION_* one.
  absl::StatusOr<GatewayConfig> Load(std::vector<std::string> extra_args) const {
    std::vector<std::string> args = RequiredFlags();
    args.insert(args.end(), extra_args.begin(), extra_args.end());
    return LoadConfig(args, Env(), [this] {
      std::vector<std::string> names;
      for (const auto& [name, value] : env_) names.push_back(name);
      return names;
    });
  }

  // Loads with a config file holding `contents` (plus the required flags).
  absl::StatusOr<GatewayConfig> LoadWithFile(const std::string& contents,
                                             std::vector<std::string> extra_args = {}) {
    const std::string path = dir_.Write("config.json", contents);
    extra_args.push_back("--config=" + path);
    return Load(extra_args);
  }

  TempDir dir_;
  std::map<std::string, std::string> env_;
};

TEST_F(ConfigTest, DefaultsWhenOnlyRequiredSettingsAreGiven) {
  absl::StatusOr<GatewayConfig> config = Load({});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->server.vendor.base_url, "https://vendor.example.com/api");
  EXPECT_EQ(config->server.webapp_url, "https://app.example.com");
  EXPECT_EQ(config->api_key.Reveal(), kApiKey);
  EXPECT_EQ(config->api_key_file, "");
  EXPECT_EQ(config->server.grpc_addr, "0.0.0.0:50051");
  EXPECT_EQ(Shown(*config, "webhook_addr"), "0.0.0.0:8080");
  EXPECT_EQ(Shown(*config, "admin_addr"), "0.0.0.0:9464");
  EXPECT_EQ(config->server.vendor.max_attempt_timeout, std::chrono::milliseconds(30000));
  EXPECT_EQ(config->server.connect_timeout, std::chrono::milliseconds(2000));
  EXPECT_EQ(config->server.max_connections, 1024);
  EXPECT_EQ(config->server.http_client, server::VendorHttpClient::kAuto);
  EXPECT_EQ(config->server.vendor.max_json_depth, 512);
  EXPECT_EQ(config->server.max_response_bytes, size_t{64} << 20);
  EXPECT_EQ(config->server.max_response_head_bytes, size_t{64} << 10);
  EXPECT_EQ(config->server.max_buffered_response_bytes, size_t{256} << 20);
  EXPECT_EQ(config->server.guaranteed_response_bytes, size_t{64} << 10);
  EXPECT_EQ(config->server.mapper.position_ratio_key, vendor::KeySpelling::kBoth);
  EXPECT_EQ(config->server.mapper.wheel_box_key, vendor::KeySpelling::kBoth);
  EXPECT_EQ(config->server.mapper.test_webhook_params, vendor::ParamsPlacement::kQuery);
  EXPECT_THAT(config->server.mapper.inspection_id_pointers,
              ElementsAre("/inspectionId", "/data/inspectionId", "/inspection/id", "/id"));
  EXPECT_EQ(config->server.limits.search_max_limit, 100);
  EXPECT_EQ(config->log_level, logging::Level::kInfo);
  EXPECT_EQ(config->shutdown_grace, absl::Milliseconds(10000));
  EXPECT_EQ(config->config_file, "");
  EXPECT_FALSE(config->print_config);
}

TEST_F(ConfigTest, EveryKeyFromTheConfigFile) {
  const std::string key_file = dir_.Write("api_key", "from-file-key\n");
  const std::string file = dir_.Write("config.json", R"({
    "upstream_url": "http://10.0.0.1:8000/",
    "webapp_url": "https://app.example.com/base/",
    "api_key_file": ")" + key_file + R"(",
    "grpc_addr": "127.0.0.1:1",
    "webhook_addr": "[::1]:8081",
    "admin_addr": "localhost:0",
    "upstream": {"timeout_ms": 5000, "connect_timeout_ms": 750, "max_connections": 8,
                 "http_client": "curl", "max_json_depth": 40, "max_response_bytes": 4096,
                 "max_response_head_bytes": 2048,
                 "max_buffered_response_bytes": 0, "guaranteed_response_bytes": 0},
    "background_removal": {"position_ratio_key": "plural", "wheel_box_key": "singular"},
    "test_webhook": {"params_in": "body"},
    "damage": {"inspection_id_pointers": ["/a/b", "/x~1y"]},
    "search": {"max_limit": 25},
    "log": {"level": "debug"},
    "shutdown": {"grace_ms": 0}
  })");
  absl::StatusOr<GatewayConfig> config = LoadConfig({"--config", file}, Env());
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->config_file, file);
  EXPECT_EQ(config->server.vendor.base_url, "http://10.0.0.1:8000");
  EXPECT_EQ(config->server.webapp_url, "https://app.example.com/base");
  EXPECT_EQ(config->api_key.Reveal(), "from-file-key");
  EXPECT_EQ(config->server.grpc_addr, "127.0.0.1:1");
  EXPECT_EQ(Shown(*config, "webhook_addr"), "[::1]:8081");
  EXPECT_EQ(Shown(*config, "admin_addr"), "localhost:0");
  EXPECT_EQ(config->server.vendor.max_attempt_timeout, std::chrono::milliseconds(5000));
  EXPECT_EQ(config->server.connect_timeout, std::chrono::milliseconds(750));
  EXPECT_EQ(config->server.max_connections, 8);
  EXPECT_EQ(config->server.http_client, server::VendorHttpClient::kCurl);
  EXPECT_EQ(config->server.vendor.max_json_depth, 40);
  EXPECT_EQ(config->server.max_response_bytes, 4096u);
  EXPECT_EQ(config->server.max_response_head_bytes, 2048u);
  EXPECT_EQ(config->server.max_buffered_response_bytes, 0u);
  EXPECT_EQ(config->server.guaranteed_response_bytes, 0u);
  EXPECT_EQ(config->server.mapper.position_ratio_key, vendor::KeySpelling::kPlural);
  EXPECT_EQ(config->server.mapper.wheel_box_key, vendor::KeySpelling::kSingular);
  EXPECT_EQ(config->server.mapper.test_webhook_params, vendor::ParamsPlacement::kBody);
  EXPECT_THAT(config->server.mapper.inspection_id_pointers, ElementsAre("/a/b", "/x~1y"));
  EXPECT_EQ(config->server.limits.search_max_limit, 25);
  EXPECT_EQ(config->log_level, logging::Level::kDebug);
  EXPECT_EQ(config->shutdown_grace, absl::ZeroDuration());
}

TEST_F(ConfigTest, FileThenEnvThenFlagPrecedence) {
  const std::string file = dir_.Write("config.json", R"({
    "upstream_url": "https://file.example.com",
    "webapp_url": "https://app.example.com",
    "grpc_addr": "127.0.0.1:1",
    "upstream": {"timeout_ms": 1111, "max_connections": 11},
    "log": {"level": "warn"}
  })");
  env_["INSPECTION_CONFIG"] = file;
  env_["INSPECTION_GRPC_ADDR"] = "127.0.0.2:2";
  env_["INSPECTION_UPSTREAM_TIMEOUT_MS"] = "2222";

  // File only for max_connections and log.level; env over file for timeout; flag over both.
  absl::StatusOr<GatewayConfig> config =
      LoadConfig({"--grpc-addr=127.0.0.3:3", "--log-level", "error"}, Env());
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->config_file, file);
  EXPECT_EQ(config->server.vendor.base_url, "https://file.example.com");
  EXPECT_EQ(config->server.grpc_addr, "127.0.0.3:3");
  EXPECT_EQ(config->server.vendor.max_attempt_timeout, std::chrono::milliseconds(2222));
  EXPECT_EQ(config->server.max_connections, 11);
  EXPECT_EQ(config->log_level, logging::Level::kError);

  // Without the flag, env wins over the file.
  config = LoadConfig({}, Env());
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->server.grpc_addr, "127.0.0.2:2");
  EXPECT_EQ(config->log_level, logging::Level::kWarn);

  // Without env either, the file wins over the default.
  env_.erase("INSPECTION_GRPC_ADDR");
  env_.erase("INSPECTION_UPSTREAM_TIMEOUT_MS");
  config = LoadConfig({}, Env());
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->server.grpc_addr, "127.0.0.1:1");
  EXPECT_EQ(config->server.vendor.max_attempt_timeout, std::chrono::milliseconds(1111));
}

TEST_F(ConfigTest, ConfigFlagWinsOverConfigEnv) {
  env_["INSPECTION_CONFIG"] = dir_.Write("env.json", R"({"search": {"max_limit": 1}})");
  const std::string flag_file = dir_.Write("flag.json", R"({"search": {"max_limit": 2}})");
  absl::StatusOr<GatewayConfig> config = Load({"--config=" + flag_file});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->server.limits.search_max_limit, 2);
}

TEST_F(ConfigTest, EmptyEnvValueCountsAsUnset) {
  env_["INSPECTION_GRPC_ADDR"] = "";
  absl::StatusOr<GatewayConfig> config = Load({});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->server.grpc_addr, "0.0.0.0:50051");
}

TEST_F(ConfigTest, FlagFormsWithEqualsAndSeparateValue) {
  absl::StatusOr<GatewayConfig> config =
      LoadConfig({"--upstream-url", "https://a.example.com", "--webapp-url=https://b.example.com",
                  "--search-max-limit", "7", "--shutdown-grace-ms=3", "--admin-addr", "[::]:1"},
                 Env());
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->server.vendor.base_url, "https://a.example.com");
  EXPECT_EQ(config->server.webapp_url, "https://b.example.com");
  EXPECT_EQ(config->server.limits.search_max_limit, 7);
  EXPECT_EQ(config->shutdown_grace, absl::Milliseconds(3));
  EXPECT_EQ(Shown(*config, "admin_addr"), "[::]:1");
}

TEST_F(ConfigTest, LaterFlagWins) {
  absl::StatusOr<GatewayConfig> config = Load({"--search-max-limit=5", "--search-max-limit=6"});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->server.limits.search_max_limit, 6);
}

TEST_F(ConfigTest, FlagWithoutValueIsAnError) {
  absl::StatusOr<GatewayConfig> config = Load({"--grpc-addr"});
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(ErrorOf(config), HasSubstr("--grpc-addr"));

  config = Load({"--grpc-addr", "--log-level=info"});
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(ErrorOf(config), HasSubstr("--grpc-addr needs a value"));
}

TEST_F(ConfigTest, PointerListFromFlagAndEnv) {
  absl::StatusOr<GatewayConfig> config = Load({"--damage-inspection-id-pointers=/a, /b/c"});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_THAT(config->server.mapper.inspection_id_pointers, ElementsAre("/a", "/b/c"));

  env_["INSPECTION_DAMAGE_INSPECTION_ID_POINTERS"] = R"(["/x,y", "/z"])";
  config = Load({});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_THAT(config->server.mapper.inspection_id_pointers, ElementsAre("/x,y", "/z"));
}

TEST_F(ConfigTest, PrintConfigFlag) {
  absl::StatusOr<GatewayConfig> config = Load({"--print-config"});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->print_config);
}

TEST_F(ConfigTest, TrailingSlashStrippedOnce) {
  absl::StatusOr<GatewayConfig> config = LoadConfig(
      {"--upstream-url=https://v.example.com/", "--webapp-url=https://w.example.com/a/"}, Env());
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->server.vendor.base_url, "https://v.example.com");
  EXPECT_EQ(config->server.webapp_url, "https://w.example.com/a");
}

// ---------------------------------------------------------------------------------------------
// Every validation error names its key.
// ---------------------------------------------------------------------------------------------

struct BadValueCase {
  std::string name;
  std::vector<std::string> flags;  // Added to the required flags (later flags win).
  std::string key;                 // Must appear in the message as `key`.
  std::string also;                // Another substring the message must contain.
};

void PrintTo(const BadValueCase& c, std::ostream* os) { *os << c.name; }

class BadValueTest : public ConfigTest, public ::testing::WithParamInterface<BadValueCase> {};

TEST_P(BadValueTest, ErrorNamesKey) {
  absl::StatusOr<GatewayConfig> config = Load(GetParam().flags);
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(ErrorOf(config), AllOf(HasSubstr("`" + GetParam().key + "`"),
                                     HasSubstr(GetParam().also), Not(HasSubstr(kApiKey))));
}

INSTANTIATE_TEST_SUITE_P(
    Validation, BadValueTest,
    ::testing::Values(
        BadValueCase{"UrlNotHttp",
                     {"--upstream-url=ftp://vendor.example.com"},
                     "upstream_url",
                     "--upstream-url"},
        BadValueCase{
            "UrlRelative", {"--upstream-url=vendor.example.com/api"}, "upstream_url", "http"},
        BadValueCase{
            "UrlWithQuery", {"--webapp-url=https://a.example.com/?x=1"}, "webapp_url", "query"},
        BadValueCase{"UrlEmptyHost", {"--webapp-url=https:///path"}, "webapp_url", "host"},
        BadValueCase{"UrlBadPort", {"--upstream-url=http://h:99999"}, "upstream_url", "port"},
        BadValueCase{"UrlWithSpace", {"--upstream-url=http://h x"}, "upstream_url", "whitespace"},
        BadValueCase{"AddrNoPort", {"--grpc-addr=0.0.0.0"}, "grpc_addr", "HOST:PORT"},
        BadValueCase{"AddrPortTooBig", {"--webhook-addr=0.0.0.0:65536"}, "webhook_addr", "port"},
        BadValueCase{"AddrPortNotNumber", {"--admin-addr=host:http"}, "admin_addr", "port"},
        BadValueCase{"AddrUnbracketedIpv6", {"--admin-addr=::1:80"}, "admin_addr", "bracket"},
        BadValueCase{"AddrEmptyHost", {"--grpc-addr=:80"}, "grpc_addr", "empty host"},
        BadValueCase{"EnumPositionRatio",
                     {"--background-removal-position-ratio-key=plurals"},
                     "background_removal.position_ratio_key",
                     "\"singular\", \"plural\", \"both\""},
        BadValueCase{"EnumWheelBox",
                     {"--background-removal-wheel-box-key=Both"},
                     "background_removal.wheel_box_key",
                     "got \"Both\""},
        BadValueCase{"EnumParamsIn",
                     {"--test-webhook-params-in=header"},
                     "test_webhook.params_in",
                     "\"query\", \"body\""},
        BadValueCase{"EnumLogLevel", {"--log-level=verbose"}, "log.level", "verbose"},
        BadValueCase{"EnumHttpClient",
                     {"--upstream-http-client=libcurl"},
                     "upstream.http_client",
                     "\"auto\", \"beast\", \"curl\""},
        BadValueCase{"JsonDepthZero",
                     {"--upstream-max-json-depth=0"},
                     "upstream.max_json_depth",
                     "in 1..10000"},
        BadValueCase{"ResponseBytesTooSmall",
                     {"--upstream-max-response-bytes=100"},
                     "upstream.max_response_bytes",
                     "in 1024.."},
        BadValueCase{"ResponseHeadBytesTooLarge",
                     {"--upstream-max-response-head-bytes=16777217"},
                     "upstream.max_response_head_bytes",
                     "in 1024..16777216"},
        BadValueCase{"PointerWithoutSlash",
                     {"--damage-inspection-id-pointers=/ok,inspectionId"},
                     "damage.inspection_id_pointers",
                     "item 1"},
        BadValueCase{"PointerBadEscape",
                     {"--damage-inspection-id-pointers=/a~2b"},
                     "damage.inspection_id_pointers",
                     "'~'"},
        BadValueCase{"PointerListEmpty",
                     {"--damage-inspection-id-pointers="},
                     "damage.inspection_id_pointers",
                     "must not be empty"},
        BadValueCase{
            "NegativeTimeout", {"--upstream-timeout-ms", "-5"}, "upstream.timeout_ms", "got -5"},
        BadValueCase{"ZeroTimeout", {"--upstream-timeout-ms=0"}, "upstream.timeout_ms", "got 0"},
        BadValueCase{"ZeroConnectTimeout",
                     {"--upstream-connect-timeout-ms=0"},
                     "upstream.connect_timeout_ms",
                     "got 0"},
        BadValueCase{"TimeoutNotNumber",
                     {"--upstream-timeout-ms=10s"},
                     "upstream.timeout_ms",
                     "expected integer"},
        BadValueCase{"ZeroMaxConnections",
                     {"--upstream-max-connections=0"},
                     "upstream.max_connections",
                     "got 0"},
        BadValueCase{"ZeroMaxLimit", {"--search-max-limit=0"}, "search.max_limit", "got 0"},
        BadValueCase{"NegativeGrace", {"--shutdown-grace-ms=-1"}, "shutdown.grace_ms", "got -1"},
        BadValueCase{"EmptyApiKeyFile", {"--api-key-file="}, "api_key_file", "must not be empty"}),
    [](const ::testing::TestParamInfo<BadValueCase>& info) { return info.param.name; });

TEST_F(ConfigTest, BadEnvValueNamesKeyAndEnvVariable) {
  env_["INSPECTION_UPSTREAM_TIMEOUT_MS"] = "-10";
  absl::StatusOr<GatewayConfig> config = Load({});
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(ErrorOf(config),
              AllOf(HasSubstr("`upstream.timeout_ms`"),
                    HasSubstr("env INSPECTION_UPSTREAM_TIMEOUT_MS"), HasSubstr("-10")));
}

TEST_F(ConfigTest, MissingUpstreamUrl) {
  absl::StatusOr<GatewayConfig> config =
      LoadConfig({"--webapp-url=https://app.example.com"}, Env());
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(ErrorOf(config),
              AllOf(HasSubstr("missing required `upstream_url`"), HasSubstr("--upstream-url"),
                    HasSubstr("INSPECTION_UPSTREAM_URL")));
}

TEST_F(ConfigTest, MissingWebappUrl) {
  absl::StatusOr<GatewayConfig> config =
      LoadConfig({"--upstream-url=https://vendor.example.com"}, Env());
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(ErrorOf(config), HasSubstr("missing required `webapp_url`"));
}

TEST_F(ConfigTest, MissingApiKey) {
  env_.erase("INSPECTION_API_KEY");
  absl::StatusOr<GatewayConfig> config = Load({});
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(ErrorOf(config), AllOf(HasSubstr("missing api_key"), HasSubstr("`api_key_file`"),
                                     HasSubstr("INSPECTION_API_KEY")));
}

TEST_F(ConfigTest, BlankApiKeyEnvIsMissing) {
  env_["INSPECTION_API_KEY"] = " \n";
  absl::StatusOr<GatewayConfig> config = Load({});
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(ErrorOf(config), HasSubstr("missing api_key"));
}

// ---------------------------------------------------------------------------------------------
// Unknown names, malformed files.
// ---------------------------------------------------------------------------------------------

TEST_F(ConfigTest, UnknownFlagIsRejectedWithItsName) {
  absl::StatusOr<GatewayConfig> config = Load({"--upstream-ur=https://x.example.com"});
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(ErrorOf(config), AllOf(HasSubstr("unknown flag --upstream-ur"),
                                     HasSubstr("did you mean --upstream-url?")));
}

TEST_F(ConfigTest, UnknownFlagValueIsNotEchoed) {
  absl::StatusOr<GatewayConfig> config = Load({std::string("--api-key=") + kApiKey});
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(ErrorOf(config), AllOf(HasSubstr("unknown flag --api-key"),
                                     HasSubstr("--api-key-file"), Not(HasSubstr(kApiKey))));
}

TEST_F(ConfigTest, PositionalArgumentIsRejectedWithoutEcho) {
  absl::StatusOr<GatewayConfig> config = Load({kApiKey});
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(ErrorOf(config), AllOf(HasSubstr("unexpected argument #3"), Not(HasSubstr(kApiKey))));
  config = Load({"-config=x"});
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(ErrorOf(config), HasSubstr("unknown flag -config..."));
}

// Found by a hostile review: a secret glued to a flag by a space, a ':' or a single dash
// (a Kubernetes args item "--api-key VALUE") was echoed in the error.
TEST_F(ConfigTest, NoFormOfAMistypedFlagEchoesWhatFollowsItsName) {
  for (const std::string& arg :
       {std::string("-api-key=") + kApiKey, std::string("--api-key ") + kApiKey,
        std::string("--webhook-key:") + kApiKey, std::string("-api-key ") + kApiKey,
        std::string("--api-key\t") + kApiKey}) {
    SCOPED_TRACE(arg.substr(0, 10));
    absl::StatusOr<GatewayConfig> config = Load({arg});
    ASSERT_FALSE(config.ok());
    EXPECT_THAT(ErrorOf(config), AllOf(HasSubstr("unknown flag -"), Not(HasSubstr(kApiKey))));
  }
  absl::StatusOr<GatewayConfig> spaced = Load({std::string("--api-key ") + kApiKey});
  EXPECT_THAT(ErrorOf(spaced), AllOf(HasSubstr("one argument"), HasSubstr("--api-key-file")));
}

// A Redis URL is parsed when the config is read: a password without its ':' (which the
// redaction could not find) and any other malformed URL stop start-up there, unechoed.
TEST_F(ConfigTest, RedisUrlsAreParsedAtValidationAndNeverEchoed) {
  for (const std::string& url :
       {std::string("redis://PWNOCOLON@127.0.0.1:1/0"), std::string("redis://127.0.0.1:99999/abc"),
        std::string("redis://127.0.0.1:1/0?foo=PWNOCOLON"),
        std::string("redis+sentinel://:PWNOCOLON@127.0.0.1:1")}) {
    for (const std::string& flag :
         {"--event-log=", "--idempotency-store=", "--reconcile-ledger="}) {
      SCOPED_TRACE(flag + url.substr(0, 18));
      absl::StatusOr<GatewayConfig> config = Load({flag + url});
      ASSERT_FALSE(config.ok());
      EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
      EXPECT_THAT(ErrorOf(config), Not(HasSubstr("PWNOCOLON")));
    }
  }
  absl::StatusOr<GatewayConfig> sentinel =
      Load({"--event-log=redis+sentinel://:pw@s1:26379,s2/mymaster/0?stream=e",
            "--idempotency-store=redis+sentinel://:pw@s1/mymaster?prefix=p:"});
  ASSERT_TRUE(sentinel.ok()) << sentinel.status();
  const std::string dump = DumpConfig(*sentinel);
  EXPECT_THAT(dump, AllOf(HasSubstr("redis+sentinel://:[redacted]@s1:26379,s2/mymaster/0"),
                          Not(HasSubstr(":pw@"))));
}

TEST_F(ConfigTest, UnknownFileKeyIsRejectedWithSuggestion) {
  absl::StatusOr<GatewayConfig> config = LoadWithFile(R"({"upstream": {"timout_ms": 5}})");
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(ErrorOf(config),
              AllOf(HasSubstr("unknown key `upstream.timout_ms` in " + dir_.PathOf("config.json")),
                    HasSubstr("did you mean `upstream.timeout_ms`?")));
}

TEST_F(ConfigTest, UnknownTopLevelFileKeyIsRejected) {
  absl::StatusOr<GatewayConfig> config = LoadWithFile(R"({"frobnicate": true})");
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(ErrorOf(config), HasSubstr("unknown key `frobnicate`"));
}

TEST_F(ConfigTest, ApiKeyInConfigFileIsRejectedWithoutEcho) {
  absl::StatusOr<GatewayConfig> config =
      LoadWithFile(std::string(R"({"api_key": ")") + kApiKey + R"("})");
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(ErrorOf(config), AllOf(HasSubstr("unknown key `api_key`"), HasSubstr("api_key_file"),
                                     Not(HasSubstr(kApiKey))));
}

TEST_F(ConfigTest, MalformedJsonNamesFileAndPosition) {
  absl::StatusOr<GatewayConfig> config = LoadWithFile("{\n  \"grpc_addr\": \"a:1\",\n}\n");
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(ErrorOf(config), AllOf(HasSubstr(dir_.PathOf("config.json")),
                                     HasSubstr("not valid JSON"), HasSubstr("line 3, column 1")));
}

TEST_F(ConfigTest, ConfigFileMustBeAnObject) {
  absl::StatusOr<GatewayConfig> config = LoadWithFile("[1, 2]");
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(ErrorOf(config), HasSubstr("must hold a JSON object, got array"));
}

TEST_F(ConfigTest, MissingConfigFileNamesPath) {
  absl::StatusOr<GatewayConfig> config = Load({"--config", dir_.PathOf("nope.json")});
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(ErrorOf(config),
              AllOf(HasSubstr("cannot read config file " + dir_.PathOf("nope.json")),
                    HasSubstr("No such file")));
}

TEST_F(ConfigTest, WrongTypeInFileNamesKeyAndExpectedType) {
  absl::StatusOr<GatewayConfig> config = LoadWithFile(R"({"upstream": {"timeout_ms": "5000"}})");
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(ErrorOf(config),
              AllOf(HasSubstr("`upstream.timeout_ms`"), HasSubstr("expected integer, got string")));

  config = LoadWithFile(R"({"search": {"max_limit": 2.5}})");
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(ErrorOf(config),
              AllOf(HasSubstr("`search.max_limit`"), HasSubstr("expected integer")));

  config = LoadWithFile(R"({"damage": {"inspection_id_pointers": ["/a", 3]}})");
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(ErrorOf(config),
              AllOf(HasSubstr("`damage.inspection_id_pointers`"),
                    HasSubstr("expected array of strings, got array containing number")));

  config = LoadWithFile(R"({"upstream": 5})");
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(ErrorOf(config), AllOf(HasSubstr("`upstream`"), HasSubstr("expected object")));
}

TEST_F(ConfigTest, InvalidFileValueNamesKeyAndFile) {
  absl::StatusOr<GatewayConfig> config =
      LoadWithFile(R"({"background_removal": {"wheel_box_key": "wheels"}})");
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(ErrorOf(config), AllOf(HasSubstr("`background_removal.wheel_box_key`"),
                                     HasSubstr("in " + dir_.PathOf("config.json"))));
}

// ---------------------------------------------------------------------------------------------
// The API key.
// ---------------------------------------------------------------------------------------------

TEST_F(ConfigTest, ApiKeyFromFileIsTrimmedAndWinsOverEnv) {
  const std::string key_file = dir_.Write("key", "file-key-1234\n\n");
  absl::StatusOr<GatewayConfig> config = Load({"--api-key-file", key_file});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->api_key.Reveal(), "file-key-1234");
  EXPECT_EQ(config->api_key_file, key_file);
}

TEST_F(ConfigTest, ApiKeyFileFromEnv) {
  env_["INSPECTION_API_KEY_FILE"] = dir_.Write("key", "env-file-key \r\n");
  env_.erase("INSPECTION_API_KEY");
  absl::StatusOr<GatewayConfig> config = Load({});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->api_key.Reveal(), "env-file-key");
}

TEST_F(ConfigTest, ApiKeyFromEnv) {
  env_["INSPECTION_API_KEY"] = "env-key-5678";
  absl::StatusOr<GatewayConfig> config = Load({});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->api_key.Reveal(), "env-key-5678");
}

TEST_F(ConfigTest, UnreadableApiKeyFileNamesKeyAndPath) {
  const std::string missing = dir_.PathOf("no-such-key");
  absl::StatusOr<GatewayConfig> config = Load({"--api-key-file=" + missing});
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(ErrorOf(config),
              AllOf(HasSubstr("`api_key_file`"), HasSubstr(missing), HasSubstr("No such file")));
}

TEST_F(ConfigTest, ApiKeyFileThatIsADirectoryIsAnError) {
  const std::string sub = dir_.PathOf("subdir");
  ASSERT_EQ(::mkdir(sub.c_str(), 0700), 0);
  absl::StatusOr<GatewayConfig> config = Load({"--api-key-file=" + sub});
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(ErrorOf(config), AllOf(HasSubstr("`api_key_file`"), HasSubstr(sub)));
}

TEST_F(ConfigTest, EmptyApiKeyFileIsAnError) {
  const std::string key_file = dir_.Write("key", "\n");
  absl::StatusOr<GatewayConfig> config = Load({"--api-key-file=" + key_file});
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(ErrorOf(config),
              AllOf(HasSubstr("`api_key_file`"), HasSubstr(key_file), HasSubstr("empty")));
}

TEST_F(ConfigTest, ApiKeyWithControlCharactersIsRejectedWithoutEcho) {
  const std::string key_file = dir_.Write("key", std::string(kApiKey) + "\nsecond-line\n");
  absl::StatusOr<GatewayConfig> config = Load({"--api-key-file=" + key_file});
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(ErrorOf(config), AllOf(HasSubstr("`api_key_file`"), HasSubstr("control characters"),
                                     Not(HasSubstr(kApiKey)), Not(HasSubstr("second-line"))));
}

// ---------------------------------------------------------------------------------------------
// Dump, help, secrets registration.
// ---------------------------------------------------------------------------------------------

TEST_F(ConfigTest, DumpRedactsTheApiKey) {
  absl::StatusOr<GatewayConfig> config = Load({});
  ASSERT_TRUE(config.ok()) << config.status();
  for (DumpFormat format : {DumpFormat::kMultiLine, DumpFormat::kSingleLine}) {
    const std::string dump = DumpConfig(*config, format);
    EXPECT_THAT(dump, Not(HasSubstr(kApiKey)));
    const nlohmann::json parsed = nlohmann::json::parse(dump, nullptr, false);
    ASSERT_FALSE(parsed.is_discarded()) << dump;
    EXPECT_EQ(parsed["api_key"], "[redacted]");
    EXPECT_EQ(parsed["upstream_url"], "https://vendor.example.com/api");
    EXPECT_EQ(parsed["upstream"]["timeout_ms"], 30000);
    EXPECT_EQ(parsed["background_removal"]["wheel_box_key"], "both");
    EXPECT_EQ(parsed["log"]["level"], "info");
    EXPECT_EQ(parsed["damage"]["inspection_id_pointers"].size(), 4u);
  }
  EXPECT_EQ(DumpConfig(*config, DumpFormat::kSingleLine).find('\n'), std::string::npos);

  std::ostringstream streamed;
  streamed << *config << " " << config->api_key;
  EXPECT_THAT(streamed.str(), AllOf(HasSubstr("[redacted]"), Not(HasSubstr(kApiKey))));
  EXPECT_EQ(::testing::PrintToString(*config).find(kApiKey), std::string::npos);
}

TEST_F(ConfigTest, DumpIsAValidConfigFileApartFromTheSecret) {
  absl::StatusOr<GatewayConfig> config = Load({"--search-max-limit=9", "--log-level=debug"});
  ASSERT_TRUE(config.ok()) << config.status();
  nlohmann::json dumped = nlohmann::json::parse(DumpConfig(*config));
  // Secrets are never read from a file, and their empty file keys are not valid paths.
  for (const char* key : {"api_key", "api_key_file", "webhook_key", "webhook_key_file",
                          "webhook_previous_key", "webhook_previous_key_file"}) {
    dumped.erase(key);
  }
  dumped["redis"].erase("sentinel_password");
  dumped["redis"].erase("sentinel_password_file");
  absl::StatusOr<GatewayConfig> reloaded =
      LoadConfig({"--config=" + dir_.Write("dumped.json", dumped.dump())}, Env());
  ASSERT_TRUE(reloaded.ok()) << reloaded.status();
  EXPECT_EQ(DumpConfig(*reloaded), DumpConfig(*config));
}

TEST_F(ConfigTest, HelpIsSignalledAsCancelledWithUsage) {
  absl::StatusOr<GatewayConfig> config = LoadConfig({"--bogus", "--help"}, Env());
  ASSERT_FALSE(config.ok());
  EXPECT_TRUE(IsHelpRequest(config.status()));
  EXPECT_EQ(config.status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(config.status().message(), UsageText());

  EXPECT_TRUE(IsHelpRequest(LoadConfig({"-h"}, Env()).status()));
  EXPECT_FALSE(IsHelpRequest(Load({"--bogus"}).status()));
  EXPECT_FALSE(IsHelpRequest(absl::CancelledError("other")));
}

TEST_F(ConfigTest, VersionIsSignalledWithoutTheRequiredSettings) {
  // No upstream_url, no API key: --version still answers (like --help).
  const absl::Status status = LoadConfig({"--version"}, Env()).status();
  EXPECT_TRUE(IsVersionRequest(status));
  EXPECT_FALSE(IsHelpRequest(status));
  EXPECT_FALSE(IsVersionRequest(LoadConfig({"--help"}, Env()).status()));
  EXPECT_FALSE(IsVersionRequest(absl::CancelledError("other")));
  const absl::Status typo = Load({"--versio"}).status();
  EXPECT_FALSE(IsVersionRequest(typo));
  EXPECT_THAT(std::string(typo.message()), ::testing::HasSubstr("did you mean --version?"));
  EXPECT_THAT(UsageText(), ::testing::HasSubstr("  --version\n"));
}

TEST_F(ConfigTest, UsageListsEveryFlagKeyEnvAndDefault) {
  const std::string usage = UsageText();
  for (const char* expected : {"--config=PATH",
                               "--print-config",
                               "--help",
                               "--upstream-url=URL",
                               "key: upstream_url",
                               "env: INSPECTION_UPSTREAM_URL\n      required",
                               "--api-key-file=PATH",
                               "--webapp-url=URL",
                               "--grpc-addr=HOST:PORT",
                               "default: 0.0.0.0:50051",
                               "--webhook-addr=HOST:PORT",
                               "default: 0.0.0.0:8080",
                               "--admin-addr=HOST:PORT",
                               "default: 0.0.0.0:9464",
                               "--upstream-timeout-ms=MS",
                               "key: upstream.timeout_ms",
                               "default: 30000",
                               "--upstream-connect-timeout-ms=MS",
                               "default: 2000",
                               "--upstream-max-connections=N",
                               "default: 1024",
                               "--background-removal-position-ratio-key=singular|plural|both",
                               "--background-removal-wheel-box-key=singular|plural|both",
                               "default: both",
                               "--test-webhook-params-in=query|body",
                               "default: query",
                               "--damage-inspection-id-pointers=POINTER,...",
                               "default: /inspectionId, /data/inspectionId, /inspection/id, /id",
                               "--search-max-limit=N",
                               "default: 100",
                               "--log-level=debug|info|warn|error",
                               "default: info",
                               "--shutdown-grace-ms=MS",
                               "INSPECTION_SHUTDOWN_GRACE_MS",
                               "INSPECTION_API_KEY"}) {
    EXPECT_THAT(usage, HasSubstr(expected));
  }
  std::istringstream lines(usage);
  for (std::string line; std::getline(lines, line);) {
    EXPECT_LE(line.size(), 100u) << line;
  }
}

TEST_F(ConfigTest, RegisterSecretsRedactsApiKeyInLogs) {
  absl::StatusOr<GatewayConfig> config = Load({});
  ASSERT_TRUE(config.ok()) << config.status();
  std::string captured;
  logging::Logger logger([&](absl::string_view line) { captured.append(std::string(line)); });
  RegisterSecrets(*config, logger);
  logger.Info(std::string("calling vendor with ") + kApiKey, {{"key", config->api_key.Reveal()}});
  EXPECT_THAT(captured, AllOf(HasSubstr("[redacted]"), Not(HasSubstr(kApiKey))));
}

TEST_F(ConfigTest, RedisPasswordsNeverReachTheDumpOrTheLogs) {
  absl::StatusOr<GatewayConfig> config =
      Load({"--event-log=redis://:s3cr%2Ft@redis.internal:6379/0?stream=ev",
            "--idempotency-store=redis://gw:other-pw@redis.internal:6379/1"});
  ASSERT_TRUE(config.ok()) << config.status();
  const nlohmann::json dumped = nlohmann::json::parse(DumpConfig(*config));
  EXPECT_EQ(dumped["event_log"], "redis://:[redacted]@redis.internal:6379/0?stream=ev");
  EXPECT_EQ(dumped["idempotency_store"], "redis://gw:[redacted]@redis.internal:6379/1");
  std::string captured;
  logging::Logger logger([&](absl::string_view line) { captured.append(std::string(line)); });
  RegisterSecrets(*config, logger);
  logger.Warn("redis said", {{"raw", "s3cr%2Ft"}, {"decoded", "s3cr/t"}, {"other", "other-pw"}});
  EXPECT_THAT(captured, AllOf(Not(HasSubstr("s3cr%2Ft")), Not(HasSubstr("s3cr/t")),
                              Not(HasSubstr("other-pw"))));
}

// Base64-ish passwords hold raw '/', '+', '=' and sometimes '@' or ':': the dump and the
// logs must cut the URL exactly where the Redis client does (the last '@').
TEST_F(ConfigTest, RedisPasswordsWithRawSlashesAndAtSignsAreRedactedWhole) {
  absl::StatusOr<GatewayConfig> config =
      Load({"--event-log=redis://:Zk3/9q+A=@redis.internal:6379/0?stream=ev",
            "--idempotency-store=redis://gw:p@ss:w/rd@redis.internal:6379/1"});
  ASSERT_TRUE(config.ok()) << config.status();
  const std::string dump = DumpConfig(*config);
  const nlohmann::json dumped = nlohmann::json::parse(dump);
  EXPECT_EQ(dumped["event_log"], "redis://:[redacted]@redis.internal:6379/0?stream=ev");
  EXPECT_EQ(dumped["idempotency_store"], "redis://gw:[redacted]@redis.internal:6379/1");
  for (const char* part : {"Zk3", "9q+A=", "p@ss", "ss:w", "w/rd"}) {
    EXPECT_THAT(dump, Not(HasSubstr(part))) << part;
  }
  std::string captured;
  logging::Logger logger([&](absl::string_view line) { captured.append(std::string(line)); });
  RegisterSecrets(*config, logger);
  logger.Warn("redis said", {{"a", "Zk3/9q+A="}, {"b", "p@ss:w/rd"}});
  EXPECT_THAT(captured, AllOf(Not(HasSubstr("Zk3/9q+A=")), Not(HasSubstr("p@ss:w/rd"))));
  // What the redactor hides is what the client takes as the password.
  for (const std::string& url :
       {config->server.event_log_url, config->server.idempotency_store_url}) {
    absl::StatusOr<redis::RedisUrl> parsed = redis::ParseRedisUrl(url);
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(std::string(redis::RedisUrlPassword(url)), parsed->password);
  }
}

TEST_F(ConfigTest, PipelineKnobsHaveDefaultsAndCrossChecks) {
  absl::StatusOr<GatewayConfig> defaults = Load({});
  ASSERT_TRUE(defaults.ok()) << defaults.status();
  EXPECT_EQ(defaults->server.retry.backoff.base, absl::Milliseconds(25));
  EXPECT_EQ(defaults->server.retry.backoff.cap, absl::Seconds(1));
  EXPECT_EQ(defaults->server.retry.backoff.max_attempts, 3);
  EXPECT_EQ(defaults->server.retry_budget.ratio, 0.2);
  EXPECT_EQ(defaults->server.circuit_breaker.consecutive_failures, 5);
  EXPECT_TRUE(defaults->server.cache.enabled);
  EXPECT_EQ(defaults->server.cache.max_bytes, size_t{64} << 20);
  EXPECT_EQ(defaults->server.idempotency_store_url, "memory");

  absl::StatusOr<GatewayConfig> set =
      Load({"--retry-max-attempts=5", "--cache-enabled=false", "--cache-stale-if-error-ms=0",
            "--circuit-breaker-open-ms=100", "--circuit-breaker-max-open-ms=100"});
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(set->server.retry.backoff.max_attempts, 5);
  EXPECT_FALSE(set->server.cache.enabled);
  EXPECT_EQ(set->server.cache.stale_if_error, absl::ZeroDuration());

  EXPECT_THAT(ErrorOf(Load({"--retry-base-ms=500", "--retry-cap-ms=100"})),
              HasSubstr("`retry.cap_ms` must be >= `retry.base_ms`"));
  EXPECT_THAT(ErrorOf(Load({"--circuit-breaker-open-ms=5000", "--circuit-breaker-max-open-ms=10"})),
              HasSubstr("circuit_breaker.max_open_ms"));
  EXPECT_THAT(ErrorOf(Load({"--idempotency-store=postgres://x"})), HasSubstr("idempotency_store"));
  EXPECT_THAT(ErrorOf(Load({"--retry-max-attempts=0"})), HasSubstr("retry.max_attempts"));
}

// Several replicas on one Redis share their idempotency keys with `idempotency_store=event_log`
// (the chart sets it with eventLog.backend=redis): the event log's Redis, credentials and db
// kept, its stream dropped; memory when the event log is SQLite.
TEST_F(ConfigTest, IdempotencyStoreEventLogFollowsTheEventLogsRedis) {
  absl::StatusOr<GatewayConfig> config =
      Load({"--idempotency-store=event_log",
            "--event-log=redis+sentinel://:pw@127.0.0.1:26379,127.0.0.2/primary/3?stream=ev"});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->server.idempotency_store_url, "event_log");
  EXPECT_EQ(server::ResolveIdempotencyStoreUrl(config->server.idempotency_store_url,
                                               config->server.event_log_url),
            "redis+sentinel://:pw@127.0.0.1:26379,127.0.0.2/primary/3");
  // A '?' inside the password is not the query.
  EXPECT_EQ(server::ResolveIdempotencyStoreUrl("event_log", "redis://u:p?w@h:1/2?stream=s"),
            "redis://u:p?w@h:1/2");
  EXPECT_EQ(server::ResolveIdempotencyStoreUrl("event_log", "sqlite:/var/events.db"), "memory");
  EXPECT_EQ(server::ResolveIdempotencyStoreUrl("memory", "redis://h:1/0"), "memory");
  EXPECT_EQ(server::ResolveIdempotencyStoreUrl("redis://other:1/0", "redis://h:1/0"),
            "redis://other:1/0");
  // The resolved URL parses as an idempotency store's.
  EXPECT_TRUE(pipeline::ParseRedisIdempotencyUrl(
                  server::ResolveIdempotencyStoreUrl("event_log", config->server.event_log_url))
                  .ok());
}

// Issue 31: a lease that ends while its item's poll may still be at the vendor lets a second
// replica claim and poll the same item. A poll's vendor call may take up to 10 s (the
// deadline of GET damagesReport, retries included): a lease not longer is refused.
TEST_F(ConfigTest, AReconcileLeaseNotLongerThanAPollIsRefused) {
  const std::string error = ErrorOf(Load({"--reconcile-lease-ms=5000"}));
  EXPECT_THAT(error, HasSubstr("`reconcile.lease_ms` (5000)"));
  EXPECT_THAT(error, HasSubstr("10000 ms"));
  EXPECT_THAT(error, HasSubstr("`upstream.timeout_ms`"));
  EXPECT_THAT(ErrorOf(Load({"--reconcile-lease-ms=10000"})), HasSubstr("`reconcile.lease_ms`"))
      << "as long as the poll is not longer";
  EXPECT_THAT(ErrorOf(Load({"--reconcile-lease-ms=9000", "--upstream-timeout-ms=2000"})),
              HasSubstr("`reconcile.lease_ms`"))
      << "shorter attempts are retried within the same 10 s";
  EXPECT_TRUE(Load({"--reconcile-lease-ms=10001"}).ok());
  absl::StatusOr<GatewayConfig> defaults = Load({});
  ASSERT_TRUE(defaults.ok()) << defaults.status();
  EXPECT_EQ(defaults->server.reconcile.reconciler.lease, absl::Seconds(30));
  EXPECT_TRUE(Load({"--reconcile-lease-ms=5000", "--reconcile-enabled=false"}).ok())
      << "no reconciler, no lease to check";
}

TEST_F(ConfigTest, ReconcileMaxPollsPerItemHasADefaultARangeAndHelp) {
  absl::StatusOr<GatewayConfig> defaults = Load({});
  ASSERT_TRUE(defaults.ok()) << defaults.status();
  EXPECT_EQ(defaults->server.reconcile.reconciler.max_polls_per_item, 450);
  absl::StatusOr<GatewayConfig> set = Load({"--reconcile-max-polls-per-item=3"});
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(set->server.reconcile.reconciler.max_polls_per_item, 3);
  EXPECT_THAT(ErrorOf(Load({"--reconcile-max-polls-per-item=0"})),
              HasSubstr("reconcile.max_polls_per_item"));
  const std::string usage = UsageText();
  EXPECT_THAT(usage, HasSubstr("--reconcile-max-polls-per-item"));
  EXPECT_THAT(usage, HasSubstr("inspection_reconcile_given_up_total"));
}

// The bound of the work waiting in memory for the ledger (issue 33).
TEST_F(ConfigTest, ReconcileMaxUnrecordedHasADefaultARangeAndHelp) {
  absl::StatusOr<GatewayConfig> defaults = Load({});
  ASSERT_TRUE(defaults.ok()) << defaults.status();
  EXPECT_EQ(defaults->server.reconcile.reconciler.max_unrecorded, 100000u);
  absl::StatusOr<GatewayConfig> set = Load({"--reconcile-max-unrecorded=7"});
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(set->server.reconcile.reconciler.max_unrecorded, 7u);
  EXPECT_THAT(ErrorOf(Load({"--reconcile-max-unrecorded=0"})),
              HasSubstr("reconcile.max_unrecorded"));
  EXPECT_THAT(ErrorOf(Load({"--reconcile-max-unrecorded=10000001"})),
              HasSubstr("reconcile.max_unrecorded"));
  const std::string usage = UsageText();
  EXPECT_THAT(usage, HasSubstr("--reconcile-max-unrecorded"));
  EXPECT_THAT(usage, HasSubstr("inspection_reconcile_unrecorded_dropped_total"));
  EXPECT_THAT(usage, HasSubstr("inspection_reconcile_unrecorded_items"));
}

}  // namespace
}  // namespace inspection::config

namespace inspection::config {
namespace {

class SandboxConfigTest : public ConfigTest {};

TEST_F(SandboxConfigTest, SandboxAloneNeedsNoUpstreamNoWebappNoKey) {
  env_.clear();
  absl::StatusOr<GatewayConfig> config =
      LoadConfig({"--sandbox", "--grpc-addr", "127.0.0.1:0"}, Env());
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->sandbox);
  EXPECT_EQ(config->server.grpc_addr, "127.0.0.1:0");  // `--sandbox` did not swallow the next flag
  EXPECT_TRUE(config->api_key.empty());
  EXPECT_TRUE(config->server.vendor.base_url.empty());
}

TEST_F(SandboxConfigTest, SandboxFromFileAndEnvAndExplicitFalse) {
  env_.clear();
  const std::string path = dir_.Write("sandbox.json", R"({"sandbox": true})");
  absl::StatusOr<GatewayConfig> config = LoadConfig({"--config=" + path}, Env());
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->sandbox);

  env_["INSPECTION_SANDBOX"] = "true";
  config = LoadConfig({"--sandbox=false"}, Env());
  ASSERT_FALSE(config.ok());  // the flag wins, and without the sandbox an upstream is required
  EXPECT_NE(config.status().message().find("upstream_url"), std::string::npos);
}

TEST_F(SandboxConfigTest, SandboxAndUpstreamExcludeEachOther) {
  absl::StatusOr<GatewayConfig> config = Load({"--sandbox"});
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("upstream_url"), std::string::npos);
  EXPECT_NE(config.status().message().find("sandbox"), std::string::npos);
}

TEST_F(SandboxConfigTest, BadBooleanNamesTheKey) {
  env_.clear();
  absl::StatusOr<GatewayConfig> config = LoadConfig({"--sandbox=yes"}, Env());
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("`sandbox`"), std::string::npos)
      << config.status().message();
}

TEST_F(SandboxConfigTest, AConfiguredKeyIsStillUsedInSandboxMode) {
  absl::StatusOr<GatewayConfig> config = LoadConfig({"--sandbox"}, Env());
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->api_key.Reveal(), kApiKey);
}

}  // namespace
}  // namespace inspection::config

// ---------------------------------------------------------------------------------------------
// accounts: named vendor accounts.
// ---------------------------------------------------------------------------------------------

namespace inspection::config {
namespace {

constexpr char kPreprodApiKey[] = "pp_api_K3y_secret_4242";
constexpr char kPreprodWebhookKey[] = "pp_webhook_K3y_secret_77";
constexpr char kPreprodPreviousWebhookKey[] = "pp_previous_webhook_K3y_99";
constexpr char kTestApiKey[] = "test_api_K3y_secret_1313";
constexpr char kDefaultWebhookKey[] = "default_webhook_K3y_55";

class AccountsConfigTest : public ConfigTest {
 protected:
  AccountsConfigTest() {
    preprod_api_key_file_ = dir_.Write("preprod-api-key", std::string(kPreprodApiKey) + " \n");
    preprod_webhook_key_file_ = dir_.Write("preprod-webhook-key", kPreprodWebhookKey);
    preprod_previous_key_file_ =
        dir_.Write("preprod-previous-key", std::string(kPreprodPreviousWebhookKey) + "\n");
    test_api_key_file_ = dir_.Write("test-api-key", kTestApiKey);
    default_webhook_key_file_ = dir_.Write("default-webhook-key", kDefaultWebhookKey);
  }

  // {"upstream_url": ..., "api_key_file": ...} for an account, plus `extra` members.
  static nlohmann::json Account(const std::string& url, const std::string& api_key_file,
                                const nlohmann::json& extra = nlohmann::json::object()) {
    nlohmann::json account = {{"upstream_url", url}, {"api_key_file", api_key_file}};
    account.update(extra);
    return account;
  }

  // A config file {"accounts": accounts} (plus the required flags and `extra_args`).
  absl::StatusOr<GatewayConfig> LoadAccounts(const nlohmann::json& accounts,
                                             std::vector<std::string> extra_args = {}) {
    return LoadWithFile(nlohmann::json({{"accounts", accounts}}).dump(), std::move(extra_args));
  }

  std::string ConfigPath() const { return dir_.PathOf("config.json"); }

  std::string preprod_api_key_file_;
  std::string preprod_webhook_key_file_;
  std::string preprod_previous_key_file_;
  std::string test_api_key_file_;
  std::string default_webhook_key_file_;
};

TEST_F(AccountsConfigTest, NoAccountsByDefault) {
  absl::StatusOr<GatewayConfig> config = Load({});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->accounts.empty());
  const nlohmann::json dumped = nlohmann::json::parse(DumpConfig(*config));
  ASSERT_TRUE(dumped.contains("accounts")) << dumped.dump();
  EXPECT_EQ(dumped["accounts"], nlohmann::json::object());
}

TEST_F(AccountsConfigTest, AccountsFromTheConfigFile) {
  absl::StatusOr<GatewayConfig> config = LoadAccounts(
      {{"test", Account("http://test.vendor.example:8080/", test_api_key_file_,
                        {{"webhook_path", "/hooks/test"}})},
       {"preprod", Account("HTTPS://preprod.vendor.example/api/", preprod_api_key_file_,
                           {{"webhook_key_file", preprod_webhook_key_file_},
                            {"webhook_previous_key_file", preprod_previous_key_file_},
                            {"register_webhook", "https://gw.example.com/webhooks/v2/preprod/"}})}},
      {"--webhook-key-file=" + default_webhook_key_file_});
  ASSERT_TRUE(config.ok()) << config.status();
  ASSERT_EQ(config->accounts.size(), 2u);

  const VendorAccountConfig& preprod = config->accounts[0];  // sorted by name
  EXPECT_EQ(preprod.name, "preprod");
  EXPECT_EQ(preprod.upstream_url, "https://preprod.vendor.example/api");
  EXPECT_EQ(preprod.api_key_file, preprod_api_key_file_);
  EXPECT_EQ(preprod.api_key.Reveal(), kPreprodApiKey);  // trailing whitespace trimmed
  EXPECT_EQ(preprod.webhook_key_file, preprod_webhook_key_file_);
  EXPECT_EQ(preprod.webhook_key.Reveal(), kPreprodWebhookKey);
  EXPECT_EQ(preprod.webhook_previous_key_file, preprod_previous_key_file_);
  EXPECT_EQ(preprod.webhook_previous_key.Reveal(), kPreprodPreviousWebhookKey);
  EXPECT_EQ(preprod.webhook_path, "/webhooks/v2/preprod");  // the default
  EXPECT_EQ(preprod.register_webhook, "https://gw.example.com/webhooks/v2/preprod");

  const VendorAccountConfig& test = config->accounts[1];
  EXPECT_EQ(test.name, "test");
  EXPECT_EQ(test.upstream_url, "http://test.vendor.example:8080");
  EXPECT_EQ(test.api_key.Reveal(), kTestApiKey);
  EXPECT_EQ(test.webhook_key_file, "");
  EXPECT_TRUE(test.webhook_key.empty());
  EXPECT_TRUE(test.webhook_previous_key.empty());
  EXPECT_EQ(test.webhook_path, "/hooks/test");
  EXPECT_EQ(test.register_webhook, "");

  // The default account is untouched.
  EXPECT_EQ(config->server.vendor.base_url, "https://vendor.example.com/api");
  EXPECT_EQ(config->api_key.Reveal(), kApiKey);
  EXPECT_EQ(config->webhook_key.Reveal(), kDefaultWebhookKey);
}

TEST_F(AccountsConfigTest, EnvAndFlagReplaceTheWholeObject) {
  const std::string file_accounts =
      nlohmann::json(
          {{"accounts", {{"fromfile", Account("https://f.example", test_api_key_file_)}}}})
          .dump();
  env_["INSPECTION_CONFIG"] = dir_.Write("config.json", file_accounts);
  env_["INSPECTION_ACCOUNTS"] =
      nlohmann::json({{"a", Account("https://a.example", test_api_key_file_)},
                      {"b", Account("https://b.example", preprod_api_key_file_)}})
          .dump();
  const std::string flag =
      "--accounts=" +
      nlohmann::json({{"c", Account("https://c.example", preprod_api_key_file_)}}).dump();

  // The flag wins over env and the file, and replaces their accounts entirely.
  absl::StatusOr<GatewayConfig> config = Load({flag});
  ASSERT_TRUE(config.ok()) << config.status();
  ASSERT_EQ(config->accounts.size(), 1u);
  EXPECT_EQ(config->accounts[0].name, "c");
  EXPECT_EQ(config->accounts[0].upstream_url, "https://c.example");
  EXPECT_EQ(config->accounts[0].api_key.Reveal(), kPreprodApiKey);

  // The flag also takes its value as the next argument.
  config = Load({"--accounts", nlohmann::json::object().dump()});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->accounts.empty());

  // Without the flag, env replaces the file's accounts.
  config = Load({});
  ASSERT_TRUE(config.ok()) << config.status();
  ASSERT_EQ(config->accounts.size(), 2u);
  EXPECT_EQ(config->accounts[0].name, "a");
  EXPECT_EQ(config->accounts[0].webhook_path, "/webhooks/v2/a");
  EXPECT_EQ(config->accounts[1].name, "b");
  EXPECT_EQ(config->accounts[1].api_key.Reveal(), kPreprodApiKey);

  // Without env either, the file's.
  env_.erase("INSPECTION_ACCOUNTS");
  config = Load({});
  ASSERT_TRUE(config.ok()) << config.status();
  ASSERT_EQ(config->accounts.size(), 1u);
  EXPECT_EQ(config->accounts[0].name, "fromfile");
}

TEST_F(AccountsConfigTest, EnvAndFlagTextMustBeAJsonObject) {
  env_["INSPECTION_ACCOUNTS"] = "{\"a\": ";
  absl::StatusOr<GatewayConfig> config = Load({});
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(ErrorOf(config), AllOf(HasSubstr("invalid `accounts` from env INSPECTION_ACCOUNTS"),
                                     HasSubstr("expected a JSON object")));

  env_.erase("INSPECTION_ACCOUNTS");
  config = Load({"--accounts=[1]"});
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(ErrorOf(config), AllOf(HasSubstr("invalid `accounts` from flag --accounts"),
                                     HasSubstr("expected a JSON object, got array")));

  // Errors inside the object name the precise key and the flag.
  config = Load({R"(--accounts={"x": {"upstream_url": "https://x.example"}})"});
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(ErrorOf(config), HasSubstr("missing `accounts.x.api_key_file` from flag --accounts"));
}

TEST_F(AccountsConfigTest, AccountsInTheFileMustBeAnObject) {
  absl::StatusOr<GatewayConfig> config = LoadAccounts(nlohmann::json::array({1}));
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(ErrorOf(config), AllOf(HasSubstr("invalid `accounts` in " + ConfigPath()),
                                     HasSubstr("expected object, got array")));
}

// Each bad account (a file {"accounts": {...}}) is refused with a message naming the exact key.
struct BadAccountCase {
  std::string name;
  std::string accounts;  // JSON text; API_KEY_FILE stands for a readable key file.
  std::string expected;  // Must appear in the message (with the key in backticks).
  std::string also;      // Another substring the message must contain.
};

void PrintTo(const BadAccountCase& c, std::ostream* os) { *os << c.name; }

class BadAccountTest : public AccountsConfigTest,
                       public ::testing::WithParamInterface<BadAccountCase> {};

TEST_P(BadAccountTest, ErrorNamesTheKey) {
  std::string accounts = GetParam().accounts;
  for (std::size_t at; (at = accounts.find("API_KEY_FILE")) != std::string::npos;) {
    accounts.replace(at, 12, test_api_key_file_);
  }
  absl::StatusOr<GatewayConfig> config =
      LoadWithFile(absl::StrCat(R"({"accounts": )", accounts, "}"));
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(ErrorOf(config),
              AllOf(HasSubstr(GetParam().expected), HasSubstr(GetParam().also),
                    HasSubstr(" in " + ConfigPath()), Not(HasSubstr("s3cr3t-in-config")),
                    Not(HasSubstr(kTestApiKey))));
}

std::vector<BadAccountCase> BadAccountCases() {
  return {
      BadAccountCase{"AccountNotAnObject", R"({"preprod": "https://x.example"})",
                     "invalid `accounts.preprod`", "expected object (an account), got string"},
      BadAccountCase{"NameWithSpace",
                     R"({"pre prod": {"upstream_url": "https://x.example",
                                        "api_key_file": "API_KEY_FILE"}})",
                     "invalid `accounts.\"pre prod\"`", "1..64 characters"},
      BadAccountCase{"NameWithSlash", R"({"a/b": {}})", "invalid `accounts.\"a/b\"`",
                     "account name"},
      BadAccountCase{"EmptyName", R"({"": {}})", "invalid `accounts.\"\"`", "account name"},
      BadAccountCase{"NameTooLong", absl::StrCat(R"({")", std::string(65, 'a'), R"(": {}})"),
                     absl::StrCat("invalid `accounts.", std::string(65, 'a'), "`"),
                     "1..64 characters"},
      BadAccountCase{"NameDotDot", R"({"..": {}})", "invalid `accounts...`", "account name"},
      BadAccountCase{"NameDefaultIsReserved",
                     R"({"default": {"upstream_url": "https://x.example",
                                       "api_key_file": "API_KEY_FILE"}})",
                     "invalid `accounts.default`", "reserved"},
      BadAccountCase{"UnknownSubKeyWithSuggestion",
                     R"({"preprod": {"upstream_ur": "https://x.example"}})",
                     "unknown key `accounts.preprod.upstream_ur`",
                     "(did you mean `accounts.preprod.upstream_url`?)"},
      BadAccountCase{"UnknownSubKey", R"({"preprod": {"foo": "bar"}})",
                     "unknown key `accounts.preprod.foo`", "accounts.preprod.foo"},
      BadAccountCase{"UnknownSubKeyWithOddCharacters", R"({"preprod": {"a\nb": "bar"}})",
                     "unknown key `accounts.preprod.\"a\\nb\"`", "preprod"},
      BadAccountCase{"ApiKeyInTheConfig", R"({"preprod": {"api_key": "s3cr3t-in-config"}})",
                     "unknown key `accounts.preprod.api_key`",
                     "set `accounts.preprod.api_key_file`"},
      BadAccountCase{"WebhookKeyInTheConfig", R"({"preprod": {"webhook_key": "s3cr3t-in-config"}})",
                     "unknown key `accounts.preprod.webhook_key`",
                     "set `accounts.preprod.webhook_key_file`"},
      BadAccountCase{"PreviousWebhookKeyInTheConfig",
                     R"({"preprod": {"webhook_previous_key": "s3cr3t-in-config"}})",
                     "unknown key `accounts.preprod.webhook_previous_key`",
                     "set `accounts.preprod.webhook_previous_key_file`"},
      BadAccountCase{"SubKeyNotAString", R"({"preprod": {"upstream_url": 5}})",
                     "invalid `accounts.preprod.upstream_url`", "expected string, got number"},
      BadAccountCase{"UpstreamUrlNotHttp",
                     R"({"preprod": {"upstream_url": "ftp://x.example",
                                       "api_key_file": "API_KEY_FILE"}})",
                     "invalid `accounts.preprod.upstream_url`",
                     "must be an absolute http:// or https:// URL"},
      BadAccountCase{"MissingUpstreamUrl", R"({"preprod": {"api_key_file": "API_KEY_FILE"}})",
                     "missing `accounts.preprod.upstream_url`", "every account"},
      BadAccountCase{"MissingApiKeyFile", R"({"preprod": {"upstream_url": "https://x.example"}})",
                     "missing `accounts.preprod.api_key_file`", "every account"},
      BadAccountCase{"EmptyApiKeyFile",
                     R"({"preprod": {"upstream_url": "https://x.example", "api_key_file": ""}})",
                     "invalid `accounts.preprod.api_key_file`", "must not be empty"},
      BadAccountCase{"PreviousWebhookKeyWithoutCurrent",
                     R"({"preprod": {"upstream_url": "https://x.example",
                                       "api_key_file": "API_KEY_FILE",
                                       "webhook_previous_key_file": "API_KEY_FILE"}})",
                     "invalid `accounts.preprod.webhook_previous_key_file`",
                     "only allowed together with `accounts.preprod.webhook_key_file`"},
      BadAccountCase{"RelativeWebhookPath",
                     R"({"preprod": {"upstream_url": "https://x.example",
                                       "api_key_file": "API_KEY_FILE", "webhook_path": "hooks"}})",
                     "invalid `accounts.preprod.webhook_path`", "absolute path"},
      BadAccountCase{"BadRegisterWebhook",
                     R"({"preprod": {"upstream_url": "https://x.example",
                                       "api_key_file": "API_KEY_FILE",
                                       "register_webhook": "gw.example.com/hook"}})",
                     "invalid `accounts.preprod.register_webhook`", "http"}};
}

INSTANTIATE_TEST_SUITE_P(Validation, BadAccountTest, ::testing::ValuesIn(BadAccountCases()));

TEST_F(AccountsConfigTest, OddAccountNamesAreShownEscaped) {
  absl::StatusOr<GatewayConfig> config = LoadWithFile("{\"accounts\": {\"a\\u001b[2Jb`c\": {}}}");
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(ErrorOf(config),
              AllOf(HasSubstr("invalid `accounts.\"a\\u001b[2Jb`c\"`"), Not(HasSubstr("\x1b"))));
}

TEST_F(AccountsConfigTest, WebhookPathsAreUniqueAndNotTheDefaultOne) {
  absl::StatusOr<GatewayConfig> config =
      LoadAccounts({{"preprod", Account("https://x.example", test_api_key_file_,
                                        {{"webhook_path", "/webhooks/v2"}})}});
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(ErrorOf(config), AllOf(HasSubstr("`accounts.preprod.webhook_path`"),
                                     HasSubstr("`webhook.path`"), HasSubstr("/webhooks/v2")));

  config = LoadAccounts(
      {{"a", Account("https://a.example", test_api_key_file_, {{"webhook_path", "/hooks/x"}})},
       {"b", Account("https://b.example", test_api_key_file_, {{"webhook_path", "/hooks/x"}})}});
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(ErrorOf(config),
              AllOf(HasSubstr("`accounts.a.webhook_path`"), HasSubstr("`accounts.b.webhook_path`"),
                    HasSubstr("/hooks/x")));

  // Checked once every source is applied: a later flag moves webhook.path onto a default path.
  config = LoadAccounts({{"preprod", Account("https://x.example", test_api_key_file_)}},
                        {"--webhook-path=/webhooks/v2/preprod"});
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(ErrorOf(config),
              AllOf(HasSubstr("`accounts.preprod.webhook_path`"), HasSubstr("`webhook.path`")));

  // Distinct paths are fine.
  config = LoadAccounts({{"preprod", Account("https://x.example", test_api_key_file_)}},
                        {"--webhook-path=/webhooks/v2/default"});
  ASSERT_TRUE(config.ok()) << config.status();
}

TEST_F(AccountsConfigTest, AccountSecretFilesAreCheckedWithoutEcho) {
  const std::string missing = dir_.PathOf("no-such-key");
  absl::StatusOr<GatewayConfig> config =
      LoadAccounts({{"preprod", Account("https://x.example", missing)}});
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(ErrorOf(config),
              AllOf(HasSubstr("cannot read `accounts.preprod.api_key_file` " + missing),
                    HasSubstr("No such file")));

  const std::string empty = dir_.Write("empty-key", " \n");
  config = LoadAccounts({{"preprod", Account("https://x.example", empty)}});
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(ErrorOf(config),
              AllOf(HasSubstr("`accounts.preprod.api_key_file` " + empty), HasSubstr("empty")));

  const std::string two_lines =
      dir_.Write("two-lines", std::string(kPreprodApiKey) + "\nsecond-line\n");
  config = LoadAccounts({{"preprod", Account("https://x.example", two_lines)}});
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(ErrorOf(config),
              AllOf(HasSubstr("`accounts.preprod.api_key_file`"), HasSubstr("control characters"),
                    Not(HasSubstr(kPreprodApiKey)), Not(HasSubstr("second-line"))));

  config = LoadAccounts({{"preprod", Account("https://x.example", test_api_key_file_,
                                             {{"webhook_key_file", two_lines}})}},
                        {"--webhook-key-file=" + default_webhook_key_file_});
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(ErrorOf(config),
              AllOf(HasSubstr("`accounts.preprod.webhook_key_file`"),
                    HasSubstr("control characters"), Not(HasSubstr(kPreprodApiKey))));

  config = LoadAccounts({{"preprod", Account("https://x.example", test_api_key_file_,
                                             {{"webhook_key_file", preprod_webhook_key_file_},
                                              {"webhook_previous_key_file", missing}})}},
                        {"--webhook-key-file=" + default_webhook_key_file_});
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(ErrorOf(config),
              HasSubstr("cannot read `accounts.preprod.webhook_previous_key_file` " + missing));
}

TEST_F(AccountsConfigTest, DumpShowsAccountsWithSecretsRedacted) {
  absl::StatusOr<GatewayConfig> config = LoadAccounts(
      {{"preprod", Account("https://preprod.vendor.example/api", preprod_api_key_file_,
                           {{"webhook_key_file", preprod_webhook_key_file_},
                            {"webhook_previous_key_file", preprod_previous_key_file_}})},
       {"test", Account("https://test.vendor.example", test_api_key_file_)}},
      {"--webhook-key-file=" + default_webhook_key_file_});
  ASSERT_TRUE(config.ok()) << config.status();
  for (DumpFormat format : {DumpFormat::kMultiLine, DumpFormat::kSingleLine}) {
    const std::string dump = DumpConfig(*config, format);
    for (const char* secret : {kPreprodApiKey, kPreprodWebhookKey, kPreprodPreviousWebhookKey,
                               kTestApiKey, kDefaultWebhookKey}) {
      EXPECT_THAT(dump, Not(HasSubstr(secret)));
    }
    const nlohmann::json dumped = nlohmann::json::parse(dump, nullptr, false);
    ASSERT_FALSE(dumped.is_discarded()) << dump;
    EXPECT_EQ(dumped["accounts"]["preprod"],
              nlohmann::json({{"upstream_url", "https://preprod.vendor.example/api"},
                              {"api_key_file", preprod_api_key_file_},
                              {"api_key", "[redacted]"},
                              {"webhook_key_file", preprod_webhook_key_file_},
                              {"webhook_key", "[redacted]"},
                              {"webhook_previous_key_file", preprod_previous_key_file_},
                              {"webhook_previous_key", "[redacted]"},
                              {"webhook_path", "/webhooks/v2/preprod"},
                              {"register_webhook", ""}}));
    EXPECT_EQ(dumped["accounts"]["test"]["api_key"], "[redacted]");
    EXPECT_EQ(dumped["accounts"]["test"]["webhook_key_file"], "");
    EXPECT_EQ(dumped["accounts"]["test"]["webhook_key"], "[unset]");
    EXPECT_EQ(dumped["accounts"]["test"]["webhook_previous_key"], "[unset]");
  }
  // The single-line form too, as gtest prints it.
  EXPECT_EQ(::testing::PrintToString(*config).find(kPreprodApiKey), std::string::npos);
  // The multi-line dump keeps the sub-keys in order.
  const std::string dump = DumpConfig(*config);
  EXPECT_LT(dump.find("\"upstream_url\": \"https://preprod"), dump.find("\"webhook_path\""));
}

TEST_F(AccountsConfigTest, RegisterSecretsRedactsAccountSecretsInLogs) {
  absl::StatusOr<GatewayConfig> config = LoadAccounts(
      {{"preprod", Account("https://x.example", preprod_api_key_file_,
                           {{"webhook_key_file", preprod_webhook_key_file_},
                            {"webhook_previous_key_file", preprod_previous_key_file_}})},
       {"test", Account("https://y.example", test_api_key_file_)}},
      {"--webhook-key-file=" + default_webhook_key_file_});
  ASSERT_TRUE(config.ok()) << config.status();
  std::string captured;
  logging::Logger logger([&](absl::string_view line) { captured.append(std::string(line)); });
  RegisterSecrets(*config, logger);
  logger.Info(absl::StrCat("keys ", kPreprodApiKey, " ", kTestApiKey),
              {{"webhook", kPreprodWebhookKey}, {"previous", kPreprodPreviousWebhookKey}});
  EXPECT_THAT(captured, AllOf(HasSubstr("[redacted]"), Not(HasSubstr(kPreprodApiKey)),
                              Not(HasSubstr(kTestApiKey)), Not(HasSubstr(kPreprodWebhookKey)),
                              Not(HasSubstr(kPreprodPreviousWebhookKey))));
}

TEST_F(AccountsConfigTest, AccountWebhookKeyNeedsTheDefaultWebhookKey) {
  const nlohmann::json accounts = {
      {"preprod", Account("https://x.example", preprod_api_key_file_,
                          {{"webhook_key_file", preprod_webhook_key_file_}})}};
  absl::StatusOr<GatewayConfig> config = LoadAccounts(accounts);
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(ErrorOf(config),
              AllOf(HasSubstr("`accounts.preprod.webhook_key_file`"),
                    HasSubstr("`webhook_key_file`"), HasSubstr("INSPECTION_WEBHOOK_KEY"),
                    HasSubstr("receiver"), Not(HasSubstr(kPreprodWebhookKey))));

  // The default webhook key from env will do.
  env_["INSPECTION_WEBHOOK_KEY"] = kDefaultWebhookKey;
  config = LoadAccounts(accounts);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->webhook_key.Reveal(), kDefaultWebhookKey);
  EXPECT_EQ(config->accounts[0].webhook_key.Reveal(), kPreprodWebhookKey);
}

TEST_F(AccountsConfigTest, AccountsSharingAWebhookKeyAreRefusedWithoutShowingIt) {
  const std::string same_as_preprod = dir_.Write("same-webhook-key", kPreprodWebhookKey);
  const std::string same_as_default = dir_.Write("same-default-key", kDefaultWebhookKey);

  // An account and the default account.
  absl::StatusOr<GatewayConfig> config =
      LoadAccounts({{"preprod", Account("https://x.example", preprod_api_key_file_,
                                        {{"webhook_key_file", same_as_default}})}},
                   {"--webhook-key-file=" + default_webhook_key_file_});
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(ErrorOf(config),
              AllOf(HasSubstr("`webhook_key_file` and `accounts.preprod.webhook_key_file`"),
                    HasSubstr("same webhook key"), Not(HasSubstr(kDefaultWebhookKey))));

  // The default key from env: the message names the env variable.
  env_["INSPECTION_WEBHOOK_KEY"] = kDefaultWebhookKey;
  config = LoadAccounts({{"preprod", Account("https://x.example", preprod_api_key_file_,
                                             {{"webhook_key_file", same_as_default}})}});
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(ErrorOf(config),
              AllOf(HasSubstr("env INSPECTION_WEBHOOK_KEY and `accounts.preprod.webhook_key_file`"),
                    Not(HasSubstr(kDefaultWebhookKey))));

  // Two accounts, one's previous key being the other's current one.
  config = LoadAccounts({{"preprod", Account("https://x.example", preprod_api_key_file_,
                                             {{"webhook_key_file", preprod_webhook_key_file_}})},
                         {"test", Account("https://y.example", test_api_key_file_,
                                          {{"webhook_key_file", preprod_previous_key_file_},
                                           {"webhook_previous_key_file", same_as_preprod}})}});
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(ErrorOf(config),
              AllOf(HasSubstr("`accounts.preprod.webhook_key_file`"),
                    HasSubstr("`accounts.test.webhook_previous_key_file`"),
                    HasSubstr("same webhook key"), Not(HasSubstr(kPreprodWebhookKey))));

  // Distinct keys are fine.
  config = LoadAccounts({{"preprod", Account("https://x.example", preprod_api_key_file_,
                                             {{"webhook_key_file", preprod_webhook_key_file_}})},
                         {"test", Account("https://y.example", test_api_key_file_,
                                          {{"webhook_key_file", preprod_previous_key_file_}})}});
  ASSERT_TRUE(config.ok()) << config.status();
}

TEST_F(AccountsConfigTest, SandboxAllowsAccountsAndStillReadsTheirFiles) {
  env_.clear();
  const std::string accounts =
      nlohmann::json({{"preprod", Account("https://x.example", preprod_api_key_file_)}}).dump();
  absl::StatusOr<GatewayConfig> config = LoadConfig({"--sandbox", "--accounts", accounts}, Env());
  ASSERT_TRUE(config.ok()) << config.status();
  ASSERT_EQ(config->accounts.size(), 1u);
  EXPECT_EQ(config->accounts[0].api_key.Reveal(), kPreprodApiKey);

  const std::string missing = dir_.PathOf("no-such-key");
  config = LoadConfig({"--sandbox", "--accounts",
                       nlohmann::json({{"preprod", Account("https://x.example", missing)}}).dump()},
                      Env());
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(ErrorOf(config), HasSubstr("cannot read `accounts.preprod.api_key_file`"));
}

TEST_F(AccountsConfigTest, HelpDescribesAccounts) {
  const std::string usage = UsageText();
  for (const char* expected :
       {"--accounts=JSON", "key: accounts\n", "env: INSPECTION_ACCOUNTS\n", "x-vendor-account",
        "/webhooks/v2/NAME", "accounts.NAME.api_key_file"}) {
    EXPECT_THAT(usage, HasSubstr(expected));
  }
  const std::size_t row = usage.find("--accounts=JSON");
  ASSERT_NE(row, std::string::npos);
  const std::size_t next_row = usage.find("  --", row + 1);
  EXPECT_THAT(usage.substr(row, next_row - row), HasSubstr("default: none"));
  // --help comes back from LoadConfig as well.
  absl::StatusOr<GatewayConfig> config = LoadConfig({"--help"}, Env());
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(ErrorOf(config), HasSubstr("--accounts=JSON"));
}

TEST_F(AccountsConfigTest, SuggestsAccountsForATypoAtTheTopLevel) {
  absl::StatusOr<GatewayConfig> config = LoadWithFile(R"({"account": {}})");
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(ErrorOf(config),
              AllOf(HasSubstr("unknown key `account`"), HasSubstr("did you mean `accounts`?")));
}

}  // namespace
}  // namespace inspection::config

namespace inspection::config {
namespace {

// Issue 32: each setting is declared once, by the component whose options it fills (its
// *_settings.cc; the process's own keys in config.cc). Checked over the production sources:
// - every key has exactly one declaration: the first argument of a settings:: helper, or a
//   constant (`k...Key[] = "..."`) exported for code that must name the key;
// - a section key ("upstream.timeout_ms") is written as a string literal in that one file
//   only. A top-level key ("grpc_addr") may also be an unrelated literal elsewhere (a log
//   field, a JSON name); prose mentioning a key (a comment, an error message) is not counted.
TEST(ConfigKeysTest, EachKeyIsDeclaredInExactlyOneProductionFile) {
  std::vector<std::string> keys;
  std::istringstream usage(UsageText());
  for (std::string line; std::getline(usage, line);) {
    const std::string marker = "      key: ";
    if (line.rfind(marker, 0) == 0) keys.push_back(line.substr(marker.size()));
  }
  ASSERT_GT(keys.size(), 100u);
  std::map<std::string, std::string> sources;  // path -> contents
  for (const char* dir : {"gateway", "adapters", "sandbox"}) {
    for (const auto& entry :
         std::filesystem::recursive_directory_iterator(std::string(SOURCE_DIR) + "/" + dir)) {
      const std::string ext = entry.path().extension().string();
      if (!entry.is_regular_file() || (ext != ".cc" && ext != ".h")) continue;
      std::ifstream in(entry.path());
      std::stringstream text;
      text << in.rdbuf();
      sources[entry.path().string().substr(std::string(SOURCE_DIR).size() + 1)] = text.str();
    }
  }
  ASSERT_GT(sources.size(), 100u);
  for (const std::string& key : keys) {
    const std::string literal = "\"" + key + "\"";
    const std::regex declaration("settings::[A-Za-z]+<[^()]*>\\(\\s*" + literal +
                                 "|\\bk[A-Za-z]+Key\\[\\] = " + literal);
    std::vector<std::string> declared_in;
    std::vector<std::string> literal_in;
    int declarations = 0;
    for (const auto& [path, text] : sources) {
      if (text.find(literal) == std::string::npos) continue;
      literal_in.push_back(path);
      const auto found = std::distance(std::sregex_iterator(text.begin(), text.end(), declaration),
                                       std::sregex_iterator());
      if (found > 0) declared_in.push_back(path);
      declarations += static_cast<int>(found);
    }
    EXPECT_EQ(declarations, 1) << "`" << key << "` is declared in "
                               << ::testing::PrintToString(declared_in);
    if (key.find('.') != std::string::npos) {
      EXPECT_EQ(literal_in.size(), 1u)
          << "`" << key << "` is written as a literal in " << ::testing::PrintToString(literal_in);
    }
  }
}

}  // namespace
}  // namespace inspection::config
