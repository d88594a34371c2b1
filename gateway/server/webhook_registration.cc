#include "gateway/server/webhook_registration.h"

#include <future>

#include "absl/strings/str_cat.h"
#include "gateway/services/endpoints.h"

namespace inspection::server {
namespace {

template <class Request, class Response>
absl::Status CallAndWait(const services::CallDeps& deps, const services::Endpoint& endpoint,
                         Request request, const std::string& account,
                         std::chrono::milliseconds timeout, const std::string& what) {
  std::promise<absl::Status> promise;
  auto future = promise.get_future();
  services::RpcRecord record;
  record.origin = "startup";
  record.request_id = "startup";
  record.caller = "inspection-gateway (start-up)";
  record.account = account;
  record.resource = services::AuditResource(request);
  services::CallEndpoint<Request, Response>(
      deps, endpoint, std::make_shared<const Request>(std::move(request)),
      std::chrono::system_clock::now() + timeout,
      upstream::CallOptions{.request_id = "startup", .account = account},
      /*idempotency_key=*/"", std::move(record), std::chrono::steady_clock::now(),
      [&promise](services::EndpointResult<Response> out) {
        promise.set_value(out.ok() ? absl::OkStatus() : out.error->ToStatus());
      });
  const absl::Status status = future.get();
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat(what, ": ", status.message()));
}

}  // namespace

absl::Status RegisterWebhookAtVendor(const services::CallDeps& deps, const std::string& url,
                                     const std::string& header_key,
                                     const std::vector<std::string>& events,
                                     std::chrono::milliseconds timeout,
                                     const std::string& account) {
  v1::UpdateWebhookConfigRequest config;
  config.set_webhook_url_v2(url);
  if (!header_key.empty()) config.set_webhook_header_key(header_key);
  // The config key the error points at.
  const std::string key = account.empty() ? "register_webhook"
                                          : absl::StrCat("accounts.", account, ".register_webhook");
  const services::Endpoint& update_webhook =
      deps.endpoints->Get(routes::RouteId::kUpdateWebhookConfig);
  const services::Endpoint& update_event = deps.endpoints->Get(routes::RouteId::kUpdateEventConfig);
  absl::Status status =
      CallAndWait<v1::UpdateWebhookConfigRequest, v1::UpdateWebhookConfigResponse>(
          deps, update_webhook, std::move(config), account, timeout,
          absl::StrCat("registering the webhook URL at the vendor (", key, ")"));
  if (!status.ok()) return status;
  for (const std::string& event : events) {
    v1::UpdateEventConfigRequest enable;
    enable.set_event_name_raw(event);
    enable.set_webhook(true);
    status = CallAndWait<v1::UpdateEventConfigRequest, v1::UpdateEventConfigResponse>(
        deps, update_event, std::move(enable), account, timeout,
        absl::StrCat("enabling event ", event, " (", key, ", register_webhook_events)"));
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

}  // namespace inspection::server
