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
  /// does; see `_MapCore.adopt(_:)`.
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
  /// On the path of the value being materialized; see `_Materialize.swift`.
  @inlinable static var onPath: _PassBits { _PassBits(rawValue: 1 << 5) }
  /// Taken out by the removal being computed.
  @inlinable static var removing: _PassBits { _PassBits(rawValue: 1 << 6) }
  /// Created by this pass: it has no stored value to merge into.
  @inlinable static var fresh: _PassBits { _PassBits(rawValue: 1 << 7) }
}

/// Everything a node knows besides its value and its hold counts, in one stored property.
///
/// NB: one struct, so that the class needs one `@exclusivity(unchecked)` annotation, not one per
/// field. 40 bytes, 16 of them the first parent: most nested entities have one, and keeping
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

  @inlinable
  init(flags: _NodeFlags) {
    self.flags = flags
  }
}

/// A link from a parent to one occurrence of a child entity inside the parent's value.
@usableFromInline
struct _ChildLink {
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
///   connected part of the graph it belongs to. See `_Materialize.swift`.
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

/// A slot of the map: one entity, one alias, or the list behind a batch handle.
///
/// Every field is guarded by the owning map's lock. The typed part lives in `_Node<Value>`; this
/// base holds what the graph and lifetime algorithms need without knowing the type.
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

  @usableFromInline
  init(flags: _NodeFlags) {
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

  /// Whether a handle may give its hold back without the lock while another hold remains:
  /// not on an alias slot, whose anchor does not pin it (see `_MapCore.pin()`). NB: a method
  /// of the class rather than a flag, so that it is read without the lock.
  @usableFromInline
  var releasesWithoutLock: Bool { true }

  /// Whether the node counts as stored: a registered entity, a set alias, a batch list.
  @inlinable
  final var isPresent: Bool {
    let flags = s.flags
    if flags.contains(.registered) { return !flags.contains(.alias) || holdsAliasValue }
    return flags.contains(.list) && !flags.contains(.removed)
  }

  // MARK: Typed operations, implemented by `_Node<Value>` and its subclasses

  /// Whether the alias slot this node is holds a value. Only meaningful for alias nodes.
  @usableFromInline
  var holdsAliasValue: Bool { false }

  /// Writes the current value of the child at `slot` into this node's value.
  @usableFromInline
  func patch(slot _: Int, _: _MapCore) { fatalError("abstract") }

  /// Rebuilds this node's value from the current values of its children, cutting cycles; see
  /// `_Materialize.swift`.
  @usableFromInline
  func materialize(_: _MapCore) { fatalError("abstract") }

  /// Whether this node's value cannot exist without the child at `slot`.
  @usableFromInline
  func requiresChild(atSlot _: Int, _: _MapCore) -> Bool { fatalError("abstract") }

  /// Removes the children at `slots` from this node's value, and returns the links that remain
  /// with their new positions.
  @usableFromInline
  func dropChildren(atSlots _: [Int], _: _MapCore) -> [_ChildLink] { fatalError("abstract") }

  /// Claims the nested entities of the payload of claim `index`, one depth further.
  @usableFromInline
  func expand(claim _: Int, _: _MapCore) { fatalError("abstract") }

  /// For a ``Mergeable`` type, folds every occurrence chained to winning claim `index` into its
  /// payload; see `_Node.mergeClaims(_:_:atExpansion:)`.
  @usableFromInline
  func mergeClaims(_: Int, _: _MapCore, atExpansion _: Bool) { fatalError("abstract") }

  /// Whether the payload of claim `index` is bit for bit the node's value (see `_identical`);
  /// never for a node the pass created, nor for a type that is not `Equatable`, whose
  /// subscribers are told of every write.
  @usableFromInline
  func isIdentical(toClaim _: Int, _: _MapCore) -> Bool { fatalError("abstract") }

  /// Makes the payload of claim `index` the node's value.
  @usableFromInline
  func apply(claim _: Int, _: _MapCore) { fatalError("abstract") }

  /// Keeps a copy of the value in the write's stash and returns where, for the journal.
  @usableFromInline
  func saveValue(_: _MapCore) -> Int32 { fatalError("abstract") }

  /// Puts back the value saved at `index`.
  @usableFromInline
  func restoreValue(_: Int32, _: _MapCore) { fatalError("abstract") }

  /// Whether the value differs from the one saved at `index`: always, unless the value type is
  /// `Equatable` and the two are `==`.
  @usableFromInline
  func differs(fromSaved _: Int32, _: _MapCore) -> Bool { fatalError("abstract") }

  /// Takes the node out of its table or of the alias table.
  @usableFromInline
  func unregister(from _: _MapCore) { fatalError("abstract") }

  /// Puts a removed node back into its table; used by rollback.
  @usableFromInline
  func reregister(in _: _MapCore) { fatalError("abstract") }

  /// A snapshot of the value for the subscribers, to deliver after the lock is released.
  @usableFromInline
  func makeDelivery(version _: UInt64) -> _Delivery? { fatalError("abstract") }

  /// The removal of the node, with its value, for `subscribers`.
  @usableFromInline
  func makeRemovalDelivery(to _: [_AnySubscriber]) -> _Delivery { fatalError("abstract") }

  /// A snapshot of the value for one subscriber, to deliver after the lock is released.
  @usableFromInline
  func makeDelivery(to _: _AnySubscriber, version _: UInt64) -> _Delivery {
    fatalError("abstract")
  }

  /// Names the entity in log events. `nil` for aliases and batch lists.
  @usableFromInline
  func makeReference() -> EntityReference? { nil }

  /// The alias this node is the slot of, if it is one.
  var aliasName: String? { nil }

  /// Empties the alias slot this node is. Only called on alias nodes.
  @usableFromInline
  func clearAliasValue() { fatalError("abstract") }

  /// Whether a write stamped `incoming` may replace the value; see ``Stamp``.
  @inlinable
  final func admits(_ incoming: Stamp?) -> Bool { s.stamp._admits(incoming) }

  /// Whether every child slot holds its child's stored value; for `_checkInvariants`.
  @usableFromInline
  func slotsMatchChildren(_: _MapCore) -> Bool { fatalError("abstract") }

  /// Whether the node's `.mergeable` flag says what its schema says; for `_checkInvariants`.
  func flagsMatchSchema(_: _MapCore) -> Bool { fatalError("abstract") }

  // MARK: Consumers of the change log (queries, indexes, collectors)

  /// Whether live queries, collectors or persistence read this node's changes: an entity whose
  /// type has any, or is persisted.
  @usableFromInline
  var hasConsumers: Bool { false }

  /// Hands a change published without the journal to persistence, when the node is an entity
  /// of a persisted type.
  @usableFromInline
  func persist(_: _ChangeKind, stampBefore _: Stamp) {}

  /// Tells persistence, in the middle of a write, that the node's entity was removed: the
  /// write's later reads must not load it back from the store. Does nothing unless its type
  /// is persisted.
  func persistRemoval(_: _MapCore) {}

  /// Only for an entity: logs a `changed` event with its value before the write (saved at
  /// `saved`) and now.
  func logChange(_: _ChangeKind, saved _: Int32, _: _MapCore) {}

  /// Whether consumers of this node's changes compare them with its value before the write:
  /// an entity whose type has live queries or collectors.
  @usableFromInline
  var readsOldValues: Bool { false }

  /// Tells the live queries and collectors of the node's type what the committed write did to
  /// it, and persists the change when its type is persisted. `saved` is where its journal saved
  /// its value from before the write, if it did; `stampBefore` is its stamp then.
  @usableFromInline
  func feedConsumers(_: _ChangeKind, saved _: Int32, stampBefore _: Stamp, _: _MapCore) {}

  /// Only for a query node, which nobody holds any more: stops maintaining it and gives back
  /// its holds on its members.
  @usableFromInline
  func detachConsumer(_: _MapCore) {}

  /// Only for a query node: what is wrong with it, if anything; for `_checkInvariants`.
  func queryProblem(_: _MapCore) -> String? { nil }

  /// Only for an entity: a shadow for optimistic layers, with the value saved at `saved` as its
  /// value underneath: none when the write created the node (`_JournalEntry.created`), its
  /// current value when its record saved none (`_JournalEntry.notSaved`).
  func makeShadow(saved _: Int32, stamp _: Stamp) -> _AnyShadow? { nil }
}

/// A slot holding a value of type `Value`: the base of entity, alias and batch list nodes.
@usableFromInline
class _Node<Value: Sendable>: _AnyNode {
  #if DEBUG
    @usableFromInline final var value: Value
  #else
    @exclusivity(unchecked) @usableFromInline final var value: Value
  #endif

  /// NB: `consuming`, so that the value moves into the node instead of being copied there and
  /// released by the caller.
  @usableFromInline
  init(value: consuming Value, flags: _NodeFlags) {
    self.value = value
    super.init(flags: flags)
  }

  /// The value of `node`, which must be a `_Node<Value>`.
  @inlinable
  static func _value(of node: _AnyNode) -> Value {
    unsafeDowncast(node, to: _Node<Value>.self).value
  }

  /// What the map knows about `Value`: its nested entities and its equality.
  @usableFromInline
  func schema(_: _MapCore) -> _Schema<Value> { fatalError("abstract") }

  /// ``schema(_:)``, unretained. NB: an entity's schema lives in its table (rule 1 of
  /// `_Lifetime.swift`), an alias's or a list's in the node itself, which the caller holds;
  /// taking it unretained saves an atomic retain and release each time a pass reaches the node.
  @usableFromInline
  func unretainedSchema(_ core: _MapCore) -> Unmanaged<_Schema<Value>> {
    Unmanaged.passUnretained(schema(core))
  }

  /// Calls `body` with the node's schema, borrowed.
  @inlinable
  final func withSchema<R>(_ core: _MapCore, _ body: (_Schema<Value>) -> R) -> R {
    unretainedSchema(core)._withUnsafeGuaranteedRef(body)
  }

  /// The write's stash of values of this node's type.
  @usableFromInline
  func stash(_: _MapCore) -> _Stash<Value> { fatalError("abstract") }

  /// ``stash(_:)``, unretained, as ``unretainedSchema(_:)``: an entity's stash lives in its
  /// table (rule 1), an alias's or a list's in the node, and a pass reads it for every claim.
  @usableFromInline
  func unretainedStash(_ core: _MapCore) -> Unmanaged<_Stash<Value>> {
    Unmanaged.passUnretained(stash(core))
  }

  /// Calls `body` with the write's stash of this node's type, borrowed.
  @inlinable
  final func withStash<R>(_ core: _MapCore, _ body: (_Stash<Value>) -> R) -> R {
    unretainedStash(core)._withUnsafeGuaranteedRef(body)
  }

  @inlinable
  final func _patch(slot: Int, _ core: _MapCore) {
    _patch(slot: slot, schema: schema(core))
  }

  /// Writes the child linked at `slot` into the value, with the node's `schema`.
  @inlinable
  final func _patch(slot: Int, schema: _Schema<Value>) {
    let link = s.extras.unsafelyUnwrapped.children[slot]
    // NB: borrowed, not retained (rule 7): the link's child is in the map (rule 4), and the
    // schema keeps its accessors. A fan-out patches every parent of a child, and each retain
    // and release is an atomic operation.
    let accessor = Unmanaged.passUnretained(schema.accessor(link.accessor))
    let child = Unmanaged.passUnretained(link.child)
    guard link.child !== self else {
      // NB: a value holding its own entity (a member among its friends) reads itself while
      // being written: write into a copy.
      var copy = value
      accessor._withUnsafeGuaranteedRef { $0.write(link.child, Int(link.position), &copy) }
      value = copy
      return
    }
    accessor._withUnsafeGuaranteedRef { accessor in
      child._withUnsafeGuaranteedRef { accessor.write($0, Int(link.position), &value) }
    }
  }

  @usableFromInline
  override func patch(slot: Int, _ core: _MapCore) {
    _patch(slot: slot, core)
  }

  @inlinable
  final func _materialize(_ core: _MapCore) {
    value = _materialized(core)
  }

  /// Rewrites the value of a node on no cycle with its children's stored values, by its
  /// `schema`: `_materialize(_:)` for the common case.
  ///
  /// NB: inlinable, so that the typed operations (`_EntityOps`, `_ListNode.rebuild`) run it
  /// specialized; the accessors are borrowed, since each retain and release is an atomic
  /// operation.
  @inlinable
  final func _rebuildFromChildren(schema: _Schema<Value>) {
    // NB: when every slot already holds its child's value (a new aggregate, a page stored
    // again unchanged), rebuilding writes nothing, yet copying the value to rebuild it retains
    // and releases every reference it holds.
    guard !_holdsItsChildren(schema: schema) else { return }
    value = _rebuiltFromChildren(schema: schema)
  }

  /// Whether every child slot of the value holds that child's stored value bit for bit.
  @inlinable
  final func _holdsItsChildren(schema: _Schema<Value>) -> Bool {
    guard s.extras != nil else { return true }
    // NB: the extras, each accessor and each child borrowed (rule 7), as in
    // `_rebuiltFromChildren`.
    return Unmanaged.passUnretained(s.extras.unsafelyUnwrapped)._withUnsafeGuaranteedRef {
      extras in
      for index in extras.children.indices {
        let link = extras.children[index]
        let holds = Unmanaged.passUnretained(schema.accessor(link.accessor))
          ._withUnsafeGuaranteedRef { accessor in
            Unmanaged.passUnretained(link.child)._withUnsafeGuaranteedRef {
              accessor.holds($0, Int(link.position), &value)
            }
          }
        if !holds { return false }
      }
      return true
    }
  }

  /// The value of a node on no cycle, rebuilt from its children's stored values with its
  /// `schema`: `_materialized(_:)` for the common case.
  @inlinable
  final func _rebuiltFromChildren(schema: _Schema<Value>) -> Value {
    var copy = value
    guard s.extras != nil else { return copy }
    // NB: the extras, each accessor and each child borrowed too (rule 7: the node keeps its
    // extras, the schema its accessors, and linked children are in the map, rule 4), the
    // links read by index rather than copied.
    Unmanaged.passUnretained(s.extras.unsafelyUnwrapped)._withUnsafeGuaranteedRef { extras in
      for index in extras.children.indices {
        let link = extras.children[index]
        Unmanaged.passUnretained(schema.accessor(link.accessor))._withUnsafeGuaranteedRef {
          accessor in
          Unmanaged.passUnretained(link.child)._withUnsafeGuaranteedRef {
            accessor.write($0, Int(link.position), &copy)
          }
        }
      }
    }
    return copy
  }

  @usableFromInline
  override func materialize(_ core: _MapCore) {
    _materialize(core)
  }

  @usableFromInline
  final override func requiresChild(atSlot slot: Int, _ core: _MapCore) -> Bool {
    let link = s.extras.unsafelyUnwrapped.children[slot]
    return schema(core).accessor(link.accessor).remove == nil
  }

  @usableFromInline
  final override func dropChildren(atSlots slots: [Int], _ core: _MapCore) -> [_ChildLink] {
    let schema = schema(core)
    let links = children
    let droppedSlots = Set(slots)
    // The dropped positions of each accessor, applied once per accessor, ascending.
    var dropped: [Int32: [Int]] = [:]
    for slot in droppedSlots {
      dropped[links[slot].accessor, default: []].append(Int(links[slot].position))
    }
    var copy = value
    for (accessor, positions) in dropped {
      schema.accessor(accessor).remove.unsafelyUnwrapped(positions.sorted(), &copy)
    }
    value = copy
    for key in dropped.keys { dropped[key]!.sort() }
    // The other links keep their order; their positions shift down past the dropped ones.
    return links.indices.compactMap { slot in
      let link = links[slot]
      guard !droppedSlots.contains(slot) else { return nil }
      let shift = dropped[link.accessor]?._countLess(than: Int(link.position)) ?? 0
      return _ChildLink(
        child: link.child, accessor: link.accessor, position: link.position - Int32(shift))
    }
  }

  @inlinable
  final func _expand(claim index: Int, _ core: _MapCore) {
    withSchema(core) { schema in
      // NB: a leaf has nothing to visit; copying its payload out would retain its references.
      guard !schema.erasedAccessors.isEmpty else { return }
      let payload = withStash(core) { $0.values[Int(core.scratch.claims[index].payload)] }
      for accessorIndex in schema.erasedAccessors.indices {
        core.scratch.accessor = Int32(accessorIndex)
        schema.accessor(Int32(accessorIndex)).forEachChild(payload, core)
      }
    }
  }

  @usableFromInline
  override func expand(claim index: Int, _ core: _MapCore) {
    _expand(claim: index, core)
  }

  /// Folds the stored value (unless the pass created the node) and every accepted occurrence
  /// of the node into the payload of its winning claim `index`: the losing occurrences first,
  /// in the order the claims walk met them, the winner last. An aggregate merges before it is
  /// expanded, with the occurrences met so far; an entity without nested entities merges
  /// before it is applied, with all of them. Does nothing unless `Value` is ``Mergeable``.
  @inlinable
  final func _mergeClaims(_ index: Int, _ core: _MapCore, atExpansion: Bool) {
    let schema = schema(core)
    guard let merge = schema.merge, schema.isLeaf != atExpansion,
      core.scratch.claims[index].depth >= core.scratch.mergeFromDepth
    else { return }
    _mergeClaimChain(index, core, merge)
  }

  // NB: apart from the check above, so that the check, made for every claim of every type,
  // does not instantiate `Value?`'s metadata where this method runs unspecialized.
  @usableFromInline @inline(never)
  final func _mergeClaimChain(
    _ index: Int, _ core: _MapCore, _ merge: @Sendable (Value, Value) -> Value
  ) {
    let fresh = s.bits.contains(.fresh)
    var chain: [Int] = []
    var next = Int(core.scratch.claims[index].previous)
    while next >= 0 {
      chain.append(next)
      next = Int(core.scratch.claims[next].previous)
    }
    guard !(fresh && chain.isEmpty) else { return }
    chain.sort()
    chain.append(index)
    let stash = stash(core)
    var merged: Value? = fresh ? nil : value
    var stamp: Stamp?
    for claimIndex in chain {
      let claim = core.scratch.claims[claimIndex]
      guard claim.verdict == .accepted else { continue }
      let payload = stash.values[Int(claim.payload)]
      merged = merged.map { merge(payload, $0) } ?? payload
      if let claimStamp = claim.stamp, !claimStamp.isNaN {
        stamp = max(stamp ?? claimStamp, claimStamp)
      }
    }
    // NB: a node none of whose occurrences applies keeps its winner's verdict.
    guard let merged, chain.contains(where: { core.scratch.claims[$0].verdict == .accepted }) else {
      return
    }
    core.scratch.claims[index].payload = stash.append(merged, core)
    core.scratch.claims[index].verdict = .accepted
    core.scratch.claims[index].stamp = stamp
  }

  @usableFromInline
  override func mergeClaims(_ index: Int, _ core: _MapCore, atExpansion: Bool) {
    _mergeClaims(index, core, atExpansion: atExpansion)
  }

  @inlinable
  final func _isIdentical(toClaim index: Int, _ core: _MapCore) -> Bool {
    guard !s.bits.contains(.fresh) && withSchema(core, { $0.isEquatable }) else { return false }
    return _holdsPayload(Int(core.scratch.claims[index].payload), core)
  }

  /// Whether the value is bit for bit the one at `payload` in the stash. Compares in place.
  @inlinable
  final func _holdsPayload(_ payload: Int, _ core: _MapCore) -> Bool {
    withUnsafePointer(to: &value) { stored in
      withStash(core) {
        $0.values.withUnsafeBufferPointer { payloads in
          _identical(at: stored, payloads.baseAddress! + payload)
        }
      }
    }
  }

  @usableFromInline
  override func isIdentical(toClaim index: Int, _ core: _MapCore) -> Bool {
    _isIdentical(toClaim: index, core)
  }

  @inlinable
  final func _apply(claim index: Int, _ core: _MapCore) {
    let payload = Int(core.scratch.claims[index].payload)
    // NB: a node the pass created already holds its first occurrence, most often the payload
    // itself: skipping the copy spares a retain and a release per reference in the value.
    if s.bits.contains(.fresh) && _holdsPayload(payload, core) { return }
    value = withStash(core) { $0.values[payload] }
  }

  @usableFromInline
  override func apply(claim index: Int, _ core: _MapCore) {
    _apply(claim: index, core)
  }

  @inlinable
  final func _saveValue(_ core: _MapCore) -> Int32 {
    stash(core).append(value, core)
  }

  @usableFromInline
  override func saveValue(_ core: _MapCore) -> Int32 {
    _saveValue(core)
  }

  @inlinable
  final func _restoreValue(_ index: Int32, _ core: _MapCore) {
    value = stash(core).values[Int(index)]
  }

  @usableFromInline
  override func restoreValue(_ index: Int32, _ core: _MapCore) {
    _restoreValue(index, core)
  }

  @inlinable
  final func _differs(fromSaved index: Int32, _ core: _MapCore) -> Bool {
    schema(core).differ(stash(core).values[Int(index)], value)
  }

  @usableFromInline
  override func differs(fromSaved index: Int32, _ core: _MapCore) -> Bool {
    _differs(fromSaved: index, core)
  }

  @inlinable
  final func _makeDelivery(version: UInt64) -> _Delivery? {
    guard let subscribers = s.extras?.subscribers, !subscribers.isEmpty else { return nil }
    return .value(value, version: version, to: subscribers)
  }

  @usableFromInline
  override func makeDelivery(version: UInt64) -> _Delivery? {
    _makeDelivery(version: version)
  }

  @inlinable
  final func _makeRemovalDelivery(to subscribers: [_AnySubscriber]) -> _Delivery {
    .removal(lastValue: value, to: subscribers)
  }

  @usableFromInline
  override func makeRemovalDelivery(to subscribers: [_AnySubscriber]) -> _Delivery {
    _makeRemovalDelivery(to: subscribers)
  }

  @inlinable
  final func _makeDelivery(to subscriber: _AnySubscriber, version: UInt64) -> _Delivery {
    .value(value, version: version, to: [subscriber])
  }

  @usableFromInline
  override func makeDelivery(to subscriber: _AnySubscriber, version: UInt64) -> _Delivery {
    _makeDelivery(to: subscriber, version: version)
  }

  final override func flagsMatchSchema(_ core: _MapCore) -> Bool {
    let schema = schema(core)
    return s.flags.contains(.mergeable) == (schema.merge != nil)
      && (!s.flags.contains(.leaf) || schema.isLeaf)
  }

  @usableFromInline
  final override func slotsMatchChildren(_ core: _MapCore) -> Bool {
    let schema = schema(core)
    guard let equality = schema.equality else { return true }
    if cycle != 0 { return equality.equal(value, _materialized(core)) }
    var copy = value
    for link in children {
      schema.accessor(link.accessor).write(link.child, Int(link.position), &copy)
    }
    return equality.equal(value, copy)
  }

  @usableFromInline
  override func unregister(from _: _MapCore) {}
  @usableFromInline
  override func reregister(in _: _MapCore) {}
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
