#include "adapters/vendor/event_mapper.h"

#include "adapters/vendor/codes.h"
#include "inspection/v1/vendor_options.pb.h"

namespace inspection::vendor {

const std::vector<std::string>& SpecEventNames() {
  static const auto* const kNames = [] {
    auto* names = new std::vector<std::string>();
    const google::protobuf::EnumDescriptor* events = v1::EventName_descriptor();
    for (int i = 0; i < events->value_count(); ++i) {
      const google::protobuf::EnumValueOptions& options = events->value(i)->options();
      if (options.HasExtension(v1::vendor_string)) {
        names->push_back(options.GetExtension(v1::vendor_string));
      }
    }
    return names;
  }();
  return *kNames;
}

v1::EventName EventNameFromString(const std::string& name) {
  const auto* descriptor = v1::EventName_descriptor();
  for (int i = 0; i < descriptor->value_count(); ++i) {
    const auto* value = descriptor->value(i);
    if (value->options().GetExtension(v1::vendor_string) == name) {
      return static_cast<v1::EventName>(value->number());
    }
  }
  return v1::EVENT_NAME_UNSPECIFIED;
}

absl::Status DecodeCreateReport(const nlohmann::json& body, v1::CreateReport* report,
                                DecodeReport* drift) {
  if (absl::Status status = DecodeMessage(body, report, drift); !status.ok()) return status;
  v1::ReportData* data = report->mutable_data_api()->mutable_data();
  // `damages` is a map in the proto (gateway_only for the codec, which does not do maps):
  // the codec kept it in unknown_fields; decode it from the body and take it out of there.
  const nlohmann::json* damages = nullptr;
  if (const auto api = body.find("dataAPI"); api != body.end() && api->is_object()) {
    if (const auto d = api->find("data"); d != api->end() && d->is_object()) {
      if (const auto found = d->find("damages"); found != d->end() && found->is_object()) {
        damages = &*found;
      }
    }
  }
  if (damages != nullptr) {
    bool all_decoded = true;
    google::protobuf::Map<std::string, v1::DamageList> decoded;
    for (const auto& [part, list] : damages->items()) {
      if (!list.is_array()) {
        all_decoded = false;
        break;
      }
      v1::DamageList& out = decoded[part];
      for (const auto& item : list) {
        DecodeReport item_drift;
        if (!DecodeMessage(item, out.add_damages(), &item_drift).ok()) {
          all_decoded = false;
          break;
        }
        if (drift != nullptr) {
          for (const auto& path : item_drift.unknown_paths) {
            drift->unknown_paths.push_back("dataAPI.data.damages." + part + "." + path);
          }
        }
      }
      if (!all_decoded) break;
    }
    // Only a fully decoded map replaces the raw value: never half-filled.
    if (all_decoded) {
      *data->mutable_damages() = std::move(decoded);
      data->mutable_unknown_fields()->mutable_fields()->erase("damages");
      if (drift != nullptr) {
        auto& paths = drift->unknown_paths;
        paths.erase(std::remove(paths.begin(), paths.end(), "dataAPI.data.damages"), paths.end());
      }
    }
  }
  for (auto& [part, list] : *data->mutable_damages()) {
    for (auto& damage : *list.mutable_damages()) {
      *damage.mutable_part_code() = DecodePartCode(damage.has_part() ? damage.part() : part);
    }
  }
  for (auto& detection : *data->mutable_detection_list()) {
    if (detection.has_angle())
      detection.set_angle_name(std::string(AngleCodeName(detection.angle())));
  }
  for (auto& image : *data->mutable_inspection_images()) {
    if (image.has_angle()) image.set_angle_name(std::string(AngleCodeName(image.angle())));
  }
  return absl::OkStatus();
}

}  // namespace inspection::vendor
