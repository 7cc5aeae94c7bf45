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
  /// Queries opened in the middle of a write, started when it commits.
  @usableFromInline var pendingStarts: [() -> Void] = []

  @usableFromInline init() {}

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

  /// Calls `body` with every registered entity node.
  func forEachEntityNode(_ body: (_AnyNode) -> Void) {
    for table in tables { table.forEachNode(body) }
  }
}

extension _MapCore {
  /// The table of entity type `T`, unretained, or `nil` if it has none yet.
  ///
  /// NB: unlike `cachedTable(for:)`, it changes nothing, neither the last table looked up nor
  /// the tables: readers sharing the lock call it at once.
  @inlinable
  func existingTable<T: Identifiable & Sendable>(for _: T.Type) -> Unmanaged<_AnyTable>? {
    let key = ObjectIdentifier(T.self)
    if registry.lastKey == key { return registry.lastTable }
    return lookUpTable(key)
  }

  /// `existingTable(for:)` past the last table looked up.
  @usableFromInline @inline(never)
  func lookUpTable(_ key: ObjectIdentifier) -> Unmanaged<_AnyTable>? {
    registry.position(of: key).map { registry.tableRefs[$0] }
  }

  /// Calls `body` with the table of entity type `T`, borrowed without reference counting (rule
  /// 1 of `_Lifetime.swift`).
  @inlinable
  func withTable<T: Identifiable & Sendable, R>(_: T.Type, _ body: (_Table<T>) -> R) -> R {
    registry.cachedTable(for: T.self)._withUnsafeGuaranteedRef {
      body(unsafeDowncast($0, to: _Table<T>.self))
    }
  }
}
