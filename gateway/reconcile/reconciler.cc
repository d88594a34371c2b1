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

}  // namespace

Reconciler::Reconciler(ReconcilerOptions options, eventlog::WorkLedger* ledger,
                       eventlog::EventLog* log, FetchReport fetch,
                       std::function<absl::Time()> clock)
    : options_(std::move(options)),
      ledger_(ledger),
      log_(log),
      fetch_(std::move(fetch)),
      clock_(std::move(clock)),
      tokens_(std::max(options_.max_polls_per_minute, 1)),
      refilled_at_(clock_()) {}

absl::Status Reconciler::Submitted(const std::string& account, const std::string& inspection_id) {
  const absl::Time now = clock_();
  eventlog::WorkItem item;
  item.kind = eventlog::WorkKind::kInspection;
  item.account = account;
  item.id = inspection_id;
  item.started_at_ms = Ms(now);
  item.next_poll_at_ms = Ms(now + options_.after);
  return ledger_->Record(item);
}

void Reconciler::Observe(const eventlog::NewEvent& event) {
  if (event.inspection_id.empty()) return;
  if (event.event_name != kCreateReportEvent && event.event_name != kDamagesReportEvent) return;
  if (absl::Status s =
          ledger_->Resolve(eventlog::WorkKind::kInspection, event.account, event.inspection_id);
      !s.ok()) {
    // The item is polled once more, which finds the report: nothing is lost.
    logging::Warn("work ledger: resolve failed", {{"error", std::string(s.message())}});
  }
}

absl::StatusOr<int> Reconciler::RunOnce() {
  HandleAnswers();
  const absl::Time now = clock_();
  size_t budget = 0;
  {
    absl::MutexLock lock(&mu_);
    const double per_minute = std::max(options_.max_polls_per_minute, 1);
    tokens_ =
        std::min(per_minute, tokens_ + absl::ToDoubleMinutes(now - refilled_at_) * per_minute);
    refilled_at_ = now;
    budget = static_cast<size_t>(tokens_);
  }
  if (budget == 0) {
    absl::MutexLock lock(&mu_);
    ++stats_.budget_limited;
    return 0;
  }
  absl::StatusOr<std::vector<eventlog::WorkItem>> due =
      ledger_->ClaimDue(Ms(now), budget, options_.owner, absl::ToInt64Milliseconds(options_.lease));
  if (!due.ok()) return due.status();
  {
    absl::MutexLock lock(&mu_);
    tokens_ -= static_cast<double>(due->size());
    stats_.polls += static_cast<int64_t>(due->size());
    if (due->size() == budget) ++stats_.budget_limited;
  }
  for (const eventlog::WorkItem& item : *due) {
    fetch_(item.account, item.id, [this, item](absl::StatusOr<std::string> body) {
      absl::MutexLock lock(&mu_);
      answers_.push_back(Answer{item, std::move(body)});
    });
  }
  HandleAnswers();  // those that answered at once
  return static_cast<int>(due->size());
}

void Reconciler::HandleAnswers() {
  std::vector<Answer> answers;
  {
    absl::MutexLock lock(&mu_);
    answers.swap(answers_);
  }
  for (Answer& answer : answers) OnReport(answer.item, std::move(answer.body));
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
    event.payload =
        nlohmann::json{{"source", "reconcile"}, {"inspectionId", item.id}, {"report", report}}
            .dump();
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
      ++stats_.recovered;
      return;
    }
    logging::Warn("reconcile: append failed",
                  {{"error", std::string(appended.status().message())}});
  }
  {
    // NOT_FOUND is the vendor's "no report (yet)"; anything else failed.
    const bool not_yet = body.ok() || body.status().code() == absl::StatusCode::kNotFound;
    absl::MutexLock lock(&mu_);
    ++(not_yet ? stats_.not_ready : stats_.errors);
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

Reconciler::Stats Reconciler::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

}  // namespace inspection::reconcile
