// Fuzz target: the Beast vendor client's answer parsing (adapters/http/beast_transport.*,
// with its response budget), through the real transport against a loopback peer that
// answers each request with the input verbatim, then closes (fuzz/transport_exchange.h).
// Found: Beast completed "HTTP/1.1 000 OK" as an answer of status 0 (fixed;
// fuzz/corpus/beast_transport/regress-status-000).

#include <memory>

#include "adapters/http/beast_transport.h"
#include "fuzz/transport_exchange.h"

namespace {

using inspection::fuzzing::TransportFail;

struct Fixture {
  Fixture() {
    if (!peer.ok()) TransportFail("beast_transport_fuzzer", "the loopback peer did not start");
    inspection::http::BeastTransportOptions options;
    options.connect_timeout = std::chrono::milliseconds(1000);
    options.max_response_bytes = inspection::fuzzing::kMaxResponseBytes;
    options.max_response_head_bytes = inspection::fuzzing::kMaxResponseHeadBytes;
    options.max_buffered_response_bytes = inspection::fuzzing::kMaxBufferedResponseBytes;
    options.guaranteed_response_bytes = inspection::fuzzing::kGuaranteedResponseBytes;
    auto created = inspection::http::BeastTransport::Create(options);
    if (!created.ok()) TransportFail("beast_transport_fuzzer", "the transport did not start");
    transport = std::move(*created);
  }
  inspection::fuzzing::VerbatimPeer peer;
  std::unique_ptr<inspection::http::BeastTransport> transport;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Fixture* const fixture = new Fixture();  // for the whole process
  inspection::fuzzing::ExchangeOnce("beast_transport_fuzzer", *fixture->transport, fixture->peer,
                                    data, size);
  return 0;
}
