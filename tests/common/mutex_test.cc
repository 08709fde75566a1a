#include "common/mutex.h"

#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>
#include <thread>

namespace retort {
namespace {

using std::chrono::milliseconds;

// Whether nobody (this thread included) holds `mu`.
bool IsFree(Mutex& mu) {
  if (!mu.TryLock()) return false;
  mu.Unlock();
  return true;
}

// A flag handed from one thread to another, written the way retort's classes are.
class Flag {
 public:
  void Set() RETORT_EXCLUDES(mu_) {
    {
      MutexLock lock(mu_);
      set_ = true;
    }
    cv_.NotifyAll();
  }
  bool WaitFor(milliseconds d) RETORT_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    return cv_.WaitFor(mu_, d, [this]() RETORT_REQUIRES(mu_) { return set_; });
  }
  void Wait() RETORT_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    cv_.Wait(mu_, [this]() RETORT_REQUIRES(mu_) { return set_; });
  }
  // The predicate throws: the exception leaves the wait with the mutex held, and MutexLock
  // releases it once (a second owner would deadlock TryLock below, a double unlock crash).
  void WaitWithThrowingPredicate() RETORT_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    cv_.Wait(mu_, []() -> bool { throw std::runtime_error("predicate"); });
  }
  bool Free() RETORT_EXCLUDES(mu_) { return IsFree(mu_); }

 private:
  Mutex mu_;
  CondVar cv_;
  bool set_ RETORT_GUARDED_BY(mu_) = false;
};

TEST(MutexTest, WaitReturnsOnceAnotherThreadSets) {
  Flag flag;
  std::thread setter([&] {
    std::this_thread::sleep_for(milliseconds(20));
    flag.Set();
  });
  flag.Wait();
  setter.join();
  EXPECT_TRUE(flag.WaitFor(milliseconds(0)));
}

TEST(MutexTest, WaitForTimesOutWhenNobodySets) {
  Flag flag;
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(flag.WaitFor(milliseconds(30)));
  EXPECT_GE(std::chrono::steady_clock::now() - start, milliseconds(30));
  EXPECT_TRUE(flag.Free());
}

TEST(MutexTest, ThrowingPredicateLeavesTheMutexFree) {
  Flag flag;
  EXPECT_THROW(flag.WaitWithThrowingPredicate(), std::runtime_error);
  EXPECT_TRUE(flag.Free());
}

TEST(MutexTest, WaitUntilWithoutPredicateReportsTimeout) {
  Mutex mu;
  CondVar cv;
  MutexLock lock(mu);
  EXPECT_EQ(cv.WaitUntil(mu, std::chrono::steady_clock::now() + milliseconds(5)),
            std::cv_status::timeout);
}

TEST(MutexTest, MutexLockUnlocksAndRelocksWithinItsScope) {
  Mutex mu;
  {
    MutexLock lock(mu);
    EXPECT_FALSE(IsFree(mu));
    lock.Unlock();
    EXPECT_TRUE(IsFree(mu));
    lock.Lock();
    EXPECT_FALSE(IsFree(mu));
  }
  EXPECT_TRUE(IsFree(mu));  // released by the destructor
  {
    MutexLock lock(mu);
    lock.Unlock();
  }  // the destructor does not unlock a second time
  EXPECT_TRUE(IsFree(mu));
}

}  // namespace
}  // namespace retort
