/// Flags that outlive a write.
@usableFromInline
struct _NodeFlags: OptionSet, Sendable {
  @usableFromInline let rawValue: UInt16

  @inlinable init(rawValue: UInt16) { self.rawValue = rawValue }

  /// The node is the entry of its table (an entity) or of the alias table (an alias).
  @usableFromInline static let registered = _NodeFlags(rawValue: 1 << 0)
  /// The node was taken out of the map by `remove`, `removeAll` or a rolled-back transaction.
  @usableFromInline static let removed = _NodeFlags(rawValue: 1 << 1)
  /// An alias that is set: it holds itself, like a handle would.
  @usableFromInline static let anchored = _NodeFlags(rawValue: 1 << 2)
  /// The node was created by the current write and has no previous value.
  @usableFromInline static let fresh = _NodeFlags(rawValue: 1 << 3)
  /// The node is queued in the batch's commit list.
  @usableFromInline static let queued = _NodeFlags(rawValue: 1 << 4)
  /// The node is queued as a release candidate.
  @usableFromInline static let candidate = _NodeFlags(rawValue: 1 << 5)
  /// The node is an alias slot.
  @usableFromInline static let alias = _NodeFlags(rawValue: 1 << 6)
  /// No table holds the node, so the map holds it with a manual retain while anything outside
  /// does; see `_MapCore.adopt(_:)`.
  @usableFromInline static let adopted = _NodeFlags(rawValue: 1 << 7)
}

/// Flags that only mean something during one write: valid while `node.epoch` is that write's
/// epoch, and ignored (as if zero) otherwise, so nobody has to clear them.
@usableFromInline
struct _OpBits: OptionSet, Sendable {
  @usableFromInline let rawValue: UInt16

  @inlinable init(rawValue: UInt16) { self.rawValue = rawValue }

  /// Reached by the walk that orders the nodes to settle.
  @usableFromInline static let visited = _OpBits(rawValue: 1 << 0)
  /// Its final value for this write is computed; later patches must not touch it.
  @usableFromInline static let settled = _OpBits(rawValue: 1 << 1)
  /// A child pushed a new value into it.
  @usableFromInline static let patched = _OpBits(rawValue: 1 << 2)
  /// An accepted claim of this write was applied to it (see `_Write.swift`).
  @usableFromInline static let claimed = _OpBits(rawValue: 1 << 3)
  /// Offered a claim by this write's claims pass: `claimIndex` names its winning claim.
  @usableFromInline static let offered = _OpBits(rawValue: 1 << 4)
}

/// A link from a parent to one occurrence of a child entity inside the parent's value.
@usableFromInline
struct _ChildLink {
  /// The child node. NB: strong: a live parent keeps its children in memory.
  let child: _AnyNode
  /// The `_Accessor<ParentValue>` that knows where the child sits.
  let accessor: AnyObject
  /// Where the child sits: 0 for a single entity, the offset in a collection otherwise.
  let position: Int
  /// The index of the matching `_ParentRef` in `child.extras.parents`.
  @usableFromInline var backIndex: Int

  @usableFromInline
  init(child: _AnyNode, accessor: AnyObject, position: Int, backIndex: Int) {
    self.child = child
    self.accessor = accessor
    self.position = position
    self.backIndex = backIndex
  }
}

/// The way back from a child to one link of a parent.
@usableFromInline
struct _ParentRef {
  /// NB: unowned(unsafe): a parent unlinks its children before it is dropped, so a child never
  /// sees a dangling parent.
  unowned(unsafe) let parent: _AnyNode
  /// The index of the matching `_ChildLink` in `parent.extras.children`.
  var slot: Int
}

/// The parts of a node that most entities never need, allocated on first use.
@usableFromInline
final class _NodeExtras {
  /// Links to the entities this node's value holds, in the order of its nested entities.
  #if DEBUG
    @usableFromInline var children: [_ChildLink] = []
  #else
    @exclusivity(unchecked) @usableFromInline var children: [_ChildLink] = []
  #endif
  /// Links from the aggregates, batch handles and aliases that hold this node.
  #if DEBUG
    @usableFromInline var parents: [_ParentRef] = []
  #else
    @exclusivity(unchecked) @usableFromInline var parents: [_ParentRef] = []
  #endif
  /// Callbacks and streams observing this node; each is a `_Subscriber<Value>`.
  #if DEBUG
    @usableFromInline var subscribers: [_AnySubscriber] = []
  #else
    @exclusivity(unchecked) @usableFromInline var subscribers: [_AnySubscriber] = []
  #endif
  /// The alias this node is the slot of, if any.
  var alias: _AliasID?
}

/// A slot of the map: one entity, one alias, or the list behind a batch handle.
///
/// Every field is guarded by the owning map's lock. The typed part lives in `_Node<Value>`; this
/// base holds what the graph and lifetime algorithms need without knowing the type.
///
/// NB: the hot stored properties here, in `_MapCore` and in `_Table` are
/// `@exclusivity(unchecked)` in release builds. The map's lock already makes every access
/// exclusive between threads, and Swift's dynamic checks on class properties cost about half of
/// a propagation once these are `@usableFromInline`. Debug builds, where the tests run, keep the
/// checks.
@usableFromInline
class _AnyNode {
  // NB: the hold counts come first, next to the object header, so that a find on a cold node
  // touches one cache line.
  /// Holds from outside the graph: each handle, each subscription, the alias anchor.
  #if DEBUG
    @usableFromInline final var externalHolds: Int32 = 0
  #else
    @exclusivity(unchecked) @usableFromInline final var externalHolds: Int32 = 0
  #endif
  /// Holds from live parents: one per incoming link.
  #if DEBUG
    @usableFromInline final var internalHolds: Int32 = 0
  #else
    @exclusivity(unchecked) @usableFromInline final var internalHolds: Int32 = 0
  #endif
  #if DEBUG
    @usableFromInline final var flags: _NodeFlags
  #else
    @exclusivity(unchecked) @usableFromInline final var flags: _NodeFlags
  #endif
  /// Per-write bits, meaningful only while `epoch` is the current write's epoch.
  #if DEBUG
    @usableFromInline final var opBits: _OpBits = []
  #else
    @exclusivity(unchecked) @usableFromInline final var opBits: _OpBits = []
  #endif
  /// The epoch of the last write that visited this node. NB: epochs only grow, so this doubles as
  /// the version that orders deliveries.
  /// While `opBits` has `.offered`: the index of the node's winning claim in the write's
  /// claims. NB: it fills the padding before `epoch`, so it costs no memory.
  @usableFromInline final var claimIndex: Int32 = 0
  #if DEBUG
    @usableFromInline final var epoch: UInt64 = 0
  #else
    @exclusivity(unchecked) @usableFromInline final var epoch: UInt64 = 0
  #endif
  /// The newest stamp applied, or NaN when none was.
  #if DEBUG
    @usableFromInline final var stamp: Stamp = .nan
  #else
    @exclusivity(unchecked) @usableFromInline final var stamp: Stamp = .nan
  #endif
  #if DEBUG
    @usableFromInline final var extras: _NodeExtras?
  #else
    @exclusivity(unchecked) @usableFromInline final var extras: _NodeExtras?
  #endif

  @usableFromInline
  init(flags: _NodeFlags) {
    self.flags = flags
  }

  /// The extras, created on first use.
  @inline(__always)
  final var ensuredExtras: _NodeExtras {
    if let extras { return extras }
    let made = _NodeExtras()
    extras = made
    return made
  }

  /// Whether the node has links to children.
  @inline(__always)
  final var hasChildren: Bool { !(extras?.children.isEmpty ?? true) }

  /// Whether the node has parents to propagate to.
  @inlinable
  final var hasParents: Bool { !(extras?.parents.isEmpty ?? true) }

  /// Whether someone observes this node.
  @inlinable
  final var hasSubscribers: Bool { !(extras?.subscribers.isEmpty ?? true) }

  /// The per-write bits for `epoch`, empty if the node was not visited by that write.
  @inlinable
  final func bits(at epoch: UInt64) -> _OpBits {
    self.epoch == epoch ? opBits : []
  }

  /// Adds bits for `epoch`, resetting stale ones first.
  @inlinable
  final func insert(_ bits: _OpBits, at epoch: UInt64) {
    if self.epoch != epoch {
      self.epoch = epoch
      opBits = bits
    } else {
      opBits.formUnion(bits)
    }
  }

  // MARK: Typed operations, implemented by `_Node<Value>`

  /// Writes the current value of the child at `slot` into this node's value.
  func patch(slot _: Int) { fatalError("abstract") }

  /// Whether this node's value cannot exist without the child at `slot`.
  func requiresChild(atSlot _: Int) -> Bool { fatalError("abstract") }

  /// Removes the children at `slots` from this node's value, and returns the links that remain
  /// with their new positions.
  func dropChildren(atSlots _: [Int]) -> [_ChildLink] { fatalError("abstract") }

  /// Takes the node out of its table or of the alias table.
  func unregister(from _: _MapCore) { fatalError("abstract") }

  /// Puts a removed node back into its table; used by rollback.
  func reregister(in _: _MapCore) { fatalError("abstract") }

  /// A snapshot of the value and subscribers to deliver after the lock is released.
  func makeDelivery() -> _Delivery? { fatalError("abstract") }

  /// Restores the value and stamp this node has now; used by rollback.
  @usableFromInline
  func makeRestorer() -> () -> Void { fatalError("abstract") }

  /// Whether the alias slot this node is holds a value. Only meaningful for alias nodes.
  var holdsAliasValue: Bool { fatalError("abstract") }

  /// Empties the alias slot this node is, and forgets its stamp. Only called on alias nodes.
  func resetAlias(in _: _MapCore) { fatalError("abstract") }

  /// Names the entity in log events: captures its id now, renders it later, after the lock is
  /// released. `nil` for aliases and batch lists.
  func makeReference() -> (() -> EntityReference)? { fatalError("abstract") }
}

/// A slot holding a value of type `Value`: the list behind a batch handle as it is, and the base
/// of entity and alias nodes.
@usableFromInline
class _Node<Value: Sendable>: _AnyNode {
  #if DEBUG
    @usableFromInline final var value: Value
  #else
    @exclusivity(unchecked) @usableFromInline final var value: Value
  #endif

  @usableFromInline
  init(value: Value, flags: _NodeFlags = []) {
    self.value = value
    super.init(flags: flags)
  }

  /// The value of `node`, which must be a `_Node<Value>`.
  @inlinable
  static func _value(of node: _AnyNode) -> Value {
    unsafeDowncast(node, to: _Node<Value>.self).value
  }

  final override func patch(slot: Int) {
    let link = extras.unsafelyUnwrapped.children[slot]
    let accessor = unsafeDowncast(link.accessor, to: _Accessor<Value>.self)
    guard link.child !== self else {
      // NB: a value holding its own entity (a member among its friends) reads itself while
      // being written: write into a copy.
      var copy = value
      accessor.write(link.child, link.position, &copy)
      value = copy
      return
    }
    accessor.write(link.child, link.position, &value)
  }

  final override func requiresChild(atSlot slot: Int) -> Bool {
    let link = extras.unsafelyUnwrapped.children[slot]
    return unsafeDowncast(link.accessor, to: _Accessor<Value>.self).remove == nil
  }

  final override func dropChildren(atSlots slots: [Int]) -> [_ChildLink] {
    let links = extras.unsafelyUnwrapped.children
    let droppedSlots = Set(slots)
    // The dropped positions of each accessor, applied once per accessor, ascending.
    var dropped: [ObjectIdentifier: (accessor: AnyObject, positions: [Int])] = [:]
    for slot in droppedSlots {
      let link = links[slot]
      dropped[ObjectIdentifier(link.accessor), default: (link.accessor, [])].positions.append(
        link.position)
    }
    for key in dropped.keys {
      dropped[key]!.positions.sort()
      let (accessor, positions) = dropped[key]!
      unsafeDowncast(accessor, to: _Accessor<Value>.self).remove.unsafelyUnwrapped(
        positions, &value)
    }
    // The other links keep their order; their positions shift down past the dropped ones.
    return links.indices.compactMap { slot in
      let link = links[slot]
      guard !droppedSlots.contains(slot) else { return nil }
      let shift =
        dropped[ObjectIdentifier(link.accessor)]?.positions._countLess(than: link.position) ?? 0
      return _ChildLink(
        child: link.child, accessor: link.accessor, position: link.position - shift, backIndex: 0)
    }
  }

  final override func makeDelivery() -> _Delivery? {
    guard let subscribers = extras?.subscribers, !subscribers.isEmpty else { return nil }
    return _ValueDelivery(value: value, version: epoch, subscribers: subscribers)
  }

  @usableFromInline
  final override func makeRestorer() -> () -> Void {
    let value = value
    let stamp = stamp
    return { [unowned self] in
      self.value = value
      self.stamp = stamp
    }
  }

  override func unregister(from _: _MapCore) {}
  override func reregister(in _: _MapCore) {}
  override var holdsAliasValue: Bool { false }
  override func makeReference() -> (() -> EntityReference)? { nil }
}

extension Array where Element == Int {
  /// How many elements of this ascending array are less than `value`.
  func _countLess(than value: Int) -> Int {
    var low = 0
    var high = count
    while low < high {
      let middle = (low + high) / 2
      if self[middle] < value { low = middle + 1 } else { high = middle }
    }
    return low
  }
}
