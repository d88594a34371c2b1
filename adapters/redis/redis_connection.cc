#include "adapters/redis/redis_connection.h"

#include <pthread.h>
#include <signal.h>
#include <sys/time.h>

#include <cerrno>
#include <string>
#include <utility>
#include <vector>

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

absl::StatusOr<std::unique_ptr<RedisConnection>> RedisConnection::Open(
    const RedisUrl& url, const RedisTimeouts& timeouts) {
  const std::string description = url.Describe();
  redisContext* context =
      redisConnectWithTimeout(url.host.c_str(), url.port, absl::ToTimeval(timeouts.connect));
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
  connection->completed_ = 0;
  return connection;
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
  return RedisReply(static_cast<redisReply*>(reply));
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
      RedisConnection::Open(url_, timeouts_);
  if (connection.ok()) (*connection)->generation_ = generation;
  return connection;
}

void RedisConnectionPool::Release(std::unique_ptr<RedisConnection> connection) {
  if (connection == nullptr || connection->broken()) return;
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
