// A secret string (API key, webhook key) that does not print itself.

#ifndef INSPECTION_GATEWAY_CONFIG_SECRET_H_
#define INSPECTION_GATEWAY_CONFIG_SECRET_H_

#include <ostream>
#include <string>
#include <utility>

namespace inspection::config {

// Holds a secret value. Streaming it (and so gtest's printer) shows "[redacted]"; the value
// itself is only reachable through `Reveal()`, which keeps every use easy to grep and review.
// Hand it to `logging::RegisterSecret` at start-up (see `config::RegisterSecrets`).
class Secret {
 public:
  Secret() = default;
  explicit Secret(std::string value) : value_(std::move(value)) {}

  // The secret itself: pass it only to the place that needs it (e.g. an HTTP header).
  const std::string& Reveal() const { return value_; }
  bool empty() const { return value_.empty(); }

  friend std::ostream& operator<<(std::ostream& os, const Secret& secret) {
    return os << (secret.empty() ? "[unset]" : "[redacted]");
  }

 private:
  std::string value_;
};

}  // namespace inspection::config

#endif  // INSPECTION_GATEWAY_CONFIG_SECRET_H_
