#ifndef ADAPTERS_HTTP_RESPONSE_BUDGET_H_
#define ADAPTERS_HTTP_RESPONSE_BUDGET_H_

// ResponseBudget: the bytes of answers a transport is reading at once, across all its
// exchanges. Each exchange is bounded by max_response_bytes on its own, but a vendor (or
// whatever answers in its place) that sends large bodies on many connections at once would
// otherwise make the transport hold that bound times the number of connections. An exchange
// takes its body's bytes from the budget as they arrive, through a ResponseBudgetLease, and
// gives them back when it ends; one that would cross the budget fails instead.
//
// Ordinary answers are not starved by huge ones: the first `guaranteed` bytes of every
// answer may use the whole budget, while the bytes past them may hold at most three quarters
// of it. So while a few huge or endless answers hold all they may, a quarter of the budget is
// still there for the first bytes of the others (the small answers, whole): they are refused
// only when the first bytes of very many answers (limit / 4 / guaranteed of them at their
// full share) fill it. The total never exceeds the limit.
//
// Thread-safe; lock-free.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

namespace inspection::http {

class ResponseBudget {
 public:
  // `limit` 0: unlimited (everything is counted, nothing is refused). `guaranteed` 0: no
  // quarter is kept; every byte competes for the whole limit.
  explicit ResponseBudget(std::size_t limit, std::size_t guaranteed = 0)
      : limit_(limit),
        guaranteed_(guaranteed),
        beyond_limit_(guaranteed == 0 ? limit : limit - limit / 4) {}
  ResponseBudget(const ResponseBudget&) = delete;
  ResponseBudget& operator=(const ResponseBudget&) = delete;

  // Takes `first` bytes within answers' first `guaranteed` and `beyond` bytes past them,
  // when they fit (the total under the limit, the bytes past the first under three quarters
  // of it); false, and nothing taken, otherwise.
  bool TryTake(std::size_t first, std::size_t beyond) {
    if (beyond > 0 && !TakeUnder(beyond_, beyond, beyond_limit_)) return false;
    if (!TakeUnder(used_, first + beyond, limit_)) {
      if (beyond > 0) beyond_.fetch_sub(beyond, std::memory_order_relaxed);
      return false;
    }
    return true;
  }
  void Give(std::size_t first, std::size_t beyond) {
    beyond_.fetch_sub(beyond, std::memory_order_relaxed);
    used_.fetch_sub(first + beyond, std::memory_order_relaxed);
  }

  std::size_t limit() const { return limit_; }
  std::size_t guaranteed() const { return guaranteed_; }
  // What the bytes past answers' first `guaranteed` may hold together.
  std::size_t beyond_limit() const { return beyond_limit_; }
  // Everything held.
  std::size_t used() const { return used_.load(std::memory_order_relaxed); }
  // The part of used() past answers' first `guaranteed` bytes.
  std::size_t used_beyond() const { return beyond_.load(std::memory_order_relaxed); }

  // The most one answer can ever hold of a budget of `limit` (0: no bound).
  static std::size_t LargestAnswer(std::size_t limit, std::size_t guaranteed) {
    if (limit == 0) return SIZE_MAX;
    if (guaranteed == 0) return limit;
    const std::size_t most = limit - limit / 4 + guaranteed;
    return most < limit ? most : limit;
  }

  // HttpResult::error_detail of an exchange the budget refused.
  std::string RefusalDetail() const {
    std::string detail = "answers being read at once exceed the transport's budget of " +
                         std::to_string(limit_) + " bytes";
    if (guaranteed_ != 0) {
      detail += " (past each answer's first " + std::to_string(guaranteed_) +
                " bytes, three quarters of it)";
    }
    return detail + "; this one was refused";
  }

 private:
  // Adds `bytes` to `counter` if it stays within `limit` (0: unlimited).
  static bool TakeUnder(std::atomic<std::size_t>& counter, std::size_t bytes, std::size_t limit) {
    std::size_t used = counter.load(std::memory_order_relaxed);
    do {
      if (limit != 0 && (bytes > limit || used > limit - bytes)) return false;
    } while (!counter.compare_exchange_weak(used, used + bytes, std::memory_order_relaxed));
    return true;
  }

  const std::size_t limit_;
  const std::size_t guaranteed_;
  const std::size_t beyond_limit_;
  std::atomic<std::size_t> used_{0};
  // A failed TryTake can count bytes here for a moment before it gives them back: another
  // exchange may then be refused that a moment later would not be, never the reverse.
  std::atomic<std::size_t> beyond_{0};
};

// One exchange's share of a ResponseBudget: grows with its body, given back by Reset or
// destruction. Not thread-safe (an exchange is driven by one thread at a time).
class ResponseBudgetLease {
 public:
  ResponseBudgetLease() = default;
  explicit ResponseBudgetLease(ResponseBudget* budget) : budget_(budget) {}
  ResponseBudgetLease(const ResponseBudgetLease&) = delete;
  ResponseBudgetLease& operator=(const ResponseBudgetLease&) = delete;
  ResponseBudgetLease(ResponseBudgetLease&& other) noexcept
      : budget_(other.budget_),
        first_(std::exchange(other.first_, 0)),
        beyond_(std::exchange(other.beyond_, 0)) {}
  ResponseBudgetLease& operator=(ResponseBudgetLease&& other) noexcept {
    if (this != &other) {
      Reset();
      budget_ = other.budget_;
      first_ = std::exchange(other.first_, 0);
      beyond_ = std::exchange(other.beyond_, 0);
    }
    return *this;
  }
  ~ResponseBudgetLease() { Reset(); }

  // Holds `total` bytes from now on: takes the difference when it grows (false, and the
  // lease unchanged, when the budget cannot spare it). Never shrinks. Without a budget,
  // always true.
  bool GrowTo(std::size_t total) {
    if (budget_ == nullptr || total <= held()) return true;
    const std::size_t first = total < budget_->guaranteed() ? total : budget_->guaranteed();
    const std::size_t beyond = total - first;
    if (!budget_->TryTake(first - first_, beyond - beyond_)) return false;
    first_ = first;
    beyond_ = beyond;
    return true;
  }
  // Gives back everything held.
  void Reset() {
    if (budget_ != nullptr && held() != 0) budget_->Give(first_, beyond_);
    first_ = 0;
    beyond_ = 0;
  }
  std::size_t held() const { return first_ + beyond_; }

 private:
  ResponseBudget* budget_ = nullptr;
  std::size_t first_ = 0;   // within the answer's first `guaranteed` bytes
  std::size_t beyond_ = 0;  // past them
};

}  // namespace inspection::http

#endif  // ADAPTERS_HTTP_RESPONSE_BUDGET_H_
