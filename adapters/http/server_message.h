#ifndef ADAPTERS_HTTP_SERVER_MESSAGE_H_
#define ADAPTERS_HTTP_SERVER_MESSAGE_H_

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"

namespace inspection::http {

// One request as the HTTP server (http_server.h) hands it to its owner: first the head
// alone (body empty, not read yet), then, if the owner lets it go on, with its body.
struct ServerRequest {
  std::string method;  // as sent, e.g. "POST"
  std::string target;  // the request-target as sent, e.g. "/a%20b?x=1"
  std::string path;    // the target's path, percent-decoded ("/a b")
  std::string query;   // the target's query without '?', not decoded ("x=1")
  // Every header line in arrival order, names as sent. Chunked trailers are appended.
  std::vector<std::pair<std::string, std::string>> headers;
  // Decoded: chunked framing removed. Empty until the body was read.
  std::string body;
  // The client's IP address as text ("127.0.0.1", "::1"); IPv4-mapped IPv6 shown as IPv4.
  std::string remote_address;

  // The first header of that name (case-insensitive); null when absent.
  const std::string* Header(absl::string_view name) const;
  size_t HeaderCount(absl::string_view name) const;
  // The first query parameter of that name, percent- and '+'-decoded; nullopt when absent.
  std::optional<std::string> QueryParam(absl::string_view name) const;
};

// One answer. The server adds Content-Length (or Transfer-Encoding), Connection and Date.
struct ServerResponse {
  int status = 200;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;

  // Sets (replaces) a header.
  void SetHeader(absl::string_view name, absl::string_view value);
  void SetContent(std::string content, absl::string_view content_type);
  const std::string* Header(absl::string_view name) const;

  // The connection ends after this answer.
  bool close = false;

  // Faults the vendor emulator plays (they make sense nowhere else):
  // No answer: the connection is reset (TCP RST) instead.
  bool reset = false;
  // The head declares the whole body, only this many bytes of it are sent, then the
  // connection is closed.
  std::optional<size_t> truncate_body_at;
  // > 0: the body goes out chunked in pieces of this many bytes with `chunk_pause` before
  // every piece but the first. The pauses are cut short when the server stops.
  size_t chunk_bytes = 0;
  std::chrono::milliseconds chunk_pause{0};
};

// Decodes %XX escapes (and '+' as a space when `plus_is_space`); a '%' not followed by two
// hex digits is kept as it is.
std::string PercentDecode(absl::string_view text, bool plus_is_space);

// The reason phrase of a status code ("Not Found"); "Unknown" for codes without one.
absl::string_view ReasonPhrase(int status);

}  // namespace inspection::http

#endif  // ADAPTERS_HTTP_SERVER_MESSAGE_H_
