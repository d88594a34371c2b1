#include "gateway/pipeline/pipeline_settings.h"

#include <optional>
#include <ratio>
#include <string>
#include <utility>

namespace inspection::pipeline {

using settings::kDayMs;

namespace {

// An optional duration counted in milliseconds: 0 in the file is "none of its own" (each
// route's cache_ttl_ms annotation decides).
settings::Setting<CachingOptions> ImageAnalysisTtl(std::int64_t min, std::int64_t max,
                                                   std::string placeholder, std::string help) {
  settings::Setting<CachingOptions> s =
      settings::Key<CachingOptions>("cache.image_analysis_ttl_ms", settings::ValueKind::kInteger,
                                    std::move(placeholder), std::move(help));
  s.store = [min, max](const settings::json& value, CachingOptions& o) -> absl::Status {
    absl::StatusOr<std::int64_t> ms = settings::internal::IntegerIn(value, min, max);
    if (!ms.ok()) return ms.status();
    o.image_analysis_ttl = *ms == 0 ? std::nullopt : std::optional(absl::Milliseconds(*ms));
    return absl::OkStatus();
  };
  s.show = [](const CachingOptions& o) {
    return settings::ordered_json(
        absl::ToInt64Milliseconds(o.image_analysis_ttl.value_or(absl::ZeroDuration())));
  };
  return s;
}

}  // namespace

settings::Schema<RetryOptions> RetrySchema() {
  settings::Schema<RetryOptions> schema;
  schema.keys = {
      settings::Duration<std::milli, RetryOptions>(
          "retry.base_ms", [](auto& o) -> auto& { return o.backoff.base; }, 1, 60000, "MS",
          "Backoff before the first retry is uniform in [0, base]; each retry doubles it."),
      settings::Duration<std::milli, RetryOptions>(
          "retry.cap_ms", [](auto& o) -> auto& { return o.backoff.cap; }, 1, 600000, "MS",
          "Largest backoff ceiling."),
      settings::Integer<RetryOptions>(
          "retry.max_attempts", [](auto& o) -> auto& { return o.backoff.max_attempts; }, 1, 10, "N",
          "Attempts per vendor call, the first included (1: never retry). Only safe and "
          "idempotent routes are retried."),
      settings::Duration<std::milli, RetryOptions>(
          "retry.min_attempt_ms", [](auto& o) -> auto& { return o.min_attempt_time; }, 1, 60000,
          "MS", "No retry starts with less than this left before the caller's deadline."),
  };
  schema.rules.push_back([](const RetryOptions& o) {
    return o.backoff.cap < o.backoff.base
               ? absl::InvalidArgumentError("`retry.cap_ms` must be >= `retry.base_ms`")
               : absl::OkStatus();
  });
  return schema;
}

settings::Schema<CachingOptions> CachingSchema() {
  return {{
      settings::Bool<CachingOptions>(
          "cache.enabled", [](auto& o) -> auto& { return o.enabled; },
          "Cache vendor answers of cacheable routes (TTLs in the route table) and coalesce "
          "identical concurrent calls."),
      settings::Integer<CachingOptions>(
          "cache.max_bytes", [](auto& o) -> auto& { return o.max_bytes; }, 1024, int64_t{1} << 40,
          "BYTES",
          "Memory the cache may hold (each answer's text and its parsed JSON); least recently "
          "used go first."),
      settings::Duration<std::milli, CachingOptions>(
          "cache.stale_if_error_ms", [](auto& o) -> auto& { return o.stale_if_error; }, 0, kDayMs,
          "MS",
          "How long past its TTL an answer may be served when the vendor fails (flagged "
          "x-cache: stale); 0: never."),
      settings::Bool<CachingOptions>(
          "cache.image_analysis", [](auto& o) -> auto& { return o.image_analysis; },
          "Cache image analysis (quality, segmentation, background removal) by URL and "
          "parameters."),
      ImageAnalysisTtl(
          0, kDayMs * 30, "MS",
          "How long an image analysis answer is cached; 0: each RPC's own TTL, the cache_ttl_ms "
          "of its vendor_route annotation (600000 for every image-analysis RPC today)."),
  }};
}

}  // namespace inspection::pipeline
