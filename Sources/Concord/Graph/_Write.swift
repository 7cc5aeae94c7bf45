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
      let own = schema.stamp(of: value, call: stamp)
      guard schema.isLeaf else {
        if table.persisted != nil && table.node(value.id) == nil { load(value.id, into: table) }
        // NB: borrowed, not retained: the table holds the node for the whole write.
        return entityNode(for: value, in: table)._withUnsafeGuaranteedRef { node in
          if !writeShallow(into: node, payload: value, stamp: own, call: stamp, schema: schema) {
            writeTree(into: node, payload: value, stamp: own, call: stamp)
          }
          return body(node)
        }
      }
      // A value holding no nested entity: one lookup, no claim.
      return table.withNode(for: value) { node, created in
        // NB: a persisted entity new to memory may be in the store: then the node shows what
        // the store has, and the write goes on as a write to it.
        if created && (table.persisted == nil || !loadInto(node, table)) {
          let direct = publishesDirectly(node)
          didCreate(node, held: held, journaled: !direct)
          record(own, on: node)
          outbox.logStored(node, stamp: own)
          if direct { publishDirectly(node, .inserted, stampBefore: .nan) }
        } else {
          writeLeaf(node, value, stamp: own, schema: schema, merging: true)
        }
        return body(node)
      }
    }
  }

  /// The node of `value`'s entity, registered fresh if the map has none, unretained: the table
  /// holds it (rule 2 of `_Lifetime.swift`).
  ///
  /// A fresh node holds nothing yet; unless a parent links it or a handle is made, it is purged
  /// when the write ends. It is marked fresh for the pass about to write it.
  @inlinable
  func entityNode<T: Identifiable & Sendable>(for value: T, in table: _Table<T>) -> Unmanaged<
    _EntityNode<T>
  > {
    table.withNode(for: value) { node, created in
      if created {
        didCreate(node, held: false, journaled: true)
        mark(node, .fresh)
      }
      return .passUnretained(node)
    }
  }

  /// Books a node just registered in its table.
  ///
  /// - Parameter journaled: Whether the journal records it; a write that publishes its change
  ///   directly (see `publishesDirectly`) skips it.
  @inlinable
  func didCreate(_ node: _AnyNode, held: Bool, journaled: Bool) {
    registry.liveCount += 1
    if journaled { touchCreated(node) }
    if !held { noteHoldDropped(node) }
  }

  /// Writes `value`, stamped `stamp`, into `node`, whose type holds no nested entity.
  ///
  /// - Parameter merging: Whether a ``Mergeable`` value merges into the stored one: not for
  ///   `update`, whose body started from the stored value.
  @inlinable
  func writeLeaf<T: Sendable>(
    _ node: _Node<T>, _ value: consuming T, stamp: Stamp?, schema: _Schema<T>, merging: Bool
  ) {
    switch verdict(node, value, schema, stamp: stamp) {
    case .stale:
      outbox.logStale(node, incoming: stamp)
      return
    case .unchanged:
      return
    case .accepted, .identical:
      break
    }
    // NB: `value` is consumed, so that storing it moves it rather than copying it: `update`
    // hands over its working copy.
    if merging, let merge = schema.merge { value = merge(value, node.value) }
    if !node.hasParents && publishesDirectly(node) {
      // NB: the outermost write of a lone entity: its change is known now, so it skips the
      // journal and is published at once, which is what a commit would do.
      let differs = schema.differ(node.value, value)
      let stampBefore = node.s.stamp
      node.value = value
      record(stamp, on: node)
      outbox.logStored(node, stamp: stamp)
      publishDirectly(node, differs ? .updated : .unchanged, stampBefore: stampBefore)
      return
    }
    guard !schema.isEquatable || !_identical(node.value, value) else {
      // NB: bit for bit the stored value: nothing changes but the stamp, and nothing
      // propagates. (A type that is not `Equatable` tells its subscribers of every write, so
      // it is written anyway.)
      recordJournaled(stamp, on: node)
      outbox.logStored(node, stamp: stamp)
      return
    }
    touch(node)
    node.value = value
    record(stamp, on: node)
    outbox.logStored(node, stamp: stamp)
    if node.hasParents { propagate(from: node) }
  }

  /// Writes `payload` into `root` and every nested entity it holds, as one pass (see
  /// `_Claims.swift`). Returns whether the root itself was written.
  ///
  /// - Complexity: O(nested occurrences + parents touched).
  ///
  /// - Parameters:
  ///   - stamp: The root's stamp: its own when it is ``Stamped``, the call's otherwise.
  ///   - call: The call's `modifiedAt`, for the nested entities that carry no stamp.
  ///   - mergeFromDepth: How deep the first claims that merge are: 0 for `store`, more for an
  ///     `update`, whose own entities started from the stored values.
  @inlinable @discardableResult
  func writeTree<V: Sendable>(
    into root: _Node<V>, payload: V, stamp: Stamp?, call: Stamp?, mergeFromDepth: Int32 = 0
  ) -> Bool {
    // NB: the schema and the stash borrowed, not retained: the node's table keeps both.
    let verdict = root.withSchema { schema in
      if registry.persistedTypes > 0 && scratch.mode == .claiming {
        loadMissing(in: payload, schema: schema)
      }
      return self.verdict(root, payload, schema, stamp: stamp)
    }
    scratch.stamp = call
    scratch.mergeFromDepth = mergeFromDepth
    let payloadIndex = root.withStash { $0.append(payload, self) }
    offer(root, payload: payloadIndex, verdict: verdict, stamp: stamp)
    runPass()
    return verdict == .accepted
  }

  /// The type-erased rest of `writeTree`, from the root's claim on.
  @usableFromInline
  func runPass() {
    expandClaims()
    var seeds = _Scratch.take(&scratch.seeds)
    applyClaims(into: &seeds)
    settle(from: seeds)
    _Scratch.giveBack(&seeds, to: &scratch.seeds)
    endPass()
  }

  /// Stores `entities` behind a new batch list node.
  @inlinable
  func storeList<T: Identifiable & Sendable>(_ entities: [T], stamp: Stamp?) -> _Node<[T]> {
    let witness = registry.table(for: T.self).listWitness
    let list = _Node(value: entities, witness: witness, flags: witness.flags)
    adopt(list)
    let record = journal.entries.count
    touchCreated(list)
    mark(list, .fresh)
    if !storeLeaves(entities, into: list, stamp: stamp) {
      writeTree(into: list, payload: entities, stamp: stamp, call: stamp)
    }
    // NB: inside a transaction, the record keeps the entities the list was stored with: a
    // rollback shows those of them that still exist (see `rollBack(to:)`).
    if journal.level > 0 { journal.entries[record].links = list.children }
    return list
  }

  /// Writes a batch of entities holding no nested entity into `list`, the batch's new list
  /// node, as the pass would (see `_Claims.swift`), without its claims: each entity has one
  /// occurrence, at depth 1, so its claim wins, and its verdict, merge and write are the
  /// claim's. Returns `false` without writing when the pass is needed: a persisted type (its
  /// entities load first), or an entity named twice (its occurrences are merged or ranked). The
  /// nodes it created by then are the ones the pass's walk would create, in the same order.
  ///
  /// - Complexity: O(entities + parents of the entities written).
  @inlinable
  func storeLeaves<T: Identifiable & Sendable>(
    _ entities: [T], into list: _Node<[T]>, stamp call: Stamp?
  ) -> Bool {
    withTable(T.self) { table in
      let schema = table.schema
      guard schema.isLeaf, table.persisted == nil, scratch.mode == .claiming else { return false }
      // The walk: each entity's node, created if the map has none. `offered` marks the ones
      // met, as a claim would. NB: unretained, here and in `seeds`: the table holds them for the
      // whole write (rules 2 and 3 of `_Lifetime.swift`).
      var nodes: [Unmanaged<_EntityNode<T>>] = []
      nodes.reserveCapacity(entities.count)
      for value in entities {
        let node = table.withNode(for: value) { node, created in
          if created {
            didCreate(node, held: false, journaled: true)
            mark(node, .fresh)
          }
          return node
        }
        guard !node.s.bits.contains(.offered) else {
          for met in nodes { met.takeUnretainedValue().s.bits.remove(.offered) }
          return false
        }
        mark(node, .offered)
        nodes.append(.passUnretained(node))
      }
      // The list's claim: its links, then its stamp.
      for (position, node) in nodes.enumerated() {
        node._withUnsafeGuaranteedRef {
          link(list, to: $0, accessor: 0, position: Int32(position))
        }
      }
      record(call, on: list)
      outbox.logStored(list, stamp: call)
      // Each entity's claim, in order.
      var seeds: [Unmanaged<_AnyNode>] = []
      var listDiffers = false
      for (position, unmanaged) in nodes.enumerated() {
        unmanaged._withUnsafeGuaranteedRef { node in
          let (verdict, rebuildsList) = applyLoneOccurrence(
            entities[position], to: node, schema: schema, call: call)
          if rebuildsList { listDiffers = true }
          // NB: its parents other than the list show it from now on.
          if verdict == .accepted && node.parentCount > 1 {
            mark(node, .claimed)
            seeds.append(.passUnretained(node))
          }
        }
      }
      // The list shows its entities as stored; the other parents of those written, as written.
      if listDiffers { list.witness.materialize(list) }
      mark(list, .settled)
      if !seeds.isEmpty { settle(from: seeds) }
      endPass()
      return true
    }
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
        let effective = updateStamp(of: value, from: node.value, schema: schema, call: stamp)
        if value.id != id {
          store(value, stamp: stamp, held: false) { _ in }
        } else if schema.isLeaf {
          writeLeaf(node, value, stamp: effective, schema: schema, merging: false)
        } else {
          writeTree(into: node, payload: value, stamp: effective, call: stamp, mergeFromDepth: 1)
        }
        return true
      }
    }
  }

  /// The stamp of an `update` whose body turned `old` into `new`: the new value's own when it
  /// is ``Stamped`` and the body changed it; otherwise the call's (and with none, the write is
  /// unstamped and keeps the stored stamp).
  @inlinable
  func updateStamp<V>(of new: V, from old: V, schema: _Schema<V>, call: Stamp?) -> Stamp? {
    guard let stampOf = schema.stamp, let newStamp = stampOf(new) else { return call }
    return newStamp == stampOf(old) ? call : newStamp
  }
}
