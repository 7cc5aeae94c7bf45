/// The nodes of one entity type, keyed by id.
class _AnyTable {
  /// Calls `body` with every node of the table.
  func forEachNode(_: (_AnyNode) -> Void) { fatalError("abstract") }
}

/// The nodes of entity type `T`.
///
/// NB: typed, so that the hot path hashes `T.ID` itself, never an `AnyHashable` or a string.
final class _Table<T: Identifiable & Sendable>: _AnyTable {
  var nodes: [T.ID: _EntityNode<T>] = [:]
  let schema = _Schema<T>.entity

  override func forEachNode(_ body: (_AnyNode) -> Void) {
    for node in nodes.values { body(node) }
  }
}

/// The node of one entity.
final class _EntityNode<T: Identifiable & Sendable>: _Node<T> {
  override func unregister(from core: _MapCore) {
    let table = core.table(for: T.self)
    guard let index = table.nodes.index(forKey: value.id), table.nodes.values[index] === self else {
      return
    }
    table.nodes.remove(at: index)
    flags.remove(.registered)
    core.liveCount -= 1
  }

  override func reregister(in core: _MapCore) {
    let table = core.table(for: T.self)
    let previous = table.nodes.updateValue(self, forKey: value.id)
    if previous == nil {
      core.liveCount += 1
    } else if let previous, previous !== self {
      // NB: rollback reverts in reverse order, so the slot should be empty; if a node is there
      // anyway, it is the newer one and it leaves.
      previous.flags.remove(.registered)
      previous.flags.insert(.removed)
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
