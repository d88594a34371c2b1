#include "tests/support/gateway_binary.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"

namespace inspection::testing {

std::vector<std::string> LoopbackGatewayArgv(const std::string& binary,
                                             const std::string& upstream_url,
                                             const std::string& event_log_file) {
  return {binary,
          "--upstream-url=" + upstream_url,
          "--webapp-url=http://127.0.0.1:9/webapp",
          "--grpc-addr=127.0.0.1:0",
          "--webhook-addr=127.0.0.1:0",
          "--admin-addr=127.0.0.1:0",
          "--event-log=sqlite:" + event_log_file};
}

ServingPorts WaitUntilServing(Subprocess& gateway, std::chrono::milliseconds deadline) {
  const std::string line = gateway.WaitForLine(
      [](const std::string& l) { return l.find("inspection-gateway serving") != l.npos; },
      deadline);
  ServingPorts ports;
  const auto ready = nlohmann::json::parse(line, nullptr, false);
  if (!ready.is_discarded() && ready.is_object()) {
    ports.grpc = ready.value("grpc_port", 0);
    ports.webhook = ready.value("webhook_port", 0);
    ports.admin = ready.value("admin_port", 0);
  }
  return ports;
}

double PrometheusSample(const std::string& text, const std::string& series) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (line.size() > series.size() && line.substr(0, series.size()) == series &&
        line[series.size()] == ' ') {
      double value = -1;
      if (absl::SimpleAtod(line.substr(series.size() + 1), &value)) return value;
    }
  }
  return -1;
}

double PrometheusSum(const std::string& text, const std::string& name, const std::string& label) {
  double sum = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (absl::StartsWith(line, name + "{") && absl::StrContains(line, label)) {
      double value = 0;
      if (absl::SimpleAtod(line.substr(line.rfind(' ') + 1), &value)) sum += value;
    }
  }
  return sum;
}

}  // namespace inspection::testing
