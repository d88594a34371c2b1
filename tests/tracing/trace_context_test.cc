// W3C traceparent parsing and formatting (https://www.w3.org/TR/trace-context/#traceparent-header).
#include "gateway/tracing/trace_context.h"

#include <set>
#include <string>

#include <gtest/gtest.h>

namespace inspection::tracing {
namespace {

constexpr char kValid[] = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

TEST(TraceparentTest, ParsesTheSpecsExample) {
  const auto parsed = ParseTraceparent(kValid);
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(Hex(parsed->trace_id), "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_EQ(Hex(parsed->parent_id), "00f067aa0ba902b7");
  EXPECT_EQ(parsed->flags, 1);
  EXPECT_EQ(FormatTraceparent(parsed->trace_id, parsed->parent_id, parsed->flags), kValid);
}

TEST(TraceparentTest, RejectsWhatTheSpecRejects) {
  for (const char* bad : {
           "",
           "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0",     // short
           "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",  // v00 with more
           "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",    // upper case
           "00-00000000000000000000000000000000-00f067aa0ba902b7-01",    // zero trace id
           "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",    // zero parent id
           "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",    // version ff
           "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",    // separator
           "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",    // not hex
           "0x-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",    // version not hex
           "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x",   // later version, no '-'
       }) {
    EXPECT_FALSE(ParseTraceparent(bad).has_value()) << bad;
  }
}

TEST(TraceparentTest, ALaterVersionMayAppendFields) {
  const auto parsed =
      ParseTraceparent("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra");
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(Hex(parsed->trace_id), "4bf92f3577b34da6a3ce929d0e0e4736");
}

TEST(TraceContextTest, AValidCallerContextIsContinuedUnderANewSpan) {
  const TraceContext context = TraceContext::FromHeaders(kValid, "congo=t61rcWkgMzE");
  EXPECT_EQ(context.TraceIdHex(), "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_EQ(Hex(context.parent_span_id), "00f067aa0ba902b7");
  EXPECT_NE(context.SpanIdHex(), "00f067aa0ba902b7");
  EXPECT_FALSE(IsZero(context.span_id));
  EXPECT_TRUE(context.sampled());
  EXPECT_TRUE(context.has_parent());
  EXPECT_EQ(context.tracestate, "congo=t61rcWkgMzE");
  const SpanId child = NewSpanId();
  EXPECT_EQ(context.ChildTraceparent(child),
            "00-4bf92f3577b34da6a3ce929d0e0e4736-" + Hex(child) + "-01");
}

TEST(TraceContextTest, NoOrABadTraceparentStartsASampledRootAndDropsTracestate) {
  for (const std::optional<std::string_view> traceparent :
       {std::optional<std::string_view>(), std::optional<std::string_view>("garbage")}) {
    const TraceContext context = TraceContext::FromHeaders(traceparent, "congo=t61rcWkgMzE");
    EXPECT_FALSE(context.has_parent());
    EXPECT_TRUE(context.sampled());
    EXPECT_EQ(context.tracestate, "");
    EXPECT_EQ(context.TraceIdHex().size(), 32u);
    EXPECT_TRUE(ParseTraceparent(context.ChildTraceparent(NewSpanId())).has_value());
  }
}

TEST(TraceContextTest, AnUnsampledCallerStaysUnsampled) {
  const TraceContext context = TraceContext::FromHeaders(
      "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", std::nullopt);
  EXPECT_FALSE(context.sampled());
  EXPECT_EQ(context.ChildTraceparent(NewSpanId()).substr(53), "00");
}

TEST(TraceContextTest, AnOversizedOrUnprintableTracestateIsNotPropagated) {
  EXPECT_EQ(
      TraceContext::FromHeaders(kValid, std::string(kMaxTracestateLength + 1, 'a')).tracestate, "");
  EXPECT_EQ(TraceContext::FromHeaders(kValid, "a=b\r\nx-api-key: stolen").tracestate, "");
  EXPECT_EQ(
      TraceContext::FromHeaders(kValid, std::string(kMaxTracestateLength, 'a')).tracestate.size(),
      kMaxTracestateLength);
}

TEST(TraceContextTest, IdsAreRandomAndNeverZero) {
  std::set<std::string> traces;
  std::set<std::string> spans;
  for (int i = 0; i < 1000; ++i) {
    traces.insert(Hex(NewTraceId()));
    spans.insert(Hex(NewSpanId()));
  }
  EXPECT_EQ(traces.size(), 1000u);
  EXPECT_EQ(spans.size(), 1000u);
  EXPECT_EQ(traces.count(std::string(32, '0')), 0u);
}

}  // namespace
}  // namespace inspection::tracing
