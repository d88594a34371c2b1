#include "adapters/vendor/event_config_mapper.h"

#include "absl/strings/str_cat.h"
#include "inspection/v1/vendor_options.pb.h"

namespace inspection::vendor {

std::string EventNameString(v1::EventName name, const std::string& raw) {
  if (!raw.empty()) return raw;
  const auto* value = v1::EventName_descriptor()->FindValueByNumber(name);
  if (value == nullptr) return {};
  return value->options().GetExtension(v1::vendor_string);
}

absl::Status DecodeGetWebhookConfigResponse(const nlohmann::json& body,
                                            v1::GetWebhookConfigResponse* response,
                                            DecodeReport* report) {
  response->Clear();
  return DecodeMessage(body, response->mutable_config(), report);
}

VendorRequest EncodeUpdateWebhookConfigRequest(const v1::UpdateWebhookConfigRequest& request) {
  VendorRequest out;
  out.body = EncodeMessage(request);
  return out;
}

absl::Status DecodeUpdateWebhookConfigResponse(const nlohmann::json& body,
                                               v1::UpdateWebhookConfigResponse* response,
                                               DecodeReport* report) {
  response->Clear();
  return DecodeMessage(body, response->mutable_config(), report);
}

absl::Status DecodeListEventConfigsResponse(const nlohmann::json& body,
                                            v1::ListEventConfigsResponse* response,
                                            DecodeReport* report) {
  response->Clear();
  if (!body.is_array()) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected a JSON array of event configurations, got ", body.type_name()));
  }
  for (size_t i = 0; i < body.size(); ++i) {
    DecodeReport item_report;
    absl::Status status = DecodeMessage(body[i], response->add_event_configs(), &item_report);
    if (!status.ok()) {
      response->Clear();  // never half-filled
      return absl::InvalidArgumentError(absl::StrCat("[", i, "]: ", status.message()));
    }
    if (report != nullptr) {
      const std::string prefix = absl::StrCat("[", i, "].");
      for (auto& path : item_report.unknown_paths) report->unknown_paths.push_back(prefix + path);
      for (auto& path : item_report.type_mismatch_paths) {
        report->type_mismatch_paths.push_back(prefix + path);
      }
      for (auto& path : item_report.unknown_enum_paths) {
        report->unknown_enum_paths.push_back(prefix + path);
      }
    }
  }
  return absl::OkStatus();
}

VendorRequest EncodeUpdateEventConfigRequest(const v1::UpdateEventConfigRequest& request) {
  VendorRequest out;
  out.body = EncodeMessage(request);
  return out;
}

absl::Status DecodeUpdateEventConfigResponse(const nlohmann::json& body,
                                             v1::UpdateEventConfigResponse* response,
                                             DecodeReport* report) {
  response->Clear();
  return DecodeMessage(body, response->mutable_config(), report);
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

absl::Status DecodeTestWebhookResponse(const nlohmann::json& body,
                                       v1::TestWebhookResponse* response, DecodeReport* report) {
  return DecodeMessage(body, response, report);
}

}  // namespace inspection::vendor
