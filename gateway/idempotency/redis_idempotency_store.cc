#include "gateway/idempotency/redis_idempotency_store.h"

#include <hiredis/hiredis.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "adapters/redis/redis_connection.h"
#include "adapters/redis/redis_url.h"

namespace inspection::pipeline {
namespace {

// --- Lua scripts: each state change is one atomic script, so two replicas can never
// both lead the same key. KEYS[1] is the record (a hash, see the header).

// ARGV: fingerprint, claim, claim TTL (ms), abandoned claim ('' for none: a claim this
// process abandoned whose DEL is still queued; it counts as gone already).
// Returns {"lead", claim} | {"wait", claim} | {"mismatch"} | {"done", code, msg, details,
// response}. Fields are read with `or ''`: a nil would end a Lua array early.
constexpr char kBeginScript[] = R"lua(
local r = redis.call('HMGET', KEYS[1], 'state', 'fp', 'claim', 'code', 'msg', 'details', 'resp')
if ARGV[4] ~= '' and r[1] == 'pending' and r[3] == ARGV[4] then
  redis.call('DEL', KEYS[1])
  r[1] = false
end
if not r[1] then
  redis.call('HSET', KEYS[1], 'state', 'pending', 'fp', ARGV[1], 'claim', ARGV[2])
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
  return {'lead', ARGV[2]}
end
if r[2] ~= ARGV[1] then return {'mismatch'} end
if r[1] == 'pending' then return {'wait', r[3] or ''} end
return {'done', r[4] or '', r[5] or '', r[6] or '', r[7] or ''}
)lua";

// ARGV: claim, fingerprint, TTL (ms), code, message, details, response.
// Stores the outcome unless another claim holds the key (ours expired and someone else
// leads now: their outcome is the one to keep). When our claim expired and nobody took
// the key, the outcome is still stored: the vendor did act, and a later retry should
// replay that rather than act twice. Returns 1 when stored.
constexpr char kCompleteScript[] = R"lua(
local claim = redis.call('HGET', KEYS[1], 'claim')
if claim and claim ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'state', 'done', 'fp', ARGV[2], 'claim', ARGV[1], 'code', ARGV[4],
           'msg', ARGV[5], 'details', ARGV[6], 'resp', ARGV[7])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
)lua";

// ARGV: claim. Frees the key when our claim still holds it. Returns 1 when freed.
constexpr char kAbandonScript[] = R"lua(
local r = redis.call('HMGET', KEYS[1], 'state', 'claim')
if r[1] == 'pending' and r[2] == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
)lua";

constexpr char kClaimEndedMessage[] =
    "the first call with this idempotency key did not finish; retry";
constexpr char kUnreachableMessage[] = "the idempotency store is unreachable; retry later";

IdempotentOutcome ClaimEnded() {
  return {grpc::Status(grpc::StatusCode::ABORTED, kClaimEndedMessage), ""};
}
IdempotentOutcome Unreachable() {
  return {grpc::Status(grpc::StatusCode::UNAVAILABLE, kUnreachableMessage), ""};
}

std::string Milliseconds(absl::Duration duration) {
  return std::to_string(std::max<int64_t>(1, absl::ToInt64Milliseconds(duration)));
}

using Reply = redis::RedisReply;

absl::Status InvalidUrl(const std::string& what) {
  // Never includes the URL: it may carry the password.
  return absl::InvalidArgumentError(absl::StrCat("redis idempotency store URL: ", what));
}

std::string ReplyText(const redisReply* reply) {
  return reply != nullptr && reply->str != nullptr ? std::string(reply->str, reply->len)
                                                   : std::string();
}

// The outcome stored as code / message / details / response; nullopt when malformed.
std::optional<IdempotentOutcome> ParseOutcome(const redisReply* code, const redisReply* message,
                                              const redisReply* details,
                                              const redisReply* response) {
  int value = 0;
  if (!absl::SimpleAtoi(ReplyText(code), &value) || value < 0 || value > 16) return std::nullopt;
  const auto status_code = static_cast<grpc::StatusCode>(value);
  IdempotentOutcome outcome;
  outcome.status = status_code == grpc::StatusCode::OK
                       ? grpc::Status::OK
                       : grpc::Status(status_code, ReplyText(message), ReplyText(details));
  outcome.response = ReplyText(response);
  return outcome;
}

}  // namespace

namespace internal {

// The event log's pooled hiredis connections (adapters/eventlog/redis), with the pipeline
// this store sends.
class RedisIdempotencyConnections {
 public:
  RedisIdempotencyConnections(const RedisIdempotencyUrl& url, redis::RedisOptions options)
      : description_(url.Describe()), pool_(url.server, std::move(options), kMaxIdle) {}

  // Sends `commands` in one write and reads their replies in order. Unavailable on a
  // transport failure. When a pooled connection turns out to have been closed by Redis
  // (a restart), the commands are sent once more on a fresh connection, so they must be
  // safe to repeat (the scripts are: see Begin's own-claim check).
  absl::StatusOr<std::vector<Reply>> Run(const std::vector<std::vector<std::string>>& commands) {
    return pool_.Run<std::vector<Reply>>(
        [&commands](redis::RedisConnection& connection) { return connection.Pipeline(commands); });
  }

  // Run, then WAIT for RedisOptions::min_replicas_acked replicas: for writes whose outcome
  // callers rely on. Unavailable carrying redis::kNotReplicatedPayloadUrl when fewer confirm.
  absl::StatusOr<std::vector<Reply>> RunDurable(
      const std::vector<std::vector<std::string>>& commands) {
    return pool_.RunAcknowledged<std::vector<Reply>>(
        [&commands](redis::RedisConnection& connection) { return connection.Pipeline(commands); });
  }

  // Opens one connection (and keeps it): surfaces a refused AUTH or SELECT early.
  absl::Status Probe() {
    return pool_
        .Run<Reply>([](redis::RedisConnection& connection) { return connection.Command({"PING"}); })
        .status();
  }

  const std::string& description() const { return description_; }

 private:
  static constexpr size_t kMaxIdle = 8;

  const std::string description_;
  redis::RedisConnectionPool pool_;
};

}  // namespace internal

std::string RedisIdempotencyUrl::Describe() const {
  // The client's description without its "?stream=" (the store's keys have a prefix).
  const std::string described = server.Describe();
  return described.substr(0, described.find('?'));
}

absl::StatusOr<RedisIdempotencyUrl> ParseRedisIdempotencyUrl(const std::string& url_text) {
  // The event log's grammar (redis::ParseRedisUrl), with ?prefix= where it has
  // ?stream=: the query is checked here, then handed over renamed. The credentials end at
  // the last '@', so the query starts at the first '?' after it.
  const size_t at = url_text.rfind('@');
  const size_t query = url_text.find('?', at == std::string::npos ? 0 : at + 1);
  std::string rewritten = url_text;
  bool has_prefix = false;
  if (query != std::string::npos) {
    const size_t fragment = url_text.find('#', query);
    const std::string params = url_text.substr(
        query + 1, fragment == std::string::npos ? std::string::npos : fragment - query - 1);
    if (!params.empty()) {
      if (params.rfind("prefix=", 0) != 0 || params.find('&') != std::string::npos) {
        return InvalidUrl("unknown query parameter (only 'prefix' is supported, once)");
      }
      if (params.size() == 7) return InvalidUrl("prefix is empty");
      rewritten.replace(query + 1, 6, "stream");
      has_prefix = true;
    }
  }
  absl::StatusOr<redis::RedisUrl> parsed = redis::ParseRedisUrl(rewritten);
  if (!parsed.ok()) {
    // Its messages never hold the URL; only the names are the event log's.
    return InvalidUrl(absl::StrReplaceAll(
        parsed.status().message(), {{"redis event log URL: ", ""}, {"stream name", "prefix"}}));
  }
  RedisIdempotencyUrl url;
  if (has_prefix) url.prefix = parsed->stream;
  url.server = *std::move(parsed);
  return url;
}

absl::StatusOr<std::unique_ptr<RedisIdempotencyStore>> RedisIdempotencyStore::Open(
    const std::string& url_text, RedisIdempotencyOptions options) {
  absl::StatusOr<RedisIdempotencyUrl> url = ParseRedisIdempotencyUrl(url_text);
  if (!url.ok()) return url.status();
  if (options.ttl <= absl::ZeroDuration() || options.claim_ttl <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("redis idempotency store: TTLs must be positive");
  }
  redis::RedisOptions redis = options.redis;
  redis.timeouts = {options.connect_timeout, options.command_timeout};
  auto connections = std::make_unique<internal::RedisIdempotencyConnections>(*url, redis);
  if (absl::Status probe = connections->Probe();
      !probe.ok() && probe.code() != absl::StatusCode::kUnavailable) {
    return probe;
  }
  return std::unique_ptr<RedisIdempotencyStore>(
      new RedisIdempotencyStore(*std::move(url), std::move(options), std::move(connections)));
}

RedisIdempotencyStore::RedisIdempotencyStore(
    RedisIdempotencyUrl url, RedisIdempotencyOptions options,
    std::unique_ptr<internal::RedisIdempotencyConnections> connections)
    : url_(std::move(url)),
      options_(std::move(options)),
      prefix_(url_.prefix.empty() ? options_.prefix : url_.prefix),
      connections_(std::move(connections)) {
  std::random_device device;
  std::seed_seq seed{device(), device(), device(), device(), device(), device()};
  random_.seed(seed);
  background_ = std::thread([this] { BackgroundLoop(); });
}

RedisIdempotencyStore::~RedisIdempotencyStore() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    work_cv_.SignalAll();
  }
  // The background thread runs the queued writes before it ends.
  background_.join();
  std::vector<Callback> waiters;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [key, wait] : remote_) {
      for (Callback& waiter : wait.waiters) waiters.push_back(std::move(waiter));
    }
    for (auto& [key, lead] : leads_) {
      for (Callback& waiter : lead.waiters) waiters.push_back(std::move(waiter));
    }
    remote_.clear();
    leads_.clear();
  }
  const IdempotentOutcome shutting_down{
      grpc::Status(grpc::StatusCode::UNAVAILABLE, "the gateway is shutting down; retry"), ""};
  for (Callback& waiter : waiters) waiter(shutting_down);
}

std::string RedisIdempotencyStore::RedisKey(const std::string& account,
                                            const std::string& key) const {
  // The account's length makes the split unambiguous: ("ab", "c") != ("a", "bc").
  return absl::StrCat(prefix_, "idem:", account.size(), ":", account, key);
}

bool RedisIdempotencyStore::WaitForWrites(absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  auto written = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return writes_.empty() && writes_running_ == 0;
  };
  return mu_.AwaitWithTimeout(absl::Condition(&written), timeout);
}

size_t RedisIdempotencyStore::remote_waiters() const {
  absl::MutexLock lock(&mu_);
  size_t count = 0;
  for (const auto& [key, wait] : remote_) count += wait.waiters.size();
  return count;
}

std::string RedisIdempotencyStore::NewClaim() {
  absl::MutexLock lock(&mu_);
  return absl::StrCat(absl::Hex(random_(), absl::kZeroPad16),
                      absl::Hex(random_(), absl::kZeroPad16));
}

void RedisIdempotencyStore::ReportError(const absl::Status& status) const {
  if (options_.on_error) options_.on_error(status);
}

IdempotencyStore::Decision RedisIdempotencyStore::Begin(const std::string& account,
                                                        const std::string& key,
                                                        const std::string& fingerprint,
                                                        IdempotentOutcome* replay,
                                                        Callback on_ready) {
  const std::string redis_key = RedisKey(account, key);
  std::string abandoned_claim;
  {
    // A duplicate of a call this process leads needs no round trip: Complete() or
    // Abandon() will hand it the outcome directly.
    absl::MutexLock lock(&mu_);
    if (auto it = leads_.find(redis_key); it != leads_.end()) {
      if (it->second.fingerprint != fingerprint) return Decision::kMismatch;
      it->second.waiters.push_back(std::move(on_ready));
      return Decision::kWait;
    }
    // Finished here, not yet written: Redis would still say "pending".
    if (auto it = completing_.find(redis_key); it != completing_.end()) {
      if (it->second.fingerprint != fingerprint) return Decision::kMismatch;
      *replay = it->second.outcome;
      return Decision::kReplay;
    }
    // Abandoned here, DEL not yet written: the script frees it first.
    if (auto it = abandoning_.find(redis_key); it != abandoning_.end()) {
      abandoned_claim = it->second;
    }
  }

  const std::string claim = NewClaim();
  absl::StatusOr<std::vector<Reply>> replies =
      connections_->Run({{"EVAL", kBeginScript, "1", redis_key, fingerprint, claim,
                          Milliseconds(options_.claim_ttl), abandoned_claim}});
  auto unavailable = [&](const absl::Status& status) {
    ReportError(status);
    *replay = Unreachable();
    return Decision::kUnavailable;
  };
  if (!replies.ok()) return unavailable(replies.status());
  const redisReply* reply = (*replies)[0].get();
  if (reply->type == REDIS_REPLY_ERROR) {
    return unavailable(absl::UnavailableError(
        absl::StrCat(connections_->description(), ": Begin refused: ", ReplyText(reply))));
  }
  const bool shaped = reply->type == REDIS_REPLY_ARRAY && reply->elements >= 1;
  const std::string verdict = shaped ? ReplyText(reply->element[0]) : "";
  const std::string claim_seen = shaped && reply->elements >= 2 ? ReplyText(reply->element[1]) : "";

  // "wait" on our own claim: the script ran twice (a reply lost on a dead pooled
  // connection, then resent), so we did claim the key.
  if (verdict == "lead" || (verdict == "wait" && claim_seen == claim)) {
    absl::MutexLock lock(&mu_);
    Lead& lead = leads_[redis_key];
    lead.claim = claim;
    lead.fingerprint = fingerprint;
    return Decision::kLead;
  }
  if (verdict == "mismatch") return Decision::kMismatch;
  if (verdict == "wait") {
    absl::MutexLock lock(&mu_);
    // The claim may be ours after all: another thread of this process won it between
    // our look at leads_ and the script.
    if (auto it = leads_.find(redis_key); it != leads_.end() && it->second.claim == claim_seen) {
      it->second.waiters.push_back(std::move(on_ready));
      return Decision::kWait;
    }
    const absl::Time now = absl::Now();
    auto [it, inserted] = remote_.try_emplace(RemoteKey(redis_key, claim_seen));
    RemoteWait& wait = it->second;
    if (inserted) {
      wait.fingerprint = fingerprint;
      wait.interval = options_.first_poll_interval;
      wait.next_poll = now + wait.interval;
      // The claim is at most claim_ttl old, so by then Redis has let it go.
      wait.give_up_at = now + options_.claim_ttl + options_.max_poll_interval;
      work_cv_.Signal();
    }
    wait.waiters.push_back(std::move(on_ready));
    return Decision::kWait;
  }
  if (verdict == "done" && reply->elements == 5) {
    std::optional<IdempotentOutcome> outcome =
        ParseOutcome(reply->element[1], reply->element[2], reply->element[3], reply->element[4]);
    if (outcome.has_value()) {
      *replay = *std::move(outcome);
      return Decision::kReplay;
    }
  }
  return unavailable(absl::InternalError(absl::StrCat(
      connections_->description(), ": malformed idempotency record under ", redis_key)));
}

void RedisIdempotencyStore::Complete(const std::string& account, const std::string& key,
                                     IdempotentOutcome outcome) {
  const std::string redis_key = RedisKey(account, key);
  std::vector<Callback> waiters;
  {
    absl::MutexLock lock(&mu_);
    auto it = leads_.find(redis_key);
    if (it == leads_.end()) return;
    Lead& lead = it->second;
    writes_.push_back(
        {redis_key,
         {"EVAL", kCompleteScript, "1", redis_key, lead.claim, lead.fingerprint,
          Milliseconds(options_.ttl), std::to_string(static_cast<int>(outcome.status.error_code())),
          outcome.status.error_message(), outcome.status.error_details(), outcome.response},
         /*completing=*/true,
         lead.claim});
    completing_[redis_key] = {lead.fingerprint, outcome};
    waiters.swap(lead.waiters);
    leads_.erase(it);
    work_cv_.Signal();
  }
  for (Callback& waiter : waiters) waiter(outcome);
}

void RedisIdempotencyStore::Abandon(const std::string& account, const std::string& key,
                                    const IdempotentOutcome& outcome) {
  const std::string redis_key = RedisKey(account, key);
  std::vector<Callback> waiters;
  {
    absl::MutexLock lock(&mu_);
    auto it = leads_.find(redis_key);
    if (it == leads_.end()) return;
    writes_.push_back({redis_key,
                       {"EVAL", kAbandonScript, "1", redis_key, it->second.claim},
                       /*completing=*/false,
                       it->second.claim});
    abandoning_[redis_key] = it->second.claim;
    waiters.swap(it->second.waiters);
    leads_.erase(it);
    work_cv_.Signal();
  }
  for (Callback& waiter : waiters) waiter(outcome);
}

void RedisIdempotencyStore::BackgroundLoop() {
  mu_.Lock();
  for (;;) {
    if (!writes_.empty()) {
      RunWrites();
      continue;
    }
    if (stopping_) break;
    absl::Time earliest = absl::InfiniteFuture();
    for (const auto& [key, wait] : remote_) earliest = std::min(earliest, wait.next_poll);
    if (earliest > absl::Now()) {
      // Woken early by a write, a new wait or the destructor; the loop looks again.
      work_cv_.WaitWithDeadline(&mu_, earliest);
      continue;
    }
    PollDue();
  }
  mu_.Unlock();
}

void RedisIdempotencyStore::RunWrites() {
  std::vector<Write> writes;
  writes.swap(writes_);
  writes_running_ = writes.size();
  std::vector<std::vector<std::string>> commands;
  for (Write& write : writes) commands.push_back(std::move(write.command));
  mu_.Unlock();
  absl::StatusOr<std::vector<Reply>> replies = connections_->RunDurable(commands);
  if (!replies.ok()) {
    ReportError(absl::Status(replies.status().code(),
                             absl::StrCat(replies.status().message(), " (", writes.size(),
                                          " idempotency outcome(s) not stored)")));
  } else {
    for (size_t i = 0; i < writes.size(); ++i) {
      const redisReply* reply = (*replies)[i].get();
      if (reply->type == REDIS_REPLY_ERROR) {
        ReportError(absl::UnavailableError(absl::StrCat(connections_->description(), ": write to ",
                                                        writes[i].redis_key,
                                                        " refused: ", ReplyText(reply))));
      } else if (writes[i].completing && reply->type == REDIS_REPLY_INTEGER &&
                 reply->integer == 0) {
        ReportError(absl::FailedPreconditionError(absl::StrCat(
            "idempotency claim on ", writes[i].redis_key,
            " expired before the call finished and another call holds it: outcome not stored")));
      }
    }
  }
  mu_.Lock();
  // Written or failed: Redis answers for these keys again. (No new claim on the same
  // key can start in this process meanwhile: Begin() replays from completing_.)
  for (const Write& write : writes) {
    if (write.completing) {
      completing_.erase(write.redis_key);
    } else if (auto it = abandoning_.find(write.redis_key);
               it != abandoning_.end() && it->second == write.claim) {
      abandoning_.erase(it);  // unless a newer Abandon() of the key replaced it
    }
  }
  writes_running_ = 0;
}

void RedisIdempotencyStore::PollDue() {
  std::vector<RemoteKey> due;
  std::vector<std::vector<std::string>> commands;
  const absl::Time now = absl::Now();
  for (const auto& [key, wait] : remote_) {
    if (wait.next_poll > now) continue;
    due.push_back(key);
    commands.push_back(
        {"HMGET", key.first, "state", "fp", "claim", "code", "msg", "details", "resp"});
  }
  mu_.Unlock();
  absl::StatusOr<std::vector<Reply>> replies = connections_->Run(commands);
  if (!replies.ok()) ReportError(replies.status());
  mu_.Lock();

  std::vector<std::pair<std::vector<Callback>, IdempotentOutcome>> finished;
  const absl::Time polled = absl::Now();
  for (size_t i = 0; i < due.size(); ++i) {
    auto it = remote_.find(due[i]);
    if (it == remote_.end()) continue;
    RemoteWait& wait = it->second;
    const redisReply* reply = replies.ok() ? (*replies)[i].get() : nullptr;
    std::optional<IdempotentOutcome> outcome;
    if (reply == nullptr || reply->type != REDIS_REPLY_ARRAY || reply->elements != 7) {
      wait.last_poll_failed = true;
      if (polled >= wait.give_up_at) outcome = Unreachable();
    } else {
      wait.last_poll_failed = false;
      const std::string state = ReplyText(reply->element[0]);
      const std::string fingerprint = ReplyText(reply->element[1]);
      const std::string claim = ReplyText(reply->element[2]);
      if (state == "done" && fingerprint == wait.fingerprint) {
        outcome = ParseOutcome(reply->element[3], reply->element[4], reply->element[5],
                               reply->element[6]);
        if (!outcome.has_value()) outcome = ClaimEnded();
      } else if (state != "pending" || claim != due[i].second || polled >= wait.give_up_at) {
        // Gone (abandoned, or the leader died and the claim expired), or the key now
        // belongs to another claim or fingerprint: what we waited for will not come.
        outcome = ClaimEnded();
      }
    }
    if (outcome.has_value()) {
      finished.emplace_back(std::move(wait.waiters), *std::move(outcome));
      remote_.erase(it);
    } else {
      wait.interval = std::min(wait.interval * 2, options_.max_poll_interval);
      wait.next_poll = polled + wait.interval;
    }
  }
  if (finished.empty()) return;
  mu_.Unlock();
  for (auto& [waiters, outcome] : finished) {
    for (Callback& waiter : waiters) waiter(outcome);
  }
  mu_.Lock();
}

}  // namespace inspection::pipeline
