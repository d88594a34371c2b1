#ifndef GATEWAY_TRACING_OTLP_EXPORTER_H_
#define GATEWAY_TRACING_OTLP_EXPORTER_H_

// Exports spans over OTLP/HTTP in its JSON encoding
// (https://opentelemetry.io/docs/specs/otlp/#json-protobuf-encoding): POST
// `ExportTraceServiceRequest` JSON to the collector's traces URL (tracing.otlp_endpoint,
// e.g. http://otel-collector:4318/v1/traces).
//
// opentelemetry-cpp is not packaged for Debian bookworm, so the JSON is written here with
// nlohmann::json; tests/e2e parses it with the official opentelemetry-proto package.
//
// Record() never blocks: a span goes into a bounded queue (tracing.max_queued_spans) or,
// when the queue is full, is dropped and counted. One thread of the exporter's own sends a
// batch (at most tracing.max_batch_spans) when the batch is full or every
// tracing.export_interval_ms, and waits for the answer at most tracing.export_timeout_ms. A
// batch the collector refuses or does not answer is dropped and counted: no retry, so a
// collector outage costs spans, never gateway memory or latency.

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "adapters/http/http_transport.h"
#include "gateway/metrics/metrics_scope.h"
#include "gateway/tracing/span.h"

namespace inspection::tracing {

// The exporter's Prometheus series (inspection_trace_*), created from a scope and updated
// where spans are exported or dropped (docs/design.md §7).
struct OtlpExporterMetrics {
  // Registers the families, every series at zero.
  static OtlpExporterMetrics Create(const metrics::MetricsScope& scope);

  prometheus::Counter* exported = nullptr;
  prometheus::Counter* dropped_queue_full = nullptr;
  prometheus::Counter* dropped_export_failed = nullptr;
  prometheus::Counter* export_failures = nullptr;
};

struct OtlpExporterOptions {
  // The collector's OTLP/HTTP traces URL (http or https); "" turns tracing export off.
  std::string endpoint;
  size_t max_queued_spans = 2048;
  size_t max_batch_spans = 512;
  std::chrono::milliseconds export_interval{1000};
  std::chrono::milliseconds export_timeout{5000};
  // Resource attributes service.name and service.version.
  std::string service_name = "inspection-gateway";
  std::string service_version;
  // Where the Prometheus series are updated; null: none. Must outlive the exporter.
  const OtlpExporterMetrics* metrics = nullptr;
};

// The ExportTraceServiceRequest JSON of `spans` (one resource, one scope). Ids are hex
// strings, 64-bit times decimal strings and enums integers, as OTLP/JSON requires.
std::string EncodeOtlpJson(const std::vector<Span>& spans, const OtlpExporterOptions& resource);

class OtlpExporter final : public SpanSink {
 public:
  static constexpr std::chrono::milliseconds kLastBatchTimeout{1000};
  struct Stats {
    uint64_t exported = 0;               // spans the collector accepted (2xx)
    uint64_t dropped_queue_full = 0;     // spans dropped because the queue was full
    uint64_t dropped_export_failed = 0;  // spans in batches the collector refused or lost
    uint64_t export_requests_failed = 0;
  };

  // InvalidArgument for an endpoint that is not an absolute http(s) URL or bounds of 0.
  // `transport` must outlive the exporter (Stop() it first).
  static absl::StatusOr<std::unique_ptr<OtlpExporter>> Create(OtlpExporterOptions options,
                                                              http::HttpTransport* transport);
  ~OtlpExporter() override;

  void Record(Span span) override;
  Stats stats() const;
  // Sends what is queued (one last batch, within export_timeout but at most
  // kLastBatchTimeout, so a silent collector cannot hold up a shutdown) and stops the thread.
  // Idempotent; later Record() calls drop and count their spans.
  void Stop();

 private:
  OtlpExporter(OtlpExporterOptions options, http::HttpTransport* transport);
  void Run();
  // `last`: the batch Stop() sends, within at most kLastBatchTimeout.
  void SendBatch(std::vector<Span> batch, bool last);

  const OtlpExporterOptions options_;
  http::HttpTransport* const transport_;
  mutable absl::Mutex mu_;
  std::deque<Span> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  Stats stats_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace inspection::tracing

#endif  // GATEWAY_TRACING_OTLP_EXPORTER_H_
