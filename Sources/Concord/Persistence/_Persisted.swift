// A persisted type: what a commit records of each of its entities for the store (its rows, in
// layers; see `_Persistence`), what reads find there or in the store, and what changed while a
// prefetch read (see `_Prefetch.swift`).

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
  /// Notes as touched the entities of the layers in flight, and all of them when a layer
  /// deletes the whole kind (`wiped`): the writer applied them while a prefetch was
  /// outstanding, which may have read the store before or after. See `_Prefetch.swift`.
  func touchApplied(wiped: Bool) {}
  /// Notes that every entity of the type may have changed in the store.
  func touchAll() {}
  /// Forgets what changed: no prefetch is outstanding any more.
  func forgetTouched() {}
  /// `change`, which another process committed to a row of the type's kind, decoded for the
  /// write that applies it; `nil`, with why, when its key does not decode. Calls the decoder
  /// only: the map's lock need not be held. See `_ExternalChanges.swift`.
  func decodeExternal(_ change: PersistentChange) -> Result<_ExternalChange, _Undecodable>? {
    nil
  }
  /// The type's entities in memory that the map did not change since the store last took its
  /// writes; for another process's deletion of the whole kind.
  func untouchedNodes(_ core: _MapCore) -> [_AnyNode] { [] }
  /// The alias slots that persist naming entities of the type.
  func aliasNodes(_ core: _MapCore) -> [_AnyNode] { [] }
  /// The entity whose id encodes to `key`, for the log; `nil` when the key does not decode.
  func reference(forKey key: [UInt8]) -> EntityReference? { nil }
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
  #if DEBUG
    @usableFromInline var inFlight: [[_Row<T>]] = []
  #else
    // NB: as `open`; a cold find's inlined checks read it (`unapplied`). (The exclusivity
    // checks are the thread's own: the writer's reads outside the lock never met them.)
    @exclusivity(unchecked) @usableFromInline var inFlight: [[_Row<T>]] = []
  #endif
  /// The position of the newest row of each id in each layer in flight, once a read needed it.
  private var inFlightIndex: [[T.ID: Int]?] = []
  /// Rows the writer could not encode: readable for as long as the map lives, unless a newer
  /// change of the entity is applied.
  #if DEBUG
    @usableFromInline var stuck: [T.ID: _Row<T>] = [:]
  #else
    @exclusivity(unchecked) @usableFromInline var stuck: [T.ID: _Row<T>] = [:]
  #endif
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
  #if DEBUG
    @usableFromInline var touchesAll = false
  #else
    @exclusivity(unchecked) @usableFromInline var touchesAll = false
  #endif
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
  /// `TombstonePolicy`) keeps its stamp, in a record with no payload. When commits hand nothing
  /// over (`_Persistence.diverts`), says so instead.
  @inlinable
  func _record(
    _ node: _EntityNode<T>, _ kind: _ChangeKind, stampBefore: Stamp, _ core: _MapCore
  ) {
    // NB: `==` to what was stored (or just loaded), but a newer stamp must reach the store, or
    // a write older than it would be taken after a restart.
    if kind == .unchanged && node.s.stamp._isSame(as: stampBefore) { return }
    if persistence.diverts {
      return persistence.divert(.entity(EntityReference(T.self, id: node.value.id)), core)
    }
    let stamp: Stamp? = node.s.stamp.isNaN ? nil : node.s.stamp
    switch kind {
    case .inserted, .updated, .unchanged:
      stage(_Row(id: node.value.id, value: node.value, stamp: stamp))
    case .removed:
      let id = node.value.id
      stage(_Row(id: id, value: nil, stamp: node.table.tombstone(of: id)))
    }
  }

  /// Adds `row` to the open layer, after what the write handed over before it.
  @inlinable
  func stage(_ row: _Row<T>) {
    // NB: a tombstone's record, in a map whose commits hand nothing over.
    if persistence.diverts { return }
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
  ///
  /// NB: each step looks only when it has something to look at, and the looking is in
  /// functions of their own. Unspecialized, as this is, a loop over these rows asks the runtime
  /// for its types' metadata, and the compiler hoists those requests to the top of the function
  /// that holds the loop: a cold find, with nothing unapplied, would pay for them all.
  @inlinable
  func unapplied(_ id: T.ID) -> _Unapplied<T> {
    // NB: the write's own deletions are not in a layer until it commits.
    if !persistence.current.isEmpty && currentDeletes(id) { return .deleted }
    if !open.isEmpty, let row = openRow(id) { return row }
    if persistence.openWipes(kind) { return .deleted }
    guard !inFlight.isEmpty || !stuck.isEmpty else { return .unknown }
    return unappliedInFlight(id)
  }

  /// Whether the write under way deleted `id`, or the whole kind.
  @usableFromInline @inline(never)
  func currentDeletes(_ id: T.ID) -> Bool {
    persistence.current.contains {
      $0.deletes(kind, aliases: false) || ($0 as? _RowRemoval<T>)?.id == id
    }
  }

  /// What the open layer's newest row of `id` says, if it has one.
  @usableFromInline @inline(never)
  func openRow(_ id: T.ID) -> _Unapplied<T>? {
    if openIndexed < open.count {
      for position in openIndexed..<open.count { openIndex[open[position].id] = position }
      openIndexed = open.count
    }
    guard let position = openIndex[id] else { return nil }
    return Self.state(open[position])
  }

  /// What the layers in flight, then the rows that did not encode, say of `id`.
  @usableFromInline @inline(never)
  func unappliedInFlight(_ id: T.ID) -> _Unapplied<T> {
    for layer in inFlight.indices.reversed() {
      if inFlightIndex[layer] == nil {
        var index: [T.ID: Int] = [:]
        for (position, row) in inFlight[layer].enumerated() { index[row.id] = position }
        inFlightIndex[layer] = index
      }
      if let position = inFlightIndex[layer]?[id] { return Self.state(inFlight[layer][position]) }
      if persistence.wipes(kind, aliases: false, in: persistence.inFlight[layer]) {
        return .deleted
      }
    }
    return stuck[id].map(Self.state) ?? .unknown
  }

  /// What `row` says of its entity.
  private static func state(_ row: _Row<T>) -> _Unapplied<T> {
    if let value = row.value { return .saved(value, row.stamp) }
    return row.stamp.map { .tombstone($0) } ?? .deleted
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
  @inlinable
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
  @usableFromInline
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
  @usableFromInline
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
  @inlinable
  func admit(_ fetched: _Fetched<T>, _ id: T.ID, _ core: _MapCore) -> _Unapplied<T> {
    if case .saved(let value, let stamp) = fetched { return .saved(value, stamp) }
    return admitAbsent(fetched, id, core)
  }

  /// `admit(_:_:_:)` for what is not a saved record.
  @usableFromInline
  func admitAbsent(_ fetched: _Fetched<T>, _ id: T.ID, _ core: _MapCore) -> _Unapplied<T> {
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
    if persistence.prefetching > 0 {
      touched.insert(id)
      persistence.touchedAny = true
    }
  }

  /// Whether the entity `id` may have changed in the store since a prefetch began reading.
  @inlinable
  func isTouched(_ id: T.ID) -> Bool {
    touchesAll || (!touched.isEmpty && touched.contains(id))
  }

  override func touchApplied(wiped: Bool) {
    if wiped { touchesAll = true }
    for layer in inFlight { for row in layer { touched.insert(row.id) } }
  }

  override func touchAll() {
    touchesAll = true
  }

  override func forgetTouched() {
    touched.removeAll()
    touchesAll = false
  }

  override func decodeExternal(_ change: PersistentChange) -> Result<_ExternalChange, _Undecodable>?
  {
    ops.decodeExternal(self, change)
  }

  override func untouchedNodes(_ core: _MapCore) -> [_AnyNode] { core.untouchedNodes(of: self) }

  override func aliasNodes(_ core: _MapCore) -> [_AnyNode] { core.aliasNodes(of: self) }

  override func reference(forKey key: [UInt8]) -> EntityReference? {
    (try? ops.decodeID(key)).map { EntityReference(T.self, id: $0) }
  }

  /// Whether this map changed the entity `id` since the store last took its writes: a change
  /// not yet applied, or one applied while a prefetch is outstanding (see
  /// `_Persistence.noteApplied(_:)`). For a sync (`_MapCore.applyExternal(_:)`).
  func changedSinceApplied(_ id: T.ID) -> Bool {
    if isTouched(id) { return true }
    if case .unknown = unapplied(id) { return false }
    return true
  }

  /// Marks `id` as unreadable until the write under way ends.
  @usableFromInline
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
    // NB: from what a prefetch read, but for the entities that changed since.
    if let prefetched = persistence.prefetched?.typed(T.self)?.tombstones, !touchesAll,
      case .success(let tombstones) = prefetched
    {
      return tombstones.filter { !isTouched($0.id) }
    }
    switch fetchTombstones() {
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
    case .saved(let values, let stamp): return .saved((values as? [T] ?? []).map { $0.id }, stamp)
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

  /// Reads the record of a resource's answer `name` from the store, and decodes the ids it
  /// names. Calls the store and the decoder only: the map's lock need not be held.
  func fetchAnswer(_ name: String) -> _FetchedAnswer<T.ID> {
    do {
      guard let record = try persistence.store.aliasRecord(named: name) else { return .none }
      let (ids, info) = try _AnswerRecord.decode(T.self, record.payload, persistence.store)
      return .saved(ids, info)
    } catch {
      return .failed("\(error)")
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
