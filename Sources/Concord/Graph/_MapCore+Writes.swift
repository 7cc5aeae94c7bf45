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
      // the write goes on as a write to it; so may the entities it nests.
      if table.persisted != nil && table.node(value.id) == nil { load(value.id, into: table) }
      if audience.persistedTypes > 0 && !schema.isLeaf { loadMissing(in: value, schema: schema) }
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
    if audience.persistedTypes > 0 {
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
        guard schema.stamp != nil || node.admits(stamp) || stamp == node.s.stamp else {
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
}
