import _ConcordAtomics

/// A count that many threads change at once without sharing a cache line: one counter per
/// stripe, each on cache lines of its own, the stripe picked by the calling thread's number,
/// and the stripes summed when read.
///
/// The first threads each have a stripe of their own, which only they write: a plain store
/// changes it, without the locked instruction an atomic add is. The threads after them share
/// the last stripe, and add atomically.
///
/// NB: the map counts its handles with one (`IdentityMap.statistics`), and its lock counts its
/// readers with one (``ReadWriteLock``). Readers make and drop a handle on every `find`: one
/// counter they all changed would move its cache line from core to core each time, the very
/// cost sharing the lock saves. A stripe may go below zero (a handle made on one thread and
/// dropped on another); only the sum means anything.
@usableFromInline
final class _StripedCounter {
  /// The number of stripes.
  @usableFromInline static var stripes: Int { 16 }

  /// Bytes between two stripes. NB: two cache lines: x86's adjacent-line prefetcher moves
  /// lines in pairs.
  @usableFromInline static var stride: Int { 128 }

  /// The stripes, each an `Int` at the start of its `stride` bytes.
  @usableFromInline let base: UnsafeMutableRawPointer

  @usableFromInline
  init() {
    base = .allocate(byteCount: Self.stride * Self.stripes, alignment: Self.stride)
    for stripe in 0..<Self.stripes {
      (base + stripe * Self.stride).initializeMemory(as: Int.self, repeating: 0, count: 1)
    }
  }

  deinit {
    base.deallocate()
  }

  /// The stripe of the thread numbered `thread` (`_concord_thread_index()`), and whether that
  /// thread is the only one writing it.
  @inlinable
  func stripe(of thread: Int) -> (counter: UnsafeMutablePointer<Int>, isOwn: Bool) {
    let isOwn = thread < Self.stripes - 1
    let index = isOwn ? thread : Self.stripes - 1
    return ((base + index &* Self.stride).assumingMemoryBound(to: Int.self), isOwn)
  }

  /// The stripe numbered `index`.
  @inlinable
  func stripe(at index: Int) -> UnsafeMutablePointer<Int> {
    (base + index &* Self.stride).assumingMemoryBound(to: Int.self)
  }

  /// Adds `delta` to the calling thread's stripe, ordering nothing else.
  @inlinable
  func add(_ delta: Int) {
    let (counter, isOwn) = stripe(of: _concord_thread_index())
    if isOwn {
      _concord_store_relaxed_word(counter, _concord_load_relaxed_word(counter) &+ delta)
    } else {
      _concord_add_relaxed_word(counter, delta)
    }
  }

  /// The sum of the stripes: exact when no thread changes them meanwhile.
  ///
  /// - Complexity: O(stripes).
  var sum: Int {
    var sum = 0
    for index in 0..<Self.stripes { sum &+= _concord_load_relaxed_word(stripe(at: index)) }
    return sum
  }
}
