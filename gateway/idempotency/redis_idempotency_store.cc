#include "gateway/idempotency/redis_idempotency_store.h"

#include <hiredis/hiredis.h>
#include <pthread.h>
#include <signal.h>
#include <sys/time.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

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

// --- URL parsing (same grammar as the event log's redis:// URLs, plus ?prefix=).

absl::Status InvalidUrl(const std::string& what) {
  // Never includes the URL: it may carry the password.
  return absl::InvalidArgumentError(absl::StrCat("redis idempotency store URL: ", what));
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool PercentDecode(const std::string& in, std::string* out) {
  out->clear();
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out->push_back(in[i]);
      continue;
    }
    if (i + 2 >= in.size() || HexValue(in[i + 1]) < 0 || HexValue(in[i + 2]) < 0) return false;
    out->push_back(static_cast<char>(HexValue(in[i + 1]) * 16 + HexValue(in[i + 2])));
    i += 2;
  }
  return true;
}

bool ParsePort(const std::string& text, int* port) {
  return !text.empty() && text.size() <= 5 &&
         std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
         absl::SimpleAtoi(text, port) && *port >= 1 && *port <= 65535;
}

// --- hiredis plumbing.

// hiredis writes with write(2), which raises SIGPIPE when Redis has closed the
// connection. A library must not rely on the binary ignoring SIGPIPE, so each round trip
// runs with SIGPIPE blocked in this thread and a SIGPIPE it raised is consumed before
// unblocking (the write then fails with EPIPE, handled like any lost connection). The
// event log's RedisConnection does the same.
class ScopedSigpipeBlock {
 public:
  ScopedSigpipeBlock() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_, &previous_);
  }
  ~ScopedSigpipeBlock() {
    if (sigismember(&previous_, SIGPIPE) == 1) return;
    sigset_t pending;
    if (sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE) == 1) {
      const timespec zero{0, 0};
      while (sigtimedwait(&pipe_, nullptr, &zero) == -1 && errno == EINTR) {
      }
    }
    pthread_sigmask(SIG_SETMASK, &previous_, nullptr);
  }
  ScopedSigpipeBlock(const ScopedSigpipeBlock&) = delete;
  ScopedSigpipeBlock& operator=(const ScopedSigpipeBlock&) = delete;

 private:
  sigset_t pipe_;
  sigset_t previous_;
};

struct ReplyDeleter {
  void operator()(redisReply* reply) const { freeReplyObject(reply); }
};
using Reply = std::unique_ptr<redisReply, ReplyDeleter>;

struct ContextDeleter {
  void operator()(redisContext* context) const { redisFree(context); }
};

// One hiredis connection; `used` once a round trip on it has succeeded.
struct Connection {
  std::unique_ptr<redisContext, ContextDeleter> context;
  bool used = false;
};

}  // namespace

namespace internal {

// Synchronous hiredis connections to one Redis, reused across calls. Thread-safe.
// A connection that failed is dropped, never reused.
class RedisIdempotencyConnections {
 public:
  RedisIdempotencyConnections(RedisIdempotencyUrl url, absl::Duration connect_timeout,
                              absl::Duration command_timeout)
      : url_(std::move(url)),
        description_(url_.Describe()),
        connect_timeout_(connect_timeout),
        command_timeout_(command_timeout) {}

  // Sends `commands` in one write and reads their replies in order. Unavailable on a
  // transport failure. When a pooled connection turns out to be dead (Redis restarted),
  // the commands are sent once more on a fresh connection, so they must be safe to
  // repeat (the scripts are: see Begin's own-claim check).
  absl::StatusOr<std::vector<Reply>> Run(const std::vector<std::vector<std::string>>& commands) {
    for (int attempt = 0;; ++attempt) {
      absl::StatusOr<std::unique_ptr<Connection>> connection = Acquire();
      if (!connection.ok()) return connection.status();
      const bool reused = (*connection)->used;
      absl::StatusOr<std::vector<Reply>> replies = RoundTrip(**connection, commands);
      if (replies.ok()) {
        (*connection)->used = true;
        Release(*std::move(connection));
        return replies;
      }
      if (!reused || attempt > 0) return replies.status();
      DropIdle();  // they are likely just as dead
    }
  }

  // Opens one connection (and keeps it): surfaces a refused AUTH or SELECT early.
  absl::Status Probe() {
    absl::StatusOr<std::unique_ptr<Connection>> connection = Open();
    if (!connection.ok()) return connection.status();
    Release(*std::move(connection));
    return absl::OkStatus();
  }

  const std::string& description() const { return description_; }

 private:
  static constexpr size_t kMaxIdle = 8;

  absl::StatusOr<std::unique_ptr<Connection>> Acquire() {
    {
      absl::MutexLock lock(&mu_);
      if (!idle_.empty()) {
        std::unique_ptr<Connection> connection = std::move(idle_.back());
        idle_.pop_back();
        return connection;
      }
    }
    return Open();
  }

  void Release(std::unique_ptr<Connection> connection) {
    absl::MutexLock lock(&mu_);
    if (idle_.size() < kMaxIdle) idle_.push_back(std::move(connection));
  }

  void DropIdle() {
    std::vector<std::unique_ptr<Connection>> dropped;
    absl::MutexLock lock(&mu_);
    dropped.swap(idle_);
  }

  absl::StatusOr<std::unique_ptr<Connection>> Open() {
    auto connection = std::make_unique<Connection>();
    connection->context.reset(
        redisConnectWithTimeout(url_.host.c_str(), url_.port, absl::ToTimeval(connect_timeout_)));
    redisContext* context = connection->context.get();
    if (context == nullptr) {
      return absl::UnavailableError(absl::StrCat(description_, ": cannot allocate a connection"));
    }
    if (context->err != 0) {
      return absl::UnavailableError(
          absl::StrCat(description_, ": cannot connect: ", context->errstr));
    }
    if (redisSetTimeout(context, absl::ToTimeval(command_timeout_)) != REDIS_OK) {
      return absl::UnavailableError(absl::StrCat(description_, ": cannot set the socket timeout"));
    }
    redisEnableKeepAlive(context);

    std::vector<std::vector<std::string>> handshake;
    if (!url_.password.empty()) {
      std::vector<std::string> auth = {"AUTH"};
      if (!url_.user.empty()) auth.push_back(url_.user);
      auth.push_back(url_.password);
      handshake.push_back(std::move(auth));
    }
    if (url_.db != 0) handshake.push_back({"SELECT", std::to_string(url_.db)});
    if (handshake.empty()) return connection;
    absl::StatusOr<std::vector<Reply>> replies = RoundTrip(*connection, handshake);
    if (!replies.ok()) return replies.status();
    for (size_t i = 0; i < replies->size(); ++i) {
      const redisReply* reply = (*replies)[i].get();
      if (reply->type != REDIS_REPLY_ERROR) continue;
      // Redis does not echo AUTH arguments, so the reply text is safe to show.
      const std::string text = ReplyText(reply);
      if (handshake[i][0] == "AUTH" || text.rfind("NOAUTH", 0) == 0) {
        return absl::PermissionDeniedError(absl::StrCat(description_, ": AUTH refused: ", text));
      }
      return absl::InvalidArgumentError(absl::StrCat(description_, ": SELECT refused: ", text));
    }
    return connection;
  }

  absl::StatusOr<std::vector<Reply>> RoundTrip(
      Connection& connection, const std::vector<std::vector<std::string>>& commands) {
    redisContext* context = connection.context.get();
    for (const std::vector<std::string>& args : commands) {
      std::vector<const char*> argv;
      std::vector<size_t> lengths;
      for (const std::string& arg : args) {
        argv.push_back(arg.data());
        lengths.push_back(arg.size());
      }
      if (redisAppendCommandArgv(context, static_cast<int>(argv.size()), argv.data(),
                                 lengths.data()) != REDIS_OK) {
        return absl::UnavailableError(absl::StrCat(description_, ": cannot queue a command"));
      }
    }
    ScopedSigpipeBlock no_sigpipe;
    std::vector<Reply> replies;
    for (size_t i = 0; i < commands.size(); ++i) {
      void* reply = nullptr;
      errno = 0;
      const int result = redisGetReply(context, &reply);
      const int saved_errno = errno;
      if (result != REDIS_OK || reply == nullptr) {
        const bool timed_out =
            context->err == REDIS_ERR_IO && (saved_errno == EAGAIN || saved_errno == EWOULDBLOCK);
        return absl::UnavailableError(absl::StrCat(
            description_, ": command failed: ", timed_out ? "timed out" : context->errstr));
      }
      replies.emplace_back(static_cast<redisReply*>(reply));
    }
    return replies;
  }

  const RedisIdempotencyUrl url_;
  const std::string description_;
  const absl::Duration connect_timeout_;
  const absl::Duration command_timeout_;
  absl::Mutex mu_;
  std::vector<std::unique_ptr<Connection>> idle_ ABSL_GUARDED_BY(mu_);
};

}  // namespace internal

std::string RedisIdempotencyUrl::Describe() const {
  const std::string shown_host = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  return absl::StrCat("redis://", shown_host, ":", port, "/", db);
}

absl::StatusOr<RedisIdempotencyUrl> ParseRedisIdempotencyUrl(const std::string& url_text) {
  constexpr char kScheme[] = "redis://";
  if (url_text.rfind("rediss://", 0) == 0) {
    return InvalidUrl("rediss:// (TLS) is not supported; use redis://");
  }
  if (url_text.rfind(kScheme, 0) != 0) return InvalidUrl("must start with redis://");
  std::string rest = url_text.substr(sizeof(kScheme) - 1);
  RedisIdempotencyUrl url;

  // The credentials end at the LAST '@', so a password may hold raw '/', '?' or '@'.
  if (const size_t at = rest.rfind('@'); at != std::string::npos) {
    const std::string credentials = rest.substr(0, at);
    rest = rest.substr(at + 1);
    const size_t colon = credentials.find(':');
    if (colon == std::string::npos) {
      return InvalidUrl("credentials must be ':password' or 'user:password'");
    }
    if (!PercentDecode(credentials.substr(0, colon), &url.user)) {
      return InvalidUrl("user name has a malformed %-escape");
    }
    if (!PercentDecode(credentials.substr(colon + 1), &url.password)) {
      return InvalidUrl("password has a malformed %-escape");
    }
    if (url.password.empty()) return InvalidUrl("password after ':' is empty");
  }
  if (rest.find('#') != std::string::npos) return InvalidUrl("a fragment ('#') is not allowed");

  const size_t query_start = rest.find('?');
  const std::string before_query = rest.substr(0, query_start);
  const size_t slash = before_query.find('/');
  const std::string host_port = before_query.substr(0, slash);
  std::string port_text;
  bool has_port = false;
  if (!host_port.empty() && host_port[0] == '[') {
    const size_t close = host_port.find(']');
    if (close == std::string::npos) return InvalidUrl("IPv6 host is missing its closing ']'");
    url.host = host_port.substr(1, close - 1);
    const std::string after = host_port.substr(close + 1);
    if (!after.empty() && after[0] != ':') return InvalidUrl("expected ':port' after the host");
    has_port = !after.empty();
    if (has_port) port_text = after.substr(1);
  } else {
    const size_t colon = host_port.find(':');
    url.host = host_port.substr(0, colon);
    has_port = colon != std::string::npos;
    if (has_port) port_text = host_port.substr(colon + 1);
    for (char c : url.host) {
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != '_') {
        return InvalidUrl("host has an invalid character");
      }
    }
  }
  if (url.host.empty()) return InvalidUrl("host is missing");
  if (has_port && !ParsePort(port_text, &url.port)) {
    return InvalidUrl("port must be a number from 1 to 65535");
  }
  if (slash != std::string::npos) {
    const std::string db_text = before_query.substr(slash + 1);
    if (!db_text.empty() &&
        (db_text.size() > 9 || !std::all_of(db_text.begin(), db_text.end(), ::isdigit) ||
         !absl::SimpleAtoi(db_text, &url.db))) {
      return InvalidUrl("db (the path) must be a non-negative integer");
    }
  }
  if (query_start != std::string::npos && query_start + 1 < rest.size()) {
    const std::string query = rest.substr(query_start + 1);
    if (query.rfind("prefix=", 0) != 0 || query.find('&') != std::string::npos) {
      return InvalidUrl("unknown query parameter (only 'prefix' is supported, once)");
    }
    if (!PercentDecode(query.substr(7), &url.prefix)) {
      return InvalidUrl("prefix has a malformed %-escape");
    }
    if (url.prefix.empty()) return InvalidUrl("prefix is empty");
  }
  return url;
}

absl::StatusOr<std::unique_ptr<RedisIdempotencyStore>> RedisIdempotencyStore::Open(
    const std::string& url_text, RedisIdempotencyOptions options) {
  absl::StatusOr<RedisIdempotencyUrl> url = ParseRedisIdempotencyUrl(url_text);
  if (!url.ok()) return url.status();
  if (options.ttl <= absl::ZeroDuration() || options.claim_ttl <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("redis idempotency store: TTLs must be positive");
  }
  auto connections = std::make_unique<internal::RedisIdempotencyConnections>(
      *url, options.connect_timeout, options.command_timeout);
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
  absl::StatusOr<std::vector<Reply>> replies = connections_->Run(commands);
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
