#include "gateway/reconcile/reconciler_settings.h"

#include <ratio>

namespace inspection::reconcile {

using settings::kDayMs;

namespace {

// The doubling interval starts at reconcile.interval_ms and stops at the maximum: a maximum
// below the start would make every poll wait longer than the maximum says.
absl::Status CheckIntervals(const ReconcilerOptions& o) {
  if (o.max_interval >= o.interval) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "`reconcile.max_interval_ms` (", absl::ToInt64Milliseconds(o.max_interval),
      ") must not be below `reconcile.interval_ms` (", absl::ToInt64Milliseconds(o.interval),
      "): the interval between two polls starts at the one and doubles up to the other"));
}

}  // namespace

settings::Schema<ReconcilerOptions> ReconcilerSchema() {
  settings::Schema<ReconcilerOptions> schema{{
      settings::Duration<std::milli, ReconcilerOptions>(
          "reconcile.after_ms", [](auto& o) -> auto& { return o.after; }, 1, 30 * kDayMs, "MS",
          "A submitted inspection without createReport this long is polled (damages report). "
          "In webhook-less mode the first poll is reconcile.interval_ms after the submission."),
      settings::Duration<std::milli, ReconcilerOptions>(
          "reconcile.interval_ms", [](auto& o) -> auto& { return o.interval; }, 1, kDayMs, "MS",
          "Between two polls of one inspection or token; doubles after each poll without a "
          "result ..."),
      settings::Duration<std::milli, ReconcilerOptions>(
          "reconcile.max_interval_ms", [](auto& o) -> auto& { return o.max_interval; }, 1, kDayMs,
          "MS", "... up to this (not below reconcile.interval_ms)."),
      settings::Integer<ReconcilerOptions>(
          "reconcile.max_polls_per_minute", [](auto& o) -> auto& { return o.max_polls_per_minute; },
          1, 1000000, "N",
          "Vendor calls one replica's reconciler may make per minute (a burst of at most this "
          "many); what is due beyond it waits (inspection_reconcile_overdue_items)."),
      settings::Integer<ReconcilerOptions>(
          "reconcile.max_polls_per_item", [](auto& o) -> auto& { return o.max_polls_per_item; }, 1,
          1000000, "N",
          "Polls of one inspection or token without a result, at most; then it is given up "
          "(logged, inspection_reconcile_given_up_total). The default covers about 3 days with "
          "the default intervals; items polled fewer times are polled first."),
      settings::Duration<std::milli, ReconcilerOptions>(
          kLeaseKey, [](auto& o) -> auto& { return o.lease; }, 100, kDayMs, "MS",
          "How long an item being polled is one replica's; a replica that dies mid-poll leaves "
          "it to the others after this. Must be longer than a poll's vendor call may take (10 "
          "s, the damages report route's deadline)."),
      settings::Duration<std::ratio<3600>, ReconcilerOptions>(
          "reconcile.max_age_hours", [](auto& o) -> auto& { return o.max_age; }, 1, 24 * 366,
          "HOURS",
          "Inspections and tokens recorded longer ago are forgotten (a token never completed, a "
          "report that never came)."),
      settings::StringList<ReconcilerOptions>(
          "reconcile.ready_pointers", [](auto& o) -> auto& { return o.ready_pointers; },
          settings::JsonPointerItem, "POINTER,...",
          "RFC 6901 pointers into the damages report that must all hold a value (not null, "
          "false or empty) for the report to count as finished (the spec does not show a "
          "finished report). Default none: any 2xx answer is finished; 404 is not.",
          /*may_be_empty=*/true),
      settings::Integer<ReconcilerOptions>(
          "reconcile.max_unrecorded", [](auto& o) -> auto& { return o.max_unrecorded; }, 1,
          10000000, "N",
          "Submissions, created tokens and createReport resolutions waiting in memory to be "
          "written to the work ledger (queued, or refused by the ledger and retried with "
          "backoff), at most: about 150 bytes each. Beyond it more are refused, counted "
          "(inspection_reconcile_unrecorded_dropped_total) and logged; "
          "inspection_reconcile_unrecorded_items shows how many wait."),
      settings::Duration<std::milli, ReconcilerOptions>(
          "reconcile.scan_interval_ms", [](auto& o) -> auto& { return o.scan_interval; }, 10,
          kDayMs, "MS",
          "The reconciler looks for due items at least this often (new work wakes it sooner)."),
  }};
  schema.rules.push_back(CheckIntervals);
  return schema;
}

}  // namespace inspection::reconcile
