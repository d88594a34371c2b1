#include "gateway/token_watch/token_watch_settings.h"

#include <ratio>

namespace inspection::token_watch {

using settings::kDayMs;

settings::Schema<TokenStatusPollerOptions> TokenStatusPollerSchema() {
  return {{
      settings::Duration<std::milli, TokenStatusPollerOptions>(
          "token_watch.interval_ms", [](auto& o) -> auto& { return o.interval; }, 100, kDayMs, "MS",
          "How often WatchTokenStatus polls each watched token at the vendor."),
      settings::Duration<std::milli, TokenStatusPollerOptions>(
          "token_watch.max_backoff_ms", [](auto& o) -> auto& { return o.max_backoff; }, 100, kDayMs,
          "MS", "Longest pause between polls of a token while the vendor fails."),
  }};
}

}  // namespace inspection::token_watch
