#include "gateway/resilience/circuit_breaker.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace inspection::resilience {

namespace {

constexpr int64_t kNoBucket = std::numeric_limits<int64_t>::min();  // Bucket::index unset

bool IsPositiveFinite(absl::Duration d) {
  return d > absl::ZeroDuration() && d != absl::InfiniteDuration();
}

}  // namespace

std::string_view CircuitStateName(CircuitState state) {
  switch (state) {
    case CircuitState::kClosed:
      return "closed";
    case CircuitState::kOpen:
      return "open";
    case CircuitState::kHalfOpen:
      return "half_open";
  }
  return "closed";
}

absl::StatusOr<std::unique_ptr<CircuitBreaker>> CircuitBreaker::Create(
    const CircuitBreakerConfig& config, Clock clock, Listener listener) {
  if (config.consecutive_failures < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "consecutive_failures must be >= 0 (0 disables), got ", config.consecutive_failures));
  }
  if (!(config.failure_ratio > 0.0 && config.failure_ratio <= 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("failure_ratio must be in (0, 1], got ", config.failure_ratio));
  }
  if (config.minimum_requests < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("minimum_requests must be >= 1, got ", config.minimum_requests));
  }
  if (config.window_buckets < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("window_buckets must be >= 1, got ", config.window_buckets));
  }
  if (!IsPositiveFinite(config.bucket_width)) {
    return absl::InvalidArgumentError(absl::StrCat("bucket_width must be positive and finite, got ",
                                                   absl::FormatDuration(config.bucket_width)));
  }
  if (!IsPositiveFinite(config.open_duration)) {
    return absl::InvalidArgumentError(
        absl::StrCat("open_duration must be positive and finite, got ",
                     absl::FormatDuration(config.open_duration)));
  }
  if (config.max_open_duration < config.open_duration ||
      config.max_open_duration == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_open_duration must be finite and >= open_duration, got ",
                     absl::FormatDuration(config.max_open_duration)));
  }
  if (config.half_open_max_probes < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("half_open_max_probes must be >= 1, got ", config.half_open_max_probes));
  }
  if (config.success_threshold < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("success_threshold must be >= 1, got ", config.success_threshold));
  }
  if (!clock) clock = [] { return absl::Now(); };
  return std::unique_ptr<CircuitBreaker>(
      new CircuitBreaker(config, std::move(clock), std::move(listener)));
}

CircuitBreaker::CircuitBreaker(const CircuitBreakerConfig& config, Clock clock, Listener listener)
    : config_(config), clock_(std::move(clock)), listener_(std::move(listener)) {
  absl::MutexLock lock(&mu_);
  buckets_.resize(config_.window_buckets);
  latest_bucket_ = kNoBucket;
  current_open_duration_ = config_.open_duration;
  ResetCountsLocked();
}

CircuitBreaker::Permit CircuitBreaker::Allow() {
  Permit permit;
  {
    absl::MutexLock lock(&mu_);
    AdvanceLocked(clock_());
    permit.generation_ = generation_;
    switch (state_) {
      case CircuitState::kClosed:
        permit.allowed_ = true;
        break;
      case CircuitState::kOpen:
        break;
      case CircuitState::kHalfOpen:
        if (probes_in_flight_ < config_.half_open_max_probes) {
          ++probes_in_flight_;
          permit.allowed_ = true;
          permit.probe_ = true;
        }
        break;
    }
    if (!permit.allowed_) ++stats_.rejected;
  }
  DeliverTransitions();
  return permit;
}

void CircuitBreaker::Record(const Permit& permit, bool success) {
  {
    absl::MutexLock lock(&mu_);
    const absl::Time now = clock_();
    AdvanceLocked(now);
    // Every transition bumps the generation, so a matching generation also means the state
    // is still the one the permit was issued in (closed or half-open; open issues none).
    if (permit.allowed_ && permit.generation_ == generation_) {
      if (state_ == CircuitState::kClosed) {
        RecordClosedLocked(success, now);
      } else if (state_ == CircuitState::kHalfOpen && permit.probe_) {
        --probes_in_flight_;
        if (!success) {
          TransitionLocked(CircuitState::kOpen, now);
        } else if (++probe_successes_ >= config_.success_threshold) {
          TransitionLocked(CircuitState::kClosed, now);
        }
      }
    }
  }
  DeliverTransitions();
}

void CircuitBreaker::Release(const Permit& permit) {
  {
    absl::MutexLock lock(&mu_);
    AdvanceLocked(clock_());
    if (permit.allowed_ && permit.probe_ && permit.generation_ == generation_ &&
        probes_in_flight_ > 0) {
      --probes_in_flight_;
    }
  }
  DeliverTransitions();
}

CircuitState CircuitBreaker::state() {
  CircuitState state;
  {
    absl::MutexLock lock(&mu_);
    AdvanceLocked(clock_());
    state = state_;
  }
  DeliverTransitions();
  return state;
}

absl::Duration CircuitBreaker::RetryAfter() {
  absl::Duration retry_after = absl::ZeroDuration();
  {
    absl::MutexLock lock(&mu_);
    const absl::Time now = clock_();
    AdvanceLocked(now);
    if (state_ == CircuitState::kOpen) retry_after = open_until_ - now;
  }
  DeliverTransitions();
  return retry_after;
}

CircuitBreakerStats CircuitBreaker::Stats() {
  CircuitBreakerStats stats;
  {
    absl::MutexLock lock(&mu_);
    AdvanceLocked(clock_());
    stats = stats_;
  }
  DeliverTransitions();
  return stats;
}

void CircuitBreaker::AdvanceLocked(absl::Time now) {
  if (state_ == CircuitState::kOpen && now >= open_until_) {
    TransitionLocked(CircuitState::kHalfOpen, now);
  }
}

void CircuitBreaker::TransitionLocked(CircuitState to, absl::Time now) {
  const CircuitState from = state_;
  state_ = to;
  ++generation_;
  switch (to) {
    case CircuitState::kOpen:
      // A failed probe means the upstream is still down: back off harder, so that a long
      // outage costs one probe per minute rather than one per five seconds.
      if (from == CircuitState::kHalfOpen) {
        current_open_duration_ = std::min(current_open_duration_ * 2, config_.max_open_duration);
      }
      open_until_ = now + current_open_duration_;
      ++stats_.opened;
      break;
    case CircuitState::kHalfOpen:
      probes_in_flight_ = 0;
      probe_successes_ = 0;
      ++stats_.half_opened;
      break;
    case CircuitState::kClosed:
      current_open_duration_ = config_.open_duration;
      ++stats_.closed;
      break;
  }
  // Whatever led here is history: the next closed period judges the upstream afresh,
  // rather than re-opening at once on the failures that opened the breaker last time.
  ResetCountsLocked();
  if (listener_) undelivered_.emplace_back(from, to);
}

void CircuitBreaker::RecordClosedLocked(bool success, absl::Time now) {
  absl::Duration remainder;  // IDivDuration writes it unconditionally: no nullptr
  int64_t index = absl::IDivDuration(now - absl::UnixEpoch(), config_.bucket_width, &remainder);
  // IDivDuration truncates toward zero; buckets need floor for (test) times before 1970.
  if (remainder < absl::ZeroDuration()) --index;
  // A clock that steps back (wall clock adjusted) keeps counting into the newest bucket
  // rather than resurrecting an expired one.
  index = std::max(index, latest_bucket_);
  latest_bucket_ = index;

  const int64_t size = static_cast<int64_t>(buckets_.size());
  Bucket& bucket = buckets_[((index % size) + size) % size];
  if (bucket.index != index) bucket = Bucket{index, 0, 0};
  if (success) {
    ++bucket.successes;
    consecutive_failures_ = 0;
  } else {
    ++bucket.failures;
    ++consecutive_failures_;
  }

  if (config_.consecutive_failures > 0 && consecutive_failures_ >= config_.consecutive_failures) {
    TransitionLocked(CircuitState::kOpen, now);
    return;
  }
  int64_t requests = 0;
  int64_t failures = 0;
  for (const Bucket& b : buckets_) {
    if (b.index != kNoBucket && b.index > index - size) {
      requests += b.successes + b.failures;
      failures += b.failures;
    }
  }
  // A quotient, not failures >= ratio * requests: 10 / 20 and the literal 0.5 (or 3 / 10
  // and 0.3) round to the same double, so the boundary case opens as configured.
  if (requests >= config_.minimum_requests &&
      static_cast<double>(failures) / static_cast<double>(requests) >= config_.failure_ratio) {
    TransitionLocked(CircuitState::kOpen, now);
  }
}

void CircuitBreaker::ResetCountsLocked() {
  consecutive_failures_ = 0;
  for (Bucket& bucket : buckets_) bucket = Bucket{kNoBucket, 0, 0};
  probes_in_flight_ = 0;
  probe_successes_ = 0;
}

void CircuitBreaker::DeliverTransitions() {
  if (!listener_) return;
  {
    absl::MutexLock lock(&mu_);
    if (delivering_ || undelivered_.empty()) return;
    delivering_ = true;
  }
  // One deliverer at a time, in queue order: two threads that each caused a transition
  // cannot call the listener out of order, and the lock is never held across it.
  for (;;) {
    Transition transition;
    {
      absl::MutexLock lock(&mu_);
      if (undelivered_.empty()) {
        delivering_ = false;
        return;
      }
      transition = undelivered_.front();
      undelivered_.pop_front();
    }
    listener_(transition.first, transition.second);
  }
}

}  // namespace inspection::resilience
