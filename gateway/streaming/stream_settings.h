// The settings of the streams: their queues, the hub, the stream slots.

#ifndef GATEWAY_STREAMING_STREAM_SETTINGS_H_
#define GATEWAY_STREAMING_STREAM_SETTINGS_H_

#include "gateway/settings/setting.h"
#include "gateway/streaming/event_hub.h"
#include "gateway/streaming/stream_slots.h"

namespace inspection::streaming {

// The key of the per-connection stream limit, which the server compares with the calls a
// connection may hold (grpc.max_concurrent_streams).
inline constexpr char kMaxPerConnectionKey[] = "streams.max_per_connection";

// Each stream's queue bound.
settings::Schema<StreamQueueLimits> StreamQueueSchema();
// The hub's catch-up pacing.
settings::Schema<EventHub::Options> EventHubSchema();
// How many streams may be open, and what each one's request may hold.
settings::Schema<StreamSlotOptions> StreamSlotSchema();

}  // namespace inspection::streaming

#endif  // GATEWAY_STREAMING_STREAM_SETTINGS_H_
