#include "gateway/streaming/hub_metrics.h"

#include <string>

namespace inspection::streaming {
namespace {

constexpr std::array<std::string_view, kNumStreamDropReasons> kStreamDropReasonLabels = {
    "slow_consumer", "cursor_expired", "shutdown", "error", "idle_catch_up"};

// Fan-out lag (seconds): local dispatch is sub-millisecond; a shared Redis log adds a poll
// interval; anything past 10 s is an incident.
const prometheus::Histogram::BucketBoundaries& LagBuckets() {
  static const auto* const kBuckets = new prometheus::Histogram::BucketBoundaries{
      0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
  return *kBuckets;
}

}  // namespace

std::string_view StreamDropReasonLabel(StreamDropReason reason) {
  return metrics::BoundedAt(kStreamDropReasonLabels, static_cast<size_t>(reason));
}

HubMetrics::HubMetrics(const metrics::MetricsScope& scope)
    : fanout_lag_(&scope
                       .HistogramFamily("inspection_stream_fanout_lag_seconds",
                                        "Time from an event's append to the log to its hand-off "
                                        "to a subscriber.")
                       .Add({}, LagBuckets())),
      catching_up_(&scope.Gauge("inspection_stream_catching_up_subscribers",
                                "Streams still reading the event log from a cursor "
                                "(after_cursor, from_start) before joining the live dispatch.")) {
  auto& dropped = scope.CounterFamily("inspection_stream_dropped_subscribers_total",
                                      "Subscribers ended by the gateway, by reason.");
  for (size_t r = 0; r < kNumStreamDropReasons; ++r) {
    dropped_[r] = &dropped.Add({{"reason", std::string(kStreamDropReasonLabels[r])}});
  }
}

void HubMetrics::RecordFanoutLag(std::chrono::nanoseconds lag) const {
  fanout_lag_->Observe(metrics::Seconds(lag));
}

void HubMetrics::SetCatchingUpSubscribers(size_t count) const {
  catching_up_->Set(static_cast<double>(count));
}

void HubMetrics::RecordDroppedSubscriber(StreamDropReason reason) const {
  metrics::BoundedAt(dropped_, static_cast<size_t>(reason))->Increment();
}

}  // namespace inspection::streaming
