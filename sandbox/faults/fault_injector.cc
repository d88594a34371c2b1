#include "sandbox/faults/fault_injector.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

namespace inspection::sandbox {
namespace {

using json = nlohmann::json;

// The JSON spelling of each kind; the single table both directions use.
struct HttpKindName {
  FaultKind kind;
  const char* name;
};
constexpr HttpKindName kHttpKinds[] = {
    {FaultKind::kLatency, "latency"},      {FaultKind::kError, "error"},
    {FaultKind::kRateLimit, "rate_limit"}, {FaultKind::kReset, "reset"},
    {FaultKind::kTruncate, "truncate"},    {FaultKind::kMalformed, "malformed"},
    {FaultKind::kSlowBody, "slow_body"},
};

struct WebhookKindName {
  WebhookFaultKind kind;
  const char* name;
};
constexpr WebhookKindName kWebhookKinds[] = {
    {WebhookFaultKind::kDuplicate, "duplicate"}, {WebhookFaultKind::kReorder, "reorder"},
    {WebhookFaultKind::kDelay, "delay"},         {WebhookFaultKind::kFailFirst, "fail_first"},
    {WebhookFaultKind::kDrop, "drop"},
};

const char* HttpKindToName(FaultKind kind) {
  for (const auto& entry : kHttpKinds) {
    if (entry.kind == kind) return entry.name;
  }
  return "error";
}

const char* WebhookKindToName(WebhookFaultKind kind) {
  for (const auto& entry : kWebhookKinds) {
    if (entry.kind == kind) return entry.name;
  }
  return "duplicate";
}

// Keys that only make sense for some kinds. A key given for a kind that ignores it is
// rejected rather than silently dropped: `{"kind": "error", "latency_ms": 500}` is far
// more likely a mistake than an intent, and the admin API should say so.
constexpr const char* kKindSpecificKeys[] = {"latency_ms", "latency_max_ms", "status",
                                             "body",       "retry_after",    "count"};

bool KeyAppliesToHttpKind(const std::string& key, FaultKind kind) {
  switch (kind) {
    case FaultKind::kLatency:
      return key == "latency_ms" || key == "latency_max_ms";
    case FaultKind::kError:
      return key == "status" || key == "body";
    case FaultKind::kRateLimit:
      return key == "retry_after";
    case FaultKind::kSlowBody:
      return key == "latency_ms";  // the pause between chunks
    case FaultKind::kReset:
    case FaultKind::kTruncate:
    case FaultKind::kMalformed:
      return false;
  }
  return false;
}

bool KeyAppliesToWebhookKind(const std::string& key, WebhookFaultKind kind) {
  switch (kind) {
    case WebhookFaultKind::kDelay:
      return key == "latency_ms";
    case WebhookFaultKind::kFailFirst:
      return key == "count";
    case WebhookFaultKind::kDuplicate:
    case WebhookFaultKind::kReorder:
    case WebhookFaultKind::kDrop:
      return false;
  }
  return false;
}

bool IsKindSpecificKey(const std::string& key) {
  for (const char* k : kKindSpecificKeys) {
    if (key == k) return true;
  }
  return false;
}

absl::Status Invalid(size_t index, const std::string& key, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("fault rule ", index, ": '", key, "' ", what));
}

// An integer value in [min, max]. JSON floats are refused even when integral (1.0):
// the config format documents integers, and accepting 1.5 by truncation would hide a typo.
absl::StatusOr<int64_t> GetInt(const json& value, size_t index, const std::string& key, int64_t min,
                               int64_t max) {
  const std::string range = absl::StrCat("must be an integer in [", min, ", ", max, "]");
  if (value.is_number_unsigned()) {
    // nlohmann stores every non-negative integer literal as unsigned: check both ends.
    const auto v = value.get<uint64_t>();
    if (v > static_cast<uint64_t>(max)) return Invalid(index, key, range);
    if (static_cast<int64_t>(v) < min) return Invalid(index, key, range);
    return static_cast<int64_t>(v);
  }
  if (!value.is_number_integer()) return Invalid(index, key, range);
  const auto v = value.get<int64_t>();
  if (v < min || v > max) return Invalid(index, key, range);
  return v;
}

// Retry-After (RFC 9110 §10.2.3): delta-seconds, or an HTTP-date. Only the preferred
// IMF-fixdate form ("Sun, 06 Nov 1994 08:49:37 GMT") is accepted for a date: it is the
// form servers must send, and the emulator sends the string verbatim.
bool IsValidRetryAfter(const std::string& text) {
  if (text.empty()) return false;
  if (std::all_of(text.begin(), text.end(), [](char c) { return absl::ascii_isdigit(c); })) {
    uint64_t seconds = 0;
    return absl::SimpleAtoi(text, &seconds);
  }
  absl::Time parsed;
  std::string error;
  return absl::ParseTime("%a, %d %b %Y %H:%M:%S GMT", text, &parsed, &error);
}

// A rule's kind (HTTP or webhook: `rule.kind` or `rule.webhook_kind`, and `rule.webhook`)
// and its target (`route`, or `event` for a webhook rule); the kind's name.
absl::StatusOr<std::string> ParseKindAndTarget(const json& object, size_t index, FaultRule& rule) {
  const auto kind_it = object.find("kind");
  if (kind_it == object.end()) return Invalid(index, "kind", "is required");
  if (!kind_it->is_string()) return Invalid(index, "kind", "must be a string");
  const std::string kind_name = kind_it->get<std::string>();
  bool is_http_kind = false;
  bool is_webhook_kind = false;
  for (const auto& entry : kHttpKinds) {
    if (kind_name == entry.name) {
      rule.kind = entry.kind;
      is_http_kind = true;
    }
  }
  for (const auto& entry : kWebhookKinds) {
    if (kind_name == entry.name) {
      rule.webhook_kind = entry.kind;
      is_webhook_kind = true;
    }
  }
  if (!is_http_kind && !is_webhook_kind) {
    return Invalid(index, "kind", absl::StrCat("has unknown value \"", kind_name, "\""));
  }

  // `webhook` may be omitted: the two kind sets do not overlap, so the kind says which
  // one is meant. When given it must agree with the kind.
  rule.webhook = is_webhook_kind;
  if (const auto it = object.find("webhook"); it != object.end()) {
    if (!it->is_boolean()) return Invalid(index, "webhook", "must be a boolean");
    if (it->get<bool>() != is_webhook_kind) {
      return Invalid(index, "kind",
                     absl::StrCat("\"", kind_name, "\" is not ",
                                  it->get<bool>() ? "a webhook" : "an HTTP", " fault kind"));
    }
  }

  // The target: `route` for HTTP rules; `event` (or `route`, not both) for webhook rules.
  const auto route_it = object.find("route");
  const auto event_it = object.find("event");
  if (event_it != object.end() && !rule.webhook) {
    return Invalid(index, "event", "applies only to webhook rules (use \"route\")");
  }
  if (event_it != object.end() && route_it != object.end()) {
    return Invalid(index, "event", "and 'route' are mutually exclusive");
  }
  const auto target_it = event_it != object.end() ? event_it : route_it;
  if (target_it != object.end()) {
    const std::string key = event_it != object.end() ? "event" : "route";
    if (!target_it->is_string() || target_it->get<std::string>().empty()) {
      return Invalid(index, key, "must be a non-empty string (a name or \"*\")");
    }
    rule.route = target_it->get<std::string>();
  }
  return kind_name;
}

// What a rule does once it fires: latency, status, body, Retry-After, count.
absl::Status ParseEffects(const json& object, size_t index, FaultRule& rule) {
  // A day is far beyond any useful latency and keeps the arithmetic clear of overflow.
  constexpr int64_t kMaxLatencyMs = 24 * 3600 * 1000;
  if (const auto it = object.find("latency_ms"); it != object.end()) {
    auto ms = GetInt(*it, index, "latency_ms", 0, kMaxLatencyMs);
    if (!ms.ok()) return ms.status();
    rule.latency = std::chrono::milliseconds(*ms);
  }
  if (const auto it = object.find("latency_max_ms"); it != object.end()) {
    auto ms = GetInt(*it, index, "latency_max_ms", 0, kMaxLatencyMs);
    if (!ms.ok()) return ms.status();
    rule.latency_max = std::chrono::milliseconds(*ms);
    if (rule.latency_max < rule.latency) {
      return Invalid(index, "latency_max_ms", "must be >= 'latency_ms'");
    }
  }

  if (const auto it = object.find("status"); it != object.end()) {
    auto status = GetInt(*it, index, "status", 100, 599);
    if (!status.ok()) return status.status();
    rule.status = static_cast<int>(*status);
  }

  if (const auto it = object.find("body"); it != object.end()) {
    // A JSON body may be given inline as an object/array for convenience; it is stored
    // (and emitted by FaultRuleToJson) as its text, which parses back to the same rule.
    if (it->is_string()) {
      rule.body = it->get<std::string>();
    } else if (it->is_object() || it->is_array()) {
      rule.body = it->dump();
    } else {
      return Invalid(index, "body", "must be a string, object or array");
    }
  }

  if (const auto it = object.find("retry_after"); it != object.end()) {
    std::string text;
    if (it->is_number_integer() || it->is_number_unsigned()) {
      auto seconds = GetInt(*it, index, "retry_after", 0, std::numeric_limits<int64_t>::max());
      if (!seconds.ok()) return seconds.status();
      text = absl::StrCat(*seconds);
    } else if (it->is_string()) {
      text = it->get<std::string>();
    }
    if (!IsValidRetryAfter(text)) {
      return Invalid(index, "retry_after",
                     "must be delta-seconds or an HTTP-date "
                     "(\"Sun, 06 Nov 1994 08:49:37 GMT\")");
    }
    rule.retry_after = text;
  }

  if (const auto it = object.find("count"); it != object.end()) {
    auto count = GetInt(*it, index, "count", 1, std::numeric_limits<int>::max());
    if (!count.ok()) return count.status();
    rule.count = static_cast<int>(*count);
  }
  return absl::OkStatus();
}

absl::StatusOr<FaultRule> ParseOneRule(const json& object, size_t index) {
  if (!object.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("fault rule ", index, ": must be a JSON object"));
  }
  static constexpr const char* kKnownKeys[] = {
      "route",          "event",  "kind", "probability", "times", "latency_ms",
      "latency_max_ms", "status", "body", "retry_after", "count", "webhook"};
  for (const auto& [key, value] : object.items()) {
    bool known = false;
    for (const char* k : kKnownKeys) known = known || key == k;
    if (!known) return Invalid(index, key, "is not a known key");
  }

  FaultRule rule;

  absl::StatusOr<std::string> kind = ParseKindAndTarget(object, index, rule);
  if (!kind.ok()) return kind.status();
  const std::string& kind_name = *kind;

  if (const auto it = object.find("probability"); it != object.end()) {
    if (!it->is_number()) return Invalid(index, "probability", "must be a number in [0, 1]");
    const double p = it->get<double>();
    // NaN fails both comparisons, so it is rejected too.
    if (!(p >= 0.0 && p <= 1.0)) {
      return Invalid(index, "probability", "must be a number in [0, 1]");
    }
    rule.probability = p;
  }

  if (const auto it = object.find("times"); it != object.end()) {
    auto times = GetInt(*it, index, "times", -1, std::numeric_limits<int>::max());
    if (!times.ok()) return times.status();
    // 0 would be a rule that can never fire; it is almost certainly a mistake.
    if (*times == 0) return Invalid(index, "times", "must be -1 (unlimited) or >= 1");
    rule.times = static_cast<int>(*times);
  }

  // Kind-specific keys: refuse those the kind ignores (see kKindSpecificKeys).
  for (const auto& [key, value] : object.items()) {
    if (!IsKindSpecificKey(key)) continue;
    const bool applies = rule.webhook ? KeyAppliesToWebhookKind(key, rule.webhook_kind)
                                      : KeyAppliesToHttpKind(key, rule.kind);
    if (!applies) {
      return Invalid(index, key, absl::StrCat("does not apply to kind \"", kind_name, "\""));
    }
  }

  if (absl::Status effects = ParseEffects(object, index, rule); !effects.ok()) return effects;
  return rule;
}

// Uniform double in [0, 1) from the top 53 bits. std::uniform_real_distribution is not
// specified bit-for-bit across standard libraries; this keeps a seed's fire pattern the
// same wherever the sandbox is built.
double UnitDraw(std::mt19937_64& rng) {
  return static_cast<double>(rng() >> 11) * (1.0 / 9007199254740992.0);  // 2^-53
}

// Uniform integer in [lo, hi] by rejection sampling, for the same portability reason.
int64_t UniformInt(std::mt19937_64& rng, int64_t lo, int64_t hi) {
  const uint64_t span = static_cast<uint64_t>(hi - lo) + 1;
  // The largest multiple of `span` representable; draws at or above it would bias.
  const uint64_t limit = std::numeric_limits<uint64_t>::max() -
                         (std::numeric_limits<uint64_t>::max() % span + 1) % span;
  uint64_t draw = rng();
  while (draw > limit) draw = rng();
  return lo + static_cast<int64_t>(draw % span);
}

}  // namespace

absl::StatusOr<std::vector<FaultRule>> ParseFaultRules(const nlohmann::json& json) {
  std::vector<FaultRule> rules;
  if (json.is_object()) {
    auto rule = ParseOneRule(json, 0);
    if (!rule.ok()) return rule.status();
    rules.push_back(*std::move(rule));
    return rules;
  }
  if (!json.is_array()) {
    return absl::InvalidArgumentError("fault rules must be a JSON object or an array of objects");
  }
  rules.reserve(json.size());
  for (size_t i = 0; i < json.size(); ++i) {
    auto rule = ParseOneRule(json[i], i);
    if (!rule.ok()) return rule.status();
    rules.push_back(*std::move(rule));
  }
  return rules;
}

nlohmann::json FaultRuleToJson(const FaultRule& rule) {
  json out = json::object();
  out[rule.webhook ? "event" : "route"] = rule.route;
  out["webhook"] = rule.webhook;
  out["kind"] = rule.webhook ? WebhookKindToName(rule.webhook_kind) : HttpKindToName(rule.kind);
  out["probability"] = rule.probability;
  out["times"] = rule.times;
  // Only the keys the kind uses, so that the output parses back (ParseOneRule refuses
  // keys a kind ignores).
  if (rule.webhook) {
    switch (rule.webhook_kind) {
      case WebhookFaultKind::kDelay:
        out["latency_ms"] = rule.latency.count();
        break;
      case WebhookFaultKind::kFailFirst:
        out["count"] = rule.count;
        break;
      case WebhookFaultKind::kDuplicate:
      case WebhookFaultKind::kReorder:
      case WebhookFaultKind::kDrop:
        break;
    }
    return out;
  }
  switch (rule.kind) {
    case FaultKind::kLatency:
      out["latency_ms"] = rule.latency.count();
      if (rule.latency_max > rule.latency) out["latency_max_ms"] = rule.latency_max.count();
      break;
    case FaultKind::kError:
      out["status"] = rule.status;
      out["body"] = rule.body;
      break;
    case FaultKind::kRateLimit:
      out["retry_after"] = rule.retry_after;
      break;
    case FaultKind::kSlowBody:
      out["latency_ms"] = rule.latency.count();
      break;
    case FaultKind::kReset:
    case FaultKind::kTruncate:
    case FaultKind::kMalformed:
      break;
  }
  return out;
}

FaultInjector::FaultInjector(uint64_t seed) : rng_(seed) {}

void FaultInjector::AddRules(std::vector<FaultRule> rules) {
  absl::MutexLock lock(&mu_);
  for (auto& rule : rules) rules_.push_back(std::move(rule));
}

void FaultInjector::Clear() {
  absl::MutexLock lock(&mu_);
  rules_.clear();
}

std::vector<FaultRule> FaultInjector::Rules() const {
  absl::MutexLock lock(&mu_);
  return rules_;
}

std::optional<FaultDecision> FaultInjector::DecideHttp(const std::string& route) {
  return Decide(route, /*webhook=*/false);
}

std::optional<FaultDecision> FaultInjector::DecideWebhook(const std::string& event_name) {
  return Decide(event_name, /*webhook=*/true);
}

std::optional<FaultDecision> FaultInjector::Decide(const std::string& name, bool webhook) {
  absl::MutexLock lock(&mu_);
  // Two passes: rules naming `name` exactly, then "*" rules; insertion order within each.
  for (const bool wildcard : {false, true}) {
    for (auto it = rules_.begin(); it != rules_.end(); ++it) {
      FaultRule& rule = *it;
      if (rule.webhook != webhook) continue;
      if (wildcard ? rule.route != "*" : rule.route != name) continue;
      // A rule named "*" matched in the first pass only when `name` is literally "*";
      // skipping it there keeps its place in the wildcard pass.
      if (!wildcard && rule.route == "*") continue;
      if (rule.times == 0) continue;  // only reachable through AddRules with times 0
      // Draw only for a real chance: certain and impossible rules then do not consume
      // numbers, so adding one does not shift the pattern of the others.
      if (rule.probability <= 0.0) continue;
      if (rule.probability < 1.0 && !(UnitDraw(rng_) < rule.probability)) continue;

      FaultDecision decision{rule};
      if (!webhook && rule.kind == FaultKind::kLatency && rule.latency_max > rule.latency) {
        decision.rule.latency = std::chrono::milliseconds(
            UniformInt(rng_, rule.latency.count(), rule.latency_max.count()));
      }
      if (rule.times > 0) {
        --rule.times;
        decision.rule.times = rule.times;  // what remains after this firing
        if (rule.times == 0) rules_.erase(it);
      }
      return decision;
    }
  }
  return std::nullopt;
}

}  // namespace inspection::sandbox
