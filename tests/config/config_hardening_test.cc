// The settings loader against hostile or careless input: what a hostile review of it found
// (oversized and non-regular files, control characters and invalid UTF-8, duplicate keys,
// misspelled env variables, listen addresses that can never bind, rules between keys).
// Every error names the key and where the value came from, is bounded in size, and never
// holds a secret.
#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gateway/config/config.h"
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

TEST_F(HardeningTest, AConfigFileThatNeverEndsIsRefusedAtItsBound) {
  const auto started = std::chrono::steady_clock::now();
  absl::StatusOr<GatewayConfig> config = Load({"--config", "/dev/zero"});
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(ErrorOf(config), AllOf(HasSubstr("config file /dev/zero"),
                                     HasSubstr("larger than 4194304 bytes (4 MiB)")));
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(20));
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
  absl::StatusOr<GatewayConfig> config = Load({"--api-key-file=/dev/zero"});
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(ErrorOf(config), AllOf(HasSubstr("`api_key_file` /dev/zero"),
                                     HasSubstr("larger than 65536 bytes (64 KiB)")));

  config = Load({"--webhook-key-file=/dev/zero"});
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(ErrorOf(config), AllOf(HasSubstr("`webhook_key_file` /dev/zero"),
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

}  // namespace
}  // namespace inspection::config
