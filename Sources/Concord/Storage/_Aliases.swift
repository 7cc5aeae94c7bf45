extension _MapCore {
  /// The slot of the alias `id`, holding a `Wrapped?`, created empty if there is none.
  ///
  /// The caller must hold the slot (with a handle) or write to it in a write: an empty slot
  /// nobody holds is purged when the write ends.
  func aliasNode<Wrapped: Sendable>(
    _ id: _AliasID, schema: @autoclosure () -> _Schema<Wrapped?>
  ) -> _AliasNode<Wrapped> {
    if let existing = aliases[id] {
      // NB: the id includes the value type, so the slot has this type.
      return unsafeDowncast(existing, to: _AliasNode<Wrapped>.self)
    }
    let node = _AliasNode<Wrapped>(id: id, schema: schema())
    node.epoch = epochCounter
    aliases[id] = node
    return node
  }

  /// Writes `value` into the alias `id`.
  func setAlias<Wrapped: Sendable>(
    _ id: _AliasID, to value: Wrapped, schema: _Schema<Wrapped?>, stamp: Stamp?
  ) -> _AliasNode<Wrapped> {
    let node = aliasNode(id, schema: schema)
    noteHoldDropped(node)
    if writeTree(into: node, payload: value, schema: schema, stamp: stamp) {
      log { .aliasSet(id.name) }
    }
    return node
  }

  /// Read-modify-write of the value of the alias `id`. Returns `false` if it is not set.
  func updateAlias<Wrapped: Sendable>(
    _ id: _AliasID, stamp: Stamp?, _ body: (inout Wrapped) -> Void
  ) -> Bool {
    guard let existing = aliases[id] else { return false }
    let node = unsafeDowncast(existing, to: _AliasNode<Wrapped>.self)
    guard var value = node.value else { return false }
    guard node.stamp._admits(stamp) else {
      logStale(node, incoming: stamp)
      return true
    }
    body(&value)
    // NB: the body may have removed the alias through a nested write.
    guard aliases[id] === node, node.value != nil else { return false }
    writeTree(into: node, payload: value, schema: node.schema, stamp: stamp)
    return true
  }

  /// Empties the alias `id`, releasing what it held.
  func removeAlias(_ id: _AliasID) {
    guard let node = aliases[id], node.holdsAliasValue else { return }
    node.resetAlias(in: self)
    log { .aliasRemoved(id.name) }
  }
}
