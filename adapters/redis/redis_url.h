#ifndef ADAPTERS_REDIS_REDIS_URL_H_
#define ADAPTERS_REDIS_REDIS_URL_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace inspection::redis {

inline constexpr char kDefaultRedisStream[] = "inspection:events";
inline constexpr int kDefaultRedisPort = 6379;

// Where the Redis event log lives, parsed from
//   redis://[[user]:password@]host[:port][/db][?stream=name]
// `password`, `user` and `stream` are percent-decoded; an IPv6 host is written in
// brackets ("redis://[::1]:6379"). Port defaults to 6379, db to 0, stream to
// "inspection:events". Plain value type; thread-compatible.
struct RedisUrl {
  std::string host;
  int port = kDefaultRedisPort;
  int db = 0;
  std::string user;      // empty: AUTH with the password alone (the "default" user)
  std::string password;  // empty: no AUTH
  std::string stream = kDefaultRedisStream;

  // "redis://host:port/db?stream=name": never the user or the password.
  std::string Describe() const;
};

// InvalidArgument naming the offending part when `url` is not of the form above
// (another scheme, "rediss://" (TLS is not supported), a missing host, a port outside
// 1..65535, a db that is not a non-negative integer, an unknown or empty query
// parameter, a fragment, a malformed percent-escape). Messages never contain the
// password, nor the URL itself (it may hold the password).
absl::StatusOr<RedisUrl> ParseRedisUrl(const std::string& url);

// The password of a redis:// URL as written (not decoded), split exactly as ParseRedisUrl
// splits it: the credentials end at the LAST '@' after "redis://", and the password is
// what follows their first ':'. A view into `url`; empty when there is none. For
// redaction (--print-config, logs): a password may hold raw '/', '?', '#', ':' or '@'.
inline absl::string_view RedisUrlPassword(absl::string_view url) {
  constexpr absl::string_view kPrefix = "redis://";
  if (url.substr(0, kPrefix.size()) != kPrefix) return {};
  const absl::string_view rest = url.substr(kPrefix.size());
  const size_t at = rest.rfind('@');
  if (at == absl::string_view::npos) return {};
  const absl::string_view credentials = rest.substr(0, at);
  const size_t colon = credentials.find(':');
  if (colon == absl::string_view::npos) return {};
  return credentials.substr(colon + 1);
}

}  // namespace inspection::redis

#endif  // ADAPTERS_REDIS_REDIS_URL_H_
