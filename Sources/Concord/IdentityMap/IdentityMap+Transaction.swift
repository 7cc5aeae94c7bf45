extension IdentityMap {
  /// The writes of one ``IdentityMap/transaction(_:)``.
  ///
  /// It offers the map's own methods; their writes are part of the transaction. It is only
  /// valid inside the transaction's body: using it afterwards stops the program.
  public struct Transaction {
    @usableFromInline let map: IdentityMap
    @usableFromInline let serial: Int

    @usableFromInline
    init(map: IdentityMap, serial: Int) {
      self.map = map
      self.serial = serial
    }

    @usableFromInline
    func checkOpen() {
      precondition(
        map._core.read { map._core.isOpen(transaction: serial) },
        "IdentityMap.Transaction used outside the body of its transaction")
    }

    /// Stores an entity, or an aggregate and its nested entities, in the transaction.
    @inlinable @discardableResult
    public func store<T: Identifiable & Sendable>(_ entity: T, modifiedAt: Stamp? = nil)
      -> EntityObserver<T>
    {
      checkOpen()
      return map.store(entity, modifiedAt: modifiedAt)
    }

    /// Stores entities in the transaction and returns one handle following all of them.
    @inlinable @discardableResult
    public func store<T: Identifiable & Sendable>(_ entities: [T], modifiedAt: Stamp? = nil)
      -> EntityObserver<[T]>
    {
      checkOpen()
      return map.store(entities, modifiedAt: modifiedAt)
    }

    /// Stores an entity and makes it the value of an alias, in the transaction.
    @inlinable @discardableResult
    public func store<T: Identifiable & Sendable>(
      _ entity: T, named key: AliasKey<T>, modifiedAt: Stamp? = nil
    ) -> EntityObserver<T?> {
      checkOpen()
      return map.store(entity, named: key, modifiedAt: modifiedAt)
    }

    /// Stores entities and makes them the value of a collection alias, in the transaction.
    @inlinable @discardableResult
    public func store<T: Identifiable & Sendable>(
      _ entities: [T], named key: AliasKey<[T]>, modifiedAt: Stamp? = nil
    ) -> EntityObserver<[T]?> {
      checkOpen()
      return map.store(entities, named: key, modifiedAt: modifiedAt)
    }

    /// A handle on a stored entity, as the transaction sees it so far.
    @inlinable
    public func find<T: Identifiable & Sendable>(_ type: T.Type, id: T.ID) -> EntityObserver<T>? {
      checkOpen()
      return map.find(type, id: id)
    }

    /// A handle on an alias, as the transaction sees it so far.
    @inlinable
    public func find<T: Identifiable & Sendable>(named key: AliasKey<T>) -> EntityObserver<T?> {
      checkOpen()
      return map.find(named: key)
    }

    /// A handle on a collection alias, as the transaction sees it so far.
    @inlinable
    public func find<T: Identifiable & Sendable>(named key: AliasKey<[T]>) -> EntityObserver<[T]?> {
      checkOpen()
      return map.find(named: key)
    }

    /// Updates a stored entity in the transaction. Returns `false` if it is absent.
    @inlinable @discardableResult
    public func update<T: Identifiable & Sendable>(
      _ type: T.Type, id: T.ID, modifiedAt: Stamp? = nil, _ body: (inout T) -> Void
    ) -> Bool {
      checkOpen()
      return map.update(type, id: id, modifiedAt: modifiedAt, body)
    }

    /// Updates the entity an alias names, in the transaction. Returns `false` if it is not set.
    @inlinable @discardableResult
    public func update<T: Identifiable & Sendable>(
      named key: AliasKey<T>, modifiedAt: Stamp? = nil, _ body: (inout T) -> Void
    ) -> Bool {
      checkOpen()
      return map.update(named: key, modifiedAt: modifiedAt, body)
    }

    /// Updates the entities of a collection alias, in the transaction. Returns `false` if it
    /// is not set.
    @inlinable @discardableResult
    public func update<T: Identifiable & Sendable>(
      named key: AliasKey<[T]>, modifiedAt: Stamp? = nil, _ body: (inout [T]) -> Void
    ) -> Bool {
      checkOpen()
      return map.update(named: key, modifiedAt: modifiedAt, body)
    }

    /// Removes an entity in the transaction.
    @inlinable
    public func remove<T: Identifiable & Sendable>(_ type: T.Type, id: T.ID) {
      checkOpen()
      map.remove(type, id: id)
    }

    /// Removes an entity in the transaction, leaving a tombstone stamped `tombstone` whether
    /// or not the map has it; see ``IdentityMap/remove(_:id:tombstone:)``. A rollback takes
    /// the tombstone back.
    @inlinable
    public func remove<T: Identifiable & Sendable>(_ type: T.Type, id: T.ID, tombstone: Stamp) {
      checkOpen()
      map.remove(type, id: id, tombstone: tombstone)
    }

    /// Every stored entity of `type` for which `filter` is true, in `sortedBy` order, as the
    /// transaction sees it so far: its own writes included.
    ///
    /// ```swift
    /// map.transaction { transaction in
    ///   for event in sync.timeline { transaction.store(event) }
    ///   let unread = transaction.entities(Message.self, filter: { !$0.isRead }).count
    ///   transaction.store(Room(id: sync.roomID, unread: unread))
    /// }
    /// ```
    ///
    /// A snapshot, not a live handle: later writes of the body do not change it. A live
    /// query's `value` read in the body still shows the state before the transaction, since
    /// nothing uncommitted is delivered; this is the call for "as this write will leave it".
    /// For a persisted type (see ``IdentityMap/persist(_:as:)``), the store's entities are
    /// included, as a query's are. With `sortedBy` nil, and among entities it ranks equal,
    /// entities come in the order they were first stored.
    ///
    /// `filter` and `sortedBy` run under the map's lock, as a query's do: they may read the
    /// map, and writing from them stops the program.
    ///
    /// - Complexity: O(*n* + *m* log *m*) for *n* entities of `type` and *m* results; for a
    ///   persisted type, O(its records) decodes of those not in memory.
    @inlinable
    public func entities<T: Identifiable & Sendable>(
      _ type: T.Type, filter: (@Sendable (T) -> Bool)? = nil,
      sortedBy areInIncreasingOrder: (@Sendable (T, T) -> Bool)? = nil
    ) -> [T] {
      checkOpen()
      return map._core.write {
        map._core.entities(T.self, filter: filter, sortedBy: areInIncreasingOrder)
      }
    }

    /// Removes an alias in the transaction.
    @inlinable
    public func removeAlias<T>(named key: AliasKey<T>) {
      checkOpen()
      map.removeAlias(named: key)
    }
  }
}
