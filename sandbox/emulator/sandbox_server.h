#ifndef SANDBOX_EMULATOR_SANDBOX_SERVER_H_
#define SANDBOX_EMULATOR_SANDBOX_SERVER_H_

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "adapters/http/http_transport.h"
#include "nlohmann/json.hpp"
#include "sandbox/clock.h"
#include "sandbox/faults/fault_injector.h"
#include "sandbox/webhooks/webhook_dispatcher.h"

namespace inspection::sandbox {

inline constexpr char kDefaultSandboxApiKey[] = "sandbox-api-key";

struct SandboxOptions {
  // Listen address; port 0 lets the OS choose (read it back with port()).
  std::string host = "127.0.0.1";
  int port = 0;
  // Seed of every random choice (fault probabilities, generated ids' suffixes).
  uint64_t seed = 1;
  // Accepted `X-API-Key` values; a request with another or no key gets 401.
  std::vector<std::string> api_keys = {kDefaultSandboxApiKey};
  // Delay before the first delivery attempt of every webhook, and the retry schedule.
  std::chrono::milliseconds webhook_delay{200};
  std::vector<std::chrono::milliseconds> webhook_retry_schedule = {
      std::chrono::milliseconds(500), std::chrono::seconds(2), std::chrono::seconds(5),
      std::chrono::seconds(15), std::chrono::seconds(60)};
  // Fault rules active from the start (same JSON as POST /_sandbox/faults).
  nlohmann::json faults = nlohmann::json::array();
  // Threads running the endpoints (a latency fault holds one for its pause); idle
  // connections hold none.
  int threads = 64;
  // Transport for webhook deliveries; when null the server creates a CurlTransport.
  std::shared_ptr<http::HttpTransport> transport;
};

// The vendor emulator: the 15 endpoints of the spec (both apiV1/apiv1 spellings on
// every path), stateful (tokens, inspections, webhook and event config), the spec's
// request rules (400 naming the field), deterministic image analysis, webhook delivery
// with retries (one at a time, in emission order), fault injection, and an admin API
// under /_sandbox/ (no API key: a development tool) that plays the customer and drives
// the clock. Embeddable (tests, `inspection-gateway --sandbox`) and its own binary
// (`inspection-sandbox`). sandbox/emulator/README.md lists the error bodies, the admin
// API and every choice made where the spec is silent. Thread-safe.
class SandboxServer {
 public:
  // Binds, starts serving and returns once connections are accepted. InvalidArgument for
  // bad fault rules or no API key; Unavailable when the address cannot be bound.
  static absl::StatusOr<std::unique_ptr<SandboxServer>> Start(SandboxOptions options);
  // Whether the sandbox emulates the vendor endpoint of `rpc` ("inspection.v1.TokenService.
  // CreateToken"); the endpoint's method and path come from the RPC's vendor_route.
  static bool Emulates(const std::string& rpc);
  ~SandboxServer();  // Stop()

  SandboxServer(const SandboxServer&) = delete;
  SandboxServer& operator=(const SandboxServer&) = delete;

  int port() const;
  // "http://<host>:<port>": the vendor API base URL.
  std::string BaseUrl() const;
  // "<BaseUrl>/webapp": the emulated customer web application (its `{webapp_url}`).
  std::string WebappUrl() const;

  // Sets the webhook destination as PUT configwebhook would, and enables webhook
  // delivery for `events` (as PUT configevent would); used by `--sandbox`.
  void ConfigureWebhook(const std::string& url, const std::string& header_key,
                        const std::vector<std::string>& events);

  FaultInjector& faults();
  WebhookDispatcher& webhooks();
  SandboxClock& clock();

  // Stops accepting, closes connections, stops deliveries (attempts fail from then on).
  // faults(), webhooks() (with its log) and clock() stay valid until destruction.
  // Idempotent.
  void Stop();

 private:
  struct Impl;
  explicit SandboxServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace inspection::sandbox

#endif  // SANDBOX_EMULATOR_SANDBOX_SERVER_H_
