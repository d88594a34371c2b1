// The per-RPC override registry: the only unary RPCs whose mapping is code, not the generic
// mapping of endpoints.h. Everything else about them (routing, validation rules, admission,
// idempotency, the pipeline, errors, metrics) is the same as for every other RPC. An RPC
// belongs here only when its annotations cannot say what it needs:
//
//   CreateToken          encode: fills the values the spec fixes and the caller may leave unset;
//                        decode: computes device_id and customer_url (config webapp_url);
//                        on success: tells the reconciler about the token.
//   GetTokenStatus       encode: the query's deviceId is the uid with "-pwa" appended.
//   RemoveBackground     encode: the two keys the spec spells twice, per config
//                        (background_removal.position_ratio_key, .wheel_box_key).
//   SegmentParts         decode: each part's vendor code also decoded into `part` (codes.h).
//   DetectDamage         decode: the undocumented answer is kept whole and the inspection id
//                        found at config damage.inspection_id_pointers; on success: tells the
//                        reconciler about the submission.
//   GetWebhookConfig,    decode: the webhook header key is a secret, sealed into the
//   UpdateWebhookConfig  gateway-only fields webhook_header_key_set and _sha256_prefix.
//   TestWebhook          encode: eventName/inspectionId in the query or the body, per config
//                        (test_webhook.params_in: the spec does not show where).
#include "adapters/vendor/damage_mapper.h"
#include "adapters/vendor/event_config_mapper.h"
#include "adapters/vendor/image_mapper.h"
#include "adapters/vendor/token_mapper.h"
#include "gateway/services/endpoints.h"

namespace inspection::services {
namespace {

using google::protobuf::Message;
using routes::RouteId;

template <class T>
const T& As(const Message& message) {
  return static_cast<const T&>(message);
}

template <class T>
T* As(Message* message) {
  return static_cast<T*>(message);
}

Endpoint& At(std::vector<Endpoint>& endpoints, RouteId id) {
  return endpoints[static_cast<size_t>(id)];
}

void OverrideTokens(const EndpointOptions& options, std::vector<Endpoint>& endpoints) {
  Endpoint& create = At(endpoints, RouteId::kCreateToken);
  create.encode = [](const Message& r) {
    return vendor::EncodeCreateTokenRequest(As<v1::CreateTokenRequest>(r));
  };
  create.decode = [&options](const nlohmann::json& j, const Message& r, Message* out,
                             vendor::DecodeReport* report) {
    const auto& request = As<v1::CreateTokenRequest>(r);
    return vendor::DecodeCreateTokenResponse(j, options.webapp_url,
                                             vendor::LocaleCode(request.customer().locale()),
                                             As<v1::CreateTokenResponse>(out), report);
  };
  create.on_success = [&options](const Message& r, const std::string& account) {
    const auto& response = As<v1::CreateTokenResponse>(r);
    if (options.on_token_created && response.token().has_uid()) {
      options.on_token_created(account, response.token().uid());
    }
  };
  At(endpoints, RouteId::kGetTokenStatus).encode = [](const Message& r) {
    return vendor::EncodeGetTokenStatusRequest(As<v1::GetTokenStatusRequest>(r));
  };
}

void OverrideDamage(const EndpointOptions& options, std::vector<Endpoint>& endpoints) {
  Endpoint& detect = At(endpoints, RouteId::kDetectDamage);
  detect.decode = [&options](const nlohmann::json& j, const Message&, Message* out,
                             vendor::DecodeReport*) {
    return vendor::DecodeDetectDamageResponse(j, options.mapper, As<v1::DetectDamageResponse>(out));
  };
  detect.on_success = [&options](const Message& r, const std::string& account) {
    const auto& response = As<v1::DetectDamageResponse>(r);
    if (options.on_damage_submitted && !response.inspection_id().empty()) {
      options.on_damage_submitted(account, response.inspection_id());
    }
  };
}

void OverrideEventConfig(const EndpointOptions& options, std::vector<Endpoint>& endpoints) {
  At(endpoints, RouteId::kGetWebhookConfig).decode = [](const nlohmann::json& j, const Message&,
                                                        Message* out,
                                                        vendor::DecodeReport* report) {
    return vendor::DecodeGetWebhookConfigResponse(j, As<v1::GetWebhookConfigResponse>(out), report);
  };
  At(endpoints, RouteId::kUpdateWebhookConfig).decode =
      [](const nlohmann::json& j, const Message&, Message* out, vendor::DecodeReport* report) {
        return vendor::DecodeUpdateWebhookConfigResponse(
            j, As<v1::UpdateWebhookConfigResponse>(out), report);
      };
  At(endpoints, RouteId::kTestWebhook).encode = [&options](const Message& r) {
    return vendor::EncodeTestWebhookRequest(As<v1::TestWebhookRequest>(r), options.mapper);
  };
}

}  // namespace

void ApplyEndpointOverrides(const EndpointOptions& options, std::vector<Endpoint>& endpoints) {
  OverrideTokens(options, endpoints);
  OverrideDamage(options, endpoints);
  OverrideEventConfig(options, endpoints);
  At(endpoints, RouteId::kRemoveBackground).encode = [&options](const Message& r) {
    return vendor::EncodeRemoveBackgroundRequest(As<v1::RemoveBackgroundRequest>(r),
                                                 options.mapper);
  };
  At(endpoints, RouteId::kSegmentParts).decode = [](const nlohmann::json& j, const Message&,
                                                    Message* out, vendor::DecodeReport* report) {
    return vendor::DecodeSegmentPartsResponse(j, As<v1::SegmentPartsResponse>(out), report);
  };
}

}  // namespace inspection::services
