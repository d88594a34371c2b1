#include "gateway/config/config.h"

#include <unistd.h>  // environ

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <set>
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
#include "absl/strings/strip.h"
#include "adapters/redis/redis_url.h"
#include "adapters/vendor/event_mapper.h"
#include "gateway/server/server_settings.h"
#include "gateway/settings/bounded_file.h"
#include "gateway/settings/setting.h"
#include "gateway/settings/value_checks.h"
#include "gateway/upstream/vendor_client_settings.h"
#include "gateway/webhooks/webhook_receiver_settings.h"
#include "nlohmann/json.hpp"

namespace inspection::config {

namespace {

using json = nlohmann::json;
using ordered_json = nlohmann::ordered_json;

constexpr absl::string_view kEnvPrefix = "INSPECTION_";
constexpr absl::string_view kConfigEnv = "INSPECTION_CONFIG";
constexpr absl::string_view kHelpPayloadUrl = "inspection.config/help-requested";
constexpr absl::string_view kVersionPayloadUrl = "inspection.config/version-requested";
using settings::kDayMs;

// ---------------------------------------------------------------------------------------------
// The schema: one KeySpec per setting.
// ---------------------------------------------------------------------------------------------

using settings::ClosestMatch;
using settings::ValueKind;

// upstream.timeout_ms -> upstream-timeout-ms (the flag, without "--").
std::string FlagName(absl::string_view key) {
  std::string flag(key);
  for (char& c : flag) {
    if (c == '.' || c == '_') c = '-';
  }
  return flag;
}

// upstream.timeout_ms -> INSPECTION_UPSTREAM_TIMEOUT_MS.
std::string EnvName(absl::string_view key) {
  std::string env = absl::StrCat(kEnvPrefix, key);
  for (char& c : env) c = c == '.' ? '_' : absl::ascii_toupper(c);
  return env;
}

// One key of the whole configuration: the process's own (below) and the server's
// (server::ServerSchema(), each component's), lifted into GatewayConfig.
using KeySpec = settings::Setting<GatewayConfig>;
using settings::StringCheck;

// One of the spec's event names: the vendor_string of an EventName value (the one place
// they are spelled, vendor::SpecEventNames).
absl::Status EventNameCheck(absl::string_view name) {
  const std::vector<std::string>& events = vendor::SpecEventNames();
  if (std::find(events.begin(), events.end(), name) != events.end()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("unknown event ", settings::ShowValue(name),
                                                 ": the events are ", absl::StrJoin(events, ", ")));
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
      {"upstream_url", &VendorAccountConfig::upstream_url, settings::BaseUrl, /*required=*/true},
      {"api_key_file", &VendorAccountConfig::api_key_file, settings::NonEmpty, /*required=*/true},
      {"webhook_key_file", &VendorAccountConfig::webhook_key_file, settings::NonEmpty,
       /*required=*/false},
      {"webhook_previous_key_file", &VendorAccountConfig::webhook_previous_key_file,
       settings::NonEmpty,
       /*required=*/false},
      {"webhook_path", &VendorAccountConfig::webhook_path, settings::AbsolutePath,
       /*required=*/false},
      {"register_webhook", &VendorAccountConfig::register_webhook, settings::OptionalBaseUrl,
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

// `name` as a part of a key in a message: as it is when made of [A-Za-z0-9._-], else quoted
// with anything unusual escaped (names are not secrets, but may hold anything); cut after
// settings::kMaxShownNameBytes either way.
std::string KeyPart(absl::string_view name) { return settings::ShowName(name); }

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
    if (absl::Status text = settings::CheckText(value.get_ref<const std::string&>()); !text.ok()) {
      return InvalidAt(sub_key, origin, text.message());
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
  KeySpec spec = settings::Key<GatewayConfig>(
      "accounts", ValueKind::kObject, "JSON",
      "Named vendor accounts besides the default one, as a JSON object {\"NAME\": {...}, ...}; "
      "a call selects one with gRPC metadata x-vendor-account: NAME (the default account "
      "otherwise). NAME is 1..64 of A-Za-z0-9._- (not default). Each account has upstream_url "
      "and api_key_file (required), webhook_key_file, webhook_previous_key_file, webhook_path "
      "(default /webhooks/v2/NAME) and register_webhook. A later source replaces the whole "
      "object; an account or sub-key written twice is an error.");
  spec.store_nested = StoreAccounts;
  spec.show = ShowAccounts;
  return spec;
}

// The process's own keys: the sandbox, the default account's key files, the named accounts,
// logging, shutdown, reflection and the start-up webhook registration.
std::vector<KeySpec> ProcessKeys() {
  auto field = [](auto member) {
    return [member](auto& c) -> auto& { return c.*member; };
  };
  return {
      settings::Bool<GatewayConfig>(
          "sandbox", field(&GatewayConfig::sandbox),
          "Run the vendor sandbox in-process and use it as the upstream: upstream_url, "
          "webapp_url and the API key are then not needed (and upstream_url must not be set)."),
      settings::String<GatewayConfig>(
          "api_key_file", field(&GatewayConfig::api_key_file), settings::NonEmpty, "PATH",
          "File holding the vendor API key (trailing whitespace trimmed). When not set, the key "
          "is read from env INSPECTION_API_KEY."),
      AccountsKey(),
      settings::String<GatewayConfig>(
          "webhook_key_file", field(&GatewayConfig::webhook_key_file), settings::NonEmpty, "PATH",
          "File holding the key the vendor sends in x-api-key with webhooks. When not set, "
          "read from env INSPECTION_WEBHOOK_KEY; without a key the receiver is not started."),
      settings::String<GatewayConfig>(
          "webhook_previous_key_file", field(&GatewayConfig::webhook_previous_key_file),
          settings::NonEmpty, "PATH",
          "File holding the previous webhook key, still accepted during a rotation (else env "
          "INSPECTION_WEBHOOK_PREVIOUS_KEY). Only beside a current webhook key."),
      settings::String<GatewayConfig>(
          "redis.sentinel_password_file", field(&GatewayConfig::redis_sentinel_password_file),
          settings::NonEmpty, "PATH",
          "File holding the password of the Redis Sentinels of a redis+sentinel:// URL (else "
          "env INSPECTION_REDIS_SENTINEL_PASSWORD; none when neither is set). The data "
          "servers' password is the URL's."),
      settings::Enum<GatewayConfig, Toggle>(
          "grpc.reflection", field(&GatewayConfig::reflection),
          {{"auto", Toggle::kAuto}, {"on", Toggle::kOn}, {"off", Toggle::kOff}},
          "gRPC server reflection (grpcurl list/describe), decided by grpc.authz_policy_file like "
          "every RPC: auto is on with --sandbox and off otherwise."),
      settings::Enum<GatewayConfig, logging::Level>("log.level", field(&GatewayConfig::log_level),
                                                    {{"debug", logging::Level::kDebug},
                                                     {"info", logging::Level::kInfo},
                                                     {"warn", logging::Level::kWarn},
                                                     {"error", logging::Level::kError}},
                                                    "Lowest level of the log lines written."),
      settings::Duration<std::milli, GatewayConfig>(
          "shutdown.grace_ms", field(&GatewayConfig::shutdown_grace), 0, kDayMs, "MS",
          "How long in-flight RPCs may run on after SIGTERM."),
      settings::String<GatewayConfig>(
          "register_webhook", field(&GatewayConfig::register_webhook), settings::OptionalBaseUrl,
          "URL",
          "The gateway's public webhook URL: when set, it is registered at the vendor on "
          "start-up with the webhook key, and register_webhook_events are enabled. Needs a "
          "webhook key and webhook.mode webhook."),
      settings::StringList<GatewayConfig>(
          "register_webhook_events", field(&GatewayConfig::register_webhook_events), EventNameCheck,
          "NAME,...",
          absl::StrCat("Events enabled at the vendor when register_webhook is set, each one of: ",
                       absl::StrJoin(vendor::SpecEventNames(), ", "), ".")),
  };
}

// Every setting and the rules between them: the process's, then the server's (each
// component's, in the order server::ServerSchema() composes them). Rows are in --help order;
// the dump follows it too.
const settings::Schema<GatewayConfig>& Schema() {
  static const settings::Schema<GatewayConfig>* const schema = [] {
    auto* all = new settings::Schema<GatewayConfig>;
    all->keys = ProcessKeys();
    all->Add(settings::Within<GatewayConfig>(
        server::ServerSchema(), [](auto& c) -> auto& { return c.server; }));
    return all;
  }();
  return *schema;
}

const std::vector<KeySpec>& Keys() { return Schema().keys; }
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
      {"redis.sentinel_password", "redis.sentinel_password_file",
       "INSPECTION_REDIS_SENTINEL_PASSWORD", /*required=*/false,
       &GatewayConfig::redis_sentinel_password_file, &GatewayConfig::redis_sentinel_password},
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
    if (FlagName(spec.key) == flag) return &spec;
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

// Every string in `value` (a string, or a list's items) passes settings::CheckText.
absl::Status CheckStrings(const json& value) {
  if (value.is_string()) return settings::CheckText(value.get_ref<const std::string&>());
  if (!value.is_array()) return absl::OkStatus();
  for (std::size_t i = 0; i < value.size(); ++i) {
    if (!value[i].is_string()) continue;
    if (absl::Status text = settings::CheckText(value[i].get_ref<const std::string&>());
        !text.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("item ", i, ": ", text.message()));
    }
  }
  return absl::OkStatus();
}

// `origin` says where the value came from: "in /etc/gw.json", "from flag --x", "from env X".
absl::Status Apply(const KeySpec& spec, const json& value, absl::string_view origin,
                   GatewayConfig& config) {
  if (!HasKind(value, spec.kind)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "invalid `", spec.key, "` ", origin, ": expected ", KindName(spec.kind), ", got ",
        DescribeType(value), spec.accepts.empty() ? "" : "; accepted: ", spec.accepts));
  }
  if (spec.store_nested) return spec.store_nested(value, origin, config);
  if (absl::Status text = CheckStrings(value); !text.ok()) {
    return InvalidAt(spec.key, origin, text.message());
  }
  absl::Status status = spec.store(value, config);
  if (!status.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid `", spec.key, "` ", origin, ": ", status.message()));
  }
  return absl::OkStatus();
}

json ParseJson(const std::string& text, std::string& duplicate, std::string& error);

// The message for a name that appears twice in one JSON object: `key` is its full key.
std::string AppearsTwice(absl::string_view key) {
  return absl::StrCat("`", key,
                      "` appears twice in one object (JSON would keep the last one silently): "
                      "write each key once");
}

// Converts env or flag text to the key's JSON type.
absl::StatusOr<json> FromText(const KeySpec& spec, const std::string& text) {
  const ValueKind kind = spec.kind;
  switch (kind) {
    case ValueKind::kString:
      return json(text);
    case ValueKind::kInteger: {
      std::int64_t number;
      if (!absl::SimpleAtoi(text, &number)) {
        // Not a number, or one beyond int64 (which no key accepts).
        return absl::InvalidArgumentError(
            absl::StrCat("expected integer, got ", settings::ShowValue(text),
                         spec.accepts.empty() ? "" : "; accepted: ", spec.accepts));
      }
      return json(number);
    }
    case ValueKind::kBool: {
      if (text == "true" || text == "1") return json(true);
      if (text == "false" || text == "0") return json(false);
      return absl::InvalidArgumentError(
          absl::StrCat("expected true or false, got ", settings::ShowValue(text)));
    }
    case ValueKind::kStringList: {
      const absl::string_view trimmed = absl::StripAsciiWhitespace(text);
      if (absl::StartsWith(trimmed, "[")) {
        std::string duplicate;
        std::string error;
        json list = ParseJson(std::string(trimmed), duplicate, error);
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
      std::string duplicate;
      std::string error;
      const json object = ParseJson(text, duplicate, error);
      if (object.is_discarded()) {
        return absl::InvalidArgumentError(absl::StrCat("expected a JSON object (", error, ")"));
      }
      if (!object.is_object()) {
        return absl::InvalidArgumentError(
            absl::StrCat("expected a JSON object, got ", object.type_name()));
      }
      if (!duplicate.empty()) {
        return absl::InvalidArgumentError(AppearsTwice(absl::StrCat(spec.key, ".", duplicate)));
      }
      return object;
    }
  }
  return absl::InternalError("unknown value kind");
}

absl::Status ApplyText(const KeySpec& spec, const std::string& text, absl::string_view origin,
                       GatewayConfig& config) {
  absl::StatusOr<json> value = FromText(spec, text);
  if (!value.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid `", spec.key, "` ", origin, ": ", value.status().message()));
  }
  return Apply(spec, *value, origin, config);
}

// ---------------------------------------------------------------------------------------------
// The config file.
// ---------------------------------------------------------------------------------------------

using settings::ByteBound;
using settings::IsTooLarge;
using settings::kMaxConfigFileBytes;
using settings::kMaxSecretFileBytes;

absl::StatusOr<std::string> ReadFile(const std::string& path, std::size_t max_bytes) {
  return settings::ReadBoundedFile(path, max_bytes);
}

// The deepest nesting of arrays and objects a JSON document (the config file, a JSON-valued
// flag or env variable) may have. The deepest real config is 4 (accounts.NAME.caller_limits
// ...); a bound keeps `[[[[...` (4 MiB of it) from building millions of nested values.
// Refused as soon as the parser reaches it, before anything deeper is built. In the README
// ("Configuration").
constexpr std::size_t kMaxJsonDepth = 64;

// What nlohmann's parse error was, as fixed text: its message holds an excerpt of the input
// ("last read: '...'"), which may be a secret, so none of it is used but the error's kind.
std::string ParseErrorKind(const std::string& what) {
  // "[json.exception.parse_error.101] parse error at line 1, column 3: syntax error while
  // parsing object - ..."; the contexts are nlohmann's fixed names.
  const std::string head = what.substr(0, what.find("; last read"));
  if (head.find("unexpected end of input") != std::string::npos) return "unexpected end of input";
  for (const char* context :
       {"object separator", "object key", "object", "array", "value", "literal"}) {
    if (head.find(absl::StrCat("while parsing ", context, " -")) != std::string::npos) {
      return absl::StrCat("syntax error while parsing ", context);
    }
  }
  return "syntax error";
}

// "at line 3, column 5 (byte 27)": where byte `position` (1-based, as nlohmann counts) is.
std::string PositionIn(const std::string& text, std::size_t position) {
  const std::size_t end = std::min(position > 0 ? position - 1 : 0, text.size());
  std::size_t line = 1;
  std::size_t line_start = 0;
  for (std::size_t i = 0; i < end; ++i) {
    if (text[i] == '\n') {
      ++line;
      line_start = i + 1;
    }
  }
  const std::size_t column = position > line_start ? position - line_start : 1;
  return absl::StrCat("at line ", line, ", column ", column, " (byte ", position, ")");
}

// Builds the document (as json::parse does) in one pass, finding the first name that appears
// twice in one object (json::parse keeps the last value silently) and refusing nesting past
// kMaxJsonDepth. Linear in the text: nlohmann 3.11's callback parser rescans the parent object
// each time an object ends (40,000 sibling objects took 5 s).
class CheckedDomBuilder : public nlohmann::json_sax<json> {
 public:
  bool null() override { return Add(json(nullptr)); }
  bool boolean(bool value) override { return Add(json(value)); }
  bool number_integer(number_integer_t value) override { return Add(json(value)); }
  bool number_unsigned(number_unsigned_t value) override { return Add(json(value)); }
  bool number_float(number_float_t value, const string_t&) override { return Add(json(value)); }
  bool string(string_t& value) override { return Add(json(std::move(value))); }
  bool binary(binary_t& value) override { return Add(json(std::move(value))); }
  bool start_object(std::size_t) override { return Open(json::object()); }
  bool start_array(std::size_t) override { return Open(json::array()); }
  bool end_object() override { return Close(); }
  bool end_array() override { return Close(); }
  bool key(string_t& name) override {
    Frame& frame = frames_.back();
    if (frame.value->contains(name) && duplicate.empty()) {
      std::vector<std::string> parts;
      for (std::size_t i = 1; i < frames_.size(); ++i) {
        parts.push_back(frames_[i].in_array ? "[]" : KeyPart(frames_[i].name));
      }
      parts.push_back(KeyPart(name));
      duplicate = absl::StrJoin(parts, ".");
    }
    frame.key = std::move(name);
    return true;
  }
  bool parse_error(std::size_t position, const std::string&,
                   const nlohmann::detail::exception& ex) override {
    error = absl::StrCat(ParseErrorKind(ex.what()), " ", PositionIn(text_, position));
    return false;
  }

  explicit CheckedDomBuilder(const std::string& text) : text_(text) {}

  json root;
  std::string duplicate;  // as ParseJson's
  std::string error;      // why the text was refused; empty if it was not

 private:
  struct Frame {
    json* value;
    bool in_array = false;  // the parent is an array
    std::string name;       // the parent object's name for it
    std::string key;        // an object's current name
  };

  // Where the next value goes: the root, the end of an array, or an object's current name.
  json* Place(json value) {
    if (frames_.empty()) {
      root = std::move(value);
      return &root;
    }
    Frame& parent = frames_.back();
    if (parent.value->is_array()) {
      parent.value->push_back(std::move(value));
      return &parent.value->back();
    }
    json& slot = (*parent.value)[parent.key];
    slot = std::move(value);
    return &slot;
  }
  bool Add(json value) {
    Place(std::move(value));
    return true;
  }
  bool Open(json value) {
    if (frames_.size() >= kMaxJsonDepth) {
      error = absl::StrCat("nested deeper than ", kMaxJsonDepth,
                           " levels of arrays and objects (the most allowed)");
      return false;
    }
    Frame frame;
    if (!frames_.empty()) {
      frame.in_array = frames_.back().value->is_array();
      frame.name = frames_.back().key;
    }
    frame.value = Place(std::move(value));
    frames_.push_back(std::move(frame));
    return true;
  }
  bool Close() {
    frames_.pop_back();
    return true;
  }

  const std::string& text_;
  std::vector<Frame> frames_;
};

// json::parse, also finding the first name that appears twice in one object. `duplicate` is
// its key below the document, each part as KeyPart shows it (upstream.timeout_ms; an array's
// element is "[]"), or empty. Returns a discarded value if the text is not JSON or is nested
// too deep; `error` then says why and where (without any of the text).
json ParseJson(const std::string& text, std::string& duplicate, std::string& error) {
  CheckedDomBuilder builder(text);
  const bool ok = json::sax_parse(text, &builder);
  duplicate = builder.duplicate;
  error = builder.error;
  if (!ok) {
    if (error.empty()) error = "syntax error";
    return json(json::value_t::discarded);
  }
  return std::move(builder.root);
}

// `applied`: the keys set so far, so that a key written both as a dotted name and within
// its section (upstream.timeout_ms at the top and timeout_ms in upstream) is refused.
absl::Status ApplyObject(const json& object, const std::string& prefix, const std::string& path,
                         std::set<std::string>& applied, GatewayConfig& config) {
  const std::string origin = absl::StrCat("in ", settings::ShowPath(path));
  for (const auto& [name, value] : object.items()) {
    const std::string key = prefix.empty() ? name : absl::StrCat(prefix, ".", name);
    // As a message shows it: the known prefix, then the name escaped and cut.
    const std::string shown =
        prefix.empty() ? KeyPart(name) : absl::StrCat(prefix, ".", KeyPart(name));
    if (const KeySpec* spec = FindKey(key); spec != nullptr) {
      if (!applied.insert(key).second) {
        return absl::InvalidArgumentError(absl::StrCat(
            "duplicate key `", key, "` ", origin,
            ": it appears twice (as a dotted name and within its section): write each key once"));
      }
      absl::Status status = Apply(*spec, value, origin, config);
      if (!status.ok()) return status;
    } else if (IsSection(key)) {
      if (!value.is_object()) {
        return absl::InvalidArgumentError(absl::StrCat("invalid `", key, "` ", origin,
                                                       ": expected object (a section), got ",
                                                       DescribeType(value)));
      }
      absl::Status status = ApplyObject(value, key, path, applied, config);
      if (!status.ok()) return status;
    } else {
      std::string message = absl::StrCat("unknown key `", shown, "` ", origin);
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
  const std::string shown = settings::ShowPath(path);
  absl::StatusOr<std::string> text = ReadFile(path, kMaxConfigFileBytes);
  if (!text.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot read config file ", shown, ": ", text.status().message(),
                     IsTooLarge(text.status()) ? ", the most a config file may hold" : ""));
  }
  std::string duplicate;
  std::string error;
  const json document = ParseJson(*text, duplicate, error);
  if (document.is_discarded()) {
    return absl::InvalidArgumentError(
        absl::StrCat("config file ", shown, " is not valid JSON: ", error));
  }
  if (!document.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "config file ", shown, " must hold a JSON object, got ", document.type_name()));
  }
  if (!duplicate.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("duplicate key `", duplicate, "` in ", shown,
                                                   ": it appears twice in one object (JSON would "
                                                   "keep the last one silently): write each key "
                                                   "once"));
  }
  std::set<std::string> applied;
  return ApplyObject(document, "", path, applied, config);
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

// What of an unknown flag's text may be echoed: the letters, digits and '-' it starts
// with. Whatever follows (after '=', a space, a ':') may be a secret passed by mistake
// ("--api-key sk_live_..." as one argument): it is never shown.
struct FlagEcho {
  std::string name;        // the echoable prefix
  bool truncated = false;  // something followed it
  bool has_space = false;  // ... a space: a flag and its value in one argument?
};
FlagEcho EchoableFlag(absl::string_view text) {
  FlagEcho echo;
  size_t n = 0;
  while (n < text.size() && n < 64 && (absl::ascii_isalnum(text[n]) || text[n] == '-')) ++n;
  echo.name = std::string(text.substr(0, n));
  echo.truncated = n < text.size();
  echo.has_space = text.find(' ') != absl::string_view::npos;
  return echo;
}

absl::Status UnknownFlag(const std::string& raw_name) {
  const FlagEcho echo = EchoableFlag(raw_name);
  const std::string& name = echo.name;
  std::string message = absl::StrCat("unknown flag --", name, echo.truncated ? "..." : "");
  if (echo.has_space) {
    absl::StrAppend(&message,
                    " (a flag and its value in one argument? write --name=value, or the "
                    "value as the next argument; the rest is not shown)");
  }
  for (const SecretSpec& secret : Secrets()) {
    if (name == FlagName(secret.name)) {
      absl::StrAppend(&message, ": secrets are not accepted on the command line; use --",
                      FlagName(secret.file_key), " or env ", secret.env);
      return absl::InvalidArgumentError(message);
    }
  }
  std::vector<std::string> flags = {"config", "print-config", "help", "version"};
  for (const KeySpec& spec : Keys()) flags.push_back(FlagName(spec.key));
  if (std::string match = ClosestMatch(name, flags); !match.empty()) {
    absl::StrAppend(&message, " (did you mean --", match, "?)");
  }
  return absl::InvalidArgumentError(message);
}

// An argument that is not a flag, right after a boolean flag given without '=' (which takes
// no separate value): `--cache-enabled false` means --cache-enabled=true and a stray
// "false". Says how to write it; the argument itself is never shown (it may be a secret).
absl::Status ValueAfterBooleanFlag(std::size_t index, absl::string_view flag) {
  return absl::InvalidArgumentError(
      absl::StrCat("unexpected argument #", index + 1, " after --", flag,
                   ": a boolean flag takes no separate "
                   "value; write --",
                   flag, "=false or --", flag, "=true (--", flag, " alone means true)"));
}

absl::StatusOr<ParsedArgs> ParseArgs(const std::vector<std::string>& args) {
  ParsedArgs parsed;
  std::string bare_boolean;  // the previous argument: a boolean flag without '='
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    const std::string after_boolean = std::exchange(bare_boolean, "");
    if (!absl::StartsWith(arg, "-") && !after_boolean.empty()) {
      return ValueAfterBooleanFlag(i, after_boolean);
    }
    if (!absl::StartsWith(arg, "--") || arg.size() == 2) {
      if (absl::StartsWith(arg, "-")) {
        // Only its name is echoed (as for UnknownFlag): "-api-key=SECRET" shows "-api-key...".
        const FlagEcho echo = EchoableFlag(absl::string_view(arg).substr(1));
        return absl::InvalidArgumentError(
            absl::StrCat("unknown flag -", echo.name, echo.truncated ? "..." : "",
                         " (flags are --name=value or --name value)"));
      }
      return absl::InvalidArgumentError(absl::StrCat(
          "unexpected argument #", i + 1, ": not a flag (flags are --name=value or --name value)"));
    }
    const std::size_t eq = arg.find('=');
    const std::string name = arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    std::optional<std::string> value;
    if (eq != std::string::npos) value = arg.substr(eq + 1);

    if (name == "print-config") {
      if (!value) bare_boolean = name;
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
    if (!value && spec != nullptr && spec->kind == ValueKind::kBool) {
      value = "true";
      bare_boolean = name;
    }
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
  // A value without a '/' may be the secret itself, given by mistake where its file's path
  // goes (INSPECTION_WEBHOOK_KEY_FILE=whsec_...): it is not shown.
  const std::string source =
      absl::StrCat("`", file_key, "` ",
                   path.find('/') != std::string::npos
                       ? settings::ShowPath(path)
                       : "(the value is not shown: it does not look like a path; is it the "
                         "secret itself?)");
  absl::StatusOr<std::string> contents = ReadFile(path, kMaxSecretFileBytes);
  if (!contents.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot read ", source, ": ", contents.status().message(),
                     IsTooLarge(contents.status()) ? ", the most a secret file may hold" : ""));
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

// What the webhook keys are for, once read: a previous key only beside a current one (the
// receiver starts with the current key; a previous one alone would be dropped silently),
// and a registration (register_webhook, an account's) only where webhooks are received: a
// webhook key to check them by, and webhook.mode webhook.
absl::Status CheckWebhookUse(const GatewayConfig& config) {
  // In sandbox mode the sandbox supplies the default webhook key when none is configured.
  const bool has_key = !config.webhook_key.empty() || config.sandbox;
  if (!config.webhook_previous_key.empty() && !has_key) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a previous webhook key (",
        config.webhook_previous_key_file.empty() ? "env INSPECTION_WEBHOOK_PREVIOUS_KEY"
                                                 : "`webhook_previous_key_file`",
        ") needs the current one (`webhook_key_file` or env INSPECTION_WEBHOOK_KEY): the "
        "receiver starts with the current key, and the previous one alone would be ignored"));
  }
  struct Registration {
    std::string key;       // "register_webhook", "accounts.a.register_webhook"
    std::string key_file;  // where its webhook key comes from
    bool has_key;
  };
  std::vector<Registration> registrations;
  if (!config.register_webhook.empty()) {
    registrations.push_back(
        {"register_webhook", "`webhook_key_file` or env INSPECTION_WEBHOOK_KEY", has_key});
  }
  for (const VendorAccountConfig& account : config.accounts) {
    if (account.register_webhook.empty()) continue;
    const std::string key = AccountKey(account.name);
    registrations.push_back({absl::StrCat(key, ".register_webhook"),
                             absl::StrCat("`", key, ".webhook_key_file`"),
                             !account.webhook_key.empty()});
  }
  for (const Registration& registration : registrations) {
    if (config.server.webhook_less) {
      return absl::InvalidArgumentError(absl::StrCat(
          "`", registration.key,
          "` is set but `webhook.mode` is poll: the vendor would send webhooks to a receiver "
          "that does not run; unset one of them"));
    }
    if (!registration.has_key) {
      return absl::InvalidArgumentError(absl::StrCat(
          "`", registration.key, "` is set but there is no webhook key (", registration.key_file,
          "): the vendor would be told to send webhooks that no receiver checks and accepts"));
    }
  }
  return absl::OkStatus();
}

// No two listeners (gRPC, admin, and the webhook receiver when it is started: a webhook key,
// webhook.mode webhook) on the same port of overlapping addresses: the second would fail
// to bind at start-up, after the first had started.
absl::Status CheckListeners(const GatewayConfig& config) {
  struct Listener {
    absl::string_view key;
    std::string host;  // IPv6 without brackets
    int port;
  };
  const settings::HostAndPort grpc = settings::SplitHostPort(config.server.grpc_addr);
  std::vector<Listener> listeners = {
      {"grpc_addr", grpc.host, grpc.port},
      {"admin_addr", config.server.admin_host, config.server.admin_port}};
  if ((!config.webhook_key.empty() || config.sandbox) && !config.server.webhook_less) {
    listeners.push_back({"webhook_addr", config.server.webhook.host, config.server.webhook.port});
  }
  const auto shown = [](const Listener& l) {
    return l.host.find(':') == std::string::npos ? absl::StrCat(l.host, ":", l.port)
                                                 : absl::StrCat("[", l.host, "]:", l.port);
  };
  for (std::size_t i = 0; i < listeners.size(); ++i) {
    for (std::size_t j = i + 1; j < listeners.size(); ++j) {
      const Listener& a = listeners[i];
      const Listener& b = listeners[j];
      if (a.port <= 0 || a.port != b.port || !settings::ListenHostsOverlap(a.host, b.host)) {
        continue;
      }
      return absl::InvalidArgumentError(absl::StrCat(
          "`", a.key, "` (", shown(a), ") and `", b.key, "` (", shown(b),
          ") would listen on the same port of the same address (0.0.0.0 and [::] take the "
          "port on every address; localhost is 127.0.0.1 and [::1]): give each listener its "
          "own port (port 0 picks a free one)"));
    }
  }
  return absl::OkStatus();
}

// Rules that tie two keys together: each component's (its schema's rules), then the webhook
// paths of the accounts.
absl::Status CheckConsistent(const GatewayConfig& config) {
  for (const auto& rule : Schema().rules) {
    if (absl::Status status = rule(config); !status.ok()) return status;
  }
  // Every account has its own webhook path: the path tells which account a webhook is for.
  std::vector<std::pair<std::string, const std::string*>> paths = {
      {webhooks::kPathKey, &config.server.webhook.path}};
  for (const VendorAccountConfig& account : config.accounts) {
    paths.push_back(
        {absl::StrCat(AccountKey(account.name), ".webhook_path"), &account.webhook_path});
  }
  for (std::size_t i = 0; i < paths.size(); ++i) {
    for (std::size_t j = i + 1; j < paths.size(); ++j) {
      if (*paths[i].second != *paths[j].second) continue;
      return absl::InvalidArgumentError(absl::StrCat(
          "`", paths[j].first, "` and `", paths[i].first, "` are both ",
          settings::ShowPath(*paths[i].second), ": every account needs its own webhook path"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckRequired(const GatewayConfig& config) {
  if (absl::Status consistent = CheckConsistent(config); !consistent.ok()) return consistent;
  if (config.sandbox) {
    // The embedded sandbox supplies the upstream and the web application address; a
    // configured upstream next to it is a mistake worth stopping for.
    if (!config.server.vendor.base_url.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("`", upstream::kUpstreamUrlKey,
                                                     "` and `sandbox` exclude each other: the "
                                                     "sandbox is the upstream"));
    }
    return absl::OkStatus();
  }
  for (const KeySpec& spec : Keys()) {
    if (spec.required && spec.show(config) == ordered_json("")) {
      return absl::InvalidArgumentError(
          absl::StrCat("missing required `", spec.key, "`: set it in the config file, env ",
                       EnvName(spec.key), " or flag --", FlagName(spec.key)));
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

// Kubernetes gives a pod the address of each Service in its namespace as env variables
// (enableServiceLinks, on by default): a Service named inspection-sandbox sets
// INSPECTION_SANDBOX_SERVICE_HOST, _SERVICE_PORT[_NAME], _PORT=tcp://IP:PORT and
// _PORT_8080_TCP[_PROTO|_PORT|_ADDR]. They are not settings, nor typos of one.
bool IsKubernetesServiceLink(absl::string_view name, absl::string_view value) {
  if (absl::EndsWith(name, "_SERVICE_HOST") || absl::EndsWith(name, "_SERVICE_PORT") ||
      absl::StrContains(name, "_SERVICE_PORT_")) {
    return true;
  }
  const bool address = absl::StartsWith(value, "tcp://") || absl::StartsWith(value, "udp://") ||
                       absl::StartsWith(value, "sctp://");
  if (absl::EndsWith(name, "_PORT") && address) return true;
  // _PORT_<number>_<protocol>, then nothing or _PROTO, _PORT, _ADDR.
  for (std::size_t at = name.find("_PORT_"); at != absl::string_view::npos;
       at = name.find("_PORT_", at + 1)) {
    absl::string_view rest = name.substr(at + 6);
    const std::size_t digits = rest.find_first_not_of("0123456789");
    if (digits == 0 || digits == absl::string_view::npos || rest[digits] != '_') continue;
    rest.remove_prefix(digits + 1);
    for (absl::string_view protocol : {"TCP", "UDP", "SCTP"}) {
      if (!absl::ConsumePrefix(&rest, protocol)) continue;
      if (rest.empty() || rest == "_PROTO" || rest == "_PORT" || rest == "_ADDR") return true;
    }
  }
  return false;
}

// The INSPECTION_GATEWAY_* names the repository's own tooling uses, which are not settings:
// scripts/check-helm.sh's binary (and CTest's environment for it), and the CMake options and
// compile definitions (BUILD_TESTS, FUZZ, SANITIZE, VERSION, REVISION), harmless if exported.
// Any other INSPECTION_GATEWAY_* is checked like every INSPECTION_* name, so that a setting
// written with the project's name (INSPECTION_GATEWAY_LOG_LEVEL) is not ignored silently.
constexpr absl::string_view kToolingEnvNames[] = {
    "INSPECTION_GATEWAY_BIN",      "INSPECTION_GATEWAY_BUILD_TESTS", "INSPECTION_GATEWAY_FUZZ",
    "INSPECTION_GATEWAY_SANITIZE", "INSPECTION_GATEWAY_REVISION",    "INSPECTION_GATEWAY_VERSION"};

bool IsToolingEnvName(absl::string_view name) {
  return std::find(std::begin(kToolingEnvNames), std::end(kToolingEnvNames), name) !=
         std::end(kToolingEnvNames);
}

// The known name an unknown one most likely meant: INSPECTION_GATEWAY_X means INSPECTION_X
// when that is known, else the closest known name (or "").
std::string MeantEnvName(const std::string& name, const std::vector<std::string>& known) {
  constexpr absl::string_view kGatewayPrefix = "INSPECTION_GATEWAY_";
  if (absl::StartsWith(name, kGatewayPrefix)) {
    const std::string without =
        absl::StrCat(kEnvPrefix, absl::string_view(name).substr(kGatewayPrefix.size()));
    if (std::find(known.begin(), known.end(), without) != known.end()) return without;
  }
  return ClosestMatch(name, known);
}

// Every INSPECTION_* variable in `names` (set, not empty) is a setting's, a secret's or
// INSPECTION_CONFIG: a misspelled one would be ignored otherwise. Not checked: Kubernetes's
// service links and the repository's tooling names (kToolingEnvNames). Values are never
// shown.
absl::Status CheckEnvNames(const std::vector<std::string>& names, const EnvLookup& getenv) {
  std::vector<std::string> known = {std::string(kConfigEnv)};
  for (const KeySpec& spec : Keys()) known.push_back(EnvName(spec.key));
  for (const SecretSpec& secret : Secrets()) known.push_back(secret.env);
  std::vector<std::string> unknown;
  for (const std::string& name : names) {
    if (!absl::StartsWith(name, kEnvPrefix) || IsToolingEnvName(name) ||
        std::find(known.begin(), known.end(), name) != known.end()) {
      continue;
    }
    const std::optional<std::string> value = getenv(name);
    if (!value || value->empty() || IsKubernetesServiceLink(name, *value)) continue;
    unknown.push_back(name);
  }
  if (unknown.empty()) return absl::OkStatus();
  std::sort(unknown.begin(), unknown.end());
  std::string message =
      absl::StrCat("unknown environment variable ", settings::ShowName(unknown.front()));
  if (std::string match = MeantEnvName(unknown.front(), known); !match.empty()) {
    absl::StrAppend(&message, " (did you mean ", match, "?)");
  }
  absl::StrAppend(&message,
                  ": an INSPECTION_* variable must set a setting (--help lists them); its value "
                  "is not shown");
  if (unknown.size() > 1) absl::StrAppend(&message, " (", unknown.size() - 1, " more unknown)");
  return absl::InvalidArgumentError(message);
}

// The config file named by --config or else by env INSPECTION_CONFIG, if any, applied.
absl::Status ApplyConfigFile(const ParsedArgs& parsed, const EnvLookup& getenv,
                             GatewayConfig& config) {
  std::string origin = "flag --config";
  if (parsed.config_file.has_value()) {
    config.config_file = *parsed.config_file;
  } else if (std::optional<std::string> env = getenv(std::string(kConfigEnv));
             env && !env->empty()) {
    config.config_file = *env;
    origin = absl::StrCat("env ", kConfigEnv);
  }
  if (config.config_file.empty()) return absl::OkStatus();
  if (absl::Status text = settings::CheckText(config.config_file); !text.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid config file path from ", origin, ": ", text.message()));
  }
  return ApplyFile(config.config_file, config);
}

// Every setting from its sources, checked; the secrets read. `env_names` may be empty (no
// check of unknown INSPECTION_* names).
absl::StatusOr<GatewayConfig> LoadSettings(const std::vector<std::string>& args,
                                           const EnvLookup& getenv, const EnvNames& env_names) {
  absl::StatusOr<ParsedArgs> parsed = ParseArgs(args);
  if (!parsed.ok()) return parsed.status();
  if (env_names) {
    if (absl::Status status = CheckEnvNames(env_names(), getenv); !status.ok()) return status;
  }

  GatewayConfig config;  // The defaults.
  config.print_config = parsed->print_config;
  if (absl::Status status = ApplyConfigFile(*parsed, getenv, config); !status.ok()) return status;
  for (const KeySpec& spec : Keys()) {
    const std::string env_name = EnvName(spec.key);
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
  if (absl::Status status = CheckWebhookUse(config); !status.ok()) return status;
  if (absl::Status status = CheckListeners(config); !status.ok()) return status;
  for (const auto& warning : Schema().warnings) {
    if (std::string text = warning(config); !text.empty()) config.warnings.push_back(text);
  }
  return config;
}

// The longest error message LoadConfig returns. Each part of a message is bounded where it
// is written (settings::ShowName, ShowValue, ShowPath); this bounds the whole whatever a
// later message adds.
constexpr std::size_t kMaxMessageBytes = 2048;

absl::Status Bounded(const absl::Status& status) {
  const absl::string_view message = status.message();
  if (message.size() <= kMaxMessageBytes) return status;
  std::size_t cut = kMaxMessageBytes;
  while (cut > 0 && (static_cast<unsigned char>(message[cut]) & 0xC0) == 0x80) --cut;
  return absl::Status(status.code(),
                      absl::StrCat(message.substr(0, cut), "\xe2\x80\xa6 (message cut)"));
}

}  // namespace

std::optional<std::string> GetEnvFromProcess(const std::string& name) {
  const char* value = std::getenv(name.c_str());
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

std::vector<std::string> GetEnvNamesFromProcess() {
  std::vector<std::string> names;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const absl::string_view text(*entry);
    names.emplace_back(text.substr(0, text.find('=')));
  }
  return names;
}

absl::StatusOr<GatewayConfig> LoadConfig(const std::vector<std::string>& args,
                                         const EnvLookup& getenv) {
  return LoadConfig(args, getenv, nullptr);
}

absl::StatusOr<GatewayConfig> LoadConfig(const std::vector<std::string>& args,
                                         const EnvLookup& getenv, const EnvNames& env_names) {
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
  absl::StatusOr<GatewayConfig> config = LoadSettings(args, getenv, env_names);
  if (!config.ok()) return Bounded(config.status());
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
           "file (a JSON object; unknown keys and keys written twice are errors), environment "
           "variables, flags. Each "
           "setting has a config-file key (sections nest: upstream.timeout_ms is "
           "{\"upstream\": {\"timeout_ms\": ...}}), an env variable and a flag. Lists are given "
           "to flags and env as comma-separated items or as a JSON array. String values must be "
           "valid UTF-8 without control characters. Any other INSPECTION_* env variable is an "
           "error (not Kubernetes's service links, nor the build's INSPECTION_GATEWAY_BIN, "
           "_BUILD_TESTS, _FUZZ, _SANITIZE, _VERSION, _REVISION). A "
           "boolean flag takes no separate value: --cache-enabled=false, not --cache-enabled "
           "false.",
           ""),
      "\nGeneral flags:\n", "  --config=PATH\n",
      Wrap(absl::StrCat("JSON config file (env INSPECTION_CONFIG), a regular file of at most ",
                        ByteBound(kMaxConfigFileBytes), ", nested at most ", kMaxJsonDepth,
                        " levels deep."),
           "      "),
      "  --print-config\n",
      Wrap("Print the effective configuration (secrets redacted) and exit.", "      "),
      "  -h, --help\n", Wrap("Print this help and exit.", "      "), "  --version\n",
      Wrap("Print the version, the git revision and the gRPC and protobuf versions, and exit.",
           "      "),
      "\nSettings:\n");
  for (const KeySpec& spec : Keys()) {
    absl::StrAppend(&text, "  --", FlagName(spec.key), "=", spec.placeholder, "\n",
                    Wrap(spec.help, "      "), "      key: ", spec.key,
                    "\n      env: ", EnvName(spec.key), "\n", Wrap(DefaultText(spec), "      "));
  }
  absl::StrAppend(&text, "\nSecrets (never accepted in the config file or as flags):\n");
  for (const SecretSpec& secret : Secrets()) {
    absl::StrAppend(
        &text, "  ", secret.name, "\n",
        Wrap(absl::StrCat("Read from the file named by ", secret.file_key, " (at most ",
                          ByteBound(kMaxSecretFileBytes), ") or, when that is not set, from env ",
                          secret.env, ".", secret.required ? " Required." : ""),
             "      "));
  }
  absl::StrAppend(&text, "  accounts.NAME.api_key, .webhook_key, .webhook_previous_key\n",
                  Wrap(absl::StrCat("Read only from the files named by "
                                    "accounts.NAME.api_key_file (required), .webhook_key_file "
                                    "and .webhook_previous_key_file (each at most ",
                                    ByteBound(kMaxSecretFileBytes), ")."),
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

}  // namespace

std::string DumpConfig(const GatewayConfig& config, DumpFormat format) {
  ordered_json root = ordered_json::object();
  for (const KeySpec& spec : Keys()) {
    ordered_json* node = &root;
    for (absl::string_view part : absl::StrSplit(spec.key, '.')) {
      node = &(*node)[std::string(part)];
    }
    *node = spec.show(config);
    if (spec.url_may_hold_password && node->is_string()) {
      *node = RedactUrlPassword(node->get<std::string>());
    }
    for (const SecretSpec& secret : Secrets()) {
      if (secret.file_key == spec.key) {
        // Beside its file key: "redis.sentinel_password" in the "redis" section.
        ordered_json* at = &root;
        for (absl::string_view part : absl::StrSplit(secret.name, '.')) {
          at = &(*at)[std::string(part)];
        }
        *at = (config.*secret.value).empty() ? "[unset]" : "[redacted]";
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
  for (const KeySpec& spec : Keys()) {
    if (!spec.url_may_hold_password) continue;
    const ordered_json url = spec.show(config);
    if (!url.is_string()) continue;
    const std::string password = UrlPassword(url.get<std::string>());
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
