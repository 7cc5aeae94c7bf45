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

/// A persisted type, type-erased: what `_Persistence` asks of each. See `_Persisted`.
@usableFromInline
class _AnyPersisted: @unchecked Sendable {
  // NB: @unchecked for the subclass's state, guarded as `_Persisted` says.

  /// The name of the type's rows in the store.
  @usableFromInline let kind: String

  @usableFromInline
  init(kind: String) {
    self.kind = kind
  }

  /// Drops the open layer's rows: a deletion of the kind came after them.
  func wipeOpen() {}
  /// Moves the open layer's rows in flight. On the writer.
  func closeOpen() {}
  /// Starts with `count` layers in flight, none holding rows of the type.
  func startInFlight(_ count: Int) {}
  /// Appends the changes of the rows of the layer at `position` in flight, encoded, and keeps
  /// the positions of those that did not encode. On the writer, outside the map's lock.
  func encode(_ position: Int, _ store: any PersistentStore, into changes: inout [PersistentChange])
  {}
  /// Forgets the layers in flight, applied: `layers`. Returns what it let go of, for the
  /// caller to release after the map's lock. On the writer.
  func applied(_ layers: [_StoreLayer]) -> Any { () }
  /// What is wrong with the type's layers, given how many are in flight; `nil` when nothing
  /// is.
  func checkLayers(inFlight _: Int) -> String? { nil }
  /// Forgets the entities the write could not read: it ended.
  func forgetUnreadable() {}
  /// Notes as touched the entities of the changes not yet applied, and all of them when a
  /// layer deletes the whole kind (`wiped`): a prefetch starts reading the type. See
  /// `_Prefetch.swift`.
  func touchUnapplied(wiped: Bool) {}
  /// Notes that every entity of the type may have changed in the store.
  func touchAll() {}
  /// Forgets what changed: no prefetch is outstanding any more.
  func forgetTouched() {}
}

/// How the map persists entity type `T`, made by ``IdentityMap/persist(_:as:)`` where `T` is
/// known to be `Codable`, and the type's rows in `_Persistence`'s layers.
///
/// NB: rows are kept by type, in arrays, so that a commit allocates no object per change, and a
/// read finds them by the entity's own id: an op object, an `AnyHashable` key or a dictionary
/// insert per change cost the committing thread more than the write. Reads index the arrays
/// when they need to, once per row.
@usableFromInline
final class _Persisted<T: Identifiable & Sendable>: _AnyPersisted, @unchecked Sendable {
  // NB: @unchecked because everything is touched under the map's lock, except `unencodable`,
  // which only the writer touches; it also reads `inFlight`, which only it changes, outside.

  /// NB: unowned(unsafe), by rule 9 of `_Lifetime.swift`: `persistence` holds every persisted
  /// type (`types`), for its writer, and a strong reference back would keep both, and the
  /// store, alive forever. Nothing holds a persisted type longer than its persistence: its
  /// table and its alias slots belong to the map, which holds the persistence, and its ops are
  /// in the persistence's own changes.
  @usableFromInline unowned(unsafe) let persistence: _Persistence
  /// The operations that need `T` to be `Codable`, specialized for `T` where it is known.
  @usableFromInline let ops: _PersistedOps<T>

  /// The rows of the open layer, in commit order.
  #if DEBUG
    @usableFromInline var open: [_Row<T>] = []
  #else
    // NB: as the core's parts: the map's lock makes every access exclusive.
    @exclusivity(unchecked) @usableFromInline var open: [_Row<T>] = []
  #endif
  /// The position of the newest row of each id among the first `openIndexed` of `open`, built
  /// by reads.
  private var openIndex: [T.ID: Int] = [:]
  private var openIndexed = 0
  /// The rows of each layer in flight, in commit order.
  private var inFlight: [[_Row<T>]] = []
  /// The position of the newest row of each id in each layer in flight, once a read needed it.
  private var inFlightIndex: [[T.ID: Int]?] = []
  /// Rows the writer could not encode: readable for as long as the map lives, unless a newer
  /// change of the entity is applied.
  private var stuck: [T.ID: _Row<T>] = [:]
  /// The positions of the rows of each layer in flight that did not encode, kept until the
  /// layer is applied. Only on the writer.
  private var unencodable: [[Int]] = []
  /// The entities that changed for the store while a prefetch was outstanding, and whether
  /// all of them may have (a deletion of the whole kind); see `_Prefetch.swift`.
  #if DEBUG
    @usableFromInline var touched: Set<T.ID> = []
  #else
    @exclusivity(unchecked) @usableFromInline var touched: Set<T.ID> = []
  #endif
  @usableFromInline var touchesAll = false
  /// The entities the write under way could not read from the store: every write of them is
  /// refused until the write ends (see `_Verdict.unreadable`); the next write reads again.
  #if DEBUG
    @usableFromInline var unreadable: Set<T.ID> = []
  #else
    @exclusivity(unchecked) @usableFromInline var unreadable: Set<T.ID> = []
  #endif

  @inlinable
  init(kind: String, persistence: _Persistence, ops: _PersistedOps<T>) {
    self.persistence = persistence
    self.ops = ops
    super.init(kind: kind)
  }

  /// Records what the committed write did to `node`. A removal that left a tombstone (see
  /// `TombstonePolicy`) keeps its stamp, in a record with no payload.
  @inlinable
  func _record(_ node: _EntityNode<T>, _ kind: _ChangeKind, stampBefore: Stamp) {
    let stamp: Stamp? = node.s.stamp.isNaN ? nil : node.s.stamp
    switch kind {
    case .inserted, .updated:
      stage(_Row(id: node.value.id, value: node.value, stamp: stamp))
    case .unchanged:
      // NB: `==` to what was stored (or just loaded), but a newer stamp must reach the store,
      // or a write older than it would be taken after a restart.
      if !node.s.stamp._isSame(as: stampBefore) {
        stage(_Row(id: node.value.id, value: node.value, stamp: stamp))
      }
    case .removed:
      let id = node.value.id
      stage(_Row(id: id, value: nil, stamp: node.table.tombstone(of: id)))
    }
  }

  /// Adds `row` to the open layer, after what the write handed over before it.
  @inlinable
  func stage(_ row: _Row<T>) {
    if !persistence.current.isEmpty { persistence.handOverCurrent() }
    open.append(row)
    touch(row.id)
    persistence.hasOpen = true
  }

  override func wipeOpen() {
    open.removeAll()
    openIndex.removeAll()
    openIndexed = 0
  }

  override func closeOpen() {
    inFlight.append(open)
    inFlightIndex.append(nil)
    open = []
    openIndex.removeAll()
    openIndexed = 0
  }

  override func startInFlight(_ count: Int) {
    inFlight = Array(repeating: [], count: count)
    inFlightIndex = Array(repeating: nil, count: count)
  }

  override func encode(
    _ position: Int, _ store: any PersistentStore, into changes: inout [PersistentChange]
  ) {
    if position == 0 { unencodable = [] }
    var skipped: [Int] = []
    let rows = inFlight[position]
    if !rows.isEmpty { ops.encode(self, rows, store, &changes, &skipped) }
    unencodable.append(skipped)
  }

  /// Appends the changes of `rows`, encoded for `store`, and lists in `skipped` the positions
  /// of the rows that did not encode.
  @inlinable
  func _encode(
    _ rows: [_Row<T>], _ store: any PersistentStore, into changes: inout [PersistentChange],
    skipped: inout [Int]
  ) where T: Codable, T.ID: Codable {
    changes.reserveCapacity(changes.count + rows.count)
    for (position, row) in rows.enumerated() {
      do {
        let key = try store.encode(row.id)
        if let value = row.value {
          changes.append(
            .save(
              kind: kind, key: key,
              record: PersistentRecord(payload: try store.encode(value), stamp: row.stamp)))
        } else if let stamp = row.stamp {
          changes.append(.save(kind: kind, key: key, record: .tombstone(stamp: stamp)))
        } else {
          changes.append(.delete(kind: kind, key: key))
        }
      } catch {
        // NB: a value that cannot be encoded will not be next time either: it is reported,
        // and stays readable for as long as the map lives.
        persistence.report(error, while: "encoding \(kind)(\(row.id))")
        skipped.append(position)
      }
    }
  }

  override func applied(_ layers: [_StoreLayer]) -> Any {
    var released: [Any] = [inFlight]
    for (position, layer) in layers.enumerated() {
      if persistence.wipes(kind, aliases: false, in: layer) {
        released.append(stuck)
        stuck.removeAll()
      }
      // NB: a type named while the writer wrote has nothing in these layers.
      let skipped = position < unencodable.count ? unencodable[position] : []
      guard !stuck.isEmpty || !skipped.isEmpty else { continue }
      // NB: in order: the newest row of an entity decides whether it is stuck.
      var next = skipped.makeIterator()
      var nextSkipped = next.next()
      for (index, row) in inFlight[position].enumerated() {
        if index == nextSkipped {
          released.append(stuck.updateValue(row, forKey: row.id) as Any)
          nextSkipped = next.next()
        } else {
          released.append(stuck.removeValue(forKey: row.id) as Any)
        }
      }
    }
    inFlight.removeAll()
    inFlightIndex.removeAll()
    unencodable = []
    return released
  }

  override func checkLayers(inFlight count: Int) -> String? {
    guard inFlight.count == count, inFlightIndex.count == count else {
      return "\(kind): \(inFlight.count) layers in flight, \(count) expected"
    }
    guard openIndexed <= open.count else {
      return "\(kind): \(openIndexed) rows indexed, of \(open.count)"
    }
    return nil
  }

  /// What the unapplied changes say of the entity `id`: those of the write under way first.
  func unapplied(_ id: T.ID) -> _Unapplied<T> {
    func state(_ row: _Row<T>) -> _Unapplied<T> {
      if let value = row.value { return .saved(value, row.stamp) }
      return row.stamp.map { .tombstone($0) } ?? .deleted
    }
    // NB: the write's own deletions are not in a layer until it commits.
    if persistence.current.contains(where: {
      $0.deletes(kind, aliases: false) || ($0 as? _RowRemoval<T>)?.id == id
    }) {
      return .deleted
    }
    for position in openIndexed..<open.count { openIndex[open[position].id] = position }
    openIndexed = open.count
    if let position = openIndex[id] { return state(open[position]) }
    if persistence.wipes(kind, aliases: false, in: persistence.open) { return .deleted }
    for layer in inFlight.indices.reversed() {
      if inFlightIndex[layer] == nil {
        var index: [T.ID: Int] = [:]
        for (position, row) in inFlight[layer].enumerated() { index[row.id] = position }
        inFlightIndex[layer] = index
      }
      if let position = inFlightIndex[layer]?[id] { return state(inFlight[layer][position]) }
      if persistence.wipes(kind, aliases: false, in: persistence.inFlight[layer]) {
        return .deleted
      }
    }
    return stuck[id].map(state) ?? .unknown
  }

  /// The entity `id` as the store has it (the changes not yet applied included): saved, a
  /// tombstone, `.deleted` when the store has nothing, or `.failed` when the store could not
  /// read it. Failures are logged to the map's outbox, naming the entity.
  ///
  /// A record that no longer decodes reads as a removed entity whose stamp, if it has one,
  /// is its tombstone: a write stamped no newer is refused, a newer one replaces the record.
  ///
  /// The store is read only when the write's prefetch (see `_Prefetch.swift`) did not read the
  /// entity, or the entity changed since.
  ///
  /// - Parameter listed: The store's record of the entity, when the caller has it already
  ///   (`loadAll`).
  func read(_ id: T.ID, _ core: _MapCore, listed: PersistentRecord? = nil) -> _Unapplied<T> {
    let unapplied = unapplied(id)
    guard case .unknown = unapplied else { return unapplied }
    if let prefetched = persistence.prefetched?.typed(T.self), let fetched = prefetched.results[id],
      !isTouched(id)
    {
      return admit(fetched, id, core)
    }
    if let listed { return admit(decoded(listed), id, core) }
    return admit(fetch(id), id, core)
  }

  /// Reads and decodes the store's record of `id`. Calls the store and the decoder only: the
  /// map's lock need not be held.
  func fetch(_ id: T.ID) -> _Fetched<T> {
    do {
      guard let record = try persistence.store.record(kind: kind, key: ops.encodeID(id)) else {
        return .deleted(undecodable: nil)
      }
      return decoded(record)
    } catch {
      return .failed("\(error)")
    }
  }

  /// Reads and decodes every record of the type, tombstones included, with their ids; `nil`
  /// when the store could not list them, with its error. Calls the store and the decoder only:
  /// the map's lock need not be held.
  func fetchAll() -> (records: [(id: T.ID, fetched: _Fetched<T>)], errors: [String])? {
    let records: [(key: [UInt8], record: PersistentRecord)]
    do {
      records = try persistence.store.records(kind: kind)
    } catch {
      return nil
    }
    var fetched: [(id: T.ID, fetched: _Fetched<T>)] = []
    var errors: [String] = []
    fetched.reserveCapacity(records.count)
    for (key, record) in records {
      do {
        fetched.append((try ops.decodeID(key), decoded(record)))
      } catch {
        errors.append("reading a key of \(kind): \(error)")
      }
    }
    return (fetched, errors)
  }

  /// `record` as an entity of `T`: decoded, a tombstone, or what a record that no longer
  /// decodes reads as.
  func decoded(_ record: PersistentRecord) -> _Fetched<T> {
    if record.isTombstone {
      return record.stamp.map { .tombstone($0, undecodable: nil) } ?? .deleted(undecodable: nil)
    }
    do {
      return .saved(try ops.decode(record.payload), record.stamp)
    } catch {
      return record.stamp.map { .tombstone($0, undecodable: "\(error)") }
        ?? .deleted(undecodable: "\(error)")
    }
  }

  /// What the write makes of `fetched`, the entity `id` as read from the store: its failures
  /// are logged, naming the entity.
  func admit(_ fetched: _Fetched<T>, _ id: T.ID, _ core: _MapCore) -> _Unapplied<T> {
    switch fetched {
    case .saved(let value, let stamp):
      return .saved(value, stamp)
    case .tombstone(let stamp, let undecodable):
      if let undecodable {
        core.outbox.log { .undecodableRecord(EntityReference(T.self, id: id), undecodable) }
      }
      return .tombstone(stamp)
    case .deleted(let undecodable):
      if let undecodable {
        core.outbox.log { .undecodableRecord(EntityReference(T.self, id: id), undecodable) }
      }
      return .deleted
    case .failed(let error):
      core.outbox.log {
        .persistenceFailed(
          "reading \(T.self)(\(id)): \(error); its writes are refused until it reads",
          entity: EntityReference(T.self, id: id))
      }
      return .failed
    }
  }

  // MARK: What changed while a prefetch read

  /// Notes that the entity `id` changed for the store while a prefetch is outstanding.
  @inlinable
  func touch(_ id: T.ID) {
    if persistence.prefetching > 0 { touched.insert(id) }
  }

  /// Whether the entity `id` may have changed in the store since a prefetch began reading.
  @inlinable
  func isTouched(_ id: T.ID) -> Bool {
    touchesAll || (!touched.isEmpty && touched.contains(id))
  }

  override func touchUnapplied(wiped: Bool) {
    if wiped { touchesAll = true }
    for row in open { touched.insert(row.id) }
    for layer in inFlight { for row in layer { touched.insert(row.id) } }
    for id in stuck.keys { touched.insert(id) }
  }

  override func touchAll() {
    touchesAll = true
  }

  override func forgetTouched() {
    touched.removeAll()
    touchesAll = false
  }

  /// Marks `id` as unreadable until the write under way ends.
  func markUnreadable(_ id: T.ID) {
    if unreadable.isEmpty { persistence.unreadableTypes.append(self) }
    unreadable.insert(id)
  }

  override func forgetUnreadable() {
    unreadable.removeAll()
  }

  /// The ids of the entities saved by the changes not yet applied, which the store's own
  /// records may not list yet.
  func unappliedIDs() -> [T.ID] {
    var ids = open.compactMap { $0.value == nil ? nil : $0.id }
    for layer in inFlight { ids += layer.compactMap { $0.value == nil ? nil : $0.id } }
    ids += stuck.values.compactMap { $0.value == nil ? nil : $0.id }
    return ids
  }

  /// The tombstones of the type the store has, with their ids; failures are logged, and read
  /// as none.
  @usableFromInline
  func storedTombstones(_ core: _MapCore) -> [(id: T.ID, stamp: Stamp)] {
    let fetched =
      persistence.prefetched?.typed(T.self).flatMap { touchesAll ? nil : $0.tombstones }
      ?? fetchTombstones()
    switch fetched {
    case .success(let tombstones): return tombstones
    case .failure(let error):
      core.outbox.log { [kind] in .persistenceFailed("listing the tombstones of \(kind): \(error)")
      }
      return []
    }
  }

  /// Reads the store's tombstones of the type, with their ids. Calls the store and the
  /// decoder only: the map's lock need not be held.
  @usableFromInline
  func fetchTombstones() -> Result<[(id: T.ID, stamp: Stamp)], any Error> {
    Result {
      try persistence.store.tombstones(kind: kind).map { (try ops.decodeID($0.key), $0.stamp) }
    }
  }

  /// Every record of the type the store lists, with their ids; failures are logged, and
  /// read as none.
  func listed(_ core: _MapCore) -> [(id: T.ID, record: PersistentRecord)] {
    let records: [(key: [UInt8], record: PersistentRecord)]
    do {
      records = try persistence.store.records(kind: kind)
    } catch {
      core.outbox.log { [kind] in .persistenceFailed("listing \(kind): \(error)") }
      return []
    }
    return records.compactMap { key, record in
      do {
        return (try ops.decodeID(key), record)
      } catch {
        core.outbox.log { [kind] in .persistenceFailed("reading a key of \(kind): \(error)") }
        return nil
      }
    }
  }

  /// The change of the alias `name` to `entities` (`nil` for its removal), stamped `stamp`, as
  /// the store is to apply it.
  @inlinable
  func aliasChange(name: String, entities: [T]?, stamp: Stamp?) -> _PersistOp {
    guard let entities else { return _AliasOp(name: name, kind: nil, values: nil, stamp: nil) }
    return ops.saveAlias(name, kind, entities, stamp)
  }

  /// The ids the alias `name` names, as the store has them, with the alias's stamp:
  /// `.deleted` when the store has no such alias (or one whose ids no longer decode, logged),
  /// `.failed` when it could not read it (logged). The store is read only when the write's
  /// prefetch did not read the alias, or it changed since.
  func readAlias(_ name: String, _ core: _MapCore) -> _Unapplied<[T.ID]> {
    switch persistence.unappliedAlias(name, kind: kind) {
    case .saved(let values, let stamp): return .saved((values as? [T] ?? []).map(\.id), stamp)
    case .deleted, .tombstone, .failed: return .deleted
    case .unknown: break
    }
    let prefetched = persistence.prefetched?.typed(T.self)?.aliases[name]
    switch prefetched.flatMap({ persistence.isTouched(alias: name) ? nil : $0 }) ?? fetchAlias(name)
    {
    case .saved(let ids, let stamp):
      return .saved(ids, stamp)
    case .deleted(let undecodable):
      if let undecodable {
        core.outbox.log { .persistenceFailed("reading alias \"\(name)\": \(undecodable)") }
      }
      return .deleted
    case .failed(let error):
      core.outbox.log {
        .persistenceFailed(
          "reading alias \"\(name)\": \(error); its writes are refused until it reads")
      }
      return .failed
    }
  }

  /// Reads the alias `name` from the store, and decodes the ids it names. Calls the store and
  /// the decoder only: the map's lock need not be held.
  func fetchAlias(_ name: String) -> _FetchedAlias<T.ID> {
    let record: PersistentRecord?
    do {
      record = try persistence.store.aliasRecord(named: name)
    } catch {
      return .failed("\(error)")
    }
    guard let record else { return .deleted(nil) }
    do {
      return .saved(try ops.decodeIDs(record.payload), record.stamp)
    } catch {
      return .deleted("\(error)")
    }
  }
}

/// One unapplied change of an entity: its value and stamp, or its deletion.
@usableFromInline
struct _Row<T: Identifiable> {
  @usableFromInline let id: T.ID
  /// The value saved, or `nil` for a deletion.
  @usableFromInline let value: T?
  @usableFromInline let stamp: Stamp?

  @inlinable
  init(id: T.ID, value: T?, stamp: Stamp?) {
    self.id = id
    self.value = value
    self.stamp = stamp
  }
}

/// The deletion of an entity found by a load (see `admitLoaded`), which, unlike the rows a
/// commit records, a rollback must be able to drop; with `tombstone`, the record of the
/// tombstone it leaves.
@usableFromInline
final class _RowRemoval<T: Identifiable & Sendable>: _PersistOp, @unchecked Sendable {
  let persisted: _Persisted<T>
  let id: T.ID
  let tombstone: Stamp?

  @usableFromInline
  init(_ persisted: _Persisted<T>, id: T.ID, tombstone: Stamp? = nil) {
    self.persisted = persisted
    self.id = id
    self.tombstone = tombstone
  }

  override func handOver(to _: _Persistence) {
    persisted.open.append(_Row(id: id, value: nil, stamp: tombstone))
    persisted.touch(id)
  }
}

/// The persistence operations on `T` that need it to be `Codable`, as closures.
///
/// NB: made by an `@inlinable` initializer, called where ``IdentityMap/persist(_:as:)`` is, in
/// code specialized for `T`: run from the engine's type-erased code, generic methods would
/// look up `T`'s metadata (and its tuples' and dictionaries') on every commit.
@usableFromInline
struct _PersistedOps<T: Identifiable & Sendable> {
  /// `_Persisted._encode`, specialized.
  @usableFromInline let encode:
    (_Persisted<T>, [_Row<T>], any PersistentStore, inout [PersistentChange], inout [Int]) -> Void
  /// The op saving an alias naming entities of `T`, given their values.
  @usableFromInline let saveAlias: (String, String, [T], Stamp?) -> _AliasOp
  @usableFromInline let decode: ([UInt8]) throws -> T
  @usableFromInline let decodeIDs: ([UInt8]) throws -> [T.ID]
  @usableFromInline let decodeID: ([UInt8]) throws -> T.ID
  @usableFromInline let encodeID: (T.ID) throws -> [UInt8]

  @inlinable
  init(store: any PersistentStore) where T: Codable, T.ID: Codable {
    encode = { persisted, rows, store, changes, skipped in
      persisted._encode(rows, store, into: &changes, skipped: &skipped)
    }
    saveAlias = { name, kind, values, stamp in
      _AliasSave(name: name, kind: kind, values: values, stamp: stamp)
    }
    decode = { try store.decode(T.self, from: $0) }
    decodeIDs = { try store.decode([T.ID].self, from: $0) }
    decodeID = { try store.decode(T.ID.self, from: $0) }
    encodeID = { try store.encode($0) }
  }
}

/// The save of an alias naming entities of `T`.
@usableFromInline
final class _AliasSave<T: Identifiable & Codable & Sendable>: _AliasOp, @unchecked Sendable
where T.ID: Codable {
  let entities: [T]

  @usableFromInline
  init(name: String, kind: String, values: [T], stamp: Stamp?) {
    entities = values
    super.init(name: name, kind: kind, values: values, stamp: stamp)
  }

  override func change(_ store: any PersistentStore) throws -> PersistentChange {
    .saveAlias(
      name: name, kind: kind ?? "",
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
    let persisted = _Persisted<T>(
      kind: kind, persistence: persistence, ops: _PersistedOps(store: persistence.store))
    table.persisted = persisted
    persistence.register(persisted)
    audience.consumers += 1
    audience.persistedTypes += 1
    if tombstones.limit > 0 { table.adoptStoredTombstones(persisted.storedTombstones(self), self) }
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
  func load<T: Identifiable & Sendable>(
    _ id: T.ID, into table: _Table<T>, listed: PersistentRecord? = nil
  ) {
    guard let persisted = table.persisted, let persistence else { return }
    // NB: read once per write: a failed read is not tried again until the next.
    guard persisted.unreadable.isEmpty || !persisted.unreadable.contains(id) else { return }
    let key = _RowKey(kind: persisted.kind, id: AnyHashable(id))
    guard !persistence.loading.contains(key) else { return }
    let value: T
    let stamp: Stamp?
    switch persisted.read(id, self, listed: listed) {
    case .saved(let saved, let savedStamp): (value, stamp) = (saved, savedStamp)
    case .tombstone(let tomb):
      // NB: the store's tombstone, kept in memory where writes look for it.
      if table.tombstone(of: id) == nil { table.entomb(id, stamp: tomb, self) }
      return
    case .failed:
      persisted.markUnreadable(id)
      return
    case .deleted, .unknown: return
    }
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
    if outbox.events.count > events { outbox.events.removeSubrange(events...) }
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
  @inlinable
  func writeReading<R>(reading needs: (_Prefetch) -> Void, write body: () -> R) -> R {
    guard let persistence, !lock.isHeldByCurrentThread else { return write(body) }
    var wanted: _Prefetch?
    let result: R? = write {
      if audience.persistedTypes > 0 {
        let prefetch = _Prefetch()
        persistence.beginPrefetch()
        needs(prefetch)
        guard !prefetch.hasWanted else {
          wanted = prefetch
          return nil
        }
        persistence.endPrefetch()
      }
      return body()
    }
    guard let wanted else { return result.unsafelyUnwrapped }
    completePrefetch(wanted)
    return admitting(wanted, ending: true, body)
  }

  /// Asks `prefetch` for `value`'s entity of `T` and the persisted entities it nests, when
  /// memory lacks them: what a write of `value` reads (see `writeReading(reading:write:)`).
  @inlinable
  func want<T: Identifiable & Sendable>(_ value: T, in prefetch: _Prefetch) {
    _MissingEntities(self, prefetch: prefetch).visit(value)
  }

  /// Asks `prefetch` for the alias `id`'s record and the entities it names, when its value is
  /// of a persisted type and it was not read yet (see `prepareAlias(_:_:list:)`).
  @inlinable
  func want<T: Identifiable & Sendable>(alias id: _AliasID, of _: T.Type, in prefetch: _Prefetch) {
    withTable(T.self) { table in
      guard let persisted = table.persisted, let persistence else { return }
      if let node = registry.aliases[id], node.witness.hasConsumers(node) { return }
      prefetch.want(alias: id.name, of: persisted, persistence)
    }
  }

  /// Asks `prefetch` for the entity `id` of `T`, when memory lacks it.
  @inlinable
  func want<T: Identifiable & Sendable>(_: T.Type, id: T.ID, in prefetch: _Prefetch) {
    withTable(T.self) { table in
      guard let persisted = table.persisted, let persistence else { return }
      prefetch.want(id, of: persisted, in: table, persistence)
    }
  }

  /// A handle on the entity `id` of `T`, loaded from the store if it is persisted and not in
  /// memory, read outside the lock. The node is returned unretained: the handle's hold keeps
  /// it (rule 6 of `_Lifetime.swift`).
  @usableFromInline
  func findLoading<T: Identifiable & Sendable>(_: T.Type, id: T.ID) -> Unmanaged<_Node<T>>? {
    let prefetch = prefetch { prefetch, persistence in
      guard let table = existingTable(for: T.self) else { return }
      let typed = unsafeDowncast(table.takeUnretainedValue(), to: _Table<T>.self)
      if let persisted = typed.persisted {
        prefetch.want(id, of: persisted, in: typed, persistence)
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
      if let persisted = typed.persisted { prefetch.wantAll(of: persisted, persistence) }
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
}

// MARK: - Aliases

extension _MapCore {
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
    if outbox.events.count > events { outbox.events.removeSubrange(events...) }
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
}

extension _Table {
  /// Whether the store failed to read the entity `id` in the write under way; see
  /// `_Verdict.unreadable`.
  ///
  /// - Complexity: O(1); one check of an optional while the type is not persisted.
  @inlinable
  func cannotRead(_ id: T.ID) -> Bool {
    guard let persisted, !persisted.unreadable.isEmpty else { return false }
    return persisted.unreadable.contains(id)
  }
}

/// The persisted entities a value nests, at any depth, that are not in memory: listed as loads
/// for `_MapCore.loadMissing(in:schema:)`, or, with `prefetch`, asked of a prefetch, to be read
/// outside the lock (`_MapCore.writeReading(_:_:)`). Under the map's lock.
@usableFromInline
final class _MissingEntities: _NestedVisitor {
  /// NB: unowned(unsafe), by rule 7 of `_Lifetime.swift`: the walk runs within a call on the
  /// map, which its caller holds.
  @usableFromInline unowned(unsafe) let core: _MapCore
  /// Where the entities are asked for; `nil` to list loads instead.
  @usableFromInline let prefetch: _Prefetch?
  @usableFromInline var loads: [(_MapCore) -> Void] = []

  @inlinable
  init(_ core: _MapCore, prefetch: _Prefetch? = nil) {
    self.core = core
    self.prefetch = prefetch
  }

  @usableFromInline
  override func visit<C: Identifiable & Sendable>(_ child: C) {
    core.withTable(C.self) { table in
      if let persisted = table.persisted, table.node(child.id) == nil {
        if let prefetch, let persistence = core.persistence {
          prefetch.want(child.id, of: persisted, in: table, persistence)
        } else {
          let id = child.id
          loads.append { core in core.loadIfMissing(C.self, id: id) }
        }
      }
      visitNested(in: child, schema: table.schema)
    }
  }
}
