// retort::Mutex, MutexLock and CondVar: std::mutex and std::condition_variable with the
// annotations clang's thread-safety analysis understands (common/thread_annotations.h).
//
//   Mutex mu_;
//   CondVar cv_;
//   bool ready_ RETORT_GUARDED_BY(mu_) = false;
//
//   void Wait() {
//     MutexLock lock(mu_);
//     cv_.Wait(mu_, [this]() RETORT_REQUIRES(mu_) { return ready_; });
//   }
//
// A predicate runs with the mutex held, but clang analyses a lambda as a function of its own:
// annotate it RETORT_REQUIRES(mu_) as above (CondVar's waits themselves require the mutex).
//
// Threading: Mutex is a plain non-recursive exclusive lock; CondVar waits on exactly one Mutex
// at a time, like std::condition_variable. Neither is copyable or movable.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <type_traits>

#include "common/thread_annotations.h"

namespace retort {

class CondVar;

class RETORT_CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() RETORT_ACQUIRE() { mu_.lock(); }
  void Unlock() RETORT_RELEASE() { mu_.unlock(); }
  bool TryLock() RETORT_TRY_ACQUIRE(true) { return mu_.try_lock(); }
  // Tells the analysis the caller holds this mutex (e.g. in a callback the owner invokes under
  // it). Checks nothing at run time.
  void AssertHeld() const RETORT_ASSERT_CAPABILITY(this) {}

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Holds a Mutex from construction to destruction, like std::lock_guard; Unlock() and Lock() let
// a scope drop it around a call (a callback, a blocking write) and take it again.
class RETORT_SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) RETORT_ACQUIRE(mu) : mu_(mu) { mu_.Lock(); }
  ~MutexLock() RETORT_RELEASE() {
    if (held_) mu_.Unlock();
  }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  void Unlock() RETORT_RELEASE() {
    mu_.Unlock();
    held_ = false;
  }
  void Lock() RETORT_ACQUIRE() {
    mu_.Lock();
    held_ = true;
  }

 private:
  Mutex& mu_;
  bool held_ = true;
};

// std::condition_variable over a retort::Mutex the caller holds. Every wait requires the mutex,
// releases it while blocked and holds it again when it returns (also when it throws).
class CondVar {
 public:
  CondVar() = default;
  CondVar(const CondVar&) = delete;
  CondVar& operator=(const CondVar&) = delete;

  void NotifyOne() { cv_.notify_one(); }
  void NotifyAll() { cv_.notify_all(); }

  // May wake spuriously.
  void Wait(Mutex& mu) RETORT_REQUIRES(mu) {
    WithLock(mu, [&](std::unique_lock<std::mutex>& lock) { cv_.wait(lock); });
  }
  // Until pred() holds.
  template <typename Predicate>
  void Wait(Mutex& mu, Predicate pred) RETORT_REQUIRES(mu) {
    WithLock(mu, [&](std::unique_lock<std::mutex>& lock) { cv_.wait(lock, pred); });
  }
  // std::cv_status::timeout when `d` passed; may wake spuriously.
  template <typename Rep, typename Period>
  std::cv_status WaitFor(Mutex& mu, std::chrono::duration<Rep, Period> d) RETORT_REQUIRES(mu) {
    return WithLock(mu, [&](std::unique_lock<std::mutex>& lock) { return cv_.wait_for(lock, d); });
  }
  // Until pred() holds or `d` passed; returns pred().
  template <typename Rep, typename Period, typename Predicate>
  bool WaitFor(Mutex& mu, std::chrono::duration<Rep, Period> d, Predicate pred)
      RETORT_REQUIRES(mu) {
    return WithLock(
        mu, [&](std::unique_lock<std::mutex>& lock) { return cv_.wait_for(lock, d, pred); });
  }
  template <typename Clock, typename Duration>
  std::cv_status WaitUntil(Mutex& mu, std::chrono::time_point<Clock, Duration> t)
      RETORT_REQUIRES(mu) {
    return WithLock(mu,
                    [&](std::unique_lock<std::mutex>& lock) { return cv_.wait_until(lock, t); });
  }
  // Until pred() holds or `t` passed; returns pred().
  template <typename Clock, typename Duration, typename Predicate>
  bool WaitUntil(Mutex& mu, std::chrono::time_point<Clock, Duration> t, Predicate pred)
      RETORT_REQUIRES(mu) {
    return WithLock(
        mu, [&](std::unique_lock<std::mutex>& lock) { return cv_.wait_until(lock, t, pred); });
  }

 private:
  // Runs f on a std::unique_lock that adopts the held mutex and gives it back un-owned, so that
  // the caller's MutexLock still owns it afterwards, also when f throws.
  template <typename F>
  static std::invoke_result_t<F&, std::unique_lock<std::mutex>&> WithLock(Mutex& mu, F f) {
    std::unique_lock<std::mutex> lock(mu.mu_, std::adopt_lock);
    struct Disown {
      std::unique_lock<std::mutex>& lock;
      ~Disown() { lock.release(); }
    } disown{lock};
    return f(lock);
  }

  std::condition_variable cv_;
};

}  // namespace retort
