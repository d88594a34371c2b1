#include "gateway/settings/value_checks.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <iterator>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace inspection::settings {
namespace {

bool IsPort(absl::string_view text, int min_port) {
  if (text.empty() || text.size() > 5) return false;
  if (!std::all_of(text.begin(), text.end(), [](char c) { return absl::ascii_isdigit(c); })) {
    return false;
  }
  int port = 0;
  return absl::SimpleAtoi(text, &port) && port >= min_port && port <= 65535;
}

bool IsHostName(absl::string_view host) {
  return !host.empty() && std::all_of(host.begin(), host.end(), [](char c) {
    return absl::ascii_isalnum(c) || c == '.' || c == '-' || c == '_';
  });
}

// An IPv4 address in dotted decimal (four parts, no leading zeros) or an IPv6 address
// (without brackets or a zone), as inet_pton reads them.
bool IsIpLiteral(int family, absl::string_view host) {
  if (host.size() > INET6_ADDRSTRLEN) return false;
  const std::string text(host);
  unsigned char address[sizeof(in6_addr)];
  return ::inet_pton(family, text.c_str(), address) == 1;
}

bool IsBracketedIpv6(absl::string_view host) {
  if (host.size() < 4 || host.front() != '[' || host.back() != ']') return false;
  const absl::string_view inner = host.substr(1, host.size() - 2);
  return inner.find(':') != absl::string_view::npos &&
         std::all_of(inner.begin(), inner.end(),
                     [](char c) { return absl::ascii_isxdigit(c) || c == ':' || c == '.'; });
}

// Splits HOST:PORT (HOST may be bracketed IPv6). False if there is no port separator.
bool SplitHostPort(absl::string_view text, absl::string_view& host, absl::string_view& port) {
  std::size_t colon;
  if (!text.empty() && text.front() == '[') {
    const std::size_t close = text.find(']');
    if (close == absl::string_view::npos) return false;
    colon = close + 1;
    if (colon >= text.size() || text[colon] != ':') return false;
  } else {
    colon = text.rfind(':');
    if (colon == absl::string_view::npos) return false;
  }
  host = text.substr(0, colon);
  port = text.substr(colon + 1);
  return true;
}

std::size_t EditDistance(absl::string_view a, absl::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

absl::StatusOr<std::string> NormalizeBaseUrl(std::string url) {
  constexpr absl::string_view kExpected = "must be an absolute http:// or https:// URL";
  for (char c : url) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u == 0x7F) {
      return absl::InvalidArgumentError(
          absl::StrCat(kExpected, " without whitespace or control characters"));
    }
  }
  std::size_t scheme_end;
  if (absl::StartsWithIgnoreCase(url, "http://")) {
    scheme_end = 7;
  } else if (absl::StartsWithIgnoreCase(url, "https://")) {
    scheme_end = 8;
  } else {
    return absl::InvalidArgumentError(kExpected);
  }
  for (std::size_t i = 0; i < scheme_end; ++i) url[i] = absl::ascii_tolower(url[i]);
  if (url.find_first_of("?#") != std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat(kExpected, " without a query or fragment (it is a base address)"));
  }
  const std::size_t path_start = std::min(url.find('/', scheme_end), url.size());
  const absl::string_view authority =
      absl::string_view(url).substr(scheme_end, path_start - scheme_end);
  if (authority.find('@') != absl::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat(kExpected, " without credentials (user:password@)"));
  }
  absl::string_view host = authority;
  absl::string_view rest;  // ":PORT" or empty.
  if (!authority.empty() && authority.front() == '[') {
    const std::size_t close = authority.find(']');
    if (close != absl::string_view::npos) {
      host = authority.substr(0, close + 1);
      rest = authority.substr(close + 1);
    }
  } else if (const std::size_t colon = authority.find(':'); colon != absl::string_view::npos) {
    host = authority.substr(0, colon);
    rest = authority.substr(colon);
  }
  if (host.empty() || !(host.front() == '[' ? IsBracketedIpv6(host) : IsHostName(host))) {
    return absl::InvalidArgumentError(absl::StrCat(kExpected, " with a valid host"));
  }
  if (!rest.empty() && (rest.front() != ':' || !IsPort(rest.substr(1), 1))) {
    return absl::InvalidArgumentError(absl::StrCat(kExpected, " with a port in 1..65535"));
  }
  if (url.size() > path_start && url.back() == '/') url.pop_back();
  return url;
}

absl::Status CheckHostPort(absl::string_view addr) {
  const auto error = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(
        "must be HOST:PORT, HOST an IPv4 address, a bracketed IPv6 address ([::1]) or localhost, "
        "and the port in 0..65535, got ",
        ShowValue(addr), why));
  };
  absl::string_view host, port;
  if (!SplitHostPort(addr, host, port)) return error("");
  if (host.empty()) return error(": empty host");
  if (!IsPort(port, 0)) return error(": invalid port");
  if (host.front() == '[') {
    if (!IsBracketedIpv6(host) || !IsIpLiteral(AF_INET6, host.substr(1, host.size() - 2))) {
      return error(": invalid IPv6 address");
    }
  } else if (host.find(':') != absl::string_view::npos) {
    return error(": bracket IPv6 addresses");
  } else if (host != "localhost" && !IsIpLiteral(AF_INET, host)) {
    return error(
        ": not an IP address or localhost (a listener binds an address: a host name is not "
        "resolved)");
  }
  return absl::OkStatus();
}

absl::Status CheckJsonPointer(absl::string_view pointer) {
  if (pointer.empty() || pointer.front() != '/') {
    return absl::InvalidArgumentError(
        absl::StrCat(ShowValue(pointer), " is not an RFC 6901 JSON pointer: must start with '/'"));
  }
  for (std::size_t i = 0; i < pointer.size(); ++i) {
    if (pointer[i] == '~' &&
        (i + 1 == pointer.size() || (pointer[i + 1] != '0' && pointer[i + 1] != '1'))) {
      return absl::InvalidArgumentError(absl::StrCat(
          ShowValue(pointer), " is not an RFC 6901 JSON pointer: '~' must be followed by 0 or 1"));
    }
  }
  return absl::OkStatus();
}

std::string ClosestMatch(absl::string_view name, const std::vector<std::string>& candidates) {
  if (name.size() > kMaxSuggestedNameBytes) return "";
  const std::size_t limit = std::max<std::size_t>(2, name.size() / 4);
  std::string best;
  std::size_t best_distance = limit + 1;
  for (const std::string& candidate : candidates) {
    const std::size_t distance = EditDistance(name, candidate);
    if (distance < best_distance) {
      best = candidate;
      best_distance = distance;
    }
  }
  return best;
}

namespace {

constexpr absl::string_view kEllipsis = "\xe2\x80\xa6";  // "…"

bool IsPrintableAscii(char c) { return c >= 0x20 && c < 0x7f; }

// `text` quoted, every byte that is not printable ASCII escaped, the escaped text cut after
// `max_bytes` with "…".
std::string Quoted(absl::string_view text, std::size_t max_bytes) {
  std::string out = "\"";
  for (std::size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    std::string piece;
    if (c == '"' || c == '\\') {
      piece = {'\\', static_cast<char>(c)};
    } else if (c == '\n') {
      piece = "\\n";
    } else if (c == '\r') {
      piece = "\\r";
    } else if (c == '\t') {
      piece = "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      piece = absl::StrCat("\\u00", absl::Hex(c, absl::kZeroPad2));
    } else if (c >= 0x80) {
      piece = absl::StrCat("\\x", absl::Hex(c, absl::kZeroPad2));
    } else {
      piece = std::string(1, static_cast<char>(c));
    }
    if (out.size() - 1 + piece.size() > max_bytes) {
      absl::StrAppend(&out, kEllipsis);
      break;
    }
    out += piece;
  }
  out += '"';
  return out;
}

// `text`, cut after `max_bytes` with "…" (only for text of single-byte characters).
std::string Cut(absl::string_view text, std::size_t max_bytes) {
  if (text.size() <= max_bytes) return std::string(text);
  return absl::StrCat(text.substr(0, max_bytes), kEllipsis);
}

// The length of the UTF-8 sequence starting at text[i] if it is valid (no overlong form, no
// surrogate, at most U+10FFFF); 0 if not.
std::size_t Utf8SequenceAt(absl::string_view text, std::size_t i) {
  const auto byte = [&](std::size_t at) { return static_cast<unsigned char>(text[at]); };
  const unsigned char lead = byte(i);
  std::size_t length;
  unsigned char low = 0x80, high = 0xBF;  // The second byte's range.
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) low = 0xA0;   // overlong
    if (lead == 0xED) high = 0x9F;  // surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) low = 0x90;   // overlong
    if (lead == 0xF4) high = 0x8F;  // past U+10FFFF
  } else {
    return 0;
  }
  if (i + length > text.size()) return 0;
  if (byte(i + 1) < low || byte(i + 1) > high) return 0;
  for (std::size_t k = 2; k < length; ++k) {
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
  }
  return length;
}

}  // namespace

std::string ShowName(absl::string_view name) {
  const bool plain = !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return absl::ascii_isalnum(c) || c == '.' || c == '_' || c == '-';
  });
  return plain ? Cut(name, kMaxShownNameBytes) : Quoted(name, kMaxShownNameBytes);
}

std::string ShowValue(absl::string_view value) { return Quoted(value, kMaxShownValueBytes); }

std::string ShowPath(absl::string_view path) {
  const bool plain = std::all_of(path.begin(), path.end(), IsPrintableAscii);
  return plain ? Cut(path, kMaxShownPathBytes) : Quoted(path, kMaxShownPathBytes);
}

absl::Status CheckText(absl::string_view text) {
  for (std::size_t i = 0; i < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c == 0x7f) {
      return absl::InvalidArgumentError(absl::StrCat(
          "holds a control character (0x", absl::Hex(c, absl::kZeroPad2), ") at byte ", i,
          "; control characters (0x00-0x1F, 0x7F) are refused "
          "(the value is not shown)"));
    }
    const std::size_t length = Utf8SequenceAt(text, i);
    if (length == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("is not valid UTF-8 (at byte ", i, "; the value is not shown)"));
    }
    i += length;
  }
  return absl::OkStatus();
}

HostAndPort SplitHostPort(absl::string_view addr) {
  const size_t colon = addr.rfind(':');
  absl::string_view host = addr.substr(0, colon);
  if (host.size() > 1 && host.front() == '[') host = host.substr(1, host.size() - 2);
  HostAndPort out;
  out.host = std::string(host);
  if (colon != absl::string_view::npos && !absl::SimpleAtoi(addr.substr(colon + 1), &out.port)) {
    out.port = 0;
  }
  return out;
}

namespace {

// An address a listener binds: IPv4 (an IPv4-mapped IPv6 address counts as IPv4) or IPv6.
struct BoundAddress {
  bool v6 = false;
  std::array<unsigned char, 16> bytes{};  // IPv4: the first 4.
  bool IsWildcard() const {
    return std::all_of(bytes.begin(), bytes.end(), [](unsigned char b) { return b == 0; });
  }
  bool operator==(const BoundAddress& other) const {
    return v6 == other.v6 && bytes == other.bytes;
  }
};

// The addresses a listen host stands for: localhost is both loopback addresses (gRPC
// binds both).
std::vector<BoundAddress> BoundAddresses(absl::string_view host) {
  if (host == "localhost") return {BoundAddresses("127.0.0.1")[0], BoundAddresses("::1")[0]};
  const std::string text(host);
  BoundAddress address;
  if (::inet_pton(AF_INET, text.c_str(), address.bytes.data()) == 1) return {address};
  in6_addr v6{};
  if (::inet_pton(AF_INET6, text.c_str(), &v6) != 1) return {};
  static constexpr unsigned char kMappedPrefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (std::equal(std::begin(kMappedPrefix), std::end(kMappedPrefix), v6.s6_addr)) {
    std::copy(v6.s6_addr + 12, v6.s6_addr + 16, address.bytes.begin());
    return {address};
  }
  address.v6 = true;
  std::copy(std::begin(v6.s6_addr), std::end(v6.s6_addr), address.bytes.begin());
  return {address};
}

bool Overlap(const BoundAddress& a, const BoundAddress& b) {
  if (a == b) return true;
  if (a.IsWildcard() && (a.v6 || !b.v6)) return true;
  return b.IsWildcard() && (b.v6 || !a.v6);
}

}  // namespace

bool ListenHostsOverlap(absl::string_view a, absl::string_view b) {
  for (const BoundAddress& x : BoundAddresses(a)) {
    for (const BoundAddress& y : BoundAddresses(b)) {
      if (Overlap(x, y)) return true;
    }
  }
  return false;
}

bool IsLoopbackHostPort(absl::string_view addr) {
  const std::string host = SplitHostPort(addr).host;
  return host == "localhost" || host == "::1" || absl::StartsWith(host, "127.");
}

}  // namespace inspection::settings
