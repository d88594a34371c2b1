#include "gateway/webhooks/json_pointer.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace inspection::webhooks {
namespace {

// RFC 6901 section 4: array indices are "0" or a decimal without leading zeros. Anything
// else ("-" included, which names the element after the last) addresses nothing.
bool ParseArrayIndex(const std::string& token, size_t* index) {
  if (token.empty() || token.size() > 18) return false;  // 18 digits cannot overflow
  if (token.size() > 1 && token[0] == '0') return false;
  size_t value = 0;
  for (const char c : token) {
    if (c < '0' || c > '9') return false;
    value = value * 10 + static_cast<size_t>(c - '0');
  }
  *index = value;
  return true;
}

}  // namespace

absl::StatusOr<JsonPointer> JsonPointer::Parse(const std::string& text) {
  std::vector<std::string> tokens;
  if (text.empty()) return JsonPointer(text, std::move(tokens));
  if (text[0] != '/') {
    return absl::InvalidArgumentError(
        absl::StrCat("JSON pointer \"", text, "\" must be empty or start with '/'"));
  }
  std::string token;
  for (size_t i = 1; i <= text.size(); ++i) {
    if (i == text.size() || text[i] == '/') {
      tokens.push_back(std::move(token));
      token.clear();
      continue;
    }
    if (text[i] != '~') {
      token.push_back(text[i]);
      continue;
    }
    // "~1" is '/', "~0" is '~'; decoding "~01" gives "~1", not "/" (order matters).
    if (i + 1 < text.size() && (text[i + 1] == '0' || text[i + 1] == '1')) {
      token.push_back(text[i + 1] == '0' ? '~' : '/');
      ++i;
      continue;
    }
    return absl::InvalidArgumentError(
        absl::StrCat("JSON pointer \"", text, "\" has a '~' not followed by '0' or '1'"));
  }
  return JsonPointer(text, std::move(tokens));
}

const nlohmann::json* JsonPointer::Resolve(const nlohmann::json& document) const {
  const nlohmann::json* current = &document;
  for (const std::string& token : tokens_) {
    if (current->is_object()) {
      const auto member = current->find(token);
      if (member == current->end()) return nullptr;
      current = &*member;
    } else if (current->is_array()) {
      size_t index = 0;
      if (!ParseArrayIndex(token, &index) || index >= current->size()) return nullptr;
      current = &(*current)[index];
    } else {
      return nullptr;
    }
  }
  return current;
}

std::string JsonPointer::IdAt(const nlohmann::json& document) const {
  const nlohmann::json* value = Resolve(document);
  if (value == nullptr) return "";
  if (value->is_string()) return value->get<std::string>();
  if (value->is_number_unsigned()) return std::to_string(value->get<uint64_t>());
  if (value->is_number_integer()) return std::to_string(value->get<int64_t>());
  return "";
}

}  // namespace inspection::webhooks
