// The Redis backend of WorkLedger (adapters/eventlog/work_ledger.h). Each operation is one
// Lua script (atomic on the server), so replicas sharing the Redis never claim one item
// twice. An item is a field of `<stream>:work:items` holding its JSON (cjson in the script);
// `<stream>:work:started` scores items by start time, and `<stream>:work:due` scores
// unresolved items by how often they were polled and then by when they may next be claimed
// (the later of their next poll and their lease's end):
//
//   score = level * 2^42 + when_ms, level = min(attempts, 2047)
//
// so the due items of one level are one ZRANGEBYSCORE, in due order, and a claim reads the
// levels from 0 up: new work first (issue 31). 2^42 ms is 139 years of Unix time, and the
// largest score, 2047 * 2^42 + (2^42 - 1) < 2^53, is an exact double (a Redis score, a Lua
// number). Items polled more than 2047 times share the last level. Entries written before
// levels existed read as level 0 until their next claim or reschedule re-scores them.
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "adapters/eventlog/redis/redis_event_log.h"
#include "adapters/eventlog/work_ledger.h"
#include "adapters/redis/redis_connection.h"
#include "adapters/redis/redis_url.h"
#include "nlohmann/json.hpp"

namespace inspection::eventlog {
namespace {

constexpr size_t kMaxIdle = 4;

// The start of the claim, reschedule and count scripts: the `due` score (see above), as
// the exact decimal text Redis reads (Lua's own number-to-text keeps 14 digits only).
constexpr char kLevels[] = R"lua(
local SPAN = 4398046511104
local function at(n) return string.format('%.0f', n) end
local function score(attempts, when) return at(math.min(attempts, 2047) * SPAN + when) end
)lua";

std::string WithLevels(const char* script) { return absl::StrCat(kLevels, script); }

// KEYS: items, due, started. ARGV: field, item JSON, next, started.
constexpr char kRecordScript[] = R"lua(
local existing = redis.call('HGET', KEYS[1], ARGV[1])
if existing then
  -- Rewritten as it is: a write, replicated after the first record, so that the caller's
  -- WAIT covers the first record too (a retry after a record WAIT did not confirm).
  redis.call('HSET', KEYS[1], ARGV[1], existing)
  return 0
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
redis.call('ZADD', KEYS[3], ARGV[4], ARGV[1])
return 1
)lua";

// KEYS: items, due. ARGV: field.
constexpr char kResolveScript[] = R"lua(
local v = redis.call('HGET', KEYS[1], ARGV[1])
if not v then return 0 end
local item = cjson.decode(v)
item.resolved = 1
redis.call('HSET', KEYS[1], ARGV[1], cjson.encode(item))
redis.call('ZREM', KEYS[2], ARGV[1])
return 1
)lua";

// KEYS: items, due. ARGV: now, limit, owner, lease_ms. Returns the claimed items' JSON:
// the due ones of the lowest level first, each level in due order. One ZRANGEBYSCORE finds
// the next level that has items at all, so a claim costs two lookups per level in use.
constexpr char kClaimScript[] = R"lua(
local now = tonumber(ARGV[1])
local limit = tonumber(ARGV[2])
local out = {}
local level = 0
while #out < limit do
  local first = redis.call('ZRANGEBYSCORE', KEYS[2], at(level * SPAN), '+inf', 'WITHSCORES',
                           'LIMIT', 0, 1)
  if #first == 0 then break end
  level = math.floor(tonumber(first[2]) / SPAN)
  local fields = redis.call('ZRANGEBYSCORE', KEYS[2], at(level * SPAN), at(level * SPAN + now),
                            'LIMIT', 0, limit - #out)
  for _, f in ipairs(fields) do
    local v = redis.call('HGET', KEYS[1], f)
    if v then
      local item = cjson.decode(v)
      item.owner = ARGV[3]
      item.lease = now + tonumber(ARGV[4])
      local encoded = cjson.encode(item)
      redis.call('HSET', KEYS[1], f, encoded)
      redis.call('ZADD', KEYS[2], score(item.attempts, math.max(item.lease, item.next)), f)
      out[#out + 1] = encoded
    else
      redis.call('ZREM', KEYS[2], f)
    end
  end
  level = level + 1
end
return out
)lua";

// KEYS: items, due. ARGV: field, owner, next. 0 when the owner does not hold it.
constexpr char kRescheduleScript[] = R"lua(
local v = redis.call('HGET', KEYS[1], ARGV[1])
if not v then return 0 end
local item = cjson.decode(v)
if item.resolved == 1 or item.owner ~= ARGV[2] then return 0 end
item.attempts = item.attempts + 1
item.next = tonumber(ARGV[3])
item.owner = ''
item.lease = 0
redis.call('HSET', KEYS[1], ARGV[1], cjson.encode(item))
redis.call('ZADD', KEYS[2], score(item.attempts, item.next), ARGV[1])
return 1
)lua";

// KEYS: due. ARGV: due_by. How many items of any level are due by then.
constexpr char kCountScript[] = R"lua(
local due_by = math.min(tonumber(ARGV[1]), SPAN - 1)
local count = 0
local level = 0
while true do
  local first = redis.call('ZRANGEBYSCORE', KEYS[1], at(level * SPAN), '+inf', 'WITHSCORES',
                           'LIMIT', 0, 1)
  if #first == 0 then break end
  level = math.floor(tonumber(first[2]) / SPAN)
  count = count + redis.call('ZCOUNT', KEYS[1], at(level * SPAN), at(level * SPAN + due_by))
  level = level + 1
end
return count
)lua";

// KEYS: items, due, started. ARGV: started_before (exclusive), batch. Forgets at most
// `batch` of the items started before, the oldest first; returns how many went (fewer
// than `batch`: none are left).
constexpr char kTrimScript[] = R"lua(
local fields = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', '(' .. ARGV[1], 'LIMIT', 0,
                          tonumber(ARGV[2]))
if #fields > 0 then
  redis.call('HDEL', KEYS[1], unpack(fields))
  redis.call('ZREM', KEYS[2], unpack(fields))
  redis.call('ZREM', KEYS[3], unpack(fields))
end
return #fields
)lua";

// "<kind>:<account length>:<account><id>": unambiguous whatever the account and id hold.
std::string Field(WorkKind kind, const std::string& account, const std::string& id) {
  return absl::StrCat(static_cast<int>(kind), ":", account.size(), ":", account, id);
}

absl::StatusOr<WorkItem> ParseItem(const std::string& text) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return absl::InternalError("redis work ledger: a malformed item");
  WorkItem item;
  item.kind = static_cast<WorkKind>(j.value("kind", 1));
  item.account = j.value("account", "");
  item.id = j.value("id", "");
  item.started_at_ms = j.value("started", int64_t{0});
  item.next_poll_at_ms = j.value("next", int64_t{0});
  item.attempts = j.value("attempts", 0);
  return item;
}

class RedisWorkLedger final : public WorkLedger {
 public:
  RedisWorkLedger(const redis::RedisUrl& url, const redis::RedisOptions& options)
      : items_(url.stream + ":work:items"),
        due_(url.stream + ":work:due"),
        started_(url.stream + ":work:started"),
        pool_(url, options, kMaxIdle) {}

  absl::Status Ping() { return Integer({"PING"}, "ping").status(); }

  absl::Status Record(const WorkItem& item) override {
    nlohmann::json j = {{"kind", static_cast<int>(item.kind)},
                        {"account", item.account},
                        {"id", item.id},
                        {"started", item.started_at_ms},
                        {"next", item.next_poll_at_ms},
                        {"attempts", 0},
                        {"owner", ""},
                        {"lease", 0},
                        {"resolved", 0}};
    return Integer({"EVAL", kRecordScript, "3", items_, due_, started_,
                    Field(item.kind, item.account, item.id), j.dump(),
                    std::to_string(item.next_poll_at_ms), std::to_string(item.started_at_ms)},
                   "record", /*durable=*/true)
        .status();
  }

  absl::Status Resolve(WorkKind kind, const std::string& account, const std::string& id) override {
    return Integer({"EVAL", kResolveScript, "2", items_, due_, Field(kind, account, id)}, "resolve")
        .status();
  }

  absl::StatusOr<std::vector<WorkItem>> ClaimDue(int64_t now_ms, size_t limit,
                                                 const std::string& owner,
                                                 int64_t lease_ms) override {
    absl::StatusOr<redis::RedisReply> reply =
        Run({"EVAL", claim_script_, "2", items_, due_, std::to_string(now_ms),
             std::to_string(limit), owner, std::to_string(lease_ms)},
            "claim");
    if (!reply.ok()) return reply.status();
    if ((*reply)->type != REDIS_REPLY_ARRAY) {
      return absl::InternalError("redis work ledger: claim: unexpected reply");
    }
    std::vector<WorkItem> items;
    for (size_t i = 0; i < (*reply)->elements; ++i) {
      const redisReply* element = (*reply)->element[i];
      absl::StatusOr<WorkItem> item = ParseItem(std::string(element->str, element->len));
      if (!item.ok()) return item.status();
      items.push_back(*std::move(item));
    }
    return items;
  }

  absl::Status Reschedule(const WorkItem& item, const std::string& owner,
                          int64_t next_poll_at_ms) override {
    absl::StatusOr<int64_t> done =
        Integer({"EVAL", reschedule_script_, "2", items_, due_,
                 Field(item.kind, item.account, item.id), owner, std::to_string(next_poll_at_ms)},
                "reschedule");
    if (!done.ok()) return done.status();
    if (*done == 0) {
      return absl::FailedPreconditionError(
          "work ledger: the item is not held by this owner any more (its lease ended, or it "
          "was resolved)");
    }
    return absl::OkStatus();
  }

  absl::StatusOr<int64_t> CountPending(int64_t due_by_ms) override {
    return Integer({"EVAL", count_script_, "1", due_, std::to_string(due_by_ms)}, "count");
  }

  // One script per kRedisWorkLedgerTrimBatch items: the server serves the event log's
  // commands between them, where one script for everything (a week of work after an
  // outage of the trim) would hold the server for as long as it runs.
  absl::StatusOr<int64_t> Trim(int64_t started_before_ms) override {
    int64_t total = 0;
    while (true) {
      absl::StatusOr<int64_t> went =
          Integer({"EVAL", kTrimScript, "3", items_, due_, started_,
                   std::to_string(started_before_ms), std::to_string(kRedisWorkLedgerTrimBatch)},
                  "trim");
      if (!went.ok()) return went.status();
      total += *went;
      if (*went < kRedisWorkLedgerTrimBatch) return total;
    }
  }

 private:
  // `durable`: the write is one a caller acknowledges; it returns only once
  // RedisOptions::min_replicas_acked replicas have it (WAIT).
  absl::StatusOr<redis::RedisReply> Run(std::vector<std::string> args, const char* what,
                                        bool durable = false) {
    auto command = [&args,
                    what](redis::RedisConnection& connection) -> absl::StatusOr<redis::RedisReply> {
      absl::StatusOr<redis::RedisReply> reply = connection.Command(args);
      if (reply.ok() && (*reply)->type == REDIS_REPLY_ERROR) {
        return redis::RedisErrorReplyToStatus(**reply, absl::StrCat("redis work ledger: ", what));
      }
      return reply;
    };
    return durable ? pool_.RunAcknowledged<redis::RedisReply>(command)
                   : pool_.Run<redis::RedisReply>(command);
  }

  absl::StatusOr<int64_t> Integer(std::vector<std::string> args, const char* what,
                                  bool durable = false) {
    absl::StatusOr<redis::RedisReply> reply = Run(std::move(args), what, durable);
    if (!reply.ok()) return reply.status();
    if ((*reply)->type == REDIS_REPLY_INTEGER) return (*reply)->integer;
    if ((*reply)->type == REDIS_REPLY_STATUS) return 0;  // PING's +PONG
    return absl::InternalError(absl::StrCat("redis work ledger: ", what, ": unexpected reply"));
  }

  const std::string items_;
  const std::string due_;
  const std::string started_;
  const std::string claim_script_ = WithLevels(kClaimScript);
  const std::string reschedule_script_ = WithLevels(kRescheduleScript);
  const std::string count_script_ = WithLevels(kCountScript);
  redis::RedisConnectionPool pool_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<WorkLedger>> OpenRedisWorkLedgerWithOptions(
    const std::string& url, const redis::RedisOptions& options) {
  absl::StatusOr<redis::RedisUrl> parsed = redis::ParseRedisUrl(url);
  if (!parsed.ok()) return parsed.status();
  auto ledger = std::make_unique<RedisWorkLedger>(*parsed, options);
  if (absl::Status s = ledger->Ping(); !s.ok()) return s;
  return ledger;
}

absl::StatusOr<std::unique_ptr<WorkLedger>> OpenRedisWorkLedger(const std::string& url) {
  return OpenRedisWorkLedgerWithOptions(url, redis::RedisOptions());
}

}  // namespace inspection::eventlog
