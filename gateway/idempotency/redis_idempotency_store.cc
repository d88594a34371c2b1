#include "gateway/idempotency/redis_idempotency_store.h"

#include <hiredis/hiredis.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "adapters/redis/redis_connection.h"
#include "adapters/redis/redis_status.h"
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

// The store's own answer to a waiter (IdempotentOutcome::from_store).
IdempotentOutcome StoreAnswer(grpc::StatusCode code, const char* message) {
  return {grpc::Status(code, message), "", /*from_store=*/true};
}
IdempotentOutcome ClaimEnded() {
  return StoreAnswer(grpc::StatusCode::ABORTED, kClaimEndedMessage);
}
IdempotentOutcome Unreachable() {
  return StoreAnswer(grpc::StatusCode::UNAVAILABLE, kUnreachableMessage);
}
IdempotentOutcome ShuttingDown() {
  return StoreAnswer(grpc::StatusCode::UNAVAILABLE, "the gateway is shutting down; retry");
}
IdempotentOutcome DeadlinePassed() {
  return StoreAnswer(grpc::StatusCode::DEADLINE_EXCEEDED,
                     "the call's deadline passed while it waited for the first call with this "
                     "idempotency key");
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
      : description_(url.Describe()),
        pool_(WithoutStream(url.server), std::move(options), kMaxIdle) {}

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

  // Begin's script, and when it claimed the key (`claimed` of its reply), WAIT for the
  // replicas on the same connection: `replicated` is that WAIT's answer.
  struct Claimed {
    std::vector<Reply> replies;
    absl::Status replicated;
  };
  absl::StatusOr<Claimed> RunBegin(const std::vector<std::string>& command,
                                   const std::function<bool(const redisReply*)>& claimed) {
    return pool_.Run<Claimed>(
        [&command, &claimed](redis::RedisConnection& connection) -> absl::StatusOr<Claimed> {
          absl::StatusOr<std::vector<Reply>> replies = connection.Pipeline({command});
          if (!replies.ok()) return replies.status();
          Claimed out{*std::move(replies), absl::OkStatus()};
          if (claimed(out.replies[0].get())) out.replicated = connection.WaitForReplicas();
          return out;
        });
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

  // The pool's messages describe the URL: the store has a key prefix, not a stream.
  static redis::RedisUrl WithoutStream(redis::RedisUrl url) {
    url.stream.clear();
    return url;
  }

  const std::string description_;
  redis::RedisConnectionPool pool_;
};

}  // namespace internal

std::string RedisIdempotencyUrl::Describe() const {
  // The client's description without its "?stream=" (the store's keys have a prefix).
  redis::RedisUrl described = server;
  described.stream.clear();
  return described.Describe();
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
  if (options.begin_threads == 0 || options.max_queued_begins == 0) {
    return absl::InvalidArgumentError(
        "redis idempotency store: begin_threads and max_queued_begins must be positive");
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
  for (size_t i = 0; i < options_.begin_threads; ++i) {
    begin_threads_.emplace_back([this] { BeginLoop(); });
  }
}

void RedisIdempotencyStore::StopBegins() {
  {
    absl::MutexLock lock(&mu_);
    begins_stopped_ = true;
  }
  // They answer what is still queued (shutting down), then end.
  for (std::thread& thread : begin_threads_) {
    if (thread.joinable()) thread.join();
  }
}

void RedisIdempotencyStore::BeginShutdown() {
  StopBegins();
  std::vector<Callback> waiters;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [key, wait] : remote_) {
      for (RemoteWaiter& waiter : wait.waiters) waiters.push_back(std::move(waiter.callback));
    }
    remote_.clear();
  }
  const IdempotentOutcome shutting_down = ShuttingDown();
  for (Callback& waiter : waiters) waiter(shutting_down);
}

RedisIdempotencyStore::~RedisIdempotencyStore() {
  StopBegins();
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    work_cv_.SignalAll();
  }
  // The background thread runs the queued writes and a last attempt of the unsaved ones.
  background_.join();
  std::vector<Callback> waiters;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [key, wait] : remote_) {
      for (RemoteWaiter& waiter : wait.waiters) waiters.push_back(std::move(waiter.callback));
    }
    for (auto& [key, lead] : leads_) {
      for (Callback& waiter : lead.waiters) waiters.push_back(std::move(waiter));
    }
    for (auto& [key, completing] : completing_) {
      for (Callback& waiter : completing.waiters) waiters.push_back(std::move(waiter));
    }
    remote_.clear();
    leads_.clear();
  }
  const IdempotentOutcome shutting_down = ShuttingDown();
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

grpc::Status RedisIdempotencyStore::RefusedBeforeTrying(absl::Time now) const {
  if (now < unreachable_until_) return Unreachable().status;
  if (unsaved_bytes_ > options_.max_unsaved_bytes) {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                        "too many idempotency outcomes wait to be saved (the idempotency store "
                        "is unreachable); retry later");
  }
  return grpc::Status::OK;
}

IdempotencyStore::Decision RedisIdempotencyStore::Begin(const std::string& account,
                                                        const std::string& key,
                                                        const std::string& fingerprint,
                                                        IdempotentOutcome* replay,
                                                        Callback on_ready) {
  return DoBegin(account, key, fingerprint, absl::InfiniteFuture(), replay, std::move(on_ready));
}

IdempotencyStore::Decision RedisIdempotencyStore::DoBegin(
    const std::string& account, const std::string& key, const std::string& fingerprint,
    absl::Time deadline, IdempotentOutcome* replay, Callback on_ready) {
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
    // Finished here, not saved yet: Redis would still say "pending". Until the first
    // attempt to save it ends, a duplicate waits for it like the leader's own answer.
    if (auto it = completing_.find(redis_key); it != completing_.end()) {
      if (it->second.fingerprint != fingerprint) return Decision::kMismatch;
      if (!it->second.attempted) {
        it->second.waiters.push_back(std::move(on_ready));
        return Decision::kWait;
      }
      *replay = it->second.outcome;
      return Decision::kReplay;
    }
    if (grpc::Status refused = RefusedBeforeTrying(absl::Now()); !refused.ok()) {
      *replay = {refused, ""};
      return Decision::kUnavailable;
    }
    // Abandoned here, DEL not yet written: the script frees it first.
    if (auto it = abandoning_.find(redis_key); it != abandoning_.end()) {
      abandoned_claim = it->second;
    }
  }

  const std::string claim = NewClaim();
  // "wait" on our own claim: the script ran twice (a reply lost on a dead pooled
  // connection, then resent), so we did claim the key.
  auto claimed = [&claim](const redisReply* reply) {
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements < 2) return false;
    const std::string verdict = ReplyText(reply->element[0]);
    return verdict == "lead" || (verdict == "wait" && ReplyText(reply->element[1]) == claim);
  };
  absl::StatusOr<internal::RedisIdempotencyConnections::Claimed> ran =
      connections_->RunBegin({"EVAL", kBeginScript, "1", redis_key, fingerprint, claim,
                              Milliseconds(options_.claim_ttl), abandoned_claim},
                             claimed);
  auto unavailable = [&](const absl::Status& status) {
    ReportError(status);
    *replay = Unreachable();
    if (status.code() == absl::StatusCode::kUnavailable && !redis::IsNotReplicated(status)) {
      absl::MutexLock lock(&mu_);
      unreachable_until_ = absl::Now() + options_.unreachable_backoff;
    }
    return Decision::kUnavailable;
  };
  if (!ran.ok()) {
    // The script may have run all the same (its reply lost, or still queued in a frozen
    // Redis): let go of the claim, or a retry with this key would wait for it for
    // claim_ttl. The release only deletes the key while our claim holds it.
    absl::MutexLock lock(&mu_);
    QueueReleaseLocked(redis_key, claim);
  }
  if (!ran.ok()) return unavailable(ran.status());
  const redisReply* reply = ran->replies[0].get();
  if (reply->type == REDIS_REPLY_ERROR) {
    return unavailable(absl::UnavailableError(
        absl::StrCat(connections_->description(), ": Begin refused: ", ReplyText(reply))));
  }
  const bool shaped = reply->type == REDIS_REPLY_ARRAY && reply->elements >= 1;
  const std::string verdict = shaped ? ReplyText(reply->element[0]) : "";
  const std::string claim_seen = shaped && reply->elements >= 2 ? ReplyText(reply->element[1]) : "";

  if (claimed(reply) && !ran->replicated.ok()) {
    // Not on enough replicas: a failover could lose it while the call is in flight and
    // let a repeat lead a second time. Let it go (queued, like an Abandon()).
    {
      absl::MutexLock lock(&mu_);
      QueueReleaseLocked(redis_key, claim);
    }
    ReportError(ran->replicated);
    *replay = {grpc::Status(grpc::StatusCode::UNAVAILABLE,
                            "the idempotency key could not be stored durably; retry later"),
               ""};
    return Decision::kUnavailable;
  }
  if (claimed(reply)) {
    absl::MutexLock lock(&mu_);
    Lead& lead = leads_[redis_key];
    lead.claim = claim;
    lead.fingerprint = fingerprint;
    return Decision::kLead;
  }
  if (verdict == "mismatch") return Decision::kMismatch;
  if (verdict == "wait") {
    return WaitForClaim(redis_key, claim_seen, fingerprint, deadline, std::move(on_ready));
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

IdempotencyStore::Decision RedisIdempotencyStore::WaitForClaim(const std::string& redis_key,
                                                               const std::string& claim_seen,
                                                               const std::string& fingerprint,
                                                               absl::Time deadline,
                                                               Callback on_ready) {
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
  wait.waiters.push_back({std::move(on_ready), deadline});
  if (deadline < wait.next_poll) work_cv_.Signal();  // it ends before the next poll
  return Decision::kWait;
}

void RedisIdempotencyStore::BeginAsync(const std::string& account, const std::string& key,
                                       const std::string& fingerprint, absl::Time deadline,
                                       OnDecided decided, Callback on_ready) {
  grpc::Status refused;
  {
    absl::MutexLock lock(&mu_);
    if (begins_stopped_) {
      refused = ShuttingDown().status;
    } else if (begins_.size() >= options_.max_queued_begins) {
      refused = grpc::Status(grpc::StatusCode::UNAVAILABLE,
                             "too many idempotency keys wait for the idempotency store on this "
                             "replica; retry later");
    } else if (const std::string redis_key = RedisKey(account, key);
               leads_.count(redis_key) == 0 && completing_.count(redis_key) == 0) {
      // A key this process holds is answered from memory, whatever Redis does.
      refused = RefusedBeforeTrying(absl::Now());
    }
    if (refused.ok()) {
      begins_.push_back(
          {account, key, fingerprint, deadline, std::move(decided), std::move(on_ready)});
      return;
    }
  }
  std::move(decided)(Decision::kUnavailable, IdempotentOutcome{refused, ""});
}

void RedisIdempotencyStore::BeginLoop() {
  for (;;) {
    QueuedBegin begin;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return begins_stopped_ || !begins_.empty();
      };
      mu_.Await(absl::Condition(&ready));
      if (begins_.empty()) return;  // stopped, nothing left
      begin = std::move(begins_.front());
      begins_.pop_front();
      if (begins_stopped_) {
        mu_.Unlock();
        std::move(begin.decided)(Decision::kUnavailable, ShuttingDown());
        mu_.Lock();
        continue;
      }
    }
    if (absl::Now() >= begin.deadline) {
      std::move(begin.decided)(Decision::kUnavailable, DeadlinePassed());
      continue;
    }
    IdempotentOutcome replay;
    const Decision decision = DoBegin(begin.account, begin.key, begin.fingerprint, begin.deadline,
                                      &replay, std::move(begin.on_ready));
    std::move(begin.decided)(decision, std::move(replay));
  }
}

void RedisIdempotencyStore::Complete(const std::string& account, const std::string& key,
                                     IdempotentOutcome outcome, OnSaved saved) {
  const std::string redis_key = RedisKey(account, key);
  {
    absl::MutexLock lock(&mu_);
    auto it = leads_.find(redis_key);
    if (it != leads_.end()) {
      Lead& lead = it->second;
      Completing& completing = completing_[redis_key];
      completing.claim = lead.claim;
      completing.fingerprint = lead.fingerprint;
      completing.outcome = std::move(outcome);
      completing.waiters = std::move(lead.waiters);
      completing.saved = std::move(saved);
      leads_.erase(it);
      QueueSaveLocked(redis_key, completing);
      return;
    }
  }
  // Not a key this process leads (already completed or abandoned): nothing to save.
  if (saved) std::move(saved)();
}

void RedisIdempotencyStore::Abandon(const std::string& account, const std::string& key,
                                    const IdempotentOutcome& outcome) {
  const std::string redis_key = RedisKey(account, key);
  std::vector<Callback> waiters;
  {
    absl::MutexLock lock(&mu_);
    auto it = leads_.find(redis_key);
    if (it == leads_.end()) return;
    QueueReleaseLocked(redis_key, it->second.claim);
    waiters.swap(it->second.waiters);
    leads_.erase(it);
  }
  for (Callback& waiter : waiters) waiter(outcome);
}

void RedisIdempotencyStore::BackgroundLoop() {
  mu_.Lock();
  for (;;) {
    QueueRetries(absl::Now(), /*all=*/stopping_);
    if (!writes_.empty()) {
      RunWrites();
      // Stopping: each unsaved outcome gets the one last attempt just made.
      if (stopping_) break;
      continue;
    }
    if (stopping_) break;
    absl::Time earliest = absl::InfiniteFuture();
    for (const auto& [key, wait] : remote_) {
      earliest = std::min(earliest, wait.next_poll);
      for (const RemoteWaiter& waiter : wait.waiters) {
        earliest = std::min(earliest, waiter.deadline);
      }
    }
    for (const auto& [key, completing] : completing_) {
      if (completing.attempted) earliest = std::min(earliest, completing.next_attempt);
    }
    if (earliest > absl::Now()) {
      // Woken early by a write, a new wait or the destructor; the loop looks again.
      work_cv_.WaitWithDeadline(&mu_, earliest);
      continue;
    }
    PollDue();
  }
  mu_.Unlock();
}

void RedisIdempotencyStore::QueueRetries(absl::Time now, bool all) {
  for (auto& [redis_key, completing] : completing_) {
    // Not attempted yet: its write is queued or running.
    if (!completing.attempted || (!all && completing.next_attempt > now)) continue;
    completing.next_attempt = absl::InfiniteFuture();  // queued now
    // The claim recorded with the outcome: the key's lead claim is gone, but the script
    // only needs one that no other call holds (see kCompleteScript).
    QueueSaveLocked(redis_key, completing);
  }
}

void RedisIdempotencyStore::QueueSaveLocked(const std::string& redis_key,
                                            const Completing& completing) {
  const IdempotentOutcome& outcome = completing.outcome;
  writes_.push_back(
      {redis_key,
       {"EVAL", kCompleteScript, "1", redis_key, completing.claim, completing.fingerprint,
        Milliseconds(options_.ttl), std::to_string(static_cast<int>(outcome.status.error_code())),
        outcome.status.error_message(), outcome.status.error_details(), outcome.response},
       /*completing=*/true,
       completing.claim});
  work_cv_.Signal();
}

void RedisIdempotencyStore::QueueReleaseLocked(const std::string& redis_key,
                                               const std::string& claim) {
  writes_.push_back({redis_key,
                     {"EVAL", kAbandonScript, "1", redis_key, claim},
                     /*completing=*/false,
                     claim});
  abandoning_[redis_key] = claim;
  work_cv_.Signal();
}

void RedisIdempotencyStore::RunWrites() {
  std::vector<Write> writes;
  writes.swap(writes_);
  writes_running_ = writes.size();
  std::vector<std::vector<std::string>> commands;
  for (Write& write : writes) commands.push_back(std::move(write.command));
  mu_.Unlock();
  absl::StatusOr<std::vector<Reply>> replies = connections_->RunDurable(commands);
  // Per write: saved (or settled for good), or to be tried again.
  std::vector<bool> settled(writes.size(), false);
  if (replies.ok()) {
    for (size_t i = 0; i < writes.size(); ++i) {
      const redisReply* reply = (*replies)[i].get();
      if (reply->type == REDIS_REPLY_ERROR) {
        ReportError(absl::UnavailableError(absl::StrCat(connections_->description(), ": write to ",
                                                        writes[i].redis_key,
                                                        " refused: ", ReplyText(reply))));
        continue;
      }
      settled[i] = true;
      if (writes[i].completing && reply->type == REDIS_REPLY_INTEGER && reply->integer == 0) {
        ReportError(absl::FailedPreconditionError(absl::StrCat(
            "idempotency claim on ", writes[i].redis_key,
            " expired before the call finished and another call holds it: outcome not stored")));
      }
    }
  }
  if (!replies.ok()) {
    ReportError(absl::Status(replies.status().code(),
                             absl::StrCat(replies.status().message(), " (", writes.size(),
                                          " idempotency outcome(s) or releases not stored; "
                                          "outcomes are retried)")));
  }
  std::vector<absl::AnyInvocable<void() &&>> callbacks;
  mu_.Lock();
  const absl::Time now = absl::Now();
  for (size_t i = 0; i < writes.size(); ++i) {
    const Write& write = writes[i];
    if (write.completing) {
      SettleSave(write.redis_key, settled[i], now, &callbacks);
    } else if (auto it = abandoning_.find(write.redis_key);
               it != abandoning_.end() && it->second == write.claim) {
      // Released or not, Redis answers for the key again: a release that failed leaves
      // the claim to expire (its waiters elsewhere then get ABORTED). Unless a newer
      // Abandon() of the key replaced it.
      abandoning_.erase(it);
    }
  }
  writes_running_ = 0;
  if (callbacks.empty()) return;
  mu_.Unlock();
  for (auto& callback : callbacks) std::move(callback)();
  mu_.Lock();
}

void RedisIdempotencyStore::SettleSave(const std::string& redis_key, bool saved, absl::Time now,
                                       std::vector<absl::AnyInvocable<void() &&>>* callbacks) {
  auto it = completing_.find(redis_key);
  if (it == completing_.end()) return;
  Completing& completing = it->second;
  if (!completing.attempted) {
    // The first attempt ended: the leader answers and its waiters get the outcome now,
    // saved or not (the vendor did act; a repeat is kept from acting again by the claim).
    completing.attempted = true;
    completing.give_up_at = now + options_.ttl;
    completing.backoff = options_.first_save_retry;
    std::vector<Callback> waiters = std::move(completing.waiters);
    completing.waiters.clear();
    OnSaved on_saved = std::move(completing.saved);
    callbacks->push_back([waiters = std::move(waiters), outcome = completing.outcome,
                          on_saved = std::move(on_saved)]() mutable {
      for (Callback& waiter : waiters) waiter(outcome);
      if (on_saved) std::move(on_saved)();
    });
  }
  if (saved || stopping_ || now >= completing.give_up_at) {
    if (!saved) {
      ReportError(absl::UnavailableError(absl::StrCat(
          connections_->description(), ": the idempotency outcome under ", redis_key,
          stopping_ ? " was not saved before shutdown" : " could not be saved within its TTL",
          ": a repeat after its claim expires calls the vendor again")));
    }
    unsaved_bytes_ -= std::min(unsaved_bytes_, completing.bytes);
    completing_.erase(it);
    return;
  }
  if (completing.bytes == 0) {
    completing.bytes = redis_key.size() + completing.fingerprint.size() +
                       completing.outcome.response.size() +
                       completing.outcome.status.error_message().size() +
                       completing.outcome.status.error_details().size();
    unsaved_bytes_ += completing.bytes;
  }
  completing.next_attempt = now + completing.backoff;
  completing.backoff = std::min(completing.backoff * 2, options_.max_save_retry);
}

size_t RedisIdempotencyStore::QueuedBegins() const {
  absl::MutexLock lock(&mu_);
  return begins_.size();
}

size_t RedisIdempotencyStore::UnsavedOutcomes() const {
  absl::MutexLock lock(&mu_);
  size_t count = 0;
  for (const auto& [key, completing] : completing_) count += completing.attempted ? 1 : 0;
  return count;
}

void RedisIdempotencyStore::PollDue() {
  std::vector<RemoteKey> due;
  std::vector<std::vector<std::string>> commands;
  const absl::Time now = absl::Now();
  // Waiters whose call's deadline passed end now (their calls can finish), the others
  // wait on; a claim nobody waits for any more is not polled again.
  std::vector<Callback> expired;
  for (auto it = remote_.begin(); it != remote_.end();) {
    std::vector<RemoteWaiter>& waiters = it->second.waiters;
    auto keep = std::partition(waiters.begin(), waiters.end(),
                               [now](const RemoteWaiter& w) { return w.deadline > now; });
    for (auto w = keep; w != waiters.end(); ++w) expired.push_back(std::move(w->callback));
    waiters.erase(keep, waiters.end());
    it = waiters.empty() ? remote_.erase(it) : std::next(it);
  }
  if (!expired.empty()) {
    mu_.Unlock();
    const IdempotentOutcome passed = DeadlinePassed();
    for (Callback& callback : expired) callback(passed);
    mu_.Lock();
  }
  for (const auto& [key, wait] : remote_) {
    if (wait.next_poll > now) continue;
    due.push_back(key);
    commands.push_back(
        {"HMGET", key.first, "state", "fp", "claim", "code", "msg", "details", "resp"});
  }
  if (due.empty()) return;  // only deadlines were due
  mu_.Unlock();
  absl::StatusOr<std::vector<Reply>> replies = connections_->Run(commands);
  if (!replies.ok()) ReportError(replies.status());
  mu_.Lock();

  std::vector<std::pair<std::vector<RemoteWaiter>, IdempotentOutcome>> finished;
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
    for (RemoteWaiter& waiter : waiters) waiter.callback(outcome);
  }
  mu_.Lock();
}

}  // namespace inspection::pipeline
