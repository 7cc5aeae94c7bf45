/// The slot of an alias: `Wrapped` is the entity type, or an array of it. `nil` while unset.
@usableFromInline
final class _AliasNode<Wrapped: Sendable>: _Node<Wrapped?> {
  @usableFromInline let id: _AliasID
  /// Whether the slot's changes reach the store: its entity type is persisted, and the slot was
  /// readied for it; see `_MapCore.prepareAlias(_:_:list:)`.
  @usableFromInline var persists = false

  @usableFromInline
  init(id: _AliasID, witness: _Witness) {
    self.id = id
    super.init(value: nil, witness: witness, flags: witness.flags)
  }
}

extension _MapCore {
  /// The slot of the alias `id`, holding a `Wrapped?`, created empty if there is none.
  ///
  /// The caller must hold the slot (with a handle) or write to it: an empty slot nobody holds
  /// is purged when the write ends.
  @usableFromInline
  func aliasNode<Wrapped: Sendable>(
    _ id: _AliasID, witness: @autoclosure () -> _Witness
  ) -> _AliasNode<Wrapped> {
    if let existing = registry.aliases[id] {
      // NB: the id includes the value type, so the slot has this type.
      return unsafeDowncast(existing, to: _AliasNode<Wrapped>.self)
    }
    let node = _AliasNode<Wrapped>(id: id, witness: witness())
    registry.aliases[id] = node
    return node
  }

  /// The slot of the single alias `id` of `T`, created empty if there is none; see
  /// `aliasNode(_:witness:)`.
  @inlinable
  func aliasSlot<T: Identifiable & Sendable>(_ id: _AliasID, of _: T.Type) -> _AliasNode<T> {
    aliasNode(id, witness: witnesses(of: T.self).aliasWitness)
  }

  /// The slot of the collection alias `id` of `T`, created empty if there is none.
  @inlinable
  func collectionAliasSlot<T: Identifiable & Sendable>(_ id: _AliasID, of _: T.Type)
    -> _AliasNode<[T]>
  {
    aliasNode(id, witness: witnesses(of: T.self).collectionAliasWitness)
  }

  /// The table of `T`, whose witnesses a caller wants.
  @inlinable
  func witnesses<T: Identifiable & Sendable>(of _: T.Type) -> _Table<T> {
    registry.table(for: T.self)
  }

  /// Writes `value` into the alias `id`.
  @usableFromInline
  func setAlias<Wrapped: Sendable>(
    _ id: _AliasID, to value: Wrapped, witness: @autoclosure () -> _Witness, stamp: Stamp?
  ) -> _AliasNode<Wrapped> {
    let node: _AliasNode<Wrapped> = aliasNode(id, witness: witness())
    lifetime.noteHoldDropped(node)
    let schema = node.schema.takeUnretainedValue()
    if audience.persistedTypes > 0 { loadMissing(in: Optional(value), schema: schema) }
    pass.run(into: node, payload: value, stamp: schema.stamp(of: value, call: stamp), call: stamp)
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
    let effective = updateStamp(of: Optional(value), from: old, schema: schema, call: stamp)
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
    settleAlias(node)
  }

  /// Brings an alias node's anchor and stamp in line with its value after a write: a set alias
  /// holds itself, and an empty one has no stamp (whether or not anything observes it).
  func settleAlias(_ node: _AnyNode) {
    if !node.witness.holdsAliasValue(node) { node.s.stamp = .nan }
    let anchored = node.s.flags.contains(.anchored)
    guard node.witness.holdsAliasValue(node) != anchored else { return }
    setAnchor(node, !anchored)
  }

  /// Anchors or unanchors an alias node.
  ///
  /// NB: the flag and the hold change together, so that the node stays pinned or unpinned
  /// (see `_Lifetime.pin(_:)`): an anchor does not keep the map alive.
  func setAnchor(_ node: _AnyNode, _ anchored: Bool) {
    if anchored {
      node.s.flags.insert(.anchored)
      node.addExternalHold()
    } else {
      node.s.flags.remove(.anchored)
      node.removeExternalHold()
      lifetime.noteHoldDropped(node)
    }
  }
}
