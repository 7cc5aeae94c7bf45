// Restoring a save slot (`IdentityMap.restore(from:)`): once the store holds the snapshot, one
// write makes memory agree with it. Every entity of a persisted type in memory, and every alias
// that persists, takes the store's value and stamp whatever the stamps say (its stamp is
// forgotten first, so the write is accepted), or goes if the store has none; the tombstones of
// persisted types become the store's; and each live query of a persisted type is given the
// entities only the store has. The journal records it all as one write, so each handle, query
// and alias is told once, at commit.

extension _MapCore {
  /// Makes memory agree with what the store holds now (see the top of this file): what memory
  /// holds of the store is read, and decoded, outside the lock, then admitted in one write.
  ///
  /// NB: one write, so that each handle, query and alias is told once; it only assigns what
  /// was decoded, reading the store under the lock only for what a write made meanwhile.
  func reloadPersistedReading() {
    // NB: a prefetch still out read the file the restore replaced.
    lock.withLock { persistence?.touchEverything() }
    let prefetch = prefetch { prefetch, persistence in
      for table in registry.tables where table.isPersisted {
        table.queries.wantReload(table, prefetch, persistence)
      }
      for node in registry.aliases.values { node.witness.wantAlias(node, prefetch, persistence) }
    }
    admitting(prefetch, ending: true) { reloadPersisted() }
  }

  /// Makes memory agree with what the store holds now, in the write under way.
  func reloadPersisted() {
    // NB: listed before anything changes, unretained: the tables and the alias slots hold the
    // nodes, and a node the reload removes goes to the graveyard, released after the lock
    // (rules 2 and 3 of `_Lifetime.swift`).
    var nodes: [Unmanaged<_AnyNode>] = []
    let tables = registry.tables.filter(\.isPersisted)
    for table in tables { table.forEachNode { nodes.append(.passUnretained($0)) } }
    for node in registry.aliases.values { nodes.append(.passUnretained(node)) }
    // NB: the old tombstones first, so that none refuses what the reload brings back.
    for table in tables { table.queries.clearTombstones(table, self) }
    for node in nodes {
      node._withUnsafeGuaranteedRef { node in
        guard node.s.flags.contains(.registered), !node.s.flags.contains(.removed) else { return }
        node.witness.reloadFromStore(node, self)
      }
    }
    for table in tables { table.queries.reloadFromStore(table, self) }
  }

  /// Gives `node` the value the store has for it now, or removes it if the store has none.
  @usableFromInline
  func reload<T: Identifiable & Sendable>(_ node: _EntityNode<T>, from persisted: _Persisted<T>) {
    switch persisted.read(node.value.id, self) {
    case .failed:
      // NB: kept as it is: the store, which has the snapshot's record, could not read it, and
      // removing it would tell its holders that the snapshot has none (logged by the read).
      return
    case .saved(let value, let stamp):
      let schema = node.table.schema
      if !schema.isLeaf { loadMissing(in: value, schema: schema) }
      node.s.stamp = .nan
      // NB: as a load, the nested entities in memory keep their values (each takes its own
      // from the store), and the root does not merge: the store's value is the whole truth.
      pass.run(
        into: node, payload: value, stamp: stamp, call: nil, verdict: .accepted, nesting: .load,
        mergeFromDepth: 1)
    case .tombstone, .deleted, .unknown:
      remove([node], persisting: false, entombing: false)
    }
  }

  /// Gives the alias `node` the value the store has for it now (`make` makes it from its
  /// entities), or empties it if the store has none.
  @usableFromInline
  func reload<T: Identifiable & Sendable, Wrapped: Sendable>(
    _ node: _AliasNode<Wrapped>, from persisted: _Persisted<T>, make: ([T]) -> Wrapped?
  ) {
    var value: Wrapped?
    var stamp: Stamp?
    switch persisted.readAlias(node.id.name, self) {
    case .saved(let ids, let saved):
      for id in ids { loadIfMissing(T.self, id: id) }
      let table = registry.table(for: T.self)
      // NB: kept as it is when the store could not read one of its entities, or the alias
      // itself (logged): written without them, the snapshot's record would lose them.
      guard !ids.contains(where: table.cannotRead) else { return }
      value = make(ids.compactMap { table.node($0)?.value })
      stamp = saved
    case .failed: return
    case .deleted, .tombstone, .unknown: break
    }
    guard let value else {
      if node.witness.holdsAliasValue(node) || !node.s.stamp.isNaN { emptyAlias(node) }
      return
    }
    node.s.stamp = .nan
    pass.run(
      into: node, payload: value, stamp: stamp, call: nil, verdict: .accepted, nesting: .load,
      mergeFromDepth: 1)
  }

  /// Takes the store's tombstones of `T`, and gives its live queries the entities only the
  /// store has: loaded, they are told to the queries as inserted (collectors hear nothing of
  /// them), and released when the write ends unless a query holds them.
  ///
  /// - Complexity: O(tombstones of `T` in the store); with live queries, O(records of `T`).
  @usableFromInline
  func reloadTable<T: Identifiable & Sendable>(_ table: _Table<T>, from persisted: _Persisted<T>) {
    if tombstones.limit > 0 {
      table.adoptStoredTombstones(persisted.storedTombstones(self), self)
    }
    guard let consumers = table.consumers, !consumers.queryNodes.isEmpty else { return }
    // NB: from what the restore read outside the lock, unless it could not list the kind.
    let ids: [T.ID]
    if let listed = persistence?.prefetched?.typed(T.self)?.listed, !persisted.touchesAll {
      ids = listed
    } else {
      ids = persisted.listed(self).compactMap { $0.record.isTombstone ? nil : $0.id }
    }
    for id in ids where table.node(id) == nil {
      load(id, into: table)
      if let node = table.node(id) { consumers._feedQueries(node, .inserted, old: nil, self) }
    }
  }
}
