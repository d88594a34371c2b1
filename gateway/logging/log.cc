#include "gateway/logging/log.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>

#include "absl/strings/str_cat.h"

namespace inspection::logging {
namespace {

// Writes the whole line with as few write(2) calls as the kernel allows (normally one), so
// lines from several processes sharing stderr stay whole too when shorter than PIPE_BUF.
void WriteToStderr(absl::string_view line) {
  const char* data = line.data();
  std::size_t left = line.size();
  while (left > 0) {
    const ssize_t n = ::write(STDERR_FILENO, data, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;  // Nowhere left to report a failing stderr.
    }
    data += n;
    left -= static_cast<std::size_t>(n);
  }
}

// Length of the valid UTF-8 sequence starting at text[i], or 0 if it is not valid
// (overlong forms, surrogates and code points above U+10FFFF are invalid).
std::size_t Utf8SequenceLength(absl::string_view text, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char c = byte(i);
  std::size_t len;
  unsigned char lo = 0x80, hi = 0xBF;  // Allowed range of the second byte.
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (i + len > text.size()) return 0;
  if (byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (std::size_t k = 2; k < len; ++k) {
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
  }
  return len;
}

// Appends `text` as a JSON string literal. Invalid UTF-8 bytes become U+FFFD so that every line
// is valid JSON whatever the caller passed.
void AppendJsonString(absl::string_view text, std::string& out) {
  out.push_back('"');
  for (std::size_t i = 0; i < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      switch (c) {
        case '"':
          out.append("\\\"");
          break;
        case '\\':
          out.append("\\\\");
          break;
        case '\n':
          out.append("\\n");
          break;
        case '\r':
          out.append("\\r");
          break;
        case '\t':
          out.append("\\t");
          break;
        default:
          if (c < 0x20 || c == 0x7F) {
            char buf[8];
            std::snprintf(buf, sizeof(buf), "\\u%04x", c);
            out.append(buf);
          } else {
            out.push_back(static_cast<char>(c));
          }
      }
      ++i;
      continue;
    }
    const std::size_t len = Utf8SequenceLength(text, i);
    if (len == 0) {
      out.append("\xEF\xBF\xBD");  // U+FFFD REPLACEMENT CHARACTER
      ++i;
    } else {
      out.append(text.data() + i, len);
      i += len;
    }
  }
  out.push_back('"');
}

absl::string_view OutputKey(const std::string& key, std::string& scratch) {
  if (key == "ts" || key == "level" || key == "msg") {
    scratch = absl::StrCat("_", key);
    return scratch;
  }
  return key;
}

}  // namespace

absl::string_view LevelName(Level level) {
  switch (level) {
    case Level::kDebug:
      return "debug";
    case Level::kInfo:
      return "info";
    case Level::kWarn:
      return "warn";
    case Level::kError:
      return "error";
    case Level::kAudit:
      return "audit";
  }
  return "unknown";
}

std::optional<Level> ParseLevel(absl::string_view name) {
  for (Level level : {Level::kDebug, Level::kInfo, Level::kWarn, Level::kError}) {
    if (name == LevelName(level)) return level;
  }
  return std::nullopt;
}

Logger::Sink Logger::StderrSink() { return WriteToStderr; }

Logger::Logger() : Logger(StderrSink()) {}

Logger::Logger(Sink sink, Clock clock)
    : clock_(clock ? std::move(clock) : Clock([] { return absl::Now(); })),
      sink_(std::move(sink)) {}

void Logger::SetLevel(Level level) {
  level_.store(static_cast<int>(level), std::memory_order_relaxed);
}

Level Logger::GetLevel() const {
  return static_cast<Level>(level_.load(std::memory_order_relaxed));
}

bool Logger::Enabled(Level level) const {
  return static_cast<int>(level) >= level_.load(std::memory_order_relaxed);
}

void Logger::SetSink(Sink sink) {
  absl::MutexLock lock(&sink_mu_);
  sink_ = std::move(sink);
}

void Logger::RegisterSecret(std::string value) {
  if (value.size() < kMinSecretLength) return;
  absl::MutexLock lock(&secrets_mu_);
  if (std::find(secrets_.begin(), secrets_.end(), value) != secrets_.end()) return;
  secrets_.push_back(std::move(value));
  std::stable_sort(secrets_.begin(), secrets_.end(),
                   [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
}

bool Logger::Redact(std::string& text) const {
  bool changed = false;
  for (const std::string& secret : secrets_) {
    std::size_t pos = text.find(secret);
    while (pos != std::string::npos) {
      text.replace(pos, secret.size(), kRedacted.data(), kRedacted.size());
      changed = true;
      pos = text.find(secret, pos + kRedacted.size());
    }
  }
  return changed;
}

void Logger::AppendRedactedString(absl::string_view text, std::string& out) const {
  // Redact the raw text, before escaping: a secret containing '"' or '\' would not appear
  // verbatim in the escaped form.
  for (const std::string& secret : secrets_) {
    if (text.find(secret) != absl::string_view::npos) {
      std::string copy(text);
      Redact(copy);
      AppendJsonString(copy, out);
      return;
    }
  }
  AppendJsonString(text, out);
}

void Logger::AppendRedactedNumber(const std::string& number, std::string& out) const {
  std::string copy = number;
  if (Redact(copy)) {
    AppendJsonString(copy, out);  // No longer a number; a string keeps the line valid JSON.
  } else {
    out.append(number);
  }
}

std::string Logger::FormatLine(Level level, absl::string_view msg,
                               absl::Span<const Field> fields) const {
  std::string line;
  line.reserve(96 + msg.size() + fields.size() * 24);
  line.append("{\"ts\":\"");
  line.append(absl::FormatTime("%Y-%m-%d%ET%H:%M:%E3SZ", clock_(), absl::UTCTimeZone()));
  line.append("\",\"level\":\"");
  absl::StrAppend(&line, LevelName(level));
  line.append("\",\"msg\":");

  absl::ReaderMutexLock lock(&secrets_mu_);
  AppendRedactedString(msg, line);
  std::string scratch;
  for (const Field& field : fields) {
    line.push_back(',');
    AppendRedactedString(OutputKey(field.key(), scratch), line);
    line.push_back(':');
    std::visit(
        [&](const auto& value) {
          using T = std::decay_t<decltype(value)>;
          if constexpr (std::is_same_v<T, std::string>) {
            AppendRedactedString(value, line);
          } else if constexpr (std::is_same_v<T, bool>) {
            line.append(value ? "true" : "false");
          } else if constexpr (std::is_same_v<T, double>) {
            if (std::isfinite(value)) {
              AppendRedactedNumber(absl::StrCat(value), line);
            } else {
              line.append("null");
            }
          } else {
            AppendRedactedNumber(absl::StrCat(value), line);
          }
        },
        field.value());
  }
  line.append("}\n");
  return line;
}

void Logger::Log(Level level, absl::string_view msg, absl::Span<const Field> fields) {
  if (!Enabled(level)) return;
  // Format outside the write lock: only the write itself is serialised.
  const std::string line = FormatLine(level, msg, fields);
  absl::MutexLock lock(&sink_mu_);
  if (sink_) sink_(line);
}

Logger& DefaultLogger() {
  static Logger* const logger = new Logger();
  return *logger;
}

void SetLevel(Level level) { DefaultLogger().SetLevel(level); }

void RegisterSecret(std::string value) { DefaultLogger().RegisterSecret(std::move(value)); }

void Log(Level level, absl::string_view msg, absl::Span<const Field> fields) {
  DefaultLogger().Log(level, msg, fields);
}

}  // namespace inspection::logging
