#include "gateway/cache/cache_key.h"

#include <cstddef>
#include <string>
#include <string_view>

namespace inspection::cache {
namespace {

std::size_t DecimalDigits(std::size_t n) {
  std::size_t digits = 1;
  while (n >= 10) {
    n /= 10;
    ++digits;
  }
  return digits;
}

std::size_t PartSize(std::string_view part) { return DecimalDigits(part.size()) + 1 + part.size(); }

// Length-prefixed rather than separator-joined: the request part is arbitrary bytes, so no
// separator could be guaranteed absent from it.
void AppendPart(std::string_view part, std::string* out) {
  out->append(std::to_string(part.size()));
  out->push_back(':');
  out->append(part.data(), part.size());
}

}  // namespace

std::string CacheKey::Encoded() const {
  std::string out;
  out.reserve(EncodedSize());
  AppendPart(account, &out);
  AppendPart(route, &out);
  AppendPart(request, &out);
  return out;
}

std::size_t CacheKey::EncodedSize() const {
  return PartSize(account) + PartSize(route) + PartSize(request);
}

std::string RouteTag(std::string_view account, std::string_view route) {
  // The account is length-prefixed so that no (account, route) pair can spell another's tag.
  std::string tag = "route:";
  AppendPart(account, &tag);
  tag.append(route.data(), route.size());
  return tag;
}

std::string InspectionTag(std::string_view inspection_id) {
  std::string tag = "inspection:";
  tag.append(inspection_id.data(), inspection_id.size());
  return tag;
}

}  // namespace inspection::cache
