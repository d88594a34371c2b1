// Recovers damage results whose webhook never came (issue 17). Every successful damage
// submission and every created token is recorded in the work ledger (durable, shared by
// the replicas); a createReport event resolves an inspection. What is still unresolved
// `after` its submission is polled at the vendor (GET damagesReport), with a doubling
// interval, within a budget of vendor calls per minute, one replica at a time (the
// ledger's claims). A report that is ready becomes an event of the gateway's own in the
// event log, `damagesReport` with payload
//   {"source": "reconcile", "cause": "missed_webhook" | "webhook_less",
//    "inspectionId": ..., "report": <the vendor's body>}
// which every stream of that inspection then carries like a webhook. A token is polled
// (GET token status) until it is completed (tradeinStatus 5) or expired; a completed
// token's inspection is then reconciled like a submission.
//
// In webhook-less mode (webhooks.mode=poll) polling is the only source: the first poll of
// an inspection is `interval` after its submission, and of a completed token's
// inspection at once.
//
// New work first (issue 31): the ledger hands out the items polled fewest times first, so
// items that never finish (polled every max_interval) cannot hold the budget against a
// new submission; and an item is polled max_polls_per_item times at most.
//
// What the RPCs and the hub hand over (Queue*) reaches the ledger through a queue in memory:
// written in order by the reconciler's thread, kept and retried with backoff while the
// ledger refuses writes, bounded by max_unrecorded, lost if the process dies before it is
// written (issue 33; README "What a restart forgets").
#ifndef GATEWAY_RECONCILE_RECONCILER_H_
#define GATEWAY_RECONCILE_RECONCILER_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "adapters/eventlog/event_log.h"
#include "adapters/eventlog/work_ledger.h"
#include "gateway/reconcile/reconcile_metrics.h"
#include "nlohmann/json.hpp"

namespace inspection::reconcile {

// The event name of a report recovered by polling (never a vendor webhook's name).
inline constexpr const char* kDamagesReportEvent = eventlog::kDamagesReportEventName;

// Queue* calls refused at ReconcilerOptions::max_unrecorded are logged at most this often
// (one line with how many since the last one); the counter counts every one.
inline constexpr absl::Duration kDroppedLogInterval = absl::Seconds(10);

struct ReconcilerOptions {
  // First poll this long after a submission without a createReport (webhook mode).
  absl::Duration after = absl::Minutes(10);
  // Between two polls of one item, doubled after each poll without a result, up to
  // max_interval. In webhook-less mode also the delay of an inspection's first poll.
  absl::Duration interval = absl::Minutes(1);
  absl::Duration max_interval = absl::Minutes(10);
  // Vendor calls this replica may make per minute (a token bucket; a burst of at most
  // this many).
  int max_polls_per_minute = 60;
  // How long a claimed item is this replica's; a replica that dies mid-poll leaves it to
  // the others after this.
  absl::Duration lease = absl::Seconds(30);
  // Items (resolved or not) older than this are forgotten: an inspection whose report
  // never came, a token never completed.
  absl::Duration max_age = absl::Hours(24 * 7);
  // Polls of one item without a result, at most; after the last one the item is given up
  // (Stats::given_up, one log line). Items that never finish would otherwise be polled
  // every max_interval until max_age (about 1,000 polls each with the defaults). 450 polls
  // cover about 3 days with the default intervals (10 min, then 1, 2, 4, 8 and every 10
  // min): a report held up over a long weekend's vendor incident, a customer finishing a
  // token's inspection within three days. Polls that failed count too.
  int max_polls_per_item = 450;
  // Where the spec is silent (what a finished report looks like): the report counts as
  // ready when every RFC 6901 pointer here resolves to a value that is not null, not
  // false, and not an empty string, array or object. Empty: any 2xx answer is ready.
  std::vector<std::string> ready_pointers;
  // Webhook-less mode: polling is the only source of results.
  bool webhook_less = false;
  // The background thread's longest sleep between two passes (Start); queued work and
  // answers wake it earlier.
  absl::Duration scan_interval = absl::Seconds(5);
  // This replica's name in the ledger's claims.
  std::string owner = "gateway";
  // Queued work (Queue*) not written to the ledger yet, at most: what waits for its first
  // write and what the ledger refused and waits for a retry. A stuck ledger must not grow
  // the queue without bound: at the bound a Queue* call is refused, counted
  // (Stats::unrecorded_dropped, inspection_reconcile_unrecorded_dropped_total) and logged
  // (at most once per kDroppedLogInterval). About 150 bytes an item.
  size_t max_unrecorded = 100000;
  // A queued write the ledger refused is retried, with what was queued after it, this long
  // later; the wait doubles after each further failure, up to ledger_retry_max.
  absl::Duration ledger_retry_initial = absl::Milliseconds(100);
  absl::Duration ledger_retry_max = absl::Seconds(5);
  // Stop writes what is still queued (a graceful shutdown), for at most this long, unless
  // the ledger's last write failed; what is left is logged and lost with the process.
  absl::Duration stop_flush_timeout = absl::Seconds(1);
  // Where the Prometheus series are updated (reconcile_metrics.h); null: none. Must
  // outlive the reconciler.
  const ReconcileMetrics* metrics = nullptr;
};

// GET damagesReport for one inspection of one vendor account. `done` gets the 2xx body
// (JSON text) or the error (NOT_FOUND: no report yet). May complete on any thread, an
// event loop's included: `done` only queues the answer (no I/O).
using FetchReport =
    std::function<void(const std::string& account, const std::string& inspection_id,
                       absl::AnyInvocable<void(absl::StatusOr<std::string>) &&> done)>;

// What a token's status says about its inspection.
struct TokenState {
  bool completed = false;     // tradeinStatus 5: the inspection is complete, a report exists
  bool expired = false;       // the token expired: no inspection will come
  std::string inspection_id;  // inspectionPtr.id, once there is one
};
// GET token status for one token uid of one vendor account; like FetchReport.
using FetchToken =
    std::function<void(const std::string& account, const std::string& uid,
                       absl::AnyInvocable<void(absl::StatusOr<TokenState>) &&> done)>;

// Thread-safe. `ledger` and `log` must outlive it; a fetch may complete after it is gone.
// `clock` is called on the Queue* callers' threads too.
class Reconciler {
 public:
  Reconciler(
      ReconcilerOptions options, eventlog::WorkLedger* ledger, eventlog::EventLog* log,
      FetchReport fetch_report, FetchToken fetch_token,
      std::function<absl::Time()> clock = [] { return absl::Now(); });
  ~Reconciler();

  // A damage submission succeeded / a token was created: remember it until its result is
  // known. Writes the ledger (blocking I/O).
  absl::Status Submitted(const std::string& account, const std::string& inspection_id);
  absl::Status TokenCreated(const std::string& account, const std::string& uid);
  // An event was stored: a createReport (or a damagesReport) resolves its inspection.
  // Writes the ledger.
  void Observe(const eventlog::NewEvent& event);

  // The same, queued for the next pass (no I/O, never blocks): for callers on an event
  // loop (a vendor call's completion, the hub's thread). Written in the order queued. A
  // write the ledger refuses stays queued, with everything after it, and is retried with
  // a doubling wait (ledger_retry_initial up to ledger_retry_max); until then it is in
  // memory only (Stats::unrecorded, inspection_reconcile_unrecorded_items) and lost if the
  // process dies. At most options.max_unrecorded wait; beyond that a call is refused,
  // counted (Stats::unrecorded_dropped) and logged.
  void QueueSubmitted(const std::string& account, const std::string& inspection_id);
  void QueueTokenCreated(const std::string& account, const std::string& uid);
  void QueueObserved(const eventlog::NewEvent& event);

  // Applies what was queued, handles the answers of earlier polls (appends recovered
  // reports, reschedules the rest), forgets items older than max_age (once a minute),
  // claims what is due, as far as the budget allows, and starts a poll for each; answers
  // that arrive before it returns are handled too. Returns how many polls it started.
  // Blocking I/O (the ledger, the log): run it on a thread of its own (Start), never on
  // an event loop or the shared timer thread.
  absl::StatusOr<int> RunOnce();

  // Runs RunOnce on a thread of its own: at least every scan_interval, at once when work
  // is queued or an answer arrives, and when a refused write is due for its retry. Stop
  // (also the destructor) joins it, then writes what is queued (stop_flush_timeout at
  // most, nothing when the ledger's last write failed) and logs what is left unrecorded
  // (lost with the process). Work queued after Stop is written by the next Stop.
  void Start();
  void Stop();

  struct Stats {
    int64_t polls = 0;               // vendor calls made for reports
    int64_t token_polls = 0;         // vendor calls made for token status
    int64_t recovered = 0;           // reports appended to the log
    int64_t not_ready = 0;           // polls that found no report yet (NOT_FOUND, not ready)
    int64_t errors = 0;              // polls that failed otherwise (rescheduled the same way)
    int64_t tokens_completed = 0;    // tokens found completed (their inspection is recorded)
    int64_t tokens_expired = 0;      // tokens found expired (forgotten)
    int64_t budget_limited = 0;      // RunOnce passes cut short by the budget
    int64_t ledger_errors = 0;       // ledger or log operations that failed (each retry too)
    int64_t overdue = 0;             // unresolved items due now (after the last pass)
    int64_t given_up = 0;            // items forgotten after max_polls_per_item polls
    int64_t unrecorded = 0;          // queued work not written to the ledger yet (now)
    int64_t unrecorded_dropped = 0;  // Queue* calls refused: max_unrecorded were waiting
  };
  Stats stats() const;

 private:
  struct Answer {
    eventlog::WorkItem item;
    absl::StatusOr<std::string> body;  // kInspection
    absl::StatusOr<TokenState> token;  // kToken
  };
  struct Queued {
    enum { kSubmitted, kTokenCreated, kObserved } what;
    std::string account;
    std::string id;
    absl::Time at;  // when it was queued: the item's start, however late it is written
  };
  // Queues `queued` unless options.max_unrecorded wait already (then counts it dropped).
  void Enqueue(Queued queued);
  // Adds `n` to stats_.*field and to its Prometheus series, if it has one.
  void Count(int64_t Stats::*field, int64_t n = 1) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SetOverdue(int64_t items) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Takes what was queued and writes it in order, unless a refused write waits for its
  // retry; stops at the first write the ledger refuses (kept, retried after a backoff).
  void ApplyQueued() ABSL_LOCKS_EXCLUDED(mu_, apply_mu_);
  // Moves the inbox's new work behind the unwritten one.
  void TakeQueued() ABSL_EXCLUSIVE_LOCKS_REQUIRED(apply_mu_);
  // Writes the unwritten work in order until it is done, a write fails, or `deadline`.
  void WriteQueued(absl::Time deadline) ABSL_EXCLUSIVE_LOCKS_REQUIRED(apply_mu_);
  absl::Status Write(const Queued& queued);
  void OnWriteFailed(const absl::Status& status, const Queued& queued)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(apply_mu_);
  // Logs the Queue* calls refused since the last such line: at most once per
  // kDroppedLogInterval, unless `even_if_recent` (Stop).
  void LogDropped(bool even_if_recent) ABSL_EXCLUSIVE_LOCKS_REQUIRED(apply_mu_);
  // The longest the thread may wait before the next pass: scan_interval, or less when a
  // refused write is due for its retry sooner.
  absl::Duration NextWait() ABSL_LOCKS_EXCLUDED(apply_mu_);
  // Logs and counts (stats_.ledger_errors) a ledger write for `id` that failed; OK: nothing.
  void CountLedgerFailure(const absl::Status& status, const std::string& id)
      ABSL_LOCKS_EXCLUDED(mu_);
  void HandleAnswers() ABSL_LOCKS_EXCLUDED(mu_);
  void OnReport(const eventlog::WorkItem& item, absl::StatusOr<std::string> body);
  void OnToken(const eventlog::WorkItem& item, absl::StatusOr<TokenState> state);
  void Retry(const eventlog::WorkItem& item);
  // max_polls_per_item reached: never claimed again (resolved in the ledger), counted and
  // logged once.
  void GiveUp(const eventlog::WorkItem& item, int polls);
  // Records an item started at `started`, first due `first_poll_in` after that.
  absl::Status Record(eventlog::WorkKind kind, const std::string& account, const std::string& id,
                      absl::Time started, absl::Duration first_poll_in);
  // Whether a parsed 2xx report is finished (ready_pointers).
  bool Ready(const nlohmann::json& report) const;
  absl::Duration NextInterval(int attempts) const;
  void Loop();

  const ReconcilerOptions options_;
  eventlog::WorkLedger* const ledger_;
  eventlog::EventLog* const log_;
  const FetchReport fetch_report_;
  const FetchToken fetch_token_;
  const std::function<absl::Time()> clock_;

  // What other threads hand to the passes. Shared with every fetch's `done`, so an answer
  // that comes after the reconciler is gone lands here harmlessly.
  struct Inbox {
    absl::Mutex mu;
    std::vector<Answer> answers ABSL_GUARDED_BY(mu);  // from `done`, for HandleAnswers
    std::vector<Queued> queued ABSL_GUARDED_BY(mu);   // new work, not taken by a pass yet
    // Queued work not written yet: `queued` and Reconciler::unwritten_ together (the bound
    // of max_unrecorded; the gauge).
    int64_t unrecorded ABSL_GUARDED_BY(mu) = 0;
    bool wake ABSL_GUARDED_BY(mu) = false;
    bool stopping ABSL_GUARDED_BY(mu) = false;
    // A refused write waits for its retry: new work does not wake the thread (the retry
    // writes it), so a ledger outage does not turn each Queue* call into a pass.
    bool backing_off ABSL_GUARDED_BY(mu) = false;
    // Queue* calls refused because max_unrecorded were waiting: a refused submission then
    // depends on its webhook alone; a refused createReport costs one more poll.
    int64_t dropped ABSL_GUARDED_BY(mu) = 0;
  };
  const std::shared_ptr<Inbox> inbox_ = std::make_shared<Inbox>();

  // The queued work a pass took and has not written yet, in the order queued: its front
  // is the write the ledger refused last, if any. One writer at a time (a pass or Stop).
  absl::Mutex apply_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  std::deque<Queued> unwritten_ ABSL_GUARDED_BY(apply_mu_);
  int write_failures_ ABSL_GUARDED_BY(apply_mu_) = 0;  // in a row
  absl::Time retry_at_ ABSL_GUARDED_BY(apply_mu_) = absl::InfinitePast();
  int64_t dropped_logged_ ABSL_GUARDED_BY(apply_mu_) = 0;  // Inbox::dropped at the last line
  absl::Time dropped_logged_at_ ABSL_GUARDED_BY(apply_mu_) = absl::InfinitePast();

  mutable absl::Mutex mu_;
  double tokens_ ABSL_GUARDED_BY(mu_);
  absl::Time refilled_at_ ABSL_GUARDED_BY(mu_);
  absl::Time trimmed_at_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  Stats stats_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;  // Start; touched by Start and Stop only
};

}  // namespace inspection::reconcile

#endif  // GATEWAY_RECONCILE_RECONCILER_H_
