// The writes the facade makes: each finds or creates its root (an entity, a batch list, an alias
// slot), loads what it needs from the store first, and writes its value in one pass (see
// `_Pass.swift`).

extension _MapCore {
  /// Stores `value` as a root write and calls `body` with its node, borrowed.
  ///
  /// The write carries the value's own stamp when it is ``Stamped``, `stamp` otherwise, and
  /// merges into the stored value when it is ``Mergeable``.
  ///
  /// - Parameter held: Whether `body` takes a hold on the node (a handle); if not, a node this
  ///   write creates is checked for release when the write ends.
  /// - Complexity: O(1) for a value without nested entities, plus O(parents touched);
  ///   O(nested occurrences + parents touched) otherwise.
  @inlinable
  func store<T: Identifiable & Sendable, R>(
    _ value: T, stamp: Stamp?, held: Bool, _ body: (_EntityNode<T>) -> R
  ) -> R {
    withTable(T.self) { table in
      let schema = table.schema
      // NB: a persisted entity new to memory may be in the store: then it is loaded first, and
      // the write goes on as a write to it; so may the entities it nests. A prefetch that found
      // the entity and every entity it nests in memory, in this section, foresaw both checks.
      let foreseen = audience.persistedTypes > 0 && takeForesight()
      if table.persisted != nil && !foreseen && table.node(value.id) == nil {
        load(value.id, into: table)
      }
      if audience.persistedTypes > 0 && !schema.isLeaf && !foreseen {
        loadMissing(in: value, schema: schema)
      }
      // NB: borrowed, not retained: the table holds the node for the whole write.
      return table.withNode(for: value) { node, created in
        let ownStamp = schema.stamp(of: value, call: stamp)
        // NB: a node the write creates may be one the store could not read, or a removed
        // entity whose tombstone refuses the write.
        let refusal: _Verdict? =
          !created
          ? nil
          : table.cannotRead(value.id)
            ? .unreadable : table.refusesCreated(node, stamp: ownStamp, self) ? .stale : nil
        let publishing =
          refusal != nil
          ? nil
          : journal.publishesDirectly(
            node, schema: schema, created: created, outermost: frame.depth == 1, audience)
        if created {
          didCreate(node, held: held, journaled: publishing == nil)
          pass.mark(node, .fresh)
        }
        pass.run(
          into: node, payload: value, stamp: ownStamp, call: stamp, verdict: refusal,
          publishing: publishing)
        let result = body(node)
        // NB: a node a tombstone refused, or removed with a nested entity one refused, left
        // the map before `body` took its handle's hold: the removal adopts only nodes already
        // held (`unregisterKeepingHolders(_:)`).
        if node.s.flags.contains(.removed) && node.externalHolds > 0 { node.adopt() }
        return result
      }
    }
  }

  /// Books a node just registered in its table.
  ///
  /// - Parameter journaled: Whether the journal records it; a write that publishes its change
  ///   directly (see `publishesDirectly`) skips it.
  @inlinable
  func didCreate(_ node: _AnyNode, held: Bool, journaled: Bool) {
    registry.liveCount += 1
    if journaled { journal.recordCreated(node) }
    if !held { lifetime.noteHoldDropped(node) }
  }

  /// Stores `entities` behind a new batch list node.
  @inlinable
  func storeList<T: Identifiable & Sendable>(_ entities: [T], stamp: Stamp?) -> _Node<[T]> {
    let witness = registry.table(for: T.self).listWitness
    let list = _Node(value: entities, witness: witness, flags: witness.flags)
    if audience.persistedTypes > 0 && !takeForesight() {
      loadMissing(in: entities, schema: list.schema.takeUnretainedValue())
    }
    list.adopt()
    let record = journal.entries.count
    journal.recordCreated(list)
    pass.mark(list, .fresh)
    pass.run(into: list, payload: entities, stamp: stamp, call: stamp)
    // NB: inside a transaction, the record keeps the entities the list was stored with: a
    // rollback shows those of them that still exist (see `rollBack(to:)`).
    if journal.level > 0 { journal.entries[record].links = list.children }
    return list
  }

  /// See `IdentityMap.update(_:id:modifiedAt:_:)`.
  @inlinable
  func update<T: Identifiable & Sendable>(
    _: T.Type, id: T.ID, stamp: Stamp?, _ body: (inout T) -> Void
  ) -> Bool {
    withTable(T.self) { table in
      if table.persisted != nil && table.node(id) == nil { load(id, into: table) }
      // NB: the node borrowed, not retained, for the whole update: a write that takes it out
      // of its table, even one the body makes, leaves it in the graveyard until the lock is
      // released.
      guard let found = table.slots[id] else { return false }
      return found._withUnsafeGuaranteedRef { node in
        let schema = table.schema
        // NB: a ``Stamped`` value's stamp is only known from the body's result; otherwise a
        // stale call stamp is refused before the body runs. An equal one may still be a quiet
        // no-op, which only the result can tell.
        guard schema.stamping != nil || node.admits(stamp) || stamp == node.s.stamp else {
          outbox.logStale(node, incoming: stamp)
          return true
        }
        var value = node.value
        runUserCode { body(&value) }
        // NB: the body may have removed the entity through a nested write; the node is still
        // there to ask (see above).
        guard !node.s.flags.contains(.removed) else { return false }
        let effective = schema.stamp(of: value, replacing: node.value, call: stamp)
        guard value.id == id else {
          store(value, stamp: stamp, held: false) { _ in }
          return true
        }
        if audience.persistedTypes > 0 && !schema.isLeaf { loadMissing(in: value, schema: schema) }
        pass.run(
          into: node, payload: value, stamp: effective, call: stamp, mergeFromDepth: 1,
          publishing: journal.publishesDirectly(
            node, schema: schema, created: false, outermost: frame.depth == 1, audience))
        return true
      }
    }
  }

  // MARK: Aliases
  //
  // Aliases: named slots holding an entity, an aggregate or an array of them (see
  // `_AliasNode`), written by one pass each and anchored while set.

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
    guard schema.stamping != nil || node.admits(stamp) || stamp == node.s.stamp else {
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
    // NB: an alias not in memory may be in the store.
    guard let node = registry.aliases[id] else { return persistRemovingAlias(id.name) }
    guard node.witness.holdsAliasValue(node) else { return }
    emptyAlias(node)
  }

  /// Writes `value` into the slot of a resource's answer: one pass, the slot unstamped (every
  /// fetch replaces the answer before it), each entity judged by `stamp`, or its own.
  ///
  /// NB: inlinable, so that a resource's answers and a paged list's pages are written by a
  /// pass specialized for their type (`_AnswerShape.write`, `IdentityMap.pagedResource`).
  @inlinable
  func storeAnswer<Value: Sendable>(_ value: Value, into node: _AliasNode<Value>, stamp: Stamp?) {
    lifetime.noteHoldDropped(node)
    let schema = node.schema.takeUnretainedValue()
    if audience.persistedTypes > 0 { loadMissing(in: Optional(value), schema: schema) }
    pass.run(into: node, payload: value, stamp: nil, call: stamp)
  }

  /// Keeps in the slot `node` of a page of a paged list, just written by `storeAnswer`, only
  /// what the page brings new: the first occurrence of each entity that none of the list's
  /// other slots, `others`, holds. The other occurrences leave the slot as a removed entity
  /// leaves a collection; no entity is written. Returns how many entities the slot keeps, and
  /// whether one of `others` held an entity of the page.
  ///
  /// - Complexity: O(the page's occurrences + their entities' parents).
  @usableFromInline
  func keepNewEntities(in node: _AnyNode, besides others: Set<ObjectIdentifier>) -> (
    kept: Int, shared: Bool
  ) {
    let links = node.children
    var dropped: [Int] = []
    var shared = false
    // NB: one look at each entity's parents, no set of the page's entities: an occurrence
    // repeats an earlier one when its entity has a link from the slot at a lower position,
    // and it is listed elsewhere when one of its parents is another slot of the list.
    for (slot, link) in links.enumerated() {
      let child = link.child
      var repeated = false
      var listed = false
      for index in 0..<child.parentCount {
        let reference = child.parent(at: index)
        if reference.parent === node {
          if Int(reference.slot) < slot {
            repeated = true
            break
          }
        } else if !others.isEmpty, others.contains(ObjectIdentifier(reference.parent)) {
          listed = true
        }
      }
      if repeated || listed { dropped.append(slot) }
      if listed && !repeated { shared = true }
    }
    if !dropped.isEmpty {
      journal.touch(node, audience)
      lifetime.relink(node, to: node.witness.dropChildren(node, dropped))
    }
    return (links.count - dropped.count, shared)
  }

  /// Empties the slot of a resource's answer let go. It never persists, so the store keeps
  /// its record.
  @usableFromInline
  func releaseAnswer(_ node: _AnyNode) {
    guard node.witness.holdsAliasValue(node) else { return }
    emptyAlias(node)
  }

  /// Empties an alias node: value `nil`, no links, no stamp.
  func emptyAlias(_ node: _AnyNode) {
    journal.touch(node, audience)
    node.witness.clearAliasValue(node)
    lifetime.relink(node, to: [])
    lifetime.settleAnchor(of: node)
  }

  // MARK: Removal

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
    registry.noteDeparture()
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

  // MARK: Tombstones

  /// Forgets the oldest tombstone of any table.
  ///
  /// - Complexity: O(tables).
  @usableFromInline
  func evictOldestTombstone() {
    var oldest: (table: _AnyTable, serial: UInt64)?
    for table in registry.tables {
      if let serial = table.queries.oldestTombstone(table), serial < oldest?.serial ?? .max {
        oldest = (table, serial)
      }
    }
    oldest.map { $0.table.queries.evictTombstone($0.table, self) }
  }
}
