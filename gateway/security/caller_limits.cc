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
  if (at != callers_.end()) {
    Caller& caller = at->second;
    if (caller.place != forgettable_.end()) {
      forgettable_.splice(forgettable_.begin(), forgettable_, caller.place);
    }
    return caller;
  }
  // O(1) per new caller, however many are tracked: the least recently used caller holding
  // no stream goes (a scan of the whole table for each new caller was a CPU cost an
  // attacker with many identities could impose).
  while (callers_.size() >= options_.max_tracked_callers && !forgettable_.empty()) {
    const std::string* oldest = forgettable_.back();
    forgettable_.pop_back();
    callers_.erase(*oldest);
  }
  auto [inserted, added] = callers_.try_emplace(key);
  Caller& caller = inserted->second;
  caller.tokens = burst_;
  caller.refilled = now;
  forgettable_.push_front(&inserted->first);
  caller.place = forgettable_.begin();
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
    if (caller.streams++ == 0) {  // not forgettable while it holds a stream
      forgettable_.erase(caller.place);
      caller.place = forgettable_.end();
    }
  }
  return std::shared_ptr<void>(new int(0), [self = shared_from_this(), key](void* p) {
    delete static_cast<int*>(p);
    self->CloseStream(key);
  });
}

void CallerLimiter::CloseStream(const std::string& key) {
  absl::MutexLock lock(&mu_);
  auto at = callers_.find(key);
  if (at == callers_.end() || at->second.streams == 0) return;
  if (--at->second.streams == 0) {
    forgettable_.push_front(&at->first);
    at->second.place = forgettable_.begin();
  }
}

size_t CallerLimiter::tracked_callers() const {
  absl::MutexLock lock(&mu_);
  return callers_.size();
}

}  // namespace inspection::security
