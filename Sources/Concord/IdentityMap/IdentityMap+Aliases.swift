extension IdentityMap {
  // MARK: Aliases

  /// Stores an entity and makes it the value of an alias.
  ///
  /// The alias holds the entity alive until the alias is removed or set to another entity,
  /// even when nobody observes it. The entity is stored as by `store(_:modifiedAt:)`; the
  /// alias slot has a stamp of its own, so a stale write neither replaces the entity nor
  /// moves the alias.
  ///
  /// ```swift
  /// map.store(me, named: .currentUser)
  /// ```
  ///
  /// - Returns: A handle on the alias: it follows whatever entity the alias names later.
  @inlinable @discardableResult
  public func store<T: Identifiable & Sendable>(
    _ entity: T, named key: AliasKey<T>, modifiedAt: Stamp? = nil
  ) -> EntityObserver<T?> {
    _observer(
      _core.writeReading(
        reading: { prefetch in
          _core.want(alias: key._id, of: T.self, in: prefetch)
          _core.want(entity, in: prefetch)
        },
        write: {
          _core.prepareAlias(key._id, T.self, list: false)
          return _core.holdForHandle(
            _core.setAlias(
              key._id, to: entity, witness: _core.aliasWitness(of: T.self),
              stamp: modifiedAt))
        }))
  }

  /// Stores entities and makes them the value of a collection alias.
  ///
  /// The alias holds exactly these entities: ones it held before and no longer does are
  /// released if nothing else holds them.
  ///
  /// - Returns: A handle on the alias.
  @inlinable @discardableResult
  public func store<T: Identifiable & Sendable>(
    _ entities: [T], named key: AliasKey<[T]>, modifiedAt: Stamp? = nil
  ) -> EntityObserver<[T]?> {
    _observer(
      _core.writeReading(
        reading: { prefetch in
          _core.want(alias: key._id, of: T.self, in: prefetch)
          _core.want(entities, in: prefetch)
        },
        write: {
          _core.prepareAlias(key._id, T.self, list: true)
          return _core.holdForHandle(
            _core.setAlias(
              key._id, to: entities,
              witness: _core.collectionAliasWitness(of: T.self),
              stamp: modifiedAt))
        }))
  }

  /// A handle on an alias, set or not.
  ///
  /// Its value is `nil` until the alias is set, and it is notified when it is set later.
  ///
  /// ```swift
  /// let user = map.find(named: .currentUser)
  /// let subscription = user.observe { print("signed in as", $0?.name ?? "nobody") }
  /// ```
  @inlinable
  public func find<T: Identifiable & Sendable>(named key: AliasKey<T>) -> EntityObserver<T?> {
    if _core.hasStore {
      return _observer(
        _core.writeReading(
          reading: { prefetch in _core.want(alias: key._id, of: T.self, in: prefetch) },
          write: {
            _core.prepareAlias(key._id, T.self, list: false)
            return _core.holdForHandle(_core.aliasSlot(key._id, of: T.self))
          }))
    }
    return _observer(
      _core.read { _core.holdForHandle(_core.aliasSlot(key._id, of: T.self)) })
  }

  /// A handle on a collection alias, set or not. Its value is `nil` until the alias is set.
  @inlinable
  public func find<T: Identifiable & Sendable>(named key: AliasKey<[T]>) -> EntityObserver<[T]?> {
    if _core.hasStore {
      return _observer(
        _core.writeReading(
          reading: { prefetch in _core.want(alias: key._id, of: T.self, in: prefetch) },
          write: {
            _core.prepareAlias(key._id, T.self, list: true)
            return _core.holdForHandle(_core.collectionAliasSlot(key._id, of: T.self))
          }))
    }
    return _observer(
      _core.read {
        _core.holdForHandle(_core.collectionAliasSlot(key._id, of: T.self))
      })
  }

  /// Reads, modifies and writes back the entity an alias names, atomically.
  ///
  /// The result is stored as by `store(_:named:modifiedAt:)`, so changing its `id` points the
  /// alias at that entity. `body` runs while the map is locked, as for
  /// ``update(_:id:modifiedAt:_:)``.
  ///
  /// - Returns: `false` if the alias is not set, `true` otherwise (also when the stamp is stale;
  ///   then `body` does not run).
  @inlinable @discardableResult
  public func update<T: Identifiable & Sendable>(
    named key: AliasKey<T>, modifiedAt: Stamp? = nil, _ body: (inout T) -> Void
  ) -> Bool {
    _core.writeReading(
      reading: { prefetch in _core.want(alias: key._id, of: T.self, in: prefetch) },
      write: {
        _core.prepareAlias(key._id, T.self, list: false)
        return _core.updateAlias(key._id, stamp: modifiedAt, body)
      })
  }

  /// Reads, modifies and writes back the entities of a collection alias, atomically.
  ///
  /// Elements added are stored; elements no longer in the array are released if nothing else
  /// holds them.
  ///
  /// - Returns: `false` if the alias is not set, `true` otherwise.
  @inlinable @discardableResult
  public func update<T: Identifiable & Sendable>(
    named key: AliasKey<[T]>, modifiedAt: Stamp? = nil, _ body: (inout [T]) -> Void
  ) -> Bool {
    _core.writeReading(
      reading: { prefetch in _core.want(alias: key._id, of: T.self, in: prefetch) },
      write: {
        _core.prepareAlias(key._id, T.self, list: true)
        return _core.updateAlias(key._id, stamp: modifiedAt, body)
      })
  }

  /// Empties an alias: its handles see `nil`, and what it held is released if nothing else
  /// holds it. The alias's stamp is forgotten too. Removing an alias that is not set does
  /// nothing.
  @inlinable
  public func removeAlias<T>(named key: AliasKey<T>) {
    _core.write { _core.removeAlias(key._id) }
  }
}
