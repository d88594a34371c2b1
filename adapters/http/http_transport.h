#ifndef ADAPTERS_HTTP_HTTP_TRANSPORT_H_
#define ADAPTERS_HTTP_HTTP_TRANSPORT_H_

#include <chrono>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"

namespace inspection::http {

using Headers = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
  std::string method;  // "GET", "POST", "PUT"
  std::string url;     // absolute, already encoded
  Headers headers;
  std::string body;  // sent only when non-empty
  // Whole-exchange timeout (connect + send + receive). Must be > 0.
  std::chrono::milliseconds timeout{10000};
  // false: send on a new connection. A client that reuses a keep-alive connection may
  // silently send the request again when that connection turns out dead (libcurl does,
  // once); a request that must never be sent twice (token creation, damage submission)
  // therefore asks for a fresh connection.
  bool reuse_connection = true;
};

struct HttpResponse {
  long status = 0;  // HTTP status code
  Headers headers;  // names lower-cased, in arrival order
  std::string body;

  // First header with that (lower-case) name, or nullptr.
  const std::string* FindHeader(std::string_view lower_name) const {
    for (const auto& [name, value] : headers) {
      if (name == lower_name) return &value;
    }
    return nullptr;
  }
};

// Why an exchange produced no complete HTTP response.
enum class TransportError {
  kNone,     // a complete response arrived (any HTTP status)
  kConnect,  // DNS or TCP/TLS connect failed: nothing reached the peer
  kTimeout,  // the exchange's timeout elapsed
  kSend,     // the connection failed while the request was being sent
  kReceive,  // reset, or a truncated/garbled response after the request was sent
  // The response is longer than the exchange may read (the client's max_response_bytes, or
  // its head limit): the peer answered, and the answer was not read to its end.
  kTooLarge,
  kOther,  // anything else (out of memory, bad URL...)
};

struct HttpResult {
  TransportError error = TransportError::kNone;
  std::string error_detail;  // human-readable; never contains header values
  // True once any byte of the request may have reached the peer. Retry logic uses it
  // to decide whether a non-idempotent request may be re-sent.
  bool request_sent = false;
  HttpResponse response;  // valid when error == kNone
  // Wall time of the exchange.
  std::chrono::microseconds elapsed{0};
};

const char* TransportErrorName(TransportError error);

// RFC 9110 token characters: a method must be one, and so must a header name.
bool IsHttpToken(std::string_view s);
// A header value must not smuggle in another header line (no CR, LF or NUL).
bool IsSafeHeaderValue(std::string_view s);
// OK when `ca_file` (a transport's trusted CAs) can be opened for reading; otherwise
// INVALID_ARGUMENT naming the file and the reason.
absl::Status CheckReadableCaFile(const std::string& ca_file);

using HttpCallback = absl::AnyInvocable<void(HttpResult) &&>;

// Asynchronous HTTP client. Thread-safe: Send() may be called from any thread.
// `done` is called exactly once, on the transport's own event-loop thread; it must not
// block (hand heavy work elsewhere). After the transport is destroyed, pending
// callbacks have all been called (with kOther "transport shut down" if unfinished).
class HttpTransport {
 public:
  virtual ~HttpTransport() = default;
  virtual void Send(HttpRequest request, HttpCallback done) = 0;
  // Bytes of answer bodies the transport's unfinished exchanges hold (its ResponseBudget's
  // use); 0 for a transport that does not count them.
  virtual size_t BufferedResponseBytes() const { return 0; }
  // Fails every unfinished exchange ("transport shut down") and stops the transport's
  // thread; afterwards Send() fails at once. The default does nothing (transports without a
  // thread of their own, such as test fakes).
  virtual void Shutdown() {}
};

}  // namespace inspection::http

#endif  // ADAPTERS_HTTP_HTTP_TRANSPORT_H_
