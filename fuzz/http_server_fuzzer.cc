// Fuzz target: the HTTP/1.1 server of the webhook port (adapters/http/http_server.*), through
// the code the server runs. One server per process on 127.0.0.1:0 with small limits; each
// input is written on a fresh connection, the write side shut, and the answer read until the
// server closes. What the input can reach: the request line and head checks (bytes, lines,
// methods, versions, framing), Content-Length and chunked bodies (chunk lines, extensions,
// trailers), the head check's early answer with its linger, `Expect: 100-continue`,
// pipelined requests and keep-alive.
//
// Beyond the sanitizers, each input checks what the server promises (http_server.h): the
// handler never sees a body over max_body_bytes nor more header lines than max_header_count;
// every answer is HTTP/1.1; and the server closes a connection whose client has half-closed
// within a few seconds (a connection it kept would be one a client can hold).

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "adapters/http/http_server.h"
#include "fuzz/verbatim_peer.h"

namespace {

using inspection::http::HttpServer;
using inspection::http::HttpServerLimits;
using inspection::http::HttpServerOptions;
using inspection::http::ServerRequest;
using inspection::http::ServerResponse;

HttpServerLimits SmallLimits() {
  HttpServerLimits limits;
  limits.head_timeout = std::chrono::milliseconds(1000);
  limits.keep_alive_timeout = std::chrono::milliseconds(1000);
  limits.min_body_bytes_per_second = 1024;
  limits.body_grace = std::chrono::milliseconds(500);
  limits.write_timeout = std::chrono::milliseconds(1000);
  limits.max_head_bytes = 1024;
  limits.max_header_count = 16;
  limits.max_body_bytes = 1024;
  limits.max_connections = 64;
  limits.max_connections_per_client = 64;
  limits.max_requests_in_flight = 4;
  limits.linger_max_bytes = 4096;
  limits.linger_timeout = std::chrono::milliseconds(200);
  return limits;
}

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "http_server_fuzzer: %s\n", what);
  std::abort();
}

struct Server {
  Server() {
    HttpServerOptions options;
    options.io_threads = 1;
    options.worker_threads = 2;
    options.limits = SmallLimits();
    options.error_body = [](ServerResponse& response) {
      response.SetContent("error " + std::to_string(response.status), "text/plain");
    };
    server = std::make_unique<HttpServer>(
        // As the webhook receiver's: a key check that may answer before the body.
        [](const ServerRequest& head) -> std::optional<ServerResponse> {
          if (head.path == "/refused") {
            ServerResponse response;
            response.status = 401;
            response.SetContent("refused before the body", "text/plain");
            return response;
          }
          return std::nullopt;
        },
        [](ServerRequest& request, ServerResponse& response) {
          const HttpServerLimits limits = SmallLimits();
          if (request.body.size() > limits.max_body_bytes)
            Fail("handler got a body over max_body_bytes");
          if (request.headers.size() > limits.max_header_count) {
            Fail("handler got more header lines than max_header_count");
          }
          response.SetContent(std::to_string(request.body.size()) + " bytes", "text/plain");
          if (request.path == "/close") response.close = true;
        },
        std::move(options));
    absl::StatusOr<int> bound = server->Bind("127.0.0.1", 0);
    if (!bound.ok() || !server->Serve().ok()) Fail("the server did not start");
    port = *bound;
  }
  std::unique_ptr<HttpServer> server;
  int port = 0;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Server* const server = new Server();  // for the whole process
  const std::string input(reinterpret_cast<const char*>(data), size);
  const inspection::fuzzing::OneShotResult result =
      inspection::fuzzing::OneShotExchange(server->port, input, std::chrono::seconds(4));
  if (!result.connected) Fail("could not connect to the server");
  if (!result.closed) Fail("the server kept a half-closed connection open for 4 s");
  if (!result.answer.empty() && !absl::StartsWith(result.answer, "HTTP/1.1 ")) {
    Fail("an answer that does not start with HTTP/1.1");
  }
  return 0;
}
