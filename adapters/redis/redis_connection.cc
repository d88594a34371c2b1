#include "adapters/redis/redis_connection.h"

#include <pthread.h>
#include <signal.h>
#include <sys/time.h>

#include <algorithm>
#include <cerrno>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace inspection::redis {
namespace {

// hiredis writes with write(2), which raises SIGPIPE when the server has closed the
// connection; the default action kills the process. A library must not rely on the
// binary ignoring SIGPIPE, so each command runs with SIGPIPE blocked in this thread, and
// a SIGPIPE our write raised is consumed before unblocking (the write itself then
// fails with EPIPE, which is handled like any lost connection). Same technique as
// libcurl's sigpipe_ignore.
class ScopedSigpipeBlock {
 public:
  ScopedSigpipeBlock() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_, &previous_);
    was_blocked_ = sigismember(&previous_, SIGPIPE) == 1;
  }
  ~ScopedSigpipeBlock() {
    if (was_blocked_) return;
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
  bool was_blocked_ = false;
};

std::string ErrorText(const redisReply& reply) {
  return reply.str != nullptr ? std::string(reply.str, reply.len) : std::string();
}

bool StartsWith(const std::string& text, const char* prefix) { return text.rfind(prefix, 0) == 0; }

// Removes `secret` from a server message before it reaches a Status (Redis does not
// echo AUTH arguments today; this keeps it that way should a version ever do).
std::string Scrub(std::string text, const std::string& secret) {
  if (secret.empty()) return text;
  for (size_t at = text.find(secret); at != std::string::npos; at = text.find(secret, at)) {
    text.replace(at, secret.size(), "***");
  }
  return text;
}

}  // namespace

absl::Status RedisErrorReplyToStatus(const redisReply& reply, const std::string& what) {
  const std::string text = ErrorText(reply);
  const std::string message = absl::StrCat(what, ": ", text);
  for (const char* prefix : {"LOADING", "BUSY", "MISCONF", "READONLY", "OOM", "MASTERDOWN",
                             "TRYAGAIN", "CLUSTERDOWN", "NOREPLICAS", "NOMASTERLINK"}) {
    if (StartsWith(text, prefix)) return absl::UnavailableError(message);
  }
  for (const char* prefix : {"NOAUTH", "WRONGPASS", "NOPERM"}) {
    if (StartsWith(text, prefix)) return absl::PermissionDeniedError(message);
  }
  if (StartsWith(text, "WRONGTYPE")) return absl::FailedPreconditionError(message);
  return absl::InternalError(message);
}

absl::StatusOr<std::unique_ptr<RedisConnection>> RedisConnection::Connect(
    const RedisUrl& url, const RedisAddress& address, const RedisTimeouts& timeouts,
    std::string description) {
  redisContext* context = redisConnectWithTimeout(address.host.c_str(), address.port,
                                                  absl::ToTimeval(timeouts.connect));
  if (context == nullptr) {
    return absl::UnavailableError(absl::StrCat(description, ": cannot allocate a connection"));
  }
  if (context->err != 0) {
    absl::Status status =
        absl::UnavailableError(absl::StrCat(description, ": cannot connect: ", context->errstr));
    redisFree(context);
    return status;
  }
  std::unique_ptr<RedisConnection> connection(new RedisConnection(context, description));
  connection->command_timeout_ = timeouts.command;
  if (redisSetTimeout(context, absl::ToTimeval(timeouts.command)) != REDIS_OK) {
    return absl::UnavailableError(absl::StrCat(description, ": cannot set the socket timeout"));
  }
  // Keep-alive notices a peer that vanished without closing (a dead node) on idle
  // pooled connections; hiredis already sets TCP_NODELAY.
  redisEnableKeepAlive(context);

  if (!url.password.empty()) {
    std::vector<std::string> auth = {"AUTH"};
    if (!url.user.empty()) auth.push_back(url.user);
    auth.push_back(url.password);
    absl::StatusOr<RedisReply> reply = connection->Command(auth);
    if (!reply.ok()) return reply.status();
    if ((*reply)->type == REDIS_REPLY_ERROR) {
      return absl::PermissionDeniedError(
          absl::StrCat(description, ": AUTH refused: ", Scrub(ErrorText(**reply), url.password)));
    }
  }
  if (url.db != 0) {
    absl::StatusOr<RedisReply> reply = connection->Command({"SELECT", std::to_string(url.db)});
    if (!reply.ok()) return reply.status();
    if ((*reply)->type == REDIS_REPLY_ERROR) {
      const std::string text = ErrorText(**reply);
      if (StartsWith(text, "NOAUTH")) {
        return absl::PermissionDeniedError(absl::StrCat(description, ": ", text));
      }
      return absl::InvalidArgumentError(absl::StrCat(description, ": SELECT refused: ", text));
    }
  }
  return connection;
}

namespace {

// ROLE's answer: the server's role and, for a primary, its connected replicas.
struct Role {
  std::string name;  // "master", "slave", "sentinel"; "" when ROLE was refused
  size_t replicas = 0;
};

absl::StatusOr<Role> AskRole(RedisConnection& connection) {
  absl::StatusOr<RedisReply> reply = connection.Command({"ROLE"});
  if (!reply.ok()) return reply.status();
  const redisReply& r = **reply;
  Role role;
  if (r.type == REDIS_REPLY_ERROR) return role;  // an ACL without ROLE: unknown
  if (r.type != REDIS_REPLY_ARRAY || r.elements < 1 || r.element[0]->str == nullptr) {
    return absl::InternalError(
        absl::StrCat(connection.description(), ": ROLE: unexpected reply from Redis"));
  }
  role.name.assign(r.element[0]->str, r.element[0]->len);
  if (role.name == "master" && r.elements >= 3 && r.element[2]->type == REDIS_REPLY_ARRAY) {
    role.replicas = r.element[2]->elements;
  }
  return role;
}

}  // namespace

absl::StatusOr<RedisAddress> AskSentinelsForPrimary(const RedisUrl& url,
                                                    const RedisOptions& options) {
  std::string unreachable;    // the last sentinel error, for the message
  bool unknown_name = false;  // a sentinel answered that it does not know the name
  for (const RedisAddress& sentinel : url.sentinels) {
    // A sentinel takes no SELECT and has its own password: connect with neither, then AUTH.
    RedisUrl plain;
    const std::string description = absl::StrCat("redis sentinel ", sentinel.Describe());
    absl::StatusOr<std::unique_ptr<RedisConnection>> connection =
        RedisConnection::Connect(plain, sentinel, options.timeouts, description);
    if (!connection.ok()) {
      unreachable = std::string(connection.status().message());
      continue;
    }
    if (!options.sentinel_password.empty()) {
      absl::StatusOr<RedisReply> auth = (*connection)->Command({"AUTH", options.sentinel_password});
      if (!auth.ok()) {
        unreachable = std::string(auth.status().message());
        continue;
      }
      if ((*auth)->type == REDIS_REPLY_ERROR) {
        return absl::PermissionDeniedError(
            absl::StrCat(description, ": AUTH refused (redis.sentinel_password): ",
                         Scrub(ErrorText(**auth), options.sentinel_password)));
      }
    }
    absl::StatusOr<RedisReply> reply =
        (*connection)->Command({"SENTINEL", "get-master-addr-by-name", url.master_name});
    if (!reply.ok()) {
      unreachable = std::string(reply.status().message());
      continue;
    }
    const redisReply& r = **reply;
    if (r.type == REDIS_REPLY_ERROR && StartsWith(ErrorText(r), "NOAUTH")) {
      return absl::PermissionDeniedError(absl::StrCat(
          description, ": the sentinel requires a password (redis.sentinel_password)"));
    }
    if (r.type == REDIS_REPLY_NIL) {
      unknown_name = true;
      continue;
    }
    int port = 0;
    if (r.type != REDIS_REPLY_ARRAY || r.elements != 2 || r.element[0]->str == nullptr ||
        r.element[1]->str == nullptr ||
        !absl::SimpleAtoi(absl::string_view(r.element[1]->str, r.element[1]->len), &port) ||
        port < 1 || port > 65535) {
      unreachable =
          absl::StrCat(description, ": unexpected answer to SENTINEL get-master-addr-by-name",
                       r.type == REDIS_REPLY_ERROR ? absl::StrCat(": ", ErrorText(r)) : "");
      continue;
    }
    return RedisAddress{std::string(r.element[0]->str, r.element[0]->len), port};
  }
  if (unknown_name && unreachable.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        url.Describe(), ": the sentinels do not monitor a primary named '", url.master_name, "'"));
  }
  return absl::UnavailableError(absl::StrCat(url.Describe(), ": no sentinel named the primary",
                                             unreachable.empty() ? "" : ": ", unreachable));
}

absl::StatusOr<std::unique_ptr<RedisConnection>> RedisConnection::Open(
    const RedisUrl& url, const RedisOptions& options) {
  RedisAddress address{url.host, url.port};
  std::string description = url.Describe();
  if (url.uses_sentinels()) {
    absl::StatusOr<RedisAddress> primary = AskSentinelsForPrimary(url, options);
    if (!primary.ok()) return primary.status();
    address = *std::move(primary);
    description = absl::StrCat(description, " (primary ", address.Describe(), ")");
  }
  absl::StatusOr<std::unique_ptr<RedisConnection>> connection =
      Connect(url, address, options.timeouts, description);
  if (!connection.ok()) return connection.status();
  absl::StatusOr<Role> role = AskRole(**connection);
  if (!role.ok()) return role.status();
  if (!role->name.empty() && role->name != "master") {
    return absl::UnavailableError(absl::StrCat(
        description, ": the server is a ", role->name,
        ", not the primary; nothing is written to it",
        url.uses_sentinels() ? " (a failover is under way: the sentinels are asked again)"
                             : " (point the URL at the primary, or use redis+sentinel://)"));
  }
  RedisConnection& opened = **connection;
  opened.auto_acks_ = options.min_replicas_acked < 0;
  opened.acks_checked_at_ = absl::Now();
  opened.required_acks_ =
      options.min_replicas_acked >= 0 ? options.min_replicas_acked : (role->replicas > 0 ? 1 : 0);
  opened.replica_ack_timeout_ = options.replica_ack_timeout;
  opened.completed_ = 0;
  return connection;
}

void RedisConnection::RefreshAutoAcks() {
  acks_checked_at_ = absl::Now();
  absl::StatusOr<Role> role = AskRole(*this);
  if (role.ok()) required_acks_ = role->replicas > 0 ? 1 : 0;
}

absl::Status RedisConnection::WaitForReplicas() {
  // Auto: a replica that joined since is waited for, one that left is not (a pooled
  // connection would otherwise keep the answer of the moment it opened for good).
  constexpr absl::Duration kAutoAcksRefresh = absl::Seconds(1);
  if (auto_acks_ && absl::Now() - acks_checked_at_ >= kAutoAcksRefresh) RefreshAutoAcks();
  if (required_acks_ <= 0) return absl::OkStatus();
  // The socket must outwait the server-side WAIT.
  absl::Status status = SetCommandTimeout(replica_ack_timeout_ + command_timeout_);
  if (!status.ok()) return status;
  const int64_t timeout_ms = std::max<int64_t>(1, absl::ToInt64Milliseconds(replica_ack_timeout_));
  absl::StatusOr<RedisReply> reply =
      Command({"WAIT", std::to_string(required_acks_), std::to_string(timeout_ms)});
  if (!reply.ok()) return reply.status();
  status = SetCommandTimeout(command_timeout_);
  if (!status.ok()) return status;
  if ((*reply)->type == REDIS_REPLY_ERROR) {
    return RedisErrorReplyToStatus(**reply, absl::StrCat(description_, ": WAIT"));
  }
  if ((*reply)->type != REDIS_REPLY_INTEGER) {
    return absl::InternalError(absl::StrCat(description_, ": WAIT: unexpected reply from Redis"));
  }
  const long long acked = (*reply)->integer;
  if (acked >= required_acks_) return absl::OkStatus();
  if (auto_acks_) {
    // The replica is gone (not merely slow): auto means the primary's word alone now.
    const int required = required_acks_;
    RefreshAutoAcks();
    if (required_acks_ == 0) return absl::OkStatus();
    required_acks_ = required;
  }
  absl::Status not_replicated = absl::UnavailableError(
      absl::StrCat(description_, ": the write reached ", acked, " of the ", required_acks_,
                   " replica(s) required (redis.min_replicas_acked) within ", timeout_ms,
                   " ms (redis.replica_ack_timeout_ms); not acknowledged"));
  not_replicated.SetPayload(kNotReplicatedPayloadUrl, absl::Cord("1"));
  return not_replicated;
}

RedisConnection::~RedisConnection() { redisFree(context_); }

absl::Status RedisConnection::TransportError(const char* what, int saved_errno) {
  broken_ = true;
  closed_by_server_ =
      context_->err == REDIS_ERR_EOF ||
      (context_->err == REDIS_ERR_IO &&
       (saved_errno == ECONNRESET || saved_errno == EPIPE || saved_errno == ECONNABORTED));
  const bool timed_out =
      context_->err == REDIS_ERR_IO && (saved_errno == EAGAIN || saved_errno == EWOULDBLOCK);
  return absl::UnavailableError(
      absl::StrCat(description_, ": ", what, ": ", timed_out ? "timed out" : context_->errstr));
}

absl::StatusOr<RedisReply> RedisConnection::Command(const std::vector<std::string>& args) {
  if (broken_) return absl::UnavailableError(absl::StrCat(description_, ": connection lost"));
  std::vector<const char*> argv;
  std::vector<size_t> lengths;
  argv.reserve(args.size());
  lengths.reserve(args.size());
  for (const std::string& arg : args) {
    argv.push_back(arg.data());
    lengths.push_back(arg.size());
  }
  ScopedSigpipeBlock no_sigpipe;
  errno = 0;
  void* reply =
      redisCommandArgv(context_, static_cast<int>(argv.size()), argv.data(), lengths.data());
  const int saved_errno = errno;
  if (reply == nullptr) return TransportError("command failed", saved_errno);
  ++completed_;
  RedisReply owned(static_cast<redisReply*>(reply));
  NoteErrorReply(*owned);
  return owned;
}

void RedisConnection::NoteErrorReply(const redisReply& reply) {
  if (reply.type == REDIS_REPLY_ERROR && StartsWith(ErrorText(reply), "READONLY")) {
    demoted_ = true;
  }
}

absl::StatusOr<std::vector<RedisReply>> RedisConnection::Pipeline(
    const std::vector<std::vector<std::string>>& commands) {
  if (broken_) return absl::UnavailableError(absl::StrCat(description_, ": connection lost"));
  for (const std::vector<std::string>& args : commands) {
    std::vector<const char*> argv;
    std::vector<size_t> lengths;
    for (const std::string& arg : args) {
      argv.push_back(arg.data());
      lengths.push_back(arg.size());
    }
    if (redisAppendCommandArgv(context_, static_cast<int>(argv.size()), argv.data(),
                               lengths.data()) != REDIS_OK) {
      return TransportError("cannot queue a command", 0);
    }
  }
  ScopedSigpipeBlock no_sigpipe;
  std::vector<RedisReply> replies;
  replies.reserve(commands.size());
  for (size_t i = 0; i < commands.size(); ++i) {
    void* reply = nullptr;
    errno = 0;
    const int result = redisGetReply(context_, &reply);
    const int saved_errno = errno;
    if (result != REDIS_OK || reply == nullptr)
      return TransportError("pipeline failed", saved_errno);
    replies.emplace_back(static_cast<redisReply*>(reply));
    NoteErrorReply(*replies.back());
  }
  ++completed_;
  return replies;
}

absl::Status RedisConnection::SetCommandTimeout(absl::Duration timeout) {
  if (redisSetTimeout(context_, absl::ToTimeval(timeout)) != REDIS_OK) {
    broken_ = true;
    return absl::UnavailableError(absl::StrCat(description_, ": cannot set the socket timeout"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<RedisConnection>> RedisConnectionPool::Acquire() {
  {
    absl::MutexLock lock(&mu_);
    if (!idle_.empty()) {
      std::unique_ptr<RedisConnection> connection = std::move(idle_.back());
      idle_.pop_back();
      return connection;
    }
  }
  return Open();
}

absl::StatusOr<std::unique_ptr<RedisConnection>> RedisConnectionPool::Open() {
  uint64_t generation;
  {
    absl::MutexLock lock(&mu_);
    generation = generation_;
  }
  // Connecting happens outside the lock: a slow connect must not hold up callers that
  // find an idle connection.
  absl::StatusOr<std::unique_ptr<RedisConnection>> connection =
      RedisConnection::Open(url_, options_);
  if (connection.ok()) (*connection)->generation_ = generation;
  return connection;
}

void RedisConnectionPool::Release(std::unique_ptr<RedisConnection> connection) {
  if (connection == nullptr) return;
  // A demoted primary, or with sentinels a lost connection (the primary may be gone): the
  // idle connections point at the same server, so none is reused.
  if (connection->demoted() || (connection->broken() && url_.uses_sentinels())) {
    DropIdle();
    return;
  }
  if (connection->broken()) return;
  absl::MutexLock lock(&mu_);
  if (connection->generation_ != generation_ || idle_.size() >= max_idle_) return;
  idle_.push_back(std::move(connection));
}

void RedisConnectionPool::DropIdle() {
  std::vector<std::unique_ptr<RedisConnection>> dropped;
  {
    absl::MutexLock lock(&mu_);
    ++generation_;
    dropped.swap(idle_);
  }
  // `dropped` closes its connections here, outside the lock.
}

}  // namespace inspection::redis
