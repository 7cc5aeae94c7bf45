extension IdentityMap {
  /// A live list: every stored entity of `type` for which `filter` is true, in `sortedBy`
  /// order, kept current as entities are stored, updated, removed or released.
  ///
  /// ```swift
  /// let openIssues = map.query(
  ///   Issue.self, filter: { $0.state == .open }, sortedBy: { $0.updatedAt > $1.updatedAt })
  /// openIssues.observe { issues in render(issues) }
  /// ```
  ///
  /// The handle holds exactly the entities in the result: one that stops matching and that
  /// nothing else holds is released. It is told once per write or transaction that changes the
  /// result, never of a value older than one it was told of, and not at all when the new result
  /// is `==` to the old one. Entities nested in aggregates are stored entities of their own
  /// type, and entities in the release buffer count as stored: a query that includes one holds
  /// it, as `find` does.
  ///
  /// With `sortedBy` nil, and among entities the comparator ranks equal, entities come in the
  /// order they were first stored. One that left the map and came back counts from its return;
  /// within one write, entities come in the order they appear in it.
  ///
  /// **Where the closures run.** `filter` and `sortedBy` run under the map's lock, on the thread
  /// that commits the write, each time an entity of `type` changes (the filter once per query,
  /// the comparator O(log *m*) times). They may read the map (`find`, `count`, a handle's
  /// `value`) and see the write being committed; a filter that reads other entities is
  /// evaluated again only when its own entity changes. They must not write to the map or open
  /// queries or collectors: that stops the program with a message that says so, rather than
  /// deadlocking.
  /// Keep them fast and free of side effects.
  ///
  /// A query opened inside an `update` or transaction body is empty until that write commits,
  /// and then shows the committed result.
  ///
  /// - Parameters:
  ///   - type: The entity type.
  ///   - filter: Which entities belong to the result; every one of `type` when `nil`.
  ///   - areInIncreasingOrder: A strict weak order of the result; the order first stored when
  ///     `nil`.
  /// - Returns: A handle on the result. Drop it to close the query.
  /// - Complexity: O(*n* + *m* log *m*) to open, for *n* stored entities of `type` and *m*
  ///   results. Each write then costs, for each query of the written type, one filter call and
  ///   O(log *m*) comparisons; queries of other types cost nothing.
  @inlinable
  public func query<T: Identifiable & Sendable>(
    _ type: T.Type,
    filter: (@Sendable (T) -> Bool)? = nil,
    sortedBy areInIncreasingOrder: (@Sendable (T, T) -> Bool)? = nil
  ) -> EntityObserver<[T]> {
    _observer(
      _core.openReading(T.self) {
        _core.openQuery(T.self, filter: filter, sortedBy: areInIncreasingOrder)
      })
  }

  /// A live list of the stored entities of `type` whose `keyPath` equals `value`, in `sortedBy`
  /// order, answered from a secondary index.
  ///
  /// ```swift
  /// let ursulasBooks = map.query(Book.self, where: \.authorID, equals: ursula.id) {
  ///   $0.year < $1.year
  /// }
  /// ```
  ///
  /// The map keeps one index per (type, key path) while any query on it lives: the first query
  /// builds it, queries on the same key path share it, and it goes with the last of them.
  /// Everything else is as for ``query(_:filter:sortedBy:)``; the key path's getter runs under
  /// the lock, like a filter.
  ///
  /// - Parameters:
  ///   - type: The entity type.
  ///   - keyPath: The indexed property.
  ///   - value: The key of the entities in the result.
  ///   - areInIncreasingOrder: A strict weak order of the result; the order first stored when
  ///     `nil`.
  /// - Returns: A handle on the result. Drop it to close the query.
  /// - Complexity: O(*n*) for *n* stored entities of `type` when the query builds the index;
  ///   O(*m* log *m*) for *m* results otherwise. Each write then costs O(1) index work however
  ///   many indexed queries are open, plus O(log *m*) comparisons in each query whose key the
  ///   entity had or has.
  @inlinable
  public func query<T: Identifiable & Sendable, V: Hashable & Sendable>(
    _ type: T.Type,
    where keyPath: KeyPath<T, V> & Sendable, equals value: V,
    sortedBy areInIncreasingOrder: (@Sendable (T, T) -> Bool)? = nil
  ) -> EntityObserver<[T]> {
    _observer(
      _core.openReading(T.self) {
        _core.openIndexedQuery(
          T.self, keyPath: keyPath, key: value, sortedBy: areInIncreasingOrder)
      })
  }

  /// Collects what happens to entities of `type` from now on, until drained; see
  /// ``ChangeCollector``.
  ///
  /// - Parameter type: The entity type.
  /// - Returns: The collector. It holds nothing alive; drop it or call
  ///   ``ChangeCollector/cancel()`` to stop collecting.
  @inlinable
  public func collector<T: Identifiable & Sendable>(_ type: T.Type) -> ChangeCollector<T> {
    ChangeCollector(sink: _core.write { _core.openCollector(T.self) }, core: _core)
  }
}
