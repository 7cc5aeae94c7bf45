/// The nodes of one entity type, keyed by id.
@usableFromInline
class _AnyTable {
  @usableFromInline init() {}

  /// Calls `body` with every node of the table.
  func forEachNode(_: (_AnyNode) -> Void) { fatalError("abstract") }

  /// How many nodes the table holds.
  var count: Int { fatalError("abstract") }

  /// How many live queries and collectors of the table's type there are.
  var consumerCount: Int { 0 }

  /// The nodes of the table's live queries; for `_checkInvariants`.
  var queryNodes: [_AnyNode] { [] }

  /// What is wrong with the table's indexes, if anything; for `_checkInvariants`.
  var indexProblem: String? { nil }

  /// Whether the table's type is persisted; for `_checkInvariants`.
  var isPersisted: Bool { false }

  /// The entity type's name, for `IdentityMap.statistics`.
  var typeName: String { fatalError("abstract") }

  /// How many live queries of the table's type there are.
  var queryCount: Int { 0 }

  /// How many live collectors of the table's type there are.
  var collectorCount: Int { 0 }
}

/// The nodes of entity type `T`.
///
/// NB: typed, so that the hot path hashes `T.ID` itself, never an `AnyHashable` or a string.
@usableFromInline
final class _Table<T: Identifiable & Sendable>: _AnyTable {
  /// The table holds each node with a manual retain (rule 2 of `_Lifetime.swift`). NB:
  /// unmanaged, so that the hot path borrows a node (`withNode`) without a retain and a release; and an index of our own, not a
  /// dictionary, so that a lookup reads the id and the node's reference from one bucket.
  #if DEBUG
    @usableFromInline var slots = _NodeIndex<T.ID, _EntityNode<T>>()
  #else
    @exclusivity(unchecked) @usableFromInline var slots = _NodeIndex<T.ID, _EntityNode<T>>()
  #endif
  @usableFromInline let schema: _Schema<T>
  /// Values of type `T` the current write needs: claims' payloads and the journal's saved values.
  @usableFromInline let stash = _Stash<T>()
  /// The node operations that depend on `T`; see `_EntityOps`.
  @usableFromInline let ops: _EntityOps<T>
  // NB: see `_AnyNode.s` on exclusivity checks: a write reads `persisted` and `consumers`, and
  // each dynamic check cost as much as a pthread lock.
  #if DEBUG
    /// The live queries, indexes and collectors of `T`; `nil` while there are none.
    @usableFromInline var consumers: _Consumers<T>?
    /// How `T` is persisted; `nil` unless ``IdentityMap/persist(_:)`` named it.
    @usableFromInline var persisted: _Persisted<T>?
    /// The sequence number of the last node created: see `_EntityNode.sequence`.
    @usableFromInline var lastSequence: UInt64 = 0
    /// Whether a value of `T` was found nesting an entity that nests entities, so that a store
    /// of `T` goes straight to the claims pass; see `_ShallowWrite.swift`.
    @usableFromInline var nestsAggregates = false
  #else
    /// The live queries, indexes and collectors of `T`; `nil` while there are none.
    @exclusivity(unchecked) @usableFromInline var consumers: _Consumers<T>?
    /// How `T` is persisted; `nil` unless ``IdentityMap/persist(_:)`` named it.
    @exclusivity(unchecked) @usableFromInline var persisted: _Persisted<T>?
    /// The sequence number of the last node created: see `_EntityNode.sequence`.
    @exclusivity(unchecked) @usableFromInline var lastSequence: UInt64 = 0
    /// Whether a value of `T` was found nesting an entity that nests entities, so that a store
    /// of `T` goes straight to the claims pass; see `_ShallowWrite.swift`.
    @exclusivity(unchecked) @usableFromInline var nestsAggregates = false
  #endif

  @inlinable
  override init() {
    schema = _Schema<T>.entity
    ops = _EntityOps()
  }

  deinit {
    slots.forEachNode { $0.release() }
    slots.dispose()
  }

  /// Whether the table holds no node.
  var isEmpty: Bool { slots.count == 0 }

  override var count: Int { slots.count }

  /// Calls `body` with the node of `id`, borrowed; `nil` if there is none.
  @inlinable
  func withNode<R>(_ id: T.ID, _ body: (_EntityNode<T>) -> R) -> R? {
    guard let slot = slots[id] else { return nil }
    return slot._withUnsafeGuaranteedRef(body)
  }

  /// The node of `id`, for paths where a borrow is awkward.
  @inlinable
  func node(_ id: T.ID) -> _EntityNode<T>? {
    slots[id]?.takeUnretainedValue()
  }

  /// Calls `body` with the node of `value`'s id, borrowed, and whether it was just created:
  /// if there is none, registers a new one holding `value`, with a single hash lookup.
  @inlinable
  func withNode<R>(for value: T, _ body: (_EntityNode<T>, _ created: Bool) -> R) -> R {
    var created = false
    let slot = slots.getOrInsert(value.id) {
      created = true
      return .passRetained(_EntityNode(value: value, table: self))
    }
    return slot._withUnsafeGuaranteedRef { body($0, created) }
  }

  /// Takes `node` out if it is its id's entry; the table's retain moves to `graveyard`, so that
  /// the node is released after the lock. Returns whether it was there.
  ///
  /// NB: `@inlinable`, and called through `_EntityOps.remove`: unspecialized, every release
  /// looked up the metadata of the index's type.
  @inlinable
  func remove(_ node: _EntityNode<T>, into graveyard: inout [AnyObject]) -> Bool {
    // NB: the caller holds `node`; the table's own retain goes once the graveyard has one
    // (rules 2 and 3 of `_Lifetime.swift`).
    let slot = Unmanaged.passUnretained(node)
    guard slots.remove(node.value.id, ifNodeIs: slot) else { return false }
    graveyard.append(node)
    slot.release()
    return true
  }

  /// Makes `node` its id's entry again, and returns the node it replaced, if any.
  func insert(_ node: _EntityNode<T>) -> _EntityNode<T>? {
    slots.updateValue(.passRetained(node), forKey: node.value.id).map { $0.takeRetainedValue() }
  }

  override func forEachNode(_ body: (_AnyNode) -> Void) {
    slots.forEachNode { body($0.takeUnretainedValue()) }
  }

  override var consumerCount: Int { (consumers?.count ?? 0) + (persisted == nil ? 0 : 1) }

  override var queryNodes: [_AnyNode] { consumers?.queryNodes ?? [] }

  override var indexProblem: String? {
    slots.problem { $0.takeUnretainedValue().value.id } ?? consumers?.problem
  }

  override var isPersisted: Bool { persisted != nil }

  override var typeName: String { String(describing: T.self) }

  override var queryCount: Int { consumers?.queryNodes.count ?? 0 }

  override var collectorCount: Int { consumers?.sinks.count ?? 0 }
}

/// The operations on an entity node that depend on its type, as closures.
///
/// NB: the engine reaches nodes through `_AnyNode`, and a generic class's methods run
/// unspecialized, looking up generic metadata as they go. These closures are made by an
/// `@inlinable` initializer, called where the table is created, in code specialized for `T`
/// (the caller's module), so each operation runs specialized; `_EntityNode`'s overrides only
/// forward to them.
@usableFromInline
struct _EntityOps<T: Identifiable & Sendable> {
  @usableFromInline let patch: (_EntityNode<T>, Int, _MapCore) -> Void
  @usableFromInline let materialize: (_EntityNode<T>, _MapCore) -> Void
  @usableFromInline let expand: (_EntityNode<T>, Int, _MapCore) -> Void
  @usableFromInline let apply: (_EntityNode<T>, Int, _MapCore) -> Void
  @usableFromInline let isIdentical: (_EntityNode<T>, Int, _MapCore) -> Bool
  @usableFromInline let saveValue: (_EntityNode<T>, _MapCore) -> Int32
  @usableFromInline let differs: (_EntityNode<T>, Int32, _MapCore) -> Bool
  @usableFromInline let makeDelivery: (_EntityNode<T>, UInt64) -> _Delivery?
  @usableFromInline let remove: (_EntityNode<T>, _MapCore) -> Bool
  @usableFromInline let lowerShadow: (_Shadow<T>, _MapCore) -> Void
  @usableFromInline let raiseShadow: (_Shadow<T>, _MapCore) -> Void
  @usableFromInline let keepShadowBase: (_Shadow<T>) -> Void
  @usableFromInline let persist: (_EntityNode<T>, _ChangeKind, Stamp) -> Void

  @inlinable
  init() {
    // NB: these two borrow the schema (see `unretainedSchema(_:)`): a fan-out patches, and a
    // page of aggregates rebuilds, node after node.
    patch = { node, slot, core in
      node.withSchema(core) { node._patch(slot: slot, schema: $0) }
    }
    materialize = { node, core in
      guard node.cycle == 0 else { return node._materialize(core) }
      node.withSchema(core) { node._rebuildFromChildren(schema: $0) }
    }
    expand = { node, index, core in node._expand(claim: index, core) }
    apply = { node, index, core in node._apply(claim: index, core) }
    isIdentical = { node, index, core in node._isIdentical(toClaim: index, core) }
    saveValue = { node, core in node._saveValue(core) }
    differs = { node, index, core in node._differs(fromSaved: index, core) }
    makeDelivery = { node, version in node._makeDelivery(version: version) }
    remove = { node, core in node.table.remove(node, into: &core.outbox.graveyard) }
    lowerShadow = { shadow, core in shadow._lower(core) }
    raiseShadow = { shadow, core in shadow._raise(core) }
    keepShadowBase = { shadow in shadow._keepAsBase() }
    persist = { node, kind, stampBefore in
      if let persisted = node.table.persisted {
        persisted.ops.record(persisted, node, kind, stampBefore)
      }
    }
  }
}

/// The node of one entity.
@usableFromInline
final class _EntityNode<T: Identifiable & Sendable>: _Node<T> {
  /// The table of the node's type, in the node's map.
  /// NB: unowned(unsafe), by rule 1 of `_Lifetime.swift`: a map's tables live as long as the
  /// map, and the map outlives every node its graph can reach. Typed, so that the engine's type-erased code reaches the type's
  /// schema and stash without looking up generic metadata.
  @usableFromInline unowned(unsafe) let table: _Table<T>
  /// The node's rank in its table's creation order: live queries without a comparator, and
  /// ties, list their members in this order, the order they were first stored.
  @usableFromInline let sequence: UInt64

  /// NB: the value is consumed, moved into the node; the table is borrowed (`__shared`, which
  /// unlike `borrowing` lets the unowned reference be stored), sparing a retain and a release
  /// per node created.
  @usableFromInline
  init(value: consuming T, table: __shared _Table<T>) {
    self.table = table
    table.lastSequence &+= 1
    sequence = table.lastSequence
    var flags = _NodeFlags.registered
    if table.schema.merge != nil { flags.insert(.mergeable) }
    // NB: the erased accessors: this runs unspecialized, where `isLeaf` would look up the
    // metadata of an array of accessors of `T` on every node created.
    if table.schema.erasedAccessors.isEmpty { flags.insert(.leaf) }
    super.init(value: value, flags: flags)
  }

  @usableFromInline
  override func schema(_: _MapCore) -> _Schema<T> { table.schema }

  // NB: the table and what it owns, unretained by rule 1 of `_Lifetime.swift`.
  @inlinable
  override func unretainedSchema(_: _MapCore) -> Unmanaged<_Schema<T>> {
    Unmanaged.passUnretained(table)._withUnsafeGuaranteedRef { .passUnretained($0.schema) }
  }

  @usableFromInline
  override func stash(_: _MapCore) -> _Stash<T> { table.stash }

  @inlinable
  override func unretainedStash(_: _MapCore) -> Unmanaged<_Stash<T>> {
    Unmanaged.passUnretained(table)._withUnsafeGuaranteedRef { .passUnretained($0.stash) }
  }

  // The hot typed operations, specialized through the table's closures.

  @usableFromInline
  override func patch(slot: Int, _ core: _MapCore) { table.ops.patch(self, slot, core) }

  @usableFromInline
  override func materialize(_ core: _MapCore) { table.ops.materialize(self, core) }

  @usableFromInline
  override func expand(claim index: Int, _ core: _MapCore) { table.ops.expand(self, index, core) }

  @usableFromInline
  override func apply(claim index: Int, _ core: _MapCore) { table.ops.apply(self, index, core) }

  @usableFromInline
  override func isIdentical(toClaim index: Int, _ core: _MapCore) -> Bool {
    table.ops.isIdentical(self, index, core)
  }

  @usableFromInline
  override func saveValue(_ core: _MapCore) -> Int32 { table.ops.saveValue(self, core) }

  @usableFromInline
  override func differs(fromSaved index: Int32, _ core: _MapCore) -> Bool {
    table.ops.differs(self, index, core)
  }

  @usableFromInline
  override func makeDelivery(version: UInt64) -> _Delivery? {
    table.ops.makeDelivery(self, version)
  }

  override func unregister(from core: _MapCore) {
    guard table.ops.remove(self, core) else { return }
    s.flags.remove(.registered)
    core.registry.liveCount -= 1
    // NB: a removal reaches the indexes with the change log; a release never does.
    if s.flags.contains(.purged) { table.consumers?.forget(self) }
  }

  override var hasConsumers: Bool { table.consumers != nil || table.persisted != nil }

  override var readsOldValues: Bool { table.consumers != nil }

  override func persist(_ kind: _ChangeKind, stampBefore: Stamp) {
    table.ops.persist(self, kind, stampBefore)
  }

  override func persistRemoval(_ core: _MapCore) {
    guard let persisted = table.persisted else { return }
    core.persistence?.current.append(_RowRemoval(persisted, id: value.id))
  }

  override func logChange(_ kind: _ChangeKind, saved: Int32, _ core: _MapCore) {
    let reference = EntityReference(T.self, id: value.id)
    let before: T? = kind == .inserted || saved < 0 ? nil : table.stash.values[Int(saved)]
    let after: T? = kind == .removed ? nil : value
    core.outbox.log { .changed(reference, before: before, after: after) }
  }

  override func makeShadow(saved: Int32, stamp: Stamp) -> _AnyShadow? {
    let base: T? =
      switch saved {
      case _JournalEntry.created: nil
      case _JournalEntry.notSaved: value
      default: table.stash.values[Int(saved)]
      }
    return _Shadow(node: self, base: base, baseStamp: stamp)
  }

  override func feedConsumers(
    _ kind: _ChangeKind, saved: Int32, stampBefore: Stamp, _ core: _MapCore
  ) {
    persist(kind, stampBefore: stampBefore)
    guard let consumers = table.consumers else { return }
    consumers.feed(
      self, kind, old: saved >= 0 ? table.stash.values[Int(saved)] : nil, core)
  }

  override func reregister(in core: _MapCore) {
    let previous = table.insert(self)
    // NB: rollback restores in reverse order, so the slot is empty by then: whatever took it
    // after this node left was created later, and was taken out first.
    precondition(previous == nil, "Concord: rollback found the slot of \(T.self) \(value.id) taken")
    core.registry.liveCount += 1
    s.flags.insert(.registered)
    s.flags.remove(.removed)
  }

  override func makeReference() -> EntityReference? {
    EntityReference(T.self, id: value.id)
  }
}

/// The list behind a batch handle: the entities of one `store([T])`, in order.
@usableFromInline
final class _ListNode<T: Identifiable & Sendable>: _Node<[T]> {
  @usableFromInline let stashed = _Stash<[T]>()
  /// NB: fetched once, by the `@inlinable` caller, so that the schema (and its accessor's
  /// closures) is made where `T` is known, and never looked up again per call.
  @usableFromInline let listSchema: _Schema<[T]>
  /// `_rebuildFromChildren(schema:)`, made by the `@inlinable` initializer, so that rebuilding
  /// the list runs specialized for `T`: unspecialized, it retained each entity's accessor.
  @usableFromInline let rebuild: (_ListNode<T>) -> Void

  @inlinable
  init(value: [T], schema: _Schema<[T]>) {
    listSchema = schema
    rebuild = { list in
      // NB: a list links each of its elements, in order. Only a rollback that gives a list
      // back the entities it was stored with (`_MapCore.restoreCreated`) leaves it with
      // another number of elements than links: the value is then made from the links.
      guard list.value.count == list.children.count else {
        list.value = list.children.map { _Node<T>._value(of: $0.child) }
        return
      }
      list._rebuildFromChildren(schema: list.listSchema)
    }
    super.init(value: value, flags: .list)
  }

  @usableFromInline
  override func materialize(_ core: _MapCore) {
    // NB: a list is on no cycle: nothing links to it.
    if cycle == 0 { rebuild(self) } else { _materialize(core) }
  }

  @usableFromInline
  override func schema(_: _MapCore) -> _Schema<[T]> { listSchema }

  @usableFromInline
  override func stash(_: _MapCore) -> _Stash<[T]> { stashed }
}

/// A stash, whatever the type of its values.
@usableFromInline
class _AnyStash {
  @usableFromInline init() {}

  /// Forgets every value, keeping the buffer for the next write.
  func clear() { fatalError("abstract") }
}

/// Values of one type that the current write keeps aside: the payloads of its claims, and the
/// values its journal saved. Emptied when the outermost write ends.
@usableFromInline
final class _Stash<Value>: _AnyStash {
  // NB: see `_AnyNode.s` on exclusivity checks.
  #if DEBUG
    @usableFromInline var values: [Value] = []
  #else
    @exclusivity(unchecked) @usableFromInline var values: [Value] = []
  #endif

  /// Empties `values`, keeping the buffer. NB: made where the stash is created, in code
  /// specialized for `Value`; `clear()` is called from type-erased code, where the array's
  /// methods would otherwise run unspecialized and look up metadata on every call.
  @usableFromInline let removeValues: (_Stash<Value>) -> Void

  @inlinable override init() {
    removeValues = { $0.values.removeAll(keepingCapacity: true) }
    super.init()
  }

  /// Keeps `value` and returns its index. The first value of a write enlists the stash, so
  /// that the write empties it when it ends.
  @inlinable
  func append(_ value: Value, _ core: _MapCore) -> Int32 {
    if values.isEmpty { core.journal.stashes.append(.passUnretained(self)) }
    values.append(value)
    return Int32(values.count - 1)
  }

  override func clear() { removeValues(self) }
}
