#ifndef SANDBOX_FAULTS_FAULT_INJECTOR_H_
#define SANDBOX_FAULTS_FAULT_INJECTOR_H_

#include <chrono>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "nlohmann/json.hpp"

namespace inspection::sandbox {

// What can go wrong on one HTTP answer of the emulated vendor.
enum class FaultKind {
  kLatency,    // answer normally after a delay (fixed, or uniform in [min, max])
  kError,      // answer `status` with `body` instead of the real answer
  kRateLimit,  // answer 429 with Retry-After (`retry_after`: delta-seconds or HTTP-date)
  kReset,      // close the connection without answering
  kTruncate,   // send the real answer's headers and only part of its body, then close
  kMalformed,  // answer 200 with a body that is not JSON
  kSlowBody,   // send the real answer's body in small chunks with pauses
};

// What can go wrong on one webhook delivery.
enum class WebhookFaultKind {
  kDuplicate,  // deliver the event twice
  kReorder,    // hold the event and deliver it after the next one
  kDelay,      // deliver it `latency` later than scheduled
  kFailFirst,  // the first `count` attempts fail (the receiver is not even called)
  kDrop,       // never delivered: one final "injected_drop" attempt, the receiver is not
               // called (a webhook lost for good, as when the vendor gives up)
};

struct FaultRule {
  // A route's metric label from the gateway's route table ("create_token",
  // "search_inspections", ...), or "*" for every route. For webhook faults: an event
  // name ("createReport") or "*".
  std::string route = "*";
  bool webhook = false;  // true: a WebhookFaultKind rule
  FaultKind kind = FaultKind::kError;
  WebhookFaultKind webhook_kind = WebhookFaultKind::kDuplicate;
  double probability = 1.0;  // 0..1, drawn from the injector's seeded generator
  // Remaining times the rule fires; -1 = unlimited. Decremented each time it fires.
  int times = -1;
  std::chrono::milliseconds latency{0};      // kLatency (fixed), kDelay, kSlowBody pause
  std::chrono::milliseconds latency_max{0};  // kLatency: when > latency, uniform in range
  int status = 500;                          // kError
  std::string body;                          // kError body (JSON text or anything)
  std::string retry_after = "1";             // kRateLimit
  int count = 1;                             // kFailFirst: attempts that fail
};

// A fault chosen for one answer (or delivery).
struct FaultDecision {
  FaultRule rule;  // a copy of the rule that fired; `latency` resolved for ranges
};

// Parses rules from JSON (the admin API's and the config file's format), one object or
// an array of objects:
//   {"route": "create_token", "kind": "error", "status": 503, "body": "{...}",
//    "probability": 0.5, "times": 2}
//   {"route": "*", "kind": "latency", "latency_ms": 100, "latency_max_ms": 300}
//   {"route": "get_token_status", "kind": "rate_limit", "retry_after": "2"}
//   {"route": "assess_quality", "kind": "reset" | "truncate" | "malformed" | "slow_body"}
//   {"webhook": true, "event": "createReport", "kind": "duplicate" | "reorder" |
//    "delay" | "fail_first" | "drop", "latency_ms": 500, "count": 2}
// Unknown keys and bad values are InvalidArgument naming the key.
absl::StatusOr<std::vector<FaultRule>> ParseFaultRules(const nlohmann::json& json);
nlohmann::json FaultRuleToJson(const FaultRule& rule);

// Holds the active rules and decides, per answer, which one fires. Deterministic for a
// given seed and call sequence. Thread-safe.
class FaultInjector {
 public:
  explicit FaultInjector(uint64_t seed = 1);

  void AddRules(std::vector<FaultRule> rules);
  void Clear();
  std::vector<FaultRule> Rules() const;

  // The first matching HTTP rule (exact route before "*", then in insertion order)
  // that fires (probability draw, remaining times); nullopt for a normal answer.
  std::optional<FaultDecision> DecideHttp(const std::string& route);
  // The same for one webhook delivery of `event_name`.
  std::optional<FaultDecision> DecideWebhook(const std::string& event_name);

 private:
  std::optional<FaultDecision> Decide(const std::string& name, bool webhook);

  mutable absl::Mutex mu_;
  std::vector<FaultRule> rules_ ABSL_GUARDED_BY(mu_);
  std::mt19937_64 rng_ ABSL_GUARDED_BY(mu_);
};

}  // namespace inspection::sandbox

#endif  // SANDBOX_FAULTS_FAULT_INJECTOR_H_
