#include "gateway/security/authz_policy.h"

#include <fstream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"

namespace inspection::security {
namespace {

using nlohmann::json;

// "*", "prefix*", "*suffix" or exact.
bool PatternMatches(const std::string& pattern, absl::string_view value) {
  if (pattern == "*") return true;
  if (pattern.size() > 1 && pattern.back() == '*') {
    return absl::StartsWith(value, absl::string_view(pattern).substr(0, pattern.size() - 1));
  }
  if (pattern.size() > 1 && pattern.front() == '*') {
    return absl::EndsWith(value, absl::string_view(pattern).substr(1));
  }
  return value == pattern;
}

bool AnyMatches(const std::vector<std::string>& patterns, absl::string_view value) {
  for (const std::string& pattern : patterns) {
    if (PatternMatches(pattern, value)) return true;
  }
  return false;
}

absl::Status Invalid(const std::string& where, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("authorization policy: ", where, ": ", what));
}

absl::StatusOr<std::vector<std::string>> Strings(const json& value, const std::string& where) {
  if (!value.is_array()) return Invalid(where, "must be an array of strings");
  std::vector<std::string> out;
  for (const json& item : value) {
    if (!item.is_string()) return Invalid(where, "must be an array of strings");
    out.push_back(item.get<std::string>());
  }
  return out;
}

}  // namespace

absl::StatusOr<std::shared_ptr<const AuthzPolicy>> AuthzPolicy::Parse(absl::string_view text) {
  const json document = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (document.is_discarded() || !document.is_object()) {
    return Invalid("the file", "is not a JSON object");
  }
  auto policy = std::make_shared<AuthzPolicy>();
  for (auto it = document.begin(); it != document.end(); ++it) {
    if (it.key() != "name" && it.key() != "deny_rules" && it.key() != "allow_rules") {
      return Invalid("the policy", absl::StrCat("unknown field \"", it.key(), "\""));
    }
  }
  if (!document.contains("name") || !document["name"].is_string() ||
      document["name"].get<std::string>().empty()) {
    return Invalid("the policy", "\"name\" must be a non-empty string");
  }
  policy->name_ = document["name"].get<std::string>();
  if (!document.contains("allow_rules"))
    return Invalid("the policy", "\"allow_rules\" is required");
  for (const char* list : {"deny_rules", "allow_rules"}) {
    if (!document.contains(list)) continue;
    const json& rules = document[list];
    if (!rules.is_array()) return Invalid(list, "must be an array of rules");
    for (size_t i = 0; i < rules.size(); ++i) {
      const std::string where = absl::StrCat(list, "[", i, "]");
      const json& in = rules[i];
      if (!in.is_object()) return Invalid(where, "must be an object");
      Rule rule;
      for (auto field = in.begin(); field != in.end(); ++field) {
        if (field.key() != "name" && field.key() != "source" && field.key() != "request") {
          return Invalid(where, absl::StrCat("unknown field \"", field.key(), "\""));
        }
      }
      if (!in.contains("name") || !in["name"].is_string() ||
          in["name"].get<std::string>().empty()) {
        return Invalid(where, "\"name\" must be a non-empty string");
      }
      rule.name = in["name"].get<std::string>();
      if (in.contains("source")) {
        const json& source = in["source"];
        if (!source.is_object()) return Invalid(where + ".source", "must be an object");
        if (source.contains("principals")) {
          auto principals = Strings(source["principals"], where + ".source.principals");
          if (!principals.ok()) return principals.status();
          rule.principals = *std::move(principals);
          rule.any_principal = false;
        }
      }
      if (in.contains("request")) {
        const json& request = in["request"];
        if (!request.is_object()) return Invalid(where + ".request", "must be an object");
        if (request.contains("paths")) {
          auto paths = Strings(request["paths"], where + ".request.paths");
          if (!paths.ok()) return paths.status();
          rule.paths = *std::move(paths);
        }
        if (request.contains("headers")) {
          const json& headers = request["headers"];
          if (!headers.is_array()) return Invalid(where + ".request.headers", "must be an array");
          for (size_t h = 0; h < headers.size(); ++h) {
            const std::string at = absl::StrCat(where, ".request.headers[", h, "]");
            if (!headers[h].is_object() || !headers[h].contains("key") ||
                !headers[h]["key"].is_string() || !headers[h].contains("values")) {
              return Invalid(at, "must be {\"key\": \"...\", \"values\": [...]}");
            }
            HeaderMatcher matcher;
            matcher.key = absl::AsciiStrToLower(headers[h]["key"].get<std::string>());
            if (matcher.key.empty() || matcher.key[0] == ':' || matcher.key == "host" ||
                absl::StartsWith(matcher.key, "grpc-")) {
              return Invalid(at, absl::StrCat("header \"", matcher.key, "\" cannot be matched"));
            }
            auto values = Strings(headers[h]["values"], at + ".values");
            if (!values.ok()) return values.status();
            if (values->empty()) return Invalid(at + ".values", "must not be empty");
            matcher.values = *std::move(values);
            rule.headers.push_back(std::move(matcher));
          }
        }
      }
      (std::string(list) == "deny_rules" ? policy->deny_ : policy->allow_)
          .push_back(std::move(rule));
    }
  }
  return std::shared_ptr<const AuthzPolicy>(std::move(policy));
}

bool AuthzPolicy::Matches(const Rule& rule, const AuthzRequest& request) {
  if (!rule.any_principal) {
    bool matched = false;
    for (const std::string& principal : request.principals) {
      if (AnyMatches(rule.principals, principal)) {
        matched = true;
        break;
      }
    }
    if (!matched) return false;
  }
  if (!rule.paths.empty() && !AnyMatches(rule.paths, request.path)) return false;
  for (const HeaderMatcher& matcher : rule.headers) {
    bool matched = false;
    for (const auto& [key, value] : request.headers) {
      if (key == matcher.key && AnyMatches(matcher.values, value)) {
        matched = true;
        break;
      }
    }
    if (!matched) return false;
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
  std::ifstream file(path);
  if (!file) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  *text = std::string((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
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
