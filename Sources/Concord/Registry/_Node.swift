/// Flags that outlive a write.
///
/// NB: the members are computed, not stored: a static stored property is a lazily initialized
/// global, read through an accessor call and a once-check on every use of the hot path.
@usableFromInline
struct _NodeFlags: OptionSet, Sendable {
  @usableFromInline let rawValue: UInt16

  @inlinable init(rawValue: UInt16) { self.rawValue = rawValue }

  /// The node is the entry of its table (an entity) or of the alias table (an alias).
  @inlinable static var registered: _NodeFlags { _NodeFlags(rawValue: 1 << 0) }
  /// The node was taken out of the map by `remove`, `removeAll` or a rolled-back transaction.
  @inlinable static var removed: _NodeFlags { _NodeFlags(rawValue: 1 << 1) }
  /// An alias that is set: it holds itself, like a handle would.
  @inlinable static var anchored: _NodeFlags { _NodeFlags(rawValue: 1 << 2) }
  /// The node is queued as a release candidate.
  @inlinable static var candidate: _NodeFlags { _NodeFlags(rawValue: 1 << 3) }
  /// No table holds the node, so the map holds it with a manual retain while anything outside
  /// does; see `_AnyNode.adopt()`.
  @inlinable static var adopted: _NodeFlags { _NodeFlags(rawValue: 1 << 4) }
  /// The node left the map for good: nothing may link to it any more.
  @inlinable static var purged: _NodeFlags { _NodeFlags(rawValue: 1 << 5) }
  /// The node is an alias slot.
  @inlinable static var alias: _NodeFlags { _NodeFlags(rawValue: 1 << 6) }
  /// The node is the list behind a batch handle.
  @inlinable static var list: _NodeFlags { _NodeFlags(rawValue: 1 << 7) }
  /// The map's release buffer keeps the node, which nothing else holds; see `_ReleaseBuffer`.
  @inlinable static var buffered: _NodeFlags { _NodeFlags(rawValue: 1 << 8) }
  /// The node is the result of a live query; see `_QueryNode`.
  @inlinable static var query: _NodeFlags { _NodeFlags(rawValue: 1 << 9) }
  /// The node's type is ``Mergeable``: its claims merge. NB: a flag, so that a pass asks no
  /// other node's schema, in code that runs unspecialized.
  @inlinable static var mergeable: _NodeFlags { _NodeFlags(rawValue: 1 << 10) }
  /// The node is an entity whose type holds no nested entity: a pass has nothing to expand in
  /// its claims. NB: a flag, for the same reason as `mergeable`.
  @inlinable static var leaf: _NodeFlags { _NodeFlags(rawValue: 1 << 11) }
  /// For the write under way, an optimistic layer's shadow exchanged the node's value for the
  /// one underneath (see `_Shadow._lower(_:)`). Never set between writes.
  @inlinable static var exchanged: _NodeFlags { _NodeFlags(rawValue: 1 << 12) }
}

/// Flags that only mean something during one pass of the graph (one claims-apply-settle run,
/// or one removal). Every node that gets one is listed in the pass's `marked` buffer, and the
/// pass clears them all when it ends, so outside a pass they are always empty.
@usableFromInline
struct _PassBits: OptionSet, Sendable {
  @usableFromInline let rawValue: UInt8

  @inlinable init(rawValue: UInt8) { self.rawValue = rawValue }

  /// Claimed by this pass's claims walk: `claimIndex` names its winning claim.
  @inlinable static var offered: _PassBits { _PassBits(rawValue: 1 << 0) }
  /// An accepted claim's payload became the node's value.
  @inlinable static var claimed: _PassBits { _PassBits(rawValue: 1 << 1) }
  /// A child wrote a new value into it, or it lost children.
  @inlinable static var patched: _PassBits { _PassBits(rawValue: 1 << 2) }
  /// Reached by the walk that orders the nodes to settle.
  @inlinable static var visited: _PassBits { _PassBits(rawValue: 1 << 3) }
  /// Its final value for this pass is computed.
  @inlinable static var settled: _PassBits { _PassBits(rawValue: 1 << 4) }
  /// On the path of the value being materialized; see `_Node+Materialize.swift`.
  @inlinable static var onPath: _PassBits { _PassBits(rawValue: 1 << 5) }
  /// Taken out by the removal being computed.
  @inlinable static var removing: _PassBits { _PassBits(rawValue: 1 << 6) }
  /// Created by this pass: it has no stored value to merge into.
  @inlinable static var fresh: _PassBits { _PassBits(rawValue: 1 << 7) }
}

/// Everything a node knows besides its value and its hold counts, in one stored property.
///
/// NB: one struct, so that the class needs one `@exclusivity(unchecked)` annotation, not one per
/// field. 40 bytes, 12 of them the first parent: most nested entities have one, and keeping
/// it here spares each of them an extras object. The hold counts come before it, in the node's
/// first stored property (see `_AnyNode+Holds.swift`).
@usableFromInline
struct _NodeState {
  @usableFromInline var flags: _NodeFlags
  /// Flags of the pass running now; empty outside a pass.
  @usableFromInline var bits: _PassBits = []
  /// 1 + the transaction level of the node's newest record in the write's journal; 0 when
  /// the write has not recorded it.
  @usableFromInline var journalMark: UInt8 = 0
  /// While `bits` has `.offered`: the index of the node's winning claim in the pass.
  @usableFromInline var claimIndex: Int32 = 0
  /// The newest stamp applied, or NaN when none was.
  @usableFromInline var stamp: Stamp = .nan
  /// Links, subscribers and the rest, for the nodes that have any.
  @usableFromInline var extras: _NodeExtras?
  /// The node's first back-reference to a parent; the others are in `extras.moreParents`.
  /// `nil` only when the node has no parent.
  @usableFromInline var firstParent: _ParentRef?
  /// An entity's rank in its table's creation order; see `_EntityNode.sequence`. NB: 32 bits,
  /// in the 4 bytes `firstParent` leaves free at the end, rather than 64 in the entity's node:
  /// that made the node of a plain entity 8 bytes larger than 104, and its allocation 16.
  @usableFromInline var sequence: UInt32 = 0

  @inlinable
  init(flags: _NodeFlags) {
    self.flags = flags
  }
}

/// A link from a parent to one occurrence of a child entity inside the parent's value.
@usableFromInline
struct _ChildLink: BitwiseCopyable {
  /// The child node. NB: unowned(unsafe), by rule 4 of `_Lifetime.swift`: a linked child is
  /// in the map (its table keeps it, rule 2), since whatever takes it out unlinks it first.
  @usableFromInline unowned(unsafe) let child: _AnyNode
  /// Which of the parent schema's accessors holds the child.
  @usableFromInline let accessor: Int32
  /// Where the child sits: 0 for a single entity, the offset in a collection otherwise.
  @usableFromInline let position: Int32
  /// The index of the matching `_ParentRef` in `child.extras.parents`.
  @usableFromInline var backIndex: Int32

  @inlinable
  init(child: _AnyNode, accessor: Int32, position: Int32, backIndex: Int32 = 0) {
    self.child = child
    self.accessor = accessor
    self.position = position
    self.backIndex = backIndex
  }

  /// Whether both links name the same occurrence of the same child.
  @inlinable
  func sameOccurrence(as other: _ChildLink) -> Bool {
    child === other.child && accessor == other.accessor && position == other.position
  }
}

/// The way back from a child to one link of a parent.
@usableFromInline
struct _ParentRef {
  /// NB: unowned(unsafe), by rule 5 of `_Lifetime.swift`: a parent unlinks its children
  /// before it leaves the map. `_checkInvariants` verifies that every back-reference matches.
  @usableFromInline unowned(unsafe) let parent: _AnyNode
  /// The index of the matching `_ChildLink` in `parent.extras.children`.
  @usableFromInline var slot: Int32
}

/// The parts of a node that most entities never need, allocated on first use.
///
/// - `children`: links to the entities this node's value holds, in the order of its nested
///   entities.
/// - `moreParents`: the back-references to the aggregates, batch handles and aliases that hold
///   this node, after the first one (`_NodeState.firstParent`).
/// - `subscribers`: callbacks and streams observing this node; each is a `_Subscriber<Value>`.
/// - `cycle`: nonzero when the node lies on a cycle by identity: the number of the strongly
///   connected part of the graph it belongs to. See `_Node+Materialize.swift`.
@usableFromInline
final class _NodeExtras {
  // NB: see `_AnyNode.s` on exclusivity checks.
  #if DEBUG
    @usableFromInline var children: [_ChildLink] = []
    @usableFromInline var moreParents: [_ParentRef] = []
    @usableFromInline var subscribers: [_AnySubscriber] = []
    @usableFromInline var cycle: Int = 0
  #else
    @exclusivity(unchecked) @usableFromInline var children: [_ChildLink] = []
    @exclusivity(unchecked) @usableFromInline var moreParents: [_ParentRef] = []
    @exclusivity(unchecked) @usableFromInline var subscribers: [_AnySubscriber] = []
    @exclusivity(unchecked) @usableFromInline var cycle: Int = 0
  #endif

  @usableFromInline init() {}
}

/// A slot of the map: one entity, one alias, the list behind a batch handle, or a live query's
/// result.
///
/// A node holds graph state only: its hold counts, flags, stamp, links and subscribers. Its
/// value lives in the subclass `_Node<Value>`, and everything that reads or writes the value
/// goes through the node's ``witness``, which knows its type. Every field is guarded by the
/// owning map's lock, but for the external hold count (see `_AnyNode+Holds.swift`).
@usableFromInline
class _AnyNode {
  /// Holds from outside the graph: each handle, each subscription, the alias anchor, each live
  /// query having the node as a member, a shadow of optimistic layers. Read and written only
  /// through ``externalHolds`` and the atomic operations of `_AnyNode+Holds.swift`, never by
  /// name (but in the test that checks where it is).
  ///
  /// NB: the first stored property, so that its address is the start of the object's stored
  /// properties (`_getUnsafePointerToStoredProperties`), as swift-atomics reaches its storage;
  /// a test checks it. Next to the object header, with `internalHolds`, so that a find on a
  /// cold node touches one cache line, and so that the two together take the 8 bytes the
  /// counts took inside `_NodeState`.
  final var externalHoldsStorage: Int32 = 0
  // NB: exclusivity checks are off in release builds only. The map's lock already makes every
  // access exclusive between threads, and the dynamic checks cost about half of a propagation
  // once the state is `@usableFromInline`; debug builds, where the tests run, keep them.
  #if DEBUG
    /// Holds from live parents: one per incoming link. Only touched under the exclusive lock.
    @usableFromInline final var internalHolds: Int32 = 0
    @usableFromInline final var s: _NodeState
  #else
    /// Holds from live parents: one per incoming link. Only touched under the exclusive lock.
    @exclusivity(unchecked) @usableFromInline final var internalHolds: Int32 = 0
    @exclusivity(unchecked) @usableFromInline final var s: _NodeState
  #endif
  /// The operations on the node that depend on its value's type.
  ///
  /// NB: unowned(unsafe), by rule 1 of `_Lifetime.swift`: a witness lives in the table of its
  /// entity type. A constant, so that it may be read without the lock (see
  /// `releasesWithoutLock`).
  @usableFromInline final unowned(unsafe) let witness: _Witness

  /// NB: the witness is borrowed (`__shared`), sparing a retain and a release per node made:
  /// the node refers to it unowned.
  @inlinable
  init(witness: __shared _Witness, flags: _NodeFlags) {
    self.witness = witness
    s = _NodeState(flags: flags)
  }

  /// The extras, created on first use.
  @inlinable
  final var extras: _NodeExtras {
    if let extras = s.extras { return extras }
    let made = _NodeExtras()
    s.extras = made
    return made
  }

  /// Calls `body` with the extras, created on first use, borrowed: the getter of ``extras``
  /// returns a reference the caller then releases, an atomic operation per call.
  @inlinable
  final func withExtras<R>(_ body: (_NodeExtras) -> R) -> R {
    if s.extras == nil { s.extras = _NodeExtras() }
    // NB: borrowed (rule 7): the node keeps its extras, which are never replaced once made.
    return Unmanaged.passUnretained(s.extras.unsafelyUnwrapped)._withUnsafeGuaranteedRef(body)
  }

  /// The links to children; empty when there are none.
  @inlinable
  final var children: [_ChildLink] { s.extras?.children ?? [] }

  /// Whether the node has links to children.
  @inlinable
  final var hasChildren: Bool { !(s.extras?.children.isEmpty ?? true) }

  /// Whether the node has parents to propagate to.
  @inlinable
  final var hasParents: Bool { s.firstParent != nil }

  // MARK: Back-references to parents
  //
  // Indices are 0 for `s.firstParent` and 1... for `extras.moreParents`.

  /// How many back-references to parents the node has.
  @inlinable
  final var parentCount: Int {
    s.firstParent == nil ? 0 : 1 + (s.extras?.moreParents.count ?? 0)
  }

  /// The back-reference at `index`, which must exist.
  @inlinable
  final func parent(at index: Int) -> _ParentRef {
    if index == 0 { return s.firstParent.unsafelyUnwrapped }
    // NB: the extras borrowed, not retained (rule 7): the node keeps them.
    return Unmanaged.passUnretained(s.extras.unsafelyUnwrapped)._withUnsafeGuaranteedRef {
      $0.moreParents[index - 1]
    }
  }

  /// Replaces the back-reference at `index`, which must exist.
  @inlinable
  final func setParent(_ reference: _ParentRef, at index: Int) {
    if index == 0 {
      s.firstParent = reference
    } else {
      withExtras { $0.moreParents[index - 1] = reference }
    }
  }

  /// Adds a back-reference after the others.
  @inlinable
  final func appendParent(_ reference: _ParentRef) {
    if s.firstParent == nil {
      s.firstParent = reference
    } else {
      withExtras { $0.moreParents.append(reference) }
    }
  }

  /// Removes and returns the last back-reference; there must be one.
  @inlinable @discardableResult
  final func removeLastParent() -> _ParentRef {
    if let last = s.extras?.moreParents.popLast() { return last }
    defer { s.firstParent = nil }
    return s.firstParent.unsafelyUnwrapped
  }

  /// Every back-reference, in order: for the paths where an array is simplest.
  @inlinable
  final var parentReferences: [_ParentRef] {
    guard let first = s.firstParent else { return [] }
    return [first] + (s.extras?.moreParents ?? [])
  }

  /// Whether someone observes this node.
  @inlinable
  final var hasSubscribers: Bool { !(s.extras?.subscribers.isEmpty ?? true) }

  /// The node's cycle number; 0 when it is on no cycle by identity.
  @inlinable
  final var cycle: Int { s.extras?.cycle ?? 0 }

  /// The external hold the node's alias anchor is: 1 for a set alias, 0 otherwise.
  @inlinable
  final var anchorHolds: Int32 { s.flags.contains(.anchored) ? 1 : 0 }

  /// The map the node is part of, unretained: its witness's (`_Witness._core`, set with the
  /// witness's table; rules 1 and 6 of `_Lifetime.swift`: the table is the map's, and whatever
  /// holds the node pins the map). Read without the lock: the witness and its map are
  /// constants.
  @inlinable
  final var core: Unmanaged<_MapCore> {
    Unmanaged.passUnretained(witness)._withUnsafeGuaranteedRef { $0._core.unsafelyUnwrapped }
  }

  /// Whether a handle may give its hold back without the lock while another hold remains:
  /// not on an alias slot, whose anchor does not pin it (see `_Lifetime.pin(_:)`). NB: read from
  /// the witness, a constant, since it is read without the lock.
  @inlinable
  final var releasesWithoutLock: Bool { witness.kind != .alias }

  /// Whether the node counts as stored: a registered entity, a set alias, a batch list.
  @inlinable
  final var isPresent: Bool {
    let flags = s.flags
    if flags.contains(.registered) {
      return !flags.contains(.alias) || witness.holdsAliasValue(self)
    }
    return flags.contains(.list) && !flags.contains(.removed)
  }

  /// Whether a write stamped `incoming` may replace the value; see ``Stamp``.
  @inlinable
  final func admits(_ incoming: Stamp?) -> Bool { s.stamp._admits(incoming) }
}

/// A node holding a value of type `Value`: an entity (`_EntityNode`), an alias slot
/// (`_AliasNode`), a batch list, or a live query (`_QueryNode`).
@usableFromInline
class _Node<Value: Sendable>: _AnyNode {
  #if DEBUG
    @usableFromInline final var value: Value
  #else
    @exclusivity(unchecked) @usableFromInline final var value: Value
  #endif

  /// NB: `consuming`, so that the value moves into the node instead of being copied there and
  /// released by the caller; the witness borrowed, as in `_AnyNode.init(witness:flags:)`.
  @inlinable
  init(value: consuming Value, witness: __shared _Witness, flags: _NodeFlags) {
    self.value = value
    super.init(witness: witness, flags: flags)
  }

  /// The value of `node`, which must be a `_Node<Value>`.
  @inlinable
  static func _value(of node: _AnyNode) -> Value {
    unsafeDowncast(node, to: _Node<Value>.self).value
  }

  /// What the map knows about `Value`, from the witness. NB: borrowed, as every use of it is:
  /// the witness keeps it (rule 1 of `_Lifetime.swift`).
  @inlinable
  final var schema: Unmanaged<_Schema<Value>> {
    .passUnretained(unsafeDowncast(witness.erasedSchema, to: _Schema<Value>.self))
  }

  /// The write's stash of values of this node's type, from the witness, borrowed as `schema`.
  @inlinable
  final var stash: Unmanaged<_Stash<Value>> {
    .passUnretained(unsafeDowncast(witness.stash, to: _Stash<Value>.self))
  }

  /// Calls `body` with the node's schema, borrowed.
  @inlinable
  final func withSchema<R>(_ body: (_Schema<Value>) -> R) -> R {
    schema._withUnsafeGuaranteedRef(body)
  }

  /// Calls `body` with the write's stash of this node's type, borrowed.
  @inlinable
  final func withStash<R>(_ body: (_Stash<Value>) -> R) -> R {
    stash._withUnsafeGuaranteedRef(body)
  }
}

/// The node of one entity.
@usableFromInline
final class _EntityNode<T: Identifiable & Sendable>: _Node<T> {
  /// The node's rank in its table's creation order: live queries without a comparator, and
  /// ties, list their members in this order, the order they were first stored. Ranks are
  /// 32 bits; once a table has handed out 2^31 of them, the next commit renumbers its nodes
  /// from 1, in the same order (`_Table.renumberNodes()`).
  @inlinable var sequence: UInt32 { s.sequence }

  /// NB: the value is consumed, moved into the node; the table is borrowed (`__shared`),
  /// sparing a retain and a release per node created. The rank is taken before the node is
  /// made: taken after, the call (out of line, see `_Table.nextSequence()`) was wrapped in a
  /// retain and a release of the new node, about 5 % of `store.insert`.
  @inlinable
  init(value: consuming T, table: __shared _Table<T>) {
    let sequence = table.nextSequence()
    super.init(value: value, witness: table.witness, flags: table.witness.flags)
    s.sequence = sequence
  }

  /// The table of the node's type, in the node's map: its witness's (rule 1 of
  /// `_Lifetime.swift`).
  @inlinable
  var table: _Table<T> { unsafeDowncast(witness.table, to: _Table<T>.self) }

  /// Calls `body` with the node's table, borrowed: a reference read from ``table`` is retained
  /// and released around its uses.
  @inlinable
  func withTable<R>(_ body: (_Table<T>) -> R) -> R {
    Unmanaged.passUnretained(witness.table)._withUnsafeGuaranteedRef {
      body(unsafeDowncast($0, to: _Table<T>.self))
    }
  }
}

extension Array where Element == Int {
  /// How many elements of this ascending array are less than `value`.
  @usableFromInline
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
