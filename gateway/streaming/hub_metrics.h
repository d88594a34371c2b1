#ifndef GATEWAY_STREAMING_HUB_METRICS_H_
#define GATEWAY_STREAMING_HUB_METRICS_H_

// The event hub's series (docs/design.md §7): fan-out lag, streams still catching up, and
// subscribers the hub ended and why. Created once from the registry's scope, every series
// up front; the hub updates them where things happen. Thread-safe.

#include <array>
#include <chrono>
#include <cstddef>
#include <string_view>

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>

#include "gateway/metrics/metrics_scope.h"

namespace inspection::streaming {

// `reason` a streaming subscriber was ended by the gateway (not by the client).
enum class StreamDropReason {
  kSlowConsumer,   // its bounded queue was full (RESOURCE_EXHAUSTED)
  kCursorExpired,  // resume cursor older than retention (OUT_OF_RANGE)
  kShutdown,       // graceful shutdown (UNAVAILABLE + resumable cursor)
  kError,          // event log read failure or anything else
  kIdleCatchUp,    // catching up, its queue stayed full for its idle timeout
};
inline constexpr size_t kNumStreamDropReasons = 5;
std::string_view StreamDropReasonLabel(StreamDropReason reason);

class HubMetrics {
 public:
  // Registers the families (prometheus-cpp throws on a clash, only at start-up).
  explicit HubMetrics(const metrics::MetricsScope& scope);

  // inspection_stream_fanout_lag_seconds: from an event's append to the log to its hand-off
  // to a subscriber's queue.
  void RecordFanoutLag(std::chrono::nanoseconds lag) const;
  // inspection_stream_catching_up_subscribers: streams still reading the log from a cursor
  // (after_cursor, from_start) before they join the live dispatch.
  void SetCatchingUpSubscribers(size_t count) const;
  // inspection_stream_dropped_subscribers_total{reason}.
  void RecordDroppedSubscriber(StreamDropReason reason) const;

 private:
  prometheus::Histogram* fanout_lag_;
  prometheus::Gauge* catching_up_;
  std::array<prometheus::Counter*, kNumStreamDropReasons> dropped_{};
};

}  // namespace inspection::streaming

#endif  // GATEWAY_STREAMING_HUB_METRICS_H_
