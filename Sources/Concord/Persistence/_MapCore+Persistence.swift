// Persistence in the engine.
//
// Writing. A persisted type counts as a consumer of the change log (`_AnyNode.hasConsumers`),
// so every write of it is journaled, and at commit `feedConsumers()` hands each change to the
// type's `_Persisted`, which turns it into a `_PersistOp` for the store. Releases are not
// changes: a released entity stays in the store.
//
// Loading. An entity of a persisted type that is not in memory counts as stored: before a write
// or a `find` reaches for it, `loadIfMissing` reads it (from the changes not yet applied, else
// from the store) and admits it into memory. Loading is not a write: the nodes it creates are
// recorded in the journal as present before the write with the value loaded, so the change log
// says nothing of them unless the write then changes them, and a rollback keeps them.
//
// A write of an aggregate first walks its value (`_VisitMode.probing`) for the nested
// entities of persisted types missing from memory, and loads them, so that the pass compares
// each occurrence with the stored entity (stamps, merging) as it would in memory.

/// How the map persists entity type `T`, made by ``IdentityMap/persist(_:as:)`` where `T` is
/// known to be `Codable`.
@usableFromInline
final class _Persisted<T: Identifiable & Sendable>: @unchecked Sendable {
  // NB: @unchecked because `unapplied` is only touched under `persistence`'s lock.

  /// The name of `T`'s rows in the store.
  @usableFromInline let kind: String
  @usableFromInline let persistence: _Persistence
  /// The newest unapplied change of each entity: its value, or `nil` when deleted.
  #if DEBUG
    @usableFromInline var unapplied: [T.ID: _Pending<T>] = [:]
  #else
    @exclusivity(unchecked) @usableFromInline var unapplied: [T.ID: _Pending<T>] = [:]
  #endif
  /// The operations that need `T` to be `Codable`, specialized for `T` where it is known.
  @usableFromInline var ops: _PersistedOps<T>

  @inlinable
  init(kind: String, persistence: _Persistence, ops: _PersistedOps<T>) {
    self.kind = kind
    self.persistence = persistence
    self.ops = ops
  }

  /// Persists what the committed write did to `node`.
  @inlinable
  func _record(_ node: _EntityNode<T>, _ kind: _ChangeKind, stampBefore: Stamp) {
    let stamp: Stamp? = node.s.stamp.isNaN ? nil : node.s.stamp
    switch kind {
    case .inserted, .updated:
      persistence.current.append(ops.change(self, node.value.id, node.value, stamp))
    case .unchanged:
      // NB: `==` to what was stored (or just loaded), but a newer stamp must reach the store,
      // or a write older than it would be taken after a restart.
      if !node.s.stamp._isSame(as: stampBefore) {
        persistence.current.append(ops.change(self, node.value.id, node.value, stamp))
      }
    case .removed:
      persistence.current.append(ops.change(self, node.value.id, nil, nil))
    }
  }

  /// The entity `id` as the store has it (the changes not yet applied included), or `nil`.
  /// Failures are logged to the map's outbox, and read as missing.
  func read(_ id: T.ID, _ core: _MapCore) -> (value: T, stamp: Stamp?)? {
    let unapplied: _Unapplied<T> = persistence.withLock {
      let wipe = persistence.wipeSerial(of: kind)
      if let change = self.unapplied[id], change.serial > wipe {
        return change.value.map { .saved($0, change.stamp) } ?? .deleted
      }
      return wipe > 0 ? .deleted : .unknown
    }
    switch unapplied {
    case .saved(let value, let stamp): return (value, stamp)
    case .deleted: return nil
    case .unknown: break
    }
    let record: PersistentRecord?
    do {
      record = try persistence.store.record(kind: kind, key: ops.encodeID(id))
    } catch {
      core.outbox.log { [kind] in .persistenceFailed("reading \(kind)(\(id)): \(error)") }
      return nil
    }
    guard let record else { return nil }
    do {
      return (try ops.decode(record.payload), record.stamp)
    } catch {
      core.outbox.log { .undecodableRecord(EntityReference(T.self, id: id), "\(error)") }
      return nil
    }
  }

  /// The ids the alias `name` names, as the store has them, with the alias's stamp.
  func readAlias(_ name: String, _ core: _MapCore) -> (ids: [T.ID], stamp: Stamp?)? {
    switch persistence.unappliedAlias(name) {
    case .saved(let values, let stamp): return ((values as? [T] ?? []).map(\.id), stamp)
    case .deleted: return nil
    case .unknown: break
    }
    do {
      guard let record = try persistence.store.aliasRecord(named: name) else { return nil }
      return (try ops.decodeIDs(record.payload), record.stamp)
    } catch {
      core.outbox.log { .persistenceFailed("reading alias \"\(name)\": \(error)") }
      return nil
    }
  }
}

/// An unapplied change of one entity.
@usableFromInline
struct _Pending<T> {
  @usableFromInline let serial: Int
  /// The value saved, or `nil` for a deletion.
  @usableFromInline let value: T?
  @usableFromInline let stamp: Stamp?

  @inlinable
  init(serial: Int, value: T?, stamp: Stamp?) {
    self.serial = serial
    self.value = value
    self.stamp = stamp
  }
}

/// The persistence operations on `T` that need it to be `Codable`, as closures.
///
/// NB: made by an `@inlinable` initializer, called where ``IdentityMap/persist(_:as:)`` is, in
/// code specialized for `T`: run from the engine's type-erased code, generic methods would
/// look up `T`'s metadata (and its tuples' and dictionaries') on every commit.
@usableFromInline
struct _PersistedOps<T: Identifiable & Sendable> {
  /// `_Persisted._record`, specialized.
  @usableFromInline let record: (_Persisted<T>, _EntityNode<T>, _ChangeKind, Stamp) -> Void
  /// The op saving an entity (stamped), or deleting it (`nil`).
  @usableFromInline let change: (_Persisted<T>, T.ID, T?, Stamp?) -> _PersistOp
  /// Lists and unlists an op in `_Persisted.unapplied`; see `_PersistOp`.
  @usableFromInline let note: (_Persisted<T>, _PersistOp) -> Void
  @usableFromInline let forget: (_Persisted<T>, _PersistOp) -> Void
  /// The op saving an alias naming entities of `T`, given their values.
  @usableFromInline let saveAlias: (String, String, [T], Stamp?) -> _PersistOp
  @usableFromInline let decode: ([UInt8]) throws -> T
  @usableFromInline let decodeIDs: ([UInt8]) throws -> [T.ID]
  @usableFromInline let encodeID: (T.ID) throws -> [UInt8]

  @inlinable
  init(store: any PersistentStore) where T: Codable, T.ID: Codable {
    record = { persisted, node, kind, stampBefore in
      persisted._record(node, kind, stampBefore: stampBefore)
    }
    change = { persisted, id, value, stamp in
      _EntityChange(persisted, id: id, value: value, stamp: stamp)
    }
    note = { persisted, op in
      let op = unsafeDowncast(op, to: _EntityChange<T>.self)
      persisted.unapplied[op.id] = _Pending(serial: op.serial, value: op.value, stamp: op.stamp)
    }
    forget = { persisted, op in
      let op = unsafeDowncast(op, to: _EntityChange<T>.self)
      if persisted.unapplied[op.id]?.serial == op.serial {
        persisted.unapplied.removeValue(forKey: op.id)
      }
    }
    saveAlias = { name, kind, values, stamp in
      _AliasSave(name: name, kind: kind, values: values, stamp: stamp)
    }
    decode = { try store.decode(T.self, from: $0) }
    decodeIDs = { try store.decode([T.ID].self, from: $0) }
    encodeID = { try store.encode($0) }
  }
}

/// The save or deletion of one entity of `T`.
@usableFromInline
final class _EntityChange<T: Identifiable & Codable & Sendable>: _PersistOp, @unchecked Sendable
where T.ID: Codable {
  @usableFromInline let persisted: _Persisted<T>
  @usableFromInline let id: T.ID
  @usableFromInline let value: T?
  @usableFromInline let stamp: Stamp?

  @inlinable
  init(_ persisted: _Persisted<T>, id: T.ID, value: T?, stamp: Stamp?) {
    self.persisted = persisted
    self.id = id
    self.value = value
    self.stamp = stamp
  }

  override func change(_ store: any PersistentStore) throws -> PersistentChange {
    let key = try store.encode(id)
    guard let value else { return .delete(kind: persisted.kind, key: key) }
    return .save(
      kind: persisted.kind, key: key,
      record: PersistentRecord(payload: try store.encode(value), stamp: stamp))
  }

  override func note(in _: _Persistence) { persisted.ops.note(persisted, self) }

  override func forget(in _: _Persistence) { persisted.ops.forget(persisted, self) }

  override var description: String { "\(persisted.kind)(\(id))" }
}

/// The save of an alias naming entities of `T`.
@usableFromInline
final class _AliasSave<T: Identifiable & Codable & Sendable>: _AliasOp, @unchecked Sendable
where T.ID: Codable {
  let kind: String
  let entities: [T]

  @usableFromInline
  init(name: String, kind: String, values: [T], stamp: Stamp?) {
    self.kind = kind
    entities = values
    super.init(name: name, values: values, stamp: stamp)
  }

  override func change(_ store: any PersistentStore) throws -> PersistentChange {
    .saveAlias(
      name: name, kind: kind,
      record: PersistentRecord(payload: try store.encode(entities.map(\.id)), stamp: stamp))
  }
}

/// An entity of a persisted type, by kind and id: what a load is loading.
struct _RowKey: Hashable, @unchecked Sendable {
  // NB: @unchecked for `AnyHashable`, which holds an entity id.
  let kind: String
  let id: AnyHashable
}

extension _MapCore {
  /// Starts persisting `T` under `kind`.
  @inlinable
  func persist<T: Identifiable & Codable & Sendable>(_: T.Type, kind: String) where T.ID: Codable {
    guard let persistence = checkPersistable(T.self, kind: kind) else { return }
    let table = registry.table(for: T.self)
    table.persisted = _Persisted(
      kind: kind, persistence: persistence, ops: _PersistedOps(store: persistence.store))
    registry.consumerCount += 1
    registry.persistedTypes += 1
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

  @usableFromInline
  func load<T: Identifiable & Sendable>(_ id: T.ID, into table: _Table<T>) {
    guard let persisted = table.persisted else { return }
    let key = _RowKey(kind: persisted.kind, id: AnyHashable(id))
    guard !scratch.loading.contains(key), let (value, stamp) = persisted.read(id, self) else {
      return
    }
    scratch.loading.insert(key)
    defer { scratch.loading.remove(key) }
    admitLoaded(value, stamp: stamp, in: table)
  }

  /// Brings `value`, loaded from the store with `stamp`, into memory, without writing: see the
  /// top of this file. Its nested entities of persisted types are loaded first; nested
  /// entities in memory keep their values, and the aggregate shows those.
  func admitLoaded<T: Identifiable & Sendable>(_ value: T, stamp: Stamp?, in table: _Table<T>) {
    let schema = table.schema
    var value = value
    if !schema.isLeaf {
      loadMissing(in: value, schema: schema)
      guard prune(&value, schema: schema) else {
        // NB: it requires an entity that was removed while it was not in memory: the removal
        // takes it too, as it would have in memory.
        if let persisted = table.persisted {
          persistence?.current.append(persisted.ops.change(persisted, value.id, nil, nil))
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
    noteLoaded(node)
    if let stamp { node.s.stamp = stamp }
    if !schema.isLeaf {
      scratch.mode = .loading
      mark(node, .fresh)
      writeTree(into: node, payload: value, stamp: nil, call: nil)
      scratch.mode = .claiming
    }
    recordLoaded()
    if outbox.events.count > events { outbox.events.removeSubrange(events...) }
    if outbox.written.count > written { outbox.written.removeSubrange(written...) }
  }

  /// Gives `node`, just created for a write of a type holding no nested entity, the value and
  /// stamp the store has for its entity, as a load. Returns `false`, changing nothing, when the
  /// store has none.
  @usableFromInline
  func loadInto<T: Identifiable & Sendable>(_ node: _EntityNode<T>, _ table: _Table<T>) -> Bool {
    guard let persisted = table.persisted, let (value, stamp) = persisted.read(node.value.id, self)
    else { return false }
    node.value = value
    if let stamp { node.s.stamp = stamp }
    didCreate(node, held: false, journaled: false)
    noteLoaded(node)
    recordLoaded()
    return true
  }

  /// Records the nodes the load created in the journal, as present before the write with the
  /// values and stamps they were loaded with.
  func recordLoaded() {
    for loaded in scratch.loaded {
      journal.entries.append(
        _JournalEntry(
          node: loaded, previousMark: 0, level: journal.level, saved: loaded.saveValue(self),
          stamp: loaded.s.stamp, links: journal.level > 0 ? loaded.children : nil,
          flags: loaded.s.flags.intersection([.registered, .removed, .anchored]),
          wasPresent: true))
    }
    scratch.loaded.removeAll()
  }

  /// Drops from `value` its nested entities of persisted types that are neither in memory nor
  /// in the store (they were removed while `value` was only in the store), as their removal
  /// would have: from collections, and optional references set to `nil`. Returns `false` when
  /// `value` requires one of them.
  func prune<V>(_ value: inout V, schema: _Schema<V>) -> Bool {
    for accessor in schema.accessors {
      scratch.mode = .pruning
      accessor.forEachChild(value, self)
      scratch.mode = .claiming
      guard !scratch.pruned.isEmpty else { continue }
      let positions = scratch.pruned
      scratch.pruned.removeAll()
      guard let remove = accessor.remove else { return false }
      remove(positions, &value)
    }
    return true
  }

  /// Marks a node a load created: no write touches it again at this level, and the load
  /// records it as present before the write when it ends.
  @usableFromInline
  func noteLoaded(_ node: _AnyNode) {
    node.s.journalMark = journal.mark
    scratch.loaded.append(node)
  }

  /// Loads the persisted entities nested in `value`, at any depth, that are not in memory.
  ///
  /// - Complexity: O(nested occurrences), plus the loads.
  @inlinable
  func loadMissing<V>(in value: V, schema: _Schema<V>) {
    scratch.mode = .probing
    for accessor in schema.accessors { accessor.forEachChild(value, self) }
    scratch.mode = .claiming
    guard !scratch.loads.isEmpty else { return }
    let loads = scratch.loads
    scratch.loads.removeAll()
    // NB: the caller's pass may have marked its root (fresh); a load's pass clears the marks
    // it lists, so the caller's are set aside meanwhile.
    let marked = scratch.marked
    scratch.marked = []
    for load in loads { load(self) }
    scratch.marked = marked
  }

  /// A handle on the entity `id` of `T`, loaded from the store if it is persisted and not in
  /// memory.
  @usableFromInline
  func findLoading<T: Identifiable & Sendable>(_: T.Type, id: T.ID) -> Unmanaged<_Node<T>>? {
    write {
      withTable(T.self) { table in
        if table.node(id) == nil { load(id, into: table) }
        return table.withNode(id) { holdForHandle($0) }
      }
    }
  }

  /// Lists, for `removeAll`, the deletion of every persisted type's rows and aliases.
  func persistRemovingAll() {
    guard let persistence else { return }
    for kind in persistence.kindOwners.keys.sorted() {
      persistence.current.append(_WipeOp(target: kind, .deleteKind(kind)))
      // NB: the aliases of every kind are wiped under the one target "@": together they are
      // every alias the store has, and `removeAll` empties every alias.
      persistence.current.append(_WipeOp(target: "@", .deleteAliases(kind: kind)))
    }
  }

  /// Empties memory and, after what was committed before, the store; see
  /// ``IdentityMap/reset()``.
  func reset() {
    removeAll()
    persistence?.current.append(_WipeOp(target: "", .deleteEverything))
  }
}

// MARK: - Aliases

extension _MapCore {
  /// Readies the alias `id`, whose value is a `T` (or, with `list`, an array of them), for
  /// persistence when `T` is persisted: its slot persists its changes from now on, and the first
  /// time, loads the value the store has for it.
  @inlinable
  func prepareAlias<T: Identifiable & Sendable>(_ id: _AliasID, _: T.Type, list: Bool) {
    guard registry.persistedTypes > 0 else { return }
    withTable(T.self) { table in
      guard let persisted = table.persisted else { return }
      if list {
        prepare(aliasNode(id, schema: .aliasList(of: T.self)), persisted, values: { $0 }) { $0 }
      } else {
        prepare(aliasNode(id, schema: .alias(of: T.self)), persisted, values: { [$0] }) {
          $0.first
        }
      }
    }
  }

  /// See `prepareAlias(_:_:list:)`: `values` lists the entities of an alias value, `make`
  /// makes one from entities.
  @usableFromInline
  func prepare<T: Identifiable & Sendable, Wrapped: Sendable>(
    _ node: _AliasNode<Wrapped>, _ persisted: _Persisted<T>,
    values: @escaping @Sendable (Wrapped) -> [T], make: ([T]) -> Wrapped?
  ) {
    guard node.persist == nil else { return }
    let name = node.id.name
    node.persist = { node in
      guard let value = node.value else { return _AliasOp(name: name, values: nil, stamp: nil) }
      return persisted.ops.saveAlias(
        name, persisted.kind, values(value), node.s.stamp.isNaN ? nil : node.s.stamp)
    }
    noteHoldDropped(node)
    guard !node.holdsAliasValue, let (ids, stamp) = persisted.readAlias(name, self) else { return }
    for id in ids { loadIfMissing(T.self, id: id) }
    let table = registry.table(for: T.self)
    guard let value = make(ids.compactMap { table.node($0)?.value }) else { return }
    let events = outbox.events.count
    noteLoaded(node)
    if let stamp { node.s.stamp = stamp }
    scratch.mode = .loading
    writeTree(into: node, payload: value, stamp: nil, call: nil)
    scratch.mode = .claiming
    recordLoaded()
    if outbox.events.count > events { outbox.events.removeSubrange(events...) }
  }

  /// Lists the deletion of the alias `name` when it is not in memory: it may be in the store.
  @usableFromInline
  func persistRemovingAlias(_ name: String) {
    guard registry.persistedTypes > 0, let persistence else { return }
    persistence.current.append(_AliasOp(name: name, values: nil, stamp: nil))
  }
}
