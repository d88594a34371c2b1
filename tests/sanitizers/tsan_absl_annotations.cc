// ThreadSanitizer builds only (INSPECTION_GATEWAY_SANITIZE=thread; linked into every
// executable of that build): makes Debian's absl::Mutex, absl::CondVar and absl::Notification
// visible to TSan.
//
// Why: Debian's libabsl_synchronization is not built with TSan, so its lock is a CAS on a word
// in uninstrumented code; TSan sees no acquire or release and reports every access our code
// makes under an absl::MutexLock as a race (and gRPC's own locks, which are absl::Mutex too).
// Abseil built with TSan annotates itself with the __tsan_mutex_* calls; this file does the
// same from outside: each public entry point below is defined here, in the executable, so the
// dynamic linker binds every caller (our code, gRPC, Abseil itself through its PLT) to it; it
// tells TSan what the call does and calls the real function (dlsym(RTLD_NEXT)).
//
// What TSan then sees: Lock/Unlock as a write lock, Reader* as a read lock; Await and
// CondVar::Wait* release the mutex and take it back; Notify releases the notification and the
// WaitForNotification* calls acquire it. Between the pre and post annotations TSan ignores the
// thread's accesses (as in Abseil's own annotations): conditions that Abseil evaluates inside
// a lock call are not checked. Notification::HasBeenNotified() is inline (an atomic load in our
// code): data handed over through it alone is not covered; use WaitForNotification*.
#include <dlfcn.h>
#include <sanitizer/tsan_interface.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace {

// The real function named `symbol` (the next definition after this executable's), or abort:
// a renamed symbol (another Abseil version or namespace) must fail loudly, not silently
// leave the locks invisible.
void* Real(const char* symbol) {
  void* fn = dlsym(RTLD_NEXT, symbol);
  if (fn == nullptr) {
    std::fprintf(stderr, "tsan_absl_annotations: %s not found in the loaded Abseil\n", symbol);
    std::abort();
  }
  return fn;
}

#define REAL(type, symbol) static const auto real = reinterpret_cast<type>(Real(symbol))

// Abseil calls some of these entry points from others (AwaitWithTimeout calls
// AwaitWithDeadline, Notify locks the notification's Mutex), and those inner calls come here
// too: only the outermost one on a thread is annotated, or TSan would see a mutex released
// twice.
thread_local int depth = 0;
class Entry {
 public:
  Entry() : outer_(depth++ == 0) {}
  ~Entry() { --depth; }
  Entry(const Entry&) = delete;
  Entry& operator=(const Entry&) = delete;
  bool outer() const { return outer_; }

 private:
  const bool outer_;
};

constexpr unsigned kRead = __tsan_mutex_read_lock;
constexpr unsigned kTry = __tsan_mutex_try_lock;
constexpr unsigned kFailed = __tsan_mutex_try_lock_failed;

// Acquisition of `mu` that cannot fail (Lock, LockWhen*, ReaderLock*).
template <typename Fn>
auto Acquire(void* mu, unsigned flags, Fn&& call) {
  Entry entry;
  if (!entry.outer()) return call();
  __tsan_mutex_pre_lock(mu, flags);
  auto result = call();
  __tsan_mutex_post_lock(mu, flags, 0);
  return result;
}

// A held `mu` released and taken back inside the call (Await*, CondVar::Wait*). The thread's
// accesses stay ignored until the mutex is ours again: the call evaluates conditions
// meanwhile.
template <typename Fn>
auto ReleaseAndReacquire(void* mu, Fn&& call) {
  Entry entry;
  if (!entry.outer()) return call();
  __tsan_mutex_pre_unlock(mu, 0);
  auto result = call();
  __tsan_mutex_post_unlock(mu, 0);
  __tsan_mutex_pre_lock(mu, 0);
  __tsan_mutex_post_lock(mu, 0, 0);
  return result;
}

// Whether `caller` (a return address) lies in one of gRPC's libraries (libgrpc, libgrpc++,
// libgpr).
bool CalledFromGrpc(const void* caller) {
  Dl_info info;
  if (dladdr(caller, &info) == 0 || info.dli_fname == nullptr) return false;
  const char* slash = std::strrchr(info.dli_fname, '/');
  const char* base = slash != nullptr ? slash + 1 : info.dli_fname;
  return std::strncmp(base, "libgrpc", 7) == 0 || std::strncmp(base, "libgpr", 6) == 0;
}

}  // namespace

namespace absl {
ABSL_NAMESPACE_BEGIN

// gRPC frees its objects (a channel, a call's completion op, its thread pool) when a
// reference count in its uninstrumented code drops to zero: TSan cannot see that hand-off,
// so the last unlock of such a mutex on one thread and its destruction on another look like
// a race. The destruction of a mutex gRPC's own code destroys is therefore not annotated
// (TSan drops a freed block's mutex state when the block is freed); every other destruction,
// ours included, is.
Mutex::~Mutex() {
  REAL(void (*)(Mutex*), "_ZN4absl7debian35MutexD2Ev");
  Entry entry;
  if (entry.outer() && !CalledFromGrpc(__builtin_return_address(0))) {
    __tsan_mutex_destroy(this, 0);
  }
  real(this);
}

void Mutex::Lock() {
  REAL(void (*)(Mutex*), "_ZN4absl7debian35Mutex4LockEv");
  Acquire(this, 0, [&] { return (real(this), 0); });
}

void Mutex::ReaderLock() {
  REAL(void (*)(Mutex*), "_ZN4absl7debian35Mutex10ReaderLockEv");
  Acquire(this, kRead, [&] { return (real(this), 0); });
}

bool Mutex::TryLock() {
  REAL(bool (*)(Mutex*), "_ZN4absl7debian35Mutex7TryLockEv");
  Entry entry;
  if (!entry.outer()) return real(this);
  __tsan_mutex_pre_lock(this, kTry);
  const bool locked = real(this);
  __tsan_mutex_post_lock(this, kTry | (locked ? 0 : kFailed), 0);
  return locked;
}

bool Mutex::ReaderTryLock() {
  REAL(bool (*)(Mutex*), "_ZN4absl7debian35Mutex13ReaderTryLockEv");
  Entry entry;
  if (!entry.outer()) return real(this);
  __tsan_mutex_pre_lock(this, kRead | kTry);
  const bool locked = real(this);
  __tsan_mutex_post_lock(this, kRead | kTry | (locked ? 0 : kFailed), 0);
  return locked;
}

void Mutex::Unlock() {
  REAL(void (*)(Mutex*), "_ZN4absl7debian35Mutex6UnlockEv");
  Entry entry;
  if (!entry.outer()) return real(this);
  __tsan_mutex_pre_unlock(this, 0);
  real(this);
  __tsan_mutex_post_unlock(this, 0);
}

void Mutex::ReaderUnlock() {
  REAL(void (*)(Mutex*), "_ZN4absl7debian35Mutex12ReaderUnlockEv");
  Entry entry;
  if (!entry.outer()) return real(this);
  __tsan_mutex_pre_unlock(this, kRead);
  real(this);
  __tsan_mutex_post_unlock(this, kRead);
}

void Mutex::LockWhen(const Condition& cond) {
  REAL(void (*)(Mutex*, const Condition&), "_ZN4absl7debian35Mutex8LockWhenERKNS0_9ConditionE");
  Acquire(this, 0, [&] { return (real(this, cond), 0); });
}

bool Mutex::LockWhenWithTimeout(const Condition& cond, Duration timeout) {
  REAL(bool (*)(Mutex*, const Condition&, Duration),
       "_ZN4absl7debian35Mutex19LockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  return Acquire(this, 0, [&] { return real(this, cond, timeout); });
}

bool Mutex::LockWhenWithDeadline(const Condition& cond, Time deadline) {
  REAL(bool (*)(Mutex*, const Condition&, Time),
       "_ZN4absl7debian35Mutex20LockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  return Acquire(this, 0, [&] { return real(this, cond, deadline); });
}

void Mutex::ReaderLockWhen(const Condition& cond) {
  REAL(void (*)(Mutex*, const Condition&),
       "_ZN4absl7debian35Mutex14ReaderLockWhenERKNS0_9ConditionE");
  Acquire(this, kRead, [&] { return (real(this, cond), 0); });
}

bool Mutex::ReaderLockWhenWithTimeout(const Condition& cond, Duration timeout) {
  REAL(bool (*)(Mutex*, const Condition&, Duration),
       "_ZN4absl7debian35Mutex25ReaderLockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  return Acquire(this, kRead, [&] { return real(this, cond, timeout); });
}

bool Mutex::ReaderLockWhenWithDeadline(const Condition& cond, Time deadline) {
  REAL(bool (*)(Mutex*, const Condition&, Time),
       "_ZN4absl7debian35Mutex26ReaderLockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  return Acquire(this, kRead, [&] { return real(this, cond, deadline); });
}

void Mutex::Await(const Condition& cond) {
  REAL(void (*)(Mutex*, const Condition&), "_ZN4absl7debian35Mutex5AwaitERKNS0_9ConditionE");
  ReleaseAndReacquire(this, [&] { return (real(this, cond), 0); });
}

bool Mutex::AwaitWithTimeout(const Condition& cond, Duration timeout) {
  REAL(bool (*)(Mutex*, const Condition&, Duration),
       "_ZN4absl7debian35Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  return ReleaseAndReacquire(this, [&] { return real(this, cond, timeout); });
}

bool Mutex::AwaitWithDeadline(const Condition& cond, Time deadline) {
  REAL(bool (*)(Mutex*, const Condition&, Time),
       "_ZN4absl7debian35Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  return ReleaseAndReacquire(this, [&] { return real(this, cond, deadline); });
}

void CondVar::Wait(Mutex* mu) {
  REAL(void (*)(CondVar*, Mutex*), "_ZN4absl7debian37CondVar4WaitEPNS0_5MutexE");
  ReleaseAndReacquire(mu, [&] { return (real(this, mu), 0); });
}

bool CondVar::WaitWithTimeout(Mutex* mu, Duration timeout) {
  REAL(bool (*)(CondVar*, Mutex*, Duration),
       "_ZN4absl7debian37CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE");
  return ReleaseAndReacquire(mu, [&] { return real(this, mu, timeout); });
}

bool CondVar::WaitWithDeadline(Mutex* mu, Time deadline) {
  REAL(bool (*)(CondVar*, Mutex*, Time),
       "_ZN4absl7debian37CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE");
  return ReleaseAndReacquire(mu, [&] { return real(this, mu, deadline); });
}

void Notification::Notify() {
  REAL(void (*)(Notification*), "_ZN4absl7debian312Notification6NotifyEv");
  Entry entry;
  if (entry.outer()) __tsan_release(this);
  real(this);
}

void Notification::WaitForNotification() const {
  REAL(void (*)(const Notification*), "_ZNK4absl7debian312Notification19WaitForNotificationEv");
  Entry entry;
  real(this);
  if (entry.outer()) __tsan_acquire(const_cast<Notification*>(this));
}

bool Notification::WaitForNotificationWithTimeout(Duration timeout) const {
  REAL(bool (*)(const Notification*, Duration),
       "_ZNK4absl7debian312Notification30WaitForNotificationWithTimeoutENS0_8DurationE");
  Entry entry;
  const bool notified = real(this, timeout);
  if (notified && entry.outer()) __tsan_acquire(const_cast<Notification*>(this));
  return notified;
}

bool Notification::WaitForNotificationWithDeadline(Time deadline) const {
  REAL(bool (*)(const Notification*, Time),
       "_ZNK4absl7debian312Notification31WaitForNotificationWithDeadlineENS0_4TimeE");
  Entry entry;
  const bool notified = real(this, deadline);
  if (notified && entry.outer()) __tsan_acquire(const_cast<Notification*>(this));
  return notified;
}

ABSL_NAMESPACE_END
}  // namespace absl
