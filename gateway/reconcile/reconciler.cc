#include "gateway/reconcile/reconciler.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "adapters/hashing/sha256.h"
#include "gateway/logging/log.h"
#include "nlohmann/json.hpp"

namespace inspection::reconcile {
namespace {

constexpr char kCreateReportEvent[] = "createReport";

int64_t Ms(absl::Time t) { return absl::ToUnixMillis(t); }

bool Filled(const nlohmann::json& value) {
  if (value.is_null()) return false;
  if (value.is_boolean()) return value.get<bool>();
  if (value.is_string() || value.is_array() || value.is_object()) return !value.empty();
  return true;
}

bool ResolvesAnInspection(const eventlog::NewEvent& event) {
  return !event.inspection_id.empty() &&
         (event.event_name == kCreateReportEvent || event.event_name == kDamagesReportEvent);
}

}  // namespace

Reconciler::Reconciler(ReconcilerOptions options, eventlog::WorkLedger* ledger,
                       eventlog::EventLog* log, FetchReport fetch_report, FetchToken fetch_token,
                       std::function<absl::Time()> clock)
    : options_(std::move(options)),
      ledger_(ledger),
      log_(log),
      fetch_report_(std::move(fetch_report)),
      fetch_token_(std::move(fetch_token)),
      clock_(std::move(clock)),
      tokens_(std::max(options_.max_polls_per_minute, 1)),
      refilled_at_(clock_()) {}

Reconciler::~Reconciler() { Stop(); }

absl::Status Reconciler::Record(eventlog::WorkKind kind, const std::string& account,
                                const std::string& id, absl::Time started,
                                absl::Duration first_poll_in) {
  eventlog::WorkItem item;
  item.kind = kind;
  item.account = account;
  item.id = id;
  item.started_at_ms = Ms(started);
  item.next_poll_at_ms = Ms(started + first_poll_in);
  return ledger_->Record(item);
}

absl::Status Reconciler::Submitted(const std::string& account, const std::string& inspection_id) {
  return Write(Queued{Queued::kSubmitted, account, inspection_id, clock_()});
}

absl::Status Reconciler::TokenCreated(const std::string& account, const std::string& uid) {
  return Write(Queued{Queued::kTokenCreated, account, uid, clock_()});
}

absl::Status Reconciler::Write(const Queued& q) {
  switch (q.what) {
    case Queued::kSubmitted:
      return Record(eventlog::WorkKind::kInspection, q.account, q.id, q.at,
                    options_.webhook_less ? options_.interval : options_.after);
    case Queued::kTokenCreated:
      return Record(eventlog::WorkKind::kToken, q.account, q.id, q.at, options_.interval);
    case Queued::kObserved:
      return ledger_->Resolve(eventlog::WorkKind::kInspection, q.account, q.id);
  }
  return absl::InternalError("unknown queued work");
}

void Reconciler::Observe(const eventlog::NewEvent& event) {
  if (!ResolvesAnInspection(event)) return;
  CountLedgerFailure(
      ledger_->Resolve(eventlog::WorkKind::kInspection, event.account, event.inspection_id),
      event.inspection_id);
}

void Reconciler::Enqueue(Queued queued) {
  const ReconcileMetrics* m = options_.metrics;
  absl::MutexLock lock(&inbox_->mu);
  if (inbox_->unrecorded >= static_cast<int64_t>(options_.max_unrecorded)) {
    ++inbox_->dropped;  // the ledger is stuck: see Inbox::dropped; logged by the next pass
    if (m != nullptr) m->unrecorded_dropped->Increment();
    return;
  }
  inbox_->queued.push_back(std::move(queued));
  ++inbox_->unrecorded;
  if (m != nullptr) m->unrecorded->Set(static_cast<double>(inbox_->unrecorded));
  if (!inbox_->backing_off) inbox_->wake = true;
}

void Reconciler::QueueSubmitted(const std::string& account, const std::string& inspection_id) {
  Enqueue(Queued{Queued::kSubmitted, account, inspection_id, clock_()});
}

void Reconciler::QueueTokenCreated(const std::string& account, const std::string& uid) {
  Enqueue(Queued{Queued::kTokenCreated, account, uid, clock_()});
}

void Reconciler::QueueObserved(const eventlog::NewEvent& event) {
  if (ResolvesAnInspection(event)) {
    Enqueue(Queued{Queued::kObserved, event.account, event.inspection_id, clock_()});
  }
}

void Reconciler::Count(int64_t Stats::*field, int64_t n) {
  stats_.*field += n;
  const ReconcileMetrics* m = options_.metrics;
  if (m == nullptr || n <= 0) return;
  prometheus::Counter* series = nullptr;
  if (field == &Stats::polls) series = m->polls_inspection;
  if (field == &Stats::token_polls) series = m->polls_token;
  if (field == &Stats::recovered) {
    series = options_.webhook_less ? m->recovered_webhook_less : m->recovered_missed_webhook;
  }
  if (field == &Stats::ledger_errors) series = m->ledger_errors;
  if (field == &Stats::given_up) series = m->given_up;
  if (series != nullptr) series->Increment(static_cast<double>(n));
}

void Reconciler::SetOverdue(int64_t items) {
  stats_.overdue = items;
  if (options_.metrics != nullptr) options_.metrics->overdue->Set(static_cast<double>(items));
}

void Reconciler::CountLedgerFailure(const absl::Status& status, const std::string& id) {
  if (status.ok()) return;
  // A resolve that failed: the item is polled once more, which finds the report.
  logging::Warn("work ledger: write failed",
                {{"error", std::string(status.message())}, {"id", id}});
  absl::MutexLock lock(&mu_);
  Count(&Stats::ledger_errors);
}

void Reconciler::ApplyQueued() {
  absl::MutexLock apply(&apply_mu_);
  TakeQueued();
  LogDropped(/*even_if_recent=*/false);
  if (clock_() < retry_at_) return;  // a refused write waits for its retry
  WriteQueued(absl::InfiniteFuture());
}

void Reconciler::TakeQueued() {
  std::vector<Queued> queued;
  {
    absl::MutexLock lock(&inbox_->mu);
    queued.swap(inbox_->queued);
  }
  for (Queued& q : queued) unwritten_.push_back(std::move(q));
}

void Reconciler::WriteQueued(absl::Time deadline) {
  while (!unwritten_.empty() && clock_() < deadline) {
    if (absl::Status s = Write(unwritten_.front()); !s.ok()) {
      OnWriteFailed(s, unwritten_.front());
      return;
    }
    unwritten_.pop_front();
    int64_t left = 0;
    {
      absl::MutexLock lock(&inbox_->mu);
      left = --inbox_->unrecorded;
      inbox_->backing_off = false;
      if (options_.metrics != nullptr) options_.metrics->unrecorded->Set(static_cast<double>(left));
    }
    if (write_failures_ > 0) {
      logging::Info("work ledger: writes succeed again; the queued work is being written",
                    {{"failed_attempts", std::to_string(write_failures_)},
                     {"unrecorded", std::to_string(left)}});
      write_failures_ = 0;
      retry_at_ = absl::InfinitePast();
    }
  }
}

void Reconciler::OnWriteFailed(const absl::Status& status, const Queued& queued) {
  // Kept at the front, with everything queued after it: written in the order queued (a
  // createReport's resolve must follow its submission's record), retried after a wait
  // that doubles with each failure in a row.
  absl::Duration wait = options_.ledger_retry_initial;
  for (int i = 0; i < write_failures_ && wait < options_.ledger_retry_max; ++i) wait *= 2;
  wait = std::min(wait, options_.ledger_retry_max);
  ++write_failures_;
  retry_at_ = clock_() + wait;
  int64_t unrecorded = 0;
  {
    absl::MutexLock lock(&inbox_->mu);
    inbox_->backing_off = true;
    unrecorded = inbox_->unrecorded;
  }
  // One line per attempt: at most one per ledger_retry_max once the wait is at its cap.
  logging::Warn("work ledger: write failed; the queued work stays in memory and is retried",
                {{"error", std::string(status.message())},
                 {"id", queued.id},
                 {"failed_attempts", std::to_string(write_failures_)},
                 {"retry_in_ms", std::to_string(absl::ToInt64Milliseconds(wait))},
                 {"unrecorded", std::to_string(unrecorded)}});
  absl::MutexLock lock(&mu_);
  Count(&Stats::ledger_errors);
}

void Reconciler::LogDropped(bool even_if_recent) {
  int64_t dropped = 0;
  int64_t unrecorded = 0;
  {
    absl::MutexLock lock(&inbox_->mu);
    dropped = inbox_->dropped;
    unrecorded = inbox_->unrecorded;
  }
  const absl::Time now = clock_();
  if (dropped == dropped_logged_) return;
  if (!even_if_recent && now - dropped_logged_at_ < kDroppedLogInterval) return;
  logging::Warn("reconcile: work refused: reconcile.max_unrecorded items wait for the work ledger",
                {{"refused", std::to_string(dropped - dropped_logged_)},
                 {"refused_total", std::to_string(dropped)},
                 {"unrecorded", std::to_string(unrecorded)}});
  dropped_logged_ = dropped;
  dropped_logged_at_ = now;
}

absl::Duration Reconciler::NextWait() {
  absl::MutexLock apply(&apply_mu_);
  if (write_failures_ == 0) return options_.scan_interval;
  return std::clamp(retry_at_ - clock_(), absl::ZeroDuration(), options_.scan_interval);
}

absl::StatusOr<int> Reconciler::RunOnce() {
  ApplyQueued();
  HandleAnswers();
  const absl::Time now = clock_();
  bool trim = false;
  size_t budget = 0;
  {
    absl::MutexLock lock(&mu_);
    if (now - trimmed_at_ >= absl::Minutes(1)) {
      trimmed_at_ = now;
      trim = true;
    }
    const double per_minute = std::max(options_.max_polls_per_minute, 1);
    tokens_ =
        std::min(per_minute, tokens_ + absl::ToDoubleMinutes(now - refilled_at_) * per_minute);
    refilled_at_ = now;
    budget = static_cast<size_t>(tokens_);
  }
  if (trim) {
    absl::StatusOr<int64_t> trimmed = ledger_->Trim(Ms(now - options_.max_age));
    if (trimmed.ok() && *trimmed > 0) {
      logging::Info("work ledger: forgot items older than reconcile.max_age",
                    {{"items", std::to_string(*trimmed)}});
    }
  }
  if (budget == 0) {
    absl::StatusOr<int64_t> overdue = ledger_->CountPending(Ms(now));
    absl::MutexLock lock(&mu_);
    ++stats_.budget_limited;
    if (overdue.ok()) SetOverdue(*overdue);
    return 0;
  }
  absl::StatusOr<std::vector<eventlog::WorkItem>> due =
      ledger_->ClaimDue(Ms(now), budget, options_.owner, absl::ToInt64Milliseconds(options_.lease));
  if (!due.ok()) {
    absl::MutexLock lock(&mu_);
    Count(&Stats::ledger_errors);
    return due.status();
  }
  // Items polled max_polls_per_item times already (the cap was lowered since) go without a
  // further poll, and cost no budget.
  const size_t claimed = due->size();
  due->erase(std::remove_if(due->begin(), due->end(),
                            [this](const eventlog::WorkItem& item) {
                              if (item.attempts < options_.max_polls_per_item) return false;
                              GiveUp(item, item.attempts);
                              return true;
                            }),
             due->end());
  {
    absl::MutexLock lock(&mu_);
    tokens_ -= static_cast<double>(due->size());
    for (const eventlog::WorkItem& item : *due) {
      Count(item.kind == eventlog::WorkKind::kToken ? &Stats::token_polls : &Stats::polls);
    }
    if (claimed == budget) ++stats_.budget_limited;
  }
  for (const eventlog::WorkItem& item : *due) {
    if (item.kind == eventlog::WorkKind::kToken) {
      fetch_token_(item.account, item.id, [inbox = inbox_, item](absl::StatusOr<TokenState> state) {
        absl::MutexLock lock(&inbox->mu);
        inbox->answers.push_back(Answer{item, absl::UnknownError(""), std::move(state)});
        inbox->wake = true;
      });
    } else {
      fetch_report_(
          item.account, item.id, [inbox = inbox_, item](absl::StatusOr<std::string> body) {
            absl::MutexLock lock(&inbox->mu);
            inbox->answers.push_back(Answer{item, std::move(body), absl::UnknownError("")});
            inbox->wake = true;
          });
    }
  }
  HandleAnswers();  // those that answered at once
  absl::StatusOr<int64_t> overdue = ledger_->CountPending(Ms(clock_()));
  if (overdue.ok()) {
    absl::MutexLock lock(&mu_);
    SetOverdue(*overdue);
  }
  return static_cast<int>(due->size());
}

void Reconciler::HandleAnswers() {
  std::vector<Answer> answers;
  {
    absl::MutexLock lock(&inbox_->mu);
    answers.swap(inbox_->answers);
  }
  for (Answer& answer : answers) {
    if (answer.item.kind == eventlog::WorkKind::kToken) {
      OnToken(answer.item, std::move(answer.token));
    } else {
      OnReport(answer.item, std::move(answer.body));
    }
  }
}

void Reconciler::OnReport(const eventlog::WorkItem& item, absl::StatusOr<std::string> body) {
  nlohmann::json report;
  if (body.ok()) {
    report = nlohmann::json::parse(*body, nullptr, /*allow_exceptions=*/false);
    if (report.is_discarded()) report = *body;  // not JSON: kept as text, losslessly
  }
  if (body.ok() && Ready(report)) {
    eventlog::NewEvent event;
    event.account = item.account;
    event.event_name = kDamagesReportEvent;
    event.inspection_id = item.id;
    event.payload = nlohmann::json{
        {"source", "reconcile"},
        {"cause", options_.webhook_less ? "webhook_less" : "missed_webhook"},
        {"inspectionId", item.id},
        {"report",
         report}}.dump();
    // One recovered report per inspection and account: a repeat (a replica that died after
    // appending, before resolving) is a duplicate within the dedupe window.
    event.content_hash =
        hashing::Sha256Hex(absl::StrCat("reconcile\n", item.account, "\n", item.id));
    event.received_at_ms = Ms(clock_());
    absl::StatusOr<eventlog::AppendResult> appended = log_->Append(event);
    if (appended.ok()) {
      if (absl::Status s = ledger_->Resolve(item.kind, item.account, item.id); !s.ok()) {
        logging::Warn("work ledger: resolve failed", {{"error", std::string(s.message())}});
      }
      absl::MutexLock lock(&mu_);
      Count(&Stats::recovered);
      return;
    }
    logging::Warn("reconcile: append failed",
                  {{"error", std::string(appended.status().message())}});
    absl::MutexLock lock(&mu_);
    Count(&Stats::ledger_errors);
  }
  {
    // NOT_FOUND is the vendor's "no report (yet)"; anything else failed.
    const bool not_yet = body.ok() || body.status().code() == absl::StatusCode::kNotFound;
    absl::MutexLock lock(&mu_);
    ++(not_yet ? stats_.not_ready : stats_.errors);
  }
  Retry(item);
}

void Reconciler::OnToken(const eventlog::WorkItem& item, absl::StatusOr<TokenState> state) {
  if (state.ok() && state->completed && !state->inspection_id.empty()) {
    // Its inspection is reconciled like a submission; in webhook-less mode at once (the
    // report exists), otherwise once its createReport had `after` to arrive.
    absl::Status recorded =
        Record(eventlog::WorkKind::kInspection, item.account, state->inspection_id, clock_(),
               options_.webhook_less ? absl::ZeroDuration() : options_.after);
    if (recorded.ok()) recorded = ledger_->Resolve(item.kind, item.account, item.id);
    if (recorded.ok()) {
      {
        absl::MutexLock lock(&inbox_->mu);
        inbox_->wake = true;  // in webhook-less mode the inspection is due now
      }
      absl::MutexLock lock(&mu_);
      ++stats_.tokens_completed;
      return;
    }
    absl::MutexLock lock(&mu_);
    Count(&Stats::ledger_errors);
  } else if (state.ok() && state->expired) {
    if (ledger_->Resolve(item.kind, item.account, item.id).ok()) {
      absl::MutexLock lock(&mu_);
      ++stats_.tokens_expired;
      return;
    }
  } else {
    absl::MutexLock lock(&mu_);
    ++(state.ok() ? stats_.not_ready : stats_.errors);
  }
  Retry(item);
}

void Reconciler::Retry(const eventlog::WorkItem& item) {
  // item.attempts counts the polls before this one.
  if (item.attempts + 1 >= options_.max_polls_per_item) {
    GiveUp(item, item.attempts + 1);
    return;
  }
  const absl::Time next = clock_() + NextInterval(item.attempts);
  if (absl::Status s = ledger_->Reschedule(item, options_.owner, Ms(next)); !s.ok()) {
    // FAILED_PRECONDITION: another replica took it over (our lease ended), or it was
    // resolved meanwhile. Either way it is not ours to reschedule.
    if (s.code() != absl::StatusCode::kFailedPrecondition) {
      logging::Warn("work ledger: reschedule failed", {{"error", std::string(s.message())}});
    }
  }
}

void Reconciler::GiveUp(const eventlog::WorkItem& item, int polls) {
  // Resolved: never claimed again, and trimmed with the rest at max_age.
  if (absl::Status s = ledger_->Resolve(item.kind, item.account, item.id); !s.ok()) {
    CountLedgerFailure(s, item.id);  // claimed again after the lease, given up then
    return;
  }
  logging::Warn(
      "reconcile: gave up on an item after reconcile.max_polls_per_item polls without a result",
      {{"kind", item.kind == eventlog::WorkKind::kToken ? "token" : "inspection"},
       {"account", item.account},
       {"id", item.id},
       {"polls", std::to_string(polls)}});
  absl::MutexLock lock(&mu_);
  Count(&Stats::given_up);
}

bool Reconciler::Ready(const nlohmann::json& report) const {
  if (options_.ready_pointers.empty()) return true;
  if (!report.is_object() && !report.is_array()) return false;  // not JSON, or a scalar
  for (const std::string& pointer : options_.ready_pointers) {
    try {
      const nlohmann::json::json_pointer at(pointer);
      if (!report.contains(at) || !Filled(report.at(at))) return false;
    } catch (const nlohmann::json::exception&) {
      return false;
    }
  }
  return true;
}

absl::Duration Reconciler::NextInterval(int attempts) const {
  absl::Duration interval = options_.interval;
  for (int i = 0; i < attempts && interval < options_.max_interval; ++i) interval *= 2;
  return std::min(interval, options_.max_interval);
}

void Reconciler::Start() {
  if (thread_.joinable()) return;
  thread_ = std::thread([this] { Loop(); });
}

void Reconciler::Stop() {
  {
    absl::MutexLock lock(&inbox_->mu);
    inbox_->stopping = true;
  }
  if (thread_.joinable()) thread_.join();
  // A graceful stop: what was queued is written, within stop_flush_timeout. Not when the
  // ledger's last write failed (another attempt could take its whole timeout).
  absl::MutexLock apply(&apply_mu_);
  TakeQueued();
  LogDropped(/*even_if_recent=*/true);
  if (write_failures_ == 0) WriteQueued(clock_() + options_.stop_flush_timeout);
  if (!unwritten_.empty()) {
    logging::Warn(
        "reconcile: stopped with queued work not recorded in the work ledger; it is lost "
        "with the process",
        {{"unrecorded", std::to_string(unwritten_.size())},
         {"ledger_failing", write_failures_ > 0 ? "true" : "false"}});
  }
}

void Reconciler::Loop() {
  Inbox& inbox = *inbox_;
  while (true) {
    const absl::Duration wait = NextWait();
    {
      absl::MutexLock lock(&inbox.mu);
      auto woken = [&inbox]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(inbox.mu) {
        return inbox.wake || inbox.stopping;
      };
      inbox.mu.AwaitWithTimeout(absl::Condition(&woken), wait);
      if (inbox.stopping) return;
      inbox.wake = false;
    }
    if (absl::StatusOr<int> ran = RunOnce(); !ran.ok()) {
      logging::Warn("reconcile pass failed", {{"error", std::string(ran.status().message())}});
    }
  }
}

Reconciler::Stats Reconciler::stats() const {
  Stats out;
  {
    absl::MutexLock lock(&mu_);
    out = stats_;
  }
  absl::MutexLock lock(&inbox_->mu);
  out.unrecorded = inbox_->unrecorded;
  out.unrecorded_dropped = inbox_->dropped;
  return out;
}

}  // namespace inspection::reconcile
