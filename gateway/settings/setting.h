// How a component declares its settings: each key (its name, JSON type, bounds, help and
// unit) next to the options struct it fills, and the rules that tie two of its keys together.
// The loader (gateway/config) reads a key's value from the config file, env or a flag and
// calls `store` on the options it was handed; `show` gives the value back for --help's
// defaults, --print-config and the required-key check. Nothing else copies a setting.
//
//   settings::Schema<RetryOptions> RetrySchema() {
//     return {{settings::Duration<std::milli, RetryOptions>(
//         "section.wait_ms", [](auto& o) -> auto& { return o.backoff.base; }, 1, 60000, "MS",
//         "...")}};
//   }
//
// A component's schema is lifted into the whole process's options with Within(), which is
// how gateway/server composes every component's keys into one table.
//
// Error messages from `store` say what is wrong with the value, not which key it was: the
// loader adds the key and where the value came from. Keys that other code must name (an
// error message pointing an operator at a setting) are exported as constants from the
// declaring component's header, so that each key's name is written in one production file.

#ifndef INSPECTION_GATEWAY_SETTINGS_SETTING_H_
#define INSPECTION_GATEWAY_SETTINGS_SETTING_H_

#include <chrono>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <ratio>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>
#include "absl/strings/string_view.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "gateway/settings/value_checks.h"
#include "nlohmann/json.hpp"

namespace inspection::settings {

using json = nlohmann::json;
using ordered_json = nlohmann::ordered_json;

// The JSON type a key takes in the config file. Env and flag text is converted to it first,
// so one `store` validates a value whatever its source.
enum class ValueKind { kString, kInteger, kStringList, kBool, kObject };

inline constexpr std::int64_t kNoMax = std::numeric_limits<std::int64_t>::max();
inline constexpr std::int64_t kMaxInt = std::numeric_limits<int>::max();
inline constexpr std::int64_t kDayMs = 24 * 60 * 60 * 1000;

// One key of options `T`.
template <typename T>
struct Setting {
  std::string key;  // config-file key, sections joined by '.'
  ValueKind kind = ValueKind::kString;
  std::string placeholder;  // --flag=PLACEHOLDER in --help
  std::string help;         // a sentence or two for --help
  bool required = false;    // string keys only: the empty default means "not set"
  // A URL that may carry a password (redis://:password@host): --print-config shows the
  // password redacted, and the process registers it with the logger as a secret.
  bool url_may_hold_password = false;
  // What the key accepts, for a value of the wrong type or one that is no int64
  // ("an integer in 1..86400000"); empty when the type says it all.
  std::string accepts;
  // Validates `value` (already of `kind`) and stores it.
  std::function<absl::Status(const json& value, T& options)> store;
  // Instead of `store`, for an object whose errors name a key below `key`: the error is the
  // whole message, built with `origin` ("in /etc/gw.json", "from flag --x").
  std::function<absl::Status(const json& value, absl::string_view origin, T& options)> store_nested;
  // The current value, shaped as the config file has it.
  std::function<ordered_json(const T& options)> show;
};

// What a component declares: its keys, in --help order, the rules between them (each an
// error naming the keys, or OK), and the warnings (settings that work together but probably
// not as meant: a sentence naming the keys, or "").
template <typename T>
struct Schema {
  std::vector<Setting<T>> keys;
  std::vector<std::function<absl::Status(const T& options)>> rules;
  std::vector<std::function<std::string(const T& options)>> warnings;

  // Appends `part`'s keys, rules and warnings.
  Schema& Add(Schema part) {
    for (auto& key : part.keys) keys.push_back(std::move(key));
    for (auto& rule : part.rules) rules.push_back(std::move(rule));
    for (auto& warning : part.warnings) warnings.push_back(std::move(warning));
    return *this;
  }
};

// `inner`, a schema of the part of `Outer` that `part` ([](auto& o) -> auto& { return
// o.x; }) reaches, as a schema of `Outer`.
template <typename Outer, typename Inner, typename Part>
Schema<Outer> Within(Schema<Inner> inner, Part part) {
  Schema<Outer> out;
  for (Setting<Inner>& key : inner.keys) {
    Setting<Outer> lifted;
    lifted.key = std::move(key.key);
    lifted.kind = key.kind;
    lifted.placeholder = std::move(key.placeholder);
    lifted.help = std::move(key.help);
    lifted.required = key.required;
    lifted.url_may_hold_password = key.url_may_hold_password;
    lifted.accepts = std::move(key.accepts);
    if (key.store) {
      lifted.store = [store = std::move(key.store), part](const json& value, Outer& o) {
        return store(value, part(o));
      };
    }
    if (key.store_nested) {
      lifted.store_nested = [store = std::move(key.store_nested), part](
                                const json& value, absl::string_view origin, Outer& o) {
        return store(value, origin, part(o));
      };
    }
    lifted.show = [show = std::move(key.show), part](const Outer& o) { return show(part(o)); };
    out.keys.push_back(std::move(lifted));
  }
  for (auto& rule : inner.rules) {
    out.rules.push_back([rule = std::move(rule), part](const Outer& o) { return rule(part(o)); });
  }
  for (auto& warning : inner.warnings) {
    out.warnings.push_back(
        [warning = std::move(warning), part](const Outer& o) { return warning(part(o)); });
  }
  return out;
}

// `setting`, marked as a URL that may carry a password.
template <typename T>
Setting<T> UrlWithPassword(Setting<T> setting) {
  setting.url_may_hold_password = true;
  return setting;
}

// Checks and normalises a string value (the result is stored).
using StringCheck = absl::StatusOr<std::string> (*)(std::string);
// Checks one item of a list.
using ItemCheck = absl::Status (*)(absl::string_view);

template <typename T>
Setting<T> Key(std::string key, ValueKind kind, std::string placeholder, std::string help) {
  Setting<T> setting;
  setting.key = std::move(key);
  setting.kind = kind;
  setting.placeholder = std::move(placeholder);
  setting.help = std::move(help);
  return setting;
}

namespace internal {

// "in 1..10" or ">= 1" (max kNoMax).
std::string RangeText(std::int64_t min, std::int64_t max);

// The integer in `value` if it is within [min, max]; the error says the range.
absl::StatusOr<std::int64_t> IntegerIn(const json& value, std::int64_t min, std::int64_t max);

template <typename Access, typename T>
using FieldOf = std::decay_t<decltype(std::declval<Access>()(std::declval<T&>()))>;

template <typename D>
struct IsChrono : std::false_type {};
template <typename Rep, typename Period>
struct IsChrono<std::chrono::duration<Rep, Period>> : std::true_type {};

}  // namespace internal

// A string, checked (and normalised) by `check`.
template <typename T, typename Access>
Setting<T> String(std::string key, Access access, StringCheck check, std::string placeholder,
                  std::string help, bool required = false) {
  Setting<T> s =
      Key<T>(std::move(key), ValueKind::kString, std::move(placeholder), std::move(help));
  s.required = required;
  s.store = [access, check](const json& value, T& o) -> absl::Status {
    absl::StatusOr<std::string> checked = check(value.get<std::string>());
    if (!checked.ok()) return checked.status();
    access(o) = *std::move(checked);
    return absl::OkStatus();
  };
  s.show = [access](const T& o) { return ordered_json(access(o)); };
  return s;
}

// An integer in [min, max], stored into an integral (or floating) field.
template <typename T, typename Access>
Setting<T> Integer(std::string key, Access access, std::int64_t min, std::int64_t max,
                   std::string placeholder, std::string help) {
  Setting<T> s =
      Key<T>(std::move(key), ValueKind::kInteger, std::move(placeholder), std::move(help));
  s.accepts = absl::StrCat("an integer ", internal::RangeText(min, max));
  s.store = [access, min, max](const json& value, T& o) -> absl::Status {
    absl::StatusOr<std::int64_t> number = internal::IntegerIn(value, min, max);
    if (!number.ok()) return number.status();
    access(o) = static_cast<internal::FieldOf<Access, T>>(*number);
    return absl::OkStatus();
  };
  s.show = [access](const T& o) {
    if constexpr (std::is_floating_point_v<internal::FieldOf<Access, T>>) {
      return ordered_json(static_cast<std::int64_t>(std::llround(access(o))));
    } else {
      return ordered_json(access(o));
    }
  };
  return s;
}

// A duration counted in `Unit` (std::milli for a *_ms key, std::ratio<1> for *_seconds,
// std::ratio<3600> for *_hours), in [min, max] units, stored into an absl::Duration or a
// std::chrono::duration field.
template <typename Unit, typename T, typename Access>
Setting<T> Duration(std::string key, Access access, std::int64_t min, std::int64_t max,
                    std::string placeholder, std::string help) {
  using Units = std::chrono::duration<std::int64_t, Unit>;
  using Field = internal::FieldOf<Access, T>;
  Setting<T> s =
      Key<T>(std::move(key), ValueKind::kInteger, std::move(placeholder), std::move(help));
  s.accepts = absl::StrCat("an integer ", internal::RangeText(min, max));
  s.store = [access, min, max](const json& value, T& o) -> absl::Status {
    absl::StatusOr<std::int64_t> number = internal::IntegerIn(value, min, max);
    if (!number.ok()) return number.status();
    if constexpr (std::is_same_v<Field, absl::Duration>) {
      access(o) = absl::FromChrono(Units(*number));
    } else {
      static_assert(internal::IsChrono<Field>::value, "a duration field");
      access(o) = std::chrono::duration_cast<Field>(Units(*number));
    }
    return absl::OkStatus();
  };
  s.show = [access](const T& o) {
    const Field& field = access(o);
    if constexpr (std::is_same_v<Field, absl::Duration>) {
      return ordered_json(
          std::chrono::duration_cast<Units>(absl::ToChronoNanoseconds(field)).count());
    } else {
      return ordered_json(std::chrono::duration_cast<Units>(field).count());
    }
  };
  return s;
}

// A whole percentage in [min, max], stored as a ratio (50 -> 0.5) in a double field.
template <typename T, typename Access>
Setting<T> Percent(std::string key, Access access, std::int64_t min, std::int64_t max,
                   std::string help) {
  Setting<T> s = Key<T>(std::move(key), ValueKind::kInteger, "PERCENT", std::move(help));
  s.accepts = absl::StrCat("an integer ", internal::RangeText(min, max));
  s.store = [access, min, max](const json& value, T& o) -> absl::Status {
    absl::StatusOr<std::int64_t> number = internal::IntegerIn(value, min, max);
    if (!number.ok()) return number.status();
    access(o) = static_cast<double>(*number) / 100.0;
    return absl::OkStatus();
  };
  s.show = [access](const T& o) {
    return ordered_json(static_cast<std::int64_t>(std::lround(access(o) * 100)));
  };
  return s;
}

// One of a fixed set of names, stored as the value paired with it (an enum, or a bool).
template <typename T, typename Value, typename Access>
Setting<T> Enum(std::string key, Access access, std::vector<std::pair<std::string, Value>> names,
                std::string help) {
  std::vector<std::string> spellings;
  for (const auto& [name, value] : names) spellings.push_back(name);
  Setting<T> s =
      Key<T>(std::move(key), ValueKind::kString, absl::StrJoin(spellings, "|"), std::move(help));
  s.store = [access, names, spellings](const json& value, T& o) -> absl::Status {
    const std::string text = value.get<std::string>();
    for (const auto& [name, v] : names) {
      if (name == text) {
        access(o) = v;
        return absl::OkStatus();
      }
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "must be one of \"", absl::StrJoin(spellings, "\", \""), "\", got ", ShowValue(text)));
  };
  s.show = [access, names](const T& o) {
    for (const auto& [name, v] : names) {
      if (v == access(o)) return ordered_json(name);
    }
    return ordered_json(nullptr);
  };
  return s;
}

// A list of strings, each passing `check`; non-empty unless `may_be_empty`.
template <typename T, typename Access>
Setting<T> StringList(std::string key, Access access, ItemCheck check, std::string placeholder,
                      std::string help, bool may_be_empty = false) {
  Setting<T> s =
      Key<T>(std::move(key), ValueKind::kStringList, std::move(placeholder), std::move(help));
  s.store = [access, check, may_be_empty](const json& value, T& o) -> absl::Status {
    if (value.empty() && !may_be_empty) return absl::InvalidArgumentError("must not be empty");
    std::vector<std::string> items;
    for (std::size_t i = 0; i < value.size(); ++i) {
      std::string item = value[i].get<std::string>();
      if (absl::Status status = check(item); !status.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("item ", i, ": ", status.message()));
      }
      items.push_back(std::move(item));
    }
    access(o) = std::move(items);
    return absl::OkStatus();
  };
  s.show = [access](const T& o) { return ordered_json(access(o)); };
  return s;
}

// A boolean; as a flag, `--name` alone means true.
template <typename T, typename Access>
Setting<T> Bool(std::string key, Access access, std::string help) {
  Setting<T> s = Key<T>(std::move(key), ValueKind::kBool, "true|false", std::move(help));
  s.store = [access](const json& value, T& o) -> absl::Status {
    access(o) = value.get<bool>();
    return absl::OkStatus();
  };
  s.show = [access](const T& o) { return ordered_json(access(o)); };
  return s;
}

// A listen address HOST:PORT (port 0: the OS picks one) stored as its two parts, an IPv6
// host without its brackets.
template <typename T, typename HostAccess, typename PortAccess>
Setting<T> HostPort(std::string key, HostAccess host, PortAccess port, std::string help) {
  Setting<T> s = Key<T>(std::move(key), ValueKind::kString, "HOST:PORT", std::move(help));
  s.store = [host, port](const json& value, T& o) -> absl::Status {
    const std::string text = value.get<std::string>();
    if (absl::Status status = CheckHostPort(text); !status.ok()) return status;
    HostAndPort parts = SplitHostPort(text);
    host(o) = std::move(parts.host);
    port(o) = parts.port;
    return absl::OkStatus();
  };
  s.show = [host, port](const T& o) {
    const std::string& h = host(o);
    return ordered_json(h.find(':') == std::string::npos ? absl::StrCat(h, ":", port(o))
                                                         : absl::StrCat("[", h, "]:", port(o)));
  };
  return s;
}

// Common string checks (value_checks.h has the checks of addresses, URLs and pointers).
absl::StatusOr<std::string> NonEmpty(std::string value);
absl::StatusOr<std::string> AbsolutePath(std::string value);     // "/webhooks/v2"
absl::StatusOr<std::string> JsonPointer(std::string value);      // RFC 6901, below the root
absl::StatusOr<std::string> OptionalPath(std::string value);     // anything; "" = unset
absl::StatusOr<std::string> BaseUrl(std::string value);          // NormalizeBaseUrl
absl::StatusOr<std::string> OptionalBaseUrl(std::string value);  // "" or BaseUrl
absl::StatusOr<std::string> ListenAddress(std::string value);    // HOST:PORT
absl::Status JsonPointerItem(absl::string_view value);

}  // namespace inspection::settings

#endif  // INSPECTION_GATEWAY_SETTINGS_SETTING_H_
