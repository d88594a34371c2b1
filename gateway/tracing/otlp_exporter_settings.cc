#include "gateway/tracing/otlp_exporter_settings.h"

#include <ratio>

namespace inspection::tracing {

using settings::kDayMs;

settings::Schema<OtlpExporterOptions> OtlpExporterSchema() {
  return {{
      settings::String<OtlpExporterOptions>(
          "tracing.otlp_endpoint", [](auto& o) -> auto& { return o.endpoint; },
          settings::OptionalBaseUrl, "URL",
          "OTLP/HTTP traces URL of a collector (e.g. http://otel-collector:4318/v1/traces): "
          "each RPC's span and each vendor attempt's span are sent there as OTLP JSON. Empty "
          "(default): no export; trace context is propagated and logged either way."),
      settings::Integer<OtlpExporterOptions>(
          "tracing.max_queued_spans", [](auto& o) -> auto& { return o.max_queued_spans; }, 1,
          10000000, "N",
          "Spans waiting for export at most; more are dropped and counted "
          "(inspection_trace_spans_dropped_total{reason=\"queue_full\"})."),
      settings::Integer<OtlpExporterOptions>(
          "tracing.max_batch_spans", [](auto& o) -> auto& { return o.max_batch_spans; }, 1, 100000,
          "N", "Spans per export request at most."),
      settings::Duration<std::milli, OtlpExporterOptions>(
          "tracing.export_interval_ms", [](auto& o) -> auto& { return o.export_interval; }, 10,
          kDayMs, "MS", "A batch is sent when full or this long after the last one."),
      settings::Duration<std::milli, OtlpExporterOptions>(
          "tracing.export_timeout_ms", [](auto& o) -> auto& { return o.export_timeout; }, 100,
          kDayMs, "MS",
          "An export request not answered within this fails; its spans are dropped and counted "
          "(no retry: a collector outage costs spans, never gateway memory)."),
  }};
}

}  // namespace inspection::tracing
