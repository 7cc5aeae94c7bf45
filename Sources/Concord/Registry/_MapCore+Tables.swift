// How the core finds the table of an entity type: the last one looked up, then its registry's
// list (see `_Registry`).

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
