// Fuzz target: the Redis URL of event_log, reconcile.ledger and idempotency_store
// (adapters/redis: ParseRedisUrl, both redis:// and redis+sentinel://, and RedisUrlPassword,
// which --print-config and the logs use to redact it). The input is the URL.
//
// Checks beyond the sanitizers:
//  - redaction finds what the parser takes as the password: RedisUrlPassword(url),
//    percent-decoded, is the parsed password, so --print-config hides exactly it;
//  - Describe() (what messages and logs show) does not depend on the user or password;
//  - a parsed URL whose names need no escaping parses back from Describe() to the same
//    servers, master name, db and stream.

#include <cstdio>
#include <cstdlib>
#include <string>

#include "adapters/redis/redis_url.h"

namespace {

using inspection::redis::ParseRedisUrl;
using inspection::redis::RedisUrl;
using inspection::redis::RedisUrlPassword;

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "redis_url_fuzzer: %s\n", what);
  std::abort();
}

int Hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// %XX decoding; the parser accepted the URL, so every escape is well formed.
std::string Decode(const std::string& in) {
  std::string out;
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] == '%' && i + 2 < in.size() && Hex(in[i + 1]) >= 0 && Hex(in[i + 2]) >= 0) {
      out.push_back(static_cast<char>(Hex(in[i + 1]) * 16 + Hex(in[i + 2])));
      i += 2;
    } else {
      out.push_back(in[i]);
    }
  }
  return out;
}

bool Plain(const std::string& text) {
  for (char c : text) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '-' || c == '_' || c == ':';
    if (!ok) return false;
  }
  return true;
}

bool SameServers(const RedisUrl& a, const RedisUrl& b) {
  if (a.sentinels.size() != b.sentinels.size()) return false;
  for (size_t i = 0; i < a.sentinels.size(); ++i) {
    if (a.sentinels[i].host != b.sentinels[i].host || a.sentinels[i].port != b.sentinels[i].port) {
      return false;
    }
  }
  return a.host == b.host && a.port == b.port && a.master_name == b.master_name && a.db == b.db &&
         a.stream == b.stream;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const auto parsed = ParseRedisUrl(text);
  if (!parsed.ok()) return 0;
  const std::string raw_password(RedisUrlPassword(text));
  if (Decode(raw_password) != parsed->password) {
    Fail("RedisUrlPassword does not split the URL as ParseRedisUrl does");
  }
  // What messages show does not depend on the credentials at all.
  const std::string described = parsed->Describe();
  RedisUrl other = *parsed;
  other.password = parsed->password + "x";
  other.user = parsed->user + "x";
  if (other.Describe() != described) Fail("Describe() shows the credentials");
  if (Plain(parsed->stream)) {
    const auto again = ParseRedisUrl(described);
    if (!again.ok()) Fail("Describe() does not parse back");
    if (!SameServers(*parsed, *again)) Fail("Describe() parses back to another URL");
  }
  return 0;
}
