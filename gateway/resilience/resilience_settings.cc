#include "gateway/resilience/resilience_settings.h"

#include <ratio>
#include <string>
#include <utility>

namespace inspection::resilience {
namespace {

using settings::kDayMs;

// The rolling window of the failure ratio, in milliseconds: kept as window_buckets buckets
// of its tenth (or whatever window_buckets says).
settings::Setting<CircuitBreakerConfig> Window(std::int64_t min, std::int64_t max,
                                               std::string placeholder, std::string help) {
  settings::Setting<CircuitBreakerConfig> s = settings::Key<CircuitBreakerConfig>(
      "circuit_breaker.window_ms", settings::ValueKind::kInteger, std::move(placeholder),
      std::move(help));
  s.store = [min, max](const settings::json& value, CircuitBreakerConfig& o) -> absl::Status {
    absl::StatusOr<std::int64_t> ms = settings::internal::IntegerIn(value, min, max);
    if (!ms.ok()) return ms.status();
    o.bucket_width = absl::Milliseconds(*ms) / o.window_buckets;
    return absl::OkStatus();
  };
  s.show = [](const CircuitBreakerConfig& o) {
    return settings::ordered_json(absl::ToInt64Milliseconds(o.bucket_width * o.window_buckets));
  };
  return s;
}

}  // namespace

settings::Schema<RetryBudgetConfig> RetryBudgetSchema() {
  return {{
      settings::Percent<RetryBudgetConfig>(
          "retry_budget.percent", [](auto& o) -> auto& { return o.ratio; }, 0, 100,
          "Retries in flight may be at most this share of the requests in flight ..."),
      settings::Integer<RetryBudgetConfig>(
          "retry_budget.min_retries", [](auto& o) -> auto& { return o.min_retries; }, 0, 1000000,
          "N", "... but at least this many."),
  }};
}

settings::Schema<CircuitBreakerConfig> CircuitBreakerSchema() {
  settings::Schema<CircuitBreakerConfig> schema;
  schema.keys = {
      settings::Integer<CircuitBreakerConfig>(
          "circuit_breaker.consecutive_failures",
          [](auto& o) -> auto& { return o.consecutive_failures; }, 0, 1000000, "N",
          "Open after this many consecutive failed calls (0: rule off)."),
      settings::Percent<CircuitBreakerConfig>(
          "circuit_breaker.failure_ratio_percent", [](auto& o) -> auto& { return o.failure_ratio; },
          1, 100, "Open when this share of the calls in the window failed ..."),
      settings::Integer<CircuitBreakerConfig>(
          "circuit_breaker.minimum_requests", [](auto& o) -> auto& { return o.minimum_requests; },
          1, 1000000, "N", "... and the window holds at least this many calls."),
      Window(10, kDayMs, "MS", "The rolling window of the failure ratio (ten buckets)."),
      settings::Duration<std::milli, CircuitBreakerConfig>(
          "circuit_breaker.open_ms", [](auto& o) -> auto& { return o.open_duration; }, 1, kDayMs,
          "MS",
          "How long the breaker stays open before one probe; doubles after a failed probe ..."),
      settings::Duration<std::milli, CircuitBreakerConfig>(
          "circuit_breaker.max_open_ms", [](auto& o) -> auto& { return o.max_open_duration; }, 1,
          kDayMs, "MS", "... up to this."),
  };
  schema.rules.push_back([](const CircuitBreakerConfig& o) {
    return o.max_open_duration < o.open_duration
               ? absl::InvalidArgumentError(
                     "`circuit_breaker.max_open_ms` must be >= `circuit_breaker.open_ms`")
               : absl::OkStatus();
  });
  return schema;
}

}  // namespace inspection::resilience
