#include "gateway/services/unary_call.h"

#include <random>

namespace inspection::services {

std::string RequestIdFor(const grpc::CallbackServerContext& context) {
  const auto& metadata = context.client_metadata();
  auto it = metadata.find("x-request-id");
  if (it != metadata.end() && !it->second.empty() && it->second.size() <= 64) {
    bool plain = true;
    for (char c : it->second) {
      plain = plain && (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' ||
                        c == '.' || c == ':');
    }
    if (plain) return std::string(it->second.data(), it->second.size());
  }
  // 64 random bits as hex: unique enough to find one call in the logs.
  thread_local std::mt19937_64 rng{std::random_device{}()};
  static constexpr char kHex[] = "0123456789abcdef";
  uint64_t bits = rng();
  std::string id(16, '0');
  for (int i = 15; i >= 0; --i, bits >>= 4) id[i] = kHex[bits & 0xF];
  return id;
}

void NotifyFinished(const ServiceDeps& deps, RpcRecord& record,
                    std::chrono::steady_clock::time_point start) {
  record.duration = std::chrono::duration_cast<std::chrono::microseconds>(
      std::chrono::steady_clock::now() - start);
  if (deps.observer != nullptr) deps.observer->OnRpcFinished(record);
}

}  // namespace inspection::services
