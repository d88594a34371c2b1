#include "gateway/metrics/metrics_scope.h"

#include <algorithm>
#include <exception>
#include <set>

#include "absl/strings/str_cat.h"

namespace inspection::metrics {
namespace {

// The charset keeps URLs (':', '/', '?'), free text and most ids (which come with '-') out;
// the length cap keeps a mistaken payload from becoming a label.
bool IsValidLabelValue(std::string_view value) {
  if (value.empty() || value.size() > 128) return false;
  for (const char c : value) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '.';
    if (!ok) return false;
  }
  return true;
}

}  // namespace

absl::Status CheckLabelValues(std::string_view list, const std::vector<std::string>& values) {
  std::set<std::string_view> seen;
  for (const std::string& value : values) {
    if (!IsValidLabelValue(value)) {
      return absl::InvalidArgumentError(
          absl::StrCat(std::string(list), ": label value \"", value,
                       "\" must be 1..128 characters of [A-Za-z0-9_.]"));
    }
    if (value == kOtherLabel) {
      return absl::InvalidArgumentError(
          absl::StrCat(std::string(list), ": \"other\" is reserved for the catch-all bucket"));
    }
    if (!seen.insert(value).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(std::string(list), ": duplicate label value \"", value, "\""));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckAccountLabels(const std::vector<std::string>& accounts) {
  std::set<std::string_view> seen;
  for (const std::string& account : accounts) {
    const bool chars_ok = std::all_of(account.begin(), account.end(), [](char c) {
      return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
             c == '_' || c == '.' || c == '-';
    });
    if (account.empty() || account.size() > 64 || !chars_ok) {
      return absl::InvalidArgumentError(absl::StrCat(
          "accounts: label value \"", account, "\" must be 1..64 characters of [A-Za-z0-9_.-]"));
    }
    if (!seen.insert(account).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("accounts: duplicate label value \"", account, "\""));
    }
  }
  return absl::OkStatus();
}

const prometheus::Histogram::BucketBoundaries& LatencyBuckets() {
  static const auto* const kBuckets = new prometheus::Histogram::BucketBoundaries{
      0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
  return *kBuckets;
}

double Seconds(std::chrono::nanoseconds elapsed) {
  return std::chrono::duration<double>(elapsed).count();
}

size_t IndexOrOther(const std::map<std::string, size_t, std::less<>>& index, std::string_view key,
                    size_t other) {
  const auto it = index.find(key);
  return it == index.end() ? other : it->second;
}

absl::Status Registering(const std::function<void()>& build) {
  try {
    build();
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("registering metrics: ", e.what()));
  }
  return absl::OkStatus();
}

}  // namespace inspection::metrics
