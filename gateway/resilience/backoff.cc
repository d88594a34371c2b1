#include "gateway/resilience/backoff.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace inspection::resilience {

RandomSource DefaultRandomSource() {
  return [] {
    // One engine per thread: no lock on the retry path, and no shared mutable global.
    thread_local std::mt19937_64 engine{std::random_device{}()};
    // The top 53 bits scaled by 2^-53 are exactly representable and strictly below 1;
    // std::uniform_real_distribution can return 1.0 through rounding (LWG 2524).
    return static_cast<double>(engine() >> 11) * 0x1.0p-53;
  };
}

absl::StatusOr<BackoffPolicy> BackoffPolicy::Create(const BackoffConfig& config) {
  if (config.base <= absl::ZeroDuration() || config.base == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(absl::StrCat("backoff base must be positive and finite, got ",
                                                   absl::FormatDuration(config.base)));
  }
  if (config.cap < config.base || config.cap == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "backoff cap must be finite and at least the base (", absl::FormatDuration(config.base),
        "), got ", absl::FormatDuration(config.cap)));
  }
  if (config.max_attempts < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_attempts must be at least 1, got ", config.max_attempts));
  }
  return BackoffPolicy(config);
}

absl::Duration BackoffPolicy::Ceiling(int retry) const {
  // Doubling step by step rather than base * 2^retry: stops at the cap, so a large
  // retry number can neither overflow an integer shift nor saturate the Duration.
  absl::Duration ceiling = config_.base;
  for (int i = 0; i < retry && ceiling < config_.cap; ++i) ceiling *= 2;
  return std::min(ceiling, config_.cap);
}

absl::Duration BackoffPolicy::Delay(int retry, double random01) const {
  // `!(x >= 0)` also catches NaN: a broken random source degrades to "no wait" for that
  // retry rather than to an undefined or unbounded one.
  if (!(random01 >= 0.0)) random01 = 0.0;
  if (random01 >= 1.0) random01 = std::nextafter(1.0, 0.0);
  const absl::Duration ceiling = Ceiling(retry);
  const absl::Duration scaled = ceiling * random01;
  const absl::Duration rounded =
      absl::Floor(scaled + absl::Nanoseconds(500), absl::Microseconds(1));
  return std::min(rounded, ceiling);
}

BackoffSequence::BackoffSequence(BackoffPolicy policy, RandomSource random)
    : policy_(std::move(policy)), random_(random ? std::move(random) : DefaultRandomSource()) {}

std::optional<absl::Duration> BackoffSequence::NextDelay() {
  if (retries_ + 1 >= policy_.max_attempts()) return std::nullopt;
  return policy_.Delay(retries_++, random_());
}

}  // namespace inspection::resilience
