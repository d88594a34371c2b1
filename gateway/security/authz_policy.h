#ifndef GATEWAY_SECURITY_AUTHZ_POLICY_H_
#define GATEWAY_SECURITY_AUTHZ_POLICY_H_

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace inspection::security {

// The caller and the call, as the policy sees them.
struct AuthzRequest {
  // The peer's identities: its certificate's SPIFFE ID, subject alternative names and
  // common name. Empty for a caller without a certificate.
  std::vector<std::string> principals;
  // "/inspection.v1.EventConfigService/UpdateWebhookConfig".
  std::string path;
  // The call's metadata (lower-case keys).
  std::vector<std::pair<std::string, std::string>> headers;
};

struct AuthzDecision {
  bool allowed = false;
  // The rule that decided ("" when no allow rule matched).
  std::string rule;
};

// A policy in gRPC's authorization policy format (gRFC A43), the JSON that
// grpc::experimental::FileWatcherAuthorizationPolicyProvider reads:
//   {"name": "...",
//    "deny_rules":  [RULE, ...],   optional
//    "allow_rules": [RULE, ...]}   required
//   RULE: {"name": "...",
//          "source":  {"principals": ["spiffe://corp/ns/claims/sa/intake", "*"]},  optional
//          "request": {"paths": ["/inspection.v1.TokenService/*"],                  optional
//                      "headers": [{"key": "x-vendor-account", "values": ["preprod"]}]}}
// A call is denied when a deny rule matches it; otherwise allowed when an allow rule
// matches it; otherwise denied. A rule matches when its source and its request match: a
// principal of the caller matches one of `principals` (absent: any caller, with or without
// a certificate; "*": any caller with one); the path matches one of `paths` (absent: any);
// and every header matcher matches (the header is present with one of `values`). Patterns
// are exact, "prefix*", "*suffix" or "*". Header keys may not be pseudo-headers, "host" or
// start with "grpc-". Immutable and thread-safe once parsed.
//
// Debian bookworm's gRPC 1.51 ships the authorization filter but not the library that
// parses these policies (grpc_authorization_policy_provider_*), so the gateway evaluates
// the same format itself, at the start of every RPC (services/), with the peer identity
// from gRPC's auth context.
class AuthzPolicy {
 public:
  // InvalidArgument naming what is wrong (rule and field).
  static absl::StatusOr<std::shared_ptr<const AuthzPolicy>> Parse(absl::string_view json);

  AuthzDecision Evaluate(const AuthzRequest& request) const;
  const std::string& name() const { return name_; }

 private:
  struct HeaderMatcher {
    std::string key;
    std::vector<std::string> values;
  };
  struct Rule {
    std::string name;
    bool any_principal = true;  // no "source", or no "principals"
    std::vector<std::string> principals;
    std::vector<std::string> paths;  // empty: any path
    std::vector<HeaderMatcher> headers;
  };
  static bool Matches(const Rule& rule, const AuthzRequest& request);

  std::string name_;
  std::vector<Rule> deny_;
  std::vector<Rule> allow_;
};

// The policy of a file, read now and again every `interval` without a restart. A file
// that cannot be read or parsed later keeps the last good policy in force (reported
// through `on_reload_error`, never with the file's content). Thread-safe.
class AuthzPolicyWatcher {
 public:
  // InvalidArgument / NotFound when the file cannot be used now.
  static absl::StatusOr<std::unique_ptr<AuthzPolicyWatcher>> Start(
      std::string path, std::chrono::seconds interval,
      std::function<void(const absl::Status&)> on_reload_error = nullptr);
  ~AuthzPolicyWatcher();

  AuthzDecision Evaluate(const AuthzRequest& request) const;

 private:
  AuthzPolicyWatcher(std::string path, std::chrono::seconds interval,
                     std::function<void(const absl::Status&)> on_reload_error,
                     std::shared_ptr<const AuthzPolicy> policy);
  void Loop();

  const std::string path_;
  const std::chrono::seconds interval_;
  const std::function<void(const absl::Status&)> on_reload_error_;
  mutable absl::Mutex mu_;
  std::shared_ptr<const AuthzPolicy> policy_ ABSL_GUARDED_BY(mu_);
  std::string last_text_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

// Reads a policy file and parses it.
absl::StatusOr<std::shared_ptr<const AuthzPolicy>> ReadAuthzPolicyFile(const std::string& path,
                                                                       std::string* text);

}  // namespace inspection::security

#endif  // GATEWAY_SECURITY_AUTHZ_POLICY_H_
