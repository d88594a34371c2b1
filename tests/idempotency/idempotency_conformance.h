#ifndef TESTS_IDEMPOTENCY_IDEMPOTENCY_CONFORMANCE_H_
#define TESTS_IDEMPOTENCY_IDEMPOTENCY_CONFORMANCE_H_

// The contract of pipeline::IdempotencyStore, run against every backend (the TEST_Ps are
// in idempotency_conformance_test.cc). A backend's test file defines a factory and
// instantiates the suite with a stable name:
//
//   INSTANTIATE_TEST_SUITE_P(Memory, IdempotencyConformanceTest,
//                            ::testing::Values(&memory_factory), BackendName("memory"));

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <gtest/gtest.h>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gateway/idempotency/idempotency_store.h"

namespace inspection::pipeline::testing {

class IdempotencyStoreFactory {
 public:
  virtual ~IdempotencyStoreFactory() = default;
  // A new store for one test, keeping outcomes for `ttl`, sharing nothing with the
  // stores of other tests.
  virtual std::unique_ptr<IdempotencyStore> Create(absl::Duration ttl) = 0;
  // A TTL short enough to see expire in a test (Redis: real time; memory: a fake clock).
  virtual absl::Duration ShortTtl() = 0;
  // Lets the TTL of the last Create() pass (a fake clock jumps; real time is waited
  // out, polling `done`, within a generous deadline). Returns `done()`'s last value.
  virtual bool PassTtl(const std::function<bool()>& done) = 0;
};

// Catches the outcome handed to an `on_ready` callback, from any thread.
class OutcomeLatch {
 public:
  absl::AnyInvocable<void(const IdempotentOutcome&)> Callback() {
    return [this](const IdempotentOutcome& outcome) {
      absl::MutexLock lock(&mu_);
      ++calls_;
      outcome_ = outcome;
    };
  }
  // The outcome once it came, nullopt when it did not within `timeout`.
  std::optional<IdempotentOutcome> Wait(absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    mu_.AwaitWithTimeout(
        absl::Condition(
            +[](std::optional<IdempotentOutcome>* o) { return o->has_value(); }, &outcome_),
        timeout);
    return outcome_;
  }
  std::optional<IdempotentOutcome> Now() {
    absl::MutexLock lock(&mu_);
    return outcome_;
  }
  int calls() {
    absl::MutexLock lock(&mu_);
    return calls_;
  }

 private:
  absl::Mutex mu_;
  std::optional<IdempotentOutcome> outcome_ ABSL_GUARDED_BY(mu_);
  int calls_ ABSL_GUARDED_BY(mu_) = 0;
};

class IdempotencyConformanceTest : public ::testing::TestWithParam<IdempotencyStoreFactory*> {
 protected:
  std::unique_ptr<IdempotencyStore> Create(absl::Duration ttl = absl::Hours(24)) {
    return GetParam()->Create(ttl);
  }
  static void Ignore(const IdempotentOutcome&) {}
  // Complete(), then waits (20 s at most) until the store says the outcome is saved: from
  // then on a repeat replays it. False when `saved` never came.
  static bool Save(IdempotencyStore& store, const std::string& account, const std::string& key,
                   IdempotentOutcome outcome) {
    absl::Mutex mu;
    bool saved = false;
    store.Complete(account, key, std::move(outcome), [&] {
      absl::MutexLock lock(&mu);
      saved = true;
    });
    absl::MutexLock lock(&mu);
    return mu.AwaitWithTimeout(absl::Condition(&saved), absl::Seconds(20));
  }
  IdempotentOutcome replay_;
};

// Names an instantiation ("memory", "redis") instead of printing the factory's address.
inline auto BackendName(std::string name) {
  return [name](const ::testing::TestParamInfo<IdempotencyStoreFactory*>&) { return name; };
}

}  // namespace inspection::pipeline::testing

#endif  // TESTS_IDEMPOTENCY_IDEMPOTENCY_CONFORMANCE_H_
