// Helpers for integration tests that put the gateway in front of in-process sandboxes.
#ifndef TESTS_INTEGRATION_SANDBOX_HELPERS_H_
#define TESTS_INTEGRATION_SANDBOX_HELPERS_H_

#include <httplib.h>

#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "inspection/v1/token.pb.h"
#include "nlohmann/json.hpp"
#include "sandbox/emulator/sandbox_server.h"
#include "tests/integration/gateway_fixture.h"

namespace inspection::testing {

// A CreateToken request the spec's rules accept.
inline v1::CreateTokenRequest ValidTokenRequest() {
  return GatewayTest::Parse<v1::CreateTokenRequest>(R"pb(
    options { shoot_inspect: true fast_track: false }
    trade_in { sending_type: SENDING_TYPE_NONE }
    customer {
      email: "<EMAIL>"
      firstname: "<FIRST_NAME>"
      lastname: "<LAST_NAME>"
      phone: "<PHONE>"
      locale: LOCALE_DE
    }
    validity: 7
  )pb");
}

// The server's initial metadata `name` of a finished call ("" when absent).
inline std::string ServerHeader(const grpc::ClientContext& context, const std::string& name) {
  const auto& metadata = context.GetServerInitialMetadata();
  auto it = metadata.find(name);
  return it == metadata.end() ? std::string() : std::string(it->second.data(), it->second.size());
}

// Starts counting the calls `vendor` gets on `route`: a zero-latency fault rule that fires
// (and counts down from `start`) on every request.
inline void CountVendorCalls(sandbox::SandboxServer& vendor, const std::string& route,
                             int start = 100000) {
  auto rules = sandbox::ParseFaultRules(nlohmann::json::parse(absl::StrCat(
      R"({"route": ")", route, R"(", "kind": "latency", "latency_ms": 0, "times": )", start, "}")));
  ASSERT_TRUE(rules.ok()) << rules.status();
  vendor.faults().AddRules(*rules);
}

// Calls `vendor` got on `route` since CountVendorCalls (or since a slower latency rule
// counting down from `start` was added); -1 when no such rule exists.
inline int VendorCalls(sandbox::SandboxServer& vendor, const std::string& route,
                       int start = 100000) {
  for (const auto& rule : vendor.faults().Rules()) {
    if (rule.route == route && rule.kind == sandbox::FaultKind::kLatency) {
      return start - rule.times;
    }
  }
  return -1;
}

// GET /_sandbox/state: the emulator's tokens, inspections and configuration.
inline nlohmann::json SandboxState(sandbox::SandboxServer& vendor) {
  httplib::Client client(vendor.BaseUrl());
  auto response = client.Get("/_sandbox/state");
  EXPECT_TRUE(response) << "no answer from /_sandbox/state";
  if (!response) return nullptr;
  return nlohmann::json::parse(response->body, nullptr, false);
}

}  // namespace inspection::testing

#endif  // TESTS_INTEGRATION_SANDBOX_HELPERS_H_
