#include "adapters/vendor/event_config_mapper.h"

#include <openssl/sha.h>

#include "absl/strings/str_cat.h"
#include "inspection/v1/vendor_options.pb.h"

namespace inspection::vendor {

std::string EventNameString(v1::EventName name, const std::string& raw) {
  if (!raw.empty()) return raw;
  const auto* value = v1::EventName_descriptor()->FindValueByNumber(name);
  if (value == nullptr) return {};
  return value->options().GetExtension(v1::vendor_string);
}

namespace {

constexpr char kVendorKeyField[] = "webhookHeaderKey";
constexpr char kSealedKeyField[] = "webhookHeaderKeySha256Prefix";

// A configwebhook answer into `config`, its key sealed first and carried over as the
// gateway-only fields.
absl::Status DecodeWebhookConfig(const nlohmann::json& body, v1::WebhookConfig* config,
                                 DecodeReport* report) {
  nlohmann::json sealed = body;
  SealWebhookHeaderKey(&sealed);
  std::string prefix;
  if (sealed.is_object()) {
    const auto at = sealed.find(kSealedKeyField);
    if (at != sealed.end()) {
      if (at->is_string()) prefix = at->get<std::string>();
      sealed.erase(at);
    }
  }
  absl::Status status = DecodeMessage(sealed, config, report);  // clears `config` first
  config->set_webhook_header_key_set(!prefix.empty());
  config->set_webhook_header_key_sha256_prefix(prefix);
  return status;
}

}  // namespace

std::string WebhookKeySha256Prefix(const std::string& key) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(key.data()), key.size(), digest);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string prefix;
  for (int i = 0; i < 6; ++i) {
    prefix.push_back(kHex[digest[i] >> 4]);
    prefix.push_back(kHex[digest[i] & 0xF]);
  }
  return prefix;
}

void SealWebhookHeaderKey(nlohmann::json* body) {
  if (body == nullptr || !body->is_object()) return;
  const auto at = body->find(kVendorKeyField);
  if (at == body->end()) return;
  nlohmann::json sealed = nullptr;
  if (at->is_string() && !at->get_ref<const std::string&>().empty()) {
    sealed = WebhookKeySha256Prefix(at->get<std::string>());
  }
  body->erase(at);
  (*body)[kSealedKeyField] = std::move(sealed);
}

absl::Status DecodeGetWebhookConfigResponse(const nlohmann::json& body,
                                            v1::GetWebhookConfigResponse* response,
                                            DecodeReport* report) {
  response->Clear();
  return DecodeWebhookConfig(body, response->mutable_config(), report);
}

absl::Status DecodeUpdateWebhookConfigResponse(const nlohmann::json& body,
                                               v1::UpdateWebhookConfigResponse* response,
                                               DecodeReport* report) {
  response->Clear();
  return DecodeWebhookConfig(body, response->mutable_config(), report);
}

VendorRequest EncodeTestWebhookRequest(const v1::TestWebhookRequest& request,
                                       const MapperOptions& options) {
  VendorRequest out;
  const std::string event_name = EventNameString(request.event_name(), request.event_name_raw());
  if (options.test_webhook_params == ParamsPlacement::kBody) {
    nlohmann::json body = {{"eventName", event_name}};
    if (!request.inspection_id().empty()) body["inspectionId"] = request.inspection_id();
    out.body = std::move(body);
  } else {
    out.query.emplace_back("eventName", event_name);
    if (!request.inspection_id().empty()) {
      out.query.emplace_back("inspectionId", request.inspection_id());
    }
  }
  return out;
}

}  // namespace inspection::vendor
