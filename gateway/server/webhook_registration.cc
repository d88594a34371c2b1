#include "gateway/server/webhook_registration.h"

#include <future>

#include "absl/strings/str_cat.h"
#include "adapters/vendor/event_config_mapper.h"

namespace inspection::server {
namespace {

absl::Status CallAndWait(upstream::VendorCaller& vendor, const std::string& account,
                         routes::RouteId route, const vendor::VendorRequest& request,
                         std::chrono::milliseconds timeout, const std::string& what) {
  std::promise<upstream::VendorResult> promise;
  auto future = promise.get_future();
  vendor.Call(route, request, std::chrono::system_clock::now() + timeout,
              upstream::CallOptions{.request_id = "startup", .account = account},
              [&promise](upstream::VendorResult result) { promise.set_value(std::move(result)); });
  upstream::VendorResult result = future.get();
  if (result.ok()) return absl::OkStatus();
  return absl::Status(result.error->code, absl::StrCat(what, ": ", result.error->message));
}

}  // namespace

absl::Status RegisterWebhookAtVendor(upstream::VendorCaller& vendor, const std::string& url,
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
  absl::Status status =
      CallAndWait(vendor, account, routes::RouteId::kUpdateWebhookConfig,
                  vendor::EncodeUpdateWebhookConfigRequest(config), timeout,
                  absl::StrCat("registering the webhook URL at the vendor (", key, ")"));
  if (!status.ok()) return status;
  for (const std::string& event : events) {
    v1::UpdateEventConfigRequest enable;
    enable.set_event_name_raw(event);
    enable.set_webhook(true);
    status = CallAndWait(
        vendor, account, routes::RouteId::kUpdateEventConfig,
        vendor::EncodeUpdateEventConfigRequest(enable), timeout,
        absl::StrCat("enabling event ", event, " (", key, ", register_webhook_events)"));
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

}  // namespace inspection::server
