// Structured JSON logging: one JSON object per line.
//
//   {"ts":"2024-05-01T12:34:56.789Z","level":"info","msg":"rpc finished","rpc":"CreateToken",...}
//
// Usage:
//   logging::Log(logging::Level::kInfo, "rpc finished",
//                {{"rpc", "CreateToken"}, {"grpc_code", 0}, {"request_id", id}});
//   logging::Info("listening", {{"addr", addr}});
//
// Secrets: every value passed to `RegisterSecret()` (non-empty, at least
// `kMinSecretLength` bytes) is replaced by "[redacted]" wherever it occurs in a line's message,
// field keys and field values (numbers included), before the line is written. This is defence
// in depth: code should still never log a secret on purpose.
//
// Thread safety: every member of `Logger` and every free function here may be called
// concurrently. Each line reaches the sink in one call, under a mutex, so lines never interleave.

#ifndef INSPECTION_GATEWAY_LOGGING_LOG_H_
#define INSPECTION_GATEWAY_LOGGING_LOG_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"

namespace inspection::logging {

// kAudit is above every threshold: audit lines (writes through the gateway) are written
// whatever log.level says.
enum class Level : int { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3, kAudit = 4 };

// "debug", "info", "warn", "error".
absl::string_view LevelName(Level level);

// Inverse of LevelName (exact, lower case); nullopt for anything else.
std::optional<Level> ParseLevel(absl::string_view name);

// Secrets shorter than this are not registered: redacting e.g. "ab" would mangle every line.
inline constexpr std::size_t kMinSecretLength = 4;

// What replaces a secret in a line.
inline constexpr absl::string_view kRedacted = "[redacted]";

// One key/value pair of a log line. Implicitly constructible from a key and a string, integer,
// floating-point or bool value, so fields can be written as `{"grpc_code", 0}`.
// Fields named "ts", "level" or "msg" are written as "_ts", "_level", "_msg" so they never clash
// with the line's own keys. Non-finite doubles are written as null.
class Field {
 public:
  using Value = std::variant<std::string, std::int64_t, std::uint64_t, double, bool>;

  Field(std::string key, std::string value) : key_(std::move(key)), value_(std::move(value)) {}
  Field(std::string key, std::string_view value)
      : key_(std::move(key)), value_(std::string(value)) {}
  Field(std::string key, absl::string_view value)
      : key_(std::move(key)), value_(std::string(value)) {}
  Field(std::string key, const char* value)
      : key_(std::move(key)), value_(std::string(value == nullptr ? "" : value)) {}
  Field(std::string key, bool value) : key_(std::move(key)), value_(value) {}
  Field(std::string key, double value) : key_(std::move(key)), value_(value) {}
  template <typename T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool> &&
                                             !std::is_same_v<T, char>,
                                         int> = 0>
  Field(std::string key, T value) : key_(std::move(key)), value_(ToValue(value)) {}

  const std::string& key() const { return key_; }
  const Value& value() const { return value_; }

 private:
  template <typename T>
  static Value ToValue(T value) {
    if constexpr (std::is_signed_v<T>) {
      return static_cast<std::int64_t>(value);
    } else {
      return static_cast<std::uint64_t>(value);
    }
  }

  std::string key_;
  Value value_;
};

class Logger {
 public:
  // Receives one complete line, terminated by '\n'. Called with the logger's write mutex held,
  // so it must not log through the same logger.
  using Sink = std::function<void(absl::string_view line)>;
  using Clock = std::function<absl::Time()>;

  // Writes each line to stderr with one write(2) (retried only on a partial write).
  static Sink StderrSink();

  // StderrSink, level kInfo, real clock.
  Logger();
  // `clock` defaults to absl::Now when null.
  explicit Logger(Sink sink, Clock clock = nullptr);

  Logger(const Logger&) = delete;
  Logger& operator=(const Logger&) = delete;

  // Lines below `level` are dropped. Cheap to read on the hot path (one relaxed atomic load).
  void SetLevel(Level level);
  Level GetLevel() const;
  bool Enabled(Level level) const;

  // Replaces the sink (e.g. to capture the process logger's lines in a test).
  void SetSink(Sink sink);

  // From now on, `value` is replaced by "[redacted]" in every line. Values shorter than
  // kMinSecretLength and duplicates are ignored.
  void RegisterSecret(std::string value);

  void Log(Level level, absl::string_view msg, absl::Span<const Field> fields = {});

  void Debug(absl::string_view msg, absl::Span<const Field> fields = {}) {
    Log(Level::kDebug, msg, fields);
  }
  void Info(absl::string_view msg, absl::Span<const Field> fields = {}) {
    Log(Level::kInfo, msg, fields);
  }
  void Warn(absl::string_view msg, absl::Span<const Field> fields = {}) {
    Log(Level::kWarn, msg, fields);
  }
  void Error(absl::string_view msg, absl::Span<const Field> fields = {}) {
    Log(Level::kError, msg, fields);
  }

  // The line `Log` would write (with '\n'), regardless of the level filter.
  std::string FormatLine(Level level, absl::string_view msg, absl::Span<const Field> fields) const;

 private:
  // Appends `text` as a JSON string literal, secrets redacted.
  void AppendRedactedString(absl::string_view text, std::string& out) const
      ABSL_SHARED_LOCKS_REQUIRED(secrets_mu_);
  // Appends `number` (already JSON text); a number containing a secret becomes a string.
  void AppendRedactedNumber(const std::string& number, std::string& out) const
      ABSL_SHARED_LOCKS_REQUIRED(secrets_mu_);
  bool Redact(std::string& text) const ABSL_SHARED_LOCKS_REQUIRED(secrets_mu_);

  std::atomic<int> level_{static_cast<int>(Level::kInfo)};
  const Clock clock_;

  mutable absl::Mutex secrets_mu_;
  // Longest first, so a secret that contains another is replaced whole.
  std::vector<std::string> secrets_ ABSL_GUARDED_BY(secrets_mu_);

  absl::Mutex sink_mu_;
  Sink sink_ ABSL_GUARDED_BY(sink_mu_);
};

// The process-wide logger (stderr). Never destroyed, so it is safe to use during shutdown.
Logger& DefaultLogger();

// Shorthands for DefaultLogger().
void SetLevel(Level level);
void RegisterSecret(std::string value);
void Log(Level level, absl::string_view msg, absl::Span<const Field> fields = {});
inline void Debug(absl::string_view msg, absl::Span<const Field> fields = {}) {
  Log(Level::kDebug, msg, fields);
}
inline void Info(absl::string_view msg, absl::Span<const Field> fields = {}) {
  Log(Level::kInfo, msg, fields);
}
inline void Warn(absl::string_view msg, absl::Span<const Field> fields = {}) {
  Log(Level::kWarn, msg, fields);
}
inline void Error(absl::string_view msg, absl::Span<const Field> fields = {}) {
  Log(Level::kError, msg, fields);
}

}  // namespace inspection::logging

#endif  // INSPECTION_GATEWAY_LOGGING_LOG_H_
