#include "gateway/resilience/retry_budget.h"

#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace inspection::resilience {

absl::StatusOr<std::unique_ptr<RetryBudget>> RetryBudget::Create(const RetryBudgetConfig& config) {
  if (!std::isfinite(config.ratio) || config.ratio < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("retry budget ratio must be finite and >= 0, got ", config.ratio));
  }
  if (config.min_retries < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("retry budget min_retries must be >= 0, got ", config.min_retries));
  }
  return std::unique_ptr<RetryBudget>(new RetryBudget(config));
}

void RetryBudget::RequestStarted() {
  absl::MutexLock lock(&mu_);
  ++stats_.requests_in_flight;
}

void RetryBudget::RequestFinished() {
  absl::MutexLock lock(&mu_);
  if (stats_.requests_in_flight > 0) --stats_.requests_in_flight;
}

bool RetryBudget::TryStartRetry() {
  absl::MutexLock lock(&mu_);
  const int64_t retries = stats_.retries_in_flight;
  const int64_t requests = stats_.requests_in_flight;
  // retries < max(min, ratio * requests), with the product turned into a quotient: in
  // doubles 0.07 * 100 is 7.000000000000001, which would let an 8th retry in, whereas
  // 7.0 / 100 and the literal 0.07 are the same real number rounded the same way, so the
  // boundary case compares equal and is refused, as the rule says.
  const bool allowed =
      retries < config_.min_retries ||
      (requests > 0 &&
       static_cast<double>(retries) / static_cast<double>(requests) < config_.ratio);
  if (allowed) {
    ++stats_.retries_in_flight;
    ++stats_.retries_started;
  } else {
    ++stats_.budget_exhausted;
  }
  return allowed;
}

void RetryBudget::RetryFinished() {
  absl::MutexLock lock(&mu_);
  if (stats_.retries_in_flight > 0) --stats_.retries_in_flight;
}

RetryBudgetStats RetryBudget::Stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

}  // namespace inspection::resilience
