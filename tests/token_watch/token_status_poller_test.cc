#include "gateway/token_watch/token_status_poller.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <deque>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gateway/timers/scheduler.h"

namespace inspection::token_watch {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::IsEmpty;
using Response = v1::GetTokenStatusResponse;
using Done = absl::AnyInvocable<void(PollResult) &&>;

grpc::Status Err(grpc::StatusCode code, const std::string& message) {
  return grpc::Status(code, message);
}

// "OK" or "NOT_FOUND: token not found", for the recorded events.
std::string Text(const grpc::Status& status) {
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message())
      .ToString();
}

// A status response for token `uid` with vendor tradeinStatus `raw`.
Response TokenStatus(int raw, bool expired = false, const std::string& uid = "tok") {
  Response response;
  v1::Token* token = response.mutable_token();
  token->set_uid(uid);
  token->set_tradein_status_raw(raw);
  token->set_tradein_status(static_cast<v1::TradeinStatus>(raw + 1));  // vendor 0 -> CREATED
  token->set_expired(expired);
  response.set_web_api_version("v2");
  return response;
}

// The upstream: per uid a script of results, one per call, the last one repeating. Records
// each call's virtual time. In hold mode the calls are parked until the test completes them.
class FakeFetch {
 public:
  explicit FakeFetch(timers::ManualScheduler* clock) : clock_(clock) {}

  void Script(const std::string& uid, std::vector<PollResult> results) {
    scripts_[uid] = std::deque<PollResult>(results.begin(), results.end());
  }
  void set_hold(bool hold) { hold_ = hold; }

  FetchStatus AsFetch() {
    return [this](const std::string& uid, Done done) {
      call_times_[uid].push_back(clock_->Now());
      PollResult result = Next(uid);
      if (hold_) {
        parked_.emplace_back(std::move(result), std::move(done));
      } else {
        std::move(done)(std::move(result));  // synchronously, inside the fetch
      }
    };
  }

  // Completes the oldest parked call with the result scripted when it was made, or with
  // `override_result` if given.
  void CompleteParked(std::optional<PollResult> override_result = std::nullopt) {
    ASSERT_FALSE(parked_.empty());
    auto [result, done] = std::move(parked_.front());
    parked_.pop_front();
    std::move(done)(override_result.has_value() ? *std::move(override_result) : std::move(result));
  }
  size_t parked() const { return parked_.size(); }

  int calls(const std::string& uid) const {
    auto found = call_times_.find(uid);
    return found == call_times_.end() ? 0 : static_cast<int>(found->second.size());
  }
  // Seconds between consecutive calls for `uid`.
  std::vector<double> Gaps(const std::string& uid) const {
    std::vector<double> gaps;
    const std::vector<absl::Time>& times = call_times_.at(uid);
    for (size_t i = 1; i < times.size(); ++i) {
      gaps.push_back(absl::ToDoubleSeconds(times[i] - times[i - 1]));
    }
    return gaps;
  }

 private:
  PollResult Next(const std::string& uid) {
    auto found = scripts_.find(uid);
    if (found == scripts_.end() || found->second.empty()) {
      return Err(grpc::StatusCode::INTERNAL, absl::StrCat("no script for ", uid));
    }
    std::deque<PollResult>& script = found->second;
    PollResult result = script.front();
    if (script.size() > 1) script.pop_front();
    return result;
  }

  timers::ManualScheduler* const clock_;
  bool hold_ = false;
  std::map<std::string, std::deque<PollResult>> scripts_;
  std::map<std::string, std::vector<absl::Time>> call_times_;
  std::deque<std::pair<PollResult, Done>> parked_;
};

// What one watcher saw, in order: "0", "1", "2 expired", "end OK", "end NOT_FOUND: ...".
class Recorder {
 public:
  TokenStatusPoller::StatusCallback OnStatus() {
    return [this](const Response& response) {
      absl::MutexLock lock(&mu_);
      events_.push_back(absl::StrCat(response.token().tradein_status_raw(),
                                     response.token().expired() ? " expired" : ""));
      last_ = response;
    };
  }
  TokenStatusPoller::EndCallback OnEnd() {
    return [this](grpc::Status status) {
      absl::MutexLock lock(&mu_);
      events_.push_back(status.ok() ? "end OK" : absl::StrCat("end ", Text(status)));
    };
  }
  std::vector<std::string> events() const {
    absl::MutexLock lock(&mu_);
    return events_;
  }
  Response last() const {
    absl::MutexLock lock(&mu_);
    return last_;
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<std::string> events_ ABSL_GUARDED_BY(mu_);
  Response last_ ABSL_GUARDED_BY(mu_);
};

class TokenStatusPollerTest : public ::testing::Test {
 protected:
  // Creates the poller (after the test has adjusted options_).
  TokenStatusPoller& poller() {
    if (poller_ == nullptr) {
      poller_ = std::make_unique<TokenStatusPoller>(options_, fetch_.AsFetch(), &scheduler_);
    }
    return *poller_;
  }
  std::shared_ptr<TokenWatch> Watch(const std::string& uid, Recorder& recorder) {
    absl::StatusOr<std::shared_ptr<TokenWatch>> watch =
        poller().Watch(uid, recorder.OnStatus(), recorder.OnEnd());
    EXPECT_TRUE(watch.ok()) << watch.status();
    return watch.ok() ? *watch : nullptr;
  }

  // A recorder that outlives the poller: the poller's destructor ends the open watches.
  Recorder& NewRecorder() { return recorders_.emplace_back(); }

  timers::ManualScheduler scheduler_;
  FakeFetch fetch_{&scheduler_};
  TokenStatusPollerOptions options_;
  std::deque<Recorder> recorders_;
  std::unique_ptr<TokenStatusPoller> poller_;  // last: destroyed first
};

TEST_F(TokenStatusPollerTest, FiftyWatchersShareOnePollPerInterval) {
  fetch_.Script("tok", {TokenStatus(0)});
  std::vector<Recorder*> recorders;
  std::vector<std::shared_ptr<TokenWatch>> watches;
  for (int i = 0; i < 50; ++i) {
    recorders.push_back(&NewRecorder());
    watches.push_back(Watch("tok", *recorders.back()));
  }
  EXPECT_EQ(fetch_.calls("tok"), 0);  // the first poll runs on the scheduler, not in Watch
  for (const Recorder* recorder : recorders) EXPECT_THAT(recorder->events(), IsEmpty());

  scheduler_.RunDue();
  EXPECT_EQ(fetch_.calls("tok"), 1);
  for (const Recorder* recorder : recorders) EXPECT_THAT(recorder->events(), ElementsAre("0"));

  // One poll per interval, however many watchers; an unchanged status is not re-delivered.
  scheduler_.AdvanceBy(absl::Milliseconds(1999));
  EXPECT_EQ(fetch_.calls("tok"), 1);
  scheduler_.AdvanceBy(absl::Milliseconds(1));
  EXPECT_EQ(fetch_.calls("tok"), 2);
  for (int i = 0; i < 4; ++i) scheduler_.AdvanceBy(absl::Seconds(2));
  EXPECT_EQ(fetch_.calls("tok"), 6);
  EXPECT_THAT(fetch_.Gaps("tok"), ElementsAre(2, 2, 2, 2, 2));
  for (const Recorder* recorder : recorders) EXPECT_THAT(recorder->events(), ElementsAre("0"));

  // A change is delivered once to each watcher.
  fetch_.Script("tok", {TokenStatus(1)});
  scheduler_.AdvanceBy(absl::Seconds(2));
  scheduler_.AdvanceBy(absl::Seconds(2));
  EXPECT_EQ(fetch_.calls("tok"), 8);
  for (const Recorder* recorder : recorders) EXPECT_THAT(recorder->events(), ElementsAre("0", "1"));

  const TokenStatusPoller::Stats stats = poller().stats();
  EXPECT_EQ(stats.polls_issued, 8u);
  EXPECT_EQ(stats.active_uids, 1u);
  EXPECT_EQ(stats.watchers, 50u);
}

TEST_F(TokenStatusPollerTest, NewWatcherOfPolledTokenGetsCachedStatusWithoutUpstreamCall) {
  fetch_.Script("tok", {TokenStatus(3)});
  Recorder& first = NewRecorder();
  Recorder& late = NewRecorder();
  auto first_watch = Watch("tok", first);
  scheduler_.RunDue();
  scheduler_.AdvanceBy(absl::Seconds(1));  // mid-interval
  ASSERT_EQ(fetch_.calls("tok"), 1);

  auto late_watch = Watch("tok", late);
  EXPECT_THAT(late.events(), IsEmpty());  // never inside Watch
  scheduler_.RunDue();
  EXPECT_THAT(late.events(), ElementsAre("3"));
  EXPECT_EQ(fetch_.calls("tok"), 1);

  scheduler_.AdvanceBy(absl::Seconds(1));  // the regular poll, on the original cadence
  EXPECT_EQ(fetch_.calls("tok"), 2);
  EXPECT_THAT(first.events(), ElementsAre("3"));
  EXPECT_THAT(late.events(), ElementsAre("3"));
}

TEST_F(TokenStatusPollerTest, WatcherJoiningDuringTheFirstPollSharesItsResult) {
  fetch_.Script("tok", {TokenStatus(0)});
  fetch_.set_hold(true);
  Recorder& a = NewRecorder();
  Recorder& b = NewRecorder();
  auto watch_a = Watch("tok", a);
  scheduler_.RunDue();
  ASSERT_EQ(fetch_.parked(), 1u);

  auto watch_b = Watch("tok", b);
  scheduler_.RunDue();
  EXPECT_EQ(fetch_.calls("tok"), 1);  // no second, overlapping poll
  EXPECT_THAT(b.events(), IsEmpty());

  fetch_.CompleteParked();
  EXPECT_THAT(a.events(), ElementsAre("0"));
  EXPECT_THAT(b.events(), ElementsAre("0"));
}

TEST_F(TokenStatusPollerTest, CachedStatusNeverOvertakesANewerPollResult) {
  fetch_.Script("tok", {TokenStatus(0)});
  fetch_.set_hold(true);
  Recorder& a = NewRecorder();
  Recorder& b = NewRecorder();
  auto watch_a = Watch("tok", a);
  scheduler_.RunDue();
  fetch_.CompleteParked();
  scheduler_.AdvanceBy(absl::Seconds(2));
  ASSERT_EQ(fetch_.parked(), 1u);  // second poll in flight

  auto watch_b = Watch("tok", b);         // its cached-status delivery is queued...
  fetch_.CompleteParked(TokenStatus(1));  // ...but a newer status lands first
  scheduler_.RunDue();                    // then the cached delivery runs

  EXPECT_THAT(a.events(), ElementsAre("0", "1"));
  EXPECT_THAT(b.events(), ElementsAre("1"));  // not "1", "0" nor "1", "1"
}

TEST_F(TokenStatusPollerTest, SecondUidIsPolledIndependently) {
  fetch_.Script("a", {TokenStatus(0, false, "a")});
  fetch_.Script("b", {TokenStatus(4, false, "b")});
  Recorder& on_a = NewRecorder();
  Recorder& on_b = NewRecorder();
  auto watch_a = Watch("a", on_a);
  scheduler_.RunDue();
  scheduler_.AdvanceBy(absl::Seconds(1));
  auto watch_b = Watch("b", on_b);
  scheduler_.RunDue();
  EXPECT_EQ(fetch_.calls("a"), 1);
  EXPECT_EQ(fetch_.calls("b"), 1);
  EXPECT_EQ(poller().stats().active_uids, 2u);

  scheduler_.AdvanceBy(absl::Seconds(1));  // t=2: a's turn
  EXPECT_EQ(fetch_.calls("a"), 2);
  EXPECT_EQ(fetch_.calls("b"), 1);
  scheduler_.AdvanceBy(absl::Seconds(1));  // t=3: b's turn
  EXPECT_EQ(fetch_.calls("b"), 2);

  watch_a->Cancel();
  scheduler_.AdvanceBy(absl::Seconds(10));
  EXPECT_EQ(fetch_.calls("a"), 2);
  EXPECT_EQ(fetch_.calls("b"), 7);
  EXPECT_THAT(on_a.events(), ElementsAre("0", "end CANCELLED: watch cancelled"));
  EXPECT_THAT(on_b.events(), ElementsAre("4"));
  EXPECT_EQ(poller().stats().active_uids, 1u);
}

TEST_F(TokenStatusPollerTest, LastWatcherCancellingStopsThePolling) {
  fetch_.Script("tok", {TokenStatus(0)});
  Recorder& a = NewRecorder();
  Recorder& b = NewRecorder();
  auto watch_a = Watch("tok", a);
  auto watch_b = Watch("tok", b);
  scheduler_.RunDue();

  watch_a->Cancel();
  EXPECT_THAT(a.events(), ElementsAre("0", "end CANCELLED: watch cancelled"));
  scheduler_.AdvanceBy(absl::Seconds(2));
  EXPECT_EQ(fetch_.calls("tok"), 2);  // b still watches

  watch_b->Cancel();
  EXPECT_EQ(poller().stats().active_uids, 0u);
  EXPECT_EQ(poller().stats().watchers, 0u);
  EXPECT_EQ(scheduler_.pending(), 0u);  // the next poll's timer is gone
  scheduler_.AdvanceBy(absl::Seconds(60));
  EXPECT_EQ(fetch_.calls("tok"), 2);

  // Cancel is idempotent: no second on_end.
  watch_b->Cancel();
  EXPECT_THAT(b.events(), ElementsAre("0", "end CANCELLED: watch cancelled"));

  // Watching again starts a new loop.
  Recorder& c = NewRecorder();
  auto watch_c = Watch("tok", c);
  scheduler_.RunDue();
  EXPECT_EQ(fetch_.calls("tok"), 3);
  EXPECT_THAT(c.events(), ElementsAre("0"));
}

TEST_F(TokenStatusPollerTest, CancelDuringAPollDropsItsResultAndStops) {
  fetch_.Script("tok", {TokenStatus(0)});
  fetch_.set_hold(true);
  Recorder& a = NewRecorder();
  auto watch = Watch("tok", a);
  scheduler_.RunDue();
  ASSERT_EQ(fetch_.parked(), 1u);

  watch->Cancel();
  EXPECT_THAT(a.events(), ElementsAre("end CANCELLED: watch cancelled"));
  EXPECT_EQ(poller().stats().watchers, 0u);
  EXPECT_EQ(poller().stats().active_uids, 1u);  // until its last poll completes

  fetch_.CompleteParked();
  EXPECT_THAT(a.events(), ElementsAre("end CANCELLED: watch cancelled"));
  EXPECT_EQ(poller().stats().active_uids, 0u);
  scheduler_.AdvanceBy(absl::Seconds(60));
  EXPECT_EQ(fetch_.calls("tok"), 1);
}

TEST_F(TokenStatusPollerTest, WatcherJoiningAFinishingLoopReusesItsPollInFlight) {
  fetch_.Script("tok", {TokenStatus(0)});
  fetch_.set_hold(true);
  Recorder& a = NewRecorder();
  Recorder& b = NewRecorder();
  auto watch_a = Watch("tok", a);
  scheduler_.RunDue();
  watch_a->Cancel();
  auto watch_b = Watch("tok", b);
  scheduler_.RunDue();
  EXPECT_EQ(fetch_.calls("tok"), 1);  // polls of one uid never overlap

  fetch_.CompleteParked();
  EXPECT_THAT(b.events(), ElementsAre("0"));
  scheduler_.AdvanceBy(absl::Seconds(2));
  EXPECT_EQ(fetch_.calls("tok"), 2);  // the loop goes on for b
}

TEST_F(TokenStatusPollerTest, TransientErrorsBackOffExactlyAndASuccessResetsTheBackoff) {
  const grpc::Status unavailable = Err(grpc::StatusCode::UNAVAILABLE, "vendor down");
  fetch_.Script("tok",
                {unavailable, unavailable, unavailable, unavailable, unavailable, unavailable,
                 TokenStatus(0), Err(grpc::StatusCode::DEADLINE_EXCEEDED, "slow"),
                 Err(grpc::StatusCode::RESOURCE_EXHAUSTED, "429"), TokenStatus(1)});
  Recorder& a = NewRecorder();
  auto watch = Watch("tok", a);
  scheduler_.RunDue();
  scheduler_.AdvanceBy(absl::Seconds(101));

  // 6 errors: 2, 4, 8, 16, 30 (capped), 30; success: 2; two errors: 2, 4; success: 2...
  EXPECT_THAT(fetch_.Gaps("tok"), ElementsAre(2, 4, 8, 16, 30, 30, 2, 2, 4, 2));
  EXPECT_THAT(a.events(), ElementsAre("0", "1"));  // errors are not delivered, nor end it
  EXPECT_EQ(poller().stats().poll_errors, 8u);
  EXPECT_EQ(poller().stats().watchers, 1u);
}

TEST_F(TokenStatusPollerTest, BackoffDelaySequence) {
  std::vector<double> delays;
  for (int errors = 1; errors <= 8; ++errors) {
    delays.push_back(absl::ToDoubleSeconds(BackoffDelay(options_, errors)));
  }
  EXPECT_THAT(delays, ElementsAre(2, 4, 8, 16, 30, 30, 30, 30));
  // Huge error counts do not overflow.
  EXPECT_EQ(BackoffDelay(options_, 1000000), absl::Seconds(30));
}

TEST_F(TokenStatusPollerTest, JitterHookShapesErrorBackoffsOnly) {
  options_.backoff_jitter = [](absl::Duration delay) { return delay / 2; };
  const grpc::Status unavailable = Err(grpc::StatusCode::UNAVAILABLE, "vendor down");
  fetch_.Script("tok", {unavailable, unavailable, unavailable, TokenStatus(0)});
  Recorder& a = NewRecorder();
  auto watch = Watch("tok", a);
  scheduler_.RunDue();
  scheduler_.AdvanceBy(absl::Seconds(10));
  EXPECT_THAT(fetch_.Gaps("tok"), ElementsAre(1, 2, 4, 2));
}

TEST_F(TokenStatusPollerTest, NonTransientErrorsEndTheWatchersAtOnce) {
  for (const grpc::Status& error :
       std::vector<grpc::Status>{Err(grpc::StatusCode::NOT_FOUND, "no such token"),
                                 Err(grpc::StatusCode::PERMISSION_DENIED, "forbidden"),
                                 Err(grpc::StatusCode::UNAUTHENTICATED, "bad key"),
                                 Err(grpc::StatusCode::INVALID_ARGUMENT, "bad uid")}) {
    SCOPED_TRACE(Text(error));
    timers::ManualScheduler scheduler;
    FakeFetch fetch(&scheduler);
    fetch.Script("tok", {TokenStatus(0), error});
    Recorder a, b;  // before the poller: they must outlive it
    TokenStatusPoller poller(options_, fetch.AsFetch(), &scheduler);
    auto watch_a = poller.Watch("tok", a.OnStatus(), a.OnEnd());
    auto watch_b = poller.Watch("tok", b.OnStatus(), b.OnEnd());
    scheduler.RunDue();
    scheduler.AdvanceBy(absl::Seconds(2));

    const std::string end = absl::StrCat("end ", Text(error));
    EXPECT_THAT(a.events(), ElementsAre("0", end));
    EXPECT_THAT(b.events(), ElementsAre("0", end));
    EXPECT_EQ(poller.stats().watchers, 0u);
    EXPECT_EQ(poller.stats().active_uids, 0u);
    scheduler.AdvanceBy(absl::Seconds(60));
    EXPECT_EQ(fetch.calls("tok"), 2);
  }
}

TEST_F(TokenStatusPollerTest, NotFoundBeforeAnyStatusEndsWithNotFound) {
  fetch_.Script("tok", {Err(grpc::StatusCode::NOT_FOUND, "token not found")});
  Recorder& a = NewRecorder();
  auto watch = Watch("tok", a);
  scheduler_.RunDue();
  EXPECT_THAT(a.events(), ElementsAre("end NOT_FOUND: token not found"));
}

TEST_F(TokenStatusPollerTest, MaxConsecutiveErrorsEndsTheWatchersWithTheLastError) {
  options_.max_consecutive_errors = 3;
  fetch_.Script("tok", {TokenStatus(0), Err(grpc::StatusCode::UNAVAILABLE, "down 1"),
                        Err(grpc::StatusCode::UNAVAILABLE, "down 2"),
                        Err(grpc::StatusCode::DEADLINE_EXCEEDED, "down 3")});
  Recorder& a = NewRecorder();
  auto watch = Watch("tok", a);
  scheduler_.RunDue();
  scheduler_.AdvanceBy(absl::Seconds(60));
  EXPECT_THAT(a.events(), ElementsAre("0", "end DEADLINE_EXCEEDED: down 3"));
  EXPECT_EQ(fetch_.calls("tok"), 4);
}

TEST_F(TokenStatusPollerTest, ExpiredTokenIsDeliveredThenTheWatchEndsOk) {
  fetch_.Script("tok", {TokenStatus(0), TokenStatus(0), TokenStatus(2, /*expired=*/true)});
  Recorder& a = NewRecorder();
  Recorder& b = NewRecorder();
  auto watch_a = Watch("tok", a);
  auto watch_b = Watch("tok", b);
  scheduler_.RunDue();
  scheduler_.AdvanceBy(absl::Seconds(4));

  EXPECT_THAT(a.events(), ElementsAre("0", "2 expired", "end OK"));
  EXPECT_THAT(b.events(), ElementsAre("0", "2 expired", "end OK"));
  EXPECT_EQ(poller().stats().active_uids, 0u);
  scheduler_.AdvanceBy(absl::Seconds(60));
  EXPECT_EQ(fetch_.calls("tok"), 3);
  watch_a->Cancel();  // after the end: no effect
  EXPECT_THAT(a.events(), ElementsAre("0", "2 expired", "end OK"));
}

TEST_F(TokenStatusPollerTest, FinalStatusIsDeliveredThenTheWatchEndsOk) {
  fetch_.Script("tok", {TokenStatus(4), TokenStatus(5)});  // 5 = completed
  Recorder& a = NewRecorder();
  auto watch = Watch("tok", a);
  scheduler_.RunDue();
  scheduler_.AdvanceBy(absl::Seconds(2));
  EXPECT_THAT(a.events(), ElementsAre("4", "5", "end OK"));
  EXPECT_EQ(fetch_.calls("tok"), 2);
}

TEST_F(TokenStatusPollerTest, FinalStatusesAreConfigurable) {
  options_.final_statuses = {};
  fetch_.Script("tok", {TokenStatus(5), TokenStatus(6)});
  Recorder& a = NewRecorder();
  auto watch = Watch("tok", a);
  scheduler_.RunDue();
  scheduler_.AdvanceBy(absl::Seconds(4));
  EXPECT_THAT(a.events(), ElementsAre("5", "6"));
  EXPECT_EQ(fetch_.calls("tok"), 3);
}

TEST_F(TokenStatusPollerTest, AnyChangeInTheTokenOrVersionIsDeliveredAndNothingElse) {
  Response base = TokenStatus(1);
  base.mutable_token()->set_tradein_status_updated_at("2024-01-01T00:00:00Z");
  Response response_only_change = base;  // response-level unknown fields are not streamed
  (*response_only_change.mutable_unknown_fields()->mutable_fields())["extra"].set_string_value("x");
  Response inspection = base;
  inspection.mutable_token()->mutable_inspection_ptr()->set_id("insp-1");
  Response version = inspection;
  version.set_web_api_version("v3");
  Response same_struct = version;  // equal Struct content: not a change
  (*version.mutable_token()->mutable_unknown_fields()->mutable_fields())["k"].set_number_value(1);
  (*same_struct.mutable_token()->mutable_unknown_fields()->mutable_fields())["k"].set_number_value(
      1);
  fetch_.Script("tok", {base, base, response_only_change, inspection, version, same_struct});

  std::vector<Response> seen;
  Recorder& ends = NewRecorder();
  auto watch = poller().Watch(
      "tok", [&](const Response& response) { seen.push_back(response); }, ends.OnEnd());
  ASSERT_TRUE(watch.ok());
  scheduler_.RunDue();
  scheduler_.AdvanceBy(absl::Seconds(10));

  ASSERT_EQ(fetch_.calls("tok"), 6);
  // base, inspection, version; not the repeated base, the response-level-only change, nor
  // the rebuilt equal message.
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[0].token().tradein_status_updated_at(), "2024-01-01T00:00:00Z");
  EXPECT_EQ(seen[1].token().inspection_ptr().id(), "insp-1");
  EXPECT_EQ(seen[2].web_api_version(), "v3");
  EXPECT_EQ(seen[2].token().unknown_fields().fields().at("k").number_value(), 1);
}

TEST_F(TokenStatusPollerTest, CancelFromInsideOnStatusEndsRightAfterIt) {
  fetch_.Script("tok", {TokenStatus(0), TokenStatus(1)});
  std::vector<std::string> events;
  std::shared_ptr<TokenWatch> watch;
  auto registered = poller().Watch(
      "tok",
      [&](const Response& response) {
        events.push_back(absl::StrCat("status ", response.token().tradein_status_raw()));
        watch->Cancel();
        events.push_back("cancel returned");
      },
      [&](grpc::Status status) { events.push_back(absl::StrCat("end ", Text(status))); });
  ASSERT_TRUE(registered.ok());
  watch = *registered;
  scheduler_.RunDue();
  scheduler_.AdvanceBy(absl::Seconds(10));

  // on_end waits for on_status to return (never nested), and comes once.
  EXPECT_THAT(events, ElementsAre("status 0", "cancel returned", "end CANCELLED: watch cancelled"));
  EXPECT_EQ(poller().stats().watchers, 0u);
  EXPECT_EQ(fetch_.calls("tok"), 1);
}

TEST_F(TokenStatusPollerTest, AFetchThatDropsItsCallbackCountsAsATransientError) {
  int calls = 0;
  poller_ = std::make_unique<TokenStatusPoller>(
      options_,
      [&](const std::string& uid, Done done) {
        if (++calls == 1) return;  // `done` destroyed without being called
        std::move(done)(TokenStatus(0));
      },
      &scheduler_);
  Recorder& a = NewRecorder();
  auto watch = Watch("tok", a);
  scheduler_.RunDue();
  EXPECT_EQ(poller().stats().poll_errors, 1u);
  scheduler_.AdvanceBy(absl::Seconds(2));  // first backoff
  EXPECT_EQ(calls, 2);
  EXPECT_THAT(a.events(), ElementsAre("0"));
}

TEST_F(TokenStatusPollerTest, ShutdownEndsEveryWatchWithUnavailable) {
  fetch_.Script("a", {TokenStatus(0, false, "a")});
  fetch_.Script("b", {TokenStatus(1, false, "b")});
  Recorder& a1 = NewRecorder();
  Recorder& a2 = NewRecorder();
  Recorder& b1 = NewRecorder();
  auto watch_a1 = Watch("a", a1);
  auto watch_a2 = Watch("a", a2);
  scheduler_.RunDue();
  fetch_.set_hold(true);
  auto watch_b1 = Watch("b", b1);
  scheduler_.RunDue();
  ASSERT_EQ(fetch_.parked(), 1u);  // b's first poll in flight

  poller().Shutdown();
  const std::string end = "end UNAVAILABLE: gateway shutting down";
  EXPECT_THAT(a1.events(), ElementsAre("0", end));
  EXPECT_THAT(a2.events(), ElementsAre("0", end));
  EXPECT_THAT(b1.events(), ElementsAre(end));
  EXPECT_EQ(poller().stats().watchers, 0u);
  EXPECT_EQ(poller().stats().active_uids, 0u);

  fetch_.CompleteParked();  // a late result is dropped
  EXPECT_THAT(b1.events(), ElementsAre(end));
  Recorder& late = NewRecorder();
  auto refused = poller().Watch("a", late.OnStatus(), late.OnEnd());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable);
  scheduler_.AdvanceBy(absl::Seconds(60));
  EXPECT_EQ(fetch_.calls("a"), 1);
  EXPECT_EQ(fetch_.calls("b"), 1);
  EXPECT_THAT(late.events(), IsEmpty());
  poller().Shutdown();  // idempotent
}

TEST(IsTransientPollErrorTest, ClassifiesCodes) {
  for (grpc::StatusCode code :
       {grpc::StatusCode::UNAVAILABLE, grpc::StatusCode::DEADLINE_EXCEEDED,
        grpc::StatusCode::RESOURCE_EXHAUSTED, grpc::StatusCode::ABORTED, grpc::StatusCode::INTERNAL,
        grpc::StatusCode::UNKNOWN, grpc::StatusCode::DATA_LOSS, grpc::StatusCode::CANCELLED}) {
    EXPECT_TRUE(IsTransientPollError(grpc::Status(code, "x"))) << code;
  }
  for (grpc::StatusCode code :
       {grpc::StatusCode::OK, grpc::StatusCode::INVALID_ARGUMENT, grpc::StatusCode::NOT_FOUND,
        grpc::StatusCode::ALREADY_EXISTS, grpc::StatusCode::PERMISSION_DENIED,
        grpc::StatusCode::UNAUTHENTICATED, grpc::StatusCode::FAILED_PRECONDITION,
        grpc::StatusCode::OUT_OF_RANGE, grpc::StatusCode::UNIMPLEMENTED}) {
    EXPECT_FALSE(IsTransientPollError(grpc::Status(code, "x"))) << code;
  }
}

// A fetch that answers OK with no status is an error the watcher can read, never a
// silently empty status.
TEST(PollResultTest, AnOkStatusWithoutAResponseIsInternal) {
  PollResult result(grpc::Status::OK);
  EXPECT_FALSE(result.ok());
  EXPECT_EQ(result.status().error_code(), grpc::StatusCode::INTERNAL);
}

}  // namespace
}  // namespace inspection::token_watch
