#ifndef TESTS_SUPPORT_HTTP_RESULTS_H_
#define TESTS_SUPPORT_HTTP_RESULTS_H_

#include <chrono>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "adapters/http/http_transport.h"

namespace inspection::testing {

// Long enough for a loaded 2-core CI machine; waits return as soon as their condition holds.
inline constexpr std::chrono::milliseconds kHttpResultDeadline{30000};

// Collects the results of any number of HttpTransport exchanges, with the thread each
// callback ran on; callbacks may come from any thread.
class HttpResults {
 public:
  http::HttpCallback Callback() {
    return [this](http::HttpResult result) {
      absl::MutexLock lock(&mu_);
      results_.push_back(std::move(result));
      threads_.push_back(std::this_thread::get_id());
    };
  }

  // Whether `n` results have arrived within `deadline`.
  bool WaitFor(size_t n, std::chrono::milliseconds deadline = kHttpResultDeadline) {
    absl::MutexLock lock(&mu_);
    auto ready = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return results_.size() >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&ready), absl::FromChrono(deadline));
  }

  std::vector<http::HttpResult> Take() {
    absl::MutexLock lock(&mu_);
    std::vector<http::HttpResult> taken;
    taken.swap(results_);
    return taken;
  }

  size_t size() const {
    absl::MutexLock lock(&mu_);
    return results_.size();
  }

  std::vector<std::thread::id> Threads() const {
    absl::MutexLock lock(&mu_);
    return threads_;
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<http::HttpResult> results_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread::id> threads_ ABSL_GUARDED_BY(mu_);
};

// Sends one request and waits for its result; a test failure (and an empty result) if none
// comes within `deadline`.
inline http::HttpResult SendAndWait(http::HttpTransport& transport, http::HttpRequest request,
                                    std::chrono::milliseconds deadline = kHttpResultDeadline) {
  HttpResults results;
  transport.Send(std::move(request), results.Callback());
  if (!results.WaitFor(1, deadline)) {
    ADD_FAILURE() << "no result within the deadline";
    return {};
  }
  return std::move(results.Take().front());
}

}  // namespace inspection::testing

#endif  // TESTS_SUPPORT_HTTP_RESULTS_H_
