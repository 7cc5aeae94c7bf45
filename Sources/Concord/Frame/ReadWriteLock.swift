import _ConcordAtomics

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
/// How: a reader counts itself in its thread's stripe of a striped counter, then checks that
/// no writer holds the lock; a writer takes the lock word, then waits until every stripe in use
/// is empty. Each side writes before it reads what the other writes, in sequentially
/// consistent order, so that at least one of them sees the other: the reader then steps back
/// and waits for the write. Once a writer holds the word, new readers step back: readers
/// cannot starve it. Threads that wait long sleep on a pthread condition variable.
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
  // NB: @unchecked because the state lives behind a pointer; the atomics, the mutex and the
  // condition variable make it safe to share.

  /// The memory of the lock: the mutex and condition variable threads sleep on, then, on
  /// cache lines of their own, the state (`word`, `owner`, `depth`, `stripesInUse`), which
  /// every reader reads.
  @usableFromInline let base: UnsafeMutableRawPointer

  /// How many readers of each thread hold the lock, or are about to.
  @usableFromInline let readers = _StripedCounter()

  /// Bytes between two parts that must not share a cache line. NB: two cache lines: x86's
  /// adjacent-line prefetcher moves lines in pairs.
  @usableFromInline static var lineSize: Int { 128 }

  /// `word`'s bit while a writer holds the lock.
  @usableFromInline static var held: Int { 1 }

  /// `word`'s bit while a thread sleeps until the writer lets go.
  @usableFromInline static var sleepers: Int { 2 }

  /// How many times a waiting thread checks again before it sleeps (or, for a writer waiting
  /// for readers, yields the processor).
  @usableFromInline static var spinLimit: Int { 100 }

  /// Where the condition variable starts: past the mutex.
  @usableFromInline static var conditionOffset: Int {
    (MemoryLayout<pthread_mutex_t>.size + 15) & ~15
  }

  /// Where the state starts: past the mutex and the condition variable.
  @usableFromInline static var stateOffset: Int {
    (conditionOffset + MemoryLayout<pthread_cond_t>.size + lineSize - 1) / lineSize * lineSize
  }

  /// Creates an unlocked lock.
  package init() {
    base = .allocate(byteCount: Self.stateOffset + Self.lineSize, alignment: Self.lineSize)
    (base + Self.stateOffset).initializeMemory(as: Int.self, repeating: 0, count: 4)
    let mutex = base.initializeMemory(as: pthread_mutex_t.self, repeating: .init(), count: 1)
    Lock.check(pthread_mutex_init(mutex, nil), "pthread_mutex_init")
    let condition = (base + Self.conditionOffset).initializeMemory(
      as: pthread_cond_t.self, repeating: .init(), count: 1)
    Lock.check(pthread_cond_init(condition, nil), "pthread_cond_init")
  }

  deinit {
    Lock.check(pthread_cond_destroy(condition), "pthread_cond_destroy")
    Lock.check(pthread_mutex_destroy(mutex), "pthread_mutex_destroy")
    base.deallocate()
  }

  /// Guards sleeping and waking; never held otherwise.
  @inlinable
  var mutex: UnsafeMutablePointer<pthread_mutex_t> {
    base.assumingMemoryBound(to: pthread_mutex_t.self)
  }

  /// What sleepers wait on: the writer letting go.
  @inlinable
  var condition: UnsafeMutablePointer<pthread_cond_t> {
    (base + Self.conditionOffset).assumingMemoryBound(to: pthread_cond_t.self)
  }

  /// ``held`` while a writer holds the lock, plus ``sleepers`` if a thread sleeps until it
  /// lets go; 0 when no writer holds it. Atomic.
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
    if !_concord_compare_exchange_seq_cst_word(word, 0, Self.held) { takeWordSlowly() }
    waitForReaders()
    _concord_store_relaxed_word(owner, thread)
    depth.pointee = 1
  }

  /// Takes the lock word from another writer: a few tries, then asleep until it lets go.
  @usableFromInline
  func takeWordSlowly() {
    var spins = 0
    while !_concord_compare_exchange_seq_cst_word(word, 0, Self.held) {
      spins += 1
      if spins < Self.spinLimit {
        _concord_spin_pause()
      } else {
        sleepWhileHeld()
      }
    }
  }

  /// Waits until the readers already in have left. NB: they only read, and briefly, but one
  /// may have lost its processor: past a few checks, this thread yields its own.
  @inlinable
  func waitForReaders() {
    var inUse = _concord_load_seq_cst_word(stripesInUse)
    while inUse != 0 {
      let counter = readers.stripe(at: inUse.trailingZeroBitCount)
      inUse &= inUse &- 1
      var spins = 0
      while _concord_load_seq_cst_word(counter) != 0 {
        spins += 1
        if spins < Self.spinLimit { _concord_spin_pause() } else { sched_yield() }
      }
    }
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
    if _concord_exchange_release_word(word, 0) & Self.sleepers != 0 { wakeSleepers() }
  }

  /// Wakes every thread sleeping until the writer let go.
  @usableFromInline
  func wakeSleepers() {
    Lock.check(pthread_mutex_lock(mutex), "pthread_mutex_lock")
    Lock.check(pthread_cond_broadcast(condition), "pthread_cond_broadcast")
    Lock.check(pthread_mutex_unlock(mutex), "pthread_mutex_unlock")
  }

  /// Sleeps until no writer holds the lock, if one does.
  ///
  /// NB: the ``sleepers`` bit is set while holding the mutex, and the writer's `unlock()`
  /// clears the word and reads the bit in one exchange, then takes the mutex to wake: a
  /// writer cannot let go between this thread's check and its sleep unseen.
  @usableFromInline
  func sleepWhileHeld() {
    Lock.check(pthread_mutex_lock(mutex), "pthread_mutex_lock")
    while true {
      let state = _concord_load_relaxed_word(word)
      guard state & Self.held != 0 else { break }
      if state & Self.sleepers != 0
        || _concord_compare_exchange_seq_cst_word(word, state, state | Self.sleepers)
      {
        Lock.check(pthread_cond_wait(condition, mutex), "pthread_cond_wait")
      }
    }
    Lock.check(pthread_mutex_unlock(mutex), "pthread_mutex_unlock")
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
  /// `find` runs under it, may itself call `find`): the first threads, which have a stripe of
  /// their own, see their hold there and come in again at once, since no writer can hold the
  /// lock before that stripe empties. A thread beyond them (see ``_StripedCounter``) shares a
  /// stripe and cannot tell; if a writer came in between, its second hold would wait for the
  /// writer, and the writer for its first hold.
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
    }
    let bit = 1 << min(thread, _StripedCounter.stripes - 1)
    // NB: a sequentially consistent load (a plain one on x86 and ARM): seeing the bit orders
    // its setting before this reader's count, so that a writer that misses the count sees the
    // bit, and waits on the stripe.
    if _concord_load_seq_cst_word(stripesInUse) & bit == 0 {
      _concord_or_seq_cst_word(stripesInUse, bit)
    }
    while true {
      // NB: an atomic add even on the thread's own stripe: it orders the count before the
      // check of the word, which a plain store would not.
      _concord_add_seq_cst_word(counter, 1)
      if _concord_load_seq_cst_word(word) & Self.held == 0 { return true }
      // NB: a writer holds the word, and may wait for this stripe: step back, and wait for it.
      leave(counter, isOwn: isOwn)
      waitForWriter()
    }
  }

  /// Takes one reader off `counter`, a stripe of ``readers``; `isOwn` if only this thread
  /// writes it. Release order: what the reader read happens before a writer that sees it gone
  /// writes.
  @inlinable
  func leave(_ counter: UnsafeMutablePointer<Int>, isOwn: Bool) {
    if isOwn {
      _concord_store_release_word(counter, _concord_load_relaxed_word(counter) &- 1)
    } else {
      _concord_add_release_word(counter, -1)
    }
  }

  /// Waits until no writer holds the lock: a few checks, then asleep.
  @usableFromInline
  func waitForWriter() {
    for _ in 0..<Self.spinLimit {
      if _concord_load_relaxed_word(word) & Self.held == 0 { return }
      _concord_spin_pause()
    }
    sleepWhileHeld()
  }

  /// Releases a shared hold that ``lockShared()`` took, on the same thread.
  @inlinable
  package func unlockShared() {
    let (counter, isOwn) = readers.stripe(of: _concord_thread_index())
    leave(counter, isOwn: isOwn)
  }
}
