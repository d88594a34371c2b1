// bench_hop_floor: the least a gRPC -> REST relay can do on this stack, for bench/run.py's
// `hop_floor` scenario. It answers EventConfigService/GetWebhookConfig by sending
// `GET /apiV1/eventmanager/configwebhook` to the vendor (the sandbox) over one kept-alive
// connection and finishing the call with an empty response once the answer is read: no
// config, validation, pipeline, retries, breaker, JSON, metrics or logs. Both servers run
// gRPC's callback API (grpc 1.51 from Debian), as the gateway does, with the default health
// service for the bare gRPC round trip.
//
//   bench_hop_floor --vendor=HOST:PORT --api-key-file=PATH --mode=loop|transport|inline
//
// --mode=loop: the gateway's threading over a bare socket. The handler writes the request on
//   the gRPC thread, ONE Asio loop thread reads the answer and finishes the call from there
//   (what BeastTransport does: no thread waits on the vendor).
// --mode=transport: the same through the gateway's own BeastTransport
//   (adapters/http/beast_transport.h) instead of the bare socket: what the vendor client
//   costs over the floor.
// --mode=inline: the handler writes the request and blocks reading the answer on the gRPC
//   thread, then finishes the call there. No thread hand-off at all; a server that did this
//   would hold a gRPC thread per vendor call in flight, so it is a floor, not a design.
//
// Prints {"bench_hop_floor":"listening","port":PORT} (the gRPC port, bound on 127.0.0.1:0)
// and serves until SIGTERM or SIGINT, then prints {"bench_hop_floor":"stopped","ok":N,
// "failed":M}: the calls the vendor answered 200, and the others. It holds one vendor connection
// and so takes one call at a time; the scenario drives it one call at a time.
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <charconv>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <thread>

#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <boost/asio.hpp>
#include "absl/synchronization/mutex.h"

#include "adapters/http/beast_transport.h"
#include "bench/bench_flags.h"
#include "inspection/v1/event_config.grpc.pb.h"

namespace {

using ::inspection::bench::Flag;

namespace asio = boost::asio;

using asio::ip::tcp;

// Bytes of the answer's body still to read after the head in `buffer`, or -1 when the head is
// not complete yet. Only Content-Length bodies (the sandbox's).
long BodyLeft(const std::string& buffer) {
  const auto end = buffer.find("\r\n\r\n");
  if (end == std::string::npos) return -1;
  long length = 0;
  const auto at = buffer.find("ontent-Length: ");
  if (at != std::string::npos && at < end) {
    const char* first = buffer.data() + at + 15;
    std::from_chars(first, buffer.data() + end, length);
  }
  return length - static_cast<long>(buffer.size() - (end + 4));
}

class Relay {
 public:
  Relay(const std::string& vendor, const std::string& api_key, bool inline_read)
      : work_(asio::make_work_guard(io_)), socket_(io_), inline_(inline_read) {
    const auto colon = vendor.rfind(':');
    tcp::resolver resolver(io_);
    asio::connect(socket_, resolver.resolve(vendor.substr(0, colon), vendor.substr(colon + 1)));
    socket_.set_option(tcp::no_delay(true));
    request_ = "GET /apiV1/eventmanager/configwebhook HTTP/1.1\r\nHost: " + vendor +
               "\r\nx-api-key: " + api_key + "\r\nAccept: application/json\r\n\r\n";
    loop_ = std::thread([this] { io_.run(); });
  }
  ~Relay() {
    work_.reset();
    io_.stop();
    loop_.join();
  }

  void Call(grpc::ServerUnaryReactor* reactor) {
    asio::write(socket_, asio::buffer(request_));
    buffer_.clear();
    if (inline_) {
      char chunk[4096];
      while (BodyLeft(buffer_) != 0) {
        const size_t n = socket_.read_some(asio::buffer(chunk));
        buffer_.append(chunk, n);
      }
      Finish(reactor);
      return;
    }
    ReadMore(reactor);
  }

  // Calls the vendor answered 200 / anything else (read after the server has stopped).
  long ok() const { return ok_; }
  long failed() const { return failed_; }

 private:
  void ReadMore(grpc::ServerUnaryReactor* reactor) {
    socket_.async_read_some(
        asio::buffer(chunk_), [this, reactor](boost::system::error_code error, size_t n) {
          if (error) {
            ++failed_;
            reactor->Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, error.message()));
            return;
          }
          buffer_.append(chunk_, n);
          if (BodyLeft(buffer_) != 0) return ReadMore(reactor);
          Finish(reactor);
        });
  }

  void Finish(grpc::ServerUnaryReactor* reactor) {
    if (buffer_.rfind("HTTP/1.1 200 ", 0) == 0) {
      ++ok_;
      reactor->Finish(grpc::Status::OK);
    } else {
      ++failed_;
      reactor->Finish(grpc::Status(grpc::StatusCode::UNKNOWN, "vendor status not 200"));
    }
  }

  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  tcp::socket socket_;
  bool inline_;
  std::string request_;
  std::string buffer_;
  char chunk_[4096];
  long ok_ = 0;
  long failed_ = 0;
  std::thread loop_;
};

// --mode=transport: the gateway's vendor client (BeastTransport) in place of Relay's socket.
class TransportRelay {
 public:
  TransportRelay(const std::string& vendor, const std::string& api_key) {
    transport_ = std::move(inspection::http::BeastTransport::Create().value());
    request_.method = "GET";
    request_.url = "http://" + vendor + "/apiV1/eventmanager/configwebhook";
    request_.headers.emplace_back("X-API-Key", api_key);
    request_.headers.emplace_back("Accept", "application/json");
  }
  void Call(grpc::ServerUnaryReactor* reactor) {
    transport_->Send(request_, [this, reactor](inspection::http::HttpResult result) {
      if (result.error == inspection::http::TransportError::kNone &&
          result.response.status == 200) {
        ++ok_;
        reactor->Finish(grpc::Status::OK);
      } else {
        ++failed_;
        reactor->Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, result.error_detail));
      }
    });
  }
  long ok() const { return ok_; }
  long failed() const { return failed_; }

 private:
  std::unique_ptr<inspection::http::BeastTransport> transport_;
  inspection::http::HttpRequest request_;
  std::atomic<long> ok_{0};
  std::atomic<long> failed_{0};
};

template <typename RelayT>
class FloorService final : public inspection::v1::EventConfigService::CallbackService {
 public:
  explicit FloorService(RelayT* relay) : relay_(relay) {}
  grpc::ServerUnaryReactor* GetWebhookConfig(grpc::CallbackServerContext* context,
                                             const inspection::v1::GetWebhookConfigRequest*,
                                             inspection::v1::GetWebhookConfigResponse*) override {
    auto* reactor = context->DefaultReactor();
    relay_->Call(reactor);
    return reactor;
  }

 private:
  RelayT* relay_;
};

template <typename RelayT>
int Serve(RelayT& relay, const sigset_t& stop) {
  FloorService<RelayT> service(&relay);
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  auto server = builder.BuildAndStart();
  if (!server) return 1;
  std::cout << R"({"bench_hop_floor":"listening","port":)" << port << "}" << std::endl;
  int signal_number = 0;
  sigwait(&stop, &signal_number);
  server->Shutdown();
  std::cout << R"({"bench_hop_floor":"stopped","ok":)" << relay.ok() << R"(,"failed":)"
            << relay.failed() << "}" << std::endl;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string vendor = Flag(argc, argv, "vendor");
  const std::string key_file = Flag(argc, argv, "api-key-file");
  const std::string mode = Flag(argc, argv, "mode");
  if (vendor.empty() || key_file.empty() ||
      (mode != "loop" && mode != "inline" && mode != "transport")) {
    std::cerr << "usage: bench_hop_floor --vendor=HOST:PORT --api-key-file=PATH "
                 "--mode=loop|inline|transport\n";
    return 2;
  }
  // As the gateway's main(): Debian's Abseil has the mutex deadlock detector on.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  // Blocked before any thread starts, so every thread inherits it and sigwait() below gets it.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  std::string api_key;
  std::getline(std::ifstream(key_file), api_key);
  if (mode == "transport") {
    TransportRelay relay(vendor, api_key);
    return Serve(relay, stop);
  }
  Relay relay(vendor, api_key, mode == "inline");
  return Serve(relay, stop);
}
