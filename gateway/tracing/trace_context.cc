#include "gateway/tracing/trace_context.h"

#include <random>

namespace inspection::tracing {
namespace {

// One generator per thread, seeded from the OS: ids are unique, not secret.
std::mt19937_64& Generator() {
  thread_local std::mt19937_64 generator([] {
    std::random_device device;
    return (static_cast<uint64_t>(device()) << 32) ^ device();
  }());
  return generator;
}

template <size_t N>
std::array<uint8_t, N> RandomNonZero() {
  std::array<uint8_t, N> id{};
  bool zero = true;
  while (zero) {
    for (size_t i = 0; i < N; i += 8) {
      uint64_t bits = Generator()();
      for (size_t j = i; j < i + 8 && j < N; ++j, bits >>= 8) id[j] = static_cast<uint8_t>(bits);
    }
    for (uint8_t b : id) zero = zero && b == 0;
  }
  return id;
}

int LowerHexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;  // upper case is invalid in traceparent
}

// Decodes exactly 2 * size lower-case hex characters.
bool DecodeHex(std::string_view text, uint8_t* out, size_t size) {
  if (text.size() != 2 * size) return false;
  for (size_t i = 0; i < size; ++i) {
    const int hi = LowerHexValue(text[2 * i]);
    const int lo = LowerHexValue(text[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    out[i] = static_cast<uint8_t>(hi * 16 + lo);
  }
  return true;
}

template <size_t N>
bool AllZero(const std::array<uint8_t, N>& id) {
  for (uint8_t b : id) {
    if (b != 0) return false;
  }
  return true;
}

}  // namespace

TraceId NewTraceId() { return RandomNonZero<16>(); }
SpanId NewSpanId() { return RandomNonZero<8>(); }

std::string Hex(const uint8_t* bytes, size_t size) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(2 * size, '0');
  for (size_t i = 0; i < size; ++i) {
    out[2 * i] = kDigits[bytes[i] >> 4];
    out[2 * i + 1] = kDigits[bytes[i] & 0x0f];
  }
  return out;
}

bool IsZero(const SpanId& id) { return AllZero(id); }

std::optional<Traceparent> ParseTraceparent(std::string_view value) {
  // version "-" trace-id "-" parent-id "-" trace-flags: 2 + 1 + 32 + 1 + 16 + 1 + 2 = 55.
  constexpr size_t kLength = 55;
  if (value.size() < kLength) return std::nullopt;
  uint8_t version = 0;
  if (!DecodeHex(value.substr(0, 2), &version, 1) || version == 0xff) return std::nullopt;
  // Version 00 is exactly 55 characters; a later version may append "-..." fields.
  if (version == 0 && value.size() != kLength) return std::nullopt;
  if (value.size() > kLength && value[kLength] != '-') return std::nullopt;
  if (value[2] != '-' || value[35] != '-' || value[52] != '-') return std::nullopt;
  Traceparent out;
  if (!DecodeHex(value.substr(3, 32), out.trace_id.data(), 16) ||
      !DecodeHex(value.substr(36, 16), out.parent_id.data(), 8) ||
      !DecodeHex(value.substr(53, 2), &out.flags, 1)) {
    return std::nullopt;
  }
  if (AllZero(out.trace_id) || AllZero(out.parent_id)) return std::nullopt;
  return out;
}

std::string FormatTraceparent(const TraceId& trace_id, const SpanId& span_id, uint8_t flags) {
  std::string out = "00-";
  out += Hex(trace_id);
  out += '-';
  out += Hex(span_id);
  out += '-';
  out += Hex(&flags, 1);
  return out;
}

TraceContext TraceContext::FromHeaders(std::optional<std::string_view> traceparent,
                                       std::optional<std::string_view> tracestate) {
  std::optional<Traceparent> parsed;
  if (traceparent.has_value()) parsed = ParseTraceparent(*traceparent);
  if (!parsed.has_value()) return NewRoot();
  TraceContext context;
  context.trace_id = parsed->trace_id;
  context.parent_span_id = parsed->parent_id;
  context.flags = parsed->flags;
  context.span_id = NewSpanId();
  if (tracestate.has_value() && tracestate->size() <= kMaxTracestateLength) {
    // Only printable ASCII travels on (it becomes an HTTP header).
    bool printable = true;
    for (char c : *tracestate) printable = printable && c >= 0x20 && c <= 0x7e;
    if (printable) context.tracestate = std::string(*tracestate);
  }
  return context;
}

TraceContext TraceContext::NewRoot() {
  TraceContext context;
  context.trace_id = NewTraceId();
  context.span_id = NewSpanId();
  context.flags = kSampledFlag;
  return context;
}

}  // namespace inspection::tracing
