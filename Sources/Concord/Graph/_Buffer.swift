/// A buffer a pass reuses from write to write: appended to, read and written by index in place,
/// and emptied by forgetting its count, so that emptying it costs nothing whatever it held.
///
/// NB: the elements are bitwise copyable (`_Claim`, `_ChildLink` and `Unmanaged` hold their
/// references unretained), so an element needs no deinitialization: one past `count` stays in
/// the storage until it is overwritten. An `Array` checked its uniqueness at every append and
/// every write of a field, and emptying it with `removeAll(keepingCapacity:)` went through its
/// generic `replaceSubrange`, about a hundred instructions each time. The buffer is
/// noncopyable, so that its storage has one owner, which frees it.
@usableFromInline
struct _Buffer<Element: BitwiseCopyable>: ~Copyable {
  @usableFromInline var base: UnsafeMutablePointer<Element>
  @usableFromInline var capacity: Int
  /// How many elements the buffer holds: the first `count` of its storage.
  @usableFromInline private(set) var count = 0

  @inlinable
  init() {
    capacity = 16
    base = .allocate(capacity: capacity)
  }

  @inlinable deinit { base.deallocate() }

  @inlinable var isEmpty: Bool { count == 0 }

  @inlinable var indices: Range<Int> { 0..<count }

  @inlinable
  subscript(index: Int) -> Element {
    get {
      precondition(index >= 0 && index < count, "index past the buffer's elements")
      return base[index]
    }
    nonmutating _modify {
      precondition(index >= 0 && index < count, "index past the buffer's elements")
      yield &base[index]
    }
  }

  @inlinable @inline(__always)
  mutating func append(_ element: Element) {
    if count == capacity { grow() }
    (base + count).initialize(to: element)
    count += 1
  }

  /// Doubles the storage, keeping the elements.
  @usableFromInline @inline(never)
  mutating func grow() {
    let grown = UnsafeMutablePointer<Element>.allocate(capacity: capacity * 2)
    grown.initialize(from: base, count: count)
    base.deallocate()
    base = grown
    capacity *= 2
  }

  /// Forgets every element, keeping the storage.
  @inlinable
  mutating func removeAll() { count = 0 }
}
