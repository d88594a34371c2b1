#include "adapters/eventlog/redis/redis_event_log.h"

#include <hiredis/hiredis.h>
#include <openssl/evp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "adapters/redis/redis_connection.h"
#include "adapters/redis/redis_url.h"

namespace inspection::eventlog {

// The Redis client is shared infrastructure (adapters/redis): the idempotency store uses it too.
using redis::ParseRedisUrl;
using redis::RedisConnection;
using redis::RedisConnectionPool;
using redis::RedisErrorReplyToStatus;
using redis::RedisReply;
using redis::RedisUrl;
namespace {

// KEYS[1] stream, KEYS[2] dedupe key; ARGV[1] dedupe window (ms; also the key's TTL),
// ARGV[2..9] the fields. `account` is written even when it is "" (the default account);
// entries of versions before it existed lack the field, which reads as "" as well.
// A dedupe key whose entry is gone (trimmed by hand, not by ApplyRetention) is ignored:
// "duplicate" must mean "an event with this content_hash is retained". So is one whose
// entry was received a whole window or more before this one (received_at_ms, as the
// SQLite backend compares them): a byte-identical delivery after the window is new.
constexpr char kAppendScript[] = R"lua(
local existing = redis.call('GET', KEYS[2])
if existing then
  local entries = redis.call('XRANGE', KEYS[1], existing, existing)
  if #entries > 0 then
    local fields = entries[1][2]
    local received = nil
    for i = 1, #fields, 2 do
      if fields[i] == 'received_at_ms' then received = tonumber(fields[i + 1]) end
    end
    if not received or tonumber(ARGV[8]) - received < tonumber(ARGV[1]) then
      -- A write (replicated after the first copy's XADD), so that the caller's WAIT covers
      -- the first copy too: a duplicate is acknowledged only once that copy is replicated.
      redis.call('PEXPIRE', KEYS[2], ARGV[1])
      return {existing, 1}
    end
  end
end
local id = redis.call('XADD', KEYS[1], '*', 'event_name', ARGV[2], 'inspection_id', ARGV[3],
  'token_id', ARGV[4], 'vehicle_id', ARGV[5], 'payload', ARGV[6], 'content_hash', ARGV[7],
  'received_at_ms', ARGV[8], 'account', ARGV[9])
redis.call('SET', KEYS[2], id, 'PX', ARGV[1])
return {id, 0}
)lua";

// KEYS[1] stream, KEYS[2] removed_up_to; ARGV[1] max_events ("" for no limit), ARGV[2]
// age cutoff (events received before it are too old; "" for no limit), ARGV[3] batch
// size, ARGV[4] dedupe key prefix.
// Removes a prefix of at most one batch: the entries beyond max_events, then the
// oldest ones while they are too old. Returns {removed, 1 if more may be due}.
// XTRIM MAXLEN (exact) removes exactly that prefix since nothing runs in between.
// KEYS[1]: the watermark of entries confirmed on the replicas; ARGV[1]: an entry ID
// ("<ms>-<seq>") just confirmed. Raises the watermark to it unless it is already there or
// beyond.
constexpr char kAdvanceScript[] = R"lua(
local function parse(id)
  local ms, seq = string.match(id or '', '^(%d+)-(%d+)$')
  return tonumber(ms), tonumber(seq)
end
local new_ms, new_seq = parse(ARGV[1])
if not new_ms then return redis.error_reply('ERR bad entry ID') end
local cur_ms, cur_seq = parse(redis.call('GET', KEYS[1]))
if cur_ms and (cur_ms > new_ms or (cur_ms == new_ms and cur_seq >= new_seq)) then return 0 end
redis.call('SET', KEYS[1], ARGV[1])
return 1
)lua";

constexpr char kRetentionScript[] = R"lua(
local length = redis.call('XLEN', KEYS[1])
local max_events = tonumber(ARGV[1])
local excess = 0
if max_events then excess = length - max_events end
local cutoff = tonumber(ARGV[2])
local batch = tonumber(ARGV[3])
local entries = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', batch)
local removed = 0
local last = nil
for _, entry in ipairs(entries) do
  local fields = entry[2]
  local hash = nil
  local received = nil
  for i = 1, #fields, 2 do
    if fields[i] == 'content_hash' then
      hash = fields[i + 1]
    elseif fields[i] == 'received_at_ms' then
      received = tonumber(fields[i + 1])
    end
  end
  -- An entry without a readable time cannot be served properly anyway: it ages out.
  local too_old = cutoff ~= nil and (received == nil or received < cutoff)
  if removed >= excess and not too_old then break end
  if hash then
    local key = ARGV[4] .. hash
    if redis.call('GET', key) == entry[1] then redis.call('DEL', key) end
  end
  last = entry[1]
  removed = removed + 1
end
if removed > 0 then
  redis.call('XTRIM', KEYS[1], 'MAXLEN', '=', length - removed)
  redis.call('SET', KEYS[2], last)
end
local more = 0
if removed == #entries and #entries == batch then more = 1 end
return {removed, more}
)lua";

constexpr int64_t kProbeTtlMs = 10000;

struct LuaScript {
  explicit LuaScript(const char* text) : source(text) {
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int length = 0;
    EVP_Digest(source.data(), source.size(), digest, &length, EVP_sha1(), nullptr);
    static constexpr char kHex[] = "0123456789abcdef";
    for (unsigned int i = 0; i < length; ++i) {
      sha1.push_back(kHex[digest[i] >> 4]);
      sha1.push_back(kHex[digest[i] & 0xF]);
    }
  }
  std::string source;
  std::string sha1;  // what EVALSHA names it by (Redis uses the SHA-1 of the source)
};

// A stream entry ID, "<ms>-<seq>", each part an unsigned 64-bit decimal.
struct StreamId {
  uint64_t ms = 0;
  uint64_t seq = 0;

  std::string ToString() const { return absl::StrCat(ms, "-", seq); }
  bool IsMax() const {
    return ms == std::numeric_limits<uint64_t>::max() &&
           seq == std::numeric_limits<uint64_t>::max();
  }
  friend bool operator<(const StreamId& a, const StreamId& b) {
    return a.ms != b.ms ? a.ms < b.ms : a.seq < b.seq;
  }
};

bool ParseDecimalUint64(const std::string& text, uint64_t* value) {
  // absl::SimpleAtoi would also take a sign and surrounding spaces: cursors are strict.
  if (text.empty() || text.size() > 20) return false;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
  }
  return absl::SimpleAtoi(text, value);
}

std::optional<StreamId> ParseStreamId(const std::string& text) {
  const size_t dash = text.find('-');
  if (dash == std::string::npos) return std::nullopt;
  StreamId id;
  if (!ParseDecimalUint64(text.substr(0, dash), &id.ms) ||
      !ParseDecimalUint64(text.substr(dash + 1), &id.seq)) {
    return std::nullopt;
  }
  return id;
}

std::string ReplyString(const redisReply& reply) {
  return reply.str != nullptr ? std::string(reply.str, reply.len) : std::string();
}

bool IsString(const redisReply& reply) {
  return reply.type == REDIS_REPLY_STRING || reply.type == REDIS_REPLY_STATUS;
}

absl::Status UnexpectedReply(const std::string& what) {
  return absl::InternalError(absl::StrCat(what, ": unexpected reply from Redis"));
}

// One XRANGE/XREVRANGE element: [id, [field, value, ...]].
absl::StatusOr<StoredEvent> ParseEntry(const redisReply& entry, const std::string& what) {
  if (entry.type != REDIS_REPLY_ARRAY || entry.elements != 2 || !IsString(*entry.element[0])) {
    return UnexpectedReply(what);
  }
  StoredEvent stored;
  stored.cursor = ReplyString(*entry.element[0]);
  const redisReply& fields = *entry.element[1];
  if (fields.type != REDIS_REPLY_ARRAY) return UnexpectedReply(what);
  NewEvent& event = stored.event;
  // A field that is absent keeps its default: entries written before `account` existed
  // belong to the default account ("").
  for (size_t i = 0; i + 1 < fields.elements; i += 2) {
    const std::string name = ReplyString(*fields.element[i]);
    std::string value = ReplyString(*fields.element[i + 1]);
    if (name == "event_name") {
      event.event_name = std::move(value);
    } else if (name == "inspection_id") {
      event.inspection_id = std::move(value);
    } else if (name == "token_id") {
      event.token_id = std::move(value);
    } else if (name == "vehicle_id") {
      event.vehicle_id = std::move(value);
    } else if (name == "payload") {
      event.payload = std::move(value);
    } else if (name == "content_hash") {
      event.content_hash = std::move(value);
    } else if (name == "account") {
      event.account = std::move(value);
    } else if (name == "received_at_ms") {
      // Lenient: a foreign or damaged field reads as 0 rather than failing every read
      // of the log (a reader stuck on one entry would never get past it).
      if (!absl::SimpleAtoi(value, &event.received_at_ms)) event.received_at_ms = 0;
    }
  }
  return stored;
}

class RedisEventLog final : public EventLog {
 public:
  RedisEventLog(RedisUrl url, RetentionPolicy retention, RedisEventLogOptions options)
      : url_(std::move(url)),
        retention_(retention),
        options_(options),
        description_(url_.Describe()),
        max_age_ms_(ClampedMillis(retention.max_age)),
        dedupe_window_ms_(std::max<int64_t>(1, ClampedMillis(retention.dedupe_window))),
        dedupe_prefix_(url_.stream + ":dedupe:"),
        removed_key_(url_.stream + ":removed_up_to"),
        probe_key_(url_.stream + ":writable-probe"),
        fence_key_(url_.stream + ":read-fence"),
        replicated_key_(url_.stream + ":replicated_up_to"),
        append_script_(kAppendScript),
        retention_script_(kRetentionScript),
        advance_script_(kAdvanceScript),
        commands_(url_, Redis(options), options.max_idle_connections),
        blocking_(url_, Redis(options), options.max_idle_connections) {}

  // Reachability, AUTH and SELECT, for Open to fail fast on a wrong URL.
  absl::Status Ping() {
    absl::StatusOr<RedisReply> reply =
        commands_.Run<RedisReply>([](RedisConnection& c) { return c.Command({"PING"}); });
    if (!reply.ok()) return reply.status();
    if ((*reply)->type == REDIS_REPLY_ERROR) return ErrorStatus(**reply, "PING");
    return absl::OkStatus();
  }

  absl::StatusOr<AppendResult> Append(const NewEvent& event) override {
    if (event.content_hash.empty()) {
      return absl::InvalidArgumentError("append: content_hash is empty");
    }
    // The dedupe key lives for the dedupe window (retention deletes the keys of the events
    // it removes sooner).
    const std::string ttl_ms = std::to_string(dedupe_window_ms_);
    const std::vector<std::string> keys = {url_.stream, dedupe_prefix_ + event.content_hash};
    const std::vector<std::string> args = {ttl_ms,
                                           event.event_name,
                                           event.inspection_id,
                                           event.token_id,
                                           event.vehicle_id,
                                           event.payload,
                                           event.content_hash,
                                           std::to_string(event.received_at_ms),
                                           event.account};
    // Safe to repeat (the pool retries once on a connection the server had closed): a
    // repeat finds the dedupe key of the first attempt and returns its cursor.
    // Acknowledged only once enough replicas have it (redis.min_replicas_acked).
    absl::StatusOr<RedisReply> reply = commands_.RunAcknowledged<RedisReply>(
        [&](RedisConnection& c) -> absl::StatusOr<RedisReply> {
          absl::StatusOr<RedisReply> appended = RunScript(c, append_script_, keys, args);
          if (appended.ok() && (*appended)->type == REDIS_REPLY_ERROR) {
            return ErrorStatus(**appended, "append");
          }
          return appended;
        });
    if (!reply.ok()) return reply.status();
    const redisReply& r = **reply;
    if (r.type != REDIS_REPLY_ARRAY || r.elements != 2 || !IsString(*r.element[0]) ||
        r.element[1]->type != REDIS_REPLY_INTEGER) {
      return UnexpectedReply(absl::StrCat(description_, ": append"));
    }
    AppendResult result;
    result.cursor = ReplyString(*r.element[0]);
    result.duplicate = r.element[1]->integer == 1;
    return result;
  }

  absl::StatusOr<std::vector<StoredEvent>> ReadAfter(const std::string& after,
                                                     size_t limit) override {
    std::optional<StreamId> after_id;
    if (!after.empty()) {
      after_id = ParseStreamId(after);
      if (!after_id) {
        return absl::InvalidArgumentError(
            absl::StrCat("'", after.substr(0, 64),
                         "' is not a cursor of the Redis event log (expected <ms>-<seq>)"));
      }
    }
    // XRANGE's "(" makes the start exclusive (Redis >= 6.2); nothing follows the
    // maximum ID, and "(" of it is an error, so that read is left out.
    const bool read_entries = !after_id || !after_id->IsMax();
    const std::string start = after_id ? "(" + after_id->ToString() : "-";
    // One MULTI/EXEC: the removed_up_to check and the read see the same state, so a
    // retention run in between cannot slip a gap past the check.
    std::vector<std::vector<std::string>> commands = {
        {"MULTI"}, {"GET", removed_key_}, {"GET", replicated_key_}};
    if (read_entries) {
      commands.push_back(
          {"XRANGE", url_.stream, start, "+", "COUNT", std::to_string(std::max<size_t>(limit, 1))});
    }
    commands.push_back({"EXEC"});
    // Set when the entries read could not all be confirmed on the replicas: only those up
    // to `confirmed` (the watermark) are handed out.
    std::optional<std::optional<StreamId>> confirmed;
    absl::Status unconfirmed;
    absl::StatusOr<std::vector<RedisReply>> replies = commands_.Run<std::vector<RedisReply>>(
        [&](RedisConnection& c) -> absl::StatusOr<std::vector<RedisReply>> {
          confirmed.reset();
          absl::StatusOr<std::vector<RedisReply>> got = c.Pipeline(commands);
          if (!got.ok() || !read_entries || c.required_acks() <= 0) return got;
          absl::Status fenced = ConfirmReplicated(c, *got->back(), &confirmed);
          if (!fenced.ok()) unconfirmed = fenced;
          return got;
        });
    if (!replies.ok()) return replies.status();
    const redisReply& exec = *replies->back();
    for (const RedisReply& reply : *replies) {
      if (reply->type == REDIS_REPLY_ERROR) return ErrorStatus(*reply, "read");
    }
    if (exec.type != REDIS_REPLY_ARRAY || exec.elements != commands.size() - 2) {
      return UnexpectedReply(absl::StrCat(description_, ": read"));
    }
    const redisReply& removed = *exec.element[0];
    if (removed.type == REDIS_REPLY_ERROR) return ErrorStatus(removed, "read");
    if (after_id && IsString(removed)) {
      const std::string removed_text = ReplyString(removed);
      const std::optional<StreamId> removed_id = ParseStreamId(removed_text);
      if (removed_id && *after_id < *removed_id) {
        return absl::OutOfRangeError(absl::StrCat("cursor ", after_id->ToString(),
                                                  " is older than retention: events up to ",
                                                  removed_text, " were removed; resync"));
      }
    }
    std::vector<StoredEvent> events;
    if (!read_entries || limit == 0) return events;
    const redisReply& entries = *exec.element[2];
    if (entries.type == REDIS_REPLY_ERROR) return ErrorStatus(entries, "read");
    if (entries.type != REDIS_REPLY_ARRAY) {
      return UnexpectedReply(absl::StrCat(description_, ": read"));
    }
    events.reserve(entries.elements);
    for (size_t i = 0; i < entries.elements; ++i) {
      absl::StatusOr<StoredEvent> event =
          ParseEntry(*entries.element[i], absl::StrCat(description_, ": read"));
      if (!event.ok()) return event.status();
      events.push_back(*std::move(event));
    }
    if (confirmed.has_value()) {
      // Hand out only what the replicas are known to hold; the rest on a later read.
      const std::optional<StreamId> limit_id = *confirmed;
      auto beyond = std::find_if(events.begin(), events.end(), [&](const StoredEvent& e) {
        const std::optional<StreamId> id = ParseStreamId(e.cursor);
        return !limit_id || !id || *limit_id < *id;
      });
      events.erase(beyond, events.end());
      if (events.empty()) return unconfirmed;
    }
    return events;
  }

  absl::StatusOr<std::string> LastCursor() override {
    absl::StatusOr<RedisReply> reply = commands_.Run<RedisReply>([&](RedisConnection& c) {
      return c.Command({"XREVRANGE", url_.stream, "+", "-", "COUNT", "1"});
    });
    if (!reply.ok()) return reply.status();
    const redisReply& r = **reply;
    if (r.type == REDIS_REPLY_ERROR) return ErrorStatus(r, "last cursor");
    if (r.type != REDIS_REPLY_ARRAY) {
      return UnexpectedReply(absl::StrCat(description_, ": last cursor"));
    }
    if (r.elements == 0) return std::string();
    const redisReply& entry = *r.element[0];
    if (entry.type != REDIS_REPLY_ARRAY || entry.elements < 1 || !IsString(*entry.element[0])) {
      return UnexpectedReply(absl::StrCat(description_, ": last cursor"));
    }
    return ReplyString(*entry.element[0]);
  }

  void WaitForAppend(const std::string& after, std::chrono::milliseconds timeout) override {
    if (timeout.count() <= 0) return;
    const absl::Time deadline = absl::Now() + absl::FromChrono(timeout);
    // "" waits for any event at all ("0-0" precedes every ID). A malformed cursor
    // returns at once: the caller's ReadAfter will report it.
    std::string start = "0-0";
    if (!after.empty()) {
      const std::optional<StreamId> id = ParseStreamId(after);
      if (!id) return;
      start = id->ToString();
    }
    const absl::StatusOr<bool> waited =
        blocking_.Run<bool>([&](RedisConnection& c) -> absl::StatusOr<bool> {
          // The socket must outwait the server-side block.
          absl::Status status =
              c.SetCommandTimeout(absl::FromChrono(timeout) + options_.command_timeout);
          if (!status.ok()) return status;
          absl::StatusOr<RedisReply> reply =
              c.Command({"XREAD", "BLOCK", std::to_string(timeout.count()), "COUNT", "1", "STREAMS",
                         url_.stream, start});
          if (!reply.ok()) return reply.status();
          if ((*reply)->type == REDIS_REPLY_ERROR) return ErrorStatus(**reply, "wait");
          return true;
        });
    // With Redis down, returning at once would turn the caller's wait loop into a busy
    // loop of failing connects: wait out the timeout instead (returning is allowed).
    if (!waited.ok()) absl::SleepFor(deadline - absl::Now());
  }

  absl::StatusOr<int64_t> ApplyRetention(absl::Time now) override {
    // A limit <= 0 is "no limit", as for the SQLite backend.
    const std::string max_events =
        retention_.max_events > 0 ? std::to_string(retention_.max_events) : "";
    const std::string cutoff_ms =
        max_age_ms_ > 0 ? std::to_string(absl::ToUnixMillis(now) - max_age_ms_) : "";
    const std::vector<std::string> keys = {url_.stream, removed_key_};
    const std::vector<std::string> args = {
        max_events, cutoff_ms, std::to_string(options_.retention_batch), dedupe_prefix_};
    int64_t total = 0;
    // One batch per script keeps each script short (Redis runs nothing else meanwhile);
    // each run removes at least one entry when it asks for more, so this ends.
    for (;;) {
      absl::StatusOr<RedisReply> reply = commands_.Run<RedisReply>(
          [&](RedisConnection& c) { return RunScript(c, retention_script_, keys, args); });
      if (!reply.ok()) return reply.status();
      const redisReply& r = **reply;
      if (r.type == REDIS_REPLY_ERROR) return ErrorStatus(r, "retention");
      if (r.type != REDIS_REPLY_ARRAY || r.elements != 2 ||
          r.element[0]->type != REDIS_REPLY_INTEGER || r.element[1]->type != REDIS_REPLY_INTEGER) {
        return UnexpectedReply(absl::StrCat(description_, ": retention"));
      }
      total += r.element[0]->integer;
      if (r.element[1]->integer != 1) break;
    }
    return total;
  }

  // A write that appends would also need: the server is reachable, not a read-only
  // replica, not refusing writes (MISCONF after a failed save, OOM at maxmemory with
  // noeviction, a script BUSY); and the stream key is a stream (or absent).
  absl::Status CheckWritable() override {
    absl::StatusOr<std::vector<RedisReply>> replies =
        commands_.Run<std::vector<RedisReply>>([&](RedisConnection& c) {
          return c.Pipeline(
              {{"SET", probe_key_, "1", "PX", std::to_string(kProbeTtlMs)}, {"TYPE", url_.stream}});
        });
    if (!replies.ok()) return replies.status();
    for (const RedisReply& reply : *replies) {
      if (reply->type == REDIS_REPLY_ERROR) return ErrorStatus(*reply, "writable check");
    }
    const std::string type = ReplyString(*(*replies)[1]);
    if (type != "stream" && type != "none") {
      return absl::FailedPreconditionError(
          absl::StrCat(description_, ": key '", url_.stream, "' holds a ", type, ", not a stream"));
    }
    return absl::OkStatus();
  }

  std::string Describe() const override { return description_; }

 private:
  // Milliseconds of `age`, at most 1000 years, so that `now - age` and the dedupe TTL
  // cannot overflow whatever the configuration says.
  static int64_t ClampedMillis(std::chrono::seconds age) {
    constexpr int64_t kMaxSeconds = int64_t{1000} * 365 * 24 * 3600;
    return std::clamp<int64_t>(age.count(), 0, kMaxSeconds) * 1000;
  }

  static redis::RedisOptions Redis(const RedisEventLogOptions& options) {
    redis::RedisOptions redis = options.redis;
    redis.timeouts.connect = options.connect_timeout;
    redis.timeouts.command = options.command_timeout;
    return redis;
  }

  absl::Status ErrorStatus(const redisReply& reply, const char* what) const {
    return RedisErrorReplyToStatus(reply, absl::StrCat(description_, ": ", what));
  }

  // ReadAfter's fence, on the connection that read (`exec`: its EXEC reply: removed_up_to,
  // the watermark, the entries). An entry on the primary alone is lost if it dies now: its
  // append was not acknowledged (503, delivered again), and a reader that handed it out
  // would deliver it twice. So entries beyond the watermark (replicated_key_) are confirmed
  // the way appends are: a write (the fence, after them in the replication stream), then
  // WAIT, then the watermark raised to the last of them. OK when all are confirmed (or there is
  // nothing to confirm); otherwise `*confirmed` is the watermark (nullopt inside: none) and
  // the refusal is returned: only entries up to the watermark may be handed out.
  absl::Status ConfirmReplicated(RedisConnection& c, const redisReply& exec,
                                 std::optional<std::optional<StreamId>>* confirmed) {
    if (exec.type != REDIS_REPLY_ARRAY || exec.elements < 3) return absl::OkStatus();
    const redisReply& watermark = *exec.element[1];
    const redisReply& entries = *exec.element[2];
    if (entries.type != REDIS_REPLY_ARRAY || entries.elements == 0) return absl::OkStatus();
    const redisReply& last = *entries.element[entries.elements - 1];
    if (last.type != REDIS_REPLY_ARRAY || last.elements < 1 || !IsString(*last.element[0])) {
      return absl::OkStatus();  // malformed: ReadAfter reports it
    }
    const std::optional<StreamId> last_id = ParseStreamId(ReplyString(*last.element[0]));
    const std::optional<StreamId> mark =
        IsString(watermark) ? ParseStreamId(ReplyString(watermark)) : std::nullopt;
    if (!last_id || (mark && !(*mark < *last_id))) return absl::OkStatus();
    // The fence: a write after the entries in the replication stream. (Not the watermark
    // itself: raised before the WAIT, it would vouch for entries no replica has yet.)
    absl::StatusOr<RedisReply> fence = c.Command({"SET", fence_key_, "1", "PX", "60000"});
    absl::Status status = !fence.ok()                           ? fence.status()
                          : (*fence)->type == REDIS_REPLY_ERROR ? ErrorStatus(**fence, "read fence")
                                                                : c.WaitForReplicas();
    if (!status.ok()) {
      *confirmed = mark;
      return status;
    }
    // Confirmed: later reads (this replica's and the others') need no fence for them. A
    // failure here only costs a later fence.
    (void)RunScript(c, advance_script_, {replicated_key_}, {last_id->ToString()});
    return absl::OkStatus();
  }

  // EVALSHA, falling back to EVAL (which also caches the script) when the server does
  // not know it yet: after a restart, a SCRIPT FLUSH, or on first use.
  static absl::StatusOr<RedisReply> RunScript(RedisConnection& connection, const LuaScript& script,
                                              const std::vector<std::string>& keys,
                                              const std::vector<std::string>& args) {
    std::vector<std::string> argv;
    argv.reserve(3 + keys.size() + args.size());
    argv.push_back("EVALSHA");
    argv.push_back(script.sha1);
    argv.push_back(std::to_string(keys.size()));
    argv.insert(argv.end(), keys.begin(), keys.end());
    argv.insert(argv.end(), args.begin(), args.end());
    absl::StatusOr<RedisReply> reply = connection.Command(argv);
    if (reply.ok() && (*reply)->type == REDIS_REPLY_ERROR &&
        ReplyString(**reply).rfind("NOSCRIPT", 0) == 0) {
      argv[0] = "EVAL";
      argv[1] = script.source;
      reply = connection.Command(argv);
    }
    return reply;
  }

  const RedisUrl url_;
  const RetentionPolicy retention_;
  const RedisEventLogOptions options_;
  const std::string description_;
  const int64_t max_age_ms_;
  const int64_t dedupe_window_ms_;
  const std::string dedupe_prefix_;
  const std::string removed_key_;
  const std::string probe_key_;
  // ReadAfter's fence, and the greatest entry ID a read confirmed on the replicas.
  const std::string fence_key_;
  const std::string replicated_key_;
  const LuaScript append_script_;
  const LuaScript retention_script_;
  const LuaScript advance_script_;
  RedisConnectionPool commands_;  // short commands
  RedisConnectionPool blocking_;  // only WaitForAppend's XREAD BLOCK
};

}  // namespace

absl::StatusOr<std::unique_ptr<EventLog>> OpenRedisEventLogWithOptions(
    const std::string& url, RetentionPolicy retention, RedisEventLogOptions options) {
  absl::StatusOr<RedisUrl> parsed = ParseRedisUrl(url);
  if (!parsed.ok()) return parsed.status();
  if (options.retention_batch < 1) {
    return absl::InvalidArgumentError("redis event log: retention_batch must be positive");
  }
  auto log = std::make_unique<RedisEventLog>(*std::move(parsed), retention, options);
  if (absl::Status status = log->Ping(); !status.ok()) return status;
  return log;
}

absl::StatusOr<std::unique_ptr<EventLog>> OpenRedisEventLog(const std::string& url,
                                                            RetentionPolicy retention) {
  return OpenRedisEventLogWithOptions(url, retention, RedisEventLogOptions());
}

}  // namespace inspection::eventlog
