#include "gateway/security/caller_limits_settings.h"

#include <ratio>

namespace inspection::security {

settings::Schema<CallerLimitsOptions> CallerLimitsSchema() {
  return {{
      settings::Integer<CallerLimitsOptions>(
          "grpc.per_caller.requests_per_second",
          [](auto& o) -> auto& { return o.requests_per_second; }, 0, 1000000, "N",
          "Calls one caller (its certificate identity, else its address) may start per second "
          "on this replica; more: RESOURCE_EXHAUSTED with RetryInfo. 0: no limit."),
      settings::Integer<CallerLimitsOptions>(
          "grpc.per_caller.burst", [](auto& o) -> auto& { return o.burst; }, 0, 10000000, "N",
          "Calls a caller may start at once before its rate applies (0: one second's worth)."),
      settings::Integer<CallerLimitsOptions>(
          "grpc.per_caller.max_streams", [](auto& o) -> auto& { return o.max_streams; }, 0,
          10000000, "N",
          "Streams (Subscribe, StreamDamageResults, WatchTokenStatus, Health/Watch, "
          "reflection) one caller may hold open on this replica; more: RESOURCE_EXHAUSTED. 0: "
          "no limit."),
      settings::Integer<CallerLimitsOptions>(
          "grpc.per_caller.max_tracked_callers",
          [](auto& o) -> auto& { return o.max_tracked_callers; }, 1, 100000000, "N",
          "Callers the per-caller limits remember on this replica; past it the least recently "
          "used caller holding no stream is forgotten (it starts again with a full bucket)."),
  }};
}

}  // namespace inspection::security
