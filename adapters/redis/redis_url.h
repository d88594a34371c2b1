#ifndef ADAPTERS_REDIS_REDIS_URL_H_
#define ADAPTERS_REDIS_REDIS_URL_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace inspection::redis {

inline constexpr char kDefaultRedisStream[] = "inspection:events";
inline constexpr int kDefaultRedisPort = 6379;
inline constexpr int kDefaultSentinelPort = 26379;

// One host and port (a sentinel's, or the primary's as the sentinels name it).
struct RedisAddress {
  std::string host;
  int port = kDefaultRedisPort;
  // "host:port", IPv6 in brackets.
  std::string Describe() const;
};

// Where the Redis data lives, parsed from one of
//   redis://[[user]:password@]host[:port][/db][?stream=name]
//   redis+sentinel://[[user]:password@]host[:port][,host[:port]...]/MASTER_NAME[/db][?stream=name]
// The first names the server itself. The second names the Redis Sentinel processes that
// monitor the primary called MASTER_NAME: the client asks them where the primary is
// (SENTINEL get-master-addr-by-name) on every new connection, and so follows a failover.
// The user and password are the data servers' (AUTH on the primary); the sentinels' own
// password, which may differ, is RedisOptions::sentinel_password. `password`, `user` and
// `stream` are percent-decoded; an IPv6 host is written in brackets ("redis://[::1]:6379").
// Port defaults to 6379 (26379 for a sentinel), db to 0, stream to "inspection:events".
// Plain value type; thread-compatible.
struct RedisUrl {
  // The server (redis://). Unused with sentinels.
  std::string host;
  int port = kDefaultRedisPort;
  // redis+sentinel://: the sentinels (at least one) and the primary's name there.
  std::vector<RedisAddress> sentinels;
  std::string master_name;
  int db = 0;
  std::string user;      // empty: AUTH with the password alone (the "default" user)
  std::string password;  // empty: no AUTH
  std::string stream = kDefaultRedisStream;

  bool uses_sentinels() const { return !sentinels.empty(); }
  // "redis://host:port/db?stream=name" or
  // "redis+sentinel://host:port,host:port/MASTER/db?stream=name": never the user or the
  // password; without "?stream=" when `stream` is empty.
  std::string Describe() const;
};

// InvalidArgument naming the offending part when `url` is not of the forms above
// (another scheme, "rediss://" (TLS is not supported), a missing host, a port outside
// 1..65535, a db that is not a non-negative integer, an unknown or empty query
// parameter, a fragment, a malformed percent-escape; for sentinels also an empty list
// entry, more than kMaxSentinels of them, a missing or invalid MASTER_NAME). Messages never
// contain the password, nor the URL itself (it may hold the password).
absl::StatusOr<RedisUrl> ParseRedisUrl(const std::string& url);
inline constexpr size_t kMaxSentinels = 16;

// Whether `url` starts with one of the two schemes above (what a config key checks before
// it hands the URL to a Redis-backed store).
inline bool IsRedisUrl(absl::string_view url) {
  return url.substr(0, 8) == "redis://" || url.substr(0, 17) == "redis+sentinel://";
}

// The password of a redis:// or redis+sentinel:// URL as written (not decoded), split
// exactly as ParseRedisUrl splits it: the credentials end at the LAST '@' after the scheme,
// and the password is what follows their first ':'. A view into `url`; empty when there is
// none. For redaction (--print-config, logs): a password may hold raw '/', '?', '#', ':'
// or '@'.
inline absl::string_view RedisUrlPassword(absl::string_view url) {
  size_t scheme_end = 0;
  for (absl::string_view scheme :
       {absl::string_view("redis://"), absl::string_view("redis+sentinel://")}) {
    if (url.substr(0, scheme.size()) == scheme) scheme_end = scheme.size();
  }
  if (scheme_end == 0) return {};
  const absl::string_view rest = url.substr(scheme_end);
  const size_t at = rest.rfind('@');
  if (at == absl::string_view::npos) return {};
  const absl::string_view credentials = rest.substr(0, at);
  const size_t colon = credentials.find(':');
  if (colon == absl::string_view::npos) return {};
  return credentials.substr(colon + 1);
}

}  // namespace inspection::redis

#endif  // ADAPTERS_REDIS_REDIS_URL_H_
