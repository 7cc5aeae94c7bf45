// Optimistic layers.
//
// Nodes always hold what everyone sees: the visible value. An entity a pending layer wrote is
// *shadowed*: a `_Shadow` keeps its value underneath (what the server said) and, per layer over
// it, the value that layer wrote. The visible value is the newest layer's.
//
// A write from outside the layers goes underneath. When the outermost write begins, every
// shadowed entity is *lowered* to its value underneath; the write then runs as any write
// (stamps compare with the value underneath, merges merge into it, `update` starts from it),
// and the nodes it stores into are listed (`_Outbox.written`). Before it commits, their new
// values are kept as the values underneath, and every shadowed entity is *raised* back to its
// newest layer's value. The change log compares each node before the write with the node at
// commit, so nobody is told of the lowering and raising, only of visible changes; queries and
// collectors see visible values only.
//
// Lowering and raising show a value in a node without writing the entities it nests
// (`show(_:in:)`: the nested occurrences only link), so that an aggregate shows its layer's or
// its underneath value over its nested entities' own visible values. An entity that nests
// nothing and that no parent shows is lowered by exchanging its value with the shadow's value
// underneath, and raised by exchanging them back (`_Shadow._lower(_:)`): no value is copied.

/// A list that keeps its first element inline, for the lists of the layers: most layers write
/// one entity, and most shadowed entities have one layer over them, so a list of one allocates
/// nothing. (Each list was an array: three of the seven allocations a layer and its rollback
/// made.)
@usableFromInline
struct _InlineList<Element>: RandomAccessCollection {
  // NB: `tail` is empty while `head` is `nil`.
  @usableFromInline var head: Element?
  @usableFromInline var tail: [Element] = []

  @inlinable init() {}

  @inlinable var startIndex: Int { 0 }
  @inlinable var endIndex: Int { head == nil ? 0 : 1 + tail.count }
  @inlinable var isEmpty: Bool { head == nil }
  @inlinable var last: Element? { tail.last ?? head }

  @inlinable
  subscript(position: Int) -> Element {
    position == 0 ? head! : tail[position - 1]
  }

  @inlinable
  mutating func append(_ element: Element) {
    if head == nil { head = element } else { tail.append(element) }
  }

  /// - Complexity: O(*n*): the elements after `position` move.
  @inlinable
  mutating func remove(at position: Int) {
    precondition(position >= 0 && position < count, "position out of range")
    if position > 0 {
      tail.remove(at: position - 1)
    } else if tail.isEmpty {
      head = nil
    } else {
      head = tail.removeFirst()
    }
  }
}

/// How a layer is to end: committed, or rolled back; and for `commit(confirmedBy:)`, the store of
/// the server's answer that goes with it.
@usableFromInline
struct _LayerEnd {
  let layer: OptimisticLayer
  let commit: Bool
  /// Stores the answer, as the write that ends the layer.
  let answer: ((_MapCore) -> Void)?
}

/// The map's optimistic layers.
@usableFromInline
struct _Layers {
  /// The shadowed entities, in the order they were first shadowed.
  @usableFromInline var order: [_AnyShadow] = []
  /// The shadowed entities by node, while there are more than `indexedAbove` of them; empty
  /// otherwise (see `shadow(of:)`).
  @usableFromInline var index: [ObjectIdentifier: _AnyShadow] = [:]
  var lastSerial = 0
  /// How many layers are neither committed nor rolled back.
  var pendingCount = 0
  /// Commits and rollbacks asked for inside a write, done when it ends.
  @usableFromInline var deferred: [_LayerEnd] = []

  @usableFromInline init() {}

  /// Up to how many shadows are looked for in the order, without an index.
  @inlinable static var indexedAbove: Int { 8 }

  /// Whether any entity is shadowed.
  @inlinable
  var isActive: Bool { !order.isEmpty }

  /// The shadow of `node`, if a layer shadows it.
  ///
  /// NB: a few shadows are looked for in the order: most writes under layers meet one or two
  /// shadows, and comparing a reference or two costs less than hashing one, and a layer and its
  /// rollback then insert into and remove from no table. Past `indexedAbove` shadows, the index
  /// lists the same shadows as the order between any two changes to them (`_checkInvariants`).
  @inlinable
  func shadow(of node: _AnyNode) -> _AnyShadow? {
    guard order.count <= Self.indexedAbove else { return index[ObjectIdentifier(node)] }
    for position in order.indices where order[position].node === node { return order[position] }
    return nil
  }

  /// The shadow of `node`, unretained, if a layer shadows it: the order (and, past a few, the
  /// index) holds it while it is listed, so it is for a caller that keeps both as they are
  /// while it uses it.
  @inlinable
  func unretainedShadow(of node: _AnyNode) -> Unmanaged<_AnyShadow>? {
    guard order.count <= Self.indexedAbove else {
      return index[ObjectIdentifier(node)].map { Unmanaged.passUnretained($0) }
    }
    for position in order.indices where order[position].node === node {
      return Unmanaged.passUnretained(order[position])
    }
    return nil
  }

  /// Adds `shadow`, new, after the others.
  mutating func add(_ shadow: _AnyShadow) {
    order.append(shadow)
    guard order.count > Self.indexedAbove else { return }
    if order.count == Self.indexedAbove + 1 {
      for shadow in order { index[ObjectIdentifier(shadow.node)] = shadow }
    } else {
      index[ObjectIdentifier(shadow.node)] = shadow
    }
  }

  /// Takes `shadow` out of the index; the caller takes it out of the order.
  mutating func unindex(_ shadow: _AnyShadow) {
    if !index.isEmpty { index[ObjectIdentifier(shadow.node)] = nil }
  }

  /// Takes the shadows `shouldRemove` picks out of the order, which keeps its buffer, and drops
  /// the index once the order is short enough to look through.
  mutating func remove(where shouldRemove: (_AnyShadow) -> Bool) {
    order.removeAllKeepingCapacity(where: shouldRemove)
    if order.count <= Self.indexedAbove && !index.isEmpty { index.removeAll() }
  }
}

/// What one shadowed entity is underneath, and what each layer over it wrote. The typed part
/// is `_Shadow<T>`, which provides the operations (`_ShadowOps`).
///
/// NB: the values, whose type is the entity's, are not stored properties of `_Shadow<T>` but
/// live in `storage`, made and destroyed by code specialized for `T`. A generic class's deinit
/// runs unspecialized, and destroying its generic fields asked the runtime for their types'
/// metadata (`T?` and `_InlineList<T>`) on every shadow freed: about a ninth of a layer and its
/// rollback (`optimistic.apply+rollback`).
@usableFromInline
class _AnyShadow {
  /// The entity; the shadow holds it (one external hold) while it lives.
  @usableFromInline let node: _AnyNode
  // NB: exclusivity checks are off in release builds only, as on the nodes: the map's lock
  // already makes every access exclusive, and every write under a layer reads these.
  #if DEBUG
    /// Whether the entity exists underneath: not when only a layer created it.
    @usableFromInline var baseExists: Bool
    @usableFromInline var baseStamp: Stamp
    /// The layers over the entity, oldest first, with the stamp the entity had after each.
    @usableFromInline var entries = _InlineList<(serial: Int, stamp: Stamp)>()
    /// Whether the write under way lowered the entity by exchanging values (see
    /// `_Shadow._lower(_:)`): the node holds the value underneath, and the shadow's slot for it
    /// the value the node showed, its newest layer's. Never between writes.
    @usableFromInline var isExchanged = false
  #else
    @exclusivity(unchecked) @usableFromInline var baseExists: Bool
    @exclusivity(unchecked) @usableFromInline var baseStamp: Stamp
    @exclusivity(unchecked) @usableFromInline var entries = _InlineList<
      (serial: Int, stamp: Stamp)
    >()
    @exclusivity(unchecked) @usableFromInline var isExchanged = false
  #endif
  /// The operations that need the entity's type.
  @usableFromInline let ops: _ShadowOps
  /// The shadow's `_ShadowValues<T>`, which `_Shadow<T>` reads and writes. The shadow owns
  /// it: `_Shadow.init` takes storage from its ops (`_ShadowOps.storage(for:)`) and
  /// initializes it, and the deinit below destroys the values and gives the storage back
  /// (`recycle(_:)`), so the values live exactly as long as the shadow.
  @usableFromInline let storage: UnsafeMutableRawPointer

  @usableFromInline
  init(
    node: _AnyNode, baseExists: Bool, baseStamp: Stamp, ops: _ShadowOps,
    storage: UnsafeMutableRawPointer
  ) {
    self.node = node
    self.baseExists = baseExists
    self.baseStamp = baseStamp
    self.ops = ops
    self.storage = storage
  }

  deinit {
    ops.destroy(storage)
    ops.recycle(storage)
  }

  /// Marks the shadow and its node as exchanged for the write under way (see
  /// `_Shadow._lower(_:)`), or no longer: both at once, so that they never disagree.
  @inlinable
  final func markExchanged(_ exchanged: Bool) {
    isExchanged = exchanged
    if exchanged { node.s.flags.insert(.exchanged) } else { node.s.flags.remove(.exchanged) }
  }

  /// Whether the layers are done with the entity: no layer is over it, or it was removed.
  final var isSpent: Bool { entries.isEmpty || !node.isPresent }

  /// Shows the value underneath, if the entity has one.
  final func lower(_ core: _MapCore) { ops.lower(Unmanaged.passUnretained(self), core) }
  /// Shows the newest layer's value.
  final func raise(_ core: _MapCore) { ops.raise(Unmanaged.passUnretained(self), core) }
  /// Keeps the node's value as the value underneath: a write from outside stored into it.
  final func keepAsBase() { ops.keepAsBase(Unmanaged.passUnretained(self)) }
  /// Records the node's value as layer `serial`'s.
  final func push(_ serial: Int) { ops.push(Unmanaged.passUnretained(self), serial) }
  /// Forgets layer `serial`'s value.
  final func pop(_ serial: Int) { ops.pop(Unmanaged.passUnretained(self), serial) }
  /// Makes layer `serial`'s value the value underneath, unless a newer stamp is there.
  final func commit(_ serial: Int) { ops.commit(Unmanaged.passUnretained(self), serial) }
  /// What is wrong with the shadow between writes, if anything; for `_checkInvariants`.
  final func problem() -> String? { ops.problem(self) }
}

/// The operations on a shadow that need its entity's type, made where `T` is known, so that
/// what runs on every write from outside (lowering, raising, keeping a value underneath) runs
/// specialized. One per entity type, made with its table's hooks and shared by its shadows.
///
/// NB: @unchecked Sendable for `spare`, which only the map's writes touch, under its lock (the
/// ops are one table's, of one map, and its shadows are made and freed in its writes), or the
/// map's teardown.
@usableFromInline
final class _ShadowOps: @unchecked Sendable {
  // NB: the shadow unretained, for those that run on every write under a layer and on every
  // layer made and ended: the caller borrows it, and passing the reference itself retained and
  // released it around each call.
  @usableFromInline let lower: @Sendable (Unmanaged<_AnyShadow>, _MapCore) -> Void
  @usableFromInline let raise: @Sendable (Unmanaged<_AnyShadow>, _MapCore) -> Void
  @usableFromInline let keepAsBase: @Sendable (Unmanaged<_AnyShadow>) -> Void
  @usableFromInline let push: @Sendable (Unmanaged<_AnyShadow>, Int) -> Void
  @usableFromInline let pop: @Sendable (Unmanaged<_AnyShadow>, Int) -> Void
  @usableFromInline let commit: @Sendable (Unmanaged<_AnyShadow>, Int) -> Void
  @usableFromInline let problem: @Sendable (_AnyShadow) -> String?
  /// Destroys a shadow's values, leaving their storage to `recycle(_:)`.
  @usableFromInline let destroy: @Sendable (UnsafeMutableRawPointer) -> Void
  /// The storage of a shadow freed, kept for the next shadow made: a layer and its rollback
  /// made and freed one each, with an allocation and a free. `nil` while none is kept.
  #if DEBUG
    @usableFromInline var spare: UnsafeMutableRawPointer?
  #else
    @exclusivity(unchecked) @usableFromInline var spare: UnsafeMutableRawPointer?
  #endif

  @inlinable
  init<T: Identifiable & Sendable>(of _: T.Type) {
    @Sendable func shadow(_ erased: _AnyShadow) -> _Shadow<T> {
      unsafeDowncast(erased, to: _Shadow<T>.self)
    }
    lower = { erased, core in erased._withUnsafeGuaranteedRef { shadow($0)._lower(core) } }
    raise = { erased, core in erased._withUnsafeGuaranteedRef { shadow($0)._raise(core) } }
    keepAsBase = { erased in erased._withUnsafeGuaranteedRef { shadow($0)._keepAsBase() } }
    push = { erased, serial in erased._withUnsafeGuaranteedRef { shadow($0)._push(serial) } }
    pop = { erased, serial in erased._withUnsafeGuaranteedRef { shadow($0)._pop(serial) } }
    commit = { erased, serial in
      erased._withUnsafeGuaranteedRef { shadow($0)._commit(serial) }
    }
    problem = { shadow($0)._problem() }
    destroy = { storage in
      // NB: moved out and dropped here, where `T` is known, rather than deinitialized in place:
      // `deinitialize(count:)` destroyed them through the value witnesses of `_ShadowValues`,
      // unspecialized.
      _ = storage.assumingMemoryBound(to: _ShadowValues<T>.self).move()
    }
  }

  deinit {
    spare?.deallocate()
  }

  /// Storage for a new shadow's values, of `T`: the one kept, or a new one.
  @inlinable
  func storage<T>(for _: T.Type) -> UnsafeMutablePointer<_ShadowValues<T>> {
    guard let kept = spare else { return .allocate(capacity: 1) }
    spare = nil
    return kept.assumingMemoryBound(to: _ShadowValues<T>.self)
  }

  /// Keeps `storage`, whose values were destroyed, for the next shadow, or frees it.
  @inlinable
  func recycle(_ storage: UnsafeMutableRawPointer) {
    if spare == nil { spare = storage } else { storage.deallocate() }
  }
}

/// The values of a shadow of an entity of type `T` (see `_AnyShadow` on why they are kept
/// apart from it).
@usableFromInline
struct _ShadowValues<T> {
  @usableFromInline var base: T?
  /// Each layer's value, parallel to the shadow's `entries`.
  @usableFromInline var values = _InlineList<T>()

  @inlinable
  init(base: T?) { self.base = base }
}

/// The shadow of an entity of type `T`.
@usableFromInline
final class _Shadow<T: Identifiable & Sendable>: _AnyShadow {
  @inlinable
  init(node: _EntityNode<T>, base: T?, baseStamp: Stamp, ops: _ShadowOps) {
    let values = ops.storage(for: T.self)
    values.initialize(to: _ShadowValues(base: base))
    super.init(
      node: node, baseExists: base != nil, baseStamp: baseStamp, ops: ops,
      storage: UnsafeMutableRawPointer(values))
  }

  /// The shadow's values. NB: reached through a pointer, so no exclusivity check applies; the
  /// map's lock makes every access exclusive.
  @inlinable
  var typed: UnsafeMutablePointer<_ShadowValues<T>> {
    storage.assumingMemoryBound(to: _ShadowValues<T>.self)
  }

  /// The value underneath, if the entity has one.
  @inlinable
  var base: T? {
    get { typed.pointee.base }
    set { typed.pointee.base = newValue }
  }

  /// Each layer's value, parallel to `entries`.
  @inlinable
  var values: _InlineList<T> {
    // NB: yielded, not returned: a getter copied the list (and retained what it holds) for
    // every read of its top, which every raise does.
    _read { yield typed.pointee.values }
    _modify { yield &typed.pointee.values }
  }

  @inlinable
  var entity: _EntityNode<T> { unsafeDowncast(node, to: _EntityNode<T>.self) }

  /// Shows the value underneath. An entity that `show` would give its value directly (a leaf no
  /// parent shows) exchanges it with the shadow's: the node takes the value underneath, and
  /// the shadow keeps the value the node showed until `_raise(_:)` exchanges them back.
  /// Neither value is copied, so neither is retained or released, and raising takes no copy
  /// of the newest layer's value either: it is the one the node gets back.
  @inlinable
  func _lower(_ core: _MapCore) {
    _settleExchange()
    guard typed.pointee.base != nil else { return }
    // NB: the node borrowed (the shadow holds it): retained, it was retained three times and
    // released three times around the calls below.
    Unmanaged.passUnretained(entity)._withUnsafeGuaranteedRef { node in
      // NB: a shadow no layer is over any more shows its value underneath for good, as it
      // goes.
      guard core.showsInPlace(node) && !entries.isEmpty else {
        return core.show(typed.pointee.base.unsafelyUnwrapped, stamp: baseStamp, in: node)
      }
      // NB: recorded only if the record keeps the value it shows now, for a rollback or for
      // someone who compares with it. Otherwise a record tells nobody anything: the write may
      // not touch the entity at all, and raising it gives it back bit for bit what it had; or
      // it stores into it, and the pass records it then, with the same outcome (a change
      // nobody compares). A layer that ends in the write changes what it shows: `finish`
      // records it then.
      if core.journal.savesValue(of: node, core.audience) {
        core.journal.touch(node, core.audience)
      }
      node.s.stamp = baseStamp
      swap(&node.value, &typed.pointee.base!)
      markExchanged(true)
    }
  }

  /// Shows the newest layer's value. An exchanged entity gets back the value it showed, its
  /// newest layer's (every change to the layers over it first ends the exchange), and the
  /// shadow the node's value as the value underneath, the one a write stored or the one it
  /// had: `keepAsBase` leaves an exchanged shadow alone. An entity that a parent came to
  /// nest during the write ends the exchange and is shown as any other, so that its parents
  /// are patched.
  @inlinable
  func _raise(_ core: _MapCore) {
    if isExchanged {
      let exchangedBack = Unmanaged.passUnretained(entity)._withUnsafeGuaranteedRef { node in
        guard core.showsInPlace(node) else { return false }
        markExchanged(false)
        swap(&node.value, &typed.pointee.base!)
        baseStamp = node.s.stamp
        node.s.stamp = entries.last.unsafelyUnwrapped.stamp
        return true
      }
      if exchangedBack { return }
      _settleExchange()
    }
    guard let value = values.last, let entry = entries.last else { return }
    core.show(value, stamp: entry.stamp, in: entity)
  }

  @inlinable
  func _keepAsBase() {
    // NB: raising it exchanges the values back, which keeps the node's as the value underneath.
    guard !isExchanged else { return }
    base = entity.value
    baseStamp = node.s.stamp
    baseExists = true
  }

  /// Ends an exchange (see `_lower(_:)`) before anything else reads or changes the shadow: the
  /// node's value, the value underneath during the write, is copied to the shadow, which then
  /// holds what a lowering by copy would have left.
  @inlinable
  func _settleExchange() {
    guard isExchanged else { return }
    markExchanged(false)
    _keepAsBase()
  }

  @inlinable
  func _push(_ serial: Int) {
    _settleExchange()
    entries.append((serial, node.s.stamp))
    values.append(entity.value)
  }

  @inlinable
  func _pop(_ serial: Int) {
    _settleExchange()
    guard let index = entries.firstIndex(where: { $0.serial == serial }) else { return }
    entries.remove(at: index)
    values.remove(at: index)
  }

  @usableFromInline
  func _problem() -> String? {
    guard node.isPresent, node.externalHolds > 0 else {
      return "a shadowed \(T.self) is not stored, or not held"
    }
    guard !isExchanged && !node.s.flags.contains(.exchanged) else {
      return "a shadow of \(T.self) is still exchanged after a write"
    }
    guard let top = values.last, values.count == entries.count else {
      return "a shadow of \(T.self) has no layer"
    }
    // NB: its own fields: the entities it nests show their own visible values.
    let schema = entity.table.schema
    if schema.isEquatable && !schema.ownFieldsEqual(top, entity.value) {
      return "\(T.self) \(entity.value.id) does not show its newest layer's value"
    }
    return nil
  }

  @inlinable
  func _commit(_ serial: Int) {
    _settleExchange()
    guard let index = entries.firstIndex(where: { $0.serial == serial }) else { return }
    let stamp = entries[index].stamp
    // NB: the stamp the entity had after the layer's write: the one that write gave, or, if it
    // gave none, the one it kept. A newer stamp underneath means the server wrote since: it wins.
    if baseExists && !baseStamp.isNaN && !stamp.isNaN && baseStamp > stamp { return }
    let value = values[index]
    if baseExists, let stored = base, let merging = entity.table.schema.merging {
      base = merging.merge(value, into: stored)
    } else {
      base = value
    }
    if !stamp.isNaN { baseStamp = stamp }
    baseExists = true
  }
}
