/// The release buffer of `RetentionPolicy.keepReleased(_:)`: entities nobody holds any more
/// that stay in the map, least recently released evicted first.
///
/// A buffered node stays registered in its table, keeps its links (so a buffered aggregate
/// keeps its nested entities alive and current), and carries the `.buffered` flag, so that a
/// new holder takes it out with one flag test on the hot path. The order is a queue of slots:
/// entering appends the node and writes its position into the node (`_AnyNode.bufferSlot`),
/// taking out empties that slot, and eviction pops from the front, skipping empty slots. The
/// queue is compacted once its empty slots (taken out, or already popped) outnumber the
/// buffered nodes, so it never holds more than about twice the buffer's count.
///
/// NB: no dictionary and no ticket. Every way out of the buffer empties the node's slot, so a
/// slot that is not empty names a node that is buffered now.
///
/// - Complexity: O(1) amortized per release, take-out and eviction. With a capacity of zero the
///   buffer is never used.
@usableFromInline
struct _ReleaseBuffer {
  /// The most entities a buffer keeps: 2^30, so that a slot fits the node's 32 bits.
  static var largestCapacity: Int { 1 << 30 }

  /// How many entities it keeps.
  @usableFromInline let capacity: Int
  /// How many entities are buffered.
  private(set) var count = 0
  /// The buffered nodes in release order, from `head` on, with empty slots where a node left.
  /// NB: unretained: the node's table keeps a buffered node (rule 2 of `_Lifetime.swift`), and
  /// it stays registered until it leaves the buffer, which empties its slot first (a removal
  /// takes it out, an eviction purges it once out).
  private var queue: [Unmanaged<_AnyNode>?] = []
  private var head = 0

  @usableFromInline
  init(capacity: Int) {
    self.capacity = min(capacity, Self.largestCapacity)
  }

  /// Whether the buffer holds more than its capacity.
  var overflows: Bool { count > capacity }

  /// Buffers `node`, as the most recently released.
  mutating func enter(_ node: _AnyNode) {
    assert(node.internalHolds == 0, "a node with parents entered the release buffer")
    node.bufferSlot = UInt32(queue.count)
    queue.append(.passUnretained(node))
    count += 1
    node.s.flags.insert(.buffered)
  }

  /// Takes `node` out of the buffer: a new holder came, or it is removed.
  @usableFromInline
  mutating func takeOut(_ node: _AnyNode) {
    node.s.flags.remove(.buffered)
    queue[Int(node.bufferSlot)] = nil
    node.bufferSlot = 0
    count -= 1
    if queue.count > 2 * count + 64 { compact() }
  }

  /// Takes out and returns the least recently released node, unretained: its table still
  /// keeps it.
  mutating func evictOldest() -> Unmanaged<_AnyNode>? {
    while head < queue.count {
      guard let slot = queue[head] else {
        head += 1
        continue
      }
      slot._withUnsafeGuaranteedRef { takeOut($0) }
      return slot
    }
    return nil
  }

  /// Drops the empty slots, and tells each buffered node its new one.
  private mutating func compact() {
    var kept: [Unmanaged<_AnyNode>?] = []
    kept.reserveCapacity(count)
    for case let slot? in queue[head...] {
      slot._withUnsafeGuaranteedRef { $0.bufferSlot = UInt32(kept.count) }
      kept.append(slot)
    }
    queue = kept
    head = 0
  }

  /// What is wrong with the buffer, if anything: for the invariant checks.
  func problem() -> String? {
    var buffered = 0
    for (position, slot) in queue.enumerated() {
      guard let slot else { continue }
      guard position >= head else { return "a buffered node sits before the queue's head" }
      let node = slot.takeUnretainedValue()
      guard node.s.flags.contains(.buffered), Int(node.bufferSlot) == position else {
        return "slot \(position) names a node that is not buffered there"
      }
      buffered += 1
    }
    guard buffered == count else { return "\(count) buffered counted, \(buffered) queued" }
    return queue.count > 2 * count + 64 ? "the queue was never compacted" : nil
  }
}

extension _AnyNode {
  /// While `s.flags` has `.buffered`: the node's position in the release buffer's queue.
  ///
  /// NB: kept in the storage of `internalHolds`, which is zero while the node is buffered (no
  /// parent links it: a link takes the node out of the buffer before it adds its hold, see
  /// `_Lifetime.link`), and zero again once it is taken out. A field of its own made a plain
  /// entity's node 8 bytes larger, and its allocation 16. The slot's bits are kept as they
  /// are: a queue position of 2^31 or more reads as negative holds, which nothing reads while
  /// the node is buffered.
  @inlinable
  var bufferSlot: UInt32 {
    get { UInt32(bitPattern: internalHolds) }
    set { internalHolds = Int32(bitPattern: newValue) }
  }
}
