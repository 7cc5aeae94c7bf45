// Aliases: named slots holding an entity, an aggregate or an array of them (see
// `_AliasNode`), written by one pass each and anchored while set.

extension _MapCore {
  /// Writes `value` into the alias `id`.
  @usableFromInline
  func setAlias<Wrapped: Sendable>(
    _ id: _AliasID, to value: Wrapped, witness: @autoclosure () -> _Witness, stamp: Stamp?
  ) -> _AliasNode<Wrapped> {
    // NB: the witness first: it reads the registry, which `aliasNode` changes.
    let witness = witness()
    let node: _AliasNode<Wrapped> = registry.aliasNode(id, witness: witness)
    lifetime.noteHoldDropped(node)
    let schema = node.schema.takeUnretainedValue()
    var refusal: _Verdict?
    if audience.persistedTypes > 0 {
      loadMissing(in: Optional(value), schema: schema)
      // NB: an alias whose record the store could not read keeps its slot as it is.
      if persistence?.unreadableAliases.contains(id.name) == true { refusal = .unreadable }
    }
    pass.run(
      into: node, payload: value, stamp: schema.stamp(of: value, call: stamp), call: stamp,
      verdict: refusal)
    return node
  }

  /// Read-modify-write of the value of the alias `id`. Returns `false` if it is not set.
  @usableFromInline
  func updateAlias<Wrapped: Sendable>(
    _ id: _AliasID, stamp: Stamp?, _ body: (inout Wrapped) -> Void
  ) -> Bool {
    guard let existing = registry.aliases[id] else { return false }
    let node = unsafeDowncast(existing, to: _AliasNode<Wrapped>.self)
    guard let old = node.value else { return false }
    let schema = node.schema.takeUnretainedValue()
    // NB: as in `update(_:id:stamp:_:)`, a stamped value's stamp is known from the result.
    guard schema.stamp != nil || node.admits(stamp) || stamp == node.s.stamp else {
      outbox.logStale(node, incoming: stamp)
      return true
    }
    var value = old
    runUserCode { body(&value) }
    // NB: the body may have removed the alias through a nested write.
    guard registry.aliases[id] === node, node.value != nil else { return false }
    let effective = schema.stamp(of: Optional(value), replacing: old, call: stamp)
    if audience.persistedTypes > 0 { loadMissing(in: Optional(value), schema: schema) }
    // NB: the entities the body returned are the update's own: they do not merge.
    pass.run(into: node, payload: value, stamp: effective, call: stamp, mergeFromDepth: 2)
    return true
  }

  /// Empties the alias `id`, releasing what it held, and forgets its stamp.
  @usableFromInline
  func removeAlias(_ id: _AliasID) {
    guard let node = registry.aliases[id], node.witness.holdsAliasValue(node) else { return }
    emptyAlias(node)
  }

  /// Empties an alias node: value `nil`, no links, no stamp.
  func emptyAlias(_ node: _AnyNode) {
    journal.touch(node, audience)
    node.witness.clearAliasValue(node)
    lifetime.relink(node, to: [])
    lifetime.settleAnchor(of: node)
  }
}
