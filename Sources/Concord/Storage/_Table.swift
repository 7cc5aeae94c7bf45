/// The nodes of one entity type, keyed by id.
@usableFromInline
class _AnyTable {
  @usableFromInline init() {}

  /// Calls `body` with every node of the table.
  func forEachNode(_: (_AnyNode) -> Void) { fatalError("abstract") }
}

/// The nodes of entity type `T`.
///
/// NB: typed, so that the hot path hashes `T.ID` itself, never an `AnyHashable` or a string.
@usableFromInline
final class _Table<T: Identifiable & Sendable>: _AnyTable {
  /// The table holds each node with a manual retain. NB: unmanaged, so that the hot path
  /// borrows a node (`withNode`) without a retain and a release.
  #if DEBUG
    @usableFromInline var slots: [T.ID: Unmanaged<_EntityNode<T>>] = [:]
  #else
    @exclusivity(unchecked) @usableFromInline var slots: [T.ID: Unmanaged<_EntityNode<T>>] = [:]
  #endif
  @usableFromInline let schema = _Schema<T>.entity

  @usableFromInline override init() {}

  deinit {
    for slot in slots.values { slot.release() }
  }

  /// Whether the table holds no node.
  var isEmpty: Bool { slots.isEmpty }

  /// Calls `body` with the node of `id`, borrowed; `nil` if there is none.
  @inlinable
  func withNode<R>(_ id: T.ID, _ body: (_EntityNode<T>) -> R) -> R? {
    guard let slot = slots[id] else { return nil }
    return slot._withUnsafeGuaranteedRef(body)
  }

  /// The node of `id`, retained, for paths where a borrow is awkward.
  @inlinable
  func node(_ id: T.ID) -> _EntityNode<T>? {
    slots[id]?.takeUnretainedValue()
  }

  /// Calls `body` with the node of `value`'s id, borrowed, and whether it was just created:
  /// if there is none, registers a new one with `value` and `flags`, with a single hash lookup.
  @inlinable
  func withNode<R>(
    for value: T, creating flags: _NodeFlags, _ body: (_EntityNode<T>, _ created: Bool) -> R
  ) -> R {
    var created = false
    let slot = slots._getOrInsert(value.id) {
      created = true
      return .passRetained(_EntityNode(value: value, flags: flags))
    }
    return slot._withUnsafeGuaranteedRef { body($0, created) }
  }

  /// Takes `node` out if it is its id's entry; the table's retain moves to `graveyard`, so that
  /// the node is released after the lock. Returns whether it was there.
  func remove(_ node: _EntityNode<T>, into graveyard: inout [AnyObject]) -> Bool {
    guard let index = slots.index(forKey: node.value.id),
      slots.values[index].takeUnretainedValue() === node
    else { return false }
    graveyard.append(node)
    slots.remove(at: index).value.release()
    return true
  }

  /// Makes `node` its id's entry again, and returns the node it replaced, if any.
  func insert(_ node: _EntityNode<T>) -> _EntityNode<T>? {
    slots.updateValue(.passRetained(node), forKey: node.value.id).map { $0.takeRetainedValue() }
  }

  override func forEachNode(_ body: (_AnyNode) -> Void) {
    for slot in slots.values { body(slot.takeUnretainedValue()) }
  }
}

/// The node of one entity.
@usableFromInline
final class _EntityNode<T: Identifiable & Sendable>: _Node<T> {
  @usableFromInline
  override init(value: T, flags: _NodeFlags = []) {
    super.init(value: value, flags: flags)
  }

  override func unregister(from core: _MapCore) {
    guard core.table(for: T.self).remove(self, into: &core.batch.graveyard) else { return }
    flags.remove(.registered)
    core.liveCount -= 1
  }

  override func reregister(in core: _MapCore) {
    if let previous = core.table(for: T.self).insert(self) {
      // NB: rollback reverts in reverse order, so the slot should be empty; if a node is there
      // anyway, it is the newer one and it leaves.
      previous.flags.remove(.registered)
      previous.flags.insert(.removed)
      if previous.externalHolds > 0 { core.adopt(previous) }
      core.batch.graveyard.append(previous)
    } else {
      core.liveCount += 1
    }
    flags.insert(.registered)
    flags.remove(.removed)
  }

  override func makeReference() -> (() -> EntityReference)? {
    let id = value.id
    return { EntityReference(T.self, id: id) }
  }
}

/// The slot of an alias: `Wrapped` is the entity type, or an array of it.
final class _AliasNode<Wrapped: Sendable>: _Node<Wrapped?> {
  let id: _AliasID
  let schema: _Schema<Wrapped?>

  init(id: _AliasID, schema: _Schema<Wrapped?>) {
    self.id = id
    self.schema = schema
    super.init(value: nil, flags: [.registered, .alias])
    ensuredExtras.alias = id
  }

  override func resetAlias(in core: _MapCore) {
    if core.batch.recordsUndo { core.batch.undo.append(.value(makeRestorer())) }
    value = nil
    stamp = .nan
    core.relink(self, to: [])
    insert(.settled, at: core.nextEpoch())
    core.noteChanged(self)
  }

  override func unregister(from core: _MapCore) {
    if core.aliases[id] === self {
      core.aliases[id] = nil
    }
    flags.remove(.registered)
  }

  override func reregister(in core: _MapCore) {
    core.aliases[id] = self
    flags.insert(.registered)
    flags.remove(.removed)
  }

  override var holdsAliasValue: Bool { value != nil }
}
