extension IdentityMap {
  /// Creates an empty map that keeps the types you name with ``persist(_:as:)`` in `persistence`,
  /// so that they survive release and restarts.
  ///
  /// ```swift
  /// let map = IdentityMap(persistence: try SQLiteStore(path: cacheURL.path))
  /// map.persist(Issue.self)
  /// map.persist(User.self)
  /// ```
  ///
  /// See <doc:PersistenceAndOffline>.
  ///
  /// - Parameters:
  ///   - logger: Receives what the map does, and the store's failures
  ///     (``IdentityMapEvent/persistenceFailed(_:)``).
  ///   - retention: How many released entities stay in memory; see ``RetentionPolicy``.
  ///   - persistence: The store. Give each store to one map.
  ///   - tombstones: How many removed entities' stamps the map remembers; see
  ///     ``TombstonePolicy``. The store keeps those of persisted types.
  ///   - clock: The time resources use; see ``ResourceClock``. With the system's clock, a
  ///     persisted answer's age survives a restart.
  public convenience init(
    logger: (any IdentityMapLogger)? = nil, retention: RetentionPolicy = .none,
    persistence: any PersistentStore, tombstones: TombstonePolicy = .default,
    clock: any ResourceClock = .system
  ) {
    self.init(
      core: _MapCore(
        logger: logger, retention: retention, persistence: persistence, tombstones: tombstones),
      clock: clock)
  }

  /// Persists `type` under the name `String(describing: type)`, such as `Issue`.
  ///
  /// From now on every committed write of a `T` (insert, update, remove) reaches the store, and
  /// an entity of `T` that is not in memory counts as stored: `find` reads it from the store,
  /// and `store`, `update` and `remove` act on it as if it were in memory. Aliases naming
  /// entities of `T` are persisted too. See ``persist(_:as:)`` to choose the name.
  ///
  /// - Precondition: The map was made with a store.
  @inlinable
  public func persist<T: Identifiable & Codable & Sendable>(_ type: T.Type) where T.ID: Codable {
    persist(type, as: String(describing: type))
  }

  /// Persists `type` under `kind`, the name of its rows in the store.
  ///
  /// The name is what ties the rows to the type across launches: keep it when you rename the
  /// Swift type, and give two types with the same short name (`Search.Result` and
  /// `Feed.Result`) different names.
  ///
  /// ```swift
  /// map.persist(GitHubIssue.self, as: "Issue")  // renamed from Issue in 2.0
  /// ```
  ///
  /// Persisting a type again under the same name does nothing.
  ///
  /// - Precondition: The map was made with a store; `kind` is not empty, does not start with
  ///   `@`, and names no other type; `type` is not persisted under another name.
  @inlinable
  public func persist<T: Identifiable & Codable & Sendable>(_ type: T.Type, as kind: String)
  where T.ID: Codable {
    _core.adoptStoredTombstones(of: _core.write { _core.persist(T.self, kind: kind) })
    _core.startSharing()
  }

  /// Applies what other processes committed to the shared store since this map last looked,
  /// as writes in this map (stamps, merges, tombstones and removal rules apply; handles,
  /// queries, aliases and resources are told once per change). The map also does this by
  /// itself when the file changes; call it when the app comes to the foreground. A no-op for
  /// a store that is not shared.
  ///
  /// ```swift
  /// // SwiftUI: .onChange(of: scenePhase) { if $1 == .active { try? map.syncExternalChanges() } }
  /// try map.syncExternalChanges()
  /// ```
  ///
  /// When it returns, everything other processes committed to the store before the call is
  /// applied, each commit as one write of this map, in the order the store took them; callbacks
  /// of those writes have run, on the calling thread. Those writes are never written back to
  /// the store. An entity of another process's commit that this map does not hold is applied
  /// only when a live query or collector of its type could show it; otherwise the next read of
  /// it finds the store's value. A change this map made that the store has not taken yet wins
  /// where the store will also take it last (unstamped, or with a newer stamp). When the store
  /// could not say everything since the last sync (this process did not read for long, and the
  /// store trimmed its log), every entity and alias the map holds is reloaded from the store
  /// instead, as ``restore(from:)`` does, and the logger is told.
  ///
  /// Like ``flush()``, call it outside the map's writes. Called from a callback of a sync, it
  /// returns at once: the sync under way goes on after the callback. See "Sharing the store
  /// with extensions" in <doc:PersistenceAndOffline>.
  ///
  /// - Throws: What the store throws reading its file (for `SQLiteStore`, `.missingFile` when
  ///   the file was deleted under the process). Nothing is applied then.
  public func syncExternalChanges() throws {
    try _core.syncExternalChanges()
  }

  /// Waits until every write committed so far has reached the store, then throws the first
  /// error the store reported since the last flush, if any.
  ///
  /// Writes reach the store on a background writer, in commit order, so a write never waits
  /// for the disk; call `flush()` where you need them on disk, such as when the app moves to
  /// the background. A failed write is not lost: it stays readable through the map, is logged
  /// (``IdentityMapEvent/persistenceFailed(_:)``), and is tried again by the next flush.
  ///
  /// Call it outside the map's writes: from an `update` or transaction body, or from code the
  /// map calls while it writes, it would wait for the writer while holding what the writer
  /// needs, so it stops the program with a message instead. Without a store, it does nothing.
  public func flush() throws {
    try _core.flush()
  }

  /// Writes a snapshot of everything the map has persisted to the file at `path`, atomically:
  /// a save slot, which a crash while saving never corrupts.
  ///
  /// ```swift
  /// try map.save(to: slots.appendingPathComponent("slot-1.sqlite").path)
  /// ```
  ///
  /// It waits for every write committed before the call to reach the store, as ``flush()``
  /// does, then has the store write the snapshot (`SQLiteStore.save(to:)`) before it applies
  /// any later write: the snapshot holds exactly what was committed when it was called. Like
  /// `flush()`, call it outside the map's writes. See "Save slots" in
  /// <doc:PersistenceAndOffline>.
  ///
  /// - Throws: What ``flush()`` throws, then what the store throws: for `SQLiteStore`, a path
  ///   that is its own file, or a directory it cannot write to. The file at `path` is then
  ///   untouched.
  /// - Precondition: The map was made with a store.
  public func save(to path: String) throws {
    try _core.save(to: path)
  }

  /// Replaces everything the map has persisted with the snapshot at `path`, made by
  /// ``save(to:)``: loading a save slot.
  ///
  /// ```swift
  /// try map.restore(from: slots.appendingPathComponent("slot-1.sqlite").path)
  /// ```
  ///
  /// It is one write, as if ``reset()`` were followed by loading the snapshot: every entity of
  /// a persisted type that memory holds takes the snapshot's value and stamp, or is removed if
  /// the snapshot has none, whatever the stamps say; aliases of persisted types take the
  /// snapshot's value or are emptied; live queries of persisted types gain the snapshot's
  /// matching entities; tombstones of persisted types are the snapshot's. Each handle, query
  /// and alias is told once, after the write. Entities of types that are not persisted are
  /// untouched (a persisted aggregate restored over one shows it as it is in memory). Every
  /// write committed before the call reaches the store first, and is then replaced. Every
  /// resource is then invalidated, as by ``invalidateResources(prefix:)``: its answer, whose
  /// entities took the snapshot's values, is fetched again at its next `load()`.
  ///
  /// Like ``flush()``, call it outside the map's writes. See "Save slots" in
  /// <doc:PersistenceAndOffline>.
  ///
  /// - Throws: Changing nothing, what the store throws when `path` is not a snapshot it can
  ///   read (for `SQLiteStore`: missing, not SQLite, not Concord's, damaged, of a newer schema
  ///   version, or the store's own file), or what ``flush()`` throws.
  /// - Complexity: O(the snapshot's size) to copy it, plus O(entities of persisted types in
  ///   memory) decodes, plus, for each persisted type with a live query, O(its rows).
  /// - Precondition: The map was made with a store.
  public func restore(from path: String) throws {
    try _core.restore(from: path)
    invalidateResources()
  }

  /// Removes every entity and alias, from memory and from the store.
  ///
  /// Memory is emptied at once, as ``removeAll()`` does (open handles report `isRemoved`), and
  /// the store is emptied in one transaction after every write committed before. `reset()`
  /// waits for it, and throws if the store failed; the wipe is then tried again at the next
  /// ``flush()``, and meanwhile the map reads nothing from the store. Like `flush()`, call it
  /// outside the map's writes.
  public func reset() throws {
    _core.checkOutsideWrites("reset()")
    _core.write { _core.reset() }
    try flush()
  }
}

extension IdentityMap {
  /// Whether writes check for missing entities even when their prefetch already found them all
  /// in memory (see `_Persistence.foresees`); off by default. For the tests that run the same
  /// steps both ways: the outcomes must not differ.
  var _rechecksForeseenEntities: Bool {
    get { _core.read { _core.persistence?.rechecksForeseen ?? false } }
    set { _core.write { _core.persistence?.rechecksForeseen = newValue } }
  }
}
