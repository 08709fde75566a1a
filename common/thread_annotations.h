// Thread-safety annotations that clang checks (-Wthread-safety; scripts/thread-safety-check
// builds the control plane with it and fails on any finding). Under other compilers they expand
// to nothing. See https://clang.llvm.org/docs/ThreadSafetyAnalysis.html.
//
// Use them with retort::Mutex / MutexLock / CondVar (common/mutex.h): clang does not know that
// libstdc++'s std::mutex is a lock, so members guarded by a std::mutex go unchecked.
//
//   class Queue {
//    public:
//     void Push(int v) RETORT_EXCLUDES(mu_);
//    private:
//     void DropOldestLocked() RETORT_REQUIRES(mu_);
//     Mutex mu_;
//     std::deque<int> items_ RETORT_GUARDED_BY(mu_);
//   };
//
// The names carry a RETORT_ prefix because abseil's (and so gRPC's) headers already define the
// unprefixed GUARDED_BY, REQUIRES... with other expansions.
#pragma once

#if defined(__clang__)
#define RETORT_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define RETORT_THREAD_ANNOTATION(x)
#endif

// On a type: objects of it are locks ("capabilities"), e.g. RETORT_CAPABILITY("mutex").
#define RETORT_CAPABILITY(name) RETORT_THREAD_ANNOTATION(capability(name))
// On a type: an RAII object that holds a capability for its lifetime (MutexLock).
#define RETORT_SCOPED_CAPABILITY RETORT_THREAD_ANNOTATION(scoped_lockable)

// On a data member: reads and writes need the given lock held.
#define RETORT_GUARDED_BY(x) RETORT_THREAD_ANNOTATION(guarded_by(x))
// On a pointer member: what it points to needs the given lock held (the pointer itself does not).
#define RETORT_PT_GUARDED_BY(x) RETORT_THREAD_ANNOTATION(pt_guarded_by(x))

// On a lock member: the lock order (this one is taken before / after the named ones).
#define RETORT_ACQUIRED_BEFORE(...) RETORT_THREAD_ANNOTATION(acquired_before(__VA_ARGS__))
#define RETORT_ACQUIRED_AFTER(...) RETORT_THREAD_ANNOTATION(acquired_after(__VA_ARGS__))

// On a function: the caller must hold the locks (e.g. the *Locked helpers).
#define RETORT_REQUIRES(...) RETORT_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define RETORT_REQUIRES_SHARED(...) \
  RETORT_THREAD_ANNOTATION(requires_shared_capability(__VA_ARGS__))

// On a function: it takes / releases the locks (with no argument: the object it is called on).
#define RETORT_ACQUIRE(...) RETORT_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define RETORT_ACQUIRE_SHARED(...) RETORT_THREAD_ANNOTATION(acquire_shared_capability(__VA_ARGS__))
#define RETORT_RELEASE(...) RETORT_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define RETORT_RELEASE_SHARED(...) RETORT_THREAD_ANNOTATION(release_shared_capability(__VA_ARGS__))
#define RETORT_RELEASE_GENERIC(...) \
  RETORT_THREAD_ANNOTATION(release_generic_capability(__VA_ARGS__))
// On a function: it takes the lock when it returns `result` (true/false).
#define RETORT_TRY_ACQUIRE(...) RETORT_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))

// On a function: the caller must not hold the locks (the function takes them itself).
#define RETORT_EXCLUDES(...) RETORT_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))

// On a function: after it returns, the analysis assumes the lock is held (no runtime check).
#define RETORT_ASSERT_CAPABILITY(x) RETORT_THREAD_ANNOTATION(assert_capability(x))
// On a function: it returns a reference to the named lock.
#define RETORT_RETURN_CAPABILITY(x) RETORT_THREAD_ANNOTATION(lock_returned(x))

// On a function: its body is not checked. Say why next to every use.
#define RETORT_NO_THREAD_SAFETY_ANALYSIS RETORT_THREAD_ANNOTATION(no_thread_safety_analysis)
