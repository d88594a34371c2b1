#include "gateway/tracing/otlp_exporter.h"

#include <algorithm>
#include <future>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace inspection::tracing {
namespace {

using nlohmann::json;

json AttributeJson(const std::string& key, const AttributeValue& value) {
  json any;
  if (const auto* s = std::get_if<std::string>(&value)) {
    any["stringValue"] = *s;
  } else if (const auto* i = std::get_if<int64_t>(&value)) {
    any["intValue"] = std::to_string(*i);  // int64 is a decimal string in OTLP/JSON
  } else if (const auto* b = std::get_if<bool>(&value)) {
    any["boolValue"] = *b;
  } else {
    any["doubleValue"] = std::get<double>(value);
  }
  return json{{"key", key}, {"value", std::move(any)}};
}

json SpanJson(const Span& span) {
  json out = {
      {"traceId", Hex(span.trace_id)},
      {"spanId", Hex(span.span_id)},
      {"name", span.name},
      {"kind", static_cast<int>(span.kind)},
      {"startTimeUnixNano", std::to_string(span.start_unix_nano)},
      {"endTimeUnixNano", std::to_string(span.end_unix_nano)},
  };
  if (!IsZero(span.parent_span_id)) out["parentSpanId"] = Hex(span.parent_span_id);
  if (!span.tracestate.empty()) out["traceState"] = span.tracestate;
  json attributes = json::array();
  for (const auto& [key, value] : span.attributes) attributes.push_back(AttributeJson(key, value));
  out["attributes"] = std::move(attributes);
  json status = {{"code", static_cast<int>(span.status)}};
  if (!span.status_message.empty()) status["message"] = span.status_message;
  out["status"] = std::move(status);
  return out;
}

}  // namespace

std::string EncodeOtlpJson(const std::vector<Span>& spans, const OtlpExporterOptions& resource) {
  json span_list = json::array();
  for (const Span& span : spans) span_list.push_back(SpanJson(span));
  json resource_attributes = json::array();
  resource_attributes.push_back(AttributeJson("service.name", resource.service_name));
  if (!resource.service_version.empty()) {
    resource_attributes.push_back(AttributeJson("service.version", resource.service_version));
  }
  json scope = {{"name", "inspection-gateway"}};
  if (!resource.service_version.empty()) scope["version"] = resource.service_version;
  const json request = {
      {"resourceSpans",
       json::array({{{"resource", {{"attributes", std::move(resource_attributes)}}},
                     {"scopeSpans", json::array({{{"scope", std::move(scope)},
                                                  {"spans", std::move(span_list)}}})}}})}};
  // replace: a span name or attribute with a bad UTF-8 byte must not throw.
  return request.dump(-1, ' ', false, json::error_handler_t::replace);
}

absl::StatusOr<std::unique_ptr<OtlpExporter>> OtlpExporter::Create(OtlpExporterOptions options,
                                                                   http::HttpTransport* transport) {
  if (!absl::StartsWith(options.endpoint, "http://") &&
      !absl::StartsWith(options.endpoint, "https://")) {
    return absl::InvalidArgumentError(
        "tracing.otlp_endpoint: expected an absolute http(s) URL of the collector's traces "
        "endpoint, e.g. http://otel-collector:4318/v1/traces");
  }
  if (options.max_queued_spans == 0 || options.max_batch_spans == 0 ||
      options.export_interval.count() <= 0 || options.export_timeout.count() <= 0) {
    return absl::InvalidArgumentError(
        "tracing: max_queued_spans, max_batch_spans, export_interval_ms and export_timeout_ms "
        "must be > 0");
  }
  std::unique_ptr<OtlpExporter> exporter(new OtlpExporter(std::move(options), transport));
  exporter->thread_ = std::thread([raw = exporter.get()] { raw->Run(); });
  return exporter;
}

OtlpExporter::OtlpExporter(OtlpExporterOptions options, http::HttpTransport* transport)
    : options_(std::move(options)), transport_(transport) {}

OtlpExporter::~OtlpExporter() { Stop(); }

void OtlpExporter::Record(Span span) {
  absl::MutexLock lock(&mu_);
  if (stopping_ || queue_.size() >= options_.max_queued_spans) {
    ++stats_.dropped_queue_full;
    if (options_.metrics != nullptr) options_.metrics->dropped_queue_full->Increment();
    return;
  }
  queue_.push_back(std::move(span));
}

OtlpExporter::Stats OtlpExporter::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

void OtlpExporter::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void OtlpExporter::Run() {
  while (true) {
    std::vector<Span> batch;
    bool last = false;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || queue_.size() >= options_.max_batch_spans;
      };
      mu_.AwaitWithTimeout(absl::Condition(&ready), absl::FromChrono(options_.export_interval));
      last = stopping_;
      const size_t n = std::min(queue_.size(), options_.max_batch_spans);
      batch.reserve(n);
      for (size_t i = 0; i < n; ++i) {
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
      if (last) {
        // One last batch is sent; whatever does not fit in it is dropped and counted.
        stats_.dropped_queue_full += queue_.size();
        if (options_.metrics != nullptr) {
          options_.metrics->dropped_queue_full->Increment(static_cast<double>(queue_.size()));
        }
        queue_.clear();
      }
    }
    if (!batch.empty()) SendBatch(std::move(batch), last);
    if (last) return;
  }
}

void OtlpExporter::SendBatch(std::vector<Span> batch, bool last) {
  // The last batch goes out during shutdown: it may not hold the drain up for long.
  const std::chrono::milliseconds timeout =
      last ? std::min(options_.export_timeout, kLastBatchTimeout) : options_.export_timeout;
  http::HttpRequest request;
  request.method = "POST";
  request.url = options_.endpoint;
  request.timeout = timeout;
  request.headers.emplace_back("Content-Type", "application/json");
  request.body = EncodeOtlpJson(batch, options_);
  auto answered = std::make_shared<std::promise<bool>>();
  std::future<bool> accepted = answered->get_future();
  transport_->Send(std::move(request), [answered](http::HttpResult result) {
    answered->set_value(result.error == http::TransportError::kNone &&
                        result.response.status >= 200 && result.response.status <= 299);
  });
  // The transport enforces the timeout; the extra second only guards against a transport
  // that never calls back (it always does, also when shut down).
  const bool ok =
      accepted.wait_for(timeout + std::chrono::seconds(1)) == std::future_status::ready &&
      accepted.get();
  absl::MutexLock lock(&mu_);
  const OtlpExporterMetrics* metrics = options_.metrics;
  if (ok) {
    stats_.exported += batch.size();
    if (metrics != nullptr) metrics->exported->Increment(static_cast<double>(batch.size()));
  } else {
    stats_.dropped_export_failed += batch.size();
    ++stats_.export_requests_failed;
    if (metrics != nullptr) {
      metrics->dropped_export_failed->Increment(static_cast<double>(batch.size()));
      metrics->export_failures->Increment();
    }
  }
}

OtlpExporterMetrics OtlpExporterMetrics::Create(const metrics::MetricsScope& scope) {
  OtlpExporterMetrics m;
  m.exported = &scope.Counter("inspection_trace_spans_exported_total",
                              "Spans the OTLP collector accepted (tracing.otlp_endpoint).");
  auto& dropped = scope.CounterFamily(
      "inspection_trace_spans_dropped_total",
      "Spans not exported: queue_full (tracing.max_queued_spans reached), export_failed (the "
      "collector refused or did not answer their batch).");
  m.dropped_queue_full = &dropped.Add({{"reason", "queue_full"}});
  m.dropped_export_failed = &dropped.Add({{"reason", "export_failed"}});
  m.export_failures = &scope.Counter("inspection_trace_export_failures_total",
                                     "OTLP export requests that failed (one per batch).");
  return m;
}

}  // namespace inspection::tracing
