#include "adapters/vendor/damage_mapper.h"

namespace inspection::vendor {

std::string FindIdByPointers(const nlohmann::json& body, const std::vector<std::string>& pointers) {
  for (const std::string& text : pointers) {
    // json_pointer's constructor throws on a malformed pointer; config validation
    // rejects those, this guard keeps a bad one from ever crossing the boundary.
    try {
      const nlohmann::json::json_pointer pointer(text);
      if (!body.contains(pointer)) continue;
      const nlohmann::json& value = body.at(pointer);
      if (value.is_string() && !value.get_ref<const std::string&>().empty()) {
        return value.get<std::string>();
      }
      if (value.is_number_integer()) return value.dump();
    } catch (const nlohmann::json::exception&) {
      continue;
    }
  }
  return {};
}

absl::Status DecodeDetectDamageResponse(const nlohmann::json& body, const MapperOptions& options,
                                        v1::DetectDamageResponse* response) {
  response->Clear();
  *response->mutable_body() = JsonToValue(body);
  response->set_inspection_id(FindIdByPointers(body, options.inspection_id_pointers));
  return absl::OkStatus();
}

}  // namespace inspection::vendor
