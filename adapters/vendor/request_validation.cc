#include "adapters/vendor/request_validation.h"

#include <cmath>
#include <cstddef>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "inspection/v1/vendor_options.pb.h"

namespace inspection::validation {
namespace {

// Descriptions never quote what the caller sent: URLs may be pre-signed (they carry
// credentials), header keys are secrets, and everything else is the caller's own
// input, which they already have. Only short numbers (a count, a length, an index)
// are reported.

constexpr std::size_t kMaxUrlLength = 2048;

constexpr char kUrlExpectation[] =
    "must be an absolute http:// or https:// URL with a host, no user info, no spaces or "
    "control characters, only ASCII characters (percent-encode others) and at most 2048 "
    "characters";

constexpr char kLocaleList[] =
    "en, fr, de, nl-BE, it, es, sv or no (LOCALE_EN, LOCALE_FR, LOCALE_DE, LOCALE_NL_BE, "
    "LOCALE_IT, LOCALE_ES, LOCALE_SV, LOCALE_NO)";

// Appends violations in the order the checks run; callers run them in field order. Keeps
// the first kMaxReportedViolations and counts the rest, so a request with a million bad
// fields costs a counter, not a million strings.
class Collector {
 public:
  void Add(std::string field, std::string description) {
    if (violations_.size() < kMaxReportedViolations) {
      violations_.push_back({std::move(field), std::move(description)});
    } else {
      ++omitted_;
    }
  }
  // True once further violations would only be counted.
  bool full() const { return violations_.size() >= kMaxReportedViolations; }
  Violations Take() {
    if (omitted_ > 0) {
      violations_.push_back(
          {"", absl::StrCat("and ", omitted_, " more field violations not listed.")});
    }
    return std::move(violations_);
  }

 private:
  Violations violations_;
  size_t omitted_ = 0;
};

bool IsAsciiDigit(char c) { return c >= '0' && c <= '9'; }

// Control characters of ASCII (C0 and DEL) and ASCII whitespace.
bool IsSpaceOrControl(char c) {
  const auto u = static_cast<unsigned char>(c);
  return u <= 0x20 || u == 0x7F;
}

bool HasSpaceOrControl(absl::string_view s) {
  for (char c : s) {
    if (IsSpaceOrControl(c)) return true;
  }
  return false;
}

// Empty or only whitespace: for free-text fields (names, plate, ids) a blank value
// carries no information, so it counts as missing.
bool IsBlank(absl::string_view s) { return absl::StripAsciiWhitespace(s).empty(); }

// Number of Unicode code points of a (valid) UTF-8 string, so that a length reported
// to the caller matches what they typed. gRPC has already rejected invalid UTF-8.
std::size_t Utf8Length(absl::string_view s) {
  std::size_t count = 0;
  for (char c : s) {
    if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) ++count;
  }
  return count;
}

// The spec's placeholder form for customer data: `<EMAIL>`, `<FIRST_NAME>`,
// `<PHONE>`. The spec shows upper-case names only; any name of letters, digits, `_`
// and `-` is accepted so that callers may use their own placeholder names.
bool IsPlaceholder(absl::string_view s) {
  if (s.size() < 3 || s.front() != '<' || s.back() != '>') return false;
  for (char c : s.substr(1, s.size() - 2)) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') {
      return false;
    }
  }
  return true;
}

// Exactly one '@' with something on both sides. Deliberately no deeper check: the
// spec gives no e-mail grammar, and the vendor is the one sending the messages.
bool IsPlausibleEmail(absl::string_view s) {
  const std::size_t at = s.find('@');
  if (at == absl::string_view::npos || s.find('@', at + 1) != absl::string_view::npos) {
    return false;
  }
  return at > 0 && at + 1 < s.size();
}

// `+` or `00`, then the country code and number: 7 to 15 digits (E.164 allows at most
// 15), the first one 1-9 since no country code starts with 0 (this catches a national
// number written after `+`, such as `+06...`). Spaces, dots, dashes and parentheses
// are tolerated between digits; the number must start and end with a digit.
bool IsInternationalPhone(absl::string_view s) {
  if (!absl::ConsumePrefix(&s, "+") && !absl::ConsumePrefix(&s, "00")) return false;
  if (s.empty() || s.front() < '1' || s.front() > '9' || !IsAsciiDigit(s.back())) {
    return false;
  }
  int digits = 0;
  for (char c : s) {
    if (IsAsciiDigit(c)) {
      ++digits;
    } else if (c != ' ' && c != '.' && c != '-' && c != '(' && c != ')') {
      return false;
    }
  }
  return digits >= 7 && digits <= 15;
}

// `#RRGGBB`, `RRGGBB`, `#RGB` or `RGB`, hex digits of either case.
bool IsHexColour(absl::string_view s) {
  absl::ConsumePrefix(&s, "#");
  if (s.size() != 3 && s.size() != 6) return false;
  for (char c : s) {
    if (!absl::ascii_isxdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

// Why a URL is not well formed; nullptr when it is. Only the reasons, never the URL.
const char* UrlProblem(absl::string_view url) {
  if (url.size() > kMaxUrlLength) return "it is longer than 2048 characters";
  for (char c : url) {
    if (IsSpaceOrControl(c)) return "it contains a space or a control character";
    // URLs are ASCII (RFC 3986): other characters must be percent-encoded and
    // international host names written in punycode. Rejecting them also rules out
    // Unicode spaces and invisible characters without a Unicode table.
    if (static_cast<unsigned char>(c) >= 0x80) return "it contains a non-ASCII character";
  }
  const std::size_t scheme_end = url.find("://");
  if (scheme_end == absl::string_view::npos) return "it has no http:// or https:// scheme";
  const absl::string_view scheme = url.substr(0, scheme_end);
  if (!absl::EqualsIgnoreCase(scheme, "http") && !absl::EqualsIgnoreCase(scheme, "https")) {
    return "its scheme is not http or https";
  }
  const absl::string_view rest = url.substr(scheme_end + 3);
  const std::size_t authority_end = rest.find_first_of("/?#");
  absl::string_view authority = rest.substr(0, authority_end);
  // User info is refused: it puts credentials in the URL and is a classic way to
  // disguise the real host (`https://trusted.example@evil.example/`).
  if (authority.find('@') != absl::string_view::npos) return "it contains user info ('@')";

  absl::string_view host;
  absl::string_view port;
  bool has_port = false;
  if (absl::StartsWith(authority, "[")) {
    const std::size_t close = authority.find(']');
    if (close == absl::string_view::npos) return "its IPv6 host has no closing ']'";
    host = authority.substr(1, close - 1);
    if (host.empty() || host.find(':') == absl::string_view::npos) {
      return "its bracketed host is not an IPv6 address";
    }
    for (char c : host) {
      if (!absl::ascii_isxdigit(static_cast<unsigned char>(c)) && c != ':' && c != '.') {
        return "its bracketed host is not an IPv6 address";
      }
    }
    absl::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return "its IPv6 host is followed by something other than a port";
      has_port = true;
      port = after.substr(1);
    }
  } else {
    const std::size_t colon = authority.find(':');
    host = authority.substr(0, colon);
    if (colon != absl::string_view::npos) {
      has_port = true;
      port = authority.substr(colon + 1);
    }
    if (host.empty()) return "it has no host";
    // Registered names: letters, digits, '-', '_', '~' and dots between non-empty
    // labels (a single trailing dot, as in a fully qualified name, is allowed).
    absl::string_view labels = host;
    absl::ConsumeSuffix(&labels, ".");
    if (labels.empty()) return "it has no host";
    std::size_t label_length = 0;
    for (char c : labels) {
      if (c == '.') {
        if (label_length == 0) return "its host has an empty label";
        label_length = 0;
      } else if (absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' ||
                 c == '~') {
        ++label_length;
      } else {
        return "its host contains a character not allowed in a host name";
      }
    }
    if (label_length == 0) return "its host has an empty label";
  }
  if (has_port) {
    if (port.empty() || port.size() > 5) return "its port is not a number from 1 to 65535";
    int value = 0;
    for (char c : port) {
      if (!IsAsciiDigit(c)) return "its port is not a number from 1 to 65535";
      value = value * 10 + (c - '0');
    }
    if (value < 1 || value > 65535) return "its port is not a number from 1 to 65535";
  }
  return nullptr;
}

// Identifiers the gateway puts into a vendor URL (uid in the query, inspection ids in
// the path or, for TestWebhook, a placement the spec does not show). The route table
// percent-encodes them, but an id containing URL delimiters is never a real vendor id
// and is refused rather than silently re-encoded; '.' and '..' are refused because
// they are dot-segments that HTTP clients and servers may collapse.
void CheckUrlId(const std::string& field, const std::string& id, Collector& out) {
  if (id.find_first_of("/?#&") != std::string::npos || HasSpaceOrControl(id)) {
    out.Add(field, absl::StrCat(field,
                                " must not contain '/', '?', '#', '&', spaces or control "
                                "characters because it is placed in the vendor URL."));
  } else if (id == "." || id == "..") {
    out.Add(field, absl::StrCat(field,
                                " must not be '.' or '..' because it is placed in the "
                                "vendor URL."));
  }
}

// Event name of UpdateEventConfig and TestWebhook: exactly one of the typed enum and
// the raw string.
void CheckEventName(v1::EventName event_name, const std::string& event_name_raw, Collector& out) {
  const bool has_enum = event_name != v1::EVENT_NAME_UNSPECIFIED;
  const bool has_raw = !event_name_raw.empty();
  if (has_enum && !v1::EventName_IsValid(event_name)) {
    out.Add("event_name",
            absl::StrCat("event_name ", static_cast<int>(event_name),
                         " is not a known EventName value; use event_name_raw to send a name "
                         "this gateway does not know."));
  }
  if (!has_enum && !has_raw) {
    out.Add("event_name",
            "One of event_name or event_name_raw is required (event_name unless the event is "
            "not yet known to the gateway).");
    return;
  }
  if (has_enum && has_raw) {
    out.Add("event_name_raw",
            "Set only one of event_name or event_name_raw, not both (event_name_raw is for "
            "event names this gateway does not know).");
    return;
  }
  // Vendor event names are single camelCase words; a space or control character can
  // only be a mistake and would corrupt a query string.
  if (has_raw && HasSpaceOrControl(event_name_raw)) {
    out.Add("event_name_raw",
            "event_name_raw must be a vendor event name without spaces or control characters "
            "(for example newInspection).");
  }
}

void CheckFalseFlag(const char* field, bool has, bool value, Collector& out) {
  if (has && value) {
    out.Add(field, absl::StrCat(field,
                                " must be false, as the vendor requires; leave it unset to send "
                                "false."));
  }
}

void CheckOptions(const v1::CreateTokenRequest& request, Collector& out) {
  if (!request.has_options()) {
    out.Add("options",
            "options is required: set options.shoot_inspect and options.fast_track (cost, "
            "report and download_roi must be false or unset).");
    return;
  }
  const v1::SelfInspectionOptions& options = request.options();
  if (!options.has_shoot_inspect()) {
    out.Add("options.shoot_inspect",
            "options.shoot_inspect is required: true when the customer takes the pictures "
            "themselves, false otherwise.");
  }
  if (!options.has_fast_track()) {
    out.Add("options.fast_track",
            "options.fast_track is required: true when the customer validates the damages "
            "after shooting, false when they are reviewed by your team or the vendor.");
  }
  CheckFalseFlag("options.cost", options.has_cost(), options.cost(), out);
  CheckFalseFlag("options.report", options.has_report(), options.report(), out);
  CheckFalseFlag("options.download_roi", options.has_download_roi(), options.download_roi(), out);
}

void CheckVin(const std::string& vin, Collector& out) {
  const std::size_t length = Utf8Length(vin);
  if (length != 17) {
    out.Add("trade_in.vin",
            absl::StrCat("trade_in.vin must be exactly 17 letters and digits when set; it has ",
                         length, " characters."));
  }
  for (char c : vin) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c))) {
      // No I/O/Q exclusion (ISO 3779): the spec only says "17-character", and older
      // or non-ISO VINs would otherwise be refused before the vendor sees them.
      out.Add("trade_in.vin", "trade_in.vin must contain only ASCII letters and digits.");
      break;
    }
  }
}

void CheckTradeIn(const v1::CreateTokenRequest& request, Collector& out) {
  if (!request.has_trade_in()) {
    out.Add("trade_in",
            "trade_in is required: set at least trade_in.sending_type (SENDING_TYPE_NONE to send "
            "no message).");
    return;
  }
  const v1::TradeIn& trade_in = request.trade_in();
  if (trade_in.has_tradein_vehicle() && !trade_in.tradein_vehicle()) {
    out.Add("trade_in.tradein_vehicle",
            "trade_in.tradein_vehicle must be true, as the vendor requires; leave it unset to "
            "send true.");
  }
  if (trade_in.has_immat() && IsBlank(trade_in.immat())) {
    out.Add("trade_in.immat",
            "trade_in.immat (licence plate) must not be empty when set; leave it unset when "
            "unknown.");
  }
  if (trade_in.has_vin()) CheckVin(trade_in.vin(), out);
  if (trade_in.sending_type() == v1::SENDING_TYPE_UNSPECIFIED) {
    out.Add("trade_in.sending_type",
            "trade_in.sending_type is required (EMAIL, SMS or EMAIL_AND_SMS); use "
            "SENDING_TYPE_NONE to send no message.");
  } else if (!v1::SendingType_IsValid(trade_in.sending_type())) {
    out.Add("trade_in.sending_type",
            absl::StrCat("trade_in.sending_type ", static_cast<int>(trade_in.sending_type()),
                         " is not a known SendingType value; use SENDING_TYPE_EMAIL, _SMS, "
                         "_EMAIL_AND_SMS or _NONE."));
  }
}

// A required free-text customer field: placeholders such as `<FIRST_NAME>` are fine.
void CheckRequiredText(const char* field, const std::string& value, const char* placeholder,
                       Collector& out) {
  if (IsBlank(value)) {
    out.Add(field, absl::StrCat(field, " is required; use the placeholder ", placeholder,
                                " when no real customer data is wanted."));
  }
}

void CheckCustomer(const v1::CreateTokenRequest& request, Collector& out) {
  if (!request.has_customer()) {
    out.Add("customer",
            "customer is required: set email, firstname, lastname, phone and locale (placeholders "
            "such as <EMAIL> are accepted when no real customer data is wanted).");
    return;
  }
  const v1::Customer& customer = request.customer();
  // Case-sensitive: the vendor's only documented value is `customer`.
  if (!customer.client_type().empty() && customer.client_type() != "customer") {
    out.Add("customer.client_type",
            "customer.client_type must be \"customer\" or left empty (sent as \"customer\").");
  }
  if (IsBlank(customer.email())) {
    CheckRequiredText("customer.email", customer.email(), "<EMAIL>", out);
  } else if (!IsPlaceholder(customer.email()) && !IsPlausibleEmail(customer.email())) {
    out.Add("customer.email",
            "customer.email must be an e-mail address with exactly one '@' and text on both "
            "sides, or a placeholder such as <EMAIL>.");
  }
  CheckRequiredText("customer.firstname", customer.firstname(), "<FIRST_NAME>", out);
  CheckRequiredText("customer.lastname", customer.lastname(), "<LAST_NAME>", out);
  // Every defined Gender is valid (GENDER_UNSPECIFIED is sent as null); a number
  // outside the enum cannot be translated for the vendor.
  if (!v1::Gender_IsValid(customer.gender())) {
    out.Add("customer.gender",
            absl::StrCat("customer.gender ", static_cast<int>(customer.gender()),
                         " is not a known Gender value; use GENDER_MEN, GENDER_WOMEN or "
                         "GENDER_UNSPECIFIED (sent as null)."));
  }
  if (IsBlank(customer.phone())) {
    CheckRequiredText("customer.phone", customer.phone(), "<PHONE>", out);
  } else if (!IsPlaceholder(customer.phone()) && !IsInternationalPhone(customer.phone())) {
    out.Add("customer.phone",
            "customer.phone must include the country code: '+' or '00' followed by 7 to 15 "
            "digits (spaces, dots, dashes and parentheses allowed between digits, e.g. +33 6 12 "
            "34 56 78), or be a placeholder such as <PHONE>.");
  }
  if (customer.locale() == v1::LOCALE_UNSPECIFIED) {
    out.Add("customer.locale", absl::StrCat("customer.locale is required: ", kLocaleList, "."));
  } else if (!v1::Locale_IsValid(customer.locale())) {
    out.Add("customer.locale", absl::StrCat("customer.locale ", static_cast<int>(customer.locale()),
                                            " is not a supported locale; use ", kLocaleList, "."));
  }
}

// The checks only code can make, by the name a field's `(rules).check` gives. Each runs at
// its field's place in the order and may look at the whole request (rules across fields).
template <class Request>
using TypedCheck = void (*)(const Request&, Collector&);

struct NamedCheck {
  const google::protobuf::Descriptor* message;
  std::function<void(const google::protobuf::Message&, Collector&)> run;
};

template <class Request>
NamedCheck Check(TypedCheck<Request> check) {
  return {Request::descriptor(), [check](const google::protobuf::Message& message, Collector& out) {
            // Generated messages only: a DynamicMessage of the same type is not this class.
            const auto* typed = dynamic_cast<const Request*>(&message);
            if (typed != nullptr) check(*typed, out);
          }};
}

void CheckCreatorUserId(const v1::CreateTokenRequest& request, Collector& out) {
  if (request.has_creator_user_id() && IsBlank(request.creator_user_id())) {
    out.Add("creator_user_id",
            "creator_user_id must not be empty when set; leave it unset to send null.");
  }
}

void CheckValidity(const v1::CreateTokenRequest& request, Collector& out) {
  // No upper bound: the spec gives none (its sample is 90 days).
  if (request.validity() <= 0) {
    out.Add("validity", absl::StrCat("validity must be greater than 0 (days before the token "
                                     "expires, e.g. 90); it is ",
                                     request.validity(), "."));
  }
}

void CheckUidSuffix(const v1::GetTokenStatusRequest& request, Collector& out) {
  if (absl::EndsWith(request.uid(), "-pwa")) {
    out.Add("uid",
            "uid must be the token uid without the \"-pwa\" suffix: pass the uid, the gateway "
            "appends -pwa to build the deviceId.");
  }
}

void CheckColourBackground(const v1::RemoveBackgroundRequest& request, Collector& out) {
  if (!request.has_color_background()) return;
  if (!IsHexColour(request.color_background())) {
    out.Add("color_background",
            "color_background must be a hexadecimal colour: #RRGGBB, RRGGBB, #RGB or RGB.");
  }
  if (request.has_url_background()) {
    out.Add("color_background",
            "Set only one of url_background or color_background: the background is either "
            "an image or a plain colour.");
  }
}

void CheckWidthRatio(const v1::RemoveBackgroundRequest& request, Collector& out) {
  if (request.has_manual_width_ratio() &&
      !(std::isfinite(request.manual_width_ratio()) && request.manual_width_ratio() > 0)) {
    // No upper bound: the spec only says larger means a bigger vehicle.
    out.Add("manual_width_ratio",
            "manual_width_ratio must be a finite number greater than 0 when set.");
  }
}

void CheckManualPositioning(const v1::RemoveBackgroundRequest& request, Collector& out) {
  // Values are not limited to 0..1: the spec does not say they are fractions.
  if (request.manual_positioning() && request.manual_top_left_position_ratio().empty()) {
    out.Add("manual_top_left_position_ratio",
            "manual_top_left_position_ratio is required with 2 values [x, y] when "
            "manual_positioning is true.");
  }
}

void CheckPlateOrUsername(const v1::SearchInspectionsRequest& request, Collector& out) {
  if (IsBlank(request.license_plate()) && IsBlank(request.username())) {
    out.Add("license_plate", "One of license_plate or username is required (both may be set).");
  }
}

void CheckWebhookHeaderKey(const v1::UpdateWebhookConfigRequest& request, Collector& out) {
  if (!request.has_webhook_header_key()) return;
  const std::string& key = request.webhook_header_key();
  bool printable = true;
  for (char c : key) {
    const auto u = static_cast<unsigned char>(c);
    // Visible ASCII only: the key travels as an HTTP header value, where non-ASCII
    // bytes are obsolete (RFC 9110) and handled inconsistently by servers.
    if (u < 0x21 || u > 0x7E) printable = false;
  }
  // The key is a secret: descriptions state the rule, never the value.
  if (key.empty()) {
    out.Add("webhook_header_key",
            "webhook_header_key must not be empty when set; leave it unset for no key.");
  } else if (!printable) {
    out.Add("webhook_header_key",
            "webhook_header_key must contain only visible ASCII characters (no spaces or "
            "control characters) because it is sent as an HTTP header value.");
  }
}

template <class Request>
void CheckEventNameOf(const Request& request, Collector& out) {
  CheckEventName(request.event_name(), request.event_name_raw(), out);
}

const std::map<std::string, NamedCheck, std::less<>>& NamedChecks() {
  static const auto* const checks = new std::map<std::string, NamedCheck, std::less<>>{
      {"create_token.options", Check<v1::CreateTokenRequest>(CheckOptions)},
      {"create_token.trade_in", Check<v1::CreateTokenRequest>(CheckTradeIn)},
      {"create_token.customer", Check<v1::CreateTokenRequest>(CheckCustomer)},
      {"create_token.creator_user_id", Check<v1::CreateTokenRequest>(CheckCreatorUserId)},
      {"create_token.validity", Check<v1::CreateTokenRequest>(CheckValidity)},
      {"token.uid_without_suffix", Check<v1::GetTokenStatusRequest>(CheckUidSuffix)},
      {"remove_background.color_background",
       Check<v1::RemoveBackgroundRequest>(CheckColourBackground)},
      {"remove_background.manual_width_ratio", Check<v1::RemoveBackgroundRequest>(CheckWidthRatio)},
      {"remove_background.manual_positioning",
       Check<v1::RemoveBackgroundRequest>(CheckManualPositioning)},
      {"search.plate_or_username", Check<v1::SearchInspectionsRequest>(CheckPlateOrUsername)},
      {"webhook.header_key", Check<v1::UpdateWebhookConfigRequest>(CheckWebhookHeaderKey)},
      {"event.name",
       {nullptr,
        [](const google::protobuf::Message& message, Collector& out) {
          if (const auto* update = dynamic_cast<const v1::UpdateEventConfigRequest*>(&message)) {
            CheckEventNameOf(*update, out);
          } else if (const auto* test = dynamic_cast<const v1::TestWebhookRequest*>(&message)) {
            CheckEventNameOf(*test, out);
          }
        }}},
  };
  return *checks;
}

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

// Whether `field` counts as set for `required`: a non-empty string, a set message or optional
// scalar, a non-zero enum or number, a non-empty list.
bool IsPresent(const Message& message, const FieldDescriptor* field) {
  const Reflection* reflection = message.GetReflection();
  if (field->is_repeated()) return reflection->FieldSize(message, field) > 0;
  if (field->cpp_type() == FieldDescriptor::CPPTYPE_STRING) {
    return !reflection->GetString(message, field).empty();
  }
  if (field->has_presence()) return reflection->HasField(message, field);
  if (field->cpp_type() == FieldDescriptor::CPPTYPE_ENUM) {
    return reflection->GetEnumValue(message, field) != 0;
  }
  return reflection->HasField(message, field);  // proto3 scalar: non-default
}

int64_t LimitOf(const std::string& name, const ValidationLimits& limits) {
  if (name == "max_urls") return limits.max_urls;
  if (name == "search_max_limit") return limits.search_max_limit;
  return -1;  // a proto naming an unknown limit: caught by ValidationRulesTest
}

// An http_url string field (not a list). A field with presence that is set but empty is
// reported as such ("when set; it is empty").
void CheckUrlField(const Message& message, const FieldDescriptor* field,
                   const v1::FieldRules& rules, Collector& out) {
  const Reflection* reflection = message.GetReflection();
  const std::string& name = field->name();
  const std::string url = reflection->GetString(message, field);
  if (!rules.required().empty()) {
    if (const char* problem = UrlProblem(url)) {
      out.Add(name, absl::StrCat(name, " ", kUrlExpectation, "; ", problem, "."));
    }
    return;
  }
  if (field->has_presence() && !reflection->HasField(message, field)) return;
  if (!field->has_presence() && url.empty()) return;
  if (const char* problem = UrlProblem(url)) {
    out.Add(name, absl::StrCat(name, " ", kUrlExpectation, " when set; ",
                               url.empty() ? "it is empty" : problem, "."));
  }
}

// A list: its length (min_items, max_items_limit), then every http_url element. A list out
// of bounds is reported as a whole, before any element is looked at.
void CheckList(const Message& message, const FieldDescriptor* field, const v1::FieldRules& rules,
               const ValidationLimits& limits, Collector& out) {
  const Reflection* reflection = message.GetReflection();
  const std::string& name = field->name();
  const int size = reflection->FieldSize(message, field);
  const char* noun = rules.http_url() ? "URL" : "element";
  if (size < static_cast<int>(rules.min_items())) {
    out.Add(name, rules.min_items() == 1
                      ? absl::StrCat(name, " must contain at least one ", noun, ".")
                      : absl::StrCat(name, " must contain at least ", rules.min_items(), " ", noun,
                                     "s; it has ", size, "."));
    return;
  }
  if (!rules.max_items_limit().empty()) {
    const int64_t max = LimitOf(rules.max_items_limit(), limits);
    if (size > max) {
      out.Add(name, absl::StrCat(name, " has ", size, " ", noun, "s; at most ", max,
                                 " are allowed per call (gateway config validation.",
                                 rules.max_items_limit(), ")."));
      return;
    }
  }
  if (rules.http_url() && field->cpp_type() == FieldDescriptor::CPPTYPE_STRING) {
    for (int i = 0; i < size; ++i) {
      const std::string element = absl::StrCat(name, "[", i, "]");
      const std::string url = reflection->GetRepeatedString(message, field, i);
      if (url.empty()) {
        out.Add(element, absl::StrCat(element, " is empty; every element ", kUrlExpectation, "."));
      } else if (const char* problem = UrlProblem(url)) {
        out.Add(element, absl::StrCat(element, " ", kUrlExpectation, "; ", problem, "."));
      }
    }
  }
  if (rules.exact_items() > 0 && field->cpp_type() == FieldDescriptor::CPPTYPE_DOUBLE) {
    if (size != 0 && size != static_cast<int>(rules.exact_items())) {
      out.Add(name, absl::StrCat(name, " must be empty or have exactly ", rules.exact_items(),
                                 " values ", rules.shape(), "; it has ", size, "."));
    }
    for (int i = 0; i < size; ++i) {
      if (!std::isfinite(reflection->GetRepeatedDouble(message, field, i))) {
        out.Add(absl::StrCat(name, "[", i, "]"),
                absl::StrCat(name, "[", i, "] must be a finite number (not NaN or infinity)."));
      }
    }
  }
}

// An integer's bounds (min, max_limit), checked when it is set.
void CheckRange(const Message& message, const FieldDescriptor* field, const v1::FieldRules& rules,
                const ValidationLimits& limits, Collector& out) {
  const Reflection* reflection = message.GetReflection();
  if (field->has_presence() && !reflection->HasField(message, field)) return;
  int64_t value = 0;
  switch (field->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      value = reflection->GetInt32(message, field);
      break;
    case FieldDescriptor::CPPTYPE_INT64:
      value = reflection->GetInt64(message, field);
      break;
    case FieldDescriptor::CPPTYPE_UINT32:
      value = reflection->GetUInt32(message, field);
      break;
    default:
      return;
  }
  const std::string& name = field->name();
  const int64_t min = rules.min();
  if (!rules.max_limit().empty()) {
    const int64_t max = LimitOf(rules.max_limit(), limits);
    if (value < min || value > max) {
      out.Add(name, absl::StrCat(name, " must be between ", min, " and ", max, " when set; it is ",
                                 value, "."));
    }
  } else if (value < min) {
    out.Add(name, absl::StrCat(name, " must be ", min, " or greater when set; it is ", value, "."));
  }
}

void CheckField(const Message& message, const FieldDescriptor* field, const v1::FieldRules& rules,
                const ValidationLimits& limits, Collector& out) {
  const std::string& name = field->name();
  if (!rules.required().empty() && !IsPresent(message, field)) {
    out.Add(name, rules.http_url() ? absl::StrCat(name, " is required and ", kUrlExpectation, ".")
                                   : absl::StrCat(name, " is required: ", rules.required(), "."));
    return;
  }
  if (field->is_repeated()) {
    CheckList(message, field, rules, limits, out);
  } else if (rules.http_url()) {
    CheckUrlField(message, field, rules, out);
  }
  if (rules.url_segment() && !field->is_repeated()) {
    const std::string value = message.GetReflection()->GetString(message, field);
    if (!value.empty()) CheckUrlId(name, value, out);
  }
  if (rules.has_min() || !rules.max_limit().empty()) CheckRange(message, field, rules, limits, out);
  if (!rules.check().empty()) {
    const auto& checks = NamedChecks();
    if (auto it = checks.find(rules.check()); it != checks.end()) it->second.run(message, out);
  }
}

}  // namespace

bool IsWellFormedHttpUrl(const std::string& url) {
  return !url.empty() && UrlProblem(url) == nullptr;
}

Violations ValidateRequest(const google::protobuf::Message& request,
                           const ValidationLimits& limits) {
  Collector out;
  const google::protobuf::Descriptor* descriptor = request.GetDescriptor();
  for (int i = 0; i < descriptor->field_count(); ++i) {
    const FieldDescriptor* field = descriptor->field(i);
    if (!field->options().HasExtension(v1::rules)) continue;
    CheckField(request, field, field->options().GetExtension(v1::rules), limits, out);
  }
  return out.Take();
}

namespace {

// Rules on the fields of messages nested in a request (ValidateRequest reads only the
// request's own fields: such a rule would check nothing).
void NestedRules(const google::protobuf::Descriptor& message,
                 std::set<const google::protobuf::Descriptor*>& seen,
                 std::vector<std::string>& problems) {
  for (int i = 0; i < message.field_count(); ++i) {
    const google::protobuf::Descriptor* nested = message.field(i)->message_type();
    if (nested == nullptr || !seen.insert(nested).second) continue;
    for (int f = 0; f < nested->field_count(); ++f) {
      if (nested->field(f)->options().HasExtension(v1::rules)) {
        problems.push_back(nested->field(f)->full_name() +
                           ": (rules) on a field of a nested message are not checked; rule "
                           "the request's own field (a named check can look inside)");
      }
    }
    NestedRules(*nested, seen, problems);
  }
}

}  // namespace

std::vector<std::string> RuleProblems(const google::protobuf::Descriptor& message) {
  std::vector<std::string> problems;
  std::set<const google::protobuf::Descriptor*> seen = {&message};
  NestedRules(message, seen, problems);
  for (int i = 0; i < message.field_count(); ++i) {
    const FieldDescriptor* field = message.field(i);
    if (!field->options().HasExtension(v1::rules)) continue;
    const v1::FieldRules& rules = field->options().GetExtension(v1::rules);
    const std::string where = field->full_name();
    const bool string = field->cpp_type() == FieldDescriptor::CPPTYPE_STRING;
    if ((rules.http_url() || rules.url_segment()) && !string) {
      problems.push_back(where + ": http_url and url_segment need a string field");
    }
    if ((rules.min_items() > 0 || !rules.max_items_limit().empty() || rules.exact_items() > 0) &&
        !field->is_repeated()) {
      problems.push_back(where + ": min_items, max_items_limit and exact_items need a list");
    }
    if (rules.exact_items() > 0 && field->cpp_type() != FieldDescriptor::CPPTYPE_DOUBLE) {
      problems.push_back(where + ": exact_items needs a list of doubles");
    }
    for (const std::string& limit : {rules.max_items_limit(), rules.max_limit()}) {
      if (!limit.empty() && LimitOf(limit, ValidationLimits()) < 0) {
        problems.push_back(where + ": no limit is named " + limit);
      }
    }
    if (!rules.check().empty()) {
      const auto& checks = NamedChecks();
      auto it = checks.find(rules.check());
      if (it == checks.end()) {
        problems.push_back(where + ": no check is named " + rules.check());
      } else if (it->second.message != nullptr && it->second.message != &message) {
        problems.push_back(where + ": check " + rules.check() + " is for " +
                           it->second.message->full_name());
      }
    }
  }
  return problems;
}

}  // namespace inspection::validation
