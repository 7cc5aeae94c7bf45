/// The slot of an alias: `Wrapped` is the entity type, or an array of it. `nil` while unset.
@usableFromInline
final class _AliasNode<Wrapped: Sendable>: _Node<Wrapped?> {
  @usableFromInline let id: _AliasID
  let aliasSchema: _Schema<Wrapped?>
  let stashed = _Stash<Wrapped?>()
  /// The op that persists the slot's value, when its entity type is persisted; see
  /// `_MapCore.prepareAlias(_:_:list:)`.
  var persist: ((_AliasNode<Wrapped>) -> _PersistOp)?

  @usableFromInline
  init(id: _AliasID, schema: _Schema<Wrapped?>) {
    self.id = id
    self.aliasSchema = schema
    super.init(value: nil, flags: [.registered, .alias])
  }

  @usableFromInline
  override func schema(_: _MapCore) -> _Schema<Wrapped?> { aliasSchema }

  @usableFromInline
  override func stash(_: _MapCore) -> _Stash<Wrapped?> { stashed }

  @usableFromInline
  override var holdsAliasValue: Bool { value != nil }

  @usableFromInline
  override var releasesWithoutLock: Bool { false }

  override var aliasName: String? { id.name }

  override func clearAliasValue() { value = nil }

  override var hasConsumers: Bool { persist != nil }

  override func feedConsumers(
    _ kind: _ChangeKind, saved _: Int32, stampBefore: Stamp, _ core: _MapCore
  ) {
    guard let persist, let persistence = core.persistence else { return }
    if kind != .unchanged || !s.stamp._isSame(as: stampBefore) {
      persistence.current.append(persist(self))
    }
  }

  override func unregister(from core: _MapCore) {
    if core.registry.aliases[id] === self {
      // NB: released after the lock, with the outbox, like every node a write drops.
      core.outbox.graveyard.append(self)
      core.registry.aliases[id] = nil
    }
    s.flags.remove(.registered)
  }

  override func reregister(in core: _MapCore) {
    core.registry.aliases[id] = self
    s.flags.insert(.registered)
    s.flags.remove(.removed)
  }
}

extension _MapCore {
  /// The slot of the alias `id`, holding a `Wrapped?`, created empty if there is none.
  ///
  /// The caller must hold the slot (with a handle) or write to it: an empty slot nobody holds
  /// is purged when the write ends.
  @usableFromInline
  func aliasNode<Wrapped: Sendable>(
    _ id: _AliasID, schema: @autoclosure () -> _Schema<Wrapped?>
  ) -> _AliasNode<Wrapped> {
    if let existing = registry.aliases[id] {
      // NB: the id includes the value type, so the slot has this type.
      return unsafeDowncast(existing, to: _AliasNode<Wrapped>.self)
    }
    let node = _AliasNode<Wrapped>(id: id, schema: schema())
    registry.aliases[id] = node
    return node
  }

  /// Writes `value` into the alias `id`.
  @usableFromInline
  func setAlias<Wrapped: Sendable>(
    _ id: _AliasID, to value: Wrapped, schema: _Schema<Wrapped?>, stamp: Stamp?
  ) -> _AliasNode<Wrapped> {
    let node = aliasNode(id, schema: schema)
    noteHoldDropped(node)
    writeTree(into: node, payload: value, stamp: schema.stamp(of: value, call: stamp), call: stamp)
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
    let schema = node.aliasSchema
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
    // NB: the entities the body returned are the update's own: they do not merge.
    writeTree(into: node, payload: value, stamp: effective, call: stamp, mergeFromDepth: 2)
    return true
  }

  /// Empties the alias `id`, releasing what it held, and forgets its stamp.
  @usableFromInline
  func removeAlias(_ id: _AliasID) {
    guard let node = registry.aliases[id], node.holdsAliasValue else { return }
    emptyAlias(node)
  }

  /// Empties an alias node: value `nil`, no links, no stamp.
  func emptyAlias(_ node: _AnyNode) {
    touch(node)
    node.clearAliasValue()
    relink(node, to: [])
    settleAlias(node)
  }

  /// Brings an alias node's anchor and stamp in line with its value after a write: a set alias
  /// holds itself, and an empty one has no stamp (whether or not anything observes it).
  func settleAlias(_ node: _AnyNode) {
    if !node.holdsAliasValue { node.s.stamp = .nan }
    let anchored = node.s.flags.contains(.anchored)
    guard node.holdsAliasValue != anchored else { return }
    setAnchor(node, !anchored)
  }

  /// Anchors or unanchors an alias node.
  ///
  /// NB: the flag and the hold change together, so that the node stays pinned or unpinned
  /// (see `_MapCore.pin()`): an anchor does not keep the map alive.
  func setAnchor(_ node: _AnyNode, _ anchored: Bool) {
    if anchored {
      node.s.flags.insert(.anchored)
      node.addExternalHold()
    } else {
      node.s.flags.remove(.anchored)
      node.removeExternalHold()
      noteHoldDropped(node)
    }
  }
}
