// Fuzz target: a caller's `traceparent` and `tracestate` metadata (gateway/tracing:
// TraceContext::FromHeaders). Input: the traceparent value, then "\n", then the tracestate
// value; without "\n" only a traceparent. An input starting with "\n" has no traceparent
// (the header absent), so both the absent and the present-but-empty cases are reached.
//
// Checks beyond the sanitizers: a kept context re-formats to a traceparent that parses back
// to the same ids and flags (the child traceparent every vendor attempt sends); a version-00
// traceparent that was kept formats back byte for byte; a kept tracestate is at most
// kMaxTracestateLength characters and is a safe header value (it is sent to the vendor);
// without a valid traceparent the tracestate is dropped and the trace is new and sampled.

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include "adapters/http/http_transport.h"
#include "gateway/tracing/trace_context.h"

namespace {

using inspection::tracing::TraceContext;

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "trace_context_fuzzer: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  std::optional<std::string_view> traceparent;
  std::optional<std::string_view> tracestate;
  const size_t newline = input.find('\n');
  if (newline == std::string_view::npos) {
    traceparent = input;
  } else {
    if (newline > 0) traceparent = input.substr(0, newline);
    tracestate = input.substr(newline + 1);
  }

  const TraceContext context = TraceContext::FromHeaders(traceparent, tracestate);
  const std::optional<inspection::tracing::Traceparent> parsed =
      traceparent ? inspection::tracing::ParseTraceparent(*traceparent) : std::nullopt;
  if (!parsed.has_value()) {
    if (context.has_parent() || !context.tracestate.empty() || !context.sampled()) {
      Fail("an invalid traceparent was followed (parent, tracestate or flags kept)");
    }
  } else {
    if (context.trace_id != parsed->trace_id || context.parent_span_id != parsed->parent_id ||
        context.flags != parsed->flags) {
      Fail("a valid traceparent's ids or flags were not kept");
    }
    if (traceparent->substr(0, 2) == "00" &&
        inspection::tracing::FormatTraceparent(parsed->trace_id, parsed->parent_id,
                                               parsed->flags) != *traceparent) {
      Fail("a version-00 traceparent does not format back to itself");
    }
  }
  if (context.tracestate.size() > inspection::tracing::kMaxTracestateLength) {
    Fail("a tracestate over kMaxTracestateLength was kept");
  }
  if (!inspection::http::IsSafeHeaderValue(context.tracestate)) {
    Fail("a kept tracestate is not a safe header value");
  }
  const inspection::tracing::SpanId child = inspection::tracing::NewSpanId();
  const std::string sent = context.ChildTraceparent(child);
  const std::optional<inspection::tracing::Traceparent> again =
      inspection::tracing::ParseTraceparent(sent);
  if (!again.has_value() || again->trace_id != context.trace_id || again->parent_id != child ||
      again->flags != context.flags) {
    Fail("the child traceparent does not parse back to its ids and flags");
  }
  return 0;
}
