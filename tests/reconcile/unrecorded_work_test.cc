// Work queued for the ledger (Queue*) while the ledger refuses writes: kept in order and
// retried with a doubling wait, never dropped silently, bounded by max_unrecorded, shown
// by the gauge; Queue* never waits for the ledger; Stop does not hang and says what is lost.
#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <prometheus/registry.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "adapters/eventlog/sqlite/sqlite_event_log.h"
#include "adapters/eventlog/work_ledger.h"
#include "gateway/metrics/metrics_scope.h"
#include "gateway/reconcile/reconciler.h"
#include "tests/support/captured_log.h"
#include "tests/support/temp_dir.h"
#include "tests/support/wait.h"

namespace inspection::reconcile {
namespace {

using ::inspection::testing::CapturedLog;
using ::inspection::testing::TempDir;
using ::inspection::testing::WaitUntil;
using ::testing::ElementsAre;

constexpr char kWriteFailed[] =
    "work ledger: write failed; the queued work stays in memory and is retried";
constexpr char kRecovered[] = "work ledger: writes succeed again; the queued work is being written";
constexpr char kRefused[] =
    "reconcile: work refused: reconcile.max_unrecorded items wait for the work ledger";
constexpr char kLost[] =
    "reconcile: stopped with queued work not recorded in the work ledger; it is lost with the "
    "process";

// A real (in-memory SQLite) ledger whose writes (Record, Resolve) can be made to fail or
// to hang. Thread-safe: the reconciler's thread writes, the test looks.
class FlakyLedger : public eventlog::WorkLedger {
 public:
  FlakyLedger() {
    auto real = eventlog::OpenSqliteWorkLedger(":memory:");
    EXPECT_TRUE(real.ok()) << real.status();
    if (real.ok()) real_ = std::move(*real);
  }

  // The next `n` writes fail (UNAVAILABLE); -1: every write until FailNextWrites(0).
  void FailNextWrites(int n) {
    absl::MutexLock lock(&mu_);
    fail_ = n;
  }
  // Writes block until Release (a ledger that does not answer).
  void Hang() {
    absl::MutexLock lock(&mu_);
    hung_ = true;
  }
  void Release() {
    absl::MutexLock lock(&mu_);
    hung_ = false;
  }
  // Runs at each write attempt, before it fails or succeeds (on the writer's thread).
  void OnAttempt(std::function<void()> hook) {
    absl::MutexLock lock(&mu_);
    on_attempt_ = std::move(hook);
  }
  bool WaitForAttempts(int n, absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    auto reached = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return attempts_ >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&reached), timeout);
  }
  int attempts() {
    absl::MutexLock lock(&mu_);
    return attempts_;
  }
  std::vector<absl::Time> attempt_times() {
    absl::MutexLock lock(&mu_);
    return attempt_times_;
  }
  // The writes that succeeded, in order: "record:<id>" or "resolve:<id>".
  std::vector<std::string> written() {
    absl::MutexLock lock(&mu_);
    return written_;
  }
  std::vector<eventlog::WorkItem> recorded() {
    absl::MutexLock lock(&mu_);
    return recorded_;
  }

  absl::Status Record(const eventlog::WorkItem& item) override {
    return Write("record:" + item.id, [&] {
      absl::Status s = real_->Record(item);
      if (s.ok()) recorded_.push_back(item);
      return s;
    });
  }
  absl::Status Resolve(eventlog::WorkKind kind, const std::string& account,
                       const std::string& id) override {
    return Write("resolve:" + id, [&] { return real_->Resolve(kind, account, id); });
  }
  absl::StatusOr<std::vector<eventlog::WorkItem>> ClaimDue(int64_t now_ms, size_t limit,
                                                           const std::string& owner,
                                                           int64_t lease_ms) override {
    return real_->ClaimDue(now_ms, limit, owner, lease_ms);
  }
  absl::Status Reschedule(const eventlog::WorkItem& item, const std::string& owner,
                          int64_t next_poll_at_ms) override {
    return real_->Reschedule(item, owner, next_poll_at_ms);
  }
  absl::StatusOr<int64_t> CountPending(int64_t due_by_ms) override {
    return real_->CountPending(due_by_ms);
  }
  absl::StatusOr<int64_t> Trim(int64_t started_before_ms) override {
    return real_->Trim(started_before_ms);
  }

 private:
  template <typename Fn>
  absl::Status Write(const std::string& label, Fn write) {
    std::function<void()> hook;
    {
      absl::MutexLock lock(&mu_);
      hook = on_attempt_;
    }
    if (hook) hook();
    absl::MutexLock lock(&mu_);
    ++attempts_;
    attempt_times_.push_back(absl::Now());
    auto released = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !hung_; };
    mu_.Await(absl::Condition(&released));
    if (fail_ != 0) {
      if (fail_ > 0) --fail_;
      return absl::UnavailableError("the ledger is down (test)");
    }
    absl::Status s = write();
    if (s.ok()) written_.push_back(label);
    return s;
  }

  std::unique_ptr<eventlog::WorkLedger> real_;
  absl::Mutex mu_;
  int fail_ ABSL_GUARDED_BY(mu_) = 0;
  bool hung_ ABSL_GUARDED_BY(mu_) = false;
  std::function<void()> on_attempt_ ABSL_GUARDED_BY(mu_);
  int attempts_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<absl::Time> attempt_times_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> written_ ABSL_GUARDED_BY(mu_);
  std::vector<eventlog::WorkItem> recorded_ ABSL_GUARDED_BY(mu_);
};

eventlog::NewEvent CreateReport(const std::string& account, const std::string& inspection_id) {
  eventlog::NewEvent event;
  event.account = account;
  event.event_name = "createReport";
  event.inspection_id = inspection_id;
  return event;
}

class UnrecordedWorkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto log = eventlog::OpenSqliteEventLog(dir_.File("events.db"), eventlog::RetentionPolicy{});
    ASSERT_TRUE(log.ok()) << log.status();
    log_ = std::move(*log);
    options_.ledger_retry_initial = absl::Milliseconds(100);
    options_.ledger_retry_max = absl::Milliseconds(800);
    options_.metrics = &metrics_;
  }

  // `real_clock`: for the tests that run the reconciler's thread (which waits in real time);
  // otherwise the test's clock, moved by Pass.
  Reconciler& Make(bool real_clock = false) {
    std::function<absl::Time()> clock = [this] { return now_; };
    if (real_clock) clock = [] { return absl::Now(); };
    reconciler_ = std::make_unique<Reconciler>(
        options_, &ledger_, log_.get(),
        [this](const std::string& account, const std::string& id,
               absl::AnyInvocable<void(absl::StatusOr<std::string>) &&> done) {
          polled_.push_back(absl::StrCat(account, "/", id));
          std::move(done)(absl::NotFoundError("no report yet"));
        },
        [](const std::string&, const std::string&,
           absl::AnyInvocable<void(absl::StatusOr<TokenState>) &&> done) {
          std::move(done)(TokenState{});
        },
        std::move(clock));
    return *reconciler_;
  }

  // A pass at `since_start` on the test's clock.
  void Pass(absl::Duration since_start) {
    now_ = start_ + since_start;
    absl::StatusOr<int> started = reconciler_->RunOnce();
    EXPECT_TRUE(started.ok()) << started.status();
  }

  int64_t Pending() {
    absl::StatusOr<int64_t> pending = ledger_.CountPending(INT64_MAX);
    EXPECT_TRUE(pending.ok()) << pending.status();
    return pending.ok() ? *pending : -1;
  }

  TempDir dir_;
  FlakyLedger ledger_;
  std::unique_ptr<eventlog::EventLog> log_;
  prometheus::Registry registry_;
  const ReconcileMetrics metrics_ = ReconcileMetrics::Create(metrics::MetricsScope(registry_));
  ReconcilerOptions options_;
  const absl::Time start_ = absl::FromUnixSeconds(1800000000);
  absl::Time now_ = start_;
  std::vector<std::string> polled_;
  std::unique_ptr<Reconciler> reconciler_;
};

// The ledger refuses three writes: the first queued item stays at the front, everything
// queued after it waits behind it, and the passes retry after 100, 200 and 400 ms (not
// sooner). Then all of it is written, in the order queued: the createReport's resolve
// after its submission's record, so that inspection is not polled.
TEST_F(UnrecordedWorkTest, ARefusedWriteStaysQueuedAndIsRetriedWithBackoffInOrder) {
  CapturedLog log;
  ledger_.FailNextWrites(3);
  Reconciler& reconciler = Make();
  reconciler.QueueSubmitted("prod", "insp-1");
  reconciler.QueueTokenCreated("prod", "tok-1");
  reconciler.QueueObserved(CreateReport("prod", "insp-1"));
  reconciler.QueueSubmitted("prod", "insp-2");
  EXPECT_EQ(reconciler.stats().unrecorded, 4);
  EXPECT_EQ(metrics_.unrecorded->Value(), 4) << "the gauge counts at once, before any pass";

  Pass(absl::ZeroDuration());
  EXPECT_EQ(ledger_.attempts(), 1);
  EXPECT_EQ(reconciler.stats().ledger_errors, 1);
  reconciler.QueueSubmitted("prod", "insp-3");  // queued while the ledger is down
  EXPECT_EQ(metrics_.unrecorded->Value(), 5);
  // The retries: due 100 ms, then 200 ms, then 400 ms after each failure.
  for (const auto& [before, at] : std::vector<std::pair<int, int>>{{99, 100}, {299, 300}}) {
    const int attempts = ledger_.attempts();
    Pass(absl::Milliseconds(before));
    EXPECT_EQ(ledger_.attempts(), attempts) << "no retry before " << at << " ms";
    Pass(absl::Milliseconds(at));
    EXPECT_EQ(ledger_.attempts(), attempts + 1) << "the retry at " << at << " ms";
  }
  Pass(absl::Milliseconds(699));
  EXPECT_TRUE(ledger_.written().empty());
  EXPECT_EQ(reconciler.stats().unrecorded, 5);
  Pass(absl::Milliseconds(700));

  EXPECT_THAT(ledger_.written(), ElementsAre("record:insp-1", "record:tok-1", "resolve:insp-1",
                                             "record:insp-2", "record:insp-3"));
  const Reconciler::Stats stats = reconciler.stats();
  EXPECT_EQ(stats.unrecorded, 0);
  EXPECT_EQ(stats.unrecorded_dropped, 0);
  EXPECT_EQ(stats.ledger_errors, 3);
  EXPECT_EQ(metrics_.unrecorded->Value(), 0);
  EXPECT_EQ(metrics_.unrecorded_dropped->Value(), 0);
  EXPECT_EQ(metrics_.ledger_errors->Value(), 3);
  EXPECT_EQ(Pending(), 3) << "tok-1, insp-2, insp-3; insp-1 resolved";

  // An item starts when it was queued, not when the ledger finally took it: insp-2 and
  // insp-3 (queued at 0) are due reconcile.after (10 min) later, not 700 ms after that.
  for (const eventlog::WorkItem& item : ledger_.recorded()) {
    EXPECT_EQ(item.started_at_ms, absl::ToUnixMillis(start_)) << item.id;
  }
  Pass(absl::Minutes(10));
  EXPECT_THAT(polled_, ::testing::IsSupersetOf({"prod/insp-2", "prod/insp-3"}));
  EXPECT_THAT(polled_, ::testing::Not(::testing::Contains("prod/insp-1")));

  std::vector<nlohmann::json> failures = log.With(kWriteFailed);
  ASSERT_EQ(failures.size(), 3u) << "one line per failed attempt";
  EXPECT_EQ(failures[0]["id"], "insp-1");
  EXPECT_EQ(failures[0]["unrecorded"], "4");
  EXPECT_EQ(failures[0]["retry_in_ms"], "100");
  EXPECT_EQ(failures[1]["retry_in_ms"], "200");
  EXPECT_EQ(failures[2]["retry_in_ms"], "400");
  EXPECT_EQ(failures[2]["failed_attempts"], "3");
  std::vector<nlohmann::json> recovered = log.With(kRecovered);
  ASSERT_EQ(recovered.size(), 1u);
  EXPECT_EQ(recovered[0]["failed_attempts"], "3");
  EXPECT_EQ(recovered[0]["unrecorded"], "4") << "logged at the first write that succeeds";
}

// The wait doubles from ledger_retry_initial (100 ms) and stops at ledger_retry_max
// (800 ms): attempts at 0, 100, 300, 700, 1500, 2300, 3100 ms.
TEST_F(UnrecordedWorkTest, TheRetryWaitDoublesUpToItsCap) {
  ledger_.FailNextWrites(-1);
  Reconciler& reconciler = Make();
  reconciler.QueueSubmitted("", "insp-1");
  Pass(absl::ZeroDuration());
  ASSERT_EQ(ledger_.attempts(), 1);
  int expected = 1;
  for (int at : {100, 300, 700, 1500, 2300, 3100}) {
    Pass(absl::Milliseconds(at - 1));
    EXPECT_EQ(ledger_.attempts(), expected) << "no attempt before " << at << " ms";
    Pass(absl::Milliseconds(at));
    EXPECT_EQ(ledger_.attempts(), ++expected) << "an attempt at " << at << " ms";
  }
  EXPECT_EQ(reconciler.stats().unrecorded, 1);
  EXPECT_EQ(reconciler.stats().ledger_errors, 7);
}

// A write that succeeds ends the backoff: the next refusal waits ledger_retry_initial
// again, not double the last wait.
TEST_F(UnrecordedWorkTest, AWriteThatSucceedsStartsTheWaitOver) {
  CapturedLog log;
  ledger_.FailNextWrites(2);
  Reconciler& reconciler = Make();
  reconciler.QueueSubmitted("", "insp-1");
  Pass(absl::ZeroDuration());
  Pass(absl::Milliseconds(100));
  Pass(absl::Milliseconds(300));
  EXPECT_THAT(ledger_.written(), ElementsAre("record:insp-1"));
  ledger_.FailNextWrites(1);
  reconciler.QueueSubmitted("", "insp-2");
  Pass(absl::Milliseconds(300));
  Pass(absl::Milliseconds(399));
  EXPECT_EQ(ledger_.attempts(), 4);
  Pass(absl::Milliseconds(400));
  EXPECT_THAT(ledger_.written(), ElementsAre("record:insp-1", "record:insp-2"));
  std::vector<nlohmann::json> failures = log.With(kWriteFailed);
  ASSERT_EQ(failures.size(), 3u);
  EXPECT_EQ(failures[1]["retry_in_ms"], "200");
  EXPECT_EQ(failures[2]["retry_in_ms"], "100");
  EXPECT_EQ(failures[2]["failed_attempts"], "1");
  EXPECT_EQ(log.With(kRecovered).size(), 2u);
}

// A ledger that refuses everything: the queue stops at max_unrecorded; each further call is
// refused and counted at once, and logged by the passes at most once per
// kDroppedLogInterval with how many since the last line. What was queued is kept and
// written, in order, once the ledger takes writes again; then there is room again.
TEST_F(UnrecordedWorkTest, AtTheBoundWorkIsRefusedCountedAndLoggedAndTheRestIsKept) {
  CapturedLog log;
  options_.max_unrecorded = 3;
  ledger_.FailNextWrites(-1);
  Reconciler& reconciler = Make();
  for (int i = 0; i < 5; ++i) reconciler.QueueSubmitted("", absl::StrCat("insp-", i));
  EXPECT_EQ(reconciler.stats().unrecorded, 3);
  EXPECT_EQ(reconciler.stats().unrecorded_dropped, 2);
  EXPECT_EQ(metrics_.unrecorded->Value(), 3);
  EXPECT_EQ(metrics_.unrecorded_dropped->Value(), 2) << "counted when refused, before a pass";

  Pass(absl::ZeroDuration());
  std::vector<nlohmann::json> lines = log.With(kRefused);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0]["refused"], "2");
  EXPECT_EQ(lines[0]["refused_total"], "2");
  EXPECT_EQ(lines[0]["unrecorded"], "3");

  reconciler.QueueSubmitted("", "insp-5");
  reconciler.QueueObserved(CreateReport("", "insp-0"));
  Pass(absl::Seconds(5));
  EXPECT_EQ(log.With(kRefused).size(), 1u) << "not again within kDroppedLogInterval";
  Pass(kDroppedLogInterval);
  lines = log.With(kRefused);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[1]["refused"], "2") << "those since the last line";
  EXPECT_EQ(lines[1]["refused_total"], "4");
  Pass(absl::Seconds(30));
  EXPECT_EQ(log.With(kRefused).size(), 2u) << "nothing refused since";
  EXPECT_EQ(reconciler.stats().unrecorded, 3) << "the bound holds";
  EXPECT_EQ(metrics_.unrecorded->Value(), 3);
  EXPECT_EQ(metrics_.unrecorded_dropped->Value(), 4);
  EXPECT_TRUE(ledger_.written().empty());

  ledger_.FailNextWrites(0);
  Pass(absl::Seconds(31));  // past the longest wait
  EXPECT_THAT(ledger_.written(), ElementsAre("record:insp-0", "record:insp-1", "record:insp-2"));
  EXPECT_EQ(reconciler.stats().unrecorded, 0);
  EXPECT_EQ(reconciler.stats().unrecorded_dropped, 4);
  reconciler.QueueSubmitted("", "insp-6");
  EXPECT_EQ(reconciler.stats().unrecorded, 1) << "room again";
  EXPECT_EQ(reconciler.stats().unrecorded_dropped, 4);
}

// Queue* calls never wait for the ledger, not even for one that does not answer: with the
// thread stuck in a write, 10,000 calls return at once; the queue holds max_unrecorded,
// the rest are counted. Once the ledger answers, the queue drains in order.
TEST_F(UnrecordedWorkTest, QueueCallsNeverWaitForALedgerThatDoesNotAnswer) {
  options_.max_unrecorded = 100;
  ledger_.Hang();
  Reconciler& reconciler = Make(/*real_clock=*/true);
  reconciler.Start();
  reconciler.QueueSubmitted("", "first");
  ASSERT_TRUE(ledger_.WaitForAttempts(1, absl::Seconds(20))) << "the thread writes";

  constexpr int kCalls = 10000;
  auto calls = std::async(std::launch::async, [&reconciler] {
    for (int i = 0; i < kCalls; ++i) {
      const std::string id = absl::StrCat("q-", i);
      switch (i % 3) {
        case 0:
          reconciler.QueueSubmitted("", id);
          break;
        case 1:
          reconciler.QueueTokenCreated("", id);
          break;
        default:
          reconciler.QueueObserved(CreateReport("", id));
      }
    }
  });
  const bool returned = calls.wait_for(std::chrono::seconds(20)) == std::future_status::ready;
  const Reconciler::Stats stats = reconciler.stats();
  // Read before the release: once released, the thread writes the rest at once.
  const int attempts_while_hung = ledger_.attempts();
  ledger_.Release();
  ASSERT_TRUE(returned) << "Queue* calls waited for the ledger";
  EXPECT_EQ(attempts_while_hung, 1) << "still in the first write";
  EXPECT_EQ(stats.unrecorded, 100);
  EXPECT_EQ(stats.unrecorded_dropped, kCalls + 1 - 100);

  ASSERT_TRUE(
      WaitUntil([&] { return reconciler.stats().unrecorded == 0; }, std::chrono::seconds(20)));
  reconciler.Stop();
  const std::vector<std::string> written = ledger_.written();
  ASSERT_EQ(written.size(), 100u);
  EXPECT_EQ(written[0], "record:first");
  EXPECT_EQ(written[1], "record:q-0");
  EXPECT_EQ(written[2], "record:q-1");
  EXPECT_EQ(written[3], "resolve:q-2");
  EXPECT_EQ(written[99], "resolve:q-98");
  EXPECT_EQ(metrics_.unrecorded->Value(), 0);
  EXPECT_EQ(metrics_.unrecorded_dropped->Value(), kCalls + 1 - 100);
}

// The thread retries on its own (no further Queue* call wakes it), after the backoff and
// not sooner: three refusals, then both items are written, in order, and nothing else is
// attempted.
TEST_F(UnrecordedWorkTest, TheThreadRetriesARefusedWriteUntilTheLedgerTakesIt) {
  options_.ledger_retry_initial = absl::Milliseconds(20);
  options_.ledger_retry_max = absl::Milliseconds(200);
  options_.scan_interval = absl::Hours(1);  // the retries come from the backoff alone
  std::vector<double> gauge_at_attempts;    // on the reconciler's thread, read after Stop
  ledger_.OnAttempt([&] { gauge_at_attempts.push_back(metrics_.unrecorded->Value()); });
  ledger_.FailNextWrites(3);
  Reconciler& reconciler = Make(/*real_clock=*/true);
  reconciler.Start();
  reconciler.QueueSubmitted("", "insp-1");
  reconciler.QueueSubmitted("", "insp-2");
  ASSERT_TRUE(
      WaitUntil([&] { return reconciler.stats().unrecorded == 0; }, std::chrono::seconds(20)));
  reconciler.Stop();

  EXPECT_THAT(ledger_.written(), ElementsAre("record:insp-1", "record:insp-2"));
  EXPECT_EQ(ledger_.attempts(), 5) << "3 refused, then 2 written: no attempt in between";
  const std::vector<absl::Time> times = ledger_.attempt_times();
  ASSERT_EQ(times.size(), 5u);
  EXPECT_GE(times[3] - times[0], absl::Milliseconds(20 + 40 + 80)) << "the waits were kept";
  ASSERT_EQ(gauge_at_attempts.size(), 5u);
  for (int i = 0; i < 3; ++i) EXPECT_GE(gauge_at_attempts[i], 1) << "attempt " << i;
  EXPECT_EQ(metrics_.unrecorded->Value(), 0);
  const Reconciler::Stats stats = reconciler.stats();
  EXPECT_EQ(stats.ledger_errors, 3);
  EXPECT_EQ(stats.unrecorded_dropped, 0);
}

// Stop while the ledger refuses writes: it returns without trying again (an attempt could
// take the ledger's whole timeout), and says how much is lost with the process; the gauge
// still shows it until then.
TEST_F(UnrecordedWorkTest, StopWhileTheLedgerFailsReturnsAndSaysWhatIsLost) {
  CapturedLog log;
  options_.ledger_retry_initial = absl::Milliseconds(10);
  options_.ledger_retry_max = absl::Milliseconds(50);
  ledger_.FailNextWrites(-1);
  Reconciler& reconciler = Make(/*real_clock=*/true);
  reconciler.Start();
  for (int i = 0; i < 3; ++i) reconciler.QueueSubmitted("", absl::StrCat("insp-", i));
  ASSERT_TRUE(ledger_.WaitForAttempts(3, absl::Seconds(20))) << "retried by the thread";
  auto stop = std::async(std::launch::async, [&reconciler] { reconciler.Stop(); });
  ASSERT_EQ(stop.wait_for(std::chrono::seconds(20)), std::future_status::ready);
  const int attempts = ledger_.attempts();
  std::vector<nlohmann::json> lost = log.With(kLost);
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0]["unrecorded"], "3");
  EXPECT_EQ(lost[0]["ledger_failing"], "true");
  EXPECT_EQ(reconciler.stats().unrecorded, 3);
  EXPECT_EQ(metrics_.unrecorded->Value(), 3);
  reconciler_.reset();  // the destructor stops again: no attempt either
  EXPECT_EQ(ledger_.attempts(), attempts);
  EXPECT_TRUE(ledger_.written().empty());
}

// A graceful stop writes what is queued (the work of RPCs answered just before), and a
// later Stop what was queued after the first one (RPCs that finish while gRPC drains). It
// writes for stop_flush_timeout at most; the rest is logged as lost.
TEST_F(UnrecordedWorkTest, StopWritesWhatIsQueuedWithinStopFlushTimeout) {
  CapturedLog log;
  Reconciler& reconciler = Make();
  reconciler.QueueSubmitted("", "insp-1");
  reconciler.QueueObserved(CreateReport("", "insp-0"));
  reconciler.Stop();
  EXPECT_THAT(ledger_.written(), ElementsAre("record:insp-1", "resolve:insp-0"));
  EXPECT_EQ(reconciler.stats().unrecorded, 0);
  reconciler.QueueSubmitted("", "insp-2");
  EXPECT_EQ(reconciler.stats().unrecorded, 1);
  reconciler.Stop();
  EXPECT_EQ(Pending(), 2);
  EXPECT_TRUE(log.With(kLost).empty());

  // A slow ledger: each write takes 400 ms of the test's clock; the flush stops after
  // stop_flush_timeout (1 s): three writes, two left.
  options_.stop_flush_timeout = absl::Seconds(1);
  ledger_.OnAttempt([this] { now_ += absl::Milliseconds(400); });
  Reconciler& slow = Make();
  for (int i = 3; i < 8; ++i) slow.QueueSubmitted("", absl::StrCat("insp-", i));
  slow.Stop();
  EXPECT_EQ(Pending(), 5);
  std::vector<nlohmann::json> lost = log.With(kLost);
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0]["unrecorded"], "2");
  EXPECT_EQ(lost[0]["ledger_failing"], "false");
  EXPECT_EQ(slow.stats().unrecorded, 2);
}

}  // namespace
}  // namespace inspection::reconcile
