#ifndef TESTS_SUPPORT_GATEWAY_BINARY_H_
#define TESTS_SUPPORT_GATEWAY_BINARY_H_

#include <chrono>
#include <string>
#include <vector>

#include "tests/support/subprocess.h"

namespace inspection::testing {

// The ports a started inspection-gateway announced in its "inspection-gateway serving"
// line (0 for a listener it did not start, or when the line never came).
struct ServingPorts {
  int grpc = 0;
  int webhook = 0;
  int admin = 0;
};

// The command line of an inspection-gateway on loopback for a test: `binary`, the vendor at
// `upstream_url`, every listener on 127.0.0.1 port 0, the event log in `event_log_file`.
// Append the flags of the test to it.
std::vector<std::string> LoopbackGatewayArgv(const std::string& binary,
                                             const std::string& upstream_url,
                                             const std::string& event_log_file);

// Waits for `gateway`'s "serving" line (it binds port 0, so the ports are only known
// from it) until `deadline`.
ServingPorts WaitUntilServing(Subprocess& gateway, std::chrono::milliseconds deadline);

// The value of one series ("name{labels}" exactly as exposed) in a Prometheus text
// exposition; -1 when absent.
double PrometheusSample(const std::string& text, const std::string& series);

// The sum of every series of metric `name` whose labels contain `label` (e.g.
// `grpc_method="Subscribe"`); 0 when none.
double PrometheusSum(const std::string& text, const std::string& name, const std::string& label);

}  // namespace inspection::testing

#endif  // TESTS_SUPPORT_GATEWAY_BINARY_H_
