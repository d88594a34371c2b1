#include <cstdint>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "adapters/eventlog/event_log.h"

namespace inspection::eventlog {
namespace {

// A cursor as numbers that sort the way the log does: SQLite {seq, 0}, Redis {ms, seq}.
struct Position {
  int kind;  // 1 SQLite, 2 Redis
  uint64_t major;
  uint64_t minor;
};

absl::StatusOr<Position> Parse(const std::string& cursor) {
  if (cursor.size() > 2 && cursor[0] == 's' && cursor[1] == ':') {
    uint64_t seq = 0;
    if (absl::SimpleAtoi(absl::string_view(cursor).substr(2), &seq)) return Position{1, seq, 0};
  }
  const size_t dash = cursor.find('-');
  if (dash != std::string::npos && dash > 0) {
    uint64_t ms = 0, seq = 0;
    if (absl::SimpleAtoi(absl::string_view(cursor).substr(0, dash), &ms) &&
        absl::SimpleAtoi(absl::string_view(cursor).substr(dash + 1), &seq)) {
      return Position{2, ms, seq};
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat("malformed event cursor (", cursor.size(), " characters)"));
}

}  // namespace

absl::StatusOr<int> CompareCursors(const std::string& a, const std::string& b) {
  if (a.empty() || b.empty()) return a.empty() ? (b.empty() ? 0 : -1) : 1;
  absl::StatusOr<Position> pa = Parse(a);
  if (!pa.ok()) return pa.status();
  absl::StatusOr<Position> pb = Parse(b);
  if (!pb.ok()) return pb.status();
  if (pa->kind != pb->kind) {
    return absl::InvalidArgumentError("cursors of different event log backends");
  }
  if (pa->major != pb->major) return pa->major < pb->major ? -1 : 1;
  if (pa->minor != pb->minor) return pa->minor < pb->minor ? -1 : 1;
  return 0;
}

}  // namespace inspection::eventlog
