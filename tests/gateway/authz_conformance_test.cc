// Conformance of the gateway's authorization policy evaluator (gateway/security/
// authz_policy.cc) to gRPC's own (gRFC A43), one table per area. gRPC's test cases are
// ported as data: each row names the gRPC test it comes from (file and TEST name), and
// keeps gRPC's policy, request and expectation; rows marked "gateway:" are ours. A gRPC case
// that cannot apply here is a skipped row saying why. The gRPC files read (grpc/grpc
// master): test/core/security/rbac_translator_test.cc (translator),
// test/core/security/authorization_matchers_test.cc (matchers),
// test/core/security/grpc_authorization_engine_test.cc (engine),
// test/core/security/evaluate_args_test.cc (peer), test/cpp/end2end/
// grpc_authz_end2end_test.cc (whole policies).
#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <grpc/grpc_security_constants.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "gateway/security/authz_policy.h"
#include "gateway/security/peer_identity.h"

namespace inspection::security {
namespace {

using ::testing::HasSubstr;

using Headers = std::vector<std::pair<std::string, std::string>>;

// A TLS caller with a client certificate.
AuthzPeer Cert(std::vector<std::string> uri_sans, std::vector<std::string> dns_sans,
               std::string subject) {
  AuthzPeer peer;
  peer.authenticated = true;
  peer.uri_sans = std::move(uri_sans);
  peer.dns_sans = std::move(dns_sans);
  peer.subject = std::move(subject);
  return peer;
}
// A TLS caller without a client certificate.
AuthzPeer TlsWithoutCert() {
  AuthzPeer peer;
  peer.authenticated = true;
  return peer;
}
// A caller on a plaintext connection.
AuthzPeer Plaintext() { return AuthzPeer(); }

// gtest parameter names: letters, digits and underscores.
std::string TestName(const std::string& source) {
  std::string name;
  for (char c : source) name.push_back(std::isalnum(static_cast<unsigned char>(c)) ? c : '_');
  return name;
}

// ---------------------------------------------------------------------------------------
// Translator: which policies are refused, and naming what (rbac_translator_test.cc,
// GenerateRbacPoliciesTest.*). `error`: nullptr for a valid policy, else a part of our
// message (the field's place), since our texts are our own.
struct TranslatorRow {
  const char* source;
  const char* policy;
  const char* error;
  const char* skipped_because = nullptr;
};

void PrintTo(const TranslatorRow& row, std::ostream* os) { *os << row.source; }

class TranslatorTest : public ::testing::TestWithParam<TranslatorRow> {};

TEST_P(TranslatorTest, RefusesWhatGrpcRefuses) {
  const TranslatorRow& row = GetParam();
  if (row.skipped_because != nullptr) GTEST_SKIP() << row.skipped_because;
  auto policy = AuthzPolicy::Parse(row.policy);
  if (row.error == nullptr) {
    EXPECT_TRUE(policy.ok()) << policy.status();
    return;
  }
  ASSERT_FALSE(policy.ok()) << "accepted: " << row.policy;
  EXPECT_EQ(policy.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(policy.status().message()), HasSubstr(row.error));
}

const TranslatorRow kTranslatorRows[] = {
    {"InvalidPolicy", R"({"name": "authz-policy",,})", "not a JSON object"},
    {"MissingAuthorizationPolicyName", R"({})", R"("name")"},
    {"IncorrectAuthorizationPolicyNameType", R"({"name": ["authz_policy"]})", R"("name")"},
    {"MissingAllowRules", R"({"name": "authz_policy"})", R"("allow_rules" is required)"},
    {"MissingDenyRules", R"({"name": "authz", "allow_rules": [{"name": "allow_policy"}]})",
     nullptr},
    {"IncorrectAllowRulesType", R"({"name": "authz", "allow_rules": {}})",
     "allow_rules: must be an array"},
    // gRPC reports the type before the missing allow_rules, as we do (key order).
    {"IncorrectDenyRulesType", R"({"name": "authz", "deny_rules": 123})",
     "deny_rules: must be an array"},
    {"IncorrectRuleType", R"({"name": "authz", "allow_rules": ["rule-a"]})",
     "allow_rules[0]: must be an object"},
    // Version note: gRPC accepted an empty list until "rules is empty." was added.
    {"EmptyRuleArray", R"({"name": "authz", "allow_rules": []})", "allow_rules: must not be empty"},
    {"MissingRuleNameField", R"({"name": "authz", "allow_rules": [{}]})",
     R"(allow_rules[0]: "name")"},
    {"IncorrectRuleNameType", R"({"name": "authz", "allow_rules": [{"name": 123}]})",
     R"(allow_rules[0]: "name")"},
    {"MissingSourceAndRequest", R"({"name": "authz", "allow_rules": [{"name": "allow_policy"}]})",
     nullptr},
    {"EmptySourceAndRequest",
     R"({"name": "authz", "allow_rules": [{"name": "allow_policy", "source": {},
         "request": {}}]})",
     nullptr},
    {"IncorrectSourceType",
     R"({"name": "authz", "allow_rules": [{"name": "allow_policy", "source": 111}]})",
     "allow_rules[0].source: must be an object"},
    {"IncorrectPrincipalsType",
     R"({"name": "authz", "allow_rules": [{"name": "allow_policy",
         "source": {"principals": ["*", 123]}}]})",
     "allow_rules[0].source.principals[1]: must be a string"},
    {"ParseSourceSuccess",
     R"({"name": "authz",
         "allow_rules": [{"name": "allow_policy", "source": {"principals": [
           "spiffe://foo.abc", "spiffe://bar*", "*baz", "spiffe://abc.*.com"]}}],
         "deny_rules": [{"name": "deny_policy", "source": {"principals": ["*"]}}]})",
     nullptr},
    {"IncorrectRequestType",
     R"({"name": "authz", "deny_rules": [{"name": "deny_policy", "request": 111}]})",
     "deny_rules[0].request: must be an object"},
    {"IncorrectPathType",
     R"({"name": "authz", "deny_rules": [{"name": "allow_policy",
         "request": {"paths": ["path-a", 123]}}]})",
     "deny_rules[0].request.paths[1]: must be a string"},
    {"ParseRequestPathsSuccess",
     R"({"name": "authz",
         "allow_rules": [{"name": "allow_policy", "request": {"paths": ["*"]}}],
         "deny_rules": [{"name": "deny_policy",
           "request": {"paths": ["path-foo", "path-bar*", "*baz"]}}]})",
     nullptr},
    {"IncorrectHeaderType",
     R"({"name": "authz", "deny_rules": [{"name": "allow_policy",
         "request": {"headers": ["header-a"]}}]})",
     "deny_rules[0].request.headers[0]: must be {"},
    {"MissingHeaderKey",
     R"({"name": "authz", "allow_rules": [{"name": "policy", "request": {"headers": [{}]}}]})",
     "allow_rules[0].request.headers[0].key: must be a non-empty string"},
    {"MissingHeaderValues",
     R"({"name": "authz", "allow_rules": [{"name": "policy",
         "request": {"headers": [{"key": "key-abc"}]}}]})",
     "allow_rules[0].request.headers[0].values: is required"},
    {"IncorrectHeaderKeyType",
     R"({"name": "authz", "allow_rules": [{"name": "policy",
         "request": {"headers": [{"key": 123, "values": ["value-a"]}]}}]})",
     "allow_rules[0].request.headers[0].key: must be a non-empty string"},
    {"IncorrectHeaderValuesType",
     R"({"name": "authz", "allow_rules": [{"name": "policy",
         "request": {"headers": [{"key": "key-abc", "values": {}}]}}]})",
     "allow_rules[0].request.headers[0].values: must be an array"},
    {"UnsupportedGrpcHeaders",
     R"({"name": "authz", "deny_rules": [{"name": "policy",
         "request": {"headers": [{"key": "grpc-xxx", "values": ["*"]}]}}]})",
     R"(header "grpc-xxx" cannot be matched)"},
    {"UnsupportedPseudoHeaders",
     R"({"name": "authz", "allow_rules": [{"name": "policy",
         "request": {"headers": [{"key": ":method", "values": ["*"]}]}}]})",
     R"(header ":method" cannot be matched)"},
    {"UnsupportedHostHeader",
     R"({"name": "authz", "allow_rules": [{"name": "policy",
         "request": {"headers": [{"key": "Host", "values": ["*"]}]}}]})",
     R"(header "Host" cannot be matched)"},
    {"EmptyHeaderValuesList",
     R"({"name": "authz", "allow_rules": [{"name": "allow_policy_1",
         "request": {"headers": [{"key": "key-a", "values": []}]}}]})",
     "allow_rules[0].request.headers[0].values: must not be empty"},
    {"ParseRequestHeadersSuccess",
     R"({"name": "authz", "allow_rules": [{"name": "allow_policy", "request": {"headers": [
         {"key": "key-1", "values": ["*"]},
         {"key": "key-2", "values": ["foo", "bar*", "*baz"]}]}}]})",
     nullptr},
    {"ParseRulesArraySuccess",
     R"({"name": "authz", "allow_rules": [
         {"name": "allow_policy_1", "source": {"principals": ["spiffe://foo.abc"]},
          "request": {"paths": ["foo"]}},
         {"name": "allow_policy_2"}]})",
     nullptr},
    // Version note: unknown fields are refused since gRPC added the checks below (the first
    // translator ignored them); we follow current gRPC.
    {"UnknownFieldInTopLayer",
     R"({"name": "authz", "allow_rules": [{"name": "allow_policy"}], "foo": "123"})",
     R"(unknown field "foo")"},
    {"UnknownFieldInRule",
     R"({"name": "authz", "allow_rules": [{"name": "allow_policy", "foo": {}}]})",
     R"(allow_rules[0]: unknown field "foo")"},
    {"UnknownFieldInSource",
     R"({"name": "authz", "allow_rules": [{"name": "allow_policy",
         "source": {"principals": ["spiffe://foo.abc"], "foo": {}}}]})",
     R"(allow_rules[0].source: unknown field "foo")"},
    {"UnknownFieldInRequest",
     R"({"name": "authz", "allow_rules": [{"name": "allow_policy", "request": {"foo": {}}}]})",
     R"(allow_rules[0].request: unknown field "foo")"},
    {"UnknownFieldInHeaders",
     R"({"name": "authz", "allow_rules": [{"name": "allow_policy",
         "request": {"headers": [{"foo": {}}]}}]})",
     R"(allow_rules[0].request.headers[0]: unknown field "foo")"},
    // audit_logging_options (gRPC's audit loggers, after 1.51): gRPC accepts these; the
    // gateway refuses the field outright rather than ignore it (it has no such loggers).
    {"EmptyAuditLoggingOptions (gRPC: valid; gateway: refused on purpose)",
     R"({"name": "authz", "allow_rules": [{"name": "allow_policy"}],
         "audit_logging_options": {}})",
     R"("audit_logging_options" is not supported here)"},
    {"UnknownFieldInAuditLoggingOptions",
     R"({"name": "authz", "allow_rules": [{"name": "allow_policy"}],
         "audit_logging_options": {"foo": 123}})",
     R"("audit_logging_options" is not supported here)"},
    {"AuditConditionIsNotString",
     R"({"name": "authz", "allow_rules": [{"name": "allow_policy"}],
         "audit_logging_options": {"audit_condition": 123}})",
     R"("audit_logging_options" is not supported here)"},
    {"AuditConditionNone / OnDeny / OnAllowWithAuditLoggers / the other audit cases", "", "",
     "audit loggers are not part of the gateway: every policy with audit_logging_options is "
     "refused (rows above), so gRPC's audit condition and logger configuration cases have "
     "nothing to check here"},
    // gateway: the hop-by-hop headers gRPC's IsUnsupportedHeader lists besides "host".
    {"gateway: hop-by-hop header connection",
     R"({"name": "p", "allow_rules": [{"name": "r",
         "request": {"headers": [{"key": "connection", "values": ["*"]}]}}]})",
     R"(header "connection" cannot be matched)"},
    {"gateway: hop-by-hop header te",
     R"({"name": "p", "allow_rules": [{"name": "r",
         "request": {"headers": [{"key": "te", "values": ["trailers"]}]}}]})",
     R"(header "te" cannot be matched)"},
    {"gateway: hop-by-hop header Keep-Alive, any case",
     R"({"name": "p", "allow_rules": [{"name": "r",
         "request": {"headers": [{"key": "Keep-Alive", "values": ["*"]}]}}]})",
     R"(header "Keep-Alive" cannot be matched)"},
    {"gateway: pseudo-header :path (match the method with paths)",
     R"({"name": "p", "allow_rules": [{"name": "r",
         "request": {"headers": [{"key": ":path", "values": ["/a/b"]}]}}]})",
     R"(header ":path" cannot be matched)"},
    {"gateway: pseudo-header :authority",
     R"({"name": "p", "allow_rules": [{"name": "r",
         "request": {"headers": [{"key": ":authority", "values": ["x"]}]}}]})",
     R"(header ":authority" cannot be matched)"},
    // gateway: stricter than gRPC on purpose (each would be silently ignored there).
    {"gateway: upper-case header key (gRPC would never match it)",
     R"({"name": "p", "allow_rules": [{"name": "r",
         "request": {"headers": [{"key": "X-Vendor-Account", "values": ["preprod"]}]}}]})",
     "has upper-case letters"},
    {"gateway: two rules of one list with one name (gRPC keeps the last)",
     R"({"name": "p", "deny_rules": [{"name": "d", "request": {"paths": ["/a/A"]}},
         {"name": "d", "request": {"paths": ["/a/B"]}}], "allow_rules": [{"name": "r"}]})",
     "deny_rules[1]: another rule of this list has this name"},
    {"gateway: one name in deny and allow lists is fine",
     R"({"name": "p", "deny_rules": [{"name": "r", "request": {"paths": ["/a/A"]}}],
         "allow_rules": [{"name": "r"}]})",
     nullptr},
    {"gateway: a key twice in one object (gRPC's JSON reader refuses it)",
     R"({"name": "p", "allow_rules": [{"name": "r"}], "allow_rules": [{"name": "s"}]})",
     R"(has the key "allow_rules" twice)"},
    {"gateway: an error names the rule",
     R"({"name": "p", "allow_rules": [{"name": "qa", "request": {"paths": "x"}}]})",
     R"(allow_rules[0].request.paths: must be an array of strings (rule "qa"))"},
};

INSTANTIATE_TEST_SUITE_P(GrpcRbacTranslatorTest, TranslatorTest,
                         ::testing::ValuesIn(kTranslatorRows),
                         [](const auto& info) { return TestName(info.param.source); });

// ---------------------------------------------------------------------------------------
// Matchers: one allow rule (its "source"/"request" members below) against one call
// (authorization_matchers_test.cc, AuthorizationMatchersTest.*, through the policy format;
// gRPC tests its matcher classes directly, we test what a policy produces).
struct MatcherRow {
  const char* source;
  const char* rule;  // the members of the rule besides "name"
  AuthzRequest call;
  bool matches;
  const char* skipped_because = nullptr;
};

void PrintTo(const MatcherRow& row, std::ostream* os) { *os << row.source; }

class MatcherTest : public ::testing::TestWithParam<MatcherRow> {};

TEST_P(MatcherTest, MatchesAsGrpcDoes) {
  const MatcherRow& row = GetParam();
  if (row.skipped_because != nullptr) GTEST_SKIP() << row.skipped_because;
  auto policy = AuthzPolicy::Parse(
      absl::StrCat(R"({"name": "t", "allow_rules": [{"name": "rule", )", row.rule, "}]}"));
  ASSERT_TRUE(policy.ok()) << policy.status();
  const AuthzDecision decision = (*policy)->Evaluate(row.call);
  EXPECT_EQ(decision.allowed, row.matches) << row.rule;
  EXPECT_EQ(decision.rule, row.matches ? "rule" : "");
}

constexpr char kPath[] = "/inspection.v1.TokenService/CreateToken";

const MatcherRow kMatcherRows[] = {
    // And / Or: a rule's request fields are ANDed, a list's entries ORed.
    {"AndAuthorizationMatcherSuccessfulMatch (port -> path)",
     R"("request": {"paths": ["/a/B"], "headers": [{"key": "foo", "values": ["bar"]}]})",
     {Plaintext(), "/a/B", {{"foo", "bar"}}},
     true},
    {"AndAuthorizationMatcherFailedMatch (port -> path)",
     R"("request": {"paths": ["/a/B"], "headers": [{"key": "foo", "values": ["bar"]}]})",
     {Plaintext(), "/a/B", {{"foo", "not_bar"}}},
     false},
    {"OrAuthorizationMatcherSuccessfulMatch",
     R"("request": {"headers": [{"key": "foo", "values": ["baz", "bar"]}]})",
     {Plaintext(), kPath, {{"foo", "bar"}}},
     true},
    {"OrAuthorizationMatcherFailedMatch",
     R"("request": {"headers": [{"key": "foo", "values": ["bar"]}]})",
     {Plaintext(), kPath, {{"foo", "not_bar"}}},
     false},
    {"HybridAuthorizationMatcherFailedMatch",
     R"("request": {"headers": [{"key": "foo", "values": ["bar"]},
                                {"key": "absent_key", "values": ["some_value"]}]})",
     {Plaintext(), kPath, {{"foo", "bar"}}},
     false},
    {"NotAuthorizationMatcher*",
     "",
     {},
     false,
     "A43 policies have no \"not\": gRPC's translator never builds a Not matcher"},
    {"ReqServerNameAuthorizationMatcher*",
     "",
     {},
     false,
     "A43 policies cannot name a requested server name (xDS RBAC only)"},
    {"MetadataAuthorizationMatcher*",
     "",
     {},
     false,
     "A43 policies have no metadata matcher (xDS RBAC only)"},
    {"IpAuthorizationMatcher* / PortAuthorizationMatcher*",
     "",
     {},
     false,
     "A43 policies cannot match addresses or ports (xDS RBAC only)"},
    // Path.
    {"PathAuthorizationMatcherSuccessfulMatch",
     R"("request": {"paths": ["expected/path"]})",
     {Plaintext(), "expected/path", {}},
     true},
    {"PathAuthorizationMatcherFailedMatch",
     R"("request": {"paths": ["expected/path"]})",
     {Plaintext(), "different/path", {}},
     false},
    {"PathAuthorizationMatcherFailedMatchMissingPath",
     R"("request": {"paths": ["*"]})",
     {Plaintext(), "", {}},
     false},
    {"gateway: path patterns are case-sensitive",
     R"("request": {"paths": ["/a/b"]})",
     {Plaintext(), "/a/B", {}},
     false},
    // Headers.
    {"HeaderAuthorizationMatcherSuccessfulMatch",
     R"("request": {"headers": [{"key": "key123", "values": ["foo*"]}]})",
     {Plaintext(), kPath, {{"key123", "foo_xxx"}}},
     true},
    {"HeaderAuthorizationMatcherFailedMatch",
     R"("request": {"headers": [{"key": "key123", "values": ["bar"]}]})",
     {Plaintext(), kPath, {{"key123", "foo"}}},
     false},
    {"HeaderAuthorizationMatcherFailedMatchMultivaluedHeader",
     R"("request": {"headers": [{"key": "key123", "values": ["foo"]}]})",
     {Plaintext(), kPath, {{"key123", "foo"}, {"key123", "bar"}}},
     false},
    {"HeaderAuthorizationMatcherFailedMatchMissingHeader",
     R"("request": {"headers": [{"key": "key123", "values": ["*foo"]}]})",
     {Plaintext(), kPath, {}},
     false},
    {"HeaderAuthorizationMatcherMethod* / Authority* / Path*",
     "",
     {},
     false,
     "pseudo-headers cannot be named in an A43 policy (translator rows above); the method "
     "is matched by \"paths\""},
    {"gateway: repeated values are joined with \",\" in arrival order",
     R"("request": {"headers": [{"key": "x-vendor-account", "values": ["default,preprod"]}]})",
     {Plaintext(), kPath, {{"x-vendor-account", "default"}, {"x-vendor-account", "preprod"}}},
     true},
    {"gateway: issue 31 item 2, default then preprod does not match preprod",
     R"("request": {"headers": [{"key": "x-vendor-account", "values": ["preprod"]}]})",
     {Plaintext(), kPath, {{"x-vendor-account", "default"}, {"x-vendor-account", "preprod"}}},
     false},
    {"gateway: a suffix pattern sees the joined value (why the gateway refuses repeats)",
     R"("request": {"headers": [{"key": "x-vendor-account", "values": ["*preprod"]}]})",
     {Plaintext(), kPath, {{"x-vendor-account", "default"}, {"x-vendor-account", "preprod"}}},
     true},
    {"gateway: header \"*\" needs the header",
     R"("request": {"headers": [{"key": "x-vendor-account", "values": ["*"]}]})",
     {Plaintext(), kPath, {}},
     false},
    {"gateway: header \"*\" needs a non-empty value",
     R"("request": {"headers": [{"key": "x-vendor-account", "values": ["*"]}]})",
     {Plaintext(), kPath, {{"x-vendor-account", ""}}},
     false},
    {"gateway: header \"*\" matches any non-empty value",
     R"("request": {"headers": [{"key": "x-vendor-account", "values": ["*"]}]})",
     {Plaintext(), kPath, {{"x-vendor-account", "anything"}}},
     true},
    {"gateway: header values are case-sensitive",
     R"("request": {"headers": [{"key": "x-vendor-account", "values": ["preprod"]}]})",
     {Plaintext(), kPath, {{"x-vendor-account", "Preprod"}}},
     false},
    // Patterns (GetMatcherType).
    {"gateway: \"*abc*\" is a suffix match on \"abc*\"",
     R"("request": {"headers": [{"key": "k", "values": ["*abc*"]}]})",
     {Plaintext(), kPath, {{"k", "xabc*"}}},
     true},
    {"gateway: \"*abc*\" is not a contains match",
     R"("request": {"headers": [{"key": "k", "values": ["*abc*"]}]})",
     {Plaintext(), kPath, {{"k", "xabcx"}}},
     false},
    {"ParseSourceSuccess: \"spiffe://abc.*.com\" is exact",
     R"("source": {"principals": ["spiffe://abc.*.com"]})",
     {Cert({"spiffe://abc.x.com"}, {}, "CN=x"), kPath, {}},
     false},
    {"ParseSourceSuccess: \"spiffe://bar*\" is a prefix",
     R"("source": {"principals": ["spiffe://bar*"]})",
     {Cert({"spiffe://bar.abc"}, {}, "CN=x"), kPath, {}},
     true},
    {"gateway: a prefix pattern is a plain prefix",
     R"("source": {"principals": ["spiffe://corp/ns/qa/*"]})",
     {Cert({"spiffe://corp/ns/qa"}, {}, "CN=x"), kPath, {}},
     false},
    // Principals (AuthenticatedAuthorizationMatcher).
    {"AuthenticatedMatcherUnAuthenticatedConnection",
     R"("source": {"principals": ["foo.com"]})",
     {Plaintext(), kPath, {}},
     false},
    {"AuthenticatedMatcherAuthenticatedConnectionMatcherUnset",
     "",
     {},
     false,
     "gRPC's translator never builds an unset principal matcher (\"*\" is regex \".+\", "
     "rows below); only xDS RBAC does"},
    {"AuthenticatedMatcherSuccessfulUriSanMatches",
     R"("source": {"principals": ["spiffe://foo.abc"]})",
     {Cert({"spiffe://foo.abc", "https://foo.domain.com"}, {}, ""), kPath, {}},
     true},
    {"AuthenticatedMatcherFailedUriSanMatches",
     R"("source": {"principals": ["spiffe://foo.abc"]})",
     {Cert({"spiffe://bar.abc"}, {}, ""), kPath, {}},
     false},
    {"AuthenticatedMatcherSuccessfulDnsSanMatches",
     R"("source": {"principals": ["bar.test.domain.com"]})",
     {Cert({"spiffe://bar.abc"}, {"foo.test.domain.com", "bar.test.domain.com"}, ""), kPath, {}},
     true},
    {"AuthenticatedMatcherFailedDnsSanMatches",
     R"("source": {"principals": ["bar.test.domain.com"]})",
     {Cert({}, {"foo.test.domain.com"}, ""), kPath, {}},
     false},
    {"AuthenticatedMatcherSuccessfulSubjectMatches",
     R"("source": {"principals": ["CN=abc,OU=Google"]})",
     {Cert({}, {}, "CN=abc,OU=Google"), kPath, {}},
     true},
    {"AuthenticatedMatcherFailedSubjectMatches",
     R"("source": {"principals": ["CN=def,OU=Google"]})",
     {Cert({}, {}, "CN=abc,OU=Google"), kPath, {}},
     false},
    {"AuthenticatedMatcherWithoutClientCertMatchesSuccessfullyOnEmptyPrincipal",
     R"("source": {"principals": [""]})",
     {TlsWithoutCert(), kPath, {}},
     true},
    {"AuthenticatedMatcherFailedNothingMatches",
     R"("source": {"principals": ["foo"]})",
     {TlsWithoutCert(), kPath, {}},
     false},
    {"gateway: \"\" never matches a plaintext caller",
     R"("source": {"principals": [""]})",
     {Plaintext(), kPath, {}},
     false},
    // Principal order: URI SANs, then DNS SANs, then the subject, each tried when the
    // earlier ones do not match (so all three count).
    {"gateway: DNS SANs are tried when no URI SAN matches",
     R"("source": {"principals": ["*.corp.example"]})",
     {Cert({"spiffe://corp/a"}, {"api.corp.example"}, "CN=a"), kPath, {}},
     true},
    {"gateway: the subject is tried when no SAN matches",
     R"("source": {"principals": ["CN=a"]})",
     {Cert({"spiffe://corp/a"}, {"api.corp.example"}, "CN=a"), kPath, {}},
     true},
    {"gateway: issue 31 item 3, a CN is never a principal on its own",
     R"("source": {"principals": ["spiffe://test/claims-api"]})",
     {Cert({"spiffe://test/other"}, {}, "CN=spiffe://test/claims-api"), kPath, {}},
     false},
    {"gateway: issue 31 item 3, nor with no SAN at all",
     R"("source": {"principals": ["spiffe://test/claims-api"]})",
     {Cert({}, {}, "CN=spiffe://test/claims-api"), kPath, {}},
     false},
    // "*" principal (regex ".+").
    {"gateway: \"*\" matches a caller with a certificate",
     R"("source": {"principals": ["*"]})",
     {Cert({"spiffe://corp/a"}, {}, "CN=a"), kPath, {}},
     true},
    {"StaticInitDeniesRpcRequestWithPrincipalsFieldOnUnauthenticatedConnection",
     R"("source": {"principals": ["*"]})",
     {Plaintext(), kPath, {}},
     false},
    {"gateway: \"*\" does not match a TLS caller without a certificate",
     R"("source": {"principals": ["*"]})",
     {TlsWithoutCert(), kPath, {}},
     false},
    {"gateway: [\"*\", \"\"] (A43's example) matches a TLS caller without a certificate",
     R"("source": {"principals": ["*", ""]})",
     {TlsWithoutCert(), kPath, {}},
     true},
    // Empty lists are no condition (gRPC leaves them out).
    {"gateway: \"principals\": [] is any caller, plaintext too",
     R"("source": {"principals": []})",
     {Plaintext(), kPath, {}},
     true},
    {"gateway: \"paths\": [] is any path",
     R"("request": {"paths": []})",
     {Plaintext(), kPath, {}},
     true},
    {"gateway: \"headers\": [] is no header condition",
     R"("request": {"headers": []})",
     {Plaintext(), kPath, {}},
     true},
};

INSTANTIATE_TEST_SUITE_P(GrpcAuthorizationMatchersTest, MatcherTest,
                         ::testing::ValuesIn(kMatcherRows),
                         [](const auto& info) { return TestName(info.param.source); });

// ---------------------------------------------------------------------------------------
// Whole policies: deny before allow, and which rule is reported
// (grpc_authz_end2end_test.cc StaticInit*, grpc_authorization_engine_test.cc).
struct EngineRow {
  const char* source;
  const char* policy;
  AuthzRequest call;
  bool allowed;
  const char* rule;
};

void PrintTo(const EngineRow& row, std::ostream* os) { *os << row.source; }

class EngineTest : public ::testing::TestWithParam<EngineRow> {};

TEST_P(EngineTest, DecidesAsGrpcDoes) {
  const EngineRow& row = GetParam();
  auto policy = AuthzPolicy::Parse(row.policy);
  ASSERT_TRUE(policy.ok()) << policy.status();
  const AuthzDecision decision = (*policy)->Evaluate(row.call);
  EXPECT_EQ(decision.allowed, row.allowed);
  EXPECT_EQ(decision.rule, row.rule);
}

constexpr char kEchoPolicy[] = R"({"name": "authz",
  "allow_rules": [{"name": "allow_echo", "request": {"paths": ["*/Echo"],
    "headers": [{"key": "key-foo", "values": ["foo1", "foo2"]},
                {"key": "key-bar", "values": ["bar1"]}]}}],
  "deny_rules": [{"name": "deny_clientstreamingecho",
    "request": {"paths": ["*/ClientStreamingEcho"]}}]})";
constexpr char kEcho[] = "/grpc.testing.EchoTestService/Echo";
const AuthzPeer kSpiffeClient = Cert({"spiffe://foo.bar.com/client/workload/1"}, {},
                                     "CN=testclient,O=Internet Widgits Pty Ltd,ST=Some-State,C=AU");

const EngineRow kEngineRows[] = {
    {"StaticInitAllowsRpcRequestNoMatchInDenyMatchInAllow",
     kEchoPolicy,
     {kSpiffeClient, kEcho, {{"key-bar", "bar1"}, {"key-baz", "baz1"}, {"key-foo", "foo2"}}},
     true,
     "allow_echo"},
    {"StaticInitDeniesRpcRequestNoMatchInAllowAndDeny",
     R"({"name": "authz", "allow_rules": [{"name": "allow_foo", "request": {"paths": ["*/foo"]}}],
         "deny_rules": [{"name": "deny_bar", "source": {"principals": ["bar"]}}]})",
     {kSpiffeClient, kEcho, {}},
     false,
     ""},
    {"StaticInitDeniesRpcRequestMatchInDenyMatchInAllow",
     R"({"name": "authz", "allow_rules": [{"name": "allow_all"}],
         "deny_rules": [{"name": "deny_echo", "request": {"paths": ["*/Echo"]}}]})",
     {kSpiffeClient, kEcho, {}},
     false,
     "deny_echo"},
    {"StaticInitDeniesRpcRequestMatchInDenyNoMatchInAllow",
     R"({"name": "authz",
         "allow_rules": [{"name": "allow_clientstreamingecho",
           "request": {"paths": ["*/ClientStreamingEcho"]}}],
         "deny_rules": [{"name": "deny_echo", "request": {"paths": ["*/Echo"]}}]})",
     {kSpiffeClient, kEcho, {}},
     false,
     "deny_echo"},
    {"StaticInitAllowsRpcRequestEmptyDenyMatchInAllow",
     R"({"name": "authz", "allow_rules": [{"name": "allow_echo", "request": {"paths": ["*"],
         "headers": [{"key": "key-foo", "values": ["foo1", "foo2"]},
                     {"key": "key-bar", "values": ["bar1"]}]}}]})",
     {kSpiffeClient, kEcho, {{"key-bar", "bar1"}, {"key-baz", "baz1"}, {"key-foo", "foo2"}}},
     true,
     "allow_echo"},
    {"StaticInitDeniesRpcRequestEmptyDenyNoMatchInAllow",
     R"({"name": "authz", "allow_rules": [{"name": "allow_echo", "request": {
         "paths": ["*/Echo"], "headers": [{"key": "key-foo", "values": ["foo1"]}]}}]})",
     {kSpiffeClient, kEcho, {{"key-bar", "bar1"}}},
     false,
     ""},
    {"StaticInitAllowsRpcRequestWithPrincipalsFieldOnAuthenticatedConnection",
     R"({"name": "authz", "allow_rules": [{"name": "allow_mtls",
         "source": {"principals": ["*"]}}]})",
     {kSpiffeClient, kEcho, {}},
     true,
     "allow_mtls"},
    // grpc_authorization_engine_test.cc: the first matching rule by name decides.
    {"AllowEngineWithMatchingPolicy (rules tried in name order)",
     R"({"name": "authz", "allow_rules": [
         {"name": "policy2"},
         {"name": "policy1", "request": {"paths": ["/never/matches"]}}]})",
     {Plaintext(), kEcho, {}},
     true,
     "policy2"},
    {"DenyEngineWithMatchingPolicy (the first matching deny rule by name is reported)",
     R"({"name": "authz", "deny_rules": [{"name": "policy2"}, {"name": "policy1"}],
         "allow_rules": [{"name": "all"}]})",
     {Plaintext(), kEcho, {}},
     false,
     "policy1"},
    {"DenyEngineWithNoMatchingPolicy (then the allow rules decide)",
     R"({"name": "authz", "deny_rules": [{"name": "policy1", "request": {"paths": ["/x/Y"]}}],
         "allow_rules": [{"name": "all"}]})",
     {Plaintext(), kEcho, {}},
     true,
     "all"},
    // gateway: the README's issue-31 policy.
    {"gateway: qa with preprod only, default then preprod",
     R"({"name": "p", "allow_rules": [{"name": "qa-uses-preprod-only",
         "source": {"principals": ["spiffe://corp.example/ns/qa/*"]},
         "request": {"headers": [{"key": "x-vendor-account", "values": ["preprod"]}]}}]})",
     {Cert({"spiffe://corp.example/ns/qa/sa/tests"}, {}, "CN=tests"),
      kPath,
      {{"x-vendor-account", "default"}, {"x-vendor-account", "preprod"}}},
     false,
     ""},
};

INSTANTIATE_TEST_SUITE_P(GrpcAuthorizationEngineTest, EngineTest, ::testing::ValuesIn(kEngineRows),
                         [](const auto& info) { return TestName(info.param.source); });

// ---------------------------------------------------------------------------------------
// The peer, from the auth context's properties (evaluate_args_test.cc, EvaluateArgsTest.*).
// What gRPC 1.51 really puts there for a certificate: peer_identity_test.cc.
class FakeAuthContext : public grpc::AuthContext {
 public:
  explicit FakeAuthContext(std::vector<std::pair<std::string, std::string>> properties)
      : properties_(std::move(properties)) {}
  // PeerOf never asks: gRPC's engine reads transport_security_type instead.
  bool IsPeerAuthenticated() const override { return true; }
  std::vector<grpc::string_ref> GetPeerIdentity() const override { return {}; }
  std::string GetPeerIdentityPropertyName() const override { return ""; }
  std::vector<grpc::string_ref> FindPropertyValues(const std::string& name) const override {
    std::vector<grpc::string_ref> out;
    for (const auto& [key, value] : properties_) {
      if (key == name) out.emplace_back(value);
    }
    return out;
  }
  grpc::AuthPropertyIterator begin() const override { return NoProperties(); }
  grpc::AuthPropertyIterator end() const override { return NoProperties(); }
  void AddProperty(const std::string&, const grpc::string_ref&) override {}
  bool SetPeerIdentityPropertyName(const std::string&) override { return false; }

 private:
  struct NoProperties : grpc::AuthPropertyIterator {
    NoProperties() = default;
  };
  std::vector<std::pair<std::string, std::string>> properties_;
};

struct PeerRow {
  const char* source;
  std::vector<std::pair<std::string, std::string>> properties;
  bool authenticated;
  std::vector<std::string> uri_sans;
  std::vector<std::string> dns_sans;
  std::string subject;
  std::string caller;  // CallerIdentityOf
};

void PrintTo(const PeerRow& row, std::ostream* os) { *os << row.source; }

class PeerTest : public ::testing::TestWithParam<PeerRow> {};

TEST_P(PeerTest, ReadsTheAuthContextAsGrpcDoes) {
  const PeerRow& row = GetParam();
  FakeAuthContext auth(row.properties);
  const AuthzPeer peer = PeerOf(&auth);
  EXPECT_EQ(peer.authenticated, row.authenticated);
  EXPECT_EQ(peer.uri_sans, row.uri_sans);
  EXPECT_EQ(peer.dns_sans, row.dns_sans);
  EXPECT_EQ(peer.subject, row.subject);
  EXPECT_EQ(CallerIdentityOf(peer), row.caller);
}

constexpr char kType[] = GRPC_TRANSPORT_SECURITY_TYPE_PROPERTY_NAME;
constexpr char kUri[] = GRPC_PEER_URI_PROPERTY_NAME;
constexpr char kDns[] = GRPC_PEER_DNS_PROPERTY_NAME;
constexpr char kSubject[] = GRPC_X509_SUBJECT_PROPERTY_NAME;
constexpr char kCn[] = GRPC_X509_CN_PROPERTY_NAME;
constexpr char kSan[] = GRPC_X509_SAN_PROPERTY_NAME;

const PeerRow kPeerRows[] = {
    {"EmptyAuthContext", {}, false, {}, {}, "", ""},
    {"GetTransportSecurityTypeSuccessOneProperty (ssl)", {{kType, "ssl"}}, true, {}, {}, "", ""},
    {"gateway: transport security type tls", {{kType, "tls"}}, true, {}, {}, "", ""},
    {"gateway: transport security type insecure", {{kType, "insecure"}}, false, {}, {}, "", ""},
    {"GetTransportSecurityTypeFailDuplicateProperty",
     {{kType, "ssl"}, {kType, "ssl"}},
     false,
     {},
     {},
     "",
     ""},
    {"GetUriSanSuccessMultipleProperties",
     {{kType, "ssl"}, {kUri, "foo"}, {kUri, "bar"}},
     true,
     {"foo", "bar"},
     {},
     "",
     "foo"},
    {"GetDnsSanSuccessMultipleProperties",
     {{kType, "ssl"}, {kDns, "foo"}, {kDns, "bar"}},
     true,
     {},
     {"foo", "bar"},
     "",
     "foo"},
    {"GetSubjectSuccessOneProperty",
     {{kType, "ssl"}, {kSubject, "CN=abc,OU=Google"}},
     true,
     {},
     {},
     "CN=abc,OU=Google",
     "CN=abc,OU=Google"},
    {"GetSubjectFailDuplicateProperty",
     {{kType, "ssl"}, {kSubject, "CN=abc,OU=Google"}, {kSubject, "CN=def,OU=Google"}},
     true,
     {},
     {},
     "",
     ""},
    {"gateway: the CN and the untyped SAN list are not read",
     {{kType, "ssl"},
      {kCn, "spiffe://test/claims-api"},
      {kSan, "spiffe://test/claims-api"},
      {kSubject, "CN=spiffe://test/claims-api"}},
     true,
     {},
     {},
     "CN=spiffe://test/claims-api",
     "CN=spiffe://test/claims-api"},
    {"gateway: the caller is named by its URI SAN first",
     {{kType, "ssl"}, {kDns, "api.corp"}, {kUri, "spiffe://corp/a"}, {kSubject, "CN=a"}},
     true,
     {"spiffe://corp/a"},
     {"api.corp"},
     "CN=a",
     "spiffe://corp/a"},
    {"gateway: a plaintext caller has no identity even with properties",
     {{kUri, "spiffe://corp/a"}},
     false,
     {"spiffe://corp/a"},
     {},
     "",
     ""},
};

INSTANTIATE_TEST_SUITE_P(GrpcEvaluateArgsTest, PeerTest, ::testing::ValuesIn(kPeerRows),
                         [](const auto& info) { return TestName(info.param.source); });

TEST(PeerOfTest, NoAuthContextIsNotAuthenticated) {
  EXPECT_FALSE(PeerOf(nullptr).authenticated);
  EXPECT_EQ(CallerIdentityOf(PeerOf(nullptr)), "");
}

}  // namespace
}  // namespace inspection::security
