/// The nodes of one entity type, and everything the map keeps per entity type, as the map's
/// type-erased code sees it: `_Table<T>` holds it all.
@usableFromInline
class _AnyTable {
  /// The entity type's name, for `IdentityMap.statistics`.
  let typeName: String
  /// What the type-erased code asks of the table; see `_TableQueries`.
  let queries: _TableQueries
  /// The map the table is part of. NB: unowned(unsafe), by rule 1 of `_Lifetime.swift`: the
  /// map owns its tables. Set once, by the registry, before the table has any node, and never
  /// changed; each witness the table makes keeps it too (`_Witness._core`).
  @exclusivity(unchecked) @usableFromInline unowned(unsafe) var core: _MapCore?

  @usableFromInline
  init(typeName: String, queries: _TableQueries) {
    self.typeName = typeName
    self.queries = queries
  }

  /// Calls `body` with every node of the table.
  func forEachNode(_ body: (_AnyNode) -> Void) { queries.forEachNode(self, body) }

  /// How many nodes the table holds.
  var count: Int { queries.count(self) }

  /// How many live queries and collectors of the table's type there are, and one more if the
  /// type is persisted.
  var consumerCount: Int { queries.consumerCount(self) }

  /// Whether the table's type is persisted; for `_checkInvariants`.
  var isPersisted: Bool { queries.isPersisted(self) }

  /// Renumbers the table's nodes; see `_Table.renumberNodes()`.
  func renumber() { queries.renumber(self) }
}

/// What the map's type-erased code asks of a table (removing everything, checking invariants,
/// statistics), as closures made where the entity type is known; each takes the table.
@usableFromInline
struct _TableQueries {
  let forEachNode: (_AnyTable, (_AnyNode) -> Void) -> Void
  let count: (_AnyTable) -> Int
  let consumerCount: (_AnyTable) -> Int
  let isPersisted: (_AnyTable) -> Bool
  /// The nodes of the table's live queries; for `_checkInvariants`.
  let queryNodes: (_AnyTable) -> [_AnyNode]
  /// What is wrong with the table's indexes, if anything; for `_checkInvariants`.
  let indexProblem: (_AnyTable) -> String?
  /// How many live queries and collectors of the table's type there are.
  let queryCount: (_AnyTable) -> Int
  let collectorCount: (_AnyTable) -> Int
  /// The serial number of the table's oldest tombstone, if it has any.
  let oldestTombstone: (_AnyTable) -> UInt64?
  /// Forgets the table's oldest tombstone; for a persisted type, deletes its record too.
  let evictTombstone: (_AnyTable, _MapCore) -> Void
  /// Forgets every tombstone of the table.
  let clearTombstones: (_AnyTable, _MapCore) -> Void
  /// What is wrong with the table's tombstones, if anything (a stored entity with one,
  /// say); for `_checkInvariants`.
  let tombstoneProblem: (_AnyTable) -> String?
  /// How many tombstones the table holds; for `_checkInvariants`.
  let tombstoneCount: (_AnyTable) -> Int
  /// For a persisted aggregate type, brings the entities only the store has into memory; see
  /// `_MapCore.loadAll(into:)`.
  let loadAggregates: (_AnyTable, _MapCore) -> Void
  /// For a persisted aggregate type, asks `prefetch` for every entity the store has of it;
  /// see `_MapCore.parentsReading(of:id:)`.
  let wantAggregates: (_AnyTable, _Prefetch, _Persistence) -> Void
  /// For a persisted type, after its entities in memory took the store's values: takes the
  /// store's tombstones, and gives the live queries the entities only the store has; see
  /// `_MapCore+Restore.swift`.
  let reloadFromStore: (_AnyTable, _MapCore) -> Void
  /// For a persisted type, asks `prefetch` for what a restore's reload reads of it: every
  /// entity in memory, its tombstones, and, with live queries, every entity of the store.
  let wantReload: (_AnyTable, _Prefetch, _Persistence) -> Void
  /// Renumbers the table's nodes in creation order; see `_Table.renumberNodes()`.
  let renumber: (_AnyTable) -> Void

  @usableFromInline
  init(
    forEachNode: @escaping (_AnyTable, (_AnyNode) -> Void) -> Void,
    count: @escaping (_AnyTable) -> Int, consumerCount: @escaping (_AnyTable) -> Int,
    isPersisted: @escaping (_AnyTable) -> Bool, queryNodes: @escaping (_AnyTable) -> [_AnyNode],
    indexProblem: @escaping (_AnyTable) -> String?, queryCount: @escaping (_AnyTable) -> Int,
    collectorCount: @escaping (_AnyTable) -> Int,
    oldestTombstone: @escaping (_AnyTable) -> UInt64?,
    evictTombstone: @escaping (_AnyTable, _MapCore) -> Void,
    clearTombstones: @escaping (_AnyTable, _MapCore) -> Void,
    tombstoneProblem: @escaping (_AnyTable) -> String?,
    tombstoneCount: @escaping (_AnyTable) -> Int,
    loadAggregates: @escaping (_AnyTable, _MapCore) -> Void,
    wantAggregates: @escaping (_AnyTable, _Prefetch, _Persistence) -> Void,
    reloadFromStore: @escaping (_AnyTable, _MapCore) -> Void,
    wantReload: @escaping (_AnyTable, _Prefetch, _Persistence) -> Void,
    renumber: @escaping (_AnyTable) -> Void
  ) {
    self.forEachNode = forEachNode
    self.count = count
    self.consumerCount = consumerCount
    self.isPersisted = isPersisted
    self.queryNodes = queryNodes
    self.indexProblem = indexProblem
    self.queryCount = queryCount
    self.collectorCount = collectorCount
    self.oldestTombstone = oldestTombstone
    self.evictTombstone = evictTombstone
    self.clearTombstones = clearTombstones
    self.tombstoneProblem = tombstoneProblem
    self.tombstoneCount = tombstoneCount
    self.loadAggregates = loadAggregates
    self.wantAggregates = wantAggregates
    self.reloadFromStore = reloadFromStore
    self.wantReload = wantReload
    self.renumber = renumber
  }

  /// The queries of `_Table<T>`.
  @inlinable
  static func of<T: Identifiable & Sendable>(_: T.Type) -> _TableQueries {
    func table(_ erased: _AnyTable) -> _Table<T> { unsafeDowncast(erased, to: _Table<T>.self) }
    return _TableQueries(
      forEachNode: { erased, body in
        table(erased).slots.forEachNode { body($0.takeUnretainedValue()) }
      },
      count: { table($0).slots.count },
      consumerCount: { erased in
        let table = table(erased)
        return (table.consumers?.count ?? 0) + (table.persisted == nil ? 0 : 1)
      },
      isPersisted: { table($0).persisted != nil },
      queryNodes: { table($0).consumers?.queryNodes ?? [] },
      indexProblem: { erased in
        let table = table(erased)
        return table.slots.problem { $0.takeUnretainedValue().value.id }
          ?? table.consumers?.problem
      },
      queryCount: { table($0).consumers?.queryNodes.count ?? 0 },
      collectorCount: { table($0).consumers?.sinks.count ?? 0 },
      oldestTombstone: { erased in
        let table = table(erased)
        return table.tombstones.oldestSerial(in: table.slots)
      },
      evictTombstone: { erased, core in table(erased).evictOldestTombstone(core) },
      clearTombstones: { erased, core in table(erased).clearTombstones(core) },
      tombstoneProblem: { erased in
        let table = table(erased)
        return table.tombstones.problem(in: table.slots).map { "\(T.self): \($0)" }
      },
      tombstoneCount: { table($0).slots.tombCount },
      loadAggregates: { erased, core in
        let table = table(erased)
        if table.persisted != nil && !table.schema.isLeaf { core.loadAll(into: table) }
      },
      wantAggregates: { erased, prefetch, persistence in
        let table = table(erased)
        guard let persisted = table.persisted, !table.schema.isLeaf else { return }
        prefetch.wantAll(of: persisted)
      },
      reloadFromStore: { erased, core in
        let table = table(erased)
        if let persisted = table.persisted { core.reloadTable(table, from: persisted) }
      },
      wantReload: { erased, prefetch, persistence in
        let table = table(erased)
        guard let persisted = table.persisted else { return }
        let typed = prefetch.of(persisted)
        table.slots.forEachNode { typed.wanted.append($0.takeUnretainedValue().value.id) }
        typed.wantsTombstones = true
        if table.consumers?.queryNodes.isEmpty == false { typed.wantsAll = true }
      },
      renumber: { table($0).renumberNodes() })
  }
}

/// The nodes of entity type `T`, the witnesses of every node whose value is made of `T`, and
/// the type's consumers.
///
/// NB: typed, so that the hot path hashes `T.ID` itself, never an `AnyHashable` or a string.
@usableFromInline
final class _Table<T: Identifiable & Sendable>: _AnyTable {
  /// The table holds each node with a manual retain (rule 2 of `_Lifetime.swift`). NB:
  /// unmanaged, so that the hot path borrows a node (`withNode`) without a retain and a
  /// release; and an index of our own, not a dictionary, so that a lookup reads the id and the
  /// node's reference from one bucket.
  #if DEBUG
    @usableFromInline var slots = _NodeIndex<T.ID, _EntityNode<T>>()
  #else
    @exclusivity(unchecked) @usableFromInline var slots = _NodeIndex<T.ID, _EntityNode<T>>()
  #endif
  @usableFromInline let schema: _Schema<T>
  /// Values of type `T` the current write needs: claims' payloads and the journal's saved values.
  @usableFromInline let stash: _Stash<T>
  /// The witness of the entities of `T`.
  @usableFromInline let witness: _Witness
  // NB: see `_AnyNode.s` on exclusivity checks: a write reads `persisted` and `consumers`, and
  // each dynamic check cost as much as a pthread lock.
  #if DEBUG
    /// The live queries, indexes and collectors of `T`; `nil` while there are none.
    @usableFromInline var consumers: _Consumers<T>?
    /// How `T` is persisted; `nil` unless ``IdentityMap/persist(_:)`` named it.
    @usableFromInline var persisted: _Persisted<T>?
    /// The sequence number of the last node created: see `_EntityNode.sequence`.
    @usableFromInline var lastSequence: UInt32 = 0
    /// The witnesses of batch lists, queries and aliases of `T`, made on first use.
    @usableFromInline var witnesses = _MoreWitnesses()
    /// The stamps of removed entities of `T`; see `_Tombstones.swift`.
    @usableFromInline var tombstones = _TombstoneIndex<T.ID>()
  #else
    /// The live queries, indexes and collectors of `T`; `nil` while there are none.
    @exclusivity(unchecked) @usableFromInline var consumers: _Consumers<T>?
    /// How `T` is persisted; `nil` unless ``IdentityMap/persist(_:)`` named it.
    @exclusivity(unchecked) @usableFromInline var persisted: _Persisted<T>?
    /// The sequence number of the last node created: see `_EntityNode.sequence`.
    @exclusivity(unchecked) @usableFromInline var lastSequence: UInt32 = 0
    /// The witnesses of batch lists, queries and aliases of `T`, made on first use.
    @exclusivity(unchecked) @usableFromInline var witnesses = _MoreWitnesses()
    @exclusivity(unchecked) @usableFromInline var tombstones = _TombstoneIndex<T.ID>()
  #endif

  @inlinable
  init() {
    let schema = _Schema<T>.entity
    let stash = _Stash<T>()
    var flags = _NodeFlags.registered
    if schema.merging != nil { flags.insert(.mergeable) }
    if schema.isLeaf { flags.insert(.leaf) }
    self.schema = schema
    self.stash = stash
    witness = .make(
      .entity, of: T.self, schema: schema, stash: stash, flags: flags,
      hooks: _Table.entityHooks())
    super.init(typeName: String(describing: T.self), queries: .of(T.self))
    witness._table = self
  }

  deinit {
    slots.forEachNode { $0.release() }
    slots.dispose()
  }

  /// Whether the table holds no node.
  var isEmpty: Bool { slots.count == 0 }

  // MARK: Creation order

  /// The sequence number at which the table asks to be renumbered: half the 32 bits, so that
  /// the nodes created before the commit that renumbers (never 2^31 in one write) still get
  /// ranks above every earlier one.
  @inlinable static var renumberingSequence: UInt32 { 1 << 31 }

  /// The sequence number of a node created now; see `_EntityNode.sequence`.
  ///
  /// NB: not inlined: inlined into each place that creates a node, its check for the mark
  /// grew the pass's claim enough that the compiler stopped inlining the index's lookup there
  /// (`store.refetch` took 3 % longer).
  @usableFromInline @inline(never)
  func nextSequence() -> UInt32 {
    // NB: checked: a table renumbers long before its ranks run out (`renumberNodes()`), so an
    // overflow would be a bug, and traps rather than wraps.
    lastSequence += 1
    if lastSequence == Self.renumberingSequence { scheduleRenumbering() }
    return lastSequence
  }

  /// Asks the current write's commit to renumber the table (`renumberNodes()`); a node took the
  /// sequence number `renumberingSequence`. Under the map's lock.
  @usableFromInline
  func scheduleRenumbering() {
    core.unsafelyUnwrapped.registry.renumbering.append(.passUnretained(self))
  }

  /// Gives the table's nodes the sequence numbers 1 to `count`, in their creation order, and
  /// tells its live queries, which copy them (`_QueryNode.renumbered()`). At a commit, so that
  /// no rollback brings back a node numbered before: a node out of its table never returns to
  /// it once its write has committed, so every node that can meet another in a query's order
  /// is renumbered.
  ///
  /// - Complexity: O(*n* log *n*) for the table's *n* nodes, once every 2^31 nodes created.
  @usableFromInline
  func renumberNodes() {
    // NB: unretained: the table keeps each of its nodes (rule 2 of `_Lifetime.swift`), and
    // none leaves it while they are renumbered.
    var nodes: [Unmanaged<_EntityNode<T>>] = []
    nodes.reserveCapacity(slots.count)
    slots.forEachNode { nodes.append($0) }
    nodes.sort { first, second in
      first._withUnsafeGuaranteedRef { first in
        second._withUnsafeGuaranteedRef { first.sequence < $0.sequence }
      }
    }
    for (offset, node) in nodes.enumerated() {
      node._withUnsafeGuaranteedRef { $0.s.sequence = UInt32(offset + 1) }
    }
    lastSequence = UInt32(nodes.count)
    for query in consumers?.queryNodes ?? [] {
      unsafeDowncast(query, to: _QueryNode<T>.self).renumbered()
    }
  }

  /// Calls `body` with the node of `id`, borrowed; `nil` if there is none.
  @inlinable
  func withNode<R>(_ id: T.ID, _ body: (_EntityNode<T>) -> R) -> R? {
    guard let slot = slots[id] else { return nil }
    return slot._withUnsafeGuaranteedRef(body)
  }

  /// The node of `id`, for paths where a borrow is awkward.
  @inlinable
  func node(_ id: T.ID) -> _EntityNode<T>? {
    slots[id]?.takeUnretainedValue()
  }

  /// Calls `body` with the node of `value`'s id, borrowed, and whether it was just created:
  /// if there is none, registers a new one holding `value`, with a single hash lookup.
  @inlinable
  func withNode<R>(for value: T, _ body: (_EntityNode<T>, _ created: Bool) -> R) -> R {
    var created = false
    let slot = slots.getOrInsert(value.id) {
      created = true
      return .passRetained(_EntityNode(value: value, table: self))
    }
    return slot._withUnsafeGuaranteedRef { body($0, created) }
  }

  /// Takes `node` out if it is its id's entry, and returns it with the table's retain, for
  /// the caller to bury in the write's graveyard, so that it is released after the lock (rules
  /// 2 and 3 of `_Lifetime.swift`); `nil` when it was not there.
  ///
  /// NB: the retain is handed over, not dropped: the caller may hold `node` unretained (a
  /// purge borrows its candidates), and the table's retain may be the last.
  @inlinable
  func remove(_ node: _EntityNode<T>) -> _EntityNode<T>? {
    let slot = Unmanaged.passUnretained(node)
    guard slots.remove(node.value.id, ifNodeIs: slot) else { return nil }
    return slot.takeRetainedValue()
  }

  /// Makes `node` its id's entry again, and returns the node it replaced, if any.
  @inlinable
  func insert(_ node: _EntityNode<T>) -> _EntityNode<T>? {
    slots.updateValue(.passRetained(node), forKey: node.value.id).map { $0.takeRetainedValue() }
  }

  /// The consumers of `T`, made on first use: a query or collector is about to attach.
  @inlinable
  func makeConsumersIfNeeded() -> _Consumers<T> {
    if let consumers { return consumers }
    let made = _Consumers(table: self)
    consumers = made
    return made
  }

  // MARK: Witnesses of lists, queries and aliases

  /// The witness of the batch lists of `T`.
  @inlinable
  var listWitness: _Witness {
    if let made = witnesses.list { return made }
    let made = _Witness.make(
      .list, of: [T].self, schema: .list(of: T.self), stash: _Stash(), flags: .list,
      hooks: _Table.listHooks())
    witnesses.list = adopt(made)
    return made
  }

  /// The witness of the live queries of `T`.
  @inlinable
  var queryWitness: _Witness {
    if let made = witnesses.query { return made }
    let made = _Witness.make(
      .query, of: [T].self, schema: .list(of: T.self), stash: _Stash(), flags: [.list, .query],
      hooks: _Table.queryHooks())
    witnesses.query = adopt(made)
    return made
  }

  /// The witness of the single aliases of `T`.
  @inlinable
  var aliasWitness: _Witness {
    if let made = witnesses.alias { return made }
    let made = _Witness.make(
      .alias, of: T?.self, schema: .alias(of: T.self), stash: _Stash(),
      flags: [.registered, .alias],
      hooks: _Table.aliasHooks(of: T.self, entities: { [$0] }, make: { $0.first }))
    witnesses.alias = adopt(made)
    return made
  }

  /// The witness of the collection aliases of `T`.
  @inlinable
  var collectionAliasWitness: _Witness {
    if let made = witnesses.collectionAlias { return made }
    let made = _Witness.make(
      .alias, of: [T]?.self, schema: .aliasList(of: T.self), stash: _Stash(),
      flags: [.registered, .alias],
      hooks: _Table.aliasHooks(of: [T].self, entities: { $0 }, make: { $0 }))
    witnesses.collectionAlias = adopt(made)
    return made
  }

  /// Makes this table the owner of `witness`, just made, and returns it.
  @inlinable
  func adopt(_ witness: _Witness) -> _Witness {
    witness._table = self
    witness._core = core.map { .passUnretained($0) }
    return witness
  }
}

/// The witnesses a table makes when its type is first stored in a batch, a query or an alias.
@usableFromInline
struct _MoreWitnesses {
  @usableFromInline var list: _Witness?
  @usableFromInline var query: _Witness?
  @usableFromInline var alias: _Witness?
  @usableFromInline var collectionAlias: _Witness?

  @inlinable init() {}
}

/// Values of one type that the current write keeps aside: the payloads of its claims, and the
/// values its journal saved. Emptied when the outermost write ends. This base is what the
/// journal lists: it empties a stash without knowing its type.
@usableFromInline
class _AnyStash {
  /// Empties the stash's values, keeping the buffer for the next write. NB: made where the
  /// stash is created, in code specialized for its type; called from type-erased code, the
  /// array's methods would otherwise run unspecialized and look up metadata on every call.
  @usableFromInline let clear: (_AnyStash) -> Void

  @usableFromInline
  init(clear: @escaping (_AnyStash) -> Void) {
    self.clear = clear
  }
}

/// The stash of values of type `Value`.
@usableFromInline
final class _Stash<Value>: _AnyStash {
  // NB: see `_AnyNode.s` on exclusivity checks.
  #if DEBUG
    @usableFromInline var values: [Value] = []
  #else
    @exclusivity(unchecked) @usableFromInline var values: [Value] = []
  #endif

  @inlinable init() {
    super.init {
      unsafeDowncast($0, to: _Stash<Value>.self).values.removeAllKeepingCapacity()
    }
  }

  /// Keeps `value` and returns its index. The first value of a write enlists the stash in
  /// `stashes` (the journal's), so that the write empties it when it ends.
  @inlinable
  func append(_ value: Value, enlistingIn stashes: inout [Unmanaged<_AnyStash>]) -> Int32 {
    if values.isEmpty { stashes.append(.passUnretained(self)) }
    values.append(value)
    return Int32(values.count - 1)
  }
}
