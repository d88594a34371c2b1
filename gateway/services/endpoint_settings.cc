#include "gateway/services/endpoint_settings.h"

#include <ratio>

namespace inspection::services {

using settings::kMaxInt;

settings::Schema<vendor::MapperOptions> MapperSchema() {
  return {{
      settings::Enum<vendor::MapperOptions, vendor::KeySpelling>(
          "background_removal.position_ratio_key",
          [](auto& o) -> auto& { return o.position_ratio_key; },
          {{"singular", vendor::KeySpelling::kSingular},
           {"plural", vendor::KeySpelling::kPlural},
           {"both", vendor::KeySpelling::kBoth}},
          "Background removal: send manualTopLeftPositionRatio (singular), "
          "manualTopLeftPositionRatios (plural) or both."),
      settings::Enum<vendor::MapperOptions, vendor::KeySpelling>(
          "background_removal.wheel_box_key", [](auto& o) -> auto& { return o.wheel_box_key; },
          {{"singular", vendor::KeySpelling::kSingular},
           {"plural", vendor::KeySpelling::kPlural},
           {"both", vendor::KeySpelling::kBoth}},
          "Background removal: send wheelBox (singular), wheelsBox (plural) or both."),
      settings::Enum<vendor::MapperOptions, vendor::ParamsPlacement>(
          "test_webhook.params_in", [](auto& o) -> auto& { return o.test_webhook_params; },
          {{"query", vendor::ParamsPlacement::kQuery}, {"body", vendor::ParamsPlacement::kBody}},
          "Where TestWebhook sends eventName and inspectionId: the query string or a JSON body."),
      settings::StringList<vendor::MapperOptions>(
          "damage.inspection_id_pointers",
          [](auto& o) -> auto& { return o.inspection_id_pointers; }, settings::JsonPointerItem,
          "POINTER,...",
          "RFC 6901 JSON pointers tried in order to find the inspection id in the DetectDamage "
          "response (the spec does not show its shape)."),
  }};
}

settings::Schema<validation::ValidationLimits> ValidationSchema() {
  return {{
      settings::Integer<validation::ValidationLimits>(
          "search.max_limit", [](auto& o) -> auto& { return o.search_max_limit; }, 1, kMaxInt, "N",
          "Largest page size a search may request."),
      settings::Integer<validation::ValidationLimits>(
          "validation.max_urls", [](auto& o) -> auto& { return o.max_urls; }, 1, 100000, "N",
          "URLs per call in AssessQualityBatch, SegmentVehicle, SegmentParts, DetectDamage and "
          "StreamDamageResults; more: INVALID_ARGUMENT before any vendor call (raise "
          "grpc.max_receive_message_bytes with it: a URL may have 2,048 characters)."),
  }};
}

}  // namespace inspection::services
