#include "gateway/settings/setting.h"

#include "absl/strings/match.h"

namespace inspection::settings {

namespace internal {

std::string RangeText(std::int64_t min, std::int64_t max) {
  return max == kNoMax ? absl::StrCat(">= ", min) : absl::StrCat("in ", min, "..", max);
}

absl::StatusOr<std::int64_t> IntegerIn(const json& value, std::int64_t min, std::int64_t max) {
  const std::string range = RangeText(min, max);
  if (value.is_number_unsigned() &&
      value.get<std::uint64_t>() > static_cast<std::uint64_t>(kNoMax)) {
    return absl::InvalidArgumentError(
        absl::StrCat("must be an integer ", range, ", got ", value.dump()));
  }
  const std::int64_t number = value.get<std::int64_t>();
  if (number < min || number > max) {
    return absl::InvalidArgumentError(absl::StrCat("must be an integer ", range, ", got ", number));
  }
  return number;
}

}  // namespace internal

absl::StatusOr<std::string> NonEmpty(std::string value) {
  if (value.empty()) return absl::InvalidArgumentError("must not be empty");
  return value;
}

absl::StatusOr<std::string> AbsolutePath(std::string value) {
  if (value.empty() || value[0] != '/' || value.find_first_of(" ?#") != std::string::npos) {
    return absl::InvalidArgumentError("must be an absolute path like /webhooks/v2");
  }
  return value;
}

absl::StatusOr<std::string> JsonPointer(std::string value) {
  if (absl::Status status = CheckJsonPointer(value); !status.ok()) return status;
  return value;
}

absl::StatusOr<std::string> OptionalPath(std::string value) { return value; }

absl::StatusOr<std::string> BaseUrl(std::string value) {
  return NormalizeBaseUrl(std::move(value));
}

absl::StatusOr<std::string> OptionalBaseUrl(std::string value) {
  if (value.empty()) return value;
  return NormalizeBaseUrl(std::move(value));
}

absl::StatusOr<std::string> ListenAddress(std::string value) {
  if (absl::Status status = CheckHostPort(value); !status.ok()) return status;
  return value;
}

absl::Status JsonPointerItem(absl::string_view value) { return CheckJsonPointer(value); }

}  // namespace inspection::settings
