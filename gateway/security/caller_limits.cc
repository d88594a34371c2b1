#include "gateway/security/caller_limits.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

namespace inspection::security {

CallerLimiter::CallerLimiter(CallerLimitsOptions options)
    : options_(std::move(options)),
      burst_(options_.burst > 0 ? options_.burst
                                : std::max(1.0, std::ceil(options_.requests_per_second))) {}

void CallerLimiter::RefillLocked(Caller& caller, absl::Time now) const {
  if (now > caller.refilled) {
    caller.tokens = std::min(burst_, caller.tokens + absl::ToDoubleSeconds(now - caller.refilled) *
                                                         options_.requests_per_second);
    caller.refilled = now;
  }
}

CallerLimiter::Caller& CallerLimiter::FindLocked(const std::string& key, absl::Time now) {
  auto at = callers_.find(key);
  if (at != callers_.end()) return at->second;
  if (callers_.size() >= options_.max_tracked_callers) {
    // Forget callers at their starting state: a full bucket and no stream.
    for (auto it = callers_.begin(); it != callers_.end();) {
      RefillLocked(it->second, now);
      if (it->second.streams == 0 && it->second.tokens >= burst_) {
        it = callers_.erase(it);
      } else {
        ++it;
      }
    }
  }
  Caller& caller = callers_[key];
  caller.tokens = burst_;
  caller.refilled = now;
  return caller;
}

bool CallerLimiter::TryCall(const std::string& key, absl::Duration* retry_after) {
  if (options_.requests_per_second <= 0) return true;
  const absl::Time now = options_.clock();
  absl::MutexLock lock(&mu_);
  Caller& caller = FindLocked(key, now);
  RefillLocked(caller, now);
  if (caller.tokens >= 1) {
    caller.tokens -= 1;
    return true;
  }
  if (retry_after != nullptr) {
    *retry_after = absl::Seconds((1 - caller.tokens) / options_.requests_per_second);
  }
  return false;
}

std::shared_ptr<void> CallerLimiter::TryOpenStream(const std::string& key) {
  if (options_.max_streams <= 0) return std::make_shared<int>(0);  // no limit: a plain guard
  {
    absl::MutexLock lock(&mu_);
    Caller& caller = FindLocked(key, options_.clock());
    if (caller.streams >= options_.max_streams) return nullptr;
    ++caller.streams;
  }
  return std::shared_ptr<void>(new int(0), [self = shared_from_this(), key](void* p) {
    delete static_cast<int*>(p);
    self->CloseStream(key);
  });
}

void CallerLimiter::CloseStream(const std::string& key) {
  absl::MutexLock lock(&mu_);
  auto at = callers_.find(key);
  if (at != callers_.end() && at->second.streams > 0) --at->second.streams;
}

size_t CallerLimiter::tracked_callers() const {
  absl::MutexLock lock(&mu_);
  return callers_.size();
}

}  // namespace inspection::security
