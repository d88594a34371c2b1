#include "adapters/vendor/image_mapper.h"

#include "adapters/vendor/codes.h"

namespace inspection::vendor {
namespace {

// Moves `singular` to the spelling(s) `spelling` asks for.
void ApplySpelling(nlohmann::json& body, const char* singular, const char* plural,
                   KeySpelling spelling) {
  auto it = body.find(singular);
  if (it == body.end()) return;
  switch (spelling) {
    case KeySpelling::kSingular:
      break;
    case KeySpelling::kPlural:
      body[plural] = *it;
      body.erase(singular);
      break;
    case KeySpelling::kBoth:
      body[plural] = *it;
      break;
  }
}

VendorRequest BodyOf(const google::protobuf::Message& request) {
  VendorRequest out;
  out.body = EncodeMessage(request);
  return out;
}

}  // namespace

VendorRequest EncodeRemoveBackgroundRequest(const v1::RemoveBackgroundRequest& request,
                                            const MapperOptions& options) {
  VendorRequest out = BodyOf(request);
  ApplySpelling(*out.body, "manualTopLeftPositionRatio", "manualTopLeftPositionRatios",
                options.position_ratio_key);
  ApplySpelling(*out.body, "wheelBox", "wheelsBox", options.wheel_box_key);
  return out;
}

absl::Status DecodeSegmentPartsResponse(const nlohmann::json& body,
                                        v1::SegmentPartsResponse* response, DecodeReport* report) {
  if (absl::Status status = DecodeMessage(body, response, report); !status.ok()) return status;
  for (auto& detection : *response->mutable_data()->mutable_detection_list()) {
    for (auto& part : *detection.mutable_detections()->mutable_parts_data()) {
      if (part.has_type()) *part.mutable_part() = DecodePartCode(part.type());
    }
  }
  return absl::OkStatus();
}

}  // namespace inspection::vendor
