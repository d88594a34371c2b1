#ifndef GATEWAY_TRACING_SPAN_H_
#define GATEWAY_TRACING_SPAN_H_

// One finished span as the gateway exports it (OTLP's Span, reduced to what the gateway
// records), and the sink spans are handed to.

#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "gateway/tracing/trace_context.h"

namespace inspection::tracing {

// OTLP Span.SpanKind values.
enum class SpanKind : int { kInternal = 1, kServer = 2, kClient = 3 };
// OTLP Status.StatusCode values.
enum class SpanStatus : int { kUnset = 0, kOk = 1, kError = 2 };

using AttributeValue = std::variant<std::string, int64_t, bool, double>;

struct Span {
  TraceId trace_id{};
  SpanId span_id{};
  SpanId parent_span_id{};  // all zero: a root span
  std::string tracestate;
  std::string name;
  SpanKind kind = SpanKind::kInternal;
  uint64_t start_unix_nano = 0;
  uint64_t end_unix_nano = 0;
  SpanStatus status = SpanStatus::kUnset;
  std::string status_message;
  std::vector<std::pair<std::string, AttributeValue>> attributes;
};

// Where finished spans go. Record() must not block (it is called on gRPC and transport
// threads); an implementation that cannot keep a span drops and counts it.
class SpanSink {
 public:
  virtual ~SpanSink() = default;
  virtual void Record(Span span) = 0;
};

}  // namespace inspection::tracing

#endif  // GATEWAY_TRACING_SPAN_H_
