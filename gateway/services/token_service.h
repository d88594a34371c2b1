#ifndef GATEWAY_SERVICES_TOKEN_SERVICE_H_
#define GATEWAY_SERVICES_TOKEN_SERVICE_H_

#include <grpcpp/grpcpp.h>

#include "gateway/services/generic_unary_service.h"
#include "gateway/services/unary_call.h"
#include "inspection/v1/token.grpc.pb.h"

namespace inspection::services {

// inspection.v1.TokenService's stream, WatchTokenStatus. Its unary RPCs (CreateToken,
// GetTokenStatus) are served by the generic unary handler (generic_unary_service.h). Thread-safe;
// `deps` must outlive the service.
class TokenServiceImpl final : public StreamsOnly<v1::TokenService::CallbackService> {
 public:
  explicit TokenServiceImpl(const ServiceDeps& deps);

  // Streams the token's status changes from the shared poller (token_watch/).
  grpc::ServerWriteReactor<v1::WatchTokenStatusResponse>* WatchTokenStatus(
      grpc::CallbackServerContext* context, const v1::WatchTokenStatusRequest* request) override;

 private:
  const ServiceDeps& deps_;
};

}  // namespace inspection::services

#endif  // GATEWAY_SERVICES_TOKEN_SERVICE_H_
