#include "gateway/streaming/stream_settings.h"

#include <ratio>

namespace inspection::streaming {

using settings::kDayMs;

settings::Schema<StreamQueueLimits> StreamQueueSchema() {
  return {{
      settings::Integer<StreamQueueLimits>(
          "streams.queue_size", [](auto& o) -> auto& { return o.max_events; }, 1, 1000000, "N",
          "Events buffered per Subscribe or StreamDamageResults stream; a live subscriber "
          "further behind is ended with RESOURCE_EXHAUSTED and its last cursor."),
      settings::Integer<StreamQueueLimits>(
          "streams.queue_max_bytes", [](auto& o) -> auto& { return o.max_bytes; }, 1024,
          int64_t{1} << 40, "BYTES",
          "Bytes (wire size) of the events waiting for one stream behind the one being written "
          "(a larger event is still sent); past it, as past queue_size. Worst case for all "
          "streams: max_total times this."),
  }};
}

settings::Schema<EventHub::Options> EventHubSchema() {
  return {{
      settings::Integer<EventHub::Options>(
          "streams.catchup_events_per_turn",
          [](auto& o) -> auto& { return o.catchup_events_per_turn; }, 1, 100000, "N",
          "Stored events one catching-up subscriber (after_cursor, from_start) may scan before "
          "live events are dispatched again: a long catch-up never holds up live streams."),
      settings::Duration<std::milli, EventHub::Options>(
          "streams.catchup_idle_timeout_ms",
          [](auto& o) -> auto& { return o.catchup_idle_timeout; }, 1, kDayMs, "MS",
          "A catching-up subscriber whose buffer stays full this long (it does not read) is "
          "ended with RESOURCE_EXHAUSTED and its last cursor."),
  }};
}

settings::Schema<StreamSlotOptions> StreamSlotSchema() {
  return {{
      settings::Integer<StreamSlotOptions>(
          kMaxPerConnectionKey, [](auto& o) -> auto& { return o.max_per_connection; }, 0, 1000000,
          "N",
          "Server streams one client connection may hold open; more: RESOURCE_EXHAUSTED "
          "(CONNECTION_STREAM_LIMIT). Keep it below grpc.max_concurrent_streams so unary "
          "calls on that connection still go through (a start-up warning otherwise). 0: no "
          "limit."),
      settings::Integer<StreamSlotOptions>(
          "streams.max_total", [](auto& o) -> auto& { return o.max_total; }, 0, 10000000, "N",
          "Server streams this replica holds open; more: RESOURCE_EXHAUSTED (STREAM_LIMIT). 0: "
          "no limit."),
      settings::Integer<StreamSlotOptions>(
          "streams.max_request_bytes", [](auto& o) -> auto& { return o.max_request_bytes; }, 256,
          16 << 20, "BYTES",
          "What the request of a server stream may hold in memory while the stream is open "
          "(Subscribe, WatchTokenStatus, Health/Watch; StreamDamageResults not counting its "
          "URLs, which validation.max_urls bounds): as parsed, unknown fields and groups "
          "included, and for Subscribe with its filter's event names; more: INVALID_ARGUMENT."),
  }};
}

}  // namespace inspection::streaming
