// Recovers damage results whose webhook never came (issue 17). Every successful damage
// submission is recorded in the work ledger (durable, shared by the replicas); a
// createReport event resolves it. What is still unresolved `after` its submission is
// polled at the vendor (GET damagesReport), with a doubling interval, within a budget of
// vendor calls per minute, one replica at a time (the ledger's claims). A report that is
// ready becomes an event of the gateway's own in the event log, `damagesReport` with
// payload {"source": "reconcile", "inspectionId": ..., "report": <the vendor's body>},
// which every stream of that inspection then carries like a webhook.
//
// Status: this class and its tests. The gateway does not create one yet: the wiring
// (server, config keys, metrics, StreamDamageResults ending on damagesReport, token
// reconciliation, webhook-less mode) is the next step of issue 17.
#ifndef GATEWAY_RECONCILE_RECONCILER_H_
#define GATEWAY_RECONCILE_RECONCILER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "adapters/eventlog/event_log.h"
#include "adapters/eventlog/work_ledger.h"
#include "nlohmann/json.hpp"

namespace inspection::reconcile {

// The event name of a report recovered by polling (never a vendor webhook's name).
inline constexpr char kDamagesReportEvent[] = "damagesReport";

struct ReconcilerOptions {
  // First poll this long after a submission without a createReport.
  absl::Duration after = absl::Minutes(10);
  // Between two polls of one inspection, doubled after each poll without a report, up to
  // max_interval.
  absl::Duration interval = absl::Minutes(1);
  absl::Duration max_interval = absl::Minutes(10);
  // Vendor calls this replica may make per minute (a token bucket; a burst of at most
  // this many).
  int max_polls_per_minute = 60;
  // How long a claimed inspection is this replica's; a replica that dies mid-poll leaves
  // it to the others after this.
  absl::Duration lease = absl::Seconds(30);
  // Where the spec is silent (what a finished report looks like): the report counts as
  // ready when every RFC 6901 pointer here resolves to a value that is not null, not
  // false, and not an empty string, array or object. Empty: any 2xx answer is ready.
  std::vector<std::string> ready_pointers;
  // This replica's name in the ledger's claims.
  std::string owner = "gateway";
};

// GET damagesReport for one inspection of one vendor account. `done` gets the 2xx body
// (JSON text) or the error (NOT_FOUND: no report yet). May complete on any thread, an
// event loop's included: `done` only queues the answer (no I/O).
using FetchReport =
    std::function<void(const std::string& account, const std::string& inspection_id,
                       absl::AnyInvocable<void(absl::StatusOr<std::string>) &&> done)>;

// Thread-safe. `ledger` and `log` must outlive it, and so must every fetch it started.
class Reconciler {
 public:
  Reconciler(
      ReconcilerOptions options, eventlog::WorkLedger* ledger, eventlog::EventLog* log,
      FetchReport fetch, std::function<absl::Time()> clock = [] { return absl::Now(); });

  // A damage submission succeeded: remember it until its report is known.
  absl::Status Submitted(const std::string& account, const std::string& inspection_id);

  // An event was stored: a createReport (or a damagesReport) resolves its inspection.
  void Observe(const eventlog::NewEvent& event);

  // Handles the answers of earlier polls (appends recovered reports, reschedules the
  // rest), then claims what is due, as far as the budget allows, and starts a poll for
  // each; answers that arrive before it returns are handled too. Returns how many polls it
  // started. Blocking I/O (the ledger, the log): run it on a thread of its own, never on
  // an event loop or the shared timer thread.
  absl::StatusOr<int> RunOnce();

  struct Stats {
    int64_t polls = 0;           // vendor calls made
    int64_t recovered = 0;       // reports appended to the log
    int64_t not_ready = 0;       // polls that found no report yet (NOT_FOUND, or not ready)
    int64_t errors = 0;          // polls that failed otherwise (rescheduled the same way)
    int64_t budget_limited = 0;  // RunOnce passes cut short by the budget
  };
  Stats stats() const;

 private:
  struct Answer {
    eventlog::WorkItem item;
    absl::StatusOr<std::string> body;
  };
  // Handles the queued answers; the caller is RunOnce.
  void HandleAnswers() ABSL_LOCKS_EXCLUDED(mu_);
  void OnReport(const eventlog::WorkItem& item, absl::StatusOr<std::string> body);
  // Whether a parsed 2xx report is finished (ready_pointers).
  bool Ready(const nlohmann::json& report) const;
  absl::Duration NextInterval(int attempts) const;

  const ReconcilerOptions options_;
  eventlog::WorkLedger* const ledger_;
  eventlog::EventLog* const log_;
  const FetchReport fetch_;
  const std::function<absl::Time()> clock_;

  mutable absl::Mutex mu_;
  double tokens_ ABSL_GUARDED_BY(mu_);
  absl::Time refilled_at_ ABSL_GUARDED_BY(mu_);
  Stats stats_ ABSL_GUARDED_BY(mu_);
  std::vector<Answer> answers_ ABSL_GUARDED_BY(mu_);  // from `done`, for HandleAnswers
};

}  // namespace inspection::reconcile

#endif  // GATEWAY_RECONCILE_RECONCILER_H_
