#ifndef GATEWAY_STREAMING_STREAM_SLOTS_H_
#define GATEWAY_STREAMING_STREAM_SLOTS_H_

#include <cstddef>
#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace inspection::streaming {

struct StreamSlotOptions {
  // streams.max_per_connection: server streams (Subscribe, StreamDamageResults,
  // WatchTokenStatus, Health/Watch, reflection) one client connection may hold open at once. Below
  // grpc.max_concurrent_streams, so long-lived streams never take every HTTP/2 stream of a
  // connection and its unary calls still go through. 0: no limit.
  int max_per_connection = 500;
  // streams.max_total: server streams this replica holds open at once. 0: no limit.
  int max_total = 10000;
  // streams.max_request_bytes: what the request of a server stream may hold in memory for
  // the stream's whole life (Subscribe, WatchTokenStatus, Health/Watch; StreamDamageResults
  // beyond its URLs, which validation.max_urls bounds): as parsed (unknown fields and groups
  // cost more parsed than sent), and for Subscribe with its filter. Their requests are names,
  // ids and a cursor; without this, each stream could hold grpc.max_receive_message_bytes
  // (512 KiB) of unknown fields or a 500 KB service name, 5 GB at max_total. More:
  // INVALID_ARGUMENT.
  size_t max_request_bytes = 8192;
};

// Counts the server streams open per connection and in total, and refuses one more past
// either cap. Local to the replica. Thread-safe.
class StreamSlots : public std::enable_shared_from_this<StreamSlots> {
 public:
  enum class Refusal { kNone, kPerConnection, kTotal };

  // Made with std::make_shared: a slot keeps its StreamSlots alive.
  explicit StreamSlots(StreamSlotOptions options) : options_(options) {}

  // A slot for one stream on `connection` (the gRPC peer, unique per connection), released
  // when the returned guard is destroyed; or null, with `*refusal` saying which cap.
  std::shared_ptr<void> TryOpen(const std::string& connection, Refusal* refusal);

  size_t open() const;
  size_t connections() const;
  const StreamSlotOptions& options() const { return options_; }

 private:
  void Close(const std::string& connection);

  const StreamSlotOptions options_;
  mutable absl::Mutex mu_;
  size_t open_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, int> per_connection_ ABSL_GUARDED_BY(mu_);
};

}  // namespace inspection::streaming

#endif  // GATEWAY_STREAMING_STREAM_SLOTS_H_
