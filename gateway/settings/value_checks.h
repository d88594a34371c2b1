// Checks of single configuration values, shared by the config loader and anything else that
// accepts an address, a base URL or a JSON pointer. Error messages describe the problem only;
// the caller adds which key or flag it was.

#ifndef INSPECTION_GATEWAY_SETTINGS_VALUE_CHECKS_H_
#define INSPECTION_GATEWAY_SETTINGS_VALUE_CHECKS_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace inspection::settings {

// Checks an absolute http:// or https:// base URL: a host (name, IPv4 or bracketed IPv6), an
// optional port 1..65535, an optional path; no credentials, query, fragment, whitespace or
// control characters. Returns it with the scheme lower-cased and one trailing '/' removed. The
// error message does not repeat the URL (it might carry credentials).
absl::StatusOr<std::string> NormalizeBaseUrl(std::string url);

// Checks a listen address HOST:PORT with port 0..65535; an IPv6 host must be bracketed
// ("[::1]:50051"). HOST is a name, an IPv4 address or "[IPv6]".
absl::Status CheckHostPort(absl::string_view addr);

// The host (an IPv6 one without its brackets) and port of an address CheckHostPort
// accepted.
struct HostAndPort {
  std::string host;
  int port = 0;
};
HostAndPort SplitHostPort(absl::string_view addr);

// True when the host of HOST:PORT (as CheckHostPort accepts it) is reachable from this
// machine only: 127.0.0.0/8, [::1], localhost.
bool IsLoopbackHostPort(absl::string_view addr);

// Checks an RFC 6901 JSON pointer that addresses something below the root: it starts with '/',
// and every '~' is followed by '0' or '1'.
absl::Status CheckJsonPointer(absl::string_view pointer);

// The candidate closest to `name` by edit distance, if it is close enough to be a plausible
// typo (distance <= max(2, |name| / 4)); empty otherwise.
std::string ClosestMatch(absl::string_view name, const std::vector<std::string>& candidates);

}  // namespace inspection::settings

#endif  // INSPECTION_GATEWAY_SETTINGS_VALUE_CHECKS_H_
