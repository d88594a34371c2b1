#include "gateway/security/authz_policy.h"

#include <algorithm>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gateway/settings/bounded_file.h"
#include "nlohmann/json.hpp"

namespace inspection::security {
namespace {

using nlohmann::json;

absl::Status Invalid(absl::string_view where, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("authorization policy: ", where, ": ", what));
}

// The headers gRPC's translator refuses besides ":"-pseudo-headers and "grpc-*"
// (IsUnsupportedHeader in rbac_translator.cc): "host" and the hop-by-hop headers,
// compared without case.
bool IsUnsupportedHeader(absl::string_view key) {
  for (absl::string_view unsupported :
       {"host", "connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te",
        "trailer", "transfer-encoding", "upgrade"}) {
    if (absl::EqualsIgnoreCase(key, unsupported)) return true;
  }
  return false;
}

// Parses `text` like gRPC's JSON reader, which refuses an object with the same key twice
// (nlohmann keeps the last one silently).
json ParseJson(absl::string_view text, std::string* duplicate_key) {
  std::vector<std::set<std::string>> keys;
  return json::parse(
      text.begin(), text.end(),
      [&](int /*depth*/, json::parse_event_t event, json& parsed) {
        if (event == json::parse_event_t::object_start) {
          keys.emplace_back();
        } else if (event == json::parse_event_t::object_end) {
          if (!keys.empty()) keys.pop_back();
        } else if (event == json::parse_event_t::key && !keys.empty() &&
                   !keys.back().insert(parsed.get<std::string>()).second &&
                   duplicate_key->empty()) {
          *duplicate_key = parsed.get<std::string>();
        }
        return true;
      },
      /*allow_exceptions=*/false);
}

absl::StatusOr<std::vector<AuthzPolicy::Pattern>> Patterns(const json& value,
                                                           const std::string& where) {
  if (!value.is_array()) return Invalid(where, "must be an array of strings");
  std::vector<AuthzPolicy::Pattern> out;
  for (size_t i = 0; i < value.size(); ++i) {
    if (!value[i].is_string()) return Invalid(absl::StrCat(where, "[", i, "]"), "must be a string");
    out.emplace_back(value[i].get<std::string>());
  }
  return out;
}

// One entry of a rule's request.headers (`at` within the rule at `where`).
absl::StatusOr<AuthzPolicy::HeaderMatcher> ParseHeaderMatcher(const json& header,
                                                              const std::string& where,
                                                              const std::string& at,
                                                              const std::string& of_rule) {
  auto invalid = [&](const std::string& field, absl::string_view what) {
    return Invalid(absl::StrCat(where, field), absl::StrCat(what, of_rule));
  };
  if (!header.is_object()) {
    return invalid(at, "must be {\"key\": \"...\", \"values\": [...]}");
  }
  for (auto field = header.begin(); field != header.end(); ++field) {
    if (field.key() != "key" && field.key() != "values") {
      return invalid(at, absl::StrCat("unknown field \"", field.key(), "\" (known: key, values)"));
    }
  }
  if (!header.contains("key") || !header["key"].is_string() ||
      header["key"].get<std::string>().empty()) {
    return invalid(at + ".key", "must be a non-empty string");
  }
  AuthzPolicy::HeaderMatcher matcher;
  matcher.key = header["key"].get<std::string>();
  if (absl::StartsWith(matcher.key, ":") || absl::StartsWith(matcher.key, "grpc-") ||
      IsUnsupportedHeader(matcher.key)) {
    return invalid(at + ".key",
                   absl::StrCat("header \"", matcher.key,
                                "\" cannot be matched (no pseudo-headers, \"grpc-*\", \"host\" "
                                "or hop-by-hop headers; match the method with \"paths\")"));
  }
  if (matcher.key != absl::AsciiStrToLower(matcher.key)) {
    return invalid(at + ".key", absl::StrCat("header \"", matcher.key,
                                             "\" has upper-case letters: metadata keys are "
                                             "lower-case, so gRPC would never match it; write \"",
                                             absl::AsciiStrToLower(matcher.key), "\""));
  }
  if (!header.contains("values")) return invalid(at + ".values", "is required");
  auto values = Patterns(header["values"], where + at + ".values");
  if (!values.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(values.status().message(), of_rule));
  }
  if (values->empty()) return invalid(at + ".values", "must not be empty");
  matcher.values = *std::move(values);
  return matcher;
}

// One rule of deny_rules or allow_rules (`where`: "allow_rules[2]"); `earlier_rules` are the
// list's rules before it.
absl::StatusOr<AuthzPolicy::Rule> ParseRule(const json& in, const std::string& where,
                                            const std::vector<AuthzPolicy::Rule>& earlier_rules) {
  if (!in.is_object()) return Invalid(where, "must be an object");
  if (!in.contains("name") || !in["name"].is_string() || in["name"].get<std::string>().empty()) {
    return Invalid(where, "\"name\" must be a non-empty string");
  }
  AuthzPolicy::Rule rule;
  rule.name = in["name"].get<std::string>();
  // Every later error names the rule too.
  const std::string of_rule = absl::StrCat(" (rule \"", rule.name, "\")");
  auto invalid = [&](const std::string& field, absl::string_view what) {
    return Invalid(absl::StrCat(where, field), absl::StrCat(what, of_rule));
  };
  for (auto field = in.begin(); field != in.end(); ++field) {
    if (field.key() != "name" && field.key() != "source" && field.key() != "request") {
      return invalid(
          "", absl::StrCat("unknown field \"", field.key(), "\" (known: name, source, request)"));
    }
  }
  for (const AuthzPolicy::Rule& earlier : earlier_rules) {
    if (earlier.name == rule.name) {
      return invalid("",
                     "another rule of this list has this name; gRPC would keep only "
                     "the last one, so give each rule its own name");
    }
  }
  if (in.contains("source")) {
    const json& source = in["source"];
    if (!source.is_object()) return invalid(".source", "must be an object");
    for (auto field = source.begin(); field != source.end(); ++field) {
      if (field.key() != "principals") {
        return invalid(".source",
                       absl::StrCat("unknown field \"", field.key(), "\" (known: principals)"));
      }
    }
    if (source.contains("principals")) {
      auto principals = Patterns(source["principals"], where + ".source.principals");
      if (!principals.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(principals.status().message(), of_rule));
      }
      rule.principals = *std::move(principals);
    }
  }
  if (in.contains("request")) {
    const json& request = in["request"];
    if (!request.is_object()) return invalid(".request", "must be an object");
    for (auto field = request.begin(); field != request.end(); ++field) {
      if (field.key() != "paths" && field.key() != "headers") {
        return invalid(".request",
                       absl::StrCat("unknown field \"", field.key(), "\" (known: paths, headers)"));
      }
    }
    if (request.contains("paths")) {
      auto paths = Patterns(request["paths"], where + ".request.paths");
      if (!paths.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(paths.status().message(), of_rule));
      }
      rule.paths = *std::move(paths);
    }
    if (request.contains("headers")) {
      const json& headers = request["headers"];
      if (!headers.is_array()) return invalid(".request.headers", "must be an array");
      for (size_t h = 0; h < headers.size(); ++h) {
        absl::StatusOr<AuthzPolicy::HeaderMatcher> matcher = ParseHeaderMatcher(
            headers[h], where, absl::StrCat(".request.headers[", h, "]"), of_rule);
        if (!matcher.ok()) return matcher.status();
        rule.headers.push_back(*std::move(matcher));
      }
    }
  }
  return rule;
}

}  // namespace

// gRPC's GetMatcherType (rbac_translator.cc): "*" first, then a leading "*", then a trailing
// one. Version note: "*" is safe_regex ".+" in current gRPC; the first translator (2021)
// made it prefix "", which also matched an empty value.
AuthzPolicy::Pattern::Pattern(absl::string_view pattern) {
  if (pattern == "*") {
    type_ = Type::kNonEmpty;
  } else if (absl::StartsWith(pattern, "*")) {
    type_ = Type::kSuffix;
    text_ = std::string(pattern.substr(1));
  } else if (absl::EndsWith(pattern, "*")) {
    type_ = Type::kPrefix;
    text_ = std::string(pattern.substr(0, pattern.size() - 1));
  } else {
    type_ = Type::kExact;
    text_ = std::string(pattern);
  }
}

bool AuthzPolicy::Pattern::Matches(absl::string_view value) const {
  switch (type_) {
    case Type::kExact:
      return value == text_;
    case Type::kPrefix:
      return absl::StartsWith(value, text_);
    case Type::kSuffix:
      return absl::EndsWith(value, text_);
    case Type::kNonEmpty:
      // RE2::FullMatch(value, ".+"): "." is any character but a line feed.
      return !value.empty() && value.find('\n') == absl::string_view::npos;
  }
  return false;
}

absl::StatusOr<std::shared_ptr<const AuthzPolicy>> AuthzPolicy::Parse(absl::string_view text) {
  std::string duplicate_key;
  const json document = ParseJson(text, &duplicate_key);
  if (document.is_discarded() || !document.is_object()) {
    return Invalid("the file", "is not a JSON object");
  }
  if (!duplicate_key.empty()) {
    return Invalid("the file", absl::StrCat("has the key \"", duplicate_key,
                                            "\" twice in one object (gRPC refuses it)"));
  }
  if (!document.contains("name") || !document["name"].is_string() ||
      document["name"].get<std::string>().empty()) {
    return Invalid("the policy", "\"name\" must be a non-empty string");
  }
  auto policy = std::make_shared<AuthzPolicy>();
  policy->name_ = document["name"].get<std::string>();
  // In key order (nlohmann and gRPC both keep objects sorted), as gRPC's
  // GenerateRbacPolicies: the first problem reported is the one gRPC reports.
  for (auto it = document.begin(); it != document.end(); ++it) {
    const std::string& list = it.key();
    if (list == "name") continue;
    if (list == "audit_logging_options") {
      return Invalid("the policy",
                     "\"audit_logging_options\" is not supported here: gRPC's audit loggers "
                     "(added to gRPC after 1.51) do not run in the gateway, which writes its own "
                     "audit lines and logs refused calls (README, \"Access control\")");
    }
    if (list != "deny_rules" && list != "allow_rules") {
      return Invalid("the policy", absl::StrCat("unknown field \"", list,
                                                "\" (known: name, deny_rules, allow_rules)"));
    }
    const json& rules = it.value();
    if (!rules.is_array()) return Invalid(list, "must be an array of rules");
    if (rules.empty()) {
      return Invalid(list, "must not be empty (gRPC refuses an empty list; leave it out)");
    }
    std::vector<Rule>& out = list == "deny_rules" ? policy->deny_ : policy->allow_;
    for (size_t i = 0; i < rules.size(); ++i) {
      absl::StatusOr<Rule> rule = ParseRule(rules[i], absl::StrCat(list, "[", i, "]"), out);
      if (!rule.ok()) return rule.status();
      out.push_back(*std::move(rule));
    }
    std::sort(out.begin(), out.end(), [](const Rule& a, const Rule& b) { return a.name < b.name; });
  }
  if (!document.contains("allow_rules")) {
    return Invalid("the policy", "\"allow_rules\" is required");
  }
  return std::shared_ptr<const AuthzPolicy>(std::move(policy));
}

namespace {

// gRPC's AuthenticatedAuthorizationMatcher: URI SANs, then DNS SANs, then the subject.
bool PrincipalMatches(const AuthzPolicy::Pattern& pattern, const AuthzPeer& peer) {
  for (const std::string& uri : peer.uri_sans) {
    if (pattern.Matches(uri)) return true;
  }
  for (const std::string& dns : peer.dns_sans) {
    if (pattern.Matches(dns)) return true;
  }
  return pattern.Matches(peer.subject);
}

}  // namespace

bool AuthzPolicy::Matches(const Rule& rule, const AuthzRequest& request) {
  if (!rule.principals.empty()) {
    if (!request.peer.authenticated) return false;
    if (std::none_of(rule.principals.begin(), rule.principals.end(),
                     [&](const Pattern& p) { return PrincipalMatches(p, request.peer); })) {
      return false;
    }
  }
  if (!rule.paths.empty()) {
    // gRPC's PathAuthorizationMatcher: a call without a path matches no path.
    if (request.path.empty()) return false;
    if (std::none_of(rule.paths.begin(), rule.paths.end(),
                     [&](const Pattern& p) { return p.Matches(request.path); })) {
      return false;
    }
  }
  for (const HeaderMatcher& matcher : rule.headers) {
    // gRPC's metadata GetStringValue: every value of the key, joined with ",".
    bool present = false;
    std::string joined;
    for (const auto& [key, value] : request.headers) {
      if (key != matcher.key) continue;
      if (present) joined.push_back(',');
      joined.append(value);
      present = true;
    }
    if (!present) return false;
    if (std::none_of(matcher.values.begin(), matcher.values.end(),
                     [&](const Pattern& p) { return p.Matches(joined); })) {
      return false;
    }
  }
  return true;
}

AuthzDecision AuthzPolicy::Evaluate(const AuthzRequest& request) const {
  for (const Rule& rule : deny_) {
    if (Matches(rule, request)) return {false, rule.name};
  }
  for (const Rule& rule : allow_) {
    if (Matches(rule, request)) return {true, rule.name};
  }
  return {false, ""};
}

absl::StatusOr<std::shared_ptr<const AuthzPolicy>> ReadAuthzPolicyFile(const std::string& path,
                                                                       std::string* text) {
  // Bounded, and only a regular file (a FIFO would block the start or the watcher's thread):
  // at start-up and on every refresh.
  absl::StatusOr<std::string> contents =
      settings::ReadBoundedFile(path, settings::kMaxPolicyFileBytes);
  if (!contents.ok()) {
    return absl::Status(
        settings::IsTooLarge(contents.status()) ? absl::StatusCode::kInvalidArgument
                                                : absl::StatusCode::kNotFound,
        absl::StrCat(
            "cannot read ", path, ": ", contents.status().message(),
            settings::IsTooLarge(contents.status()) ? ", the most a policy file may hold" : ""));
  }
  *text = *std::move(contents);
  absl::StatusOr<std::shared_ptr<const AuthzPolicy>> policy = AuthzPolicy::Parse(*text);
  if (!policy.ok()) {
    return absl::Status(policy.status().code(),
                        absl::StrCat(path, ": ", policy.status().message()));
  }
  return policy;
}

absl::StatusOr<std::unique_ptr<AuthzPolicyWatcher>> AuthzPolicyWatcher::Start(
    std::string path, std::chrono::seconds interval,
    std::function<void(const absl::Status&)> on_reload_error) {
  std::string text;
  absl::StatusOr<std::shared_ptr<const AuthzPolicy>> policy = ReadAuthzPolicyFile(path, &text);
  if (!policy.ok()) return policy.status();
  std::unique_ptr<AuthzPolicyWatcher> watcher(new AuthzPolicyWatcher(
      std::move(path), interval, std::move(on_reload_error), *std::move(policy)));
  {
    absl::MutexLock lock(&watcher->mu_);
    watcher->last_text_ = std::move(text);
  }
  watcher->thread_ = std::thread([self = watcher.get()] { self->Loop(); });
  return watcher;
}

AuthzPolicyWatcher::AuthzPolicyWatcher(std::string path, std::chrono::seconds interval,
                                       std::function<void(const absl::Status&)> on_reload_error,
                                       std::shared_ptr<const AuthzPolicy> policy)
    : path_(std::move(path)),
      interval_(interval),
      on_reload_error_(std::move(on_reload_error)),
      policy_(std::move(policy)) {}

AuthzPolicyWatcher::~AuthzPolicyWatcher() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void AuthzPolicyWatcher::Loop() {
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      if (mu_.AwaitWithTimeout(absl::Condition(&stopping_), absl::FromChrono(interval_))) return;
    }
    std::string text;
    absl::StatusOr<std::shared_ptr<const AuthzPolicy>> policy = ReadAuthzPolicyFile(path_, &text);
    bool report = false;
    {
      absl::MutexLock lock(&mu_);
      if (policy.ok()) {
        policy_ = *std::move(policy);
        last_text_ = std::move(text);
      } else if (text != last_text_) {
        last_text_ = std::move(text);  // reported once per broken version
        report = true;
      }
    }
    // Outside the lock: the callback logs, and Evaluate() on the RPC path must not wait on it.
    if (report && on_reload_error_) on_reload_error_(policy.status());
  }
}

AuthzDecision AuthzPolicyWatcher::Evaluate(const AuthzRequest& request) const {
  std::shared_ptr<const AuthzPolicy> policy;
  {
    absl::MutexLock lock(&mu_);
    policy = policy_;
  }
  return policy->Evaluate(request);
}

}  // namespace inspection::security
