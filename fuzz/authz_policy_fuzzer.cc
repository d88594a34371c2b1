// Fuzz target: the authorization policy file (gateway/security/authz_policy: AuthzPolicy::Parse,
// gRFC A43's JSON), then Evaluate on one call derived from the input.
//
// Input: the policy's text; optionally followed by a NUL byte and the call: its path, NUL,
// one metadata key, NUL, its value. Without it the call is a fixed one. The call is kept to
// a path and one header on purpose (no principals): AuthzRequest is changing elsewhere, and
// this stays a trivial merge.

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "gateway/security/authz_policy.h"

namespace {

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "authz_policy_fuzzer: %s\n", what);
  std::abort();
}

// The next NUL-terminated field of `rest` (all of it when there is no NUL).
std::string_view Next(std::string_view* rest) {
  const size_t end = rest->find('\0');
  const std::string_view field = rest->substr(0, end);
  rest->remove_prefix(end == std::string_view::npos ? rest->size() : end + 1);
  return field;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view rest(reinterpret_cast<const char*>(data), size);
  const std::string_view policy_text = Next(&rest);
  const auto policy = inspection::security::AuthzPolicy::Parse(
      absl::string_view(policy_text.data(), policy_text.size()));
  if (!policy.ok()) return 0;

  inspection::security::AuthzRequest request;
  request.path = "/inspection.v1.TokenService/CreateToken";
  std::string key = "x-vendor-account";
  std::string value = "preprod";
  if (!rest.empty()) {
    request.path = std::string(Next(&rest));
    key = std::string(Next(&rest));
    value = std::string(rest);
  }
  request.headers.emplace_back(key, value);

  const inspection::security::AuthzDecision first = (*policy)->Evaluate(request);
  const inspection::security::AuthzDecision second = (*policy)->Evaluate(request);
  if (first.allowed != second.allowed || first.rule != second.rule) {
    Fail("the same call evaluated twice got two decisions");
  }
  return 0;
}
