// The reconciler on a real SQLite ledger and event log, a scripted vendor and a manual
// clock: when it polls, what it appends, its backoff and its budget.
#include "gateway/reconcile/reconciler.h"

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <prometheus/registry.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "adapters/eventlog/sqlite/sqlite_event_log.h"
#include "adapters/eventlog/work_ledger.h"
#include "gateway/metrics/metrics_scope.h"
#include "nlohmann/json.hpp"
#include "tests/support/captured_log.h"
#include "tests/support/temp_dir.h"

namespace inspection::reconcile {
namespace {

using ::inspection::testing::CapturedLog;
using ::inspection::testing::TempDir;
using ::testing::ElementsAre;

class ReconcilerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto ledger = eventlog::OpenSqliteWorkLedger(dir_.File("work.db"));
    ASSERT_TRUE(ledger.ok()) << ledger.status();
    ledger_ = std::move(*ledger);
    auto log = eventlog::OpenSqliteEventLog(dir_.File("events.db"), eventlog::RetentionPolicy{});
    ASSERT_TRUE(log.ok()) << log.status();
    log_ = std::move(*log);
    options_.after = absl::Minutes(10);
    options_.interval = absl::Minutes(1);
    options_.max_interval = absl::Minutes(4);
  }

  Reconciler& Make() {
    reconciler_ = std::make_unique<Reconciler>(
        options_, ledger_.get(), log_.get(),
        [this](const std::string& account, const std::string& id,
               absl::AnyInvocable<void(absl::StatusOr<std::string>) &&> done) {
          polled_.push_back(
              absl::StrCat(account, "/", id, "@", absl::ToInt64Seconds(now_ - start_)));
          auto it = reports_.find(id);
          if (hold_) {
            held_.push_back(std::move(done));
          } else if (vendor_down_) {
            std::move(done)(absl::UnavailableError("vendor down"));
          } else if (it == reports_.end()) {
            std::move(done)(absl::NotFoundError("no report yet"));
          } else {
            std::move(done)(it->second);
          }
        },
        [this](const std::string& account, const std::string& uid,
               absl::AnyInvocable<void(absl::StatusOr<TokenState>) &&> done) {
          polled_.push_back(
              absl::StrCat("token:", account, "/", uid, "@", absl::ToInt64Seconds(now_ - start_)));
          auto it = tokens_.find(uid);
          if (it == tokens_.end()) {
            std::move(done)(absl::NotFoundError("no such token"));
          } else {
            std::move(done)(it->second);
          }
        },
        [this] { return now_; });
    return *reconciler_;
  }

  // Runs a pass at `seconds` after the start; returns the polls it started.
  int At(int seconds) {
    now_ = start_ + absl::Seconds(seconds);
    absl::StatusOr<int> started = reconciler_->RunOnce();
    EXPECT_TRUE(started.ok()) << started.status();
    return started.ok() ? *started : -1;
  }

  std::vector<eventlog::StoredEvent> Events() {
    auto events = log_->ReadAfter("", 100);
    EXPECT_TRUE(events.ok());
    return events.ok() ? *events : std::vector<eventlog::StoredEvent>{};
  }

  TempDir dir_;
  std::unique_ptr<eventlog::WorkLedger> ledger_;
  std::unique_ptr<eventlog::EventLog> log_;
  ReconcilerOptions options_;
  const absl::Time start_ = absl::FromUnixSeconds(1800000000);
  absl::Time now_ = start_;
  std::map<std::string, std::string> reports_;  // inspection id -> the vendor's 2xx body
  std::map<std::string, TokenState> tokens_;    // token uid -> its status
  std::vector<std::string> polled_;
  bool vendor_down_ = false;
  bool hold_ = false;  // park the answers (an asynchronous vendor call)
  std::vector<absl::AnyInvocable<void(absl::StatusOr<std::string>) &&>> held_;
  std::unique_ptr<Reconciler> reconciler_;
};

TEST_F(ReconcilerTest, AMissingReportIsPolledAfterTheDelayWithADoublingInterval) {
  Reconciler& reconciler = Make();
  ASSERT_TRUE(reconciler.Submitted("", "insp-1").ok());
  EXPECT_EQ(At(599), 0) << "not before reconcile.after";
  EXPECT_EQ(At(600), 1);
  EXPECT_EQ(At(659), 0);
  EXPECT_EQ(At(660), 1);  // +1 min
  EXPECT_EQ(At(779), 0);
  EXPECT_EQ(At(780), 1);   // +2 min
  EXPECT_EQ(At(1020), 1);  // +4 min (the cap)
  EXPECT_EQ(At(1260), 1);  // +4 min again
  EXPECT_THAT(polled_, ElementsAre("/insp-1@600", "/insp-1@660", "/insp-1@780", "/insp-1@1020",
                                   "/insp-1@1260"));
  EXPECT_EQ(reconciler.stats().not_ready, 5);
  EXPECT_TRUE(Events().empty());
}

TEST_F(ReconcilerTest, AReportThatArrivedAsAWebhookIsNeverPolled) {
  Reconciler& reconciler = Make();
  ASSERT_TRUE(reconciler.Submitted("prod", "insp-1").ok());
  eventlog::NewEvent webhook;
  webhook.account = "prod";
  webhook.event_name = "createReport";
  webhook.inspection_id = "insp-1";
  reconciler.Observe(webhook);
  EXPECT_EQ(At(3600), 0);
  EXPECT_TRUE(polled_.empty());
}

TEST_F(ReconcilerTest, AReadyReportBecomesOneDamagesReportEventAndEndsThePolling) {
  Reconciler& reconciler = Make();
  ASSERT_TRUE(reconciler.Submitted("prod", "insp-1").ok());
  reports_["insp-1"] = R"({"damages": [{"part": "front_bumper"}]})";
  EXPECT_EQ(At(600), 1);
  std::vector<eventlog::StoredEvent> events = Events();
  ASSERT_EQ(events.size(), 1u);
  const eventlog::NewEvent& event = events[0].event;
  EXPECT_EQ(event.event_name, "damagesReport");
  EXPECT_EQ(event.account, "prod");
  EXPECT_EQ(event.inspection_id, "insp-1");
  const nlohmann::json payload = nlohmann::json::parse(event.payload);
  EXPECT_EQ(payload["source"], "reconcile");
  EXPECT_EQ(payload["inspectionId"], "insp-1");
  EXPECT_EQ(payload["report"]["damages"][0]["part"], "front_bumper");
  EXPECT_EQ(reconciler.stats().recovered, 1);
  EXPECT_EQ(At(7200), 0) << "resolved: never polled again";

  // The same inspection submitted and recovered again (a retried submission after a
  // crash) is the same event: stored once.
  ASSERT_TRUE(ledger_->Record({eventlog::WorkKind::kInspection, "prod", "insp-1", 0, 0, 0}).ok());
  ASSERT_TRUE(reconciler.Submitted("prod", "insp-2").ok());
  EXPECT_EQ(Events().size(), 1u);
}

TEST_F(ReconcilerTest, ReadyPointersDecideWhenAReportIsFinished) {
  options_.ready_pointers = {"/damages"};
  Reconciler& reconciler = Make();
  ASSERT_TRUE(reconciler.Submitted("", "insp-1").ok());
  reports_["insp-1"] = R"({"damages": []})";
  EXPECT_EQ(At(600), 1);
  EXPECT_TRUE(Events().empty()) << "an empty list is not a finished report";
  EXPECT_EQ(reconciler.stats().not_ready, 1);
  reports_["insp-1"] = R"({"damages": [{"part": "door"}]})";
  EXPECT_EQ(At(660), 1);
  EXPECT_EQ(Events().size(), 1u);
}

TEST_F(ReconcilerTest, TheBudgetCapsVendorCallsPerMinute) {
  options_.max_polls_per_minute = 2;
  Reconciler& reconciler = Make();
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(reconciler.Submitted("", "insp-" + std::to_string(i)).ok());
  }
  EXPECT_EQ(At(600), 2);
  EXPECT_EQ(At(600), 0) << "the budget is spent";
  EXPECT_EQ(At(630), 1) << "half a minute refills one call";
  EXPECT_EQ(At(690), 2) << "a full minute refills the burst, no more";
  EXPECT_EQ(polled_.size(), 5u);
  EXPECT_GE(reconciler.stats().budget_limited, 2);
}

TEST_F(ReconcilerTest, AVendorFailureIsCountedAndPolledAgainLater) {
  Reconciler& reconciler = Make();
  ASSERT_TRUE(reconciler.Submitted("", "insp-1").ok());
  vendor_down_ = true;
  EXPECT_EQ(At(600), 1);
  EXPECT_EQ(reconciler.stats().errors, 1);
  EXPECT_EQ(reconciler.stats().not_ready, 0);
  vendor_down_ = false;
  reports_["insp-1"] = "{}";
  EXPECT_EQ(At(659), 0);
  EXPECT_EQ(At(660), 1);
  EXPECT_EQ(Events().size(), 1u);
}

// An answer that arrives later, on the vendor call's thread (the curl event loop when
// wired), only queues it: the log append and the ledger writes happen in the next pass.
TEST_F(ReconcilerTest, ALateAnswerIsHandledByTheNextPassNotInItsCallback) {
  Reconciler& reconciler = Make();
  ASSERT_TRUE(reconciler.Submitted("", "insp-1").ok());
  hold_ = true;
  EXPECT_EQ(At(600), 1);
  ASSERT_EQ(held_.size(), 1u);
  std::move(held_[0])(std::string(R"({"damages": []})"));
  EXPECT_TRUE(Events().empty()) << "no I/O in the callback";
  EXPECT_EQ(reconciler.stats().recovered, 0);
  hold_ = false;
  EXPECT_EQ(At(601), 0) << "still leased: not polled again";
  EXPECT_EQ(Events().size(), 1u);
  EXPECT_EQ(reconciler.stats().recovered, 1);
}

TEST_F(ReconcilerTest, ABodyThatIsNotJsonIsKeptAsText) {
  Reconciler& reconciler = Make();
  ASSERT_TRUE(reconciler.Submitted("", "insp-1").ok());
  reports_["insp-1"] = "report: 3 damages";
  EXPECT_EQ(At(600), 1);
  std::vector<eventlog::StoredEvent> events = Events();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(nlohmann::json::parse(events[0].event.payload)["report"], "report: 3 damages");
}

TEST_F(ReconcilerTest, ACompletedTokensInspectionIsReconciledLikeASubmission) {
  Reconciler& reconciler = Make();
  ASSERT_TRUE(reconciler.TokenCreated("prod", "tok-1").ok());
  tokens_["tok-1"] = TokenState{};  // not completed yet
  EXPECT_EQ(At(59), 0);
  EXPECT_EQ(At(60), 1) << "a token is polled every reconcile.interval";
  EXPECT_EQ(reconciler.stats().not_ready, 1);
  tokens_["tok-1"] = TokenState{true, false, "insp-9"};
  EXPECT_EQ(At(180), 1);
  EXPECT_EQ(reconciler.stats().tokens_completed, 1);
  reports_["insp-9"] = "{}";
  EXPECT_EQ(At(779), 0) << "its createReport gets reconcile.after to arrive";
  EXPECT_EQ(At(780), 1);
  EXPECT_EQ(At(5000), 0) << "token and inspection both resolved";
  EXPECT_THAT(polled_,
              ElementsAre("token:prod/tok-1@60", "token:prod/tok-1@180", "prod/insp-9@780"));
  std::vector<eventlog::StoredEvent> events = Events();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].event.inspection_id, "insp-9");
  EXPECT_EQ(events[0].event.account, "prod");
}

TEST_F(ReconcilerTest, AnExpiredTokenIsForgotten) {
  Reconciler& reconciler = Make();
  ASSERT_TRUE(reconciler.TokenCreated("", "tok-1").ok());
  tokens_["tok-1"] = TokenState{false, true, ""};
  EXPECT_EQ(At(60), 1);
  EXPECT_EQ(reconciler.stats().tokens_expired, 1);
  EXPECT_EQ(At(100000), 0);
}

TEST_F(ReconcilerTest, WebhookLessModePollsAfterTheIntervalAndSaysWhy) {
  options_.webhook_less = true;
  Reconciler& reconciler = Make();
  ASSERT_TRUE(reconciler.Submitted("", "insp-1").ok());
  EXPECT_EQ(At(59), 0);
  reports_["insp-1"] = "{}";
  EXPECT_EQ(At(60), 1) << "no webhook to wait for: the first poll is one interval later";
  std::vector<eventlog::StoredEvent> events = Events();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(nlohmann::json::parse(events[0].event.payload)["cause"], "webhook_less");

  // A completed token's inspection is polled at once.
  ASSERT_TRUE(reconciler.TokenCreated("", "tok-1").ok());
  tokens_["tok-1"] = TokenState{true, false, "insp-2"};
  reports_["insp-2"] = "{}";
  EXPECT_EQ(At(120), 1) << "the token";
  EXPECT_EQ(At(120), 1) << "its inspection, due at once (the next pass, same time)";
  EXPECT_EQ(Events().size(), 2u);
}

TEST_F(ReconcilerTest, QueuedWorkIsAppliedInOrderByTheNextPass) {
  Reconciler& reconciler = Make();
  reconciler.QueueSubmitted("", "insp-1");
  reconciler.QueueSubmitted("", "insp-2");
  eventlog::NewEvent webhook;
  webhook.event_name = "createReport";
  webhook.inspection_id = "insp-1";
  reconciler.QueueObserved(webhook);
  eventlog::NewEvent other;
  other.event_name = "newInspection";
  other.inspection_id = "insp-2";
  reconciler.QueueObserved(other);  // resolves nothing
  absl::StatusOr<int64_t> pending = ledger_->CountPending(INT64_MAX);
  ASSERT_TRUE(pending.ok());
  EXPECT_EQ(*pending, 0) << "nothing written before the pass";
  EXPECT_EQ(At(0), 0);
  pending = ledger_->CountPending(INT64_MAX);
  ASSERT_TRUE(pending.ok());
  EXPECT_EQ(*pending, 1) << "insp-1 recorded, then resolved by its createReport";
  EXPECT_EQ(At(600), 1);
  EXPECT_THAT(polled_, ElementsAre("/insp-2@600"));
  EXPECT_EQ(reconciler.stats().overdue, 0) << "the one due item is being polled";
}

// The queue cannot grow without bound: beyond max_unrecorded, Queue* calls are refused and
// counted (not as ledger errors: no write failed), and what was queued before is written.
// (unrecorded_work_test.cc: the same with a ledger that refuses writes.)
TEST_F(ReconcilerTest, TheQueueIsBoundedAndDropsAreCounted) {
  options_.max_unrecorded = 3;
  Reconciler& reconciler = Make();
  for (int i = 0; i < 5; ++i) reconciler.QueueSubmitted("", absl::StrCat("insp-", i));
  EXPECT_EQ(reconciler.stats().unrecorded, 3);
  EXPECT_EQ(reconciler.stats().unrecorded_dropped, 2);
  EXPECT_EQ(At(0), 0);
  absl::StatusOr<int64_t> pending = ledger_->CountPending(INT64_MAX);
  ASSERT_TRUE(pending.ok());
  EXPECT_EQ(*pending, 3);
  EXPECT_EQ(reconciler.stats().unrecorded, 0);
  EXPECT_EQ(reconciler.stats().unrecorded_dropped, 2);
  EXPECT_EQ(reconciler.stats().ledger_errors, 0);
  reconciler.QueueSubmitted("", "insp-later");  // room again after the pass
  EXPECT_EQ(At(1), 0);
  pending = ledger_->CountPending(INT64_MAX);
  ASSERT_TRUE(pending.ok());
  EXPECT_EQ(*pending, 4);
}

TEST_F(ReconcilerTest, OverdueCountsItemsDueButNotYetPolled) {
  options_.max_polls_per_minute = 1;
  Reconciler& reconciler = Make();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(reconciler.Submitted("", absl::StrCat("i", i)).ok());
  EXPECT_EQ(At(600), 1);
  EXPECT_EQ(reconciler.stats().overdue, 2);
}

TEST_F(ReconcilerTest, ItemsOlderThanMaxAgeAreForgotten) {
  options_.max_age = absl::Hours(1);
  Reconciler& reconciler = Make();
  ASSERT_TRUE(reconciler.Submitted("", "insp-1").ok());
  EXPECT_EQ(At(600), 1);
  EXPECT_EQ(At(3601 + 60), 0) << "older than max_age: trimmed before the claim";
  absl::StatusOr<int64_t> pending = ledger_->CountPending(INT64_MAX);
  ASSERT_TRUE(pending.ok());
  EXPECT_EQ(*pending, 0);
}

// Issue 31: items that never finish are polled every max_interval until max_age. 1,200 of
// them want 120 polls a minute, twice the budget; a new submission must not wait behind
// them (new work is claimed first).
TEST_F(ReconcilerTest, ANewSubmissionIsPolledWhenDueDespiteThousandsOfStaleItems) {
  // In memory: the scenario makes thousands of ledger writes, each a sync on a file.
  auto ledger = eventlog::OpenSqliteWorkLedger(":memory:");
  ASSERT_TRUE(ledger.ok()) << ledger.status();
  ledger_ = std::move(*ledger);
  options_.max_interval = absl::Minutes(10);  // the defaults: 10 min, 60 polls a minute
  options_.max_polls_per_minute = 60;
  Reconciler& reconciler = Make();
  constexpr int kStale = 1200;
  for (int i = 0; i < kStale; ++i) {
    ASSERT_TRUE(reconciler.Submitted("", absl::StrCat("stale-", i)).ok());
  }
  // An hour of passes every scan_interval (5 s): the stale items take the whole budget.
  int t = 0;
  for (; t < 3600; t += 5) At(t);
  ASSERT_GE(polled_.size(), 3000u) << "the budget was spent on the stale items";
  now_ = start_ + absl::Seconds(t);
  ASSERT_TRUE(reconciler.Submitted("", "new").ok());
  const int due = t + 600;  // reconcile.after
  int first_poll = -1;
  for (; t <= due + 7200 && first_poll < 0; t += 5) {
    const size_t before = polled_.size();
    At(t);
    for (size_t i = before; i < polled_.size(); ++i) {
      if (absl::StartsWith(polled_[i], "/new@")) first_poll = t;
    }
  }
  ASSERT_GE(first_poll, due) << "never before its due time";
  EXPECT_LE(first_poll - due, 5) << "the new submission's first poll came " << first_poll - due
                                 << " s after it was due";
  EXPECT_GT(reconciler.stats().budget_limited, 0) << "the budget was the limit all along";
}

// The reconciler's Prometheus series are its own (reconcile_metrics.h): updated where a
// poll, a recovery, a give-up or a ledger failure happens, not copied from stats() later.
TEST_F(ReconcilerTest, UpdatesItsPrometheusSeriesWhereThingsHappen) {
  prometheus::Registry registry;
  const ReconcileMetrics metrics = ReconcileMetrics::Create(metrics::MetricsScope(registry));
  options_.metrics = &metrics;
  options_.max_polls_per_item = 2;
  Reconciler& reconciler = Make();
  ASSERT_TRUE(reconciler.Submitted("prod", "insp-1").ok());
  ASSERT_TRUE(reconciler.Submitted("prod", "insp-2").ok());
  ASSERT_TRUE(reconciler.TokenCreated("prod", "tok-1").ok());
  tokens_["tok-1"] = TokenState{};  // never completed: given up after 2 polls
  reports_["insp-1"] = R"({"damages": []})";
  EXPECT_EQ(metrics.polls_inspection->Value(), 0);
  for (int t = 0; t <= 7200; t += 30) At(t);
  const Reconciler::Stats stats = reconciler.stats();
  EXPECT_EQ(stats.polls, 3) << "insp-1 once (recovered), insp-2 twice (given up)";
  EXPECT_EQ(stats.token_polls, 2);
  EXPECT_EQ(metrics.polls_inspection->Value(), 3);
  EXPECT_EQ(metrics.polls_token->Value(), 2);
  EXPECT_EQ(metrics.recovered_missed_webhook->Value(), 1);
  EXPECT_EQ(metrics.recovered_webhook_less->Value(), 0);
  EXPECT_EQ(metrics.given_up->Value(), 2);
  EXPECT_EQ(metrics.ledger_errors->Value(), 0);
  EXPECT_EQ(metrics.overdue->Value(), 0);
  EXPECT_EQ(metrics.unrecorded->Value(), 0);
  EXPECT_EQ(metrics.unrecorded_dropped->Value(), 0);
  // A report recovered in webhook-less mode counts under its own cause.
  options_.webhook_less = true;
  Reconciler& webhook_less = Make();
  reports_["insp-3"] = R"({"damages": []})";
  ASSERT_TRUE(webhook_less.Submitted("prod", "insp-3").ok());
  for (int t = 7200; t <= 7800; t += 30) At(t);
  EXPECT_EQ(metrics.recovered_webhook_less->Value(), 1);
  EXPECT_EQ(metrics.recovered_missed_webhook->Value(), 1);
}

// reconcile.max_polls_per_item: an inspection or token without a result after that many
// polls is given up: never polled again, counted, and logged once.
TEST_F(ReconcilerTest, AnItemIsGivenUpAfterMaxPollsPerItem) {
  options_.max_polls_per_item = 3;
  CapturedLog log;
  Reconciler& reconciler = Make();
  ASSERT_TRUE(reconciler.Submitted("prod", "insp-1").ok());
  ASSERT_TRUE(reconciler.TokenCreated("prod", "tok-1").ok());
  tokens_["tok-1"] = TokenState{};  // never completed
  for (int t = 0; t <= 7200; t += 30) At(t);
  EXPECT_THAT(polled_,
              ElementsAre("token:prod/tok-1@60", "token:prod/tok-1@120", "token:prod/tok-1@240",
                          "prod/insp-1@600", "prod/insp-1@660", "prod/insp-1@780"));
  EXPECT_EQ(reconciler.stats().given_up, 2);
  EXPECT_EQ(reconciler.stats().not_ready, 6);
  absl::StatusOr<int64_t> pending = ledger_->CountPending(INT64_MAX);
  ASSERT_TRUE(pending.ok());
  EXPECT_EQ(*pending, 0);
  std::vector<nlohmann::json> lines = log.With(
      "reconcile: gave up on an item after reconcile.max_polls_per_item polls without a result");
  ASSERT_EQ(lines.size(), 2u) << "once per item";
  EXPECT_EQ(lines[0]["kind"], "token");
  EXPECT_EQ(lines[0]["id"], "tok-1");
  EXPECT_EQ(lines[0]["polls"], "3");
  EXPECT_EQ(lines[1]["kind"], "inspection");
  EXPECT_EQ(lines[1]["account"], "prod");
  EXPECT_EQ(lines[1]["id"], "insp-1");
}

// A cap lowered below what an item had already been polled (a restart with a new config):
// it is given up when next due, without another vendor call, and costs no budget.
TEST_F(ReconcilerTest, AnItemPastALoweredCapIsGivenUpWithoutAPoll) {
  {
    Reconciler& before = Make();
    ASSERT_TRUE(before.Submitted("", "insp-1").ok());
    now_ = start_ + absl::Seconds(30);
    ASSERT_TRUE(before.Submitted("", "insp-2").ok());
    EXPECT_EQ(At(600), 1);
    EXPECT_EQ(At(630), 1);
    EXPECT_EQ(At(660), 1);
    EXPECT_EQ(At(690), 1);
  }
  EXPECT_THAT(polled_, ElementsAre("/insp-1@600", "/insp-2@630", "/insp-1@660", "/insp-2@690"));
  options_.max_polls_per_item = 2;
  Reconciler& after = Make();
  EXPECT_EQ(At(2000), 0) << "both were polled twice: given up, not polled";
  EXPECT_EQ(after.stats().given_up, 2);
  EXPECT_EQ(after.stats().polls, 0);
  EXPECT_EQ(polled_.size(), 4u);
  absl::StatusOr<int64_t> pending = ledger_->CountPending(INT64_MAX);
  ASSERT_TRUE(pending.ok());
  EXPECT_EQ(*pending, 0);
}

// The background thread: queued work wakes it (no scan interval to wait for), and an
// answer that completes later on another thread is handled without a further call.
TEST_F(ReconcilerTest, TheThreadRunsPassesWhenWorkIsQueued) {
  options_.after = absl::ZeroDuration();
  options_.scan_interval = absl::Hours(1);
  reports_["insp-1"] = "{}";
  Reconciler& reconciler = Make();
  reconciler.Start();
  reconciler.QueueSubmitted("", "insp-1");
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (reconciler.stats().recovered == 0 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  reconciler.Stop();
  EXPECT_EQ(reconciler.stats().recovered, 1);
  EXPECT_EQ(Events().size(), 1u);
}

}  // namespace
}  // namespace inspection::reconcile
