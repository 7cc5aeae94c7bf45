import _ConcordAtomics

/// A count that many threads change at once without sharing a cache line: one counter per
/// stripe, each on cache lines of its own, the stripe picked by the calling thread's number,
/// and the stripes summed when read.
///
/// The first threads each have a stripe of their own, which only they write: a plain store
/// changes it, without the locked instruction an atomic add is. The threads after them share
/// the last stripe, and add atomically.
///
/// NB: the map's lock counts its readers with one (``ReadWriteLock``): one counter all readers
/// changed would move its cache line from core to core on every read.
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

}
