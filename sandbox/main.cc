// inspection-sandbox: the vendor emulator as its own process (see
// sandbox/emulator/sandbox_server.h and sandbox/emulator/README.md).
// Parses flags, starts the server, prints one JSON "ready" line on stderr, waits for
// SIGTERM/SIGINT and stops cleanly (exit 0). Bad flags exit 2, a failed start exits 1.
#include <pthread.h>
#include <signal.h>

#include <cstdint>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "adapters/http/http_server.h"
#include "nlohmann/json.hpp"
#include "sandbox/emulator/sandbox_server.h"

namespace {

using inspection::sandbox::SandboxOptions;
using inspection::sandbox::SandboxServer;

constexpr char kUsage[] =
    R"(Usage: inspection-sandbox [flags]

A stateful emulator of the vehicle-inspection vendor API, for development and tests.

  --listen=HOST:PORT      address to serve on (default 127.0.0.1:8090; port 0 = any free
                          port, printed in the ready line)
  --seed=N                seed of generated ids and fault probabilities (default 1)
  --api-keys=K1,K2        accepted X-API-Key values (default sandbox-api-key)
  --api-keys-file=FILE    the same, one key per line (keeps them off the command line);
                          blank lines and trailing whitespace are ignored
  --threads=N             threads running the endpoints (default 64); a latency fault
                          holds one for its pause, idle connections hold none
  --webhook-delay-ms=N    delay before each webhook delivery (default 200)
  --faults=FILE           JSON fault rules active from the start (as POST /_sandbox/faults)
  --help                  this text

When ready it prints one JSON line on stderr:
  {"msg":"inspection-sandbox serving","port":P,"base_url":"...","webapp_url":"..."}
The admin API under /_sandbox/ needs no API key: never expose the sandbox publicly.
)";

// A flag error: says what is wrong and exits 2.
int UsageError(const std::string& message) {
  std::cerr << "inspection-sandbox: " << message << " (run with --help for the flags)\n";
  return 2;
}

bool ParseListen(const std::string& value, SandboxOptions* options) {
  const size_t colon = value.rfind(':');
  if (colon == std::string::npos || colon == 0) return false;
  std::string host = value.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  int port = 0;
  if (!absl::SimpleAtoi(value.substr(colon + 1), &port) || port < 0 || port > 65535) {
    return false;
  }
  options->host = host;
  options->port = port;
  return true;
}

// Fills `options` from argv. Returns -1 to go on, or the exit code.
int ParseFlags(int argc, char** argv, SandboxOptions* options) {
  options->host = "127.0.0.1";
  options->port = 8090;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::cout << kUsage;
      return 0;
    }
    const size_t equals = arg.find('=');
    const std::string name = arg.substr(0, equals);
    const bool known = name == "--listen" || name == "--seed" || name == "--api-keys" ||
                       name == "--api-keys-file" || name == "--threads" ||
                       name == "--webhook-delay-ms" || name == "--faults";
    if (!known) return UsageError("unknown flag " + name);
    if (equals == std::string::npos) return UsageError(name + " needs a value: " + name + "=...");
    const std::string value = arg.substr(equals + 1);
    if (name == "--listen") {
      if (!ParseListen(value, options)) return UsageError("--listen must be HOST:PORT");
    } else if (name == "--seed") {
      uint64_t seed = 0;
      if (!absl::SimpleAtoi(value, &seed)) return UsageError("--seed must be an integer >= 0");
      options->seed = seed;
    } else if (name == "--api-keys") {
      std::vector<std::string> keys = absl::StrSplit(value, ',', absl::SkipEmpty());
      if (keys.empty()) return UsageError("--api-keys needs at least one key");
      options->api_keys = std::move(keys);
    } else if (name == "--api-keys-file") {
      std::ifstream file(value);
      if (!file) return UsageError("--api-keys-file: cannot read " + value);
      std::vector<std::string> keys;
      for (std::string line; std::getline(file, line);) {
        line.erase(line.find_last_not_of(" \t\r") + 1);
        if (!line.empty()) keys.push_back(std::move(line));
      }
      if (keys.empty()) return UsageError("--api-keys-file: " + value + " holds no key");
      options->api_keys = std::move(keys);
    } else if (name == "--threads") {
      int threads = 0;
      if (!absl::SimpleAtoi(value, &threads) || threads < 1 || threads > 100000) {
        return UsageError("--threads must be an integer in 1..100000");
      }
      options->threads = threads;
    } else if (name == "--webhook-delay-ms") {
      int64_t delay = 0;
      if (!absl::SimpleAtoi(value, &delay) || delay < 0) {
        return UsageError("--webhook-delay-ms must be an integer >= 0");
      }
      options->webhook_delay = std::chrono::milliseconds(delay);
    } else if (name == "--faults") {
      std::ifstream file(value);
      if (!file) return UsageError("--faults: cannot read " + value);
      std::stringstream text;
      text << file.rdbuf();
      nlohmann::json rules = nlohmann::json::parse(text.str(), nullptr, false);
      if (rules.is_discarded()) return UsageError("--faults: " + value + " is not valid JSON");
      options->faults = std::move(rules);
    }
  }
  return -1;
}

}  // namespace

int main(int argc, char** argv) {
  // Block the shutdown signals before any thread starts, so every thread inherits the
  // mask and sigwait() below is the only place they are delivered.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  // A peer that closes a socket while we write to it must cost an error, not the process
  // (hiredis and parts of the HTTP servers write without MSG_NOSIGNAL).
  signal(SIGPIPE, SIG_IGN);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  inspection::http::RaiseOpenFileLimit();  // a connection is a file

  SandboxOptions options;
  if (const int exit_code = ParseFlags(argc, argv, &options); exit_code >= 0) return exit_code;

  auto server = SandboxServer::Start(std::move(options));
  if (!server.ok()) {
    // Bad fault rules are a configuration error too; anything else failed to start.
    const bool config_error = server.status().code() == absl::StatusCode::kInvalidArgument;
    std::cerr << nlohmann::json{{"msg", "inspection-sandbox failed to start"},
                                {"error", std::string(server.status().message())}}
                     .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
              << std::endl;
    return config_error ? 2 : 1;
  }
  std::cerr << nlohmann::json{{"msg", "inspection-sandbox serving"},
                              {"port", (*server)->port()},
                              {"base_url", (*server)->BaseUrl()},
                              {"webapp_url", (*server)->WebappUrl()}}
                   .dump()
            << std::endl;

  int signal_number = 0;
  while (sigwait(&signals, &signal_number) != 0) {
  }
  (*server)->Stop();
  std::cerr << nlohmann::json{{"msg", "inspection-sandbox stopped"},
                              {"signal", signal_number == SIGINT ? "SIGINT" : "SIGTERM"}}
                   .dump()
            << std::endl;
  return 0;
}
