/// An identity map: one freshest value per entity, shared by every holder, thread-safe.
///
/// Store what you decode; every handle, subscription and aggregate holding an entity sees its
/// newest value and is told when it changes. An entity stays in the map while something holds
/// it (a handle, a subscription, an alias, or a live aggregate containing it) and leaves by
/// itself when the last holder goes.
///
/// ```swift
/// let map = IdentityMap()
///
/// let author = map.store(Author(id: 1, name: "Ursula"))      // a handle: keeps it alive
/// map.find(Author.self, id: 1)?.value.name                     // "Ursula"
///
/// let subscription = author.observe { print("now:", $0.name) }
/// map.store(Author(id: 1, name: "Ursula K. Le Guin"), modifiedAt: 2)  // prints "now: …"
/// map.store(Author(id: 1, name: "U."), modifiedAt: 1)         // stale: discarded, nobody told
/// ```
///
/// Every method may be called from any thread. Writes are serialized by one lock, which finds
/// and handles' reads share: readers do not wait for each other. Callbacks run after the lock
/// is released, on the writing thread, before the write returns.
public final class IdentityMap: Sendable {
  @usableFromInline let _core: _MapCore
  /// The live resources, and the clock they run on; see `resource(_:policy:staleAfter:keepFor:retry:load:)`.
  let _resources: _ResourceRegistry

  /// Creates an empty map.
  ///
  /// - Parameters:
  ///   - logger: Receives what the map does: stores, stale writes it refused, removals,
  ///     releases, alias changes. ``PrintLogger`` prints them.
  ///   - tombstones: How many removed entities' stamps the map remembers, to refuse a replayed
  ///     write of them; see ``TombstonePolicy``.
  ///   - clock: The time resources use: their answers' ages, retries' waits, `keepFor`; see
  ///     ``ResourceClock``.
  public init(
    logger: (any IdentityMapLogger)? = nil, tombstones: TombstonePolicy = .default,
    clock: any ResourceClock = .system
  ) {
    _core = _MapCore(logger: logger, tombstones: tombstones)
    _resources = _ResourceRegistry(clock: clock)
  }

  /// Creates an empty map that keeps entities nobody holds any more, as `retention` says.
  ///
  /// ```swift
  /// let map = IdentityMap(retention: .keepReleased(10_000))
  /// _ = map.store(issue)                      // nothing holds it...
  /// map.find(Issue.self, id: issue.id)        // ...but it is still there
  /// ```
  ///
  /// - Parameters:
  ///   - logger: Receives what the map does; see ``init(logger:tombstones:clock:)``.
  ///   - retention: How many released entities stay findable; see ``RetentionPolicy``.
  ///   - tombstones: How many removed entities' stamps the map remembers; see
  ///     ``TombstonePolicy``.
  ///   - clock: The time resources use; see ``ResourceClock``.
  public convenience init(
    logger: (any IdentityMapLogger)? = nil, retention: RetentionPolicy,
    tombstones: TombstonePolicy = .default, clock: any ResourceClock = .system
  ) {
    self.init(
      core: _MapCore(logger: logger, retention: retention, tombstones: tombstones), clock: clock)
  }

  init(core: _MapCore, clock: any ResourceClock) {
    _core = core
    _resources = _ResourceRegistry(clock: clock)
  }

  // MARK: Storing

  /// Inserts or replaces an entity and returns a handle on it.
  ///
  /// Every holder of the entity (handles, subscriptions, aggregates containing it) sees the new
  /// value. A write stamped no newer than the stored stamp is discarded, and the handle shows
  /// the stored value; see ``Stamp``.
  ///
  /// An ``Aggregate`` is stored with every entity nested in it, each on its own, with the same
  /// stamp (or its own, when it is ``Stamped``): one whose stored stamp is newer keeps its value,
  /// and the aggregate shows that value.
  ///
  /// The entity stays in the map while the handle, or something else, holds it:
  /// `_ = map.store(x)` keeps nothing.
  ///
  /// ```swift
  /// let author = map.store(decoded, modifiedAt: response.updatedAt)
  /// ```
  ///
  /// - Complexity: O(1) for an entity without nested entities, plus O(parents touched) when
  ///   the value changed; O(nested entities + parents touched) for an aggregate.
  @inlinable @inline(__always) @discardableResult
  public func store<T: Identifiable & Sendable>(_ entity: T, modifiedAt: Stamp? = nil)
    -> EntityObserver<T>
  {
    _observer(
      _core.writeReading(
        reading: { prefetch in _core.want(entity, in: prefetch) },
        write: {
          _core.store(entity, stamp: modifiedAt, held: true) { _core.holdForHandle($0) }
        }))
  }

  /// Stores each entity and returns one handle following all of them.
  ///
  /// The handle's value is the array in the order given, each element showing its entity's
  /// current value; it changes when any of them changes, and drops an element that is removed.
  /// When an id appears more than once, the last occurrence is the one stored, and every
  /// position holding that id shows it. Aggregates are stored with their nested entities, as
  /// by `store(_:modifiedAt:)`.
  ///
  /// - Complexity: O(*n*) for *n* entities, plus their parents touched.
  @inlinable @discardableResult
  public func store<T: Identifiable & Sendable>(_ entities: [T], modifiedAt: Stamp? = nil)
    -> EntityObserver<[T]>
  {
    _observer(
      _core.writeReading(
        reading: { prefetch in
          _core.want(entities, in: prefetch)
        },
        write: {
          _core.holdForHandle(_core.storeList(entities, stamp: modifiedAt))
        }))
  }

  // MARK: Finding

  /// A handle on the stored entity of type `type` with id `id`, or `nil` if there is none.
  ///
  /// The handle holds the entity alive from now on. Finds on different threads do not wait
  /// for each other, only for writes.
  ///
  /// - Complexity: O(1).
  /// When `T` is persisted (see ``persist(_:as:)``) and the entity is not in memory, it is read
  /// from the store.
  @inlinable
  public func find<T: Identifiable & Sendable>(_ type: T.Type, id: T.ID) -> EntityObserver<T>? {
    switch _core.holdForHandleShared(T.self, id: id) {
    case .held(let held):
      return _observer(held)
    case .absent:
      break
    case .exclusive:
      if let held = _core.read({
        _core.withTable(T.self) { table in table.withNode(id) { _core.holdForHandle($0) } }
      }) {
        return _observer(held)
      }
    }
    return _core.hasStore ? _core.findLoading(T.self, id: id).map(_observer) : nil
  }

  // MARK: Updating

  /// Reads, modifies and writes back a stored entity, atomically.
  ///
  /// `body` runs while the map is locked, so keep it short and pure. It may call the map (its
  /// writes join this one), but it must not wait for another thread that uses the map. When
  /// `T` is an ``Aggregate``, the result is decomposed again, as by `store`.
  ///
  /// ```swift
  /// map.update(Author.self, id: 1, modifiedAt: event.stamp) { $0.name = event.name }
  /// ```
  ///
  /// - Returns: `false` if no such entity is stored (nothing is created), `true` otherwise,
  ///   including when the stamp is stale (then `body` does not run).
  /// - Note: If `body` changes the `id`, the result is stored as the entity with the new id,
  ///   and the one with the old id is left as it was.
  @inlinable @discardableResult
  public func update<T: Identifiable & Sendable>(
    _ type: T.Type, id: T.ID, modifiedAt: Stamp? = nil, _ body: (inout T) -> Void
  ) -> Bool {
    _core.writeReading(
      reading: { prefetch in _core.want(T.self, id: id, in: prefetch) },
      write: {
        _core.update(T.self, id: id, stamp: modifiedAt, body)
      })
  }

  // MARK: Removing

  /// Removes an entity from the map.
  ///
  /// Its handles report `isRemoved` and keep its last value; its streams finish. Aggregates
  /// drop it from collections and set optional references to `nil`; an aggregate holding it in
  /// a non-optional property is removed too, and so on up. Batch handles drop it; an alias
  /// holding it becomes empty. Removing an absent entity does nothing.
  ///
  /// - Complexity: O(the entity's links + ancestors touched).
  @inlinable
  public func remove<T: Identifiable & Sendable>(_ type: T.Type, id: T.ID) {
    _core.writeReading(
      reading: { prefetch in _core.want(T.self, id: id, in: prefetch) },
      write: {
        _core.remove(T.self, id: id)
      })
  }

  /// Removes an entity, if the map has it, and leaves a tombstone stamped `tombstone` whether
  /// or not it has: a later write of the entity stamped no newer is refused.
  ///
  /// This is the removal for a stream's `delete` of an entity the client may never have seen,
  /// or has already released: a page fetched before the delete and arriving after it, stamped
  /// older, does not bring it back.
  ///
  /// ```swift
  /// case .delete(let id, let at):
  ///   map.remove(Status.self, id: id, tombstone: at)
  /// ```
  ///
  /// The tombstone's stamp is the larger of `tombstone` and the stamp the entity had (or the
  /// tombstone it already had). `.infinity` refuses every stamped write of the id, for servers
  /// that never reuse ids; an unstamped write still brings the entity back, as after any
  /// removal. Otherwise it removes as ``remove(_:id:)`` does. The tombstone is persisted for a
  /// persisted type, undone by the rollback of a transaction, and kept within the map's
  /// ``TombstonePolicy``: with `.none` it is not kept, and a NaN `tombstone` is no stamp.
  ///
  /// - Complexity: O(the entity's links + ancestors touched).
  @inlinable
  public func remove<T: Identifiable & Sendable>(_ type: T.Type, id: T.ID, tombstone: Stamp) {
    _core.writeReading(
      reading: { prefetch in _core.want(T.self, id: id, in: prefetch) },
      write: {
        _core.remove(T.self, id: id, tombstone: tombstone)
      })
  }

  /// The aggregates that nest the entity `id` of `type` now, each once, in no particular order:
  /// who holds it, as the removal rules see it.
  ///
  /// ```swift
  /// // Before deleting a status: the boosts and notifications that show it.
  /// let holders = map.parents(of: Status.self, id: deleted.id)
  /// ```
  ///
  /// Batch handles, aliases and queries are not parents; ``holders(of:id:)`` counts those too.
  /// For persisted types, aggregates only in the store count as well: they are read, and
  /// released again unless something holds them.
  ///
  /// - Returns: The parents; empty when the entity is not stored.
  /// - Complexity: O(parents); with persisted aggregate types, O(records of those types) to read
  ///   the ones not in memory.
  public func parents<T: Identifiable & Sendable>(of type: T.Type, id: T.ID)
    -> [EntityReference]
  {
    _core.parentsReading(of: T.self, id: id)
  }

  /// Removes every entity, as `remove` does one by one, and every alias.
  ///
  /// - Complexity: O(entities + links).
  public func removeAll() {
    _core.write { _core.removeAll() }
  }

  // MARK: Transactions

  /// Applies every write made in `body` atomically: other threads see all of them or none, and
  /// each subscriber is told once, after the commit, with its final value.
  ///
  /// ```swift
  /// map.transaction { transaction in
  ///   for event in burst {
  ///     transaction.update(Author.self, id: event.authorID) { $0.name = event.name }
  ///   }
  /// }
  /// ```
  ///
  /// If `body` throws, every write it made is rolled back, nobody is told anything, and the
  /// error is rethrown. Handles it obtained on entities that the rollback takes out report
  /// `isRemoved`.
  ///
  /// `body` runs while the map is locked: it may call the map directly too (those writes join
  /// the transaction), but it must not wait for another thread that uses the map.
  /// Transactions nest: an inner one that throws rolls back only its own writes.
  ///
  /// The result is discardable, so that a one-line body such as
  /// `map.transaction { $0.update(Author.self, id: 1) { $0.name = "A" } }` needs no `_ =`.
  @discardableResult
  public func transaction<R>(_ body: (Transaction) throws -> R) rethrows -> R {
    try _core.write {
      let savepoint = _core.beginTransaction()
      do {
        let result = try _core.runUserCode {
          try body(Transaction(map: self, serial: savepoint.serial))
        }
        _core.commitTransaction(savepoint)
        return result
      } catch {
        _core.rollBack(to: savepoint)
        throw error
      }
    }
  }

  // MARK: Diagnostics

  /// The number of live entities, all types together. Alias slots and batch handles are not
  /// entities and are not counted.
  public var count: Int {
    _core.readOnly { _core.liveCount }
  }
}

extension IdentityMap {
  /// The public handle on a node whose hold was taken under the lock: the hold keeps the node,
  /// and so the map (rule 6 of `_Lifetime.swift`).
  @inlinable
  func _observer<Value>(_ held: Unmanaged<_Node<Value>>) -> EntityObserver<Value> {
    EntityObserver(_Handle(held: held))
  }
}
