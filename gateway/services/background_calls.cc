#include "gateway/services/background_calls.h"

#include <chrono>
#include <memory>
#include <utility>

#include "gateway/routes/route_table.h"
#include "gateway/services/endpoints.h"
#include "google/protobuf/wrappers.pb.h"

namespace inspection::services {
namespace {

// One call through the call core with no RPC around it, at the route's own deadline.
template <class Request, class Response>
void BackgroundCall(const CallDeps& deps, const Endpoint& endpoint,
                    std::shared_ptr<const Request> request, std::string_view origin,
                    const std::string& account,
                    absl::AnyInvocable<void(EndpointResult<Response>) &&> done) {
  RpcRecord record;
  record.origin = origin;
  record.account = account;
  CallEndpoint<Request, Response>(
      deps, endpoint, std::move(request),
      std::chrono::system_clock::now() + routes::GetRoute(endpoint.route).timeout,
      upstream::CallOptions{.request_id = "", .account = account, .bypass_cache = true},
      /*idempotency_key=*/"", std::move(record), std::chrono::steady_clock::now(), std::move(done));
}

const Endpoint& TokenStatusEndpoint(const CallDeps& deps) {
  return deps.endpoints->Get(routes::RouteId::kGetTokenStatus);
}

// GetDamagesReport with the vendor's JSON kept as text instead of decoded: its encoding is
// the RPC's, its answer a google.protobuf.StringValue.
std::shared_ptr<const Endpoint> DamagesReportAsJsonEndpoint(const CallDeps& deps) {
  auto endpoint =
      std::make_shared<Endpoint>(deps.endpoints->Get(routes::RouteId::kGetDamagesReport));
  endpoint->response_prototype = &google::protobuf::StringValue::default_instance();
  endpoint->decode = [](const nlohmann::json& j, const google::protobuf::Message&,
                        google::protobuf::Message* out, vendor::DecodeReport*) {
    static_cast<google::protobuf::StringValue*>(out)->set_value(j.dump());
    return absl::OkStatus();
  };
  return endpoint;
}

}  // namespace

token_watch::FetchStatus TokenStatusFetch(const CallDeps* deps, std::string account) {
  return [deps, account = std::move(account)](
             const std::string& uid, absl::AnyInvocable<void(token_watch::PollResult) &&> done) {
    auto request = std::make_shared<v1::GetTokenStatusRequest>();
    request->set_uid(uid);
    BackgroundCall<v1::GetTokenStatusRequest, v1::GetTokenStatusResponse>(
        *deps, TokenStatusEndpoint(*deps), std::move(request), "token_watch", account,
        [done = std::move(done)](EndpointResult<v1::GetTokenStatusResponse> out) mutable {
          if (!out.ok()) {
            // The watchers' streams end with it: the gRPC edge.
            std::move(done)(out.error->ToGrpcStatus());
            return;
          }
          std::move(done)(std::move(out.response));
        });
  };
}

reconcile::FetchReport ReportFetch(const CallDeps* deps) {
  return [deps](const std::string& account, const std::string& inspection_id,
                absl::AnyInvocable<void(absl::StatusOr<std::string>) &&> done) {
    // Made per poll (polls are rare), held until the call is done.
    std::shared_ptr<const Endpoint> endpoint = DamagesReportAsJsonEndpoint(*deps);
    auto request = std::make_shared<v1::GetDamagesReportRequest>();
    request->set_inspection_id(inspection_id);
    BackgroundCall<v1::GetDamagesReportRequest, google::protobuf::StringValue>(
        *deps, *endpoint, std::move(request), "reconcile", account,
        [endpoint,
         done = std::move(done)](EndpointResult<google::protobuf::StringValue> out) mutable {
          if (!out.ok()) {
            std::move(done)(out.error->ToStatus());
            return;
          }
          std::move(done)(std::move(*out.response.mutable_value()));
        });
  };
}

reconcile::FetchToken TokenFetch(const CallDeps* deps) {
  return [deps](const std::string& account, const std::string& uid,
                absl::AnyInvocable<void(absl::StatusOr<reconcile::TokenState>) &&> done) {
    auto request = std::make_shared<v1::GetTokenStatusRequest>();
    request->set_uid(uid);
    BackgroundCall<v1::GetTokenStatusRequest, v1::GetTokenStatusResponse>(
        *deps, TokenStatusEndpoint(*deps), std::move(request), "reconcile", account,
        [done = std::move(done)](EndpointResult<v1::GetTokenStatusResponse> out) mutable {
          if (!out.ok()) {
            std::move(done)(out.error->ToStatus());
            return;
          }
          const v1::Token& token = out.response.token();
          reconcile::TokenState state;
          state.completed = token.tradein_status() == v1::TRADEIN_STATUS_COMPLETED;
          state.expired = token.expired();
          state.inspection_id = token.inspection_ptr().id();
          std::move(done)(std::move(state));
        });
  };
}

}  // namespace inspection::services
