// Fuzz target: the config file (gateway/config: LoadConfig with `--config=PATH`, the entry
// point the binary uses). Each input is written to one scratch file and loaded as the
// gateway's config file, with an environment that holds only the vendor API key and the
// webhook key (secrets never come from the file), and one key file the seeds' named
// accounts point at (/tmp/config_fuzzer-account-key). A config that loads is dumped as
// --print-config and as the single-line log field.
//
// Checks beyond the sanitizers: neither an error message nor a dump contains a secret that the
// input itself does not hold. libFuzzer learns the secrets from the comparisons it traces and
// writes them into inputs (as a key name, say); a message that quotes such an input back is
// quoting the input, not leaking the file or the environment.
//
// Inputs that name a path under /dev, /proc or /sys are skipped: the loader reads at most
// 4 MiB of a config file and 64 KiB of a secret file, but a FIFO or a terminal there would
// block the read itself.

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "gateway/config/config.h"

namespace {

constexpr char kApiKey[] = "fz-api-Q7vW2pL9xK4mN8rT";
constexpr char kWebhookKey[] = "fz-hook-J3sD6fH1bV5cX0zA";
constexpr char kAccountKey[] = "fz-acct-R8tY2uI6oP0aS4dF";
constexpr char kAccountKeyFile[] = "/tmp/config_fuzzer-account-key";

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "config_fuzzer: %s\n", what);
  std::abort();
}

// Whether `text` holds a secret that `input` does not.
bool HoldsSecret(const std::string& text, const std::string& input) {
  for (const char* secret : {kApiKey, kWebhookKey, kAccountKey}) {
    if (text.find(secret) != std::string::npos && input.find(secret) == std::string::npos) {
      return true;
    }
  }
  return false;
}

std::string ScratchPath() {
  char path[] = "/tmp/config_fuzzer.XXXXXX";
  const int fd = ::mkstemp(path);
  if (fd < 0) Fail("no scratch file");
  ::close(fd);
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string* const path = [] {
    std::FILE* key = std::fopen(kAccountKeyFile, "wb");
    if (key == nullptr || std::fputs(kAccountKey, key) < 0) Fail("cannot write the account key");
    std::fclose(key);
    static std::string scratch = ScratchPath();
    std::atexit([] {
      std::remove(scratch.c_str());
      std::remove(kAccountKeyFile);
    });
    return &scratch;
  }();
  const std::string text(reinterpret_cast<const char*>(data), size);
  for (const char* special : {"/dev", "/proc", "/sys"}) {
    if (text.find(special) != std::string::npos) return 0;
  }
  std::FILE* file = std::fopen(path->c_str(), "wb");
  if (file == nullptr) Fail("cannot write the scratch file");
  if (size > 0 && std::fwrite(data, 1, size, file) != size) Fail("cannot write the scratch file");
  std::fclose(file);

  const inspection::config::EnvLookup env =
      [](const std::string& name) -> std::optional<std::string> {
    if (name == "INSPECTION_API_KEY") return kApiKey;
    if (name == "INSPECTION_WEBHOOK_KEY") return kWebhookKey;
    return std::nullopt;
  };
  const absl::StatusOr<inspection::config::GatewayConfig> config =
      inspection::config::LoadConfig({"--config=" + *path}, env);
  if (!config.ok()) {
    if (HoldsSecret(std::string(config.status().message()), text))
      Fail("an error message holds a secret");
    return 0;
  }
  if (HoldsSecret(inspection::config::DumpConfig(*config), text))
    Fail("--print-config holds a secret");
  if (HoldsSecret(
          inspection::config::DumpConfig(*config, inspection::config::DumpFormat::kSingleLine),
          text)) {
    Fail("the config's log field holds a secret");
  }
  return 0;
}
