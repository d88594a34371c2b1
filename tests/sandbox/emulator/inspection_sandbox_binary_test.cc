// The inspection-sandbox binary as a process: flags, the ready line, serving, signals.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "adapters/http/curl_transport.h"
#include "nlohmann/json.hpp"
#include "tests/support/subprocess.h"

namespace inspection::sandbox {
namespace {

using ::inspection::testing::Subprocess;
using ::testing::HasSubstr;
using ::testing::Not;
using json = nlohmann::json;

constexpr std::chrono::milliseconds kDeadline{20000};

// The build puts inspection-sandbox next to this test binary.
std::string BinaryPath() {
  char self[4096];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return "";
  std::string path(self, static_cast<size_t>(n));
  return path.substr(0, path.rfind('/') + 1) + "inspection-sandbox";
}

class SandboxBinaryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    binary_ = BinaryPath();
    ASSERT_EQ(::access(binary_.c_str(), X_OK), 0)
        << binary_ << " is missing: build the inspection-sandbox target too";
  }

  // Starts the binary and waits for its ready line; returns the line's JSON.
  json StartServing(std::vector<std::string> flags) {
    std::vector<std::string> argv = {binary_};
    argv.insert(argv.end(), flags.begin(), flags.end());
    process_ = std::make_unique<Subprocess>(argv);
    const std::string line = process_->WaitForLine(
        [](const std::string& l) { return l.find("inspection-sandbox serving") != l.npos; },
        kDeadline);
    return json::parse(line, nullptr, false);
  }

  http::HttpResult Get(const std::string& url, const std::string& key) {
    auto transport = http::CurlTransport::Create();
    EXPECT_TRUE(transport.ok());
    http::HttpRequest request;
    request.method = "GET";
    request.url = url;
    request.headers.emplace_back("X-API-Key", key);
    std::promise<http::HttpResult> promise;
    (*transport)->Send(std::move(request), [&promise](http::HttpResult result) {
      promise.set_value(std::move(result));
    });
    return promise.get_future().get();
  }

  std::string binary_;
  std::unique_ptr<Subprocess> process_;
};

TEST_F(SandboxBinaryTest, ServesUntilSigtermThenExitsCleanly) {
  const json ready = StartServing({"--listen=127.0.0.1:0", "--seed=3",
                                   "--api-keys=bin-key-one,bin-key-two", "--webhook-delay-ms=5"});
  ASSERT_TRUE(ready.is_object()) << process_->output();
  ASSERT_TRUE(ready["port"].is_number_integer());
  const int port = ready["port"];
  EXPECT_GT(port, 0);
  const std::string base_url = "http://127.0.0.1:" + std::to_string(port);
  EXPECT_EQ(ready["base_url"], base_url);
  EXPECT_EQ(ready["webapp_url"], base_url + "/webapp");

  const std::string config = base_url + "/apiV1/eventmanager/configwebhook";
  EXPECT_EQ(Get(config, "bin-key-two").response.status, 200);
  EXPECT_EQ(Get(config, "sandbox-api-key").response.status, 401);  // replaced by --api-keys

  EXPECT_EQ(process_->Stop(SIGTERM, kDeadline), 0) << process_->output();
  EXPECT_THAT(process_->output(), Not(HasSubstr("bin-key")));  // keys are never printed
}

TEST_F(SandboxBinaryTest, ReadsApiKeysFromAFile) {
  char path[] = "/tmp/sandbox-keys-XXXXXX";
  const int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  ::close(fd);
  std::ofstream(path) << "file-key-one  \n\nfile-key-two\n";
  const json ready =
      StartServing({"--listen=127.0.0.1:0", "--threads=8", std::string("--api-keys-file=") + path});
  ASSERT_TRUE(ready.is_object()) << process_->output();
  const std::string config =
      ready["base_url"].get<std::string>() + "/apiV1/eventmanager/configwebhook";
  EXPECT_EQ(Get(config, "file-key-one").response.status, 200);  // trailing blanks trimmed
  EXPECT_EQ(Get(config, "file-key-two").response.status, 200);
  EXPECT_EQ(Get(config, "sandbox-api-key").response.status, 401);
  EXPECT_EQ(process_->Stop(SIGTERM, kDeadline), 0) << process_->output();
  EXPECT_THAT(process_->output(), Not(HasSubstr("file-key")));
  std::remove(path);
}

TEST_F(SandboxBinaryTest, SigintAlsoStopsCleanly) {
  const json ready = StartServing({"--listen=127.0.0.1:0"});
  ASSERT_TRUE(ready.is_object()) << process_->output();
  EXPECT_EQ(Get(ready["base_url"].get<std::string>() + "/apiV1/eventmanager/configevent",
                "sandbox-api-key")
                .response.status,
            200);
  EXPECT_EQ(process_->Stop(SIGINT, kDeadline), 0) << process_->output();
}

TEST_F(SandboxBinaryTest, LoadsFaultRulesFromAFile) {
  char path[] = "/tmp/sandbox-faults-XXXXXX";
  const int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  ::close(fd);
  std::ofstream(path) << R"([{"route": "get_webhook_config", "kind": "error", "status": 418}])";
  const json ready = StartServing({"--listen=127.0.0.1:0", std::string("--faults=") + path});
  ASSERT_TRUE(ready.is_object()) << process_->output();
  EXPECT_EQ(Get(ready["base_url"].get<std::string>() + "/apiV1/eventmanager/configwebhook",
                "sandbox-api-key")
                .response.status,
            418);
  EXPECT_EQ(process_->Stop(SIGTERM, kDeadline), 0);

  std::ofstream(path) << R"({"route": "x", "kind": "explode"})";
  Subprocess bad({binary_, "--listen=127.0.0.1:0", std::string("--faults=") + path});
  EXPECT_EQ(bad.Wait(kDeadline), 2) << bad.output();
  EXPECT_THAT(bad.output(), HasSubstr("kind"));
  std::remove(path);
}

TEST_F(SandboxBinaryTest, RefusesBadFlagsWithExitCode2) {
  for (const std::vector<std::string>& flags :
       {std::vector<std::string>{"--bogus=1"}, std::vector<std::string>{"--listen=nowhere"},
        std::vector<std::string>{"--seed=-1"}, std::vector<std::string>{"--api-keys="},
        std::vector<std::string>{"--webhook-delay-ms=soon"},
        std::vector<std::string>{"--faults=/no/such/file"}, std::vector<std::string>{"--seed"},
        std::vector<std::string>{"--api-keys-file=/no/such/file"},
        std::vector<std::string>{"--api-keys-file=/dev/null"},
        std::vector<std::string>{"--threads=0"}, std::vector<std::string>{"--threads=many"}}) {
    std::vector<std::string> argv = {binary_};
    argv.insert(argv.end(), flags.begin(), flags.end());
    Subprocess process(argv);
    EXPECT_EQ(process.Wait(kDeadline), 2) << flags[0] << ": " << process.output();
    const std::string name = flags[0].substr(0, flags[0].find('='));
    EXPECT_THAT(process.output(), HasSubstr(name)) << flags[0];
  }
}

TEST_F(SandboxBinaryTest, HelpDescribesTheFlags) {
  Subprocess process({binary_, "--help"});
  EXPECT_EQ(process.Wait(kDeadline), 0);
  for (const char* flag : {"--listen", "--seed", "--api-keys", "--api-keys-file", "--threads",
                           "--webhook-delay-ms", "--faults"}) {
    EXPECT_THAT(process.output(), HasSubstr(flag));
  }
}

}  // namespace
}  // namespace inspection::sandbox
