#ifndef TESTS_SUPPORT_TLS_PING_SERVER_H_
#define TESTS_SUPPORT_TLS_PING_SERVER_H_

#include <httplib.h>

#include <string>
#include <thread>

#include "tests/support/test_pki.h"

namespace inspection::testing {

// An HTTPS server on 127.0.0.1 (cpp-httplib's SSLServer) with the certificate "server" of a
// TestPki (a throwaway CA): GET /ping answers 200 {"pong":true}. For the HTTP transports'
// TLS tests.
class TlsPingServer {
 public:
  explicit TlsPingServer(const TestPki& pki)
      : server_(pki.Path("server.pem").c_str(), pki.Path("server.key").c_str()) {
    server_.Get("/ping", [](const httplib::Request&, httplib::Response& response) {
      response.set_content(R"({"pong":true})", "application/json");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    // bind_to_any_port already listens: connections wait in the backlog until accepted.
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~TlsPingServer() {
    server_.stop();
    thread_.join();
  }
  TlsPingServer(const TlsPingServer&) = delete;
  TlsPingServer& operator=(const TlsPingServer&) = delete;

  bool ok() { return port_ > 0 && server_.is_valid(); }
  // https://HOST:PORT/PATH; `host` must be one the certificate names to be trusted.
  std::string Url(const std::string& path, const std::string& host = "127.0.0.1") const {
    return "https://" + host + ":" + std::to_string(port_) + path;
  }

 private:
  httplib::SSLServer server_;
  int port_ = -1;
  std::thread thread_;
};

}  // namespace inspection::testing

#endif  // TESTS_SUPPORT_TLS_PING_SERVER_H_
