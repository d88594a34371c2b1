#include "gateway/config/config.h"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <system_error>
#include <type_traits>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "adapters/redis/redis_url.h"
#include "gateway/config/value_checks.h"
#include "nlohmann/json.hpp"

namespace inspection::config {

const server::GatewayServerOptions& ComponentDefaults() {
  static const server::GatewayServerOptions* const defaults = new server::GatewayServerOptions();
  return *defaults;
}

namespace {

using json = nlohmann::json;
using ordered_json = nlohmann::ordered_json;

constexpr absl::string_view kEnvPrefix = "INSPECTION_";
constexpr absl::string_view kConfigEnv = "INSPECTION_CONFIG";
constexpr absl::string_view kHelpPayloadUrl = "inspection.config/help-requested";
constexpr absl::string_view kVersionPayloadUrl = "inspection.config/version-requested";
constexpr std::int64_t kNoMax = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t kMaxInt = std::numeric_limits<int>::max();
constexpr std::int64_t kDayMs = 24 * 60 * 60 * 1000;

// ---------------------------------------------------------------------------------------------
// The schema: one KeySpec per setting.
// ---------------------------------------------------------------------------------------------

// The JSON type a key takes in the config file. Env and flag text is converted to it first, so
// one `store` function validates a value whatever its source.
enum class ValueKind { kString, kInteger, kStringList, kBool, kObject };

// "upstream.timeout_ms" -> "upstream-timeout-ms" (the flag, without "--").
std::string FlagName(absl::string_view key) {
  std::string flag(key);
  for (char& c : flag) {
    if (c == '.' || c == '_') c = '-';
  }
  return flag;
}

// "upstream.timeout_ms" -> "INSPECTION_UPSTREAM_TIMEOUT_MS".
std::string EnvName(absl::string_view key) {
  std::string env = absl::StrCat(kEnvPrefix, key);
  for (char& c : env) c = c == '.' ? '_' : absl::ascii_toupper(c);
  return env;
}

struct KeySpec {
  std::string key;  // Config-file key, sections joined by '.'.
  ValueKind kind = ValueKind::kString;
  std::string placeholder;  // Shown in --help: --flag=PLACEHOLDER.
  std::string help;         // One sentence or two for --help.
  bool required = false;    // Only for string keys: the empty default means "not set".
  // Validates `value` (already of `kind`) and stores it. The error says what is wrong with the
  // value without naming the key; the caller adds that.
  std::function<absl::Status(const json& value, GatewayConfig& config)> store;
  // Instead of `store`, for an object whose errors name a key below `key`
  // ("accounts.preprod.upstream_url"): the error is the whole message, built with `origin`.
  std::function<absl::Status(const json& value, absl::string_view origin, GatewayConfig& config)>
      store_nested;
  // The current value, for the dump and the defaults in --help.
  std::function<ordered_json(const GatewayConfig& config)> show;

  std::string Flag() const { return FlagName(key); }
  std::string Env() const { return EnvName(key); }
};

KeySpec MakeSpec(std::string key, ValueKind kind, std::string placeholder, std::string help) {
  KeySpec spec;
  spec.key = std::move(key);
  spec.kind = kind;
  spec.placeholder = std::move(placeholder);
  spec.help = std::move(help);
  return spec;
}

using StringCheck = absl::StatusOr<std::string> (*)(std::string);
using ElementCheck = absl::Status (*)(absl::string_view);

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

absl::StatusOr<std::string> Pointer(std::string value) {
  absl::Status status = CheckJsonPointer(value);
  if (!status.ok()) return status;
  return value;
}

absl::StatusOr<std::string> EventLogUrl(std::string value) {
  if (absl::StartsWith(value, "sqlite:") && value.size() > 7) return value;
  if (absl::StartsWith(value, "redis://") && value.size() > 8) return value;
  return absl::InvalidArgumentError("must be sqlite:<path> or redis://host:port[/db]");
}

absl::StatusOr<std::string> WorkLedgerUrl(std::string value) {
  if (value.empty()) return value;
  return EventLogUrl(std::move(value));
}

absl::StatusOr<std::string> IdempotencyStoreUrl(std::string value) {
  if (value == "memory") return value;
  if (absl::StartsWith(value, "redis://") && value.size() > 8) return value;
  return absl::InvalidArgumentError("must be memory or redis://host:port[/db]");
}

// A file path that may be left empty (unset), for optional features.
absl::StatusOr<std::string> OptionalPath(std::string value) { return value; }

absl::StatusOr<std::string> OptionalUrl(std::string value) {
  if (value.empty()) return value;
  return NormalizeBaseUrl(std::move(value));
}

absl::Status EventNameCheck(absl::string_view name) {
  if (name.empty() || name.find_first_of(" \t\r\n") != absl::string_view::npos) {
    return absl::InvalidArgumentError("an event name must be non-empty, without spaces");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> HostPort(std::string value) {
  absl::Status status = CheckHostPort(value);
  if (!status.ok()) return status;
  return value;
}

// `access` is a generic lambda `[](auto& c) -> auto& { return c.field; }`, so the same accessor
// serves reads (const GatewayConfig&) and writes.
template <typename Access>
KeySpec StringKey(std::string key, Access access, StringCheck check, std::string placeholder,
                  std::string help, bool required = false) {
  KeySpec spec =
      MakeSpec(std::move(key), ValueKind::kString, std::move(placeholder), std::move(help));
  spec.required = required;
  spec.store = [access, check](const json& value, GatewayConfig& config) -> absl::Status {
    absl::StatusOr<std::string> checked = check(value.get<std::string>());
    if (!checked.ok()) return checked.status();
    access(config) = *std::move(checked);
    return absl::OkStatus();
  };
  spec.show = [access](const GatewayConfig& config) { return ordered_json(access(config)); };
  return spec;
}

// An integer in [min, max]. The field is an int, or an absl::Duration counted in milliseconds.
template <typename Access>
KeySpec IntegerKey(std::string key, Access access, std::int64_t min, std::int64_t max,
                   std::string placeholder, std::string help) {
  KeySpec spec =
      MakeSpec(std::move(key), ValueKind::kInteger, std::move(placeholder), std::move(help));
  spec.store = [access, min, max](const json& value, GatewayConfig& config) -> absl::Status {
    const std::string range =
        max == kNoMax ? absl::StrCat(">= ", min) : absl::StrCat("in ", min, "..", max);
    std::int64_t number;
    if (value.is_number_unsigned() &&
        value.get<std::uint64_t>() > static_cast<std::uint64_t>(kNoMax)) {
      return absl::InvalidArgumentError(
          absl::StrCat("must be an integer ", range, ", got ", value.dump()));
    }
    number = value.get<std::int64_t>();
    if (number < min || number > max) {
      return absl::InvalidArgumentError(
          absl::StrCat("must be an integer ", range, ", got ", number));
    }
    using Field = std::decay_t<decltype(access(config))>;
    if constexpr (std::is_same_v<Field, absl::Duration>) {
      access(config) = absl::Milliseconds(number);
    } else {
      access(config) = static_cast<Field>(number);
    }
    return absl::OkStatus();
  };
  spec.show = [access](const GatewayConfig& config) {
    const auto& field = access(config);
    if constexpr (std::is_same_v<std::decay_t<decltype(field)>, absl::Duration>) {
      return ordered_json(absl::ToInt64Milliseconds(field));
    } else {
      return ordered_json(field);
    }
  };
  return spec;
}

// One of a fixed set of names, stored as an enum.
template <typename Enum, typename Access>
KeySpec EnumKey(std::string key, Access access, std::vector<std::pair<std::string, Enum>> names,
                std::string help) {
  std::vector<std::string> spellings;
  for (const auto& [name, value] : names) spellings.push_back(name);
  KeySpec spec =
      MakeSpec(std::move(key), ValueKind::kString, absl::StrJoin(spellings, "|"), std::move(help));
  spec.store = [access, names, spellings](const json& value,
                                          GatewayConfig& config) -> absl::Status {
    const std::string text = value.get<std::string>();
    for (const auto& [name, enum_value] : names) {
      if (name == text) {
        access(config) = enum_value;
        return absl::OkStatus();
      }
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "must be one of \"", absl::StrJoin(spellings, "\", \""), "\", got \"", text, "\""));
  };
  spec.show = [access, names](const GatewayConfig& config) {
    for (const auto& [name, enum_value] : names) {
      if (enum_value == access(config)) return ordered_json(name);
    }
    return ordered_json(nullptr);
  };
  return spec;
}

// A list of strings, each passing `check`; non-empty unless `may_be_empty`.
template <typename Access>
KeySpec StringListKey(std::string key, Access access, ElementCheck check, std::string placeholder,
                      std::string help, bool may_be_empty = false) {
  KeySpec spec =
      MakeSpec(std::move(key), ValueKind::kStringList, std::move(placeholder), std::move(help));
  spec.store = [access, check, may_be_empty](const json& value,
                                             GatewayConfig& config) -> absl::Status {
    if (value.empty() && !may_be_empty) return absl::InvalidArgumentError("must not be empty");
    std::vector<std::string> items;
    for (std::size_t i = 0; i < value.size(); ++i) {
      std::string item = value[i].get<std::string>();
      absl::Status status = check(item);
      if (!status.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("item ", i, ": ", status.message()));
      }
      items.push_back(std::move(item));
    }
    access(config) = std::move(items);
    return absl::OkStatus();
  };
  spec.show = [access](const GatewayConfig& config) { return ordered_json(access(config)); };
  return spec;
}

// A boolean; as a flag, `--name` alone means true.
template <typename Access>
KeySpec BoolKey(std::string key, Access access, std::string help) {
  KeySpec spec = MakeSpec(std::move(key), ValueKind::kBool, "true|false", std::move(help));
  spec.store = [access](const json& value, GatewayConfig& config) -> absl::Status {
    access(config) = value.get<bool>();
    return absl::OkStatus();
  };
  spec.show = [access](const GatewayConfig& config) { return ordered_json(access(config)); };
  return spec;
}

// ---------------------------------------------------------------------------------------------
// accounts: named vendor accounts, each an object of string sub-keys.
// ---------------------------------------------------------------------------------------------

std::string DescribeType(const json& value);

constexpr std::size_t kMaxAccountName = 64;
constexpr absl::string_view kAccountWebhookPathPrefix = "/webhooks/v2/";

// One sub-key of an account: accounts.<name>.<key>.
struct AccountFieldSpec {
  std::string key;
  std::string VendorAccountConfig::*field;
  StringCheck check;
  bool required;
};

const std::vector<AccountFieldSpec>& AccountFields() {
  static const std::vector<AccountFieldSpec>* const fields = new std::vector<AccountFieldSpec>{
      {"upstream_url", &VendorAccountConfig::upstream_url, NormalizeBaseUrl, /*required=*/true},
      {"api_key_file", &VendorAccountConfig::api_key_file, NonEmpty, /*required=*/true},
      {"webhook_key_file", &VendorAccountConfig::webhook_key_file, NonEmpty, /*required=*/false},
      {"webhook_previous_key_file", &VendorAccountConfig::webhook_previous_key_file, NonEmpty,
       /*required=*/false},
      {"webhook_path", &VendorAccountConfig::webhook_path, AbsolutePath, /*required=*/false},
      {"register_webhook", &VendorAccountConfig::register_webhook, OptionalUrl,
       /*required=*/false},
  };
  return *fields;
}

// A secret of an account: read only from the file named by its sub-key `file_key` (the API key's
// file is required, see AccountFields()).
struct AccountSecretSpec {
  std::string name;      // "api_key": accounts.<name>.api_key in messages and the dump.
  std::string file_key;  // "api_key_file"
  std::string VendorAccountConfig::*file_path;
  Secret VendorAccountConfig::*value;
};

const std::vector<AccountSecretSpec>& AccountSecrets() {
  static const std::vector<AccountSecretSpec>* const secrets = new std::vector<AccountSecretSpec>{
      {"api_key", "api_key_file", &VendorAccountConfig::api_key_file,
       &VendorAccountConfig::api_key},
      {"webhook_key", "webhook_key_file", &VendorAccountConfig::webhook_key_file,
       &VendorAccountConfig::webhook_key},
      {"webhook_previous_key", "webhook_previous_key_file",
       &VendorAccountConfig::webhook_previous_key_file, &VendorAccountConfig::webhook_previous_key},
  };
  return *secrets;
}

bool IsNameCharacters(absl::string_view name) {
  if (name.empty()) return false;
  for (char c : name) {
    if (!absl::ascii_isalnum(c) && c != '.' && c != '_' && c != '-') return false;
  }
  return true;
}

// `name` as a part of a key in a message: as it is when made of [A-Za-z0-9._-], else a quoted
// JSON string with anything unusual escaped (names are not secrets, but may hold anything).
std::string KeyPart(absl::string_view name) {
  if (IsNameCharacters(name)) return std::string(name);
  return json(std::string(name))
      .dump(-1, ' ', /*ensure_ascii=*/true, json::error_handler_t::replace);
}

// "accounts.<name>", safe to show.
std::string AccountKey(absl::string_view name) { return absl::StrCat("accounts.", KeyPart(name)); }

absl::Status InvalidAt(absl::string_view key, absl::string_view origin, absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat("invalid `", key, "` ", origin, ": ", problem));
}

// Validates one account's object; `key` is AccountKey(name).
absl::StatusOr<VendorAccountConfig> ParseAccount(const std::string& name, const json& body,
                                                 const std::string& key, absl::string_view origin) {
  if (!IsNameCharacters(name) || name.size() > kMaxAccountName || name == "." || name == "..") {
    return InvalidAt(key, origin,
                     "an account name is 1..64 characters of A-Z, a-z, 0-9, '.', '_' and '-' "
                     "(not \".\" or \"..\")");
  }
  if (name == "default") {
    return InvalidAt(key, origin,
                     "the name \"default\" is reserved for the default account (upstream_url, "
                     "api_key_file, webhook_key_file)");
  }
  if (!body.is_object()) {
    return InvalidAt(key, origin,
                     absl::StrCat("expected object (an account), got ", body.type_name()));
  }
  VendorAccountConfig account;
  account.name = name;
  for (const auto& [sub, value] : body.items()) {
    const std::string sub_key = absl::StrCat(key, ".", KeyPart(sub));
    const AccountFieldSpec* field = nullptr;
    for (const AccountFieldSpec& candidate : AccountFields()) {
      if (candidate.key == sub) field = &candidate;
    }
    if (field == nullptr) {
      std::string message = absl::StrCat("unknown key `", sub_key, "` ", origin);
      bool is_secret = false;
      for (const AccountSecretSpec& secret : AccountSecrets()) {
        if (sub == secret.name) {
          is_secret = true;
          absl::StrAppend(&message,
                          ": secrets are not read from the config file (nor from env or flags); "
                          "set `",
                          key, ".", secret.file_key, "`");
        }
      }
      if (!is_secret) {
        std::vector<std::string> names;
        for (const AccountFieldSpec& candidate : AccountFields()) names.push_back(candidate.key);
        if (std::string match = ClosestMatch(sub, names); !match.empty()) {
          absl::StrAppend(&message, " (did you mean `", key, ".", match, "`?)");
        }
      }
      return absl::InvalidArgumentError(message);
    }
    if (!value.is_string()) {
      return InvalidAt(sub_key, origin, absl::StrCat("expected string, got ", DescribeType(value)));
    }
    absl::StatusOr<std::string> checked = field->check(value.get<std::string>());
    if (!checked.ok()) return InvalidAt(sub_key, origin, checked.status().message());
    account.*field->field = *std::move(checked);
  }
  for (const AccountFieldSpec& field : AccountFields()) {
    if (field.required && (account.*field.field).empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("missing `", key, ".", field.key, "` ", origin,
                       ": every account needs its upstream_url and api_key_file"));
    }
  }
  if (!account.webhook_previous_key_file.empty() && account.webhook_key_file.empty()) {
    return InvalidAt(absl::StrCat(key, ".webhook_previous_key_file"), origin,
                     absl::StrCat("only allowed together with `", key, ".webhook_key_file`"));
  }
  if (account.webhook_path.empty()) {
    account.webhook_path = absl::StrCat(kAccountWebhookPathPrefix, name);
  }
  return account;
}

absl::Status StoreAccounts(const json& value, absl::string_view origin, GatewayConfig& config) {
  std::vector<VendorAccountConfig> accounts;
  for (const auto& [name, body] : value.items()) {
    absl::StatusOr<VendorAccountConfig> account =
        ParseAccount(name, body, AccountKey(name), origin);
    if (!account.ok()) return account.status();
    accounts.push_back(*std::move(account));
  }
  std::sort(
      accounts.begin(), accounts.end(),
      [](const VendorAccountConfig& a, const VendorAccountConfig& b) { return a.name < b.name; });
  config.accounts = std::move(accounts);  // A later source replaces them all.
  return absl::OkStatus();
}

ordered_json ShowAccounts(const GatewayConfig& config) {
  ordered_json accounts = ordered_json::object();
  for (const VendorAccountConfig& account : config.accounts) {
    ordered_json& node = accounts[account.name];
    node = ordered_json::object();
    for (const AccountFieldSpec& field : AccountFields()) {
      node[field.key] = account.*field.field;
      for (const AccountSecretSpec& secret : AccountSecrets()) {
        if (secret.file_key == field.key) {
          node[secret.name] = (account.*secret.value).empty() ? "[unset]" : "[redacted]";
        }
      }
    }
  }
  return accounts;
}

KeySpec AccountsKey() {
  KeySpec spec = MakeSpec(
      "accounts", ValueKind::kObject, "JSON",
      "Named vendor accounts besides the default one, as a JSON object {\"NAME\": {...}, ...}; "
      "a call selects one with gRPC metadata x-vendor-account: NAME (the default account "
      "otherwise). NAME is 1..64 of A-Za-z0-9._- (not default). Each account has upstream_url "
      "and api_key_file (required), webhook_key_file, webhook_previous_key_file, webhook_path "
      "(default /webhooks/v2/NAME) and register_webhook. A later source replaces the whole "
      "object.");
  spec.store_nested = StoreAccounts;
  spec.show = ShowAccounts;
  return spec;
}

// Where the gateway listens and which vendor it calls.
std::vector<KeySpec> ProcessKeys() {
  return {
      BoolKey(
          "sandbox", [](auto& c) -> auto& { return c.sandbox; },
          "Run the vendor sandbox in-process and use it as the upstream: upstream_url, "
          "webapp_url and the API key are then not needed (and upstream_url must not be set)."),
      StringKey(
          "upstream_url", [](auto& c) -> auto& { return c.upstream_url; }, NormalizeBaseUrl, "URL",
          "Base URL of the vendor REST API (absolute http(s); a trailing '/' is dropped).",
          /*required=*/true),
      StringKey(
          "api_key_file", [](auto& c) -> auto& { return c.api_key_file; }, NonEmpty, "PATH",
          "File holding the vendor API key (trailing whitespace trimmed). When not set, the key "
          "is read from env INSPECTION_API_KEY."),
      AccountsKey(),
      StringKey(
          "webapp_url", [](auto& c) -> auto& { return c.webapp_url; }, NormalizeBaseUrl, "URL",
          "Base address of the customer web application (absolute http(s); a trailing '/' is "
          "dropped).",
          /*required=*/true),
      StringKey(
          "grpc_addr", [](auto& c) -> auto& { return c.grpc_addr; }, HostPort, "HOST:PORT",
          "Listen address of the gRPC server."),
      StringKey(
          "webhook_addr", [](auto& c) -> auto& { return c.webhook_addr; }, HostPort, "HOST:PORT",
          "Listen address of the webhook receiver (HTTP; started when a webhook key is set)."),
      StringKey(
          "admin_addr", [](auto& c) -> auto& { return c.admin_addr; }, HostPort, "HOST:PORT",
          "Listen address of the admin endpoint: /metrics, /healthz, /readyz."),
  };
}

// The vendor HTTP client and the limits of a vendor answer (adapters/http).
std::vector<KeySpec> UpstreamKeys() {
  return {
      IntegerKey(
          "upstream.timeout_ms", [](auto& c) -> auto& { return c.upstream.timeout; }, 1, kDayMs,
          "MS",
          "Upper bound on one vendor attempt; each route has its own timeout (5-30 s) and "
          "routes above this bound are clamped to it."),
      IntegerKey(
          "upstream.connect_timeout_ms",
          [](auto& c) -> auto& { return c.upstream.connect_timeout; }, 1, kDayMs, "MS",
          "Connect timeout (TCP and TLS) of a vendor connection."),
      IntegerKey(
          "upstream.max_connections", [](auto& c) -> auto& { return c.upstream.max_connections; },
          1, kMaxInt, "N", "Most connections open to the vendor at once."),
      StringKey(
          "upstream.ca_file", [](auto& c) -> auto& { return c.upstream.ca_file; }, OptionalPath,
          "PATH",
          "PEM file of the certificate authorities trusted for an https:// vendor (a private "
          "CA, a TLS-inspecting proxy); empty: the system's bundle."),
      EnumKey<server::VendorHttpClient>(
          "upstream.http_client", [](auto& c) -> auto& { return c.upstream.http_client; },
          {{"auto", server::VendorHttpClient::kAuto},
           {"beast", server::VendorHttpClient::kBeast},
           {"curl", server::VendorHttpClient::kCurl}},
          "HTTP client of vendor calls. beast: HTTP/1.1 keep-alive pool (Boost.Beast), the "
          "lowest overhead per call, no proxy, no HTTP/2. curl: libcurl, HTTP/2 over TLS "
          "where the vendor offers it, proxy variables (https_proxy...). auto: beast when "
          "every vendor URL is http:// and no http_proxy/all_proxy is set, else curl."),
      IntegerKey(
          "upstream.max_json_depth", [](auto& c) -> auto& { return c.upstream.max_json_depth; }, 1,
          10000, "N",
          "Nesting of objects and arrays in a vendor answer; deeper: the call fails with "
          "VENDOR_MALFORMED_RESPONSE (checked while parsing)."),
      IntegerKey(
          "upstream.max_json_elements",
          [](auto& c) -> auto& { return c.upstream.max_json_elements; }, 1, int64_t{1} << 40, "N",
          "JSON values (objects, arrays and scalars, each one) in a vendor answer, counted while "
          "parsing; more: the call fails with VENDOR_RESPONSE_TOO_LARGE (RESOURCE_EXHAUSTED, not "
          "retried). Decoded, a value costs up to about 320 bytes (the JSON tree and its "
          "protobuf copy), which upstream.max_response_bytes, counting text, does not see: the "
          "default is about 80 MB per answer at worst."),
      IntegerKey(
          "upstream.max_response_bytes",
          [](auto& c) -> auto& { return c.upstream.max_response_bytes; }, 1024, int64_t{1} << 40,
          "BYTES",
          "Largest answer one vendor call reads (the body; with curl the head too); larger: the "
          "call fails with RESOURCE_EXHAUSTED, VENDOR_RESPONSE_TOO_LARGE (not retried)."),
      IntegerKey(
          "upstream.max_response_head_bytes",
          [](auto& c) -> auto& { return c.upstream.max_response_head_bytes; }, 1024,
          int64_t{16} << 20, "BYTES",
          "Largest head (status line and headers, interim answers included; the trailers of a "
          "chunked answer count on their own) of one vendor answer; larger: the call fails "
          "with RESOURCE_EXHAUSTED, VENDOR_RESPONSE_TOO_LARGE (not retried)."),
      IntegerKey(
          "upstream.max_response_header_count",
          [](auto& c) -> auto& { return c.upstream.max_response_header_count; }, 1, 100000, "COUNT",
          "Header fields of one vendor answer (trailers and interim answers included); more: "
          "the call fails with RESOURCE_EXHAUSTED, VENDOR_RESPONSE_TOO_LARGE (not retried)."),
      IntegerKey(
          "upstream.max_buffered_response_bytes",
          [](auto& c) -> auto& { return c.upstream.max_buffered_response_bytes; }, 0,
          int64_t{1} << 40, "BYTES",
          "Memory the answers of all vendor calls being read may hold together; a call whose "
          "answer would cross it fails with VENDOR_CONNECTION_LOST. 0: unlimited."),
      IntegerKey(
          "upstream.guaranteed_response_bytes",
          [](auto& c) -> auto& { return c.upstream.guaranteed_response_bytes; }, 0,
          int64_t{1} << 30, "BYTES",
          "Each answer's first bytes, which may use all of upstream.max_buffered_response_bytes; "
          "the bytes past them may hold three quarters of it, so a few huge or endless answers "
          "cannot make the ordinary ones fail. 0: every byte competes for the whole budget."),
  };
}

// Assumptions about the vendor where the spec is silent, and request limits (adapters/vendor).
std::vector<KeySpec> MappingKeys() {
  return {
      EnumKey<vendor::KeySpelling>(
          "background_removal.position_ratio_key",
          [](auto& c) -> auto& { return c.background_removal.position_ratio_key; },
          {{"singular", vendor::KeySpelling::kSingular},
           {"plural", vendor::KeySpelling::kPlural},
           {"both", vendor::KeySpelling::kBoth}},
          "Background removal: send manualTopLeftPositionRatio (singular), "
          "manualTopLeftPositionRatios (plural) or both."),
      EnumKey<vendor::KeySpelling>(
          "background_removal.wheel_box_key",
          [](auto& c) -> auto& { return c.background_removal.wheel_box_key; },
          {{"singular", vendor::KeySpelling::kSingular},
           {"plural", vendor::KeySpelling::kPlural},
           {"both", vendor::KeySpelling::kBoth}},
          "Background removal: send wheelBox (singular), wheelsBox (plural) or both."),
      EnumKey<vendor::ParamsPlacement>(
          "test_webhook.params_in", [](auto& c) -> auto& { return c.test_webhook.params_in; },
          {{"query", vendor::ParamsPlacement::kQuery}, {"body", vendor::ParamsPlacement::kBody}},
          "Where TestWebhook sends eventName and inspectionId: the query string or a JSON body."),
      StringListKey(
          "damage.inspection_id_pointers",
          [](auto& c) -> auto& { return c.damage.inspection_id_pointers; }, CheckJsonPointer,
          "POINTER,...",
          "RFC 6901 JSON pointers tried in order to find the inspection id in the DetectDamage "
          "response (the spec does not show its shape)."),
      IntegerKey(
          "validation.max_urls", [](auto& c) -> auto& { return c.validation.max_urls; }, 1, 100000,
          "N",
          "URLs per call in AssessQualityBatch, SegmentVehicle, SegmentParts, DetectDamage and "
          "StreamDamageResults; more: INVALID_ARGUMENT before any vendor call (raise "
          "grpc.max_receive_message_bytes with it: a URL may have 2,048 characters)."),
  };
}

// The gRPC listener: limits, TLS, the authorization policy, per-caller limits.
std::vector<KeySpec> GrpcKeys() {
  return {
      IntegerKey(
          "grpc.max_receive_message_bytes",
          [](auto& c) -> auto& { return c.grpc.max_receive_message_bytes; }, 1024, 1 << 30, "BYTES",
          "Largest gRPC request message; larger: RESOURCE_EXHAUSTED before parsing."),
      IntegerKey(
          "grpc.max_concurrent_streams",
          [](auto& c) -> auto& { return c.grpc.max_concurrent_streams; }, 1, 1000000, "N",
          "Calls open at once on one client connection (streams included)."),
      IntegerKey(
          "grpc.keepalive_min_client_interval_ms",
          [](auto& c) -> auto& { return c.grpc.keepalive_min_client_interval; }, 1000, kDayMs, "MS",
          "A client pinging more often than this gets GOAWAY (after two strikes)."),
      IntegerKey(
          "grpc.keepalive_time_ms", [](auto& c) -> auto& { return c.grpc.keepalive_time; }, 1000,
          kDayMs, "MS", "The server pings a connection idle this long ..."),
      IntegerKey(
          "grpc.keepalive_timeout_ms", [](auto& c) -> auto& { return c.grpc.keepalive_timeout; },
          1000, kDayMs, "MS", "... and closes it when the ping is not answered within this."),
      StringKey(
          "grpc.tls.cert_file", [](auto& c) -> auto& { return c.grpc.tls.cert_file; }, OptionalPath,
          "PATH",
          "PEM certificate chain of the gRPC listener; set: TLS (with grpc.tls.key_file), "
          "reloaded without restart. Unset: plaintext (a warning on a non-loopback address)."),
      StringKey(
          "grpc.tls.key_file", [](auto& c) -> auto& { return c.grpc.tls.key_file; }, OptionalPath,
          "PATH", "PEM private key of grpc.tls.cert_file."),
      StringKey(
          "grpc.tls.client_ca_file", [](auto& c) -> auto& { return c.grpc.tls.client_ca_file; },
          OptionalPath, "PATH",
          "PEM CA bundle: set, every client must present a certificate it signs (mTLS)."),
      IntegerKey(
          "grpc.tls.refresh_interval_seconds",
          [](auto& c) -> auto& { return c.grpc.tls.refresh_interval_seconds; }, 1, 86400, "SECONDS",
          "How often the TLS files are read again (a rotated certificate is served from the next "
          "handshake on)."),
      StringKey(
          "grpc.authz_policy_file", [](auto& c) -> auto& { return c.grpc.authz_policy_file; },
          OptionalPath, "PATH",
          "Authorization policy in gRPC's authz policy JSON (allow/deny rules on principals "
          "such as the spiffe:// ID of a client certificate, paths, and headers such as "
          "x-vendor-account), read again without restart. Unset: every caller may call every "
          "RPC (a start-up warning)."),
      IntegerKey(
          "grpc.authz_refresh_interval_seconds",
          [](auto& c) -> auto& { return c.grpc.authz_refresh_interval_seconds; }, 1, 86400,
          "SECONDS", "How often grpc.authz_policy_file is read again."),
      IntegerKey(
          "grpc.health_check_interval_ms",
          [](auto& c) -> auto& { return c.grpc.health_check_interval; }, 100, kDayMs, "MS",
          "How often the health service's per-service status is updated: "
          "inspection.v1.EventService is NOT_SERVING while the event log refuses writes."),
      IntegerKey(
          "grpc.per_caller.requests_per_second",
          [](auto& c) -> auto& { return c.grpc.per_caller_requests_per_second; }, 0, 1000000, "N",
          "Calls one caller (its certificate identity, else its address) may start per second "
          "on this replica; more: RESOURCE_EXHAUSTED with RetryInfo. 0: no limit."),
      IntegerKey(
          "grpc.per_caller.burst", [](auto& c) -> auto& { return c.grpc.per_caller_burst; }, 0,
          10000000, "N",
          "Calls a caller may start at once before its rate applies (0: one second's worth)."),
      IntegerKey(
          "grpc.per_caller.max_streams",
          [](auto& c) -> auto& { return c.grpc.per_caller_max_streams; }, 0, 10000000, "N",
          "Streams (Subscribe, StreamDamageResults, WatchTokenStatus, Health/Watch, "
          "reflection) one caller may hold open on this replica; more: RESOURCE_EXHAUSTED. 0: "
          "no limit."),
      IntegerKey(
          "grpc.per_caller.max_tracked_callers",
          [](auto& c) -> auto& { return c.grpc.per_caller_max_tracked_callers; }, 1, 100000000, "N",
          "Callers the per-caller limits remember on this replica; past it the least recently "
          "used caller holding no stream is forgotten (it starts again with a full bucket)."),
      EnumKey<Toggle>(
          "grpc.reflection", [](auto& c) -> auto& { return c.grpc.reflection; },
          {{"auto", Toggle::kAuto}, {"on", Toggle::kOn}, {"off", Toggle::kOff}},
          "gRPC server reflection (grpcurl list/describe), decided by grpc.authz_policy_file like "
          "every RPC: auto is on with --sandbox and off otherwise."),
  };
}

// Search, logging and shutdown.
std::vector<KeySpec> BehaviourKeys() {
  return {
      IntegerKey(
          "search.max_limit", [](auto& c) -> auto& { return c.search.max_limit; }, 1, kMaxInt, "N",
          "Largest page size a search may request."),
      EnumKey<logging::Level>(
          "log.level", [](auto& c) -> auto& { return c.log.level; },
          {{"debug", logging::Level::kDebug},
           {"info", logging::Level::kInfo},
           {"warn", logging::Level::kWarn},
           {"error", logging::Level::kError}},
          "Lowest level of the log lines written."),
      IntegerKey(
          "log.rejected_lines_per_second",
          [](auto& c) -> auto& { return c.log.rejected_lines_per_second; }, 0, 1000000, "N",
          "Lines per second (a burst of as many) about calls refused by the authorization "
          "policy or the per-caller limits and about rejected webhook deliveries; the next "
          "line written counts the suppressed ones (`suppressed`), the metrics count all. "
          "0: none are logged."),
      IntegerKey(
          "shutdown.grace_ms", [](auto& c) -> auto& { return c.shutdown.grace; }, 0, kDayMs, "MS",
          "How long in-flight RPCs may run on after SIGTERM."),
  };
}

// The webhook receiver (gateway/webhooks, adapters/http HttpServer).
std::vector<KeySpec> WebhookKeys() {
  return {
      StringKey(
          "webhook.path", [](auto& c) -> auto& { return c.webhook.path; }, AbsolutePath, "PATH",
          "HTTP path of the webhook receiver."),
      IntegerKey(
          "webhook.max_body_bytes", [](auto& c) -> auto& { return c.webhook.max_body_bytes; }, 1,
          1 << 30, "BYTES", "Largest webhook body accepted (larger: 413)."),
      IntegerKey(
          "webhook.head_timeout_ms", [](auto& c) -> auto& { return c.webhook.head_timeout; }, 1,
          kDayMs, "MS",
          "Time a client has to send a whole request head, counted from the connection (or, "
          "kept alive, from its next request's first byte), however slowly it trickles; then "
          "the connection is closed."),
      IntegerKey(
          "webhook.keep_alive_timeout_ms",
          [](auto& c) -> auto& { return c.webhook.keep_alive_timeout; }, 1, kDayMs, "MS",
          "An idle kept-alive connection is closed after this (keep it above an ingress's "
          "upstream keep-alive timeout)."),
      IntegerKey(
          "webhook.min_body_bytes_per_second",
          [](auto& c) -> auto& { return c.webhook.min_body_bytes_per_second; }, 1, kNoMax, "BYTES",
          "Slowest average rate a webhook body may arrive at (after body_grace_ms); slower: "
          "408 and the connection ends."),
      IntegerKey(
          "webhook.body_grace_ms", [](auto& c) -> auto& { return c.webhook.body_grace; }, 0, kDayMs,
          "MS", "Slack before the minimum body rate applies."),
      IntegerKey(
          "webhook.write_timeout_ms", [](auto& c) -> auto& { return c.webhook.write_timeout; }, 1,
          kDayMs, "MS",
          "Time a client has to take an answer; a client that does not read is "
          "disconnected."),
      IntegerKey(
          "webhook.max_head_bytes", [](auto& c) -> auto& { return c.webhook.max_head_bytes; }, 256,
          1 << 20, "BYTES", "Request line and headers together; larger: 431."),
      IntegerKey(
          "webhook.max_header_count", [](auto& c) -> auto& { return c.webhook.max_header_count; },
          1, 10000, "N", "Header lines of one request; more: 431."),
      IntegerKey(
          "webhook.max_connections", [](auto& c) -> auto& { return c.webhook.max_connections; }, 1,
          1000000, "N",
          "Open connections to the webhook port; past it an idle kept-alive connection is "
          "closed to make room, or the new one is answered 503 and closed at once."),
      IntegerKey(
          "webhook.max_connections_per_client",
          [](auto& c) -> auto& { return c.webhook.max_connections_per_client; }, 1, 1000000, "N",
          "Open connections from one client address; more: 503 and closed at once. Behind an "
          "ingress every connection comes from its address: raise it to its pool size."),
      IntegerKey(
          "webhook.max_requests_in_flight",
          [](auto& c) -> auto& { return c.webhook.max_requests_in_flight; }, 1, 1000000, "N",
          "Authenticated deliveries being read or stored at once; more: 503 with "
          "Retry-After before the body is read (bounds body memory to this times "
          "max_body_bytes)."),
      IntegerKey(
          "webhook.max_json_depth", [](auto& c) -> auto& { return c.webhook.max_json_depth; }, 1,
          10000, "N", "Nesting of objects and arrays in a webhook body; deeper: 400."),
      IntegerKey(
          "webhook.max_json_elements", [](auto& c) -> auto& { return c.webhook.max_json_elements; },
          1, 100000000, "N", "JSON values in a webhook body; more: 400."),
      IntegerKey(
          "webhook.dedupe_window_hours",
          [](auto& c) -> auto& { return c.webhook.dedupe_window_hours; }, 1, 24 * 366, "HOURS",
          "A delivery byte-identical to one received within this window is a duplicate "
          "(answered 200, stored once); an identical one after it is a new event."),
      IntegerKey(
          "webhook.threads", [](auto& c) -> auto& { return c.webhook.threads; }, 1, 1024, "N",
          "Threads parsing and storing deliveries (sockets need none: an idle or slow "
          "connection costs no thread)."),
      StringKey(
          "webhook.event_name_pointer",
          [](auto& c) -> auto& { return c.webhook.event_name_pointer; }, Pointer, "POINTER",
          "JSON pointer to the event name in a webhook body."),
      StringKey(
          "webhook.inspection_id_pointer",
          [](auto& c) -> auto& { return c.webhook.inspection_id_pointer; }, Pointer, "POINTER",
          "JSON pointer to the inspection id in a webhook body."),
      StringKey(
          "webhook.token_id_pointer", [](auto& c) -> auto& { return c.webhook.token_id_pointer; },
          Pointer, "POINTER", "JSON pointer to the token id (uid) in a webhook body."),
      StringKey(
          "webhook.vehicle_id_pointer",
          [](auto& c) -> auto& { return c.webhook.vehicle_id_pointer; }, Pointer, "POINTER",
          "JSON pointer to the vehicle id in a webhook body."),
      StringKey(
          "webhook_key_file", [](auto& c) -> auto& { return c.webhook_key_file; }, NonEmpty, "PATH",
          "File holding the key the vendor sends in x-api-key with webhooks. When not set, "
          "read from env INSPECTION_WEBHOOK_KEY; without a key the receiver is not started."),
      StringKey(
          "webhook_previous_key_file", [](auto& c) -> auto& { return c.webhook_previous_key_file; },
          NonEmpty, "PATH",
          "File holding the previous webhook key, still accepted during a rotation (else env "
          "INSPECTION_WEBHOOK_PREVIOUS_KEY)."),
  };
}

// The event log, the streams and the token watch.
std::vector<KeySpec> EventKeys() {
  return {
      StringKey(
          "event_log", [](auto& c) -> auto& { return c.event_log; }, EventLogUrl, "URL",
          "Where events are stored: sqlite:<path> (one process) or "
          "redis://[:password@]host:port[/db][?stream=name] (replicas share it)."),
      IntegerKey(
          "event_log_retention.max_age_hours",
          [](auto& c) -> auto& { return c.event_log_retention.max_age_hours; }, 1, 24 * 366,
          "HOURS", "Events older than this are removed."),
      IntegerKey(
          "event_log_retention.max_events",
          [](auto& c) -> auto& { return c.event_log_retention.max_events; }, 1, 1000000000, "N",
          "At most this many events are kept (the oldest go first)."),
      IntegerKey(
          "streams.queue_size", [](auto& c) -> auto& { return c.streams.queue_size; }, 1, 1000000,
          "N",
          "Events buffered per Subscribe or StreamDamageResults stream; a live subscriber "
          "further behind is ended with RESOURCE_EXHAUSTED and its last cursor."),
      IntegerKey(
          "streams.queue_max_bytes", [](auto& c) -> auto& { return c.streams.queue_max_bytes; },
          1024, int64_t{1} << 40, "BYTES",
          "Bytes (wire size) of the events waiting for one stream behind the one being written "
          "(a larger event is still sent); past it, as past queue_size. Worst case for all "
          "streams: max_total times this."),
      IntegerKey(
          "streams.catchup_events_per_turn",
          [](auto& c) -> auto& { return c.streams.catchup_events_per_turn; }, 1, 100000, "N",
          "Stored events one catching-up subscriber (after_cursor, from_start) may scan before "
          "live events are dispatched again: a long catch-up never holds up live streams."),
      IntegerKey(
          "streams.catchup_idle_timeout_ms",
          [](auto& c) -> auto& { return c.streams.catchup_idle_timeout; }, 1, kDayMs, "MS",
          "A catching-up subscriber whose buffer stays full this long (it does not read) is "
          "ended with RESOURCE_EXHAUSTED and its last cursor."),
      IntegerKey(
          "streams.max_per_connection",
          [](auto& c) -> auto& { return c.streams.max_per_connection; }, 0, 1000000, "N",
          "Server streams one client connection may hold open; more: RESOURCE_EXHAUSTED "
          "(CONNECTION_STREAM_LIMIT). Keep it below grpc.max_concurrent_streams so unary "
          "calls on that connection still go through. 0: no limit."),
      IntegerKey(
          "streams.max_total", [](auto& c) -> auto& { return c.streams.max_total; }, 0, 10000000,
          "N",
          "Server streams this replica holds open; more: RESOURCE_EXHAUSTED (STREAM_LIMIT). 0: "
          "no limit."),
      IntegerKey(
          "streams.max_request_bytes", [](auto& c) -> auto& { return c.streams.max_request_bytes; },
          256, 16 << 20, "BYTES",
          "What the request of a server stream may hold in memory while the stream is open "
          "(Subscribe, WatchTokenStatus, Health/Watch; StreamDamageResults not counting its "
          "URLs, which validation.max_urls bounds): as parsed, unknown fields and groups "
          "included, and for Subscribe with its filter's event names; more: INVALID_ARGUMENT."),
      IntegerKey(
          "token_watch.interval_ms", [](auto& c) -> auto& { return c.token_watch.interval; }, 100,
          kDayMs, "MS", "How often WatchTokenStatus polls each watched token at the vendor."),
      IntegerKey(
          "token_watch.max_backoff_ms", [](auto& c) -> auto& { return c.token_watch.max_backoff; },
          100, kDayMs, "MS", "Longest pause between polls of a token while the vendor fails."),
  };
}

// Reconciliation, tracing and the work ledger.
std::vector<KeySpec> ReconcileKeys() {
  return {
      EnumKey<WebhookMode>(
          "webhook.mode", [](auto& c) -> auto& { return c.webhook_mode; },
          {{"webhook", WebhookMode::kWebhook}, {"poll", WebhookMode::kPoll}},
          "Where stream events come from: webhook (the vendor's webhooks, received when a "
          "webhook key is set; reports whose webhook is lost are still recovered, see "
          "reconcile.*) or poll (no webhook receiver and no public endpoint: Subscribe and "
          "StreamDamageResults carry what this gateway started, polled at the vendor). Without "
          "a webhook key the gateway polls in either mode."),
      BoolKey(
          "reconcile.enabled", [](auto& c) -> auto& { return c.reconcile.enabled; },
          "Record every damage submission and created token, and poll the vendor for a report "
          "whose createReport webhook does not come (a damagesReport event of the gateway's "
          "own). Off: results depend on webhooks alone."),
      IntegerKey(
          "reconcile.after_ms", [](auto& c) -> auto& { return c.reconcile.after; }, 1, 30 * kDayMs,
          "MS",
          "A submitted inspection without createReport this long is polled (damages report). "
          "In webhook-less mode the first poll is reconcile.interval_ms after the submission."),
      IntegerKey(
          "reconcile.interval_ms", [](auto& c) -> auto& { return c.reconcile.interval; }, 1, kDayMs,
          "MS",
          "Between two polls of one inspection or token; doubles after each poll without a "
          "result ..."),
      IntegerKey(
          "reconcile.max_interval_ms", [](auto& c) -> auto& { return c.reconcile.max_interval; }, 1,
          kDayMs, "MS", "... up to this."),
      IntegerKey(
          "reconcile.max_polls_per_minute",
          [](auto& c) -> auto& { return c.reconcile.max_polls_per_minute; }, 1, 1000000, "N",
          "Vendor calls one replica's reconciler may make per minute (a burst of at most this "
          "many); what is due beyond it waits (inspection_reconcile_overdue_items)."),
      IntegerKey(
          "reconcile.max_polls_per_item",
          [](auto& c) -> auto& { return c.reconcile.max_polls_per_item; }, 1, 1000000, "N",
          "Polls of one inspection or token without a result, at most; then it is given up "
          "(logged, inspection_reconcile_given_up_total). The default covers about 3 days with "
          "the default intervals; items polled fewer times are polled first."),
      IntegerKey(
          "reconcile.lease_ms", [](auto& c) -> auto& { return c.reconcile.lease; }, 100, kDayMs,
          "MS",
          "How long an item being polled is one replica's; a replica that dies mid-poll leaves "
          "it to the others after this. Must be longer than a poll's vendor call may take (10 "
          "s, the damages report route's deadline)."),
      IntegerKey(
          "reconcile.max_age_hours", [](auto& c) -> auto& { return c.reconcile.max_age_hours; }, 1,
          24 * 366, "HOURS",
          "Inspections and tokens recorded longer ago are forgotten (a token never completed, a "
          "report that never came)."),
      StringListKey(
          "reconcile.ready_pointers", [](auto& c) -> auto& { return c.reconcile.ready_pointers; },
          CheckJsonPointer, "POINTER,...",
          "RFC 6901 pointers into the damages report that must all hold a value (not null, "
          "false or empty) for the report to count as finished (the spec does not show a "
          "finished report). Default none: any 2xx answer is finished; 404 is not.",
          /*may_be_empty=*/true),
      IntegerKey(
          "reconcile.scan_interval_ms", [](auto& c) -> auto& { return c.reconcile.scan_interval; },
          10, kDayMs, "MS",
          "The reconciler looks for due items at least this often (new work wakes it sooner)."),
      StringKey(
          "tracing.otlp_endpoint", [](auto& c) -> auto& { return c.tracing.otlp_endpoint; },
          OptionalUrl, "URL",
          "OTLP/HTTP traces URL of a collector (e.g. http://otel-collector:4318/v1/traces): "
          "each RPC's span and each vendor attempt's span are sent there as OTLP JSON. Empty "
          "(default): no export; trace context is propagated and logged either way."),
      IntegerKey(
          "tracing.max_queued_spans", [](auto& c) -> auto& { return c.tracing.max_queued_spans; },
          1, 10000000, "N",
          "Spans waiting for export at most; more are dropped and counted "
          "(inspection_trace_spans_dropped_total{reason=\"queue_full\"})."),
      IntegerKey(
          "tracing.max_batch_spans", [](auto& c) -> auto& { return c.tracing.max_batch_spans; }, 1,
          100000, "N", "Spans per export request at most."),
      IntegerKey(
          "tracing.export_interval_ms", [](auto& c) -> auto& { return c.tracing.export_interval; },
          10, kDayMs, "MS", "A batch is sent when full or this long after the last one."),
      IntegerKey(
          "tracing.export_timeout_ms", [](auto& c) -> auto& { return c.tracing.export_timeout; },
          100, kDayMs, "MS",
          "An export request not answered within this fails; its spans are dropped and counted "
          "(no retry: a collector outage costs spans, never gateway memory)."),
      StringKey(
          "reconcile.ledger", [](auto& c) -> auto& { return c.reconcile.ledger; }, WorkLedgerUrl,
          "URL",
          "Where recorded work is kept: sqlite:<path> or redis://[:password@]host:port[/db] "
          "(replicas share it and split the polls). Empty: beside event_log (<path>.work, or "
          "the same Redis)."),
  };
}

// Idempotency, retries, the retry budget, the circuit breaker and the cache.
std::vector<KeySpec> ResilienceKeys() {
  return {
      IntegerKey(
          "idempotency.ttl_hours", [](auto& c) -> auto& { return c.idempotency_ttl_hours; }, 1,
          24 * 30, "HOURS",
          "How long the first outcome of a CreateToken/DetectDamage idempotency key is kept."),
      IntegerKey(
          "idempotency.max_bytes", [](auto& c) -> auto& { return c.idempotency_max_bytes; },
          1 << 20, int64_t{1} << 40, "BYTES",
          "Memory the in-memory idempotency store may hold; past it the oldest finished "
          "outcomes are forgotten first, and with only keys in flight a new key gets "
          "UNAVAILABLE."),
      StringKey(
          "idempotency_store", [](auto& c) -> auto& { return c.idempotency_store; },
          IdempotencyStoreUrl, "memory|URL",
          "Where idempotency keys are kept: memory (this process) or "
          "redis://[:password@]host:port[/db] (replicas share them)."),
      IntegerKey(
          "retry.base_ms", [](auto& c) -> auto& { return c.retry.base; }, 1, 60000, "MS",
          "Backoff before the first retry is uniform in [0, base]; each retry doubles it."),
      IntegerKey(
          "retry.cap_ms", [](auto& c) -> auto& { return c.retry.cap; }, 1, 600000, "MS",
          "Largest backoff ceiling."),
      IntegerKey(
          "retry.max_attempts", [](auto& c) -> auto& { return c.retry.max_attempts; }, 1, 10, "N",
          "Attempts per vendor call, the first included (1: never retry). Only safe and "
          "idempotent routes are retried."),
      IntegerKey(
          "retry.min_attempt_ms", [](auto& c) -> auto& { return c.retry.min_attempt; }, 1, 60000,
          "MS", "No retry starts with less than this left before the caller's deadline."),
      IntegerKey(
          "retry_budget.percent", [](auto& c) -> auto& { return c.retry_budget.percent; }, 0, 100,
          "PERCENT", "Retries in flight may be at most this share of the requests in flight ..."),
      IntegerKey(
          "retry_budget.min_retries", [](auto& c) -> auto& { return c.retry_budget.min_retries; },
          0, 1000000, "N", "... but at least this many."),
      IntegerKey(
          "circuit_breaker.consecutive_failures",
          [](auto& c) -> auto& { return c.circuit_breaker.consecutive_failures; }, 0, 1000000, "N",
          "Open after this many consecutive failed calls (0: rule off)."),
      IntegerKey(
          "circuit_breaker.failure_ratio_percent",
          [](auto& c) -> auto& { return c.circuit_breaker.failure_ratio_percent; }, 1, 100,
          "PERCENT", "Open when this share of the calls in the window failed ..."),
      IntegerKey(
          "circuit_breaker.minimum_requests",
          [](auto& c) -> auto& { return c.circuit_breaker.minimum_requests; }, 1, 1000000, "N",
          "... and the window holds at least this many calls."),
      IntegerKey(
          "circuit_breaker.window_ms", [](auto& c) -> auto& { return c.circuit_breaker.window; },
          10, kDayMs, "MS", "The rolling window of the failure ratio (ten buckets)."),
      IntegerKey(
          "circuit_breaker.open_ms", [](auto& c) -> auto& { return c.circuit_breaker.open; }, 1,
          kDayMs, "MS",
          "How long the breaker stays open before one probe; doubles after a failed probe ..."),
      IntegerKey(
          "circuit_breaker.max_open_ms",
          [](auto& c) -> auto& { return c.circuit_breaker.max_open; }, 1, kDayMs, "MS",
          "... up to this."),
      BoolKey(
          "cache.enabled", [](auto& c) -> auto& { return c.cache.enabled; },
          "Cache vendor answers of cacheable routes (TTLs in the route table) and coalesce "
          "identical concurrent calls."),
      IntegerKey(
          "cache.max_bytes", [](auto& c) -> auto& { return c.cache.max_bytes; }, 1024,
          int64_t{1} << 40, "BYTES",
          "Memory the cache may hold (each answer's text and its parsed JSON); least recently "
          "used go first."),
      IntegerKey(
          "cache.stale_if_error_ms", [](auto& c) -> auto& { return c.cache.stale_if_error; }, 0,
          kDayMs, "MS",
          "How long past its TTL an answer may be served when the vendor fails (flagged "
          "x-cache: stale); 0: never."),
      BoolKey(
          "cache.image_analysis", [](auto& c) -> auto& { return c.cache.image_analysis; },
          "Cache image analysis (quality, segmentation, background removal) by URL and "
          "parameters."),
      IntegerKey(
          "cache.image_analysis_ttl_ms",
          [](auto& c) -> auto& { return c.cache.image_analysis_ttl; }, 0, kDayMs * 30, "MS",
          "How long an image analysis answer is cached; 0: each RPC's own TTL, the cache_ttl_ms "
          "of its vendor_route annotation (600000 for every image-analysis RPC today)."),
  };
}

// Webhook registration at the vendor on start-up.
std::vector<KeySpec> RegistrationKeys() {
  return {
      StringKey(
          "register_webhook", [](auto& c) -> auto& { return c.register_webhook; }, OptionalUrl,
          "URL",
          "The gateway's public webhook URL: when set, it is registered at the vendor on "
          "start-up with the webhook key, and register_webhook_events are enabled."),
      StringListKey(
          "register_webhook_events", [](auto& c) -> auto& { return c.register_webhook_events; },
          EventNameCheck, "NAME,...", "Events enabled at the vendor when register_webhook is set."),
  };
}

// Every setting. Rows are in --help order (the sections above, in this order); the dump
// follows it too.
const std::vector<KeySpec>& Keys() {
  static const std::vector<KeySpec>* const keys = [] {
    auto* all = new std::vector<KeySpec>;
    for (std::vector<KeySpec> (*section)() :
         {ProcessKeys, UpstreamKeys, MappingKeys, GrpcKeys, BehaviourKeys, WebhookKeys, EventKeys,
          ReconcileKeys, ResilienceKeys, RegistrationKeys}) {
      std::vector<KeySpec> rows = section();
      all->insert(all->end(), std::make_move_iterator(rows.begin()),
                  std::make_move_iterator(rows.end()));
    }
    return all;
  }();
  return *keys;
}

// A secret: read from the file named by a string key, or else from an env variable. Secrets
// live at the top level of GatewayConfig.
struct SecretSpec {
  std::string name;      // How messages and the dump refer to it: "api_key".
  std::string file_key;  // The key (in Keys()) naming its file: "api_key_file".
  std::string env;       // Env variable holding the value itself when no file is configured.
  bool required;
  std::string GatewayConfig::*file_path;
  Secret GatewayConfig::*value;
};

const std::vector<SecretSpec>& Secrets() {
  static const std::vector<SecretSpec>* const secrets = new std::vector<SecretSpec>{
      {"api_key", "api_key_file", "INSPECTION_API_KEY", /*required=*/true,
       &GatewayConfig::api_key_file, &GatewayConfig::api_key},
      {"webhook_key", "webhook_key_file", "INSPECTION_WEBHOOK_KEY", /*required=*/false,
       &GatewayConfig::webhook_key_file, &GatewayConfig::webhook_key},
      {"webhook_previous_key", "webhook_previous_key_file", "INSPECTION_WEBHOOK_PREVIOUS_KEY",
       /*required=*/false, &GatewayConfig::webhook_previous_key_file,
       &GatewayConfig::webhook_previous_key},
  };
  return *secrets;
}

const KeySpec* FindKey(absl::string_view key) {
  for (const KeySpec& spec : Keys()) {
    if (spec.key == key) return &spec;
  }
  return nullptr;
}

const KeySpec* FindFlag(absl::string_view flag) {
  for (const KeySpec& spec : Keys()) {
    if (spec.Flag() == flag) return &spec;
  }
  return nullptr;
}

// True if `name` is a section ("upstream"): a proper prefix of some key, up to a '.'.
bool IsSection(absl::string_view name) {
  for (const KeySpec& spec : Keys()) {
    if (absl::StartsWith(spec.key, name) && spec.key.size() > name.size() &&
        spec.key[name.size()] == '.') {
      return true;
    }
  }
  return false;
}

std::vector<std::string> KnownKeysAndSections() {
  std::vector<std::string> names;
  for (const KeySpec& spec : Keys()) {
    names.push_back(spec.key);
    for (std::size_t dot = spec.key.find('.'); dot != std::string::npos;
         dot = spec.key.find('.', dot + 1)) {
      names.push_back(spec.key.substr(0, dot));
    }
  }
  return names;
}

// ---------------------------------------------------------------------------------------------
// Applying values.
// ---------------------------------------------------------------------------------------------

absl::string_view KindName(ValueKind kind) {
  switch (kind) {
    case ValueKind::kString:
      return "string";
    case ValueKind::kInteger:
      return "integer";
    case ValueKind::kStringList:
      return "array of strings";
    case ValueKind::kBool:
      return "boolean";
    case ValueKind::kObject:
      return "object";
  }
  return "value";
}

bool HasKind(const json& value, ValueKind kind) {
  switch (kind) {
    case ValueKind::kString:
      return value.is_string();
    case ValueKind::kInteger:
      return value.is_number_integer();
    case ValueKind::kBool:
      return value.is_boolean();
    case ValueKind::kObject:
      return value.is_object();
    case ValueKind::kStringList:
      if (!value.is_array()) return false;
      for (const json& item : value) {
        if (!item.is_string()) return false;
      }
      return true;
  }
  return false;
}

std::string DescribeType(const json& value) {
  if (value.is_number_float()) return absl::StrCat("number ", value.dump());
  if (value.is_array()) {
    for (const json& item : value) {
      if (!item.is_string()) return absl::StrCat("array containing ", item.type_name());
    }
  }
  return value.type_name();
}

// `origin` says where the value came from: "in /etc/gw.json", "from flag --x", "from env X".
absl::Status Apply(const KeySpec& spec, const json& value, absl::string_view origin,
                   GatewayConfig& config) {
  if (!HasKind(value, spec.kind)) {
    return absl::InvalidArgumentError(absl::StrCat("invalid `", spec.key, "` ", origin,
                                                   ": expected ", KindName(spec.kind), ", got ",
                                                   DescribeType(value)));
  }
  if (spec.store_nested) return spec.store_nested(value, origin, config);
  absl::Status status = spec.store(value, config);
  if (!status.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid `", spec.key, "` ", origin, ": ", status.message()));
  }
  return absl::OkStatus();
}

std::string JsonParseError(const std::string& text);

// Converts env or flag text to the key's JSON type.
absl::StatusOr<json> FromText(ValueKind kind, const std::string& text) {
  switch (kind) {
    case ValueKind::kString:
      return json(text);
    case ValueKind::kInteger: {
      std::int64_t number;
      if (!absl::SimpleAtoi(text, &number)) {
        return absl::InvalidArgumentError(absl::StrCat("expected integer, got \"", text, "\""));
      }
      return json(number);
    }
    case ValueKind::kBool: {
      if (text == "true" || text == "1") return json(true);
      if (text == "false" || text == "0") return json(false);
      return absl::InvalidArgumentError(absl::StrCat("expected true or false, got \"", text, "\""));
    }
    case ValueKind::kStringList: {
      const absl::string_view trimmed = absl::StripAsciiWhitespace(text);
      if (absl::StartsWith(trimmed, "[")) {
        json list = json::parse(trimmed, nullptr, /*allow_exceptions=*/false);
        if (list.is_discarded() || !HasKind(list, kind)) {
          return absl::InvalidArgumentError(
              "expected a JSON array of strings or comma-separated items");
        }
        return list;
      }
      json list = json::array();
      if (trimmed.empty()) return list;
      for (absl::string_view item : absl::StrSplit(trimmed, ',')) {
        list.push_back(std::string(absl::StripAsciiWhitespace(item)));
      }
      return list;
    }
    case ValueKind::kObject: {
      const json object = json::parse(text, nullptr, /*allow_exceptions=*/false);
      if (object.is_discarded()) {
        return absl::InvalidArgumentError(
            absl::StrCat("expected a JSON object (", JsonParseError(text), ")"));
      }
      if (!object.is_object()) {
        return absl::InvalidArgumentError(
            absl::StrCat("expected a JSON object, got ", object.type_name()));
      }
      return object;
    }
  }
  return absl::InternalError("unknown value kind");
}

absl::Status ApplyText(const KeySpec& spec, const std::string& text, absl::string_view origin,
                       GatewayConfig& config) {
  absl::StatusOr<json> value = FromText(spec.kind, text);
  if (!value.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid `", spec.key, "` ", origin, ": ", value.status().message()));
  }
  return Apply(spec, *value, origin, config);
}

// ---------------------------------------------------------------------------------------------
// The config file.
// ---------------------------------------------------------------------------------------------

// Reads a whole file. The error is the OS's reason ("No such file or directory").
absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) {
    return absl::InvalidArgumentError(std::generic_category().message(errno));
  }
  std::string contents;
  char buffer[4096];
  std::size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), file)) > 0) contents.append(buffer, n);
  const bool failed = std::ferror(file) != 0;
  const int error = errno;
  std::fclose(file);
  if (failed) return absl::InvalidArgumentError(std::generic_category().message(error));
  return contents;
}

// Finds why and where `text` is not valid JSON. Only used once json::parse has failed, so the
// happy path parses once. The "last read" excerpt of nlohmann's message is dropped.
class ParseErrorFinder : public nlohmann::json_sax<json> {
 public:
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return true; }
  bool key(string_t&) override { return true; }
  bool end_object() override { return true; }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t, const std::string&,
                   const nlohmann::detail::exception& ex) override {
    std::string what = ex.what();
    // "[json.exception.parse_error.101] parse error at line 3, column 5: syntax error ..."
    if (const std::size_t start = what.find("] "); start != std::string::npos) {
      what.erase(0, start + 2);
    }
    if (const std::size_t start = what.find("; last read: '"); start != std::string::npos) {
      const std::size_t end = what.find("'; expected", start);
      what.erase(start, end == std::string::npos ? std::string::npos : end + 1 - start);
    }
    message = std::move(what);
    return false;
  }

  std::string message = "parse error";
};

// Why `text`, which json::parse refused, is not valid JSON: "parse error at line 1, column 3:
// ..." (without an excerpt of the text).
std::string JsonParseError(const std::string& text) {
  ParseErrorFinder finder;
  json::sax_parse(text, &finder);
  return finder.message;
}

absl::Status ApplyObject(const json& object, const std::string& prefix, const std::string& path,
                         GatewayConfig& config) {
  const std::string origin = absl::StrCat("in ", path);
  for (const auto& [name, value] : object.items()) {
    const std::string key = prefix.empty() ? name : absl::StrCat(prefix, ".", name);
    if (const KeySpec* spec = FindKey(key); spec != nullptr) {
      absl::Status status = Apply(*spec, value, origin, config);
      if (!status.ok()) return status;
    } else if (IsSection(key)) {
      if (!value.is_object()) {
        return absl::InvalidArgumentError(absl::StrCat("invalid `", key, "` ", origin,
                                                       ": expected object (a section), got ",
                                                       DescribeType(value)));
      }
      absl::Status status = ApplyObject(value, key, path, config);
      if (!status.ok()) return status;
    } else {
      std::string message = absl::StrCat("unknown key `", key, "` ", origin);
      bool is_secret = false;
      for (const SecretSpec& secret : Secrets()) {
        if (key == secret.name) {
          is_secret = true;
          absl::StrAppend(&message, ": secrets are not read from the config file; set `",
                          secret.file_key, "` or env ", secret.env);
        }
      }
      if (!is_secret) {
        if (std::string match = ClosestMatch(key, KnownKeysAndSections()); !match.empty()) {
          absl::StrAppend(&message, " (did you mean `", match, "`?)");
        }
      }
      return absl::InvalidArgumentError(message);
    }
  }
  return absl::OkStatus();
}

absl::Status ApplyFile(const std::string& path, GatewayConfig& config) {
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot read config file ", path, ": ", text.status().message()));
  }
  const json document = json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (document.is_discarded()) {
    return absl::InvalidArgumentError(
        absl::StrCat("config file ", path, " is not valid JSON: ", JsonParseError(*text)));
  }
  if (!document.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("config file ", path, " must hold a JSON object, got ", document.type_name()));
  }
  return ApplyObject(document, "", path, config);
}

// ---------------------------------------------------------------------------------------------
// Flags.
// ---------------------------------------------------------------------------------------------

struct FlagValue {
  const KeySpec* spec;
  std::string flag;  // As given, without "--".
  std::string value;
};

struct ParsedArgs {
  std::vector<FlagValue> settings;
  std::optional<std::string> config_file;
  bool print_config = false;
};

absl::Status UnknownFlag(const std::string& name) {
  // Only the name is echoed: the text after '=' might be a secret passed by mistake.
  std::string message = absl::StrCat("unknown flag --", name);
  for (const SecretSpec& secret : Secrets()) {
    if (name == FlagName(secret.name)) {
      absl::StrAppend(&message, ": secrets are not accepted on the command line; use --",
                      FlagName(secret.file_key), " or env ", secret.env);
      return absl::InvalidArgumentError(message);
    }
  }
  std::vector<std::string> flags = {"config", "print-config", "help", "version"};
  for (const KeySpec& spec : Keys()) flags.push_back(spec.Flag());
  if (std::string match = ClosestMatch(name, flags); !match.empty()) {
    absl::StrAppend(&message, " (did you mean --", match, "?)");
  }
  return absl::InvalidArgumentError(message);
}

absl::StatusOr<ParsedArgs> ParseArgs(const std::vector<std::string>& args) {
  ParsedArgs parsed;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (!absl::StartsWith(arg, "--") || arg.size() == 2) {
      if (absl::StartsWith(arg, "-")) {
        return absl::InvalidArgumentError(
            absl::StrCat("unknown flag ", arg, " (flags are --name=value or --name value)"));
      }
      return absl::InvalidArgumentError(absl::StrCat(
          "unexpected argument #", i + 1, ": not a flag (flags are --name=value or --name value)"));
    }
    const std::size_t eq = arg.find('=');
    const std::string name = arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    std::optional<std::string> value;
    if (eq != std::string::npos) value = arg.substr(eq + 1);

    if (name == "print-config") {
      if (!value || *value == "true") {
        parsed.print_config = true;
      } else if (*value == "false") {
        parsed.print_config = false;
      } else {
        return absl::InvalidArgumentError("flag --print-config takes no value, true or false");
      }
      continue;
    }
    const KeySpec* spec = nullptr;
    if (name != "config") {
      spec = FindFlag(name);
      if (spec == nullptr) return UnknownFlag(name);
    }
    if (!value && spec != nullptr && spec->kind == ValueKind::kBool) value = "true";
    if (!value) {
      if (i + 1 >= args.size() || absl::StartsWith(args[i + 1], "--")) {
        return absl::InvalidArgumentError(absl::StrCat("flag --", name, " needs a value (--", name,
                                                       "=VALUE or --", name, " VALUE)"));
      }
      value = args[++i];
    }
    if (spec == nullptr) {
      parsed.config_file = *value;
    } else {
      parsed.settings.push_back({spec, name, *std::move(value)});
    }
  }
  return parsed;
}

// ---------------------------------------------------------------------------------------------
// Secrets and required keys.
// ---------------------------------------------------------------------------------------------

bool HasControlCharacters(absl::string_view text) {
  for (char c : text) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7F) return true;
  }
  return false;
}

// Trims trailing whitespace off a secret `name` read from `source` ("`api_key_file` /run/key",
// "env INSPECTION_API_KEY") and refuses control characters. Messages here and below name the
// key, file or env variable, never the value.
absl::StatusOr<std::string> CleanSecret(std::string value, absl::string_view name,
                                        absl::string_view source) {
  value.resize(absl::StripTrailingAsciiWhitespace(value).size());
  if (HasControlCharacters(value)) {
    return absl::InvalidArgumentError(absl::StrCat("invalid ", name, " from ", source,
                                                   ": contains control characters (not shown)"));
  }
  return value;
}

// Reads the secret `name` from the file `path` named by key `file_key`: it must not be empty.
absl::StatusOr<Secret> ReadSecretFile(absl::string_view name, absl::string_view file_key,
                                      const std::string& path) {
  const std::string source = absl::StrCat("`", file_key, "` ", path);
  absl::StatusOr<std::string> contents = ReadFile(path);
  if (!contents.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot read ", source, ": ", contents.status().message()));
  }
  absl::StatusOr<std::string> value = CleanSecret(*std::move(contents), name, source);
  if (!value.ok()) return value.status();
  if (value->empty()) {
    return absl::InvalidArgumentError(absl::StrCat(source, " is empty: it must hold the ", name));
  }
  return Secret(*std::move(value));
}

absl::Status ResolveSecret(const SecretSpec& spec, const EnvLookup& getenv, GatewayConfig& config) {
  const std::string& path = config.*spec.file_path;
  if (!path.empty()) {
    absl::StatusOr<Secret> secret = ReadSecretFile(spec.name, spec.file_key, path);
    if (!secret.ok()) return secret.status();
    config.*spec.value = *std::move(secret);
    return absl::OkStatus();
  }
  std::optional<std::string> env = getenv(spec.env);
  absl::StatusOr<std::string> value =
      CleanSecret(env.value_or(""), spec.name, absl::StrCat("env ", spec.env));
  if (!value.ok()) return value.status();
  if (value->empty()) {
    if (!spec.required) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat("missing ", spec.name, ": set `", spec.file_key,
                                                   "` (flag --", FlagName(spec.file_key), ", env ",
                                                   EnvName(spec.file_key), ") or env ", spec.env));
  }
  config.*spec.value = Secret(*std::move(value));
  return absl::OkStatus();
}

// Reads every account's secrets from their files (in sandbox mode too).
absl::Status ResolveAccountSecrets(GatewayConfig& config) {
  for (VendorAccountConfig& account : config.accounts) {
    const std::string key = AccountKey(account.name);
    for (const AccountSecretSpec& spec : AccountSecrets()) {
      const std::string& path = account.*spec.file_path;
      if (path.empty()) continue;  // Only optional ones: the store refused a missing api_key_file.
      absl::StatusOr<Secret> secret = ReadSecretFile(absl::StrCat(key, ".", spec.name),
                                                     absl::StrCat(key, ".", spec.file_key), path);
      if (!secret.ok()) return secret.status();
      account.*spec.value = *std::move(secret);
    }
  }
  return absl::OkStatus();
}

// The webhook keys, once read: an account's key needs the default account's (which starts the
// receiver), and no two accounts (the default one included) share a key.
absl::Status CheckWebhookKeys(const GatewayConfig& config) {
  struct Owned {
    std::string account;  // "" for the default account.
    std::string source;   // "`accounts.a.webhook_key_file`", "env INSPECTION_WEBHOOK_KEY".
    const Secret* key;
  };
  std::vector<Owned> keys;
  for (const SecretSpec& spec : Secrets()) {
    if (spec.value == &GatewayConfig::api_key) continue;  // Every other one is a webhook key.
    keys.push_back({"",
                    (config.*spec.file_path).empty() ? absl::StrCat("env ", spec.env)
                                                     : absl::StrCat("`", spec.file_key, "`"),
                    &(config.*spec.value)});
  }
  for (const VendorAccountConfig& account : config.accounts) {
    for (const AccountSecretSpec& spec : AccountSecrets()) {
      if (spec.value == &VendorAccountConfig::api_key) continue;
      keys.push_back({account.name,
                      absl::StrCat("`", AccountKey(account.name), ".", spec.file_key, "`"),
                      &(account.*spec.value)});
    }
  }
  // In sandbox mode the sandbox supplies the default webhook key when none is configured.
  if (config.webhook_key.empty() && !config.sandbox) {
    for (const VendorAccountConfig& account : config.accounts) {
      if (account.webhook_key.empty()) continue;
      return absl::InvalidArgumentError(absl::StrCat(
          "`", AccountKey(account.name),
          ".webhook_key_file` is set but the default account has no webhook key: the webhook "
          "receiver is started by the default account's `webhook_key_file` (or env "
          "INSPECTION_WEBHOOK_KEY), so it must be set too"));
    }
  }
  for (std::size_t i = 0; i < keys.size(); ++i) {
    for (std::size_t j = i + 1; j < keys.size(); ++j) {
      if (keys[i].account == keys[j].account || keys[i].key->empty() ||
          keys[i].key->Reveal() != keys[j].key->Reveal()) {
        continue;
      }
      return absl::InvalidArgumentError(
          absl::StrCat(keys[i].source, " and ", keys[j].source,
                       " hold the same webhook key (not shown): each account needs its own"));
    }
  }
  return absl::OkStatus();
}

// A lease that ends while its poll may still be at the vendor lets a second replica claim
// and poll the same item (issue 31).
absl::Status CheckReconcileLease(const GatewayConfig& config) {
  const absl::Duration poll = server::ReconcilePollDeadline();
  if (!config.reconcile.enabled || config.reconcile.lease > poll) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "`reconcile.lease_ms` (", absl::ToInt64Milliseconds(config.reconcile.lease),
      ") must be longer than a reconcile poll's vendor call may take: ",
      absl::ToInt64Milliseconds(poll),
      " ms, its deadline (retries included; `upstream.timeout_ms` shortens each attempt, not "
      "the call). A shorter lease lets another replica claim and poll an item whose poll is "
      "still in flight"));
}

// Rules that tie two keys together.
absl::Status CheckConsistent(const GatewayConfig& config) {
  if (config.retry.cap < config.retry.base) {
    return absl::InvalidArgumentError("`retry.cap_ms` must be >= `retry.base_ms`");
  }
  if (config.circuit_breaker.max_open < config.circuit_breaker.open) {
    return absl::InvalidArgumentError(
        "`circuit_breaker.max_open_ms` must be >= `circuit_breaker.open_ms`");
  }
  const GrpcTlsSection& tls = config.grpc.tls;
  if (tls.cert_file.empty() != tls.key_file.empty()) {
    return absl::InvalidArgumentError(
        "`grpc.tls.cert_file` and `grpc.tls.key_file` go together: set both for TLS, or neither");
  }
  if (!tls.client_ca_file.empty() && tls.cert_file.empty()) {
    return absl::InvalidArgumentError(
        "`grpc.tls.client_ca_file` (mTLS) needs TLS: set `grpc.tls.cert_file` and "
        "`grpc.tls.key_file` too");
  }
  // Every account has its own webhook path: the path tells which account a webhook is for.
  std::vector<std::pair<std::string, const std::string*>> paths = {
      {"webhook.path", &config.webhook.path}};
  for (const VendorAccountConfig& account : config.accounts) {
    paths.push_back(
        {absl::StrCat(AccountKey(account.name), ".webhook_path"), &account.webhook_path});
  }
  for (std::size_t i = 0; i < paths.size(); ++i) {
    for (std::size_t j = i + 1; j < paths.size(); ++j) {
      if (*paths[i].second != *paths[j].second) continue;
      return absl::InvalidArgumentError(absl::StrCat("`", paths[j].first, "` and `", paths[i].first,
                                                     "` are both ", *paths[i].second,
                                                     ": every account needs its own webhook path"));
    }
  }
  return CheckReconcileLease(config);
}

absl::Status CheckRequired(const GatewayConfig& config) {
  if (absl::Status consistent = CheckConsistent(config); !consistent.ok()) return consistent;
  if (config.sandbox) {
    // The embedded sandbox supplies the upstream and the web application address; a
    // configured upstream next to it is a mistake worth stopping for.
    if (!config.upstream_url.empty()) {
      return absl::InvalidArgumentError(
          "`upstream_url` and `sandbox` exclude each other: the sandbox is the upstream");
    }
    return absl::OkStatus();
  }
  for (const KeySpec& spec : Keys()) {
    if (spec.required && spec.show(config) == ordered_json("")) {
      return absl::InvalidArgumentError(absl::StrCat("missing required `", spec.key,
                                                     "`: set it in the config file, env ",
                                                     spec.Env(), " or flag --", spec.Flag()));
    }
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------------
// --help.
// ---------------------------------------------------------------------------------------------

// Word-wraps `text` to lines of at most `width` columns, each starting with `indent`.
std::string Wrap(absl::string_view text, absl::string_view indent, std::size_t width = 96) {
  std::string out;
  std::string line(indent);
  for (absl::string_view word : absl::StrSplit(text, ' ', absl::SkipEmpty())) {
    if (line.size() > indent.size() && line.size() + 1 + word.size() > width) {
      absl::StrAppend(&out, line, "\n");
      line = std::string(indent);
    }
    if (line.size() > indent.size()) line.push_back(' ');
    absl::StrAppend(&line, word);
  }
  absl::StrAppend(&out, line, "\n");
  return out;
}

std::string DefaultText(const KeySpec& spec) {
  if (spec.required) return "required (no default)";
  const ordered_json value = spec.show(GatewayConfig{});
  if (value.is_object() && value.empty()) return "default: none";
  if (value.is_string()) {
    const std::string text = value.get<std::string>();
    return text.empty() ? "default: none" : absl::StrCat("default: ", text);
  }
  if (value.is_array()) {
    // Comma-separated (the flag and env syntax), so --help can wrap it.
    std::vector<std::string> items;
    for (const auto& item : value)
      items.push_back(item.is_string() ? item.get<std::string>() : item.dump());
    return absl::StrCat("default: ", absl::StrJoin(items, ", "));
  }
  return absl::StrCat("default: ", value.dump());
}

}  // namespace

std::optional<std::string> GetEnvFromProcess(const std::string& name) {
  const char* value = std::getenv(name.c_str());
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

absl::StatusOr<GatewayConfig> LoadConfig(const std::vector<std::string>& args,
                                         const EnvLookup& getenv) {
  for (const std::string& arg : args) {
    if (arg == "--help" || arg == "-h") {
      absl::Status help = absl::CancelledError(UsageText());
      help.SetPayload(kHelpPayloadUrl, absl::Cord("1"));
      return help;
    }
    if (arg == "--version") {
      absl::Status version = absl::CancelledError("--version");
      version.SetPayload(kVersionPayloadUrl, absl::Cord("1"));
      return version;
    }
  }
  absl::StatusOr<ParsedArgs> parsed = ParseArgs(args);
  if (!parsed.ok()) return parsed.status();

  GatewayConfig config;  // The defaults.
  config.print_config = parsed->print_config;
  if (parsed->config_file.has_value()) {
    config.config_file = *parsed->config_file;
  } else if (std::optional<std::string> env = getenv(std::string(kConfigEnv));
             env && !env->empty()) {
    config.config_file = *env;
  }
  if (!config.config_file.empty()) {
    absl::Status status = ApplyFile(config.config_file, config);
    if (!status.ok()) return status;
  }
  for (const KeySpec& spec : Keys()) {
    const std::string env_name = spec.Env();
    if (std::optional<std::string> env = getenv(env_name); env && !env->empty()) {
      absl::Status status = ApplyText(spec, *env, absl::StrCat("from env ", env_name), config);
      if (!status.ok()) return status;
    }
  }
  for (const FlagValue& flag : parsed->settings) {
    absl::Status status =
        ApplyText(*flag.spec, flag.value, absl::StrCat("from flag --", flag.flag), config);
    if (!status.ok()) return status;
  }
  if (absl::Status status = CheckRequired(config); !status.ok()) return status;
  for (const SecretSpec& secret : Secrets()) {
    // In sandbox mode a secret nobody configured is fine: the sandbox's own key is used.
    if (config.sandbox && (config.*secret.file_path).empty()) {
      std::optional<std::string> env = getenv(secret.env);
      if (!env || env->empty()) continue;
    }
    absl::Status status = ResolveSecret(secret, getenv, config);
    if (!status.ok()) return status;
  }
  if (absl::Status status = ResolveAccountSecrets(config); !status.ok()) return status;
  if (absl::Status status = CheckWebhookKeys(config); !status.ok()) return status;
  return config;
}

bool IsVersionRequest(const absl::Status& status) {
  return status.code() == absl::StatusCode::kCancelled &&
         status.GetPayload(kVersionPayloadUrl).has_value();
}

bool IsHelpRequest(const absl::Status& status) {
  return status.code() == absl::StatusCode::kCancelled &&
         status.GetPayload(kHelpPayloadUrl).has_value();
}

std::string UsageText() {
  std::string text =
      "Usage: inspection-gateway [--flag=value | --flag value]...\n"
      "\n"
      "gRPC gateway in front of the vehicle-inspection vendor's REST/JSON API.\n"
      "\n";
  absl::StrAppend(
      &text,
      Wrap("Settings come from, lowest to highest precedence: built-in defaults, the config "
           "file (a JSON object; unknown keys are errors), environment variables, flags. Each "
           "setting has a config-file key (sections nest: upstream.timeout_ms is "
           "{\"upstream\": {\"timeout_ms\": ...}}), an env variable and a flag. Lists are given "
           "to flags and env as comma-separated items or as a JSON array.",
           ""),
      "\nGeneral flags:\n", "  --config=PATH\n",
      Wrap("JSON config file (env INSPECTION_CONFIG).", "      "), "  --print-config\n",
      Wrap("Print the effective configuration (secrets redacted) and exit.", "      "),
      "  -h, --help\n", Wrap("Print this help and exit.", "      "), "  --version\n",
      Wrap("Print the version, the git revision and the gRPC and protobuf versions, and exit.",
           "      "),
      "\nSettings:\n");
  for (const KeySpec& spec : Keys()) {
    absl::StrAppend(&text, "  --", spec.Flag(), "=", spec.placeholder, "\n",
                    Wrap(spec.help, "      "), "      key: ", spec.key, "\n      env: ", spec.Env(),
                    "\n", Wrap(DefaultText(spec), "      "));
  }
  absl::StrAppend(&text, "\nSecrets (never accepted in the config file or as flags):\n");
  for (const SecretSpec& secret : Secrets()) {
    absl::StrAppend(&text, "  ", secret.name, "\n",
                    Wrap(absl::StrCat("Read from the file named by ", secret.file_key,
                                      " or, when that is not set, from env ", secret.env, ".",
                                      secret.required ? " Required." : ""),
                         "      "));
  }
  absl::StrAppend(&text, "  accounts.NAME.api_key, .webhook_key, .webhook_previous_key\n",
                  Wrap("Read only from the files named by accounts.NAME.api_key_file (required), "
                       ".webhook_key_file and .webhook_previous_key_file.",
                       "      "));
  return text;
}

namespace {

// The password of a credential URL (event_log, idempotency_store: both redis:// or
// not credentials at all), split exactly as the Redis client splits it.
std::string UrlPassword(absl::string_view url) { return std::string(redis::RedisUrlPassword(url)); }

// `url` with its password shown as "[redacted]".
std::string RedactUrlPassword(const std::string& url) {
  const absl::string_view password = redis::RedisUrlPassword(url);
  if (password.empty()) return url;
  const size_t begin = static_cast<size_t>(password.data() - url.data());
  return absl::StrCat(url.substr(0, begin), "[redacted]", url.substr(begin + password.size()));
}

// The keys whose value is a URL that may carry a password.
bool IsCredentialUrlKey(const std::string& key) {
  return key == "event_log" || key == "idempotency_store" || key == "reconcile.ledger";
}

}  // namespace

std::string DumpConfig(const GatewayConfig& config, DumpFormat format) {
  ordered_json root = ordered_json::object();
  for (const KeySpec& spec : Keys()) {
    ordered_json* node = &root;
    for (absl::string_view part : absl::StrSplit(spec.key, '.')) {
      node = &(*node)[std::string(part)];
    }
    *node = spec.show(config);
    if (IsCredentialUrlKey(spec.key) && node->is_string()) {
      *node = RedactUrlPassword(node->get<std::string>());
    }
    for (const SecretSpec& secret : Secrets()) {
      if (secret.file_key == spec.key) {
        root[secret.name] = (config.*secret.value).empty() ? "[unset]" : "[redacted]";
      }
    }
  }
  return root.dump(format == DumpFormat::kMultiLine ? 2 : -1, ' ', /*ensure_ascii=*/false,
                   ordered_json::error_handler_t::replace);
}

std::ostream& operator<<(std::ostream& os, const GatewayConfig& config) {
  return os << DumpConfig(config, DumpFormat::kSingleLine);
}

void RegisterSecrets(const GatewayConfig& config, logging::Logger& logger) {
  for (const SecretSpec& secret : Secrets()) {
    logger.RegisterSecret((config.*secret.value).Reveal());
  }
  for (const VendorAccountConfig& account : config.accounts) {
    for (const AccountSecretSpec& secret : AccountSecrets()) {
      if (!(account.*secret.value).empty()) logger.RegisterSecret((account.*secret.value).Reveal());
    }
  }
  // Passwords inside the Redis URLs, as written and percent-decoded.
  for (const std::string* url : {&config.event_log, &config.idempotency_store}) {
    const std::string password = UrlPassword(*url);
    if (password.empty()) continue;
    logger.RegisterSecret(password);
    std::string decoded;
    for (size_t i = 0; i < password.size(); ++i) {
      if (password[i] == '%' && i + 2 < password.size() &&
          std::isxdigit(static_cast<unsigned char>(password[i + 1])) &&
          std::isxdigit(static_cast<unsigned char>(password[i + 2]))) {
        decoded += static_cast<char>(std::stoi(password.substr(i + 1, 2), nullptr, 16));
        i += 2;
      } else {
        decoded += password[i];
      }
    }
    if (decoded != password) logger.RegisterSecret(decoded);
  }
}

}  // namespace inspection::config
