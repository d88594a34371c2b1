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

// The peer as gRPC's authorization engine sees it (gRFC A43; EvaluateArgs in gRPC's
// src/core/lib/security/authorization/evaluate_args.cc, read from the connection's auth
// context; PeerOf in peer_identity.h builds it from grpc::AuthContext).
struct AuthzPeer {
  // The connection is TLS (auth property "transport_security_type" is "ssl" or "tls"), with
  // or without a client certificate. A principal never matches a peer that is not.
  bool authenticated = false;
  // The client certificate's URI SANs ("peer_uri") and DNS SANs ("peer_dns"), in
  // certificate order; empty without a certificate.
  std::vector<std::string> uri_sans;
  std::vector<std::string> dns_sans;
  // The whole subject in RFC 2253 form ("x509_subject": "CN=claims-api,O=corp"); "" without
  // a certificate. Never the bare common name.
  std::string subject;
};

// The caller and the call, as the policy sees them.
struct AuthzRequest {
  AuthzPeer peer;
  // "/inspection.v1.EventConfigService/UpdateWebhookConfig".
  std::string path;
  // The call's metadata (lower-case keys), in arrival order for values of one key.
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
//    "deny_rules":  [RULE, ...],   optional, not empty
//    "allow_rules": [RULE, ...]}   required, not empty
//   RULE: {"name": "...",
//          "source":  {"principals": ["spiffe://corp/ns/claims/sa/intake", "*"]},  optional
//          "request": {"paths": ["/inspection.v1.TokenService/*"],                  optional
//                      "headers": [{"key": "x-vendor-account", "values": ["preprod"]}]}}
//
// Evaluated with the semantics of a current gRPC (master's src/core/lib/security/
// authorization/rbac_translator.cc, matchers.cc, evaluate_args.cc and
// grpc_authorization_engine.cc; gRPC's own cases are ported to
// tests/gateway/authz_conformance_test.cc):
// - A call is denied when a deny rule matches it; otherwise allowed when an allow rule
//   matches it; otherwise denied. Rules of one list are tried in name order (gRPC keeps
//   them in a std::map), so the rule reported is the first matching one by name.
// - A rule matches when its source and its request match. Absent or empty "source",
//   "principals", "request", "paths" or "headers": no condition.
// - "principals" (one must match): only on an authenticated (TLS) peer; a pattern matches
//   when it matches one of the URI SANs, else one of the DNS SANs, else the whole RFC 2253
//   subject. So "" matches a TLS caller without a certificate, and a common name never
//   matches on its own.
// - "paths" (one must match) against the full method name.
// - "headers" (all must match): a header matches when the values the call sent for that
//   key, joined with "," in arrival order, match one of "values"; an absent header never
//   matches ("*" included).
// - Patterns: "*" matches any non-empty value (gRPC's regex ".+": no line feed either);
//   "*abc" ends with "abc" (so "*abc*" ends with "abc*"); "abc*" starts with "abc";
//   anything else is exact. Case-sensitive.
// Parse refuses every policy gRPC's translator refuses, plus (deliberately, so nothing is
// silently ignored): "audit_logging_options" (audit loggers, added to gRPC after 1.51; the gateway
// has its own audit lines), two rules of one list with the same name (gRPC keeps the last one
// only), header keys with upper-case letters (gRPC never matches them: metadata keys are
// lower-case), and an empty policy name. Immutable and thread-safe once parsed.
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

  // A string pattern of the policy ("*", "*suffix", "prefix*" or exact), as gRPC's
  // GetStringMatcher reads it.
  class Pattern {
   public:
    explicit Pattern(absl::string_view pattern);
    bool Matches(absl::string_view value) const;

   private:
    enum class Type { kExact, kPrefix, kSuffix, kNonEmpty };
    Type type_;
    std::string text_;
  };

  // One `headers` entry of a rule's request, and one rule, as parsed.
  struct HeaderMatcher {
    std::string key;
    std::vector<Pattern> values;
  };
  struct Rule {
    std::string name;
    std::vector<Pattern> principals;  // empty: any caller
    std::vector<Pattern> paths;       // empty: any path
    std::vector<HeaderMatcher> headers;
  };

 private:
  static bool Matches(const Rule& rule, const AuthzRequest& request);

  std::string name_;
  std::vector<Rule> deny_;   // by name
  std::vector<Rule> allow_;  // by name
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
