#include "adapters/http/server_message.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"

namespace inspection::http {
namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

const std::string* FindHeader(const std::vector<std::pair<std::string, std::string>>& headers,
                              absl::string_view name) {
  for (const auto& [key, value] : headers) {
    if (absl::EqualsIgnoreCase(key, name)) return &value;
  }
  return nullptr;
}

}  // namespace

const std::string* ServerRequest::Header(absl::string_view name) const {
  return FindHeader(headers, name);
}

size_t ServerRequest::HeaderCount(absl::string_view name) const {
  return static_cast<size_t>(std::count_if(headers.begin(), headers.end(), [name](const auto& h) {
    return absl::EqualsIgnoreCase(h.first, name);
  }));
}

std::optional<std::string> ServerRequest::QueryParam(absl::string_view name) const {
  for (absl::string_view pair : absl::StrSplit(query, '&', absl::SkipEmpty())) {
    const size_t equals = pair.find('=');
    const absl::string_view key = pair.substr(0, equals);
    if (PercentDecode(key, /*plus_is_space=*/true) != name) continue;
    if (equals == absl::string_view::npos) return std::string();
    return PercentDecode(pair.substr(equals + 1), /*plus_is_space=*/true);
  }
  return std::nullopt;
}

void ServerResponse::SetHeader(absl::string_view name, absl::string_view value) {
  for (auto& [key, existing] : headers) {
    if (absl::EqualsIgnoreCase(key, name)) {
      existing = std::string(value);
      return;
    }
  }
  headers.emplace_back(std::string(name), std::string(value));
}

void ServerResponse::SetContent(std::string content, absl::string_view content_type) {
  body = std::move(content);
  SetHeader("Content-Type", content_type);
}

const std::string* ServerResponse::Header(absl::string_view name) const {
  return FindHeader(headers, name);
}

std::string PercentDecode(absl::string_view text, bool plus_is_space) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '%' && i + 2 < text.size()) {
      const int high = HexValue(text[i + 1]);
      const int low = HexValue(text[i + 2]);
      if (high >= 0 && low >= 0) {
        out.push_back(static_cast<char>(high * 16 + low));
        i += 2;
        continue;
      }
    }
    out.push_back(plus_is_space && c == '+' ? ' ' : c);
  }
  return out;
}

absl::string_view ReasonPhrase(int status) {
  switch (status) {
    case 100:
      return "Continue";
    case 200:
      return "OK";
    case 201:
      return "Created";
    case 202:
      return "Accepted";
    case 204:
      return "No Content";
    case 301:
      return "Moved Permanently";
    case 302:
      return "Found";
    case 304:
      return "Not Modified";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 409:
      return "Conflict";
    case 411:
      return "Length Required";
    case 413:
      return "Payload Too Large";
    case 414:
      return "URI Too Long";
    case 415:
      return "Unsupported Media Type";
    case 417:
      return "Expectation Failed";
    case 422:
      return "Unprocessable Entity";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 502:
      return "Bad Gateway";
    case 503:
      return "Service Unavailable";
    case 504:
      return "Gateway Timeout";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return "Unknown";
  }
}

}  // namespace inspection::http
