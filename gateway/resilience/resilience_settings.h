// The settings of the retry budget and the circuit breaker, declared beside them.

#ifndef GATEWAY_RESILIENCE_RESILIENCE_SETTINGS_H_
#define GATEWAY_RESILIENCE_RESILIENCE_SETTINGS_H_

#include "gateway/resilience/circuit_breaker.h"
#include "gateway/resilience/retry_budget.h"
#include "gateway/settings/setting.h"

namespace inspection::resilience {

// The retry budget: retries in flight as a share of requests in flight.
settings::Schema<RetryBudgetConfig> RetryBudgetSchema();
// The circuit breaker's rules and timings.
settings::Schema<CircuitBreakerConfig> CircuitBreakerSchema();

}  // namespace inspection::resilience

#endif  // GATEWAY_RESILIENCE_RESILIENCE_SETTINGS_H_
