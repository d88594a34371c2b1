#ifndef GATEWAY_SERVER_RPC_LOG_OBSERVER_H_
#define GATEWAY_SERVER_RPC_LOG_OBSERVER_H_

#include "gateway/logging/log.h"
#include "gateway/services/unary_call.h"

namespace inspection::server {

// Writes one structured log line per finished RPC (info for success and caller
// errors, warn for vendor/gateway failures), and a warn line when the vendor sent
// fields we do not model (vendor drift: the data is kept in unknown_fields).
class RpcLogObserver final : public services::RpcObserver {
 public:
  explicit RpcLogObserver(logging::Logger& logger) : logger_(logger) {}
  void OnRpcFinished(const services::RpcRecord& record) override;

 private:
  logging::Logger& logger_;
};

}  // namespace inspection::server

#endif  // GATEWAY_SERVER_RPC_LOG_OBSERVER_H_
