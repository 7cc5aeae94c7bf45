/// The release buffer of `RetentionPolicy.keepReleased(_:)`: entities nobody holds any more
/// that stay in the map, least recently released evicted first.
///
/// A buffered node stays registered in its table, keeps its links (so a buffered aggregate
/// keeps its nested entities alive and current), and carries the `.buffered` flag, so that a
/// new holder takes it out with one flag test on the hot path. The order is a queue of
/// tickets: entering appends one, taking out forgets the node's ticket (its queue entry goes
/// stale), and eviction pops from the front, skipping stale entries. Stale entries are
/// compacted away once they outnumber the live ones.
///
/// - Complexity: O(1) amortized per release, take-out and eviction. With a capacity of zero the
///   buffer is never used.
@usableFromInline
struct _ReleaseBuffer {
  /// How many entities it keeps.
  @usableFromInline let capacity: Int
  /// The buffered nodes, by identity, with their ticket. NB: unretained: the node's table keeps
  /// a buffered node (rule 2 of `_Lifetime.swift`), which stays registered until it leaves the
  /// buffer: a removal takes it out first, an eviction purges it once out.
  private var entries: [ObjectIdentifier: (ticket: UInt64, node: Unmanaged<_AnyNode>)] = [:]
  /// Tickets in release order, from `head` on. NB: identities only, never dereferenced: an
  /// entry whose node left the buffer (and may since be freed) no longer matches its ticket.
  private var queue: [(id: ObjectIdentifier, ticket: UInt64)] = []
  private var head = 0
  private var lastTicket: UInt64 = 0

  @usableFromInline
  init(capacity: Int) {
    self.capacity = capacity
  }

  /// How many entities are buffered.
  var count: Int { mutating get { entries.count } }

  /// Whether the buffer holds more than its capacity.
  var overflows: Bool { mutating get { entries.count > capacity } }

  /// Buffers `node`, as the most recently released.
  mutating func enter(_ node: _AnyNode) {
    lastTicket += 1
    let id = ObjectIdentifier(node)
    entries[id] = (lastTicket, .passUnretained(node))
    queue.append((id, lastTicket))
    node.s.flags.insert(.buffered)
  }

  /// Takes `node` out of the buffer: a new holder came, or it is removed.
  @usableFromInline
  mutating func takeOut(_ node: _AnyNode) {
    node.s.flags.remove(.buffered)
    entries[ObjectIdentifier(node)] = nil
    if queue.count - head > 2 * entries.count + 64 { compact() }
  }

  /// Takes out and returns the least recently released node.
  mutating func evictOldest() -> _AnyNode? {
    while head < queue.count {
      let (id, ticket) = queue[head]
      head += 1
      guard let entry = entries[id], entry.ticket == ticket else { continue }
      let node = entry.node.takeUnretainedValue()
      takeOut(node)
      return node
    }
    return nil
  }

  /// Drops the stale entries of the queue.
  private mutating func compact() {
    queue = queue[head...].filter { entries[$0.id]?.ticket == $0.ticket }
    head = 0
  }
}
