#ifndef ADAPTERS_HTTP_RESPONSE_BUDGET_H_
#define ADAPTERS_HTTP_RESPONSE_BUDGET_H_

// ResponseBudget: the bytes of answers a transport is reading at once, across all its
// exchanges. Each exchange is bounded by max_response_bytes on its own, but a vendor (or
// whatever answers in its place) that sends large bodies on many connections at once would
// otherwise make the transport hold that bound times the number of connections. An exchange
// takes its body's bytes from the budget as they arrive, through a ResponseBudgetLease, and
// gives them back when it ends; one that would cross the budget fails instead.
//
// Thread-safe; lock-free.

#include <atomic>
#include <cstddef>
#include <utility>

namespace inspection::http {

class ResponseBudget {
 public:
  // `limit` 0: unlimited (everything is counted, nothing is refused).
  explicit ResponseBudget(std::size_t limit) : limit_(limit) {}
  ResponseBudget(const ResponseBudget&) = delete;
  ResponseBudget& operator=(const ResponseBudget&) = delete;

  // Takes `bytes` when they fit under the limit; false (and nothing taken) otherwise.
  bool TryTake(std::size_t bytes) {
    std::size_t used = used_.load(std::memory_order_relaxed);
    do {
      if (limit_ != 0 && (bytes > limit_ || used > limit_ - bytes)) return false;
    } while (!used_.compare_exchange_weak(used, used + bytes, std::memory_order_relaxed));
    return true;
  }
  void Give(std::size_t bytes) { used_.fetch_sub(bytes, std::memory_order_relaxed); }

  std::size_t limit() const { return limit_; }
  std::size_t used() const { return used_.load(std::memory_order_relaxed); }

 private:
  const std::size_t limit_;
  std::atomic<std::size_t> used_{0};
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
      : budget_(other.budget_), held_(std::exchange(other.held_, 0)) {}
  ResponseBudgetLease& operator=(ResponseBudgetLease&& other) noexcept {
    if (this != &other) {
      Reset();
      budget_ = other.budget_;
      held_ = std::exchange(other.held_, 0);
    }
    return *this;
  }
  ~ResponseBudgetLease() { Reset(); }

  // Holds `total` bytes from now on: takes the difference when it grows (false, and the
  // lease unchanged, when the budget cannot spare it). Never shrinks. Without a budget,
  // always true.
  bool GrowTo(std::size_t total) {
    if (budget_ == nullptr || total <= held_) return true;
    if (!budget_->TryTake(total - held_)) return false;
    held_ = total;
    return true;
  }
  // Gives back everything held.
  void Reset() {
    if (budget_ != nullptr && held_ != 0) budget_->Give(held_);
    held_ = 0;
  }
  std::size_t held() const { return held_; }

 private:
  ResponseBudget* budget_ = nullptr;
  std::size_t held_ = 0;
};

}  // namespace inspection::http

#endif  // ADAPTERS_HTTP_RESPONSE_BUDGET_H_
