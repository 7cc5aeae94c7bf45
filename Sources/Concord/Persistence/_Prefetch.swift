// Read, then admit. A `find` of an entity only the store has, a query or `parents(of:id:)` over
// a persisted type, and a restore's reload read the store and decode what they read with no
// lock of the map held, into a `_Prefetch`; a write then admits it under the exclusive lock,
// where each read of the store (`_Persisted.read`) is answered from the prefetch. So a reader
// of the map never waits behind SQLite or a decoder.
//
// What changed meanwhile wins. While any prefetch is outstanding, every change a commit hands
// over for the store notes its entity as touched in its type's `_Persisted` (a deletion of a
// whole kind touches all of it), and so does every change the writer applies to the store
// (`_Persistence.noteApplied(_:)`), since the prefetch may have read before or after it. A
// read under the lock looks at the changes not yet applied first; then a touched entity is
// never answered from a prefetch: it is read from the store, under the lock, as before. An entity in memory at admission is never replaced by a load. So a write that
// came in between wins by the usual rules, a removal in between is not undone (its tombstone or
// deletion is among the unapplied changes, or read from the store), and an entity that
// reached the store in between is read again.

/// What a map read from its store with none of its locks held, decoded, for a write to admit:
/// per persisted type, the records of some of its entities (and, read level by level, of the
/// persisted entities their values nest that memory lacked), and the store's listing of whole
/// kinds.
///
/// Made by one thread outside the map's lock (`_MapCore.prefetch(_:)`), then read only under
/// it, installed in `_Persistence.prefetched` for the writes that admit it.
@usableFromInline
final class _Prefetch: @unchecked Sendable {
  // NB: @unchecked because it is filled by one thread, then handed to the map's lock, which
  // guards every later access.

  // NB: exclusivity checks off in release builds, as on the core's parts: one thread at a time
  // touches a prefetch (see above), and every persisted write asks these.
  #if DEBUG
    /// What was read of each persisted type, by type.
    @usableFromInline var types: [ObjectIdentifier: _AnyPrefetched] = [:]
    /// Whether a value's entities were asked for (`_MapCore.want(_:in:)`, the root and every
    /// entity it nests): when nothing was wanted, in the exclusive section that asked, memory
    /// had them all; see `_Persistence.foresees`.
    @usableFromInline var walkedValues = false
    /// `types`' values, in the order they were made: each one's `index`.
    @usableFromInline var typesMade: [_AnyPrefetched] = []
    /// For each entity the walk of `walkedValues` met that memory lacked, in the order met,
    /// the `index` of its type; the ids are in that type's `_Prefetched.visitedMissing`.
    @usableFromInline var visitOrder: [Int32] = []
    /// How many entities had left the map's tables when the walk ran (`_Registry.departures`).
    @usableFromInline var departures: UInt64 = 0
  #else
    @exclusivity(unchecked) @usableFromInline var types: [ObjectIdentifier: _AnyPrefetched] = [:]
    @exclusivity(unchecked) @usableFromInline var walkedValues = false
    @exclusivity(unchecked) @usableFromInline var typesMade: [_AnyPrefetched] = []
    @exclusivity(unchecked) @usableFromInline var visitOrder: [Int32] = []
    @exclusivity(unchecked) @usableFromInline var departures: UInt64 = 0
  #endif

  @usableFromInline init() {}

  /// How many entities a write admitting a prefetch, or a lookup of what a prefetch wants,
  /// takes on under the map's exclusive lock at a time: what bounds the wait of a reader
  /// behind a load.
  static let chunk = 128

  /// What was read of `T`, made on first use.
  @inlinable
  func of<T: Identifiable & Sendable>(_ persisted: _Persisted<T>) -> _Prefetched<T> {
    if let found = types[ObjectIdentifier(T.self)] {
      return unsafeDowncast(found, to: _Prefetched<T>.self)
    }
    let made = _Prefetched(persisted)
    made.index = Int32(typesMade.count)
    types[ObjectIdentifier(T.self)] = made
    typesMade.append(made)
    return made
  }

  /// What was read of `T`, if anything.
  @inlinable
  func typed<T: Identifiable & Sendable>(_: T.Type) -> _Prefetched<T>? {
    // NB: not `Optional.map`, which unspecialized code calls as a generic function.
    guard let found = types[ObjectIdentifier(T.self)] else { return nil }
    return unsafeDowncast(found, to: _Prefetched<T>.self)
  }

  /// Whether some type still has ids, or its whole kind, to read.
  @usableFromInline
  var hasWanted: Bool { types.values.contains { $0.hasWanted } }

  /// Under the map's lock: asks for the entity `id` of `persisted`'s type, unless memory has
  /// it.
  @inlinable
  func want<T: Identifiable & Sendable>(
    _ id: T.ID, of persisted: _Persisted<T>, in table: _Table<T>
  ) {
    guard table.node(id) == nil else { return }
    want(missing: id, of: persisted)
  }

  /// Under the map's lock: asks for the entity `id` of `persisted`'s type, which memory was
  /// just found to lack.
  @inlinable
  func want<T: Identifiable & Sendable>(missing id: T.ID, of persisted: _Persisted<T>) {
    let typed = of(persisted)
    if typed.results.isEmpty || typed.results[id] == nil { typed.wanted.append(id) }
  }

  /// Under the map's lock: asks for the entity `id` of `persisted`'s type, which the walk of
  /// a value to write (`walkedValues`) just met and found memory to lack; the walk's order is
  /// kept for `admitVisited(_:)`.
  @inlinable
  func want<T: Identifiable & Sendable>(visited id: T.ID, of persisted: _Persisted<T>) {
    let typed = of(persisted)
    typed.visitedMissing.append(id)
    visitOrder.append(typed.index)
    if typed.results[id] == nil { typed.wanted.append(id) }
  }

  /// In the write admitting the prefetch, before its body: loads the entities the walk met
  /// that memory lacked, in the order it met them, as that body's own walk for missing
  /// entities would have. Right only when no entity left memory since the walk (then every
  /// entity the walk found is still there, and these are the only ones missing).
  ///
  /// - Complexity: O(the entities the walk found missing), plus their loads.
  @usableFromInline
  func admitVisited(_ core: _MapCore) {
    var cursors = [Int](repeating: 0, count: typesMade.count)
    for type in visitOrder {
      let index = Int(type)
      typesMade[index].admitVisited(at: cursors[index], core)
      cursors[index] += 1
    }
  }

  /// Under the map's lock: asks for the alias `name`, which names entities of `persisted`'s
  /// type, and for the entities it names that memory lacks.
  @inlinable
  func want<T: Identifiable & Sendable>(
    alias name: String, of persisted: _Persisted<T>
  ) {
    let typed = of(persisted)
    if typed.aliases[name] == nil { typed.wantedAliases.append(name) }
  }

  /// Under the map's lock: asks for the record of a resource's answer `name`, which names
  /// entities of `persisted`'s type, and for the entities it names that memory lacks.
  func want<T: Identifiable & Sendable>(
    answer name: String, of persisted: _Persisted<T>
  ) {
    let typed = of(persisted)
    if typed.answers[name] == nil { typed.wantedAnswers.append(name) }
  }

  /// Under the map's lock: asks for every entity of `persisted`'s type the store has.
  @inlinable
  func wantAll<T: Identifiable & Sendable>(
    of persisted: _Persisted<T>
  ) {
    let typed = of(persisted)
    typed.wantsAll = true
  }
}

/// What a prefetch read of one persisted type; see `_Prefetched`.
@usableFromInline
class _AnyPrefetched {
  /// How far the admission of the whole kind went in `_Prefetched.listed`.
  @usableFromInline var cursor = 0

  @usableFromInline init() {}

  /// Whether ids, or the whole kind, are still to read.
  var hasWanted: Bool { false }

  /// Reads, decodes and files the records of the ids wanted of this type, with no lock held,
  /// and hands the entities their values nest to `nested`.
  func fetchWanted(_ nested: _WantedEntities) {}

  /// In a write admitting the prefetch: loads up to `count` of the entities the store listed
  /// for the whole kind that memory lacks, from where the last call stopped. Returns whether
  /// any are left.
  func admitListed(_ count: Int, _ core: _MapCore) -> Bool { false }

  /// In the last write admitting the prefetch: loads what the listing could not know (the
  /// changes not yet applied, the entities touched since it was read), or the whole kind
  /// under the lock when the listing failed, and logs what went wrong reading it.
  func admitRestOfKind(_ core: _MapCore) {}

  /// Its position among its prefetch's types (`_Prefetch.typesMade`).
  @usableFromInline var index: Int32 = 0

  /// Loads the entity the walk met `index`-th among those of this type memory lacked, unless
  /// memory has it by now; see `_Prefetch.admitVisited(_:)`.
  func admitVisited(at index: Int, _ core: _MapCore) {}
}

/// What a prefetch read of the persisted type `T`.
@usableFromInline
final class _Prefetched<T: Identifiable & Sendable>: _AnyPrefetched {
  /// The type's persistence: its kind, and how to decode it. NB: strong: a persisted type
  /// lives as long as its map (rule 9 of `_Lifetime.swift`); the prefetch may outlive neither.
  @usableFromInline let persisted: _Persisted<T>
  /// Each entity read, as the store had it.
  @usableFromInline var results: [T.ID: _Fetched<T>] = [:]
  /// The ids of the entities the store listed for the whole kind, tombstones aside, in its
  /// order, when the prefetch read the whole kind; `nil` when it did not, or could not (the
  /// admission then lists the kind under the lock, and logs why).
  @usableFromInline var listed: [T.ID]?
  /// What went wrong reading the listing, to log when it is admitted.
  @usableFromInline var errors: [String] = []
  /// The aliases naming entities of the type still to read, and what was read of each: the
  /// ids it names and its stamp, or how reading it failed.
  @usableFromInline var wantedAliases: [String] = []
  @usableFromInline var aliases: [String: _FetchedAlias<T.ID>] = [:]
  /// The records of resources' answers naming entities of the type still to read, and what
  /// was read of each (see `_AnswerRecord`).
  var wantedAnswers: [String] = []
  var answers: [String: _FetchedAnswer<T.ID>] = [:]
  /// The store's tombstones of the type, when asked for (`wantsTombstones`).
  @usableFromInline var tombstones: Result<[(id: T.ID, stamp: Stamp)], any Error>?
  @usableFromInline var wantsTombstones = false
  /// The ids still to read, for the next round of `_MapCore.prefetch(_:)`.
  @usableFromInline var wanted: [T.ID] = []
  /// Whether the whole kind is still to be read.
  @usableFromInline var wantsAll = false
  /// The entities of `T` the walk of the values to write met that memory lacked, in the order
  /// met; see `_Prefetch.want(visited:of:)`.
  @usableFromInline var visitedMissing: [T.ID] = []
  /// The writes admitting `listed` so far, the entities of `T` memory held before the first,
  /// and how many that one loaded: what the second asks to decide whether to make room for
  /// the rest (`admitListed(_:_:)`).
  var listedWrites = 0
  var countBeforeListed = 0
  var loadedByFirstWrite = 0

  @inlinable
  init(_ persisted: _Persisted<T>) {
    self.persisted = persisted
  }

  override var hasWanted: Bool {
    wantsAll || wantsTombstones || !wanted.isEmpty || !wantedAliases.isEmpty
      || !wantedAnswers.isEmpty
  }

  override func admitVisited(at index: Int, _ core: _MapCore) {
    core.loadIfMissing(T.self, id: visitedMissing[index])
  }

  override func admitListed(_ count: Int, _ core: _MapCore) -> Bool {
    guard let listed else { return false }
    core.withTable(T.self) { table in
      // NB: room for the rest of the entities listed, made by the second write when the first
      // kept at least half of what it loaded. Grown as they came, the table's index moved all
      // its nodes each time it doubled, and the write that grew it past thousands of nodes
      // held the lock five times as long as the others. A load that keeps little (a filtered
      // query's misses are released at the end of each write) or finds the entities in memory
      // makes none; one that stops keeping them gives the room back at its end
      // (`admitRestOfKind`).
      if listedWrites == 0 {
        countBeforeListed = table.slots.count
      } else if listedWrites == 1 && loadedByFirstWrite > 0
        && 2 * (table.slots.count - countBeforeListed) >= loadedByFirstWrite
      {
        table.slots.reserveCapacity(table.slots.count + listed.count - cursor)
      }
      var admitted = 0
      while admitted < count && cursor < listed.count {
        let id = listed[cursor]
        cursor += 1
        if table.node(id) == nil {
          core.load(id, into: table)
          admitted += 1
        }
      }
      if listedWrites == 0 { loadedByFirstWrite = admitted }
      listedWrites += 1
    }
    return cursor < listed.count
  }

  override func admitRestOfKind(_ core: _MapCore) {
    core.withTable(T.self) { table in
      guard listed != nil else { return core.loadAll(into: table) }
      table.slots.shrinkIfSparse()
      for error in errors { core.outbox.log { .persistenceFailed(error) } }
      for id in persisted.unappliedIDs() where table.node(id) == nil {
        core.load(id, into: table)
      }
      if persisted.touchesAll { return core.loadAll(into: table) }
      for id in persisted.touched where table.node(id) == nil { core.load(id, into: table) }
    }
  }

  override func fetchWanted(_ nested: _WantedEntities) {
    // NB: each step runs only when it has something to do, and does it in a function of its
    // own. Unspecialized, as this is, a loop asks the runtime for its types' metadata, and the
    // compiler hoists those requests to the top of the function that holds the loop: a cold
    // find, which wants one id, would pay for every step's.
    if wantsTombstones {
      wantsTombstones = false
      tombstones = persisted.fetchTombstones()
    }
    if !wantedAliases.isEmpty { fetchAliases(nested) }
    if !wantedAnswers.isEmpty { fetchAnswers(nested) }
    let schema = _Schema<T>.entity
    // NB: only an aggregate's values are walked for the entities they nest.
    var decoded: [T]? = schema.isLeaf ? nil : []
    if wantsAll { fetchAll(into: &decoded) }
    wantsAll = false
    if !wanted.isEmpty { fetchIDs(into: &decoded) }
    guard let decoded, !decoded.isEmpty else { return }
    let visitor = _NestedVisitor(wanted: nested)
    for value in decoded { visitor.visitNested(in: value, schema: schema) }
  }

  /// Reads the aliases wanted, and hands the ids they name to `nested`.
  @inline(never)
  private func fetchAliases(_ nested: _WantedEntities) {
    for name in wantedAliases where aliases[name] == nil {
      let fetched = persisted.fetchAlias(name)
      aliases[name] = fetched
      if case .saved(let ids, _) = fetched { nested.want(ids, of: T.self) }
    }
    wantedAliases = []
  }

  /// Reads the resources' answers wanted, and hands the ids they name to `nested`.
  @inline(never)
  private func fetchAnswers(_ nested: _WantedEntities) {
    // NB: a paged list's records are chained (see `_AnswerRecord.swift`): each names the next.
    while let name = wantedAnswers.popLast() {
      guard answers[name] == nil else { continue }
      let fetched = persisted.fetchAnswer(name)
      answers[name] = fetched
      guard case .saved(let ids, let info) = fetched else { continue }
      nested.want(ids, of: T.self)
      if let next = info.paging?.next {
        let list = String(_AnswerRecord.listName(ofRecord: name))
        wantedAnswers.append(_AnswerRecord.pageName(of: list, serial: next))
      }
    }
  }

  /// Reads the whole kind, and its listing; the values read go to `decoded`, unless `nil`.
  @inline(never)
  private func fetchAll(into decoded: inout [T]?) {
    guard let all = persisted.fetchAll() else { return }
    var ids: [T.ID] = []
    ids.reserveCapacity(all.records.count)
    for (id, fetched) in all.records {
      guard results[id] == nil else { continue }
      results[id] = fetched
      if case .saved(let value, _) = fetched {
        ids.append(id)
        decoded?.append(value)
      }
    }
    listed = ids
    errors = all.errors
  }

  /// Reads the ids wanted; the values read go to `decoded`, unless `nil`.
  @inline(never)
  private func fetchIDs(into decoded: inout [T]?) {
    let ids = wanted
    wanted = []
    for id in ids where results[id] == nil {
      let fetched = persisted.fetch(id)
      results[id] = fetched
      if case .saved(let value, _) = fetched { decoded?.append(value) }
    }
  }
}

/// An alias as the store had it when a prefetch read it: the ids it names and its stamp, none,
/// or how reading it failed.
@usableFromInline
enum _FetchedAlias<ID> {
  case saved([ID], Stamp?)
  /// No alias; with a message, one whose ids no longer decode.
  case deleted(String?)
  case failed(String)
}

/// One entity as the store had it when a prefetch read it.
@usableFromInline
enum _Fetched<T> {
  /// A record, decoded, with its stamp.
  case saved(T, Stamp?)
  /// A tombstone, or, with `undecodable`'s message, a record that no longer decodes, which
  /// reads as a removed entity whose stamp is its tombstone.
  case tombstone(Stamp, undecodable: String?)
  /// No record; with a message, a record that no longer decodes and has no stamp.
  case deleted(undecodable: String?)
  /// The store failed to read it: the error's text.
  case failed(String)
}

/// The entities a prefetch is to read next: those its decoded values nest, typed, before the
/// map's lock says which are persisted and missing from memory.
@usableFromInline
final class _WantedEntities {
  /// The ids met, by entity type, each type's in a `_WantedIDs`.
  @usableFromInline var types: [ObjectIdentifier: _AnyWantedIDs] = [:]

  @usableFromInline init() {}

  /// Notes `child` and the entities it nests, at any depth: a step of `visitor`'s walk.
  @inlinable
  func visit<C: Identifiable & Sendable>(_ child: C, _ visitor: _NestedVisitor) {
    let wanted = ids(of: C.self)
    wanted.ids.append(child.id)
    // NB: every depth, as `_MapCore.loadMissing(in:schema:)` loads them when the value is
    // admitted.
    visitor.visitNested(in: child, schema: wanted.schema)
  }

  @inlinable var isEmpty: Bool { types.isEmpty }

  /// Asks for the entities `ids` of `C`, met by id: an alias's.
  func want<C: Identifiable & Sendable>(_ ids: [C.ID], of _: C.Type) {
    self.ids(of: C.self).ids += ids
  }

  /// The ids of `C` met so far, made on first use.
  @usableFromInline
  func ids<C: Identifiable & Sendable>(of _: C.Type) -> _WantedIDs<C> {
    if let found = types[ObjectIdentifier(C.self)] {
      return unsafeDowncast(found, to: _WantedIDs<C>.self)
    }
    let made = _WantedIDs<C>()
    types[ObjectIdentifier(C.self)] = made
    return made
  }
}

/// The ids of one entity type a prefetch met; see `_WantedIDs`.
@usableFromInline
class _AnyWantedIDs {
  @usableFromInline init() {}

  /// Hands the ids of a persisted type that memory lacks, and that `prefetch` has not read
  /// yet, to `prefetch` for its next round. Takes the map's lock for each chunk of ids.
  func want(into prefetch: _Prefetch, _ core: _MapCore) {}
}

/// The ids of the entities of `C` a prefetch met.
@usableFromInline
final class _WantedIDs<C: Identifiable & Sendable>: _AnyWantedIDs {
  @usableFromInline var ids: [C.ID] = []
  /// `C`'s schema, looked up once for every entity of `C` met.
  @usableFromInline let schema = _Schema<C>.entity

  override func want(into prefetch: _Prefetch, _ core: _MapCore) {
    var start = 0
    while start < ids.count {
      let end = min(start + _Prefetch.chunk, ids.count)
      // NB: a chunk at a time, so that the lock is never held long.
      core.lock.lockAfterWaitingReaders()
      defer { core.lock.unlock() }
      let goesOn = { () -> Bool in
        guard let table = core.existingTable(for: C.self) else { return false }
        let typed = unsafeDowncast(table.takeUnretainedValue(), to: _Table<C>.self)
        guard let persisted = typed.persisted else { return false }
        for id in ids[start..<end] { prefetch.want(id, of: persisted, in: typed) }
        return true
      }()
      guard goesOn else { return }
      start = end
    }
  }
}
