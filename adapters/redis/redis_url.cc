#include "adapters/redis/redis_url.h"

#include <cctype>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace inspection::redis {
namespace {

constexpr char kScheme[] = "redis://";
constexpr char kSentinelScheme[] = "redis+sentinel://";
constexpr char kTlsScheme[] = "rediss://";

absl::Status Invalid(const std::string& what) {
  // Deliberately never includes the URL: it may carry the password.
  return absl::InvalidArgumentError(absl::StrCat("redis event log URL: ", what));
}

bool AllDigits(const std::string& text) {
  if (text.empty()) return false;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Decodes %XX escapes; false on a malformed escape.
bool PercentDecode(const std::string& in, std::string* out) {
  out->clear();
  out->reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out->push_back(in[i]);
      continue;
    }
    if (i + 2 >= in.size()) return false;
    const int high = HexValue(in[i + 1]);
    const int low = HexValue(in[i + 2]);
    if (high < 0 || low < 0) return false;
    out->push_back(static_cast<char>(high * 16 + low));
    i += 2;
  }
  return true;
}

bool IsHostNameChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_';
}

bool IsIpv6Char(char c) {
  return std::isxdigit(static_cast<unsigned char>(c)) || c == ':' || c == '.';
}

absl::Status ParseHostPort(const std::string& host_port, RedisAddress* url) {
  std::string port_text;
  bool has_port = false;
  if (!host_port.empty() && host_port[0] == '[') {
    const size_t close = host_port.find(']');
    if (close == std::string::npos) return Invalid("IPv6 host is missing its closing ']'");
    url->host = host_port.substr(1, close - 1);
    if (url->host.empty()) return Invalid("host is empty");
    for (char c : url->host) {
      if (!IsIpv6Char(c)) return Invalid("IPv6 host has an invalid character");
    }
    const std::string after = host_port.substr(close + 1);
    if (!after.empty()) {
      if (after[0] != ':') return Invalid("expected ':port' after the IPv6 host");
      port_text = after.substr(1);
      has_port = true;
    }
  } else {
    const size_t colon = host_port.find(':');
    url->host = host_port.substr(0, colon);
    if (colon != std::string::npos) {
      port_text = host_port.substr(colon + 1);
      has_port = true;
    }
    if (url->host.empty()) return Invalid("host is missing");
    for (char c : url->host) {
      if (!IsHostNameChar(c)) return Invalid("host has an invalid character");
    }
  }
  if (has_port) {
    if (!AllDigits(port_text) || port_text.size() > 5) {
      return Invalid("port must be a number from 1 to 65535");
    }
    const int port = std::stoi(port_text);
    if (port < 1 || port > 65535) return Invalid("port must be a number from 1 to 65535");
    url->port = port;
  }
  return absl::OkStatus();
}

absl::Status ParseQuery(const std::string& query, RedisUrl* url) {
  if (query.empty()) return absl::OkStatus();  // "redis://h:1/0?" has no parameters
  size_t start = 0;
  bool seen_stream = false;
  while (start <= query.size()) {
    size_t end = query.find('&', start);
    if (end == std::string::npos) end = query.size();
    const std::string pair = query.substr(start, end - start);
    const size_t equals = pair.find('=');
    const std::string key = pair.substr(0, equals);
    if (key != "stream") {
      // Only names a parameter we know, or says there is an unknown one: the text after
      // the last '@' never contains the password, but there is no need to echo it.
      return Invalid("unknown query parameter (only 'stream' is supported)");
    }
    if (seen_stream) return Invalid("query parameter 'stream' is given twice");
    seen_stream = true;
    const std::string raw = equals == std::string::npos ? "" : pair.substr(equals + 1);
    std::string stream;
    if (!PercentDecode(raw, &stream)) return Invalid("stream name has a malformed %-escape");
    if (stream.empty()) return Invalid("stream name is empty");
    url->stream = stream;
    start = end + 1;
  }
  return absl::OkStatus();
}

// A MASTER_NAME as Sentinel configurations allow it (sentinel monitor <name> ...): a
// non-empty word without spaces; kept to visible ASCII letters, digits and ._- here.
bool IsMasterName(const std::string& name) {
  if (name.empty() || name.size() > 128) return false;
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') {
      return false;
    }
  }
  return true;
}

absl::Status ParseSentinels(const std::string& list, RedisUrl* url) {
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    if (comma == std::string::npos) comma = list.size();
    const std::string host_port = list.substr(start, comma - start);
    if (host_port.empty()) return Invalid("a sentinel address in the list is empty");
    if (url->sentinels.size() == kMaxSentinels) {
      return Invalid(absl::StrCat("more than ", kMaxSentinels, " sentinels"));
    }
    RedisAddress sentinel;
    sentinel.port = kDefaultSentinelPort;
    if (absl::Status status = ParseHostPort(host_port, &sentinel); !status.ok()) return status;
    url->sentinels.push_back(std::move(sentinel));
    start = comma + 1;
  }
  return absl::OkStatus();
}

absl::Status ParseDb(const std::string& db_text, RedisUrl* url) {
  if (db_text.empty()) return absl::OkStatus();
  if (!AllDigits(db_text) || db_text.size() > 9) {
    return Invalid("db (the path) must be a non-negative integer");
  }
  url->db = std::stoi(db_text);
  return absl::OkStatus();
}

// The part between the host list and the query: "/db" for redis://, "/MASTER[/db]" for
// redis+sentinel://.
absl::Status ParsePath(const std::string& path, bool sentinel, RedisUrl* url) {
  if (!sentinel) return ParseDb(path, url);
  const size_t slash = path.find('/');
  url->master_name = path.substr(0, slash);
  if (!IsMasterName(url->master_name)) {
    return Invalid(
        "redis+sentinel:// needs the primary's name after the sentinels (/MASTER_NAME: "
        "letters, digits, '.', '_' or '-')");
  }
  return slash == std::string::npos ? absl::OkStatus() : ParseDb(path.substr(slash + 1), url);
}

}  // namespace

std::string RedisAddress::Describe() const {
  const std::string shown_host = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  return absl::StrCat(shown_host, ":", port);
}

std::string RedisUrl::Describe() const {
  if (uses_sentinels()) {
    std::string list;
    for (const RedisAddress& sentinel : sentinels) {
      absl::StrAppend(&list, list.empty() ? "" : ",", sentinel.Describe());
    }
    return absl::StrCat(kSentinelScheme, list, "/", master_name, "/", db,
                        stream.empty() ? "" : "?stream=", stream);
  }
  return absl::StrCat(kScheme, RedisAddress{host, port}.Describe(), "/", db,
                      stream.empty() ? "" : "?stream=", stream);
}

absl::StatusOr<RedisUrl> ParseRedisUrl(const std::string& url_text) {
  if (url_text.rfind(kTlsScheme, 0) == 0) {
    return Invalid("rediss:// (TLS) is not supported; use redis:// or redis+sentinel://");
  }
  const bool sentinel = url_text.rfind(kSentinelScheme, 0) == 0;
  if (!sentinel && url_text.rfind(kScheme, 0) != 0) {
    return Invalid("must start with redis:// or redis+sentinel://");
  }
  std::string rest = url_text.substr(sentinel ? sizeof(kSentinelScheme) - 1 : sizeof(kScheme) - 1);

  RedisUrl url;
  // The credentials end at the LAST '@', so a password may contain raw '/', '?', '#' or
  // '@' (the usual base64-ish secrets) without percent-encoding; only the stream name
  // must encode an '@'. Everything after that '@' is free of secrets. RedisUrlPassword
  // (the header) splits the same way, for redaction; a test holds them together.
  const size_t at = rest.rfind('@');
  if (at != std::string::npos) {
    const std::string credentials = rest.substr(0, at);
    rest = rest.substr(at + 1);
    const size_t colon = credentials.find(':');
    if (colon == std::string::npos) {
      return Invalid("credentials must be ':password' or 'user:password'");
    }
    if (!PercentDecode(credentials.substr(0, colon), &url.user)) {
      return Invalid("user name has a malformed %-escape");
    }
    if (!PercentDecode(credentials.substr(colon + 1), &url.password)) {
      return Invalid("password has a malformed %-escape");
    }
    if (url.password.empty()) return Invalid("password after ':' is empty");
  }
  if (rest.find('#') != std::string::npos) return Invalid("a fragment ('#') is not allowed");

  const size_t query_start = rest.find('?');
  const std::string before_query = rest.substr(0, query_start);
  const size_t slash = before_query.find('/');
  const std::string hosts = before_query.substr(0, slash);
  if (hosts.empty()) return Invalid(sentinel ? "the sentinels are missing" : "host is missing");
  if (sentinel) {
    if (absl::Status status = ParseSentinels(hosts, &url); !status.ok()) return status;
  } else {
    RedisAddress address;
    if (absl::Status status = ParseHostPort(hosts, &address); !status.ok()) return status;
    url.host = std::move(address.host);
    url.port = address.port;
  }
  const std::string path = slash == std::string::npos ? "" : before_query.substr(slash + 1);
  if (absl::Status status = ParsePath(path, sentinel, &url); !status.ok()) return status;
  if (query_start != std::string::npos) {
    if (absl::Status status = ParseQuery(rest.substr(query_start + 1), &url); !status.ok()) {
      return status;
    }
  }
  return url;
}

}  // namespace inspection::redis
