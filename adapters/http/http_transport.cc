#include "adapters/http/http_transport.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace inspection::http {

bool IsHttpToken(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (absl::ascii_isalnum(static_cast<unsigned char>(c))) continue;
    if (std::string_view("!#$%&'*+-.^_`|~").find(c) == std::string_view::npos) return false;
  }
  return true;
}

absl::Status CheckReadableCaFile(const std::string& ca_file) {
  FILE* ca = std::fopen(ca_file.c_str(), "r");
  if (ca == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot read the CA file ", ca_file, ": ", std::strerror(errno)));
  }
  std::fclose(ca);
  return absl::OkStatus();
}

bool IsSafeHeaderValue(std::string_view s) {
  return s.find_first_of("\r\n") == std::string_view::npos && s.find('\0') == s.npos;
}

const char* TransportErrorName(TransportError error) {
  switch (error) {
    case TransportError::kNone:
      return "none";
    case TransportError::kConnect:
      return "connect";
    case TransportError::kTimeout:
      return "timeout";
    case TransportError::kSend:
      return "send";
    case TransportError::kReceive:
      return "receive";
    case TransportError::kTooLarge:
      return "too_large";
    case TransportError::kOther:
      return "other";
  }
  return "other";
}

}  // namespace inspection::http
