extension _MapCore {
  /// Removes the entity `id` of `T`, if it is stored; see ``IdentityMap/remove(_:id:)``.
  @inlinable
  func remove<T: Identifiable & Sendable>(_: T.Type, id: T.ID) {
    withTable(T.self) { table in
      if table.persisted != nil && table.node(id) == nil { load(id, into: table) }
      // NB: borrowed: the table holds the node until the removal takes it out, and the
      // graveyard until the write ends.
      let (bucket, found) = table.slots.find(id, hash: table.slots.hash(id))
      guard found else { return }
      table.slots.node(at: bucket)._withUnsafeGuaranteedRef { node in
        if removesDirectly(node, table) {
          removeDirectly(node, table, at: bucket)
        } else {
          remove(node)
        }
      }
    }
  }

  /// Removes the entity `id` of `T`, if it is stored, and leaves it a tombstone stamped
  /// `floor` or its own stamp, whichever is larger, whether or not it was stored; see
  /// ``IdentityMap/remove(_:id:tombstone:)``. Nothing when the store could not read it (the
  /// read is logged): the next removal reads it again.
  @inlinable
  func remove<T: Identifiable & Sendable>(_: T.Type, id: T.ID, tombstone floor: Stamp) {
    remove(T.self, id: id)
    withTable(T.self) { table in
      guard !table.cannotRead(id) else { return }
      raiseTombstone(of: id, to: floor, in: table)
    }
  }

  /// Makes the tombstone of the entity `id`, which is not stored, at least `floor`; a
  /// persisted type's store keeps it too. Nothing for a NaN `floor`, or when the map keeps no
  /// tombstones.
  @usableFromInline
  func raiseTombstone<T: Identifiable & Sendable>(
    of id: T.ID, to floor: Stamp, in table: _Table<T>
  ) {
    guard tombstones.limit > 0, !floor.isNaN else { return }
    if let stamp = table.tombstone(of: id), !(floor > stamp) { return }
    table.entomb(id, stamp: floor, self)
    // NB: the store's record goes with the write's other changes, and a rollback drops it.
    if let persisted = table.persisted, let persistence {
      persistence.current.append(_RowRemoval(persisted, id: id, tombstone: floor))
    }
  }

  /// Whether the removal of `node` can be published as it is made, skipping the journal and
  /// the pass: the removal's counterpart of `_Journal.publishesDirectly`. Only an entity that
  /// no parent shows and that shows none, held by a handle (whose hold keeps it once it leaves
  /// its table), removed in the outermost write while the journal has recorded nothing, with
  /// no optimistic layer, no consumer of its type's changes and its type not persisted.
  /// `_Pass.isExhaustive` turns it off, so that the differential tests run both ways.
  @inlinable
  func removesDirectly<T>(_ node: _EntityNode<T>, _ table: _Table<T>) -> Bool {
    !node.hasParents && !node.hasChildren && frame.depth == 1 && journal.entries.isEmpty
      && !audience.underLayers && !audience.startsPending && !audience.readsChanges(of: node)
      && table.persisted == nil && !pass.isExhaustive && node.externalHolds > 0
      && !node.s.flags.contains(.adopted)
  }

  /// Removes `node`, which `removesDirectly` allows, and publishes its removal at once: it
  /// leaves its table, whose retain becomes the adoption that keeps it for its handles, and
  /// leaves a tombstone.
  @inlinable
  func removeDirectly<T>(_ node: _EntityNode<T>, _ table: _Table<T>, at bucket: Int) {
    lifetime.unbuffer(node)
    let stamp = node.s.stamp
    if tombstones.limit > 0 && !stamp.isNaN {
      table.entombInPlace(at: bucket, node.value.id, stamp: stamp, self)
    } else {
      table.slots.removeEntry(at: bucket)
    }
    node.s.flags.remove(.registered)
    node.s.flags.formUnion([.removed, .adopted])
    registry.liveCount -= 1
    publishDirectly(node, .removed, stampBefore: stamp)
  }

  /// Removes `nodes` and everything that cannot exist without them.
  ///
  /// Each parent of a removed node loses it: dropped from a collection, set to `nil` if
  /// optional, and removed in turn if it held the node in a non-optional property. The parents
  /// that survive then propagate like any write. Removed nodes leave their table, drop their own
  /// links (their children may be released), and keep their last value for their handles.
  ///
  /// - Parameters:
  ///   - persisting: Whether each removal of a persisted entity is listed for persistence at
  ///     once (see `_Witness.persistRemoval`); `removeAll` deletes whole kinds instead.
  ///   - entombing: Whether each of `nodes` with a stamp leaves a tombstone (see
  ///     `_Tombstones.swift`); the parents removed with them always do. `removeAll` forgets
  ///     them all, and a node a tombstone refused already has one.
  /// - Complexity: O(removed nodes + their links + ancestors touched).
  @usableFromInline
  func remove(_ nodes: [_AnyNode], persisting: Bool = true, entombing: Bool = true) {
    var removed = takeRemovalBuffer()
    for node in nodes { markRemoved(node, in: &removed) }
    removeMarked(&removed, persisting: persisting, entombing: entombing)
  }

  /// Removes `node` and everything that cannot exist without it: `remove(_:)` of one node,
  /// which allocates nothing.
  @usableFromInline
  func remove(_ node: _AnyNode) {
    var removed = takeRemovalBuffer()
    markRemoved(node, in: &removed)
    removeMarked(&removed, persisting: true, entombing: true)
  }

  /// The pass's buffer of removed nodes, empty, taken until `removeMarked` gives it back.
  private func takeRemovalBuffer() -> [_AnyNode] {
    var removed: [_AnyNode] = []
    swap(&removed, &pass.buffers.removed)
    return removed
  }

  /// Adds `node` to the nodes the removal under way takes out, unless it is gone already.
  private func markRemoved(_ node: _AnyNode, in removed: inout [_AnyNode]) {
    guard !node.s.flags.contains(.removed), !node.s.bits.contains(.removing) else { return }
    pass.mark(node, .removing)
    removed.append(node)
  }

  /// Removes the nodes `removed` lists, and the parents that cannot exist without them; then
  /// gives the emptied buffer back to the pass.
  private func removeMarked(_ removed: inout [_AnyNode], persisting: Bool, entombing: Bool) {
    defer {
      removed.removeAll(keepingCapacity: true)
      swap(&removed, &pass.buffers.removed)
    }
    // NB: the removed nodes from this index on are the parents removed with them.
    let entombsFrom = entombing ? 0 : removed.count

    // Walk up: each parent either loses slots or is removed too.
    var lostSlots: [ObjectIdentifier: [Int]] = [:]
    var survivors: [_AnyNode] = []
    var index = 0
    while index < removed.count {
      let node = removed[index]
      index += 1
      for reference in node.parentReferences {
        let parent = reference.parent
        guard !parent.s.bits.contains(.removing) else { continue }
        if parent.witness.requiresChild(parent, Int(reference.slot)) {
          markRemoved(parent, in: &removed)
        } else {
          let key = ObjectIdentifier(parent)
          if lostSlots[key] == nil { survivors.append(parent) }
          lostSlots[key, default: []].append(Int(reference.slot))
        }
      }
    }

    let persisting = persisting && audience.persistedTypes > 0
    for (index, node) in removed.enumerated() {
      journal.touch(node, audience)
      lifetime.unbuffer(node)
      node.s.flags.insert(.removed)
      if persisting { node.witness.persistRemoval(node, self) }
      if tombstones.limit > 0 && index >= entombsFrom && !node.s.stamp.isNaN {
        node.witness.entomb(node, self)
      }
      if node.s.flags.contains(.registered) { unregisterKeepingHolders(node) }
      lifetime.relink(node, to: [])
    }

    var seeds: [_AnyNode] = []
    for parent in survivors where !parent.s.bits.contains(.removing) {
      journal.touch(parent, audience)
      let remaining = parent.witness.dropChildren(
        parent, lostSlots[ObjectIdentifier(parent)].unsafelyUnwrapped)
      lifetime.relink(parent, to: remaining)
      pass.mark(parent, .patched)
      seeds.append(parent)
    }
    // NB: unretained: the survivors are in the map (rules 2 and 6 of `_Lifetime.swift`).
    pass.settle(from: seeds.map(Unmanaged.passUnretained))
    pass.end()
    if layers.isActive { removalPatched(seeds) }
  }

  /// Removes every entity, then empties every alias.
  func removeAll() {
    var nodes: [_AnyNode] = []
    nodes.reserveCapacity(registry.liveCount)
    registry.forEachEntityNode { nodes.append($0) }
    remove(nodes, persisting: false, entombing: false)
    if tombstones.count > 0 {
      for table in registry.tables { table.queries.clearTombstones(table, self) }
    }
    for node in Array(registry.aliases.values)
    where node.witness.holdsAliasValue(node) || !node.s.stamp.isNaN {
      emptyAlias(node)
    }
    persistRemovingAll()
  }
}
