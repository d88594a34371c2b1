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

// Checks a listen address HOST:PORT with port 0..65535. HOST is an IPv4 address, a bracketed
// IPv6 address ("[::1]:50051") or "localhost": a listener binds an address, and a host name
// other than localhost would not be resolved by the listener (or would be, by gRPC, to
// whatever it means then).
absl::Status CheckHostPort(absl::string_view addr);

// The host (an IPv6 one without its brackets) and port of an address CheckHostPort
// accepted.
struct HostAndPort {
  std::string host;
  int port = 0;
};
HostAndPort SplitHostPort(absl::string_view addr);

// True when listeners on `a` and `b`, hosts CheckHostPort accepts (IPv6 without brackets),
// would take the same port of the same address: the same address (::ffff:a.b.c.d is
// a.b.c.d), localhost and 127.0.0.1 or ::1, or a wildcard (0.0.0.0 takes every IPv4
// address, :: every address, IPv4 included).
bool ListenHostsOverlap(absl::string_view a, absl::string_view b);

// True when the host of HOST:PORT (as CheckHostPort accepts it) is reachable from this
// machine only: 127.0.0.0/8, [::1], localhost.
bool IsLoopbackHostPort(absl::string_view addr);

// Checks an RFC 6901 JSON pointer that addresses something below the root: it starts with '/',
// and every '~' is followed by '0' or '1'.
absl::Status CheckJsonPointer(absl::string_view pointer);

// The longest name ClosestMatch compares: a longer one is no typo of a key, and the edit
// distance costs its length times each candidate's (a 5 MB unknown key took 20 s).
inline constexpr std::size_t kMaxSuggestedNameBytes = 128;

// The candidate closest to `name` by edit distance, if it is close enough to be a plausible
// typo (distance <= max(2, |name| / 4)); empty otherwise, and for a name longer than
// kMaxSuggestedNameBytes.
std::string ClosestMatch(absl::string_view name, const std::vector<std::string>& candidates);

// How much of a name (a key, an account, an env variable) or of a value an error message
// shows: messages stay short whatever the input holds.
inline constexpr std::size_t kMaxShownNameBytes = 128;
inline constexpr std::size_t kMaxShownValueBytes = 64;
inline constexpr std::size_t kMaxShownPathBytes = 256;

// `name` as a message shows it: as it is when made of A-Za-z0-9._- only; else quoted, with
// every byte that is not printable ASCII escaped (\n, \u001b, \xff). Either way cut after
// kMaxShownNameBytes, with "…".
std::string ShowName(absl::string_view name);
// `value` quoted and escaped like ShowName's odd names, cut after kMaxShownValueBytes.
std::string ShowValue(absl::string_view value);
// A path (or other text) as it is when it is printable ASCII; else quoted and escaped. Cut
// after kMaxShownPathBytes.
std::string ShowPath(absl::string_view path);

// Checks that `text` holds no control character (U+0000..U+001F, U+007F) and is valid UTF-8.
// The error says which and at what byte, never the text.
absl::Status CheckText(absl::string_view text);

}  // namespace inspection::settings

#endif  // INSPECTION_GATEWAY_SETTINGS_VALUE_CHECKS_H_
