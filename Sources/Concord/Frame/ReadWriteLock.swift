import _ConcordAtomics

#if canImport(os)
  import os
#endif
#if canImport(Darwin)
  import Darwin
#elseif canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#endif

/// The map's lock: many readers at once, or one writer, whose hold is re-entrant.
///
/// A write takes it exclusively with ``lock()``, and may take it again on the same thread (a
/// write made from an `update` body joins the enclosing one). A reader that only looks takes it
/// shared with ``lockShared()``: readers on different threads neither wait for each other nor
/// write to a common cache line; they wait only for a write.
///
/// ```swift
/// if lock.lockShared() {
///   defer { lock.unlockShared() }
///   // read
/// } else {
///   // this thread holds it exclusively: read under `lock()`, which re-enters
/// }
/// ```
///
/// How. The exclusive side is an owned lock of the platform: `os_unfair_lock` on Darwin, a
/// pthread mutex elsewhere. A writer takes it, so that a thread waiting for the writer sleeps
/// in the kernel on a lock whose owner the kernel knows: on Darwin it lends that owner its
/// priority, and a main-thread `find` waiting behind a utility-QoS write speeds the write up
/// instead of waiting for it. Holding the owned lock, the writer raises `word`'s ``held`` bit,
/// then waits for the readers already in. A reader counts itself in its thread's stripe of a
/// striped counter, then checks the bit. Each side writes before it reads what the other
/// writes, in sequentially consistent order, so that at least one of them sees the other: a
/// reader that sees the bit steps back, and waits for the writer by taking and giving back
/// the owned lock (after a few checks, so that a short write costs no sleep). Once a writer
/// holds the bit, new readers step back: readers cannot starve it. A writer that still finds
/// readers in after a few checks sleeps on a condition variable; the last of them to leave
/// while the ``drainWaiting`` bit is up wakes it. Nothing waits by spinning for longer than
/// those few checks.
///
/// NB: not `pthread_rwlock_t`: its readers all write one word, twice per read, and on two
/// cores two readers went no faster than behind a mutex (`concurrent.read90` stayed about 2×
/// its floor; the benchmark's note still measures a dictionary behind one). Not
/// `Synchronization` either (see ``Lock``): ThreadSanitizer sees this lock through its C
/// atomics and pthread calls, and every pthread call's result is checked. The owning thread and
/// the depth make the exclusive side re-entrant: only the owner changes the depth, and other
/// threads read the owner only to learn that they are not it, which any value but their own
/// tells them, so relaxed accesses do. It is `package` so that the benchmarks' second floor
/// measures the same lock.
@usableFromInline
package final class ReadWriteLock: @unchecked Sendable {
  // NB: @unchecked because the state lives behind a pointer; the atomics, the owned lock, the
  // drain mutex and the condition variable make it safe to share.

  /// The memory of the lock: the owned lock, the drain mutex and the condition variable a
  /// writer sleeps on, then, on cache lines of their own, the state (`word`, `owner`, `depth`,
  /// `stripesInUse`), which every reader reads.
  @usableFromInline let base: UnsafeMutableRawPointer

  /// How many readers of each thread hold the lock, or are about to.
  @usableFromInline let readers = _StripedCounter()

  /// Bytes between two parts that must not share a cache line. NB: two cache lines: x86's
  /// adjacent-line prefetcher moves lines in pairs.
  @usableFromInline static var lineSize: Int { 128 }

  /// `word`'s bit while a writer holds the lock.
  @usableFromInline static var held: Int { 1 }

  /// `word`'s bit while the writer sleeps until the readers already in have left.
  @usableFromInline static var drainWaiting: Int { 2 }

  /// How many times a waiting thread checks again before it sleeps.
  @usableFromInline let spinLimit: Int
  /// How many times ``lockAfterWaitingReaders()`` yields, at most, for the readers waiting.
  @usableFromInline let waitingReaderYields: Int

  #if canImport(os)
    /// The owned lock that writers take and waiting threads sleep on.
    @usableFromInline typealias OwnedLock = os_unfair_lock
  #else
    /// The owned lock that writers take and waiting threads sleep on.
    @usableFromInline typealias OwnedLock = pthread_mutex_t
  #endif

  /// Where the drain mutex starts: past the owned lock.
  @usableFromInline static var drainMutexOffset: Int {
    (MemoryLayout<OwnedLock>.size + 15) & ~15
  }

  /// Where the condition variable starts: past the drain mutex.
  @usableFromInline static var conditionOffset: Int {
    (drainMutexOffset + MemoryLayout<pthread_mutex_t>.size + 15) & ~15
  }

  /// Where the state starts: past the condition variable, on a line of its own.
  @usableFromInline static var stateOffset: Int {
    (conditionOffset + MemoryLayout<pthread_cond_t>.size + lineSize - 1) / lineSize * lineSize
  }

  /// Creates an unlocked lock whose waiting threads check `spinLimit` times before they
  /// sleep, and whose ``lockAfterWaitingReaders()`` yields at most `waitingReaderYields` times.
  /// (Tests pass a `spinLimit` of 0, so that every wait sleeps.)
  package init(spinLimit: Int = 100, waitingReaderYields: Int = 1_000) {
    self.spinLimit = spinLimit
    self.waitingReaderYields = waitingReaderYields
    base = .allocate(byteCount: Self.stateOffset + Self.lineSize, alignment: Self.lineSize)
    (base + Self.stateOffset).initializeMemory(as: Int.self, repeating: 0, count: 5)
    #if canImport(os)
      base.initializeMemory(as: os_unfair_lock.self, repeating: os_unfair_lock(), count: 1)
    #else
      let owned = base.initializeMemory(as: pthread_mutex_t.self, repeating: .init(), count: 1)
      Lock.check(pthread_mutex_init(owned, nil), "pthread_mutex_init")
    #endif
    let drain = (base + Self.drainMutexOffset).initializeMemory(
      as: pthread_mutex_t.self, repeating: .init(), count: 1)
    Lock.check(pthread_mutex_init(drain, nil), "pthread_mutex_init")
    let condition = (base + Self.conditionOffset).initializeMemory(
      as: pthread_cond_t.self, repeating: .init(), count: 1)
    Lock.check(pthread_cond_init(condition, nil), "pthread_cond_init")
  }

  deinit {
    Lock.check(pthread_cond_destroy(condition), "pthread_cond_destroy")
    Lock.check(pthread_mutex_destroy(drainMutex), "pthread_mutex_destroy")
    #if !canImport(os)
      Lock.check(pthread_mutex_destroy(owned), "pthread_mutex_destroy")
    #endif
    base.deallocate()
  }

  /// The lock a writer holds, and a thread waiting for the writer sleeps on.
  @inlinable
  var owned: UnsafeMutablePointer<OwnedLock> {
    base.assumingMemoryBound(to: OwnedLock.self)
  }

  /// Guards the writer's sleep until the readers leave; never held otherwise.
  @inlinable
  var drainMutex: UnsafeMutablePointer<pthread_mutex_t> {
    (base + Self.drainMutexOffset).assumingMemoryBound(to: pthread_mutex_t.self)
  }

  /// What a writer waiting for readers sleeps on: the last of them leaving.
  @inlinable
  var condition: UnsafeMutablePointer<pthread_cond_t> {
    (base + Self.conditionOffset).assumingMemoryBound(to: pthread_cond_t.self)
  }

  /// ``held`` while a writer holds the lock, plus ``drainWaiting`` while it sleeps until the
  /// readers leave; 0 when no writer holds it. Atomic.
  @inlinable
  var word: UnsafeMutablePointer<Int> {
    (base + Self.stateOffset).assumingMemoryBound(to: Int.self)
  }

  /// The thread holding the lock exclusively (`_concord_thread_index() + 1`), or 0. Atomic.
  @inlinable
  var owner: UnsafeMutablePointer<Int> { word + 1 }

  /// How many times the owner took the lock exclusively. Only the owner touches it.
  @inlinable
  var depth: UnsafeMutablePointer<Int> { word + 2 }

  /// One bit per stripe of ``readers`` ever used: a writer only waits on those. Atomic; bits
  /// are only ever set.
  @inlinable
  var stripesInUse: UnsafeMutablePointer<Int> { word + 3 }

  /// How many readers stepped back for a writer and are not in yet. Atomic.
  @inlinable
  var waitingReaders: UnsafeMutablePointer<Int> { word + 4 }

  // MARK: The owned lock

  /// Takes the owned lock: a few tries, then asleep until its owner lets go, lending the owner
  /// this thread's priority where the platform does.
  @usableFromInline
  func takeOwned() {
    for _ in 0..<spinLimit {
      if tryOwned() { return }
      _concord_spin_pause()
    }
    #if canImport(os)
      os_unfair_lock_lock(owned)
    #else
      Lock.check(pthread_mutex_lock(owned), "pthread_mutex_lock")
    #endif
  }

  /// Takes the owned lock if no other thread holds it.
  @inlinable
  func tryOwned() -> Bool {
    #if canImport(os)
      os_unfair_lock_trylock(owned)
    #else
      pthread_mutex_trylock(owned) == 0
    #endif
  }

  /// Gives back the owned lock.
  @inlinable
  func giveBackOwned() {
    #if canImport(os)
      os_unfair_lock_unlock(owned)
    #else
      Lock.check(pthread_mutex_unlock(owned), "pthread_mutex_unlock")
    #endif
  }

  // MARK: Exclusive

  /// Blocks until the calling thread holds the lock exclusively; takes it once more if it
  /// already does.
  @inlinable
  package func lock() {
    let thread = _concord_thread_index() + 1
    if _concord_load_relaxed_word(owner) == thread {
      depth.pointee += 1
      return
    }
    if !tryOwned() { takeOwned() }
    // NB: sequentially consistent: ordered before the reads of the readers' stripes, as each
    // reader's count is before its read of the word.
    _concord_store_seq_cst_word(word, Self.held)
    waitForReaders()
    _concord_store_relaxed_word(owner, thread)
    depth.pointee = 1
  }

  /// Waits until the readers already in have left: a few checks, then asleep until the last
  /// of them wakes this thread.
  @inlinable
  func waitForReaders() {
    var inUse = _concord_load_seq_cst_word(stripesInUse)
    while inUse != 0 {
      let counter = readers.stripe(at: inUse.trailingZeroBitCount)
      inUse &= inUse &- 1
      var spins = 0
      while _concord_load_seq_cst_word(counter) != 0 {
        spins += 1
        if spins < spinLimit {
          _concord_spin_pause()
        } else {
          sleepUntilLeft(counter)
        }
      }
    }
  }

  /// Sleeps until `counter`, a stripe of ``readers``, is empty.
  ///
  /// NB: the ``drainWaiting`` bit goes up while holding the drain mutex, before the stripe is
  /// read again, and a leaving reader takes its count down before it reads the bit, both in
  /// sequentially consistent order: either this thread sees the count gone, or the reader sees
  /// the bit, and then takes the drain mutex to wake it, which it cannot do before this thread
  /// sleeps.
  @usableFromInline
  func sleepUntilLeft(_ counter: UnsafeMutablePointer<Int>) {
    Lock.check(pthread_mutex_lock(drainMutex), "pthread_mutex_lock")
    _concord_or_seq_cst_word(word, Self.drainWaiting)
    while _concord_load_seq_cst_word(counter) != 0 {
      Lock.check(pthread_cond_wait(condition, drainMutex), "pthread_cond_wait")
    }
    _concord_store_seq_cst_word(word, Self.held)
    Lock.check(pthread_mutex_unlock(drainMutex), "pthread_mutex_unlock")
  }

  /// Gives back one exclusive hold of the lock; the last one releases it. The calling thread
  /// must hold it exclusively.
  @inlinable
  package func unlock() {
    assert(
      _concord_load_relaxed_word(owner) == _concord_thread_index() + 1,
      "unlock() by a thread that does not hold the lock")
    depth.pointee -= 1
    guard depth.pointee == 0 else { return }
    _concord_store_relaxed_word(owner, 0)
    _concord_store_release_word(word, 0)
    giveBackOwned()
  }

  /// Whether the calling thread holds the lock exclusively. Read without taking it: only the
  /// calling thread can make it true or false.
  @inlinable
  package var isHeldByCurrentThread: Bool {
    _concord_load_relaxed_word(owner) == _concord_thread_index() + 1
  }

  /// Takes the lock exclusively, as ``lock()`` does, once the readers waiting for the last
  /// writer are in (or after a bounded number of yields): for a thread that takes the lock over
  /// and over, a load admitted in chunks, so that a reader waiting behind one chunk gets in
  /// before the next. NB: the platform's owned lock is not fair: given back and taken again at
  /// once, it would starve the reader sleeping on it, which wakes to find it taken.
  @usableFromInline
  package func lockAfterWaitingReaders() {
    var yields = 0
    while yields < waitingReaderYields && _concord_load_seq_cst_word(waitingReaders) > 0 {
      yields += 1
      sched_yield()
    }
    lock()
  }

  /// Runs `body` while holding the lock exclusively.
  @inlinable
  package func withLock<R>(_ body: () throws -> R) rethrows -> R {
    lock()
    defer { unlock() }
    return try body()
  }

  // MARK: Shared

  /// Blocks until the calling thread holds the lock shared with other readers, and returns
  /// `true`; or returns `false` at once, holding nothing more, when the calling thread holds it
  /// exclusively. The caller then reads under its exclusive hold, through ``lock()``, which
  /// re-enters: waiting for a shared hold would wait for itself.
  ///
  /// A thread holding the lock shared may take it again (an id's `==` or hashing, which a
  /// `find` runs under it, may itself call `find`), and comes in again at once, since no writer
  /// can hold the lock before its first hold leaves: were it to wait for a writer that came in
  /// between, the writer would wait for its first hold. The first threads, which have a stripe
  /// of their own (see ``_StripedCounter``), see their hold there. A thread beyond them shares
  /// a stripe, and records the lock it holds shared, and how many times, in a thread-local: one
  /// lock at a time, so that such a thread holding two maps' locks shared at once re-enters the
  /// first one only.
  @inlinable
  package func lockShared() -> Bool {
    let thread = _concord_thread_index()
    if _concord_load_relaxed_word(owner) == thread + 1 { return false }
    let (counter, isOwn) = readers.stripe(of: thread)
    if isOwn {
      // NB: only this thread writes its stripe, so its own count is exact here.
      let held = _concord_load_relaxed_word(counter)
      if held > 0 {
        _concord_store_relaxed_word(counter, held &+ 1)
        return true
      }
    } else {
      let held = _concord_shared_depth_of(base)
      if held > 0 {
        _concord_add_seq_cst_word(counter, 1)
        _concord_store_shared_hold(base, held + 1)
        return true
      }
      let entered = lockShared(counting: counter, thread: thread)
      if !_concord_holds_a_shared_lock() { _concord_store_shared_hold(base, 1) }
      return entered
    }
    return lockShared(counting: counter, thread: thread)
  }

  /// Takes the lock shared, counted in `counter`, the stripe of the thread numbered `thread`,
  /// once no writer holds it; see ``lockShared()``.
  @inlinable
  func lockShared(counting counter: UnsafeMutablePointer<Int>, thread: Int) -> Bool {
    let bit = 1 << min(thread, _StripedCounter.stripes - 1)
    // NB: a sequentially consistent load (a plain one on x86 and ARM): seeing the bit orders
    // its setting before this reader's count, so that a writer that misses the count sees the
    // bit, and waits on the stripe.
    if _concord_load_seq_cst_word(stripesInUse) & bit == 0 {
      _concord_or_seq_cst_word(stripesInUse, bit)
    }
    var waited = false
    while true {
      // NB: an atomic add even on the thread's own stripe: it orders the count before the
      // check of the word, which a plain store would not.
      _concord_add_seq_cst_word(counter, 1)
      if _concord_load_seq_cst_word(word) & Self.held == 0 {
        if waited { _concord_add_seq_cst_word(waitingReaders, -1) }
        return true
      }
      // NB: a writer holds the word, and may wait for this stripe: step back, and wait for it,
      // counted among the waiting readers until in (see `lockAfterWaitingReaders()`).
      leave(counter)
      if !waited {
        waited = true
        _concord_add_seq_cst_word(waitingReaders, 1)
      }
      waitForWriter()
    }
  }

  /// Takes one reader off `counter`, a stripe of ``readers``, and wakes the writer if it sleeps
  /// until the readers leave. Sequentially consistent: what the reader read happens before a
  /// writer that sees it gone writes, and the count goes down before the reader reads the word
  /// (see `sleepUntilLeft(_:)`).
  @inlinable
  func leave(_ counter: UnsafeMutablePointer<Int>) {
    _concord_add_seq_cst_word(counter, -1)
    if _concord_load_seq_cst_word(word) & Self.drainWaiting != 0 { wakeWriter() }
  }

  /// Wakes the writer sleeping until the readers leave.
  @usableFromInline
  func wakeWriter() {
    Lock.check(pthread_mutex_lock(drainMutex), "pthread_mutex_lock")
    Lock.check(pthread_cond_broadcast(condition), "pthread_cond_broadcast")
    Lock.check(pthread_mutex_unlock(drainMutex), "pthread_mutex_unlock")
  }

  /// Waits until no writer holds the lock: a few checks, then asleep on the owned lock, which
  /// the writer holds, until it lets go.
  @usableFromInline
  func waitForWriter() {
    for _ in 0..<spinLimit {
      if _concord_load_relaxed_word(word) & Self.held == 0 { return }
      _concord_spin_pause()
    }
    takeOwned()
    giveBackOwned()
  }

  /// Releases a shared hold that ``lockShared()`` took, on the same thread.
  @inlinable
  package func unlockShared() {
    let (counter, isOwn) = readers.stripe(of: _concord_thread_index())
    if !isOwn {
      let held = _concord_shared_depth_of(base)
      if held > 0 { _concord_store_shared_hold(held > 1 ? base : nil, held - 1) }
    }
    leave(counter)
  }
}
