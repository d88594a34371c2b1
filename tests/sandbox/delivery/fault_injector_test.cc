#include "sandbox/faults/fault_injector.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace inspection::sandbox {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;
using ::testing::SizeIs;

// Parses `text` as JSON (the test's own literal, so it must be valid) and then as rules.
absl::StatusOr<std::vector<FaultRule>> Parse(const std::string& text) {
  const json parsed = json::parse(text, nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(parsed.is_discarded()) << text;
  return ParseFaultRules(parsed);
}

FaultRule ParseOne(const std::string& text) {
  auto rules = Parse(text);
  EXPECT_TRUE(rules.ok()) << text << ": " << rules.status();
  if (!rules.ok() || rules->size() != 1) return FaultRule{};
  return rules->front();
}

FaultRule HttpRule(std::string route, FaultKind kind, double probability = 1.0, int times = -1) {
  FaultRule rule;
  rule.route = std::move(route);
  rule.kind = kind;
  rule.probability = probability;
  rule.times = times;
  return rule;
}

// Every field, so that a round trip that loses or alters one is caught.
void ExpectSameRule(const FaultRule& a, const FaultRule& b) {
  EXPECT_EQ(a.route, b.route);
  EXPECT_EQ(a.webhook, b.webhook);
  if (a.webhook) {
    EXPECT_EQ(a.webhook_kind, b.webhook_kind);
  } else {
    EXPECT_EQ(a.kind, b.kind);
  }
  EXPECT_EQ(a.probability, b.probability);
  EXPECT_EQ(a.times, b.times);
  EXPECT_EQ(a.latency, b.latency);
  EXPECT_EQ(a.latency_max, b.latency_max);
  EXPECT_EQ(a.status, b.status);
  EXPECT_EQ(a.body, b.body);
  EXPECT_EQ(a.retry_after, b.retry_after);
  EXPECT_EQ(a.count, b.count);
}

// --- Parsing: every kind. ---

TEST(ParseFaultRulesTest, DefaultsOfAMinimalRule) {
  const FaultRule rule = ParseOne(R"({"kind": "reset"})");
  EXPECT_EQ(rule.route, "*");
  EXPECT_FALSE(rule.webhook);
  EXPECT_EQ(rule.kind, FaultKind::kReset);
  EXPECT_EQ(rule.probability, 1.0);
  EXPECT_EQ(rule.times, -1);
}

TEST(ParseFaultRulesTest, LatencyFixedAndRange) {
  FaultRule rule = ParseOne(R"({"route": "create_token", "kind": "latency", "latency_ms": 100})");
  EXPECT_EQ(rule.route, "create_token");
  EXPECT_EQ(rule.kind, FaultKind::kLatency);
  EXPECT_EQ(rule.latency, std::chrono::milliseconds(100));
  EXPECT_EQ(rule.latency_max, std::chrono::milliseconds(0));

  rule = ParseOne(R"({"route": "*", "kind": "latency", "latency_ms": 100,
                      "latency_max_ms": 300, "probability": 0.25, "times": 3})");
  EXPECT_EQ(rule.latency, std::chrono::milliseconds(100));
  EXPECT_EQ(rule.latency_max, std::chrono::milliseconds(300));
  EXPECT_EQ(rule.probability, 0.25);
  EXPECT_EQ(rule.times, 3);
}

TEST(ParseFaultRulesTest, ErrorWithStringOrInlineJsonBody) {
  FaultRule rule =
      ParseOne(R"({"route": "create_token", "kind": "error", "status": 503, "body": "{\"e\":1}"})");
  EXPECT_EQ(rule.kind, FaultKind::kError);
  EXPECT_EQ(rule.status, 503);
  EXPECT_EQ(rule.body, R"({"e":1})");

  rule = ParseOne(R"({"kind": "error", "status": 400, "body": {"message": "bad"}})");
  EXPECT_EQ(rule.status, 400);
  EXPECT_EQ(json::parse(rule.body), json({{"message", "bad"}}));
}

TEST(ParseFaultRulesTest, RateLimitRetryAfterForms) {
  EXPECT_EQ(ParseOne(R"({"kind": "rate_limit", "retry_after": "2"})").retry_after, "2");
  EXPECT_EQ(ParseOne(R"({"kind": "rate_limit", "retry_after": 7})").retry_after, "7");
  EXPECT_EQ(ParseOne(R"({"kind": "rate_limit", "retry_after": "Sun, 06 Nov 1994 08:49:37 GMT"})")
                .retry_after,
            "Sun, 06 Nov 1994 08:49:37 GMT");
  const FaultRule rule = ParseOne(R"({"route": "get_token_status", "kind": "rate_limit"})");
  EXPECT_EQ(rule.kind, FaultKind::kRateLimit);
  EXPECT_EQ(rule.retry_after, "1");
}

TEST(ParseFaultRulesTest, BodyShapingKinds) {
  EXPECT_EQ(ParseOne(R"({"route": "assess_quality", "kind": "reset"})").kind, FaultKind::kReset);
  EXPECT_EQ(ParseOne(R"({"kind": "truncate"})").kind, FaultKind::kTruncate);
  EXPECT_EQ(ParseOne(R"({"kind": "malformed"})").kind, FaultKind::kMalformed);
  const FaultRule slow = ParseOne(R"({"kind": "slow_body", "latency_ms": 20})");
  EXPECT_EQ(slow.kind, FaultKind::kSlowBody);
  EXPECT_EQ(slow.latency, std::chrono::milliseconds(20));
}

TEST(ParseFaultRulesTest, WebhookKinds) {
  FaultRule rule = ParseOne(R"({"webhook": true, "event": "createReport", "kind": "duplicate"})");
  EXPECT_TRUE(rule.webhook);
  EXPECT_EQ(rule.route, "createReport");
  EXPECT_EQ(rule.webhook_kind, WebhookFaultKind::kDuplicate);

  EXPECT_EQ(ParseOne(R"({"webhook": true, "kind": "reorder"})").webhook_kind,
            WebhookFaultKind::kReorder);

  rule = ParseOne(R"({"webhook": true, "event": "*", "kind": "delay", "latency_ms": 500})");
  EXPECT_EQ(rule.webhook_kind, WebhookFaultKind::kDelay);
  EXPECT_EQ(rule.latency, std::chrono::milliseconds(500));

  rule = ParseOne(R"({"webhook": true, "event": "createReport", "kind": "fail_first",
                      "count": 2})");
  EXPECT_EQ(rule.webhook_kind, WebhookFaultKind::kFailFirst);
  EXPECT_EQ(rule.count, 2);

  rule = ParseOne(R"({"webhook": true, "event": "createReport", "kind": "drop"})");
  EXPECT_EQ(rule.webhook_kind, WebhookFaultKind::kDrop);
}

TEST(ParseFaultRulesTest, WebhookFlagInferredFromKindAndRouteAcceptedAsEventName) {
  const FaultRule rule = ParseOne(R"({"route": "createReport", "kind": "duplicate"})");
  EXPECT_TRUE(rule.webhook);
  EXPECT_EQ(rule.route, "createReport");
}

TEST(ParseFaultRulesTest, ArrayKeepsOrder) {
  auto rules = Parse(R"([{"route": "a", "kind": "reset"},
                         {"route": "b", "kind": "malformed"},
                         {"event": "c", "kind": "reorder"}])");
  ASSERT_TRUE(rules.ok()) << rules.status();
  ASSERT_THAT(*rules, SizeIs(3));
  EXPECT_EQ((*rules)[0].route, "a");
  EXPECT_EQ((*rules)[1].route, "b");
  EXPECT_EQ((*rules)[2].route, "c");
  EXPECT_TRUE((*rules)[2].webhook);

  auto empty = Parse("[]");
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
}

// --- Parsing: every error names the offending key. ---

struct BadRule {
  const char* json_text;
  const char* key;  // must appear quoted in the message
};

class ParseFaultRulesErrorTest : public ::testing::TestWithParam<BadRule> {};

TEST_P(ParseFaultRulesErrorTest, IsInvalidArgumentNamingTheKey) {
  auto rules = Parse(GetParam().json_text);
  ASSERT_FALSE(rules.ok()) << GetParam().json_text;
  EXPECT_EQ(rules.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(rules.status().message(), HasSubstr(std::string("'") + GetParam().key + "'"));
}

INSTANTIATE_TEST_SUITE_P(
    AllErrors, ParseFaultRulesErrorTest,
    ::testing::Values(
        BadRule{R"({"kind": "reset", "colour": "red"})", "colour"},
        BadRule{R"({"route": "x"})", "kind"}, BadRule{R"({"kind": 3})", "kind"},
        BadRule{R"({"kind": "explode"})", "kind"},
        BadRule{R"({"kind": "reset", "probability": -0.1})", "probability"},
        BadRule{R"({"kind": "reset", "probability": 1.5})", "probability"},
        BadRule{R"({"kind": "reset", "probability": "0.5"})", "probability"},
        BadRule{R"({"kind": "reset", "times": 0})", "times"},
        BadRule{R"({"kind": "reset", "times": -2})", "times"},
        BadRule{R"({"kind": "reset", "times": 1.5})", "times"},
        BadRule{R"({"kind": "error", "status": 99})", "status"},
        BadRule{R"({"kind": "error", "status": 600})", "status"},
        BadRule{R"({"kind": "error", "status": "500"})", "status"},
        BadRule{R"({"kind": "error", "body": 12})", "body"},
        BadRule{R"({"kind": "latency", "latency_ms": -1})", "latency_ms"},
        BadRule{R"({"kind": "latency", "latency_ms": 10, "latency_max_ms": -5})", "latency_max_ms"},
        BadRule{R"({"kind": "latency", "latency_ms": 300, "latency_max_ms": 100})",
                "latency_max_ms"},
        BadRule{R"({"webhook": true, "kind": "delay", "latency_ms": -10})", "latency_ms"},
        BadRule{R"({"kind": "rate_limit", "retry_after": "soon"})", "retry_after"},
        BadRule{R"({"kind": "rate_limit", "retry_after": -1})", "retry_after"},
        BadRule{R"({"kind": "rate_limit", "retry_after": "06 Nov 1994"})", "retry_after"},
        BadRule{R"({"webhook": true, "kind": "fail_first", "count": 0})", "count"},
        BadRule{R"({"kind": "reset", "webhook": "yes"})", "webhook"},
        BadRule{R"({"webhook": false, "kind": "duplicate"})", "kind"},
        BadRule{R"({"webhook": true, "kind": "error"})", "kind"},
        BadRule{R"({"event": "createReport", "kind": "reset"})", "event"},
        BadRule{R"({"event": "a", "route": "b", "kind": "reorder"})", "event"},
        BadRule{R"({"route": "", "kind": "reset"})", "route"},
        BadRule{R"({"route": 5, "kind": "reset"})", "route"},
        BadRule{R"({"kind": "latency", "status": 500})", "status"},
        BadRule{R"({"kind": "reset", "latency_ms": 5})", "latency_ms"},
        BadRule{R"({"webhook": true, "kind": "duplicate", "count": 2})", "count"},
        BadRule{R"({"webhook": true, "kind": "drop", "latency_ms": 5})", "latency_ms"},
        BadRule{R"([{"kind": "reset"}, {"kind": "reset", "oops": 1}])", "oops"}));

TEST(ParseFaultRulesTest, RejectsWrongShapes) {
  auto scalar = Parse(R"("reset")");
  EXPECT_EQ(scalar.status().code(), absl::StatusCode::kInvalidArgument);
  auto element = Parse(R"([{"kind": "reset"}, 5])");
  ASSERT_FALSE(element.ok());
  EXPECT_EQ(element.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(element.status().message(), HasSubstr("fault rule 1"));
}

// --- JSON round trip. ---

TEST(FaultRuleToJsonTest, RoundTripsEveryKind) {
  const char* const kRules[] = {
      R"({"route": "create_token", "kind": "latency", "latency_ms": 100})",
      R"({"kind": "latency", "latency_ms": 100, "latency_max_ms": 300, "probability": 0.3})",
      R"({"route": "a", "kind": "error", "status": 503, "body": "{\"x\": [1]}", "times": 2})",
      R"({"kind": "rate_limit", "retry_after": "Sun, 06 Nov 1994 08:49:37 GMT"})",
      R"({"kind": "rate_limit", "retry_after": 30, "probability": 0.125})",
      R"({"kind": "reset"})",
      R"({"kind": "truncate", "times": 1})",
      R"({"kind": "malformed"})",
      R"({"kind": "slow_body", "latency_ms": 15})",
      R"({"webhook": true, "event": "createReport", "kind": "duplicate"})",
      R"({"webhook": true, "kind": "reorder", "probability": 0.7})",
      R"({"webhook": true, "kind": "delay", "latency_ms": 500})",
      R"({"webhook": true, "event": "newInspection", "kind": "fail_first", "count": 3})",
      R"({"webhook": true, "event": "createReport", "kind": "drop", "times": 2})",
  };
  for (const char* text : kRules) {
    SCOPED_TRACE(text);
    const FaultRule original = ParseOne(text);
    const json emitted = FaultRuleToJson(original);
    auto reparsed = ParseFaultRules(emitted);
    ASSERT_TRUE(reparsed.ok()) << emitted.dump() << ": " << reparsed.status();
    ASSERT_THAT(*reparsed, SizeIs(1));
    ExpectSameRule(original, reparsed->front());
    EXPECT_EQ(FaultRuleToJson(reparsed->front()), emitted);
  }
}

TEST(FaultRuleToJsonTest, NamesTheTargetByItsRole) {
  const json http = FaultRuleToJson(HttpRule("create_token", FaultKind::kReset));
  EXPECT_EQ(http.at("route"), "create_token");
  EXPECT_EQ(http.at("kind"), "reset");
  EXPECT_EQ(http.at("webhook"), false);
  FaultRule hook;
  hook.webhook = true;
  hook.route = "createReport";
  hook.webhook_kind = WebhookFaultKind::kFailFirst;
  hook.count = 4;
  const json webhook = FaultRuleToJson(hook);
  EXPECT_EQ(webhook.at("event"), "createReport");
  EXPECT_EQ(webhook.at("kind"), "fail_first");
  EXPECT_EQ(webhook.at("count"), 4);
  EXPECT_FALSE(webhook.contains("route"));
}

// --- Matching. ---

TEST(FaultInjectorTest, ExactRouteBeatsWildcardAddedEarlier) {
  FaultInjector injector;
  injector.AddRules({HttpRule("*", FaultKind::kReset), HttpRule("create_token", FaultKind::kError),
                     HttpRule("create_token", FaultKind::kMalformed)});
  auto decision = injector.DecideHttp("create_token");
  ASSERT_TRUE(decision.has_value());
  EXPECT_EQ(decision->rule.kind, FaultKind::kError);  // exact, first inserted
  decision = injector.DecideHttp("search_inspections");
  ASSERT_TRUE(decision.has_value());
  EXPECT_EQ(decision->rule.kind, FaultKind::kReset);  // only "*" matches
}

TEST(FaultInjectorTest, InsertionOrderWithinExactAndWildcard) {
  FaultInjector injector;
  injector.AddRules(
      {HttpRule("*", FaultKind::kTruncate, 1.0, 1), HttpRule("*", FaultKind::kMalformed, 1.0, 1)});
  injector.AddRules(
      {HttpRule("a", FaultKind::kError, 1.0, 1), HttpRule("a", FaultKind::kLatency, 1.0, 1)});
  std::vector<FaultKind> fired;
  for (int i = 0; i < 5; ++i) {
    auto decision = injector.DecideHttp("a");
    if (decision) fired.push_back(decision->rule.kind);
  }
  EXPECT_EQ(fired, (std::vector<FaultKind>{FaultKind::kError, FaultKind::kLatency,
                                           FaultKind::kTruncate, FaultKind::kMalformed}));
}

TEST(FaultInjectorTest, HttpAndWebhookRulesDoNotMix) {
  FaultInjector injector;
  FaultRule hook;
  hook.webhook = true;
  hook.route = "*";
  hook.webhook_kind = WebhookFaultKind::kDuplicate;
  injector.AddRules({hook, HttpRule("createReport", FaultKind::kReset)});
  auto webhook = injector.DecideWebhook("createReport");
  ASSERT_TRUE(webhook.has_value());
  EXPECT_TRUE(webhook->rule.webhook);
  EXPECT_EQ(webhook->rule.webhook_kind, WebhookFaultKind::kDuplicate);
  auto http = injector.DecideHttp("createReport");
  ASSERT_TRUE(http.has_value());
  EXPECT_FALSE(http->rule.webhook);
  EXPECT_FALSE(injector.DecideHttp("other").has_value());
}

TEST(FaultInjectorTest, NoRulesNoFault) {
  FaultInjector injector;
  EXPECT_FALSE(injector.DecideHttp("create_token").has_value());
  EXPECT_FALSE(injector.DecideWebhook("createReport").has_value());
}

TEST(FaultInjectorTest, ProbabilityZeroNeverOneAlways) {
  FaultInjector never;
  never.AddRules({HttpRule("*", FaultKind::kReset, 0.0)});
  FaultInjector always;
  always.AddRules({HttpRule("*", FaultKind::kReset, 1.0)});
  for (int i = 0; i < 1000; ++i) {
    ASSERT_FALSE(never.DecideHttp("r").has_value()) << i;
    ASSERT_TRUE(always.DecideHttp("r").has_value()) << i;
  }
}

std::vector<bool> FirePattern(uint64_t seed, int decisions) {
  FaultInjector injector(seed);
  injector.AddRules({HttpRule("*", FaultKind::kError, 0.5)});
  std::vector<bool> pattern;
  for (int i = 0; i < decisions; ++i) pattern.push_back(injector.DecideHttp("r").has_value());
  return pattern;
}

TEST(FaultInjectorTest, SeedGivesARepeatablePattern) {
  const std::vector<bool> first = FirePattern(42, 100);
  EXPECT_EQ(first, FirePattern(42, 100));
  EXPECT_NE(first, FirePattern(43, 100));
  // Sanity: a fair coin over 100 draws lands well inside [20, 80].
  const auto fired = std::count(first.begin(), first.end(), true);
  EXPECT_GT(fired, 20);
  EXPECT_LT(fired, 80);
}

TEST(FaultInjectorTest, TimesExhaustsAndRemovesTheRule) {
  FaultInjector injector;
  injector.AddRules({HttpRule("a", FaultKind::kError, 1.0, 2), HttpRule("*", FaultKind::kReset)});
  auto first = injector.DecideHttp("a");
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->rule.kind, FaultKind::kError);
  EXPECT_EQ(first->rule.times, 1);  // remaining after this firing
  auto second = injector.DecideHttp("a");
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(second->rule.kind, FaultKind::kError);
  EXPECT_EQ(second->rule.times, 0);
  ASSERT_THAT(injector.Rules(), SizeIs(1));
  EXPECT_EQ(injector.Rules().front().route, "*");
  auto third = injector.DecideHttp("a");
  ASSERT_TRUE(third.has_value());
  EXPECT_EQ(third->rule.kind, FaultKind::kReset);  // falls through to "*" now
}

TEST(FaultInjectorTest, TimesIsNotSpentWhenTheDrawMisses) {
  FaultInjector injector(7);
  injector.AddRules({HttpRule("*", FaultKind::kError, 0.5, 3)});
  int fired = 0;
  for (int i = 0; i < 200; ++i) fired += injector.DecideHttp("r").has_value() ? 1 : 0;
  EXPECT_EQ(fired, 3);
  EXPECT_TRUE(injector.Rules().empty());
}

TEST(FaultInjectorTest, LatencyRangeStaysWithinBoundsAndVaries) {
  FaultInjector injector(3);
  FaultRule rule = HttpRule("*", FaultKind::kLatency);
  rule.latency = std::chrono::milliseconds(100);
  rule.latency_max = std::chrono::milliseconds(300);
  injector.AddRules({rule});
  std::chrono::milliseconds low(1000), high(0);
  for (int i = 0; i < 500; ++i) {
    auto decision = injector.DecideHttp("r");
    ASSERT_TRUE(decision.has_value());
    const auto latency = decision->rule.latency;
    ASSERT_GE(latency, std::chrono::milliseconds(100));
    ASSERT_LE(latency, std::chrono::milliseconds(300));
    low = std::min(low, latency);
    high = std::max(high, latency);
  }
  // 500 uniform draws over 201 values: both ends of the range are approached.
  EXPECT_LT(low, std::chrono::milliseconds(110));
  EXPECT_GT(high, std::chrono::milliseconds(290));
}

TEST(FaultInjectorTest, FixedLatencyIsKept) {
  FaultInjector injector;
  FaultRule rule = HttpRule("*", FaultKind::kLatency);
  rule.latency = std::chrono::milliseconds(40);
  injector.AddRules({rule});
  auto decision = injector.DecideHttp("r");
  ASSERT_TRUE(decision.has_value());
  EXPECT_EQ(decision->rule.latency, std::chrono::milliseconds(40));
}

TEST(FaultInjectorTest, ClearRemovesEverything) {
  FaultInjector injector;
  injector.AddRules({HttpRule("*", FaultKind::kReset)});
  injector.Clear();
  EXPECT_TRUE(injector.Rules().empty());
  EXPECT_FALSE(injector.DecideHttp("r").has_value());
}

TEST(FaultInjectorTest, ConcurrentDecisionsSpendTimesExactly) {
  FaultInjector injector;
  injector.AddRules({HttpRule("*", FaultKind::kError, 1.0, 1000)});
  std::atomic<int> fired{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 500; ++i) {
        if (injector.DecideHttp("r")) fired.fetch_add(1);
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(fired.load(), 1000);
  EXPECT_TRUE(injector.Rules().empty());
}

}  // namespace
}  // namespace inspection::sandbox
