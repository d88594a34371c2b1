#ifndef GATEWAY_SERVICES_TOKEN_SERVICE_H_
#define GATEWAY_SERVICES_TOKEN_SERVICE_H_

#include <grpcpp/grpcpp.h>

#include "gateway/services/unary_call.h"
#include "inspection/v1/token.grpc.pb.h"

namespace inspection::services {

// GetTokenStatus as a vendor call: the RPC and WatchTokenStatus' polls share it.
UnaryEndpoint<v1::GetTokenStatusRequest, v1::GetTokenStatusResponse> GetTokenStatusEndpoint();

// inspection.v1.TokenService: each RPC is one vendor call, described by its UnaryEndpoint
// (route, validation, request encoding, response decoding). Thread-safe; `deps` must
// outlive the service.
class TokenServiceImpl final : public v1::TokenService::CallbackService {
 public:
  explicit TokenServiceImpl(const ServiceDeps& deps);

  grpc::ServerUnaryReactor* CreateToken(grpc::CallbackServerContext* context,
                                        const v1::CreateTokenRequest* request,
                                        v1::CreateTokenResponse* response) override;
  grpc::ServerUnaryReactor* GetTokenStatus(grpc::CallbackServerContext* context,
                                           const v1::GetTokenStatusRequest* request,
                                           v1::GetTokenStatusResponse* response) override;

  // Streams the token's status changes from the shared poller (token_watch/).
  grpc::ServerWriteReactor<v1::WatchTokenStatusResponse>* WatchTokenStatus(
      grpc::CallbackServerContext* context, const v1::WatchTokenStatusRequest* request) override;

 private:
  const ServiceDeps& deps_;
  const UnaryEndpoint<v1::CreateTokenRequest, v1::CreateTokenResponse> create_token_;
  const UnaryEndpoint<v1::GetTokenStatusRequest, v1::GetTokenStatusResponse> get_token_status_;
};

}  // namespace inspection::services

#endif  // GATEWAY_SERVICES_TOKEN_SERVICE_H_
