#include "adapters/vendor/token_mapper.h"

#include "inspection/v1/vendor_options.pb.h"

namespace inspection::vendor {

VendorRequest EncodeCreateTokenRequest(const v1::CreateTokenRequest& request) {
  v1::CreateTokenRequest filled = request;
  auto* options = filled.mutable_options();
  // The spec fixes these three to false and tradeinVehicle to true; the API lets the
  // caller leave them unset and fills them here.
  if (!options->has_cost()) options->set_cost(false);
  if (!options->has_report()) options->set_report(false);
  if (!options->has_download_roi()) options->set_download_roi(false);
  if (!filled.trade_in().has_tradein_vehicle()) {
    filled.mutable_trade_in()->set_tradein_vehicle(true);
  }
  if (filled.customer().client_type().empty()) {
    filled.mutable_customer()->set_client_type("customer");
  }
  VendorRequest out;
  out.body = EncodeMessage(filled);
  // sendingType is required by the spec even when null (SENDING_TYPE_NONE encodes
  // as null through its vendor_null annotation).
  auto& trade_in = (*out.body)["tradeIn"];
  if (!trade_in.contains("sendingType")) trade_in["sendingType"] = nullptr;
  // gender is optional at the vendor; GENDER_UNSPECIFIED encodes as null already.
  return out;
}

std::string DeviceIdForUid(std::string_view uid) { return std::string(uid) + "-pwa"; }

std::string CustomerUrl(std::string_view webapp_url, std::string_view locale,
                        std::string_view uid) {
  std::string url(webapp_url);
  url.append("/").append(locale).append("/services/").append(uid);
  return url;
}

std::string LocaleCode(v1::Locale locale) {
  const auto* value = v1::Locale_descriptor()->FindValueByNumber(locale);
  if (value == nullptr) return {};
  return value->options().GetExtension(v1::vendor_string);
}

absl::Status DecodeCreateTokenResponse(const nlohmann::json& body, std::string_view webapp_url,
                                       std::string_view locale, v1::CreateTokenResponse* response,
                                       DecodeReport* report) {
  if (absl::Status status = DecodeMessage(body, response, report); !status.ok()) return status;
  const std::string& uid = response->token().uid();
  if (uid.empty()) {
    return absl::InvalidArgumentError("token creation response has no token.uid");
  }
  response->set_device_id(DeviceIdForUid(uid));
  if (!webapp_url.empty() && !locale.empty()) {
    response->set_customer_url(CustomerUrl(webapp_url, locale, uid));
  }
  return absl::OkStatus();
}

VendorRequest EncodeGetTokenStatusRequest(const v1::GetTokenStatusRequest& request) {
  VendorRequest out;
  out.query.emplace_back("deviceId", DeviceIdForUid(request.uid()));
  return out;
}

}  // namespace inspection::vendor
