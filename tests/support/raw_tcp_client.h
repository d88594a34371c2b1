#ifndef TESTS_SUPPORT_RAW_TCP_CLIENT_H_
#define TESTS_SUPPORT_RAW_TCP_CLIENT_H_

#include <chrono>
#include <string>

namespace inspection::testing {

// Blocking client sockets for tests that write HTTP by hand: requests a client library
// will not send (bodiless POSTs, GET bodies, ambiguous framing, pipelining), and checks of
// what exactly comes back, down to the connection's end.

// A socket connected to 127.0.0.1:port; -1 when the connection is refused.
int ConnectToLoopback(int port);

// The same from another loopback source address (127.0.0.0/8: "127.0.0.2"...), so that a
// test can be several clients as a server that limits per address sees them.
// `receive_buffer` > 0: SO_RCVBUF before the connect (a small window: a client that reads
// its answers slowly, or not at all, fills it quickly).
int ConnectToLoopbackFrom(const std::string& source, int port, int receive_buffer = 0);

// A client that sends without reading: sends `request` over and over without blocking until
// the socket takes no more (the server stopped reading it) or `deadline` passes. True in the
// first case: a server that reads the next request only after answering the last is then
// stuck writing an answer the client does not take.
bool PipelineUntilTheServerStopsReading(int fd, const std::string& request,
                                        std::chrono::milliseconds deadline);

// Sends all of `data`; false when the connection fails first (reset, closed).
bool SendAll(int fd, const std::string& data);

// Reads until the peer closes the connection or `deadline` passes. `error` gets errno of a
// failed read (ECONNRESET after a reset).
std::string ReadToEnd(int fd, std::chrono::milliseconds deadline, int* error = nullptr);

// Reads until `needle` has arrived, the peer closes the connection, or `deadline` passes.
std::string ReadUntil(int fd, const std::string& needle, std::chrono::milliseconds deadline);

// True when the peer closes the connection (EOF or reset) within `deadline`; what it sent
// before goes to `received`.
bool PeerCloses(int fd, std::chrono::milliseconds deadline, std::string* received = nullptr);

}  // namespace inspection::testing

#endif  // TESTS_SUPPORT_RAW_TCP_CLIENT_H_
