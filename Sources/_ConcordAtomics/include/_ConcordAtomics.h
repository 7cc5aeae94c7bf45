// The few atomic operations Concord needs, over the compiler's `__atomic` builtins, a number
// per thread, and a hint to the processor's cache.
//
// NB: `Synchronization.Atomic` needs macOS 15, iOS 18, tvOS 18, watchOS 11 and visionOS 2,
// and the package supports older systems; swift-atomics would be a package dependency, and
// the package has none. These `static inline` functions are compiled into the Swift code that
// calls them and inlined there, so each is the single instruction (or compare-and-swap loop)
// the builtin produces; ThreadSanitizer sees them as the atomics they are. This module is
// internal to the package: it is no product.

#ifndef CONCORD_ATOMICS_H
#define CONCORD_ATOMICS_H

#include <stdint.h>
#include <stdbool.h>

// MARK: 32-bit counters

/// Reads `*address`, ordering nothing else.
static inline int32_t _concord_load_relaxed_i32(const int32_t *address) {
  return __atomic_load_n(address, __ATOMIC_RELAXED);
}

/// Reads `*address`; what the thread that wrote the value did before is visible afterwards.
static inline int32_t _concord_load_acquire_i32(const int32_t *address) {
  return __atomic_load_n(address, __ATOMIC_ACQUIRE);
}

/// Writes `value` to `*address`, ordering nothing else.
static inline void _concord_store_relaxed_i32(int32_t *address, int32_t value) {
  __atomic_store_n(address, value, __ATOMIC_RELAXED);
}

/// Adds `delta` to `*address` and returns the value before, ordering nothing else.
static inline int32_t _concord_fetch_add_relaxed_i32(int32_t *address, int32_t delta) {
  return __atomic_fetch_add(address, delta, __ATOMIC_RELAXED);
}

/// Subtracts `delta` from `*address` and returns the value before, as a reference count's
/// release does: what this thread did before happens before whatever a thread that later reads
/// the result with acquire order does, and this thread sees what the writers of the value
/// before did.
static inline int32_t _concord_fetch_sub_acq_rel_i32(int32_t *address, int32_t delta) {
  return __atomic_fetch_sub(address, delta, __ATOMIC_ACQ_REL);
}

/// Replaces `*address` with `desired` if it holds `expected`, ordering nothing else. Returns
/// the value found: `expected` when the exchange happened. NB: a strong exchange, so that the
/// value returned tells whether it happened.
static inline int32_t _concord_compare_exchange_relaxed_i32(
    int32_t *address, int32_t expected, int32_t desired) {
  __atomic_compare_exchange_n(
      address, &expected, desired, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
  return expected;
}

/// Replaces `*address` with `desired` if it holds `expected`, with release order when it does:
/// what this thread did before happens before whatever a thread that later reads the value
/// with acquire order does. Returns the value found: `expected` when the exchange happened.
static inline int32_t _concord_compare_exchange_release_i32(
    int32_t *address, int32_t expected, int32_t desired) {
  __atomic_compare_exchange_n(
      address, &expected, desired, 0, __ATOMIC_RELEASE, __ATOMIC_RELAXED);
  return expected;
}

// MARK: Word-sized values

/// Reads `*address`, ordering nothing else.
static inline intptr_t _concord_load_relaxed_word(const intptr_t *address) {
  return __atomic_load_n(address, __ATOMIC_RELAXED);
}

/// Reads `*address`: whatever the thread that wrote the value with release order did before
/// happens before what this thread does next.
static inline intptr_t _concord_load_acquire_word(const intptr_t *address) {
  return __atomic_load_n(address, __ATOMIC_ACQUIRE);
}

/// Reads `*address` in the single order of every sequentially consistent operation.
static inline intptr_t _concord_load_seq_cst_word(const intptr_t *address) {
  return __atomic_load_n(address, __ATOMIC_SEQ_CST);
}

/// Writes `value` to `*address`, ordering nothing else.
static inline void _concord_store_relaxed_word(intptr_t *address, intptr_t value) {
  __atomic_store_n(address, value, __ATOMIC_RELAXED);
}

/// Writes `value` to `*address`: what this thread did before happens before whatever a thread
/// that reads the value with acquire order does.
static inline void _concord_store_release_word(intptr_t *address, intptr_t value) {
  __atomic_store_n(address, value, __ATOMIC_RELEASE);
}

/// Writes `value` to `*address`, in the single order of every sequentially consistent
/// operation.
static inline void _concord_store_seq_cst_word(intptr_t *address, intptr_t value) {
  __atomic_store_n(address, value, __ATOMIC_SEQ_CST);
}

/// Adds `delta` to `*address`, ordering nothing else.
static inline void _concord_add_relaxed_word(intptr_t *address, intptr_t delta) {
  __atomic_fetch_add(address, delta, __ATOMIC_RELAXED);
}

/// Adds `delta` to `*address` with release order: what this thread did before happens before
/// whatever a thread that reads the result with acquire order does.
static inline void _concord_add_release_word(intptr_t *address, intptr_t delta) {
  __atomic_fetch_add(address, delta, __ATOMIC_RELEASE);
}

/// Adds `delta` to `*address`, in the single order of every sequentially consistent
/// operation.
static inline void _concord_add_seq_cst_word(intptr_t *address, intptr_t delta) {
  __atomic_fetch_add(address, delta, __ATOMIC_SEQ_CST);
}

/// Sets the bits of `bits` in `*address`, in the single order of every sequentially consistent
/// operation.
static inline void _concord_or_seq_cst_word(intptr_t *address, intptr_t bits) {
  __atomic_fetch_or(address, bits, __ATOMIC_SEQ_CST);
}

/// Replaces `*address` with `desired` if it holds `expected`, in the single order of every
/// sequentially consistent operation. Returns whether it did.
static inline _Bool _concord_compare_exchange_seq_cst_word(
    intptr_t *address, intptr_t expected, intptr_t desired) {
  return __atomic_compare_exchange_n(
      address, &expected, desired, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
}

/// Writes `value` to `*address` and returns the value before: what this thread did before
/// happens before whatever a thread that reads the value with acquire order does.
static inline intptr_t _concord_exchange_release_word(intptr_t *address, intptr_t value) {
  return __atomic_exchange_n(address, value, __ATOMIC_RELEASE);
}

// MARK: Threads

/// The calling thread's number plus one, or 0 until it has one; see `_concord_thread_index`.
extern _Thread_local intptr_t _concord_thread_number;

/// Gives the calling thread its number; see `_concord_thread_index`.
intptr_t _concord_number_thread(void);

/// A number of the calling thread, the same on every call while it runs: 0, 1, 2… No two
/// threads alive at once have the same one; a number below 64 goes to another thread once its
/// own exits, so that the threads alive keep the small numbers.
static inline intptr_t _concord_thread_index(void) {
  intptr_t number = _concord_thread_number;
  return (number != 0 ? number : _concord_number_thread()) - 1;
}

/// The object the calling thread marked, or null; see `_concord_exchange_thread_mark`.
extern _Thread_local const void *_concord_thread_mark;

/// What the calling thread marked, or null.
static inline const void *_concord_load_thread_mark(void) {
  return _concord_thread_mark;
}

/// Marks `mark` (an object's address, or null) as what the calling thread is doing, and
/// returns the mark it replaces, for the caller to put back. Only the calling thread sees it:
/// a callback that runs on this thread meanwhile can tell that it is called back from that
/// work, where taking a lock to ask would cost more than the callback.
static inline const void *_concord_exchange_thread_mark(const void *mark) {
  const void *outer = _concord_thread_mark;
  _concord_thread_mark = mark;
  return outer;
}

/// The lock the calling thread holds shared without a stripe of its own to count it in, or
/// null, and how many times it holds it; see `ReadWriteLock.lockShared()`. Only compared,
/// never followed: it is recorded while the thread holds the lock, which lives at least that
/// long, and cleared with its last hold.
extern _Thread_local const void *_concord_shared_lock;
extern _Thread_local intptr_t _concord_shared_depth;

/// How many times the calling thread holds `lock` shared, as `_concord_shared_lock` records
/// it: 0 when that records another lock, or none.
static inline intptr_t _concord_shared_depth_of(const void *lock) {
  return _concord_shared_lock == lock ? _concord_shared_depth : 0;
}

/// Whether `_concord_shared_lock` records a lock the calling thread holds shared.
static inline bool _concord_holds_a_shared_lock(void) {
  return _concord_shared_lock != 0;
}

/// Records that the calling thread holds `lock` shared `depth` times (null and 0: none).
static inline void _concord_store_shared_hold(const void *lock, intptr_t depth) {
  _concord_shared_lock = lock;
  _concord_shared_depth = depth;
}

/// Tells the processor that the calling thread spins, waiting for another.
static inline void _concord_spin_pause(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
  __asm__ __volatile__("yield");
#endif
}

// MARK: Memory

/// Asks the processor to bring the cache line at `address` in, for a write soon, without
/// waiting for it: a loop over objects scattered in memory (nodes reached through a hash
/// table) asks for the one a few steps ahead, so that each is in cache when the loop reaches
/// it. Only a hint: it never faults, whatever `address` is, and changes no value.
static inline void _concord_prefetch_for_write(const void *address) {
  __builtin_prefetch(address, 1, 3);
}

#endif
