/// Where the map finds its nodes: one table per entity type, and the alias slots.
@usableFromInline
struct _Registry {
  /// One table per entity type, in creation order, and their types.
  @usableFromInline var tables: [_AnyTable] = []
  @usableFromInline var tableKeys: [ObjectIdentifier] = []
  /// `tables`, unretained (rule 1 of `_Lifetime.swift`: `tables` keeps them for the map's
  /// life), for lookups. NB: reading a table out of `tables` retained it, and a write of
  /// aggregates switches tables at nearly every nested entity.
  @usableFromInline var tableRefs: [Unmanaged<_AnyTable>] = []
  /// The position of each type's table, used once there are more types than a scan suits.
  @usableFromInline var tableIndex: [ObjectIdentifier: Int] = [:]
  /// The last table looked up, by type: most calls in a row are about one type.
  /// NB: unmanaged (rule 1 of `_Lifetime.swift`): tables live as long as the map, and the hot
  /// path then borrows the table without a retain and release.
  @usableFromInline var lastKey: ObjectIdentifier?
  @usableFromInline var lastTable: Unmanaged<_AnyTable>?
  /// The alias slots.
  @usableFromInline var aliases: [_AliasID: _AnyNode] = [:]
  /// Registered entity nodes, all types together.
  @usableFromInline var liveCount = 0
  /// How many entity nodes ever left their tables (removed, released, rolled back): while it
  /// stays the same, every entity found in memory still is (see `_Prefetch.departures`).
  @usableFromInline var departures: UInt64 = 0
  /// Tables whose nodes the commit of the current write renumbers (`_Table.renumberNodes()`).
  /// NB: unretained: the registry keeps every table.
  @usableFromInline var renumbering: [Unmanaged<_AnyTable>] = []
  /// Queries opened in the middle of a write, started when it commits.
  @usableFromInline var pendingStarts: [() -> Void] = []
  /// The map, told to each table made. NB: unowned(unsafe), by rule 1 of `_Lifetime.swift`:
  /// the map owns its registry. Set once, by `_MapCore.init`.
  @usableFromInline unowned(unsafe) var core: _MapCore?

  @usableFromInline init() {}

  /// An entity node left its table.
  @inlinable
  mutating func noteDeparture() {
    liveCount -= 1
    departures &+= 1
  }

  /// The table of entity type `T`, created on first use, unretained.
  @inlinable
  mutating func cachedTable<T: Identifiable & Sendable>(for _: T.Type) -> Unmanaged<_AnyTable> {
    let key = ObjectIdentifier(T.self)
    if lastKey != key { cacheTable(for: T.self, key: key) }
    return lastTable.unsafelyUnwrapped
  }

  /// The table of entity type `T`, created on first use.
  @inlinable
  mutating func table<T: Identifiable & Sendable>(for _: T.Type) -> _Table<T> {
    unsafeDowncast(cachedTable(for: T.self).takeUnretainedValue(), to: _Table<T>.self)
  }

  /// Up to this many types, a table is found by comparing keys.
  @usableFromInline static var scanLimit: Int { 16 }

  @inlinable @inline(never)
  mutating func cacheTable<T: Identifiable & Sendable>(for _: T.Type, key: ObjectIdentifier) {
    if let found = position(of: key) {
      lastTable = tableRefs[found]
    } else {
      let table = _Table<T>()
      table.core = core
      table.witness._core = core.map { .passUnretained($0) }
      tables.append(table)
      tableKeys.append(key)
      tableRefs.append(.passUnretained(table))
      lastTable = .passUnretained(table)
      if tables.count > Self.scanLimit {
        if tableIndex.isEmpty {
          for (index, key) in tableKeys.enumerated() { tableIndex[key] = index }
        } else {
          tableIndex[key] = tables.count - 1
        }
      }
    }
    lastKey = key
  }

  /// The position in `tables` of the table of the type `key` names, if it has one.
  @usableFromInline
  func position(of key: ObjectIdentifier) -> Int? {
    // NB: a write of aggregates alternates between a few types; comparing a few keys costs
    // less than hashing one.
    tables.count <= Self.scanLimit ? tableKeys.firstIndex(of: key) : tableIndex[key]
  }

  // MARK: Alias slots

  /// The slot of the alias `id`, holding a `Wrapped?`, created empty with `witness` if there
  /// is none.
  ///
  /// The caller must hold the slot (with a handle) or write to it: an empty slot nobody holds
  /// is purged when the write ends.
  @usableFromInline
  mutating func aliasNode<Wrapped: Sendable>(
    _ id: _AliasID, witness: _Witness
  ) -> _AliasNode<Wrapped> {
    if let existing = aliases[id] {
      // NB: the id includes the value type, so the slot has this type.
      return unsafeDowncast(existing, to: _AliasNode<Wrapped>.self)
    }
    let node = _AliasNode<Wrapped>(id: id, witness: witness)
    aliases[id] = node
    return node
  }

  /// The slot of the single alias `id` of `T`, created empty if there is none; see
  /// `aliasNode(_:witness:)`.
  @inlinable
  mutating func aliasSlot<T: Identifiable & Sendable>(_ id: _AliasID, of _: T.Type) -> _AliasNode<T>
  {
    let table = table(for: T.self)
    return aliasNode(id, witness: table.aliasWitness)
  }

  /// The slot of the collection alias `id` of `T`, created empty if there is none.
  @inlinable
  mutating func collectionAliasSlot<T: Identifiable & Sendable>(_ id: _AliasID, of _: T.Type)
    -> _AliasNode<[T]>
  {
    let table = table(for: T.self)
    return aliasNode(id, witness: table.collectionAliasWitness)
  }

  /// Calls `body` with every registered entity node.
  func forEachEntityNode(_ body: (_AnyNode) -> Void) {
    for table in tables { table.forEachNode(body) }
  }
}
