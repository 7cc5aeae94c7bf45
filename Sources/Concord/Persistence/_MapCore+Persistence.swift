// Persistence in the engine.
//
// Writing. A persisted type counts as a consumer of the change log (`_Witness.hasConsumers`),
// so every write of it is journaled or published directly, and each committed change reaches the
// type's `_Persisted`, which records it as a row (`_Row`) for the store. Releases are not
// changes: a released entity stays in the store.
//
// Loading. An entity of a persisted type that is not in memory counts as stored: before a write
// or a `find` reaches for it, `loadIfMissing` reads it (from the changes not yet applied, else
// from the store) and admits it into memory. Loading is not a write: the nodes it creates are
// recorded in the journal as present before the write with the value loaded, so the change log
// says nothing of them unless the write then changes them, and a rollback keeps them.
//
// A write of an aggregate first walks its value (`_Accessor.probe`) for the nested
// entities of persisted types missing from memory, and loads them, so that the pass compares
// each occurrence with the stored entity (stamps, merging) as it would in memory.

extension _MapCore {
  /// Starts persisting `T` under `kind`. Returns the persisted type when the map keeps
  /// tombstones, for `adoptStoredTombstones(of:)`; `nil` when it keeps none, or `T` was
  /// persisted already.
  @inlinable
  func persist<T: Identifiable & Codable & Sendable>(_: T.Type, kind: String) -> _Persisted<T>?
  where T.ID: Codable {
    guard let persistence = checkPersistable(T.self, kind: kind) else { return nil }
    let table = registry.table(for: T.self)
    let persisted = _Persisted<T>(
      kind: kind, persistence: persistence, ops: _PersistedOps(store: persistence.store))
    table.persisted = persisted
    persistence.register(persisted)
    audience.consumersChanged(by: 1)
    audience.persistedTypes += 1
    return tombstones.limit > 0 ? persisted : nil
  }

  /// Keeps the tombstones the store has of `persisted`'s type, as far as the limit goes (see
  /// `_Table.adoptStoredTombstones`), read outside the lock unless the calling thread is in
  /// one of the map's frames.
  @usableFromInline
  func adoptStoredTombstones<T: Identifiable & Sendable>(of persisted: _Persisted<T>?) {
    guard let persisted else { return }
    let prefetch = prefetch { prefetch, persistence in
      prefetch.of(persisted).wantsTombstones = true
    }
    admitting(prefetch, ending: true) {
      withTable(T.self) { table in
        table.adoptStoredTombstones(persisted.storedTombstones(self), self)
      }
    }
  }

  /// Checks that `T` may be persisted under `kind`, and records it; `nil` when it already is.
  @usableFromInline
  func checkPersistable<T>(_: T.Type, kind: String) -> _Persistence? {
    guard let persistence else {
      preconditionFailure(
        "Concord: persist(\(T.self).self) on a map made without a store; make it with "
          + "IdentityMap(persistence:)")
    }
    let type = ObjectIdentifier(T.self)
    if let named = persistence.kinds[type] {
      precondition(
        named == kind,
        "Concord: \(T.self) is already persisted as \"\(named)\", not \"\(kind)\"")
      return nil
    }
    precondition(
      persistence.kindOwners[kind] == nil && !kind.isEmpty && !kind.hasPrefix("@"),
      "Concord: the store's kind \"\(kind)\" is taken or invalid; name \(T.self) with persist(_:as:)"
    )
    persistence.kinds[type] = kind
    persistence.kindOwners[kind] = type
    return persistence
  }

  /// Brings the entity `id` of `T` into memory from the store, if `T` is persisted, the entity
  /// is not in memory and the store has it.
  @inlinable
  func loadIfMissing<T: Identifiable & Sendable>(_: T.Type, id: T.ID) {
    withTable(T.self) { table in
      guard table.persisted != nil, table.node(id) == nil else { return }
      load(id, into: table)
    }
  }

  @inlinable
  func load<T: Identifiable & Sendable>(
    _ id: T.ID, into table: _Table<T>, listed: PersistentRecord? = nil
  ) {
    guard let persisted = table.persisted, let persistence else { return }
    // NB: read once per write: a failed read is not tried again until the next.
    guard persisted.unreadable.isEmpty || !persisted.unreadable.contains(id) else { return }
    // NB: only an aggregate's load can reach itself again (through the entities it nests, in
    // a cycle); a plain entity's loads nothing else, and is never in `loading`.
    let nests = !table.schema.isLeaf
    let key = nests ? _RowKey(kind: persisted.kind, id: AnyHashable(id)) : nil
    if let key, persistence.loading.contains(key) { return }
    let value: T
    let stamp: Stamp?
    switch persisted.read(id, self, listed: listed) {
    case .saved(let saved, let savedStamp):
      (value, stamp) = (saved, savedStamp)
      // NB: removed here, written since by another process sharing the store: the record is
      // newer than the tombstone, which goes, as a sync would have taken it away.
      if table.tombstone(of: id) != nil { table.unentomb(id, self) }
    case .tombstone(let tomb):
      // NB: the store's tombstone, kept in memory where writes look for it.
      if table.tombstone(of: id) == nil { table.entomb(id, stamp: tomb, self) }
      return
    case .failed:
      persisted.markUnreadable(id)
      return
    case .deleted, .unknown: return
    }
    guard let key else { return admitLoaded(value, stamp: stamp, in: table) }
    persistence.loading.insert(key)
    defer { persistence.loading.remove(key) }
    admitLoaded(value, stamp: stamp, in: table)
  }

  /// Brings every entity of `T` the store has, and memory does not, into memory: what a live
  /// query of a persisted type starts from. Those nobody then holds are released when the
  /// write ends, as loaded entities are. Tombstones stay in the store.
  ///
  /// - Complexity: O(records of `T`) decodes, plus the entities they nest that are not in
  ///   memory.
  @usableFromInline
  func loadAll<T: Identifiable & Sendable>(into table: _Table<T>) {
    guard let persisted = table.persisted else { return }
    var listed: Set<T.ID> = []
    for (id, record) in persisted.listed(self) where !record.isTombstone {
      listed.insert(id)
      if table.node(id) == nil { load(id, into: table, listed: record) }
    }
    for id in persisted.unappliedIDs() where !listed.contains(id) && table.node(id) == nil {
      load(id, into: table)
    }
  }

  /// Brings `value`, loaded from the store with `stamp`, into memory, without writing: see the
  /// top of this file. Its nested entities of persisted types are loaded first; nested
  /// entities in memory keep their values, and the aggregate shows those.
  @usableFromInline
  func admitLoaded<T: Identifiable & Sendable>(_ value: T, stamp: Stamp?, in table: _Table<T>) {
    let schema = table.schema
    var value = value
    if !schema.isLeaf {
      loadMissing(in: value, schema: schema)
      persistence?.metUnreadable = false
      let kept = prune(&value, schema: schema)
      // NB: an aggregate nesting an entity the store could not read is not read either:
      // shown without it, then written, it would lose it; or, requiring it, be removed.
      if let persistence, persistence.metUnreadable {
        persistence.metUnreadable = false
        table.persisted?.markUnreadable(value.id)
        return
      }
      guard kept else {
        // NB: it requires an entity that was removed while it was not in memory: the removal
        // takes it too, as it would have in memory, tombstone included.
        if let stamp { table.entomb(value.id, stamp: stamp, self) }
        if let persisted = table.persisted {
          let tombstone = table.tombstone(of: value.id)
          persistence?.current.append(_RowRemoval(persisted, id: value.id, tombstone: tombstone))
        }
        return
      }
    }
    // NB: a cycle of persisted aggregates may have brought it in, through a nested copy.
    guard table.node(value.id) == nil else { return }
    // NB: what the log and the layers would hear of the pass is not a write: dropped.
    let events = outbox.events.count
    let written = outbox.written.count
    let node = table.withNode(for: value) { node, _ in node }
    didCreate(node, held: false, journaled: false)
    journal.noteLoaded(node)
    if let stamp { node.s.stamp = stamp }
    if !schema.isLeaf {
      pass.mark(node, .fresh)
      pass.run(into: node, payload: value, stamp: nil, call: nil, nesting: .load)
    }
    journal.recordLoaded()
    outbox.forgetEvents(after: events)
    if outbox.written.count > written { outbox.written.removeSubrange(written...) }
  }

  /// Drops from `value` its nested entities of persisted types that are neither in memory nor
  /// in the store (they were removed while `value` was only in the store), as their removal
  /// would have: from collections, and optional references set to `nil`. Returns `false` when
  /// `value` requires one of them.
  func prune<V>(_ value: inout V, schema: _Schema<V>) -> Bool {
    for accessor in schema.accessors {
      let positions = accessor.missing(value, self)
      guard !positions.isEmpty else { continue }
      guard !accessor.requiresChild, let remove = accessor.remove else { return false }
      remove(positions, &value)
    }
    return true
  }

  /// Whether the write's prefetch found every entity its value nests in memory, in this
  /// section, or, in a write admitting it, everything but what its walk found missing, which
  /// this then loads (see `_Persistence.foresees`); true once at most, for the write's first
  /// store.
  @inlinable
  func takeForesight() -> Bool {
    guard let persistence, persistence.foresees else { return false }
    persistence.foresees = false
    if let loads = persistence.foreseenLoads {
      persistence.foreseenLoads = nil
      loads.admitVisited(self)
    }
    return true
  }

  /// Loads the persisted entities nested in `value`, at any depth, that are not in memory.
  ///
  /// - Complexity: O(nested occurrences), plus the loads.
  @inlinable
  func loadMissing<V>(in value: V, schema: _Schema<V>) {
    let missing = _MissingEntities(self)
    missing.visitNested(in: value, schema: schema)
    for load in missing.loads { load(self) }
  }

  /// Whether `child` is of a persisted type and not in memory; see `_Accessor.missing`. One
  /// the store could not read is not missing (it may well exist): it is noted in
  /// `_Persistence.metUnreadable` instead.
  @inlinable
  func isMissing<C: Identifiable & Sendable>(_ child: C) -> Bool {
    withTable(C.self) { table in
      guard table.persisted != nil, table.node(child.id) == nil else { return false }
      guard !table.cannotRead(child.id) else {
        persistence?.metUnreadable = true
        return false
      }
      return true
    }
  }

  // MARK: Read, then admit (see `_Prefetch.swift`)

  /// Reads from the store, with none of the map's locks held, what `seed` asks for (under the
  /// lock), and, level by level, the persisted entities their values nest that memory lacks.
  /// `nil` when the map has no store, or when the calling thread is inside one of the map's
  /// frames (an `update` or transaction body): there, it reads under the lock it holds.
  ///
  /// Every prefetch made is ended by a write admitting it with `ending` (see
  /// `admitting(_:ending:_:)`).
  @usableFromInline
  func prefetch(_ seed: (_Prefetch, _Persistence) -> Void) -> _Prefetch? {
    guard let persistence, !lock.isHeldByCurrentThread else { return nil }
    let prefetch = _Prefetch()
    lock.withLock {
      persistence.beginPrefetch()
      seed(prefetch, persistence)
    }
    completePrefetch(prefetch)
    return prefetch
  }

  /// Reads what `prefetch` asks for, with no lock held, then, level by level, the persisted
  /// entities their values nest that memory lacks (asking the lock, a chunk at a time).
  @usableFromInline
  func completePrefetch(_ prefetch: _Prefetch) {
    while prefetch.hasWanted {
      let nested = _WantedEntities()
      for typed in prefetch.types.values { typed.fetchWanted(nested) }
      for wanted in nested.types.values { wanted.want(into: prefetch, self) }
    }
  }

  /// Runs `body` as a write whose reads of the store are answered from `prefetch` where it
  /// read them, and, with `ending`, ends the prefetch.
  @usableFromInline
  func admitting<R>(_ prefetch: _Prefetch?, ending: Bool, _ body: () -> R) -> R {
    guard let prefetch, let persistence else { return write(body) }
    return write(afterWaitingReaders: true) {
      persistence.prefetched = prefetch
      defer {
        persistence.prefetched = nil
        if ending { persistence.endPrefetch() }
      }
      return body()
    }
  }

  /// Loads every entity of `T` only the store has, as `loadAll(into:)` does, from `prefetch`,
  /// `_Prefetch.chunk` entities to a write, then ends the prefetch; `perChunk` runs in each
  /// write, after its loads and before its end releases what nobody holds.
  func admitWholeKinds(_ prefetch: _Prefetch, perChunk: () -> Void = {}) {
    var more = true
    while more {
      more = admitting(prefetch, ending: false) {
        var left = false
        for typed in prefetch.types.values where typed.admitListed(_Prefetch.chunk, self) {
          left = true
        }
        perChunk()
        return left
      }
    }
    admitting(prefetch, ending: true) {
      for typed in prefetch.types.values { typed.admitRestOfKind(self) }
      perChunk()
    }
  }

  /// Runs `body` as a write, after reading outside the lock what it would read from the store
  /// under it. When the write is the outermost one, outside the map's frames, `needs` asks,
  /// under the lock, for what `body` will read (the write's root and the entities its value
  /// nests, when memory lacks them); if it asks for anything, the write ends at once, having
  /// changed nothing, the store is read with no lock held, and `body` runs in a new write that
  /// admits what was read. What `needs` could not foresee (the entities nested in what an
  /// `update` body returns) is read under the lock, as before.
  ///
  /// NB: the store's path is a function of its own, never inlined (though specialized), so
  /// that a map without a store inlines only the write: the prefetch's code, inlined into
  /// every `store`, made the optimizer keep the write itself out of line.
  @inlinable
  func writeReading<R>(reading needs: (_Prefetch) -> Void, write body: () -> R) -> R {
    guard persistence != nil else { return write(body) }
    return writeReadingTheStore(reading: needs, write: body)
  }

  /// `writeReading(reading:write:)` for a map with a store.
  @inlinable @inline(never)
  func writeReadingTheStore<R>(reading needs: (_Prefetch) -> Void, write body: () -> R) -> R {
    guard let persistence, !lock.isHeldByCurrentThread else { return write(body) }
    var wanted: _Prefetch?
    let result: R? = write {
      if audience.persistedTypes > 0 {
        let prefetch = persistence.takePrefetch()
        persistence.beginPrefetch()
        needs(prefetch)
        guard !prefetch.hasWanted else {
          prefetch.departures = registry.departures
          wanted = prefetch
          return nil
        }
        persistence.endPrefetch()
        // NB: what the prefetch found in memory stays there until `body` runs, in this section.
        persistence.foresees = prefetch.walkedValues && !persistence.rechecksForeseen
        prefetch.walkedValues = false
        persistence.giveBack(prefetch)
        let result = body()
        persistence.foresees = false
        return result
      }
      return body()
    }
    guard let wanted else { return result.unsafelyUnwrapped }
    completePrefetch(wanted)
    return admitting(wanted, ending: true) {
      // NB: when no entity left memory since the walk, what the walk found there still is:
      // the store that takes the foresight loads what the walk found missing, in the walk's
      // order, where its own walk for missing entities would have, and walks no more. A body
      // that takes no foresight checks for itself. Otherwise the body walks again.
      if wanted.walkedValues && !persistence.rechecksForeseen
        && registry.departures == wanted.departures
      {
        persistence.foresees = true
        persistence.foreseenLoads = wanted
      }
      let result = body()
      persistence.foresees = false
      persistence.foreseenLoads = nil
      return result
    }
  }

  /// Asks `prefetch` for `value`'s entity of `T` and the persisted entities it nests, when
  /// memory lacks them: what a write of `value` reads (see `writeReading(reading:write:)`).
  @inlinable
  func want<T: Identifiable & Sendable>(_ value: T, in prefetch: _Prefetch) {
    want(CollectionOfOne(value), in: prefetch)
  }

  /// Asks `prefetch` for the entities of `values` and the persisted entities they nest, when
  /// memory lacks them: what a write of `values` reads. One walk for them all.
  @inlinable
  func want<C: Collection>(_ values: C, in prefetch: _Prefetch)
  where C.Element: Identifiable & Sendable {
    prefetch.walkedValues = true
    withTable(C.Element.self) { table in
      // NB: a plain entity nests nothing: what the walk would do for it, without making the
      // walk's two objects (a persisted write of a plain entity pays for nothing else here).
      guard !table.schema.isLeaf else {
        guard let persisted = table.persisted else { return }
        for value in values where table.node(value.id) == nil {
          prefetch.want(visited: value.id, of: persisted)
        }
        return
      }
      let missing = _MissingEntities(self, prefetch: prefetch)
      withExtendedLifetime(missing) { _NestedVisitor(missing: missing).visitAll(values) }
    }
  }

  /// Asks `prefetch` for the alias `id`'s record and the entities it names, when its value is
  /// of a persisted type and it was not read yet (see `prepareAlias(_:_:list:)`).
  @inlinable
  func want<T: Identifiable & Sendable>(alias id: _AliasID, of _: T.Type, in prefetch: _Prefetch) {
    withTable(T.self) { table in
      guard let persisted = table.persisted else { return }
      if let node = registry.aliases[id], node.witness.hasConsumers(node) { return }
      prefetch.want(alias: id.name, of: persisted)
    }
  }

  /// Asks `prefetch` for the entity `id` of `T`, when memory lacks it.
  @inlinable
  func want<T: Identifiable & Sendable>(_: T.Type, id: T.ID, in prefetch: _Prefetch) {
    withTable(T.self) { table in
      guard let persisted = table.persisted else { return }
      prefetch.want(id, of: persisted, in: table)
    }
  }

  /// A handle on the entity `id` of `T`, loaded from the store if it is persisted and not in
  /// memory, read outside the lock. The node is returned unretained: the handle's hold keeps
  /// it (rule 6 of `_Lifetime.swift`).
  @inlinable
  func findLoading<T: Identifiable & Sendable>(_: T.Type, id: T.ID) -> Unmanaged<_Node<T>>? {
    let prefetch = prefetch { prefetch, persistence in
      guard let table = existingTable(for: T.self) else { return }
      let typed = unsafeDowncast(table.takeUnretainedValue(), to: _Table<T>.self)
      if let persisted = typed.persisted {
        prefetch.want(id, of: persisted, in: typed)
      }
    }
    return admitting(prefetch, ending: true) {
      withTable(T.self) { table in
        if table.node(id) == nil { load(id, into: table) }
        return table.withNode(id) { holdForHandle($0) }
      }
    }
  }

  /// Opens a live query with `open` and, for a persisted type, gives it the entities only the
  /// store has: read outside the lock, then admitted `_Prefetch.chunk` to a write, the query
  /// already open and fed by each (and by any other write meanwhile). Inside one of the map's
  /// frames, as one write reading under the lock.
  @usableFromInline
  func openReading<T: Identifiable & Sendable>(
    _: T.Type, _ open: () -> Unmanaged<_Node<[T]>>
  ) -> Unmanaged<_Node<[T]>> {
    guard persistence != nil, !lock.isHeldByCurrentThread else {
      return write {
        let table = registry.table(for: T.self)
        if table.persisted != nil { loadAll(into: table) }
        return open()
      }
    }
    let query = write(open)
    let prefetch = prefetch { prefetch, persistence in
      guard let table = existingTable(for: T.self) else { return }
      let typed = unsafeDowncast(table.takeUnretainedValue(), to: _Table<T>.self)
      if let persisted = typed.persisted { prefetch.wantAll(of: persisted) }
    }
    if let prefetch { admitWholeKinds(prefetch) }
    return query
  }

  /// See ``IdentityMap/parents(of:id:)``: the persisted aggregates only the store has are read
  /// outside the lock, and admitted `_Prefetch.chunk` to a write, each write noting the
  /// entity's parents before it releases what nobody holds. Inside one of the map's frames, as
  /// one write reading under the lock.
  func parentsReading<T: Identifiable & Sendable>(of _: T.Type, id: T.ID) -> [EntityReference] {
    guard persistence != nil, !lock.isHeldByCurrentThread else {
      return write { parents(of: T.self, id: id) }
    }
    // NB: held for the whole call, so that the aggregates admitted link to it in each write.
    guard let held = findLoading(T.self, id: id) else { return [] }
    var found: Set<EntityReference> = []
    let prefetch = prefetch { prefetch, persistence in
      for table in registry.tables { table.queries.wantAggregates(table, prefetch, persistence) }
    }
    let note = {
      held._withUnsafeGuaranteedRef { node in
        if node.isPresent { found.formUnion(self.parents(of: node)) }
      }
    }
    if let prefetch {
      admitWholeKinds(prefetch, perChunk: note)
    } else {
      read(note)
    }
    let alive = read { held._withUnsafeGuaranteedRef { $0.isPresent } }
    releaseHandle(of: held.takeUnretainedValue())
    return alive ? Array(found) : []
  }

  // MARK: Flush, save and restore

  /// See ``IdentityMap/flush()``.
  func flush() throws {
    guard let persistence else { return }
    checkOutsideWrites("flush()")
    try persistence.flush()
  }

  /// See ``IdentityMap/save(to:)``.
  func save(to path: String) throws {
    guard let persistence else {
      preconditionFailure("Concord: save(to:) needs a map made with a store (persistence:)")
    }
    checkOutsideWrites("save(to:)")
    try persistence.flush { try persistence.store.save(to: path) }
  }

  /// See ``IdentityMap/restore(from:)``: on the persistence writer, which applies nothing else
  /// meanwhile, the store takes the snapshot with none of the map's locks held, then memory is
  /// made to agree with it (see "Restoring a save slot" below).
  func restore(from path: String) throws {
    guard let persistence else {
      preconditionFailure("Concord: restore(from:) needs a map made with a store (persistence:)")
    }
    checkOutsideWrites("restore(from:)")
    try persistence.flush {
      try persistence.applyPending()
      try persistence.store.restore(from: path)
      reloadPersistedReading()
    }
  }

  /// Lists, for `removeAll`, the deletion of every persisted type's rows and aliases.
  func persistRemovingAll() {
    guard let persistence else { return }
    for kind in persistence.kindOwners.keys.sorted() {
      persistence.current.append(_WipeOp(.deleteKind(kind)))
      persistence.current.append(_WipeOp(.deleteAliases(kind: kind)))
    }
  }

  /// Empties memory and, after what was committed before, the store; see
  /// ``IdentityMap/reset()``.
  func reset() {
    removeAll()
    persistence?.current.append(_WipeOp(.deleteEverything))
  }

  // MARK: Aliases

  /// Readies the alias `id`, whose value is a `T` (or, with `list`, an array of them), for
  /// persistence when `T` is persisted: its slot persists its changes from now on, and the first
  /// time, loads the value the store has for it.
  @inlinable
  func prepareAlias<T: Identifiable & Sendable>(_ id: _AliasID, _: T.Type, list: Bool) {
    guard audience.persistedTypes > 0 else { return }
    withTable(T.self) { table in
      guard let persisted = table.persisted else { return }
      if list {
        prepare(registry.aliasNode(id, witness: table.collectionAliasWitness), persisted) { $0 }
      } else {
        prepare(registry.aliasNode(id, witness: table.aliasWitness), persisted) { $0.first }
      }
    }
  }

  /// See `prepareAlias(_:_:list:)`: `make` makes an alias value from entities.
  @usableFromInline
  func prepare<T: Identifiable & Sendable, Wrapped: Sendable>(
    _ node: _AliasNode<Wrapped>, _ persisted: _Persisted<T>, make: ([T]) -> Wrapped?
  ) {
    guard !node.persists else { return }
    node.persists = true
    let name = node.id.name
    lifetime.noteHoldDropped(node)
    guard !node.witness.holdsAliasValue(node) else { return }
    let ids: [T.ID]
    let stamp: Stamp?
    switch persisted.readAlias(name, self) {
    case .saved(let saved, let savedStamp): (ids, stamp) = (saved, savedStamp)
    case .failed: return refuseUnreadable(node)
    case .deleted, .tombstone, .unknown: return
    }
    for id in ids { loadIfMissing(T.self, id: id) }
    let table = registry.table(for: T.self)
    // NB: an alias naming an entity the store could not read is not read either: shown
    // without it, then written, it would lose it.
    guard !ids.contains(where: table.cannotRead) else { return refuseUnreadable(node) }
    guard let value = make(ids.compactMap { table.node($0)?.value }) else { return }
    let events = outbox.events.count
    journal.noteLoaded(node)
    if let stamp { node.s.stamp = stamp }
    pass.run(into: node, payload: value, stamp: nil, call: nil, nesting: .load)
    journal.recordLoaded()
    outbox.forgetEvents(after: events)
  }

  /// Refuses every write of the alias `node`, whose record the store could not read, until
  /// the write ends; the next write of it reads it again. See `_Verdict.unreadable`.
  func refuseUnreadable<Wrapped>(_ node: _AliasNode<Wrapped>) {
    node.persists = false
    persistence?.unreadableAliases.insert(node.id.name)
  }

  /// Lists the deletion of the alias `name` when it is not in memory: it may be in the store.
  @usableFromInline
  func persistRemovingAlias(_ name: String) {
    guard audience.persistedTypes > 0, let persistence else { return }
    persistence.current.append(_AliasOp(name: name, kind: nil, values: nil, stamp: nil))
  }

  // MARK: Resources' answers (see `_AnswerRecord.swift`)

  /// Asks `prefetch` for the record of the answer of the resource `name`, whose entities are
  /// `T`s, and for the entities it names, when `T` is persisted.
  @usableFromInline
  func want<T: Identifiable & Sendable>(
    answer name: String, of _: T.Type, list: Bool, in prefetch: _Prefetch
  ) {
    withTable(T.self) { table in
      guard let persisted = table.persisted else { return }
      let storeName = _AnswerRecord.storeName(of: name, kind: persisted.kind, list: list)
      prefetch.want(answer: storeName, of: persisted)
    }
  }

  /// Fills the empty slot `node` with the answer the store keeps for the resource `name`, if
  /// `T` is persisted and there is one: its entities are loaded, and the slot takes them as a
  /// load, which tells nobody. Returns when that answer was fetched, and its validator. The
  /// store is read outside the lock when the write admits a prefetch that asked for it
  /// (`want(answer:of:list:in:)`).
  @usableFromInline
  func loadStoredAnswer<T: Identifiable & Sendable, Value: Sendable>(
    _: T.Type, into node: _AliasNode<Value>, name: String, list: Bool, make: ([T]) -> Value?
  ) -> _StoredAnswerInfo? {
    guard let persistence, let persisted = registry.table(for: T.self).persisted else {
      return nil
    }
    let storeName = _AnswerRecord.storeName(of: name, kind: persisted.kind, list: list)
    guard let stored = readAnswerRecord(T.self, named: storeName, persistence, persisted) else {
      return nil
    }
    for id in stored.ids { loadIfMissing(T.self, id: id) }
    let table = registry.table(for: T.self)
    if let value = make(stored.ids.compactMap { table.node($0)?.value }) {
      loadSlot(node, with: value)
    }
    return stored.info
  }

  /// Fills the slot `node` with `value`, entities the map has, as a load: nobody is told.
  private func loadSlot<Value: Sendable>(_ node: _AliasNode<Value>, with value: Value) {
    // NB: as `prepare(_:_:make:)` loads an alias: a load is not a change.
    lifetime.noteHoldDropped(node)
    let events = outbox.events.count
    journal.noteLoaded(node)
    pass.run(into: node, payload: value, stamp: nil, call: nil, nesting: .load)
    journal.recordLoaded()
    outbox.forgetEvents(after: events)
  }

  /// The answer record `name` of `T`: from the changes not yet applied, else as the write's
  /// prefetch read it (unless it changed since), else from the store; `nil` when there is
  /// none, or it cannot be read (logged: the resource then fetches, as with none).
  private func readAnswerRecord<T: Identifiable & Sendable>(
    _: T.Type, named name: String, _ persistence: _Persistence, _ persisted: _Persisted<T>
  ) -> (ids: [T.ID], info: _StoredAnswerInfo)? {
    switch persistence.unappliedAlias(name, kind: persisted.kind) {
    case .saved(let values, _):
      guard let unapplied = values as? _UnappliedAnswer, let ids = unapplied.ids as? [T.ID] else {
        return nil
      }
      return (ids, unapplied.info)
    case .deleted, .tombstone, .failed:
      return nil
    case .unknown:
      break
    }
    let prefetched = persistence.prefetched?.typed(T.self)?.answers[name]
    switch prefetched.flatMap({ persistence.isTouched(alias: name) ? nil : $0 })
      ?? persisted.fetchAnswer(name)
    {
    case .saved(let ids, let info): return (ids, info)
    case .none: return nil
    case .failed(let error):
      outbox.log { .persistenceFailed("reading the answer of \(name): \(error)") }
      return nil
    }
  }

  /// Lists the save of the record of the answer `ids` of `T` of the resource `name`, if `T`
  /// is persisted. In a write.
  @usableFromInline
  func saveAnswerRecord<T: Identifiable & Sendable>(
    _: T.Type, ids: [T.ID], name: String, list: Bool, _ info: _StoredAnswerInfo
  ) {
    guard audience.persistedTypes > 0, let persistence,
      let persisted = registry.table(for: T.self).persisted
    else { return }
    persistence.current.append(
      _AnswerRecord(
        name: _AnswerRecord.storeName(of: name, kind: persisted.kind, list: list),
        kind: persisted.kind, ids: ids, info: info))
  }

  // MARK: Paged lists' records (see `_AnswerRecord.swift`)

  /// Asks `prefetch` for the record of the paged list `name`, whose entities are `T`s, the
  /// records of its pages, and the entities they name, when `T` is persisted.
  @usableFromInline
  func want<T: Identifiable & Sendable>(
    pagedList name: String, of _: T.Type, in prefetch: _Prefetch
  ) {
    withTable(T.self) { table in
      guard let persisted = table.persisted else { return }
      let storeName = _AnswerRecord.pagedName(of: name, kind: persisted.kind)
      prefetch.want(answer: storeName, of: persisted)
    }
  }

  /// Fills a slot per page of the paged list `name` that the store keeps, if `T` is persisted
  /// and it keeps one: following the chain of its records from the list's, `slot(serial)`
  /// makes the empty slot of each page, which takes the entities of the page's record that
  /// the map has and no earlier page holds, as a load (nobody is told). Returns the list's
  /// record (when its head was fetched, its cursors) and the pages, in order. The store is
  /// read outside the lock when the write admits a prefetch that asked for it
  /// (`want(pagedList:of:in:)`).
  @usableFromInline
  func loadStoredPagedList<T: Identifiable & Sendable>(
    _: T.Type, name: String, slot: (UInt64) -> _AliasNode<[T]>
  ) -> (info: _StoredAnswerInfo, pages: [UInt64])? {
    guard let persistence, let persisted = registry.table(for: T.self).persisted else {
      return nil
    }
    let storeName = _AnswerRecord.pagedName(of: name, kind: persisted.kind)
    guard let list = readAnswerRecord(T.self, named: storeName, persistence, persisted),
      let paging = list.info.paging
    else { return nil }
    var listed = Set<T.ID>()
    var pages: [UInt64] = []
    var visited = Set<UInt64>()
    var next = paging.next
    // NB: a chain that loops, or names a record that cannot be read (a damaged store), ends
    // there.
    while let serial = next, visited.insert(serial).inserted {
      let pageName = _AnswerRecord.pageName(of: storeName, serial: serial)
      guard let page = readAnswerRecord(T.self, named: pageName, persistence, persisted) else {
        break
      }
      next = page.info.paging?.next
      let ids = page.ids.filter { !listed.contains($0) }
      for id in ids { loadIfMissing(T.self, id: id) }
      let table = registry.table(for: T.self)
      let values = ids.compactMap { table.node($0)?.value }
      listed.formUnion(values.map { $0.id })
      loadSlot(slot(serial), with: values)
      pages.append(serial)
    }
    return (list.info, pages)
  }

  /// Lists the save of the record of the paged list `name` of `T`s (`page: nil`), or of its
  /// page `page`, naming `ids`, if `T` is persisted. In a write.
  @usableFromInline
  func savePagedRecord<T: Identifiable & Sendable>(
    _: T.Type, name: String, page: UInt64?, ids: [T.ID], _ info: _StoredAnswerInfo
  ) {
    guard audience.persistedTypes > 0, let persistence,
      let persisted = registry.table(for: T.self).persisted
    else { return }
    let list = _AnswerRecord.pagedName(of: name, kind: persisted.kind)
    persistence.current.append(
      _AnswerRecord(
        name: page.map { _AnswerRecord.pageName(of: list, serial: $0) } ?? list,
        kind: persisted.kind, ids: ids, info: info))
  }

  /// Lists the deletion of the record of the page `page` of the paged list `name` of `T`s, if
  /// `T` is persisted. In a write.
  @usableFromInline
  func deletePagedRecord<T: Identifiable & Sendable>(_: T.Type, name: String, page: UInt64) {
    guard audience.persistedTypes > 0, let persisted = registry.table(for: T.self).persisted
    else { return }
    let list = _AnswerRecord.pagedName(of: name, kind: persisted.kind)
    persistRemovingAlias(_AnswerRecord.pageName(of: list, serial: page))
  }

  /// Decodes `bytes`, which the map's store encoded, as a `V`; `nil` when it cannot (the
  /// failure is logged) or the map has no store. Calls the store's decoder only: call it with
  /// none of the map's locks held.
  @usableFromInline
  func decodeStored<V: Decodable>(_: V.Type, from bytes: [UInt8], what: String) -> V? {
    guard let store = persistence?.store else { return nil }
    do {
      return try store.decode(V.self, from: bytes)
    } catch {
      let message = "decoding \(what): \(error)"
      write { outbox.log { .persistenceFailed(message) } }
      return nil
    }
  }

  // MARK: Restoring a save slot
  //
  // Restoring a save slot (`IdentityMap.restore(from:)`): once the store holds the snapshot, one
  // write makes memory agree with it. Every entity of a persisted type in memory, and every alias
  // that persists, takes the store's value and stamp whatever the stamps say (its stamp is
  // forgotten first, so the write is accepted), or goes if the store has none; the tombstones of
  // persisted types become the store's; and each live query of a persisted type is given the
  // entities only the store has. The journal records it all as one write, so each handle, query
  // and alias is told once, at commit.

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

  // MARK: One store, several processes
  //
  // A shared store (`PersistentStore.isShared`) is written by other processes too: an app and
  // its extensions. What they commit reaches this map as writes of this map, one per commit, in
  // the order the store took them: handles, queries and aliases are told once per change, and
  // the usual rules apply (stamps, merges, tombstones, removal rules). Such a write comes from
  // the store and never goes back to it (`_Persistence.beginExternal()`): the other process
  // wrote it there already, and handing it back would bounce it between processes forever.
  //
  // A sync (`syncExternalChanges()`): on the persistence writer, once every write this map
  // committed before is applied, a prefetch begins, and the store says what the other
  // processes committed, with none of the map's locks held. From then on, the writer notes
  // what it applies as touched (`_Persistence.noteApplied(_:)`): so a write of this map still
  // among the changes not yet applied when the sync admits, or touched, reaches the store after
  // everything read (`changedSinceApplied`): the store's order puts it last, and this map keeps
  // it unless the other process's value wins by its stamp anyway (`applyExternal(_:)`). The
  // changes are decoded, and the persisted entities they nest that memory lacks are read,
  // outside the lock; then each commit is admitted in one write.
  //
  // A change of an entity memory lacks is applied only when a live query or collector of its
  // type could want it (an entity new in the file that matches a query appears in it): nothing
  // else shows it, and the next read of it finds the store's value. A store that could not say
  // everything (a process that fell behind its trimmed log) has the map reload what it holds,
  // as a restore does, and logs it.

  /// Starts applying other processes' commits whenever the store says there are some, once;
  /// outside the lock (the store starts watching its file).
  @usableFromInline
  func startSharing() {
    guard let persistence, persistence.isShared else { return }
    let starts = lock.withLock {
      defer { persistence.watching = true }
      return !persistence.watching
    }
    guard starts else { return }
    // NB: weak: the store, which the map holds, holds the closure; a map that is gone has
    // nothing to apply.
    persistence.store.observeExternalChanges { [weak self] in
      guard let self, let persistence = self.persistence else { return }
      do {
        try self.syncExternalChanges()
      } catch {
        persistence.log("applying other processes' commits: \(error)")
      }
    }
  }

  /// See ``IdentityMap/syncExternalChanges()``.
  func syncExternalChanges() throws {
    guard let persistence, persistence.isShared else { return }
    checkOutsideWrites("syncExternalChanges()")
    try persistence.syncing {
      var kinds: [String: _AnyPersisted] = [:]
      let read = try persistence.readExternal(
        prepare: {
          persistence.beginPrefetch()
          kinds = persistence.typesByKind()
        },
        failed: { persistence.endPrefetch() })
      guard !read.isIncomplete else {
        lock.withLock { persistence.endPrefetch() }
        write {
          outbox.log {
            .persistenceFailed(
              "the shared store could not say everything other processes committed since this "
                + "map last read it (it was not reading, and the store kept too few of them, or "
                + "the store's content was replaced); reloading what the map holds from the store")
          }
        }
        return reloadPersistedReading()
      }
      var errors: [String] = []
      let commits = read.commits.map { commit in
        commit.flatMap { decodeExternal($0, kinds, &errors) }
      }.filter { !$0.isEmpty }
      let events =
        errors.map { IdentityMapEvent.persistenceFailed($0) }
        + read.staleWrites.compactMap { staleEvent($0, kinds) }
      guard !commits.isEmpty else {
        lock.withLock { persistence.endPrefetch() }
        if !events.isEmpty { write { for event in events { outbox.log { event } } } }
        return
      }
      let prefetch = _Prefetch()
      lock.withLock {
        for commit in commits { for change in commit { change.want(into: prefetch, self) } }
      }
      completePrefetch(prefetch)
      for (index, commit) in commits.enumerated() {
        admitting(prefetch, ending: index == commits.count - 1) {
          persistence.beginExternal()
          if index == 0 { for event in events { outbox.log { event } } }
          for change in commit { change.apply(self) }
        }
      }
    }
  }

  /// `change` decoded for the persisted type of its kind (`kinds`); none for a kind this map
  /// does not persist (another process persists more types), and none, with why in `errors`,
  /// when it does not decode. Calls the decoder only: no lock need be held.
  func decodeExternal(
    _ change: PersistentChange, _ kinds: [String: _AnyPersisted], _ errors: inout [String]
  ) -> [_ExternalChange] {
    let kind: String
    switch change {
    case .save(let named, _, _), .delete(let named, _), .saveAlias(_, let named, _),
      .deleteKind(let named):
      kind = named
    case .deleteAlias(let name): return [_ExternalAliasRemoval(.named(name))]
    case .deleteAliases(let named):
      return kinds[named].map { [_ExternalAliasRemoval(.kind($0))] } ?? []
    case .deleteEverything:
      return kinds.keys.sorted().map { _ExternalWipe(kinds[$0]!) } + [_ExternalAliasRemoval(.all)]
    }
    // NB: a resource's answer record or a paged list's (`_AnswerRecord`): its entities reach
    // the resource's slots as any entity does; the answer itself is read when a resource of
    // this map is made, or let go and made again.
    if case .saveAlias(let name, _, _) = change, _AnswerRecord.isAnswerRecord(name) {
      return []
    }
    guard let persisted = kinds[kind] else { return [] }
    switch persisted.decodeExternal(change) {
    case .success(let decoded): return [decoded]
    case .failure(let error):
      errors.append("applying another process's commit: \(error.message)")
      return []
    case nil: return []
    }
  }

  /// The log's event of `stale`, a save of this map that the store refused.
  func staleEvent(_ stale: PersistentStaleWrite, _ kinds: [String: _AnyPersisted])
    -> IdentityMapEvent?
  {
    let target: IdentityMapEvent.Target
    let stamp: Stamp?
    switch stale.change {
    case .save(let kind, let key, let record):
      guard let reference = kinds[kind]?.reference(forKey: key) else { return nil }
      (target, stamp) = (.entity(reference), record.stamp)
    case .saveAlias(let name, _, let record): (target, stamp) = (.alias(name), record.stamp)
    default: return nil
    }
    return .discardedStale(target, storedStamp: stale.storedStamp, incomingStamp: stamp ?? .nan)
  }

  /// Asks `prefetch` for the persisted entities `value` nests that memory lacks, at any depth.
  func wantNested<T: Identifiable & Sendable>(_ value: T, in prefetch: _Prefetch) {
    withTable(T.self) { table in
      guard !table.schema.isLeaf else { return }
      _MissingEntities(self, prefetch: prefetch).visitNested(in: value, schema: table.schema)
    }
  }

  /// Asks `prefetch` for the entities `ids` of `persisted`'s type that memory lacks.
  func want<T: Identifiable & Sendable>(
    _ ids: [T.ID], of persisted: _Persisted<T>, in prefetch: _Prefetch
  ) {
    withTable(T.self) { table in
      guard table.persisted === persisted else { return }
      for id in ids { prefetch.want(id, of: persisted, in: table) }
    }
  }

  /// Applies another process's change of an entity, in the write applying its commit.
  ///
  /// An entity this map changed since the store last took its writes (touched: see the top of
  /// this section) has that write coming after this one in the store, stamped as the entity
  /// is here: the change applies only when the store will refuse this map's write, a newer
  /// stamp than the entity's (its tombstone's, for one this map removed); otherwise it is
  /// skipped, and this map's write wins in the store too. Any other entity takes the store's
  /// record as it is, value and stamp, as a restore's reload does: the store took the change
  /// after everything this map has of it. A removal leaves the tombstone the record has.
  func applyExternal<T: Identifiable & Sendable>(_ change: _ExternalEntity<T>) {
    withTable(T.self) { table in
      guard table.persisted === change.persisted else { return }
      let id = change.id
      if let undecodable = change.undecodable {
        outbox.log { .undecodableRecord(EntityReference(T.self, id: id), undecodable) }
      }
      let node = table.node(id)
      let touched = change.persisted.changedSinceApplied(id)
      let floor = node.map { $0.s.stamp } ?? table.tombstone(of: id) ?? .nan
      switch change.state {
      case .saved(let value, let recordStamp):
        let schema = table.schema
        let stamp = schema.stamp(of: value, call: recordStamp)
        if touched && !(stamp.map { $0 > floor } ?? false) { return }
        // NB: nothing shows an entity memory lacks but a query or collector of its type.
        guard node != nil || table.consumers != nil else {
          if table.tombstone(of: id) != nil { table.unentomb(id, self) }
          return
        }
        if !schema.isLeaf { loadMissing(in: value, schema: schema) }
        if let node {
          node.s.stamp = .nan
          pass.run(
            into: node, payload: value, stamp: stamp, call: nil, verdict: .accepted,
            nesting: .load)
          return
        }
        table.withNode(for: value) { node, _ in
          // NB: no stamp: the tombstone goes, whatever it says.
          _ = table.refusesCreated(node, stamp: nil, self)
          didCreate(node, held: false, journaled: true)
          pass.mark(node, .fresh)
          pass.run(
            into: node, payload: value, stamp: stamp, call: nil, verdict: .accepted,
            nesting: .load)
        }
      case .tombstone(let tomb):
        if touched && !(tomb > floor) { return }
        if let node { remove([node], persisting: false, entombing: false) }
        if node != nil || table.tombstone(of: id) != nil { table.entomb(id, stamp: tomb, self) }
      case .deleted:
        guard !touched else { return }
        if let node { remove([node], persisting: false, entombing: false) }
        if table.tombstone(of: id) != nil { table.unentomb(id, self) }
      }
    }
  }

  /// Applies another process's change of the alias `name` to every alias slot of that name
  /// that persists, as `applyExternal(_:)` does an entity's.
  func applyExternal<T: Identifiable & Sendable>(alias name: String, _ change: _ExternalAlias<T>) {
    for node in aliasNodes(named: name) { node.witness.applyExternal(node, change, self) }
  }

  /// See `applyExternal(alias:_:)`: `node`'s part, where its type is known; `make` makes its
  /// value from entities.
  ///
  /// An alias's record is the last one committed to the store, whatever its stamp (see
  /// `SQLiteStore`'s `_ChangeLog.upsertEntity`): so an alias this map changed since the store
  /// last took its writes keeps this map's value, which the store takes after this one; any
  /// other takes the record's.
  @usableFromInline
  func applyExternal<T: Identifiable & Sendable, Wrapped: Sendable>(
    _ change: _ExternalAlias<T>, to node: _AliasNode<Wrapped>, make: ([T]) -> Wrapped?
  ) {
    if persistence?.changedSinceApplied(alias: change.name) ?? false { return }
    for id in change.ids { loadIfMissing(T.self, id: id) }
    let table = registry.table(for: T.self)
    // NB: as a read of the alias: naming an entity the store could not read, it is left as
    // it is (logged by the read).
    guard !change.ids.contains(where: table.cannotRead) else { return }
    guard let value = make(change.ids.compactMap { table.node($0)?.value }) else {
      if node.witness.holdsAliasValue(node) || !node.s.stamp.isNaN { emptyAlias(node) }
      return
    }
    node.s.stamp = .nan
    pass.run(
      into: node, payload: value, stamp: change.stamp, call: nil, verdict: .accepted,
      nesting: .load)
  }

  /// Applies another process's removal of aliases: emptied, unless this map changed them
  /// since the store last took its writes.
  func applyExternalRemoval(of scope: _ExternalAliasRemoval.Scope) {
    guard let persistence else { return }
    let nodes: [_AnyNode]
    switch scope {
    case .named(let name): nodes = aliasNodes(named: name)
    case .kind(let persisted): nodes = persisted.aliasNodes(self)
    case .all: nodes = registry.aliases.values.filter { $0.witness.hasConsumers($0) }
    }
    for node in nodes {
      guard let name = node.witness.aliasName(node), !persistence.changedSinceApplied(alias: name),
        node.witness.holdsAliasValue(node) || !node.s.stamp.isNaN
      else { continue }
      emptyAlias(node)
    }
  }

  /// Applies another process's deletion of every row of `persisted`'s type: its entities in
  /// memory are removed, but those this map changed since the store last took its writes.
  func applyExternalWipe(of persisted: _AnyPersisted) {
    let nodes = persisted.untouchedNodes(self)
    if !nodes.isEmpty { remove(nodes, persisting: false, entombing: false) }
  }

  /// The entities of `persisted`'s type in memory that this map did not change since the
  /// store last took its writes.
  func untouchedNodes<T: Identifiable & Sendable>(of persisted: _Persisted<T>) -> [_AnyNode] {
    withTable(T.self) { table in
      var nodes: [_AnyNode] = []
      guard table.persisted === persisted, !persisted.touchesAll else { return nodes }
      table.slots.forEachNode { slot in
        let node = slot.takeUnretainedValue()
        if !persisted.changedSinceApplied(node.value.id) { nodes.append(node) }
      }
      return nodes
    }
  }

  /// The alias slots that persist naming entities of `persisted`'s type.
  func aliasNodes<T: Identifiable & Sendable>(of persisted: _Persisted<T>) -> [_AnyNode] {
    withTable(T.self) { table in
      registry.aliases.values.filter { $0.witness.table === table && $0.witness.hasConsumers($0) }
    }
  }

  /// The alias slots named `name` that persist, of every value type.
  func aliasNodes(named name: String) -> [_AnyNode] {
    registry.aliases.compactMap { id, node in
      id.name == name && node.witness.hasConsumers(node) ? node : nil
    }
  }
}
