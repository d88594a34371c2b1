#ifndef GATEWAY_TRACING_TRACE_CONTEXT_H_
#define GATEWAY_TRACING_TRACE_CONTEXT_H_

// W3C Trace Context (https://www.w3.org/TR/trace-context/) for the gateway: what a caller's
// `traceparent`/`tracestate` metadata says, the span the gateway opens for the call, and the
// child `traceparent` each vendor attempt sends.
//
//   TraceContext trace = TraceContext::FromHeaders(traceparent, tracestate);  // new trace
//                                                                             // when absent
//   trace.TraceIdHex();                       // "4bf92f3577b34da6a3ce929d0e0e4736"
//   SpanId attempt = NewSpanId();
//   FormatTraceparent(trace.trace_id, attempt, trace.flags);   // the vendor's traceparent
//
// A caller's context is accepted only when it follows the W3C rules (lower-case hex, ids not
// all zero, version not ff, exact length for version 00); anything else starts a new trace,
// as the recommendation says, and its tracestate is dropped with it.

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace inspection::tracing {

using TraceId = std::array<uint8_t, 16>;
using SpanId = std::array<uint8_t, 8>;

// The `sampled` bit of trace-flags.
inline constexpr uint8_t kSampledFlag = 0x01;
// tracestate longer than this is not propagated (W3C: vendors should propagate at least
// 512 characters; a longer one may be dropped whole).
inline constexpr size_t kMaxTracestateLength = 512;

// Fresh random ids, never all zero.
TraceId NewTraceId();
SpanId NewSpanId();

std::string Hex(const uint8_t* bytes, size_t size);
inline std::string Hex(const TraceId& id) { return Hex(id.data(), id.size()); }
inline std::string Hex(const SpanId& id) { return Hex(id.data(), id.size()); }
bool IsZero(const SpanId& id);

// A valid `traceparent`: its trace id, parent id and flags.
struct Traceparent {
  TraceId trace_id{};
  SpanId parent_id{};
  uint8_t flags = 0;
};
// nullopt when `value` breaks the W3C rules (see the header comment).
std::optional<Traceparent> ParseTraceparent(std::string_view value);
// "00-<trace id>-<span id>-<flags>".
std::string FormatTraceparent(const TraceId& trace_id, const SpanId& span_id, uint8_t flags);

// The trace context of one gateway call (a gRPC RPC, or work of the gateway's own).
struct TraceContext {
  TraceId trace_id{};
  SpanId span_id{};         // the gateway's span for this call
  SpanId parent_span_id{};  // the caller's span; all zero when the gateway started the trace
  uint8_t flags = kSampledFlag;
  std::string tracestate;  // the caller's, carried unchanged; "" for none

  // The caller's context when `traceparent` is valid (a new span id under its span);
  // otherwise a new, sampled trace. `tracestate` is kept only with a valid traceparent and
  // at most kMaxTracestateLength characters.
  static TraceContext FromHeaders(std::optional<std::string_view> traceparent,
                                  std::optional<std::string_view> tracestate);
  // A new, sampled trace (work the gateway starts itself).
  static TraceContext NewRoot();

  bool sampled() const { return (flags & kSampledFlag) != 0; }
  bool has_parent() const { return !IsZero(parent_span_id); }
  std::string TraceIdHex() const { return Hex(trace_id); }
  std::string SpanIdHex() const { return Hex(span_id); }
  // The traceparent a child of this span sends: same trace id and flags, `child` as parent.
  std::string ChildTraceparent(const SpanId& child) const {
    return FormatTraceparent(trace_id, child, flags);
  }
};

}  // namespace inspection::tracing

#endif  // GATEWAY_TRACING_TRACE_CONTEXT_H_
