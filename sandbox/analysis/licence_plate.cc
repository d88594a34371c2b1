#include "sandbox/analysis/licence_plate.h"

#include <cctype>

#include "sandbox/analysis/image_analysis.h"

namespace inspection::sandbox {

std::string PlateForImages(const std::vector<std::string>& urls) {
  for (const std::string& url : urls) {
    for (const char* marker : {"plate=", "plate-"}) {
      const size_t at = url.find(marker);
      if (at == std::string::npos) continue;
      std::string plate;
      for (size_t i = at + 6; i < url.size(); ++i) {
        const unsigned char c = static_cast<unsigned char>(url[i]);
        if (!std::isalnum(c) && c != '-') break;
        plate.push_back(static_cast<char>(std::toupper(c)));
      }
      if (plate.size() >= 4 && plate.size() <= 12) return plate;
    }
  }
  uint64_t hash = StableHash(urls.empty() ? std::string() : urls.front());
  std::string plate = "AA-000-AA";
  for (int i : {0, 1, 7, 8}) {
    plate[i] = static_cast<char>('A' + hash % 26);
    hash /= 26;
  }
  for (int i : {3, 4, 5}) {
    plate[i] = static_cast<char>('0' + hash % 10);
    hash /= 10;
  }
  return plate;
}

}  // namespace inspection::sandbox
