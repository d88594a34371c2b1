#include "gateway/streaming/stream_slots.h"

namespace inspection::streaming {

std::shared_ptr<void> StreamSlots::TryOpen(const std::string& connection, Refusal* refusal) {
  {
    absl::MutexLock lock(&mu_);
    if (options_.max_total > 0 && open_ >= static_cast<size_t>(options_.max_total)) {
      *refusal = Refusal::kTotal;
      return nullptr;
    }
    int& on_connection = per_connection_[connection];
    if (options_.max_per_connection > 0 && on_connection >= options_.max_per_connection) {
      *refusal = Refusal::kPerConnection;
      return nullptr;
    }
    ++on_connection;
    ++open_;
  }
  *refusal = Refusal::kNone;
  return std::shared_ptr<void>(new int(0), [self = shared_from_this(), connection](void* p) {
    delete static_cast<int*>(p);
    self->Close(connection);
  });
}

void StreamSlots::Close(const std::string& connection) {
  absl::MutexLock lock(&mu_);
  --open_;
  auto it = per_connection_.find(connection);
  if (it != per_connection_.end() && --it->second <= 0) per_connection_.erase(it);
}

size_t StreamSlots::open() const {
  absl::MutexLock lock(&mu_);
  return open_;
}

size_t StreamSlots::connections() const {
  absl::MutexLock lock(&mu_);
  return per_connection_.size();
}

}  // namespace inspection::streaming
