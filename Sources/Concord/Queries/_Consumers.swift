/// A query that matches with a filter (or matches everything), and its filter.
@usableFromInline
typealias _FilteredQuery<T: Identifiable & Sendable> = (
  query: Unmanaged<_QueryNode<T>>, filter: (@Sendable (T) -> Bool)?
)

/// The live queries, indexes and collectors of entity type `T`: what the change log feeds when
/// a write to a `T` commits.
@usableFromInline
final class _Consumers<T: Identifiable & Sendable> {
  /// NB: unowned(unsafe), by rule 1 of `_Lifetime.swift`: a map's tables live as long as the
  /// map, and the table holds these consumers.
  @usableFromInline unowned(unsafe) let table: _Table<T>
  /// Queries that match with a filter (or match everything), each fed every change of `T`, and
  /// their filters. NB: unmanaged, beside their filters, so that the loop over them, made on
  /// every write of a `T`, neither retains each query nor loads each closure from it. A query
  /// is listed only while started, and detaches before its node can go (rule 8 of
  /// `_Lifetime.swift`): a purge detaches it, and the purged node waits in the graveyard.
  ///
  /// NB: see `_AnyNode.s` on exclusivity checks: these three are read on every write of a `T`.
  #if DEBUG
    @usableFromInline var filtered: [_FilteredQuery<T>] = []
    /// Indexes, each on one key path, with their queries.
    @usableFromInline var indexes: [_AnyIndex<T>] = []
    @usableFromInline var sinks: [_CollectorSink<T>] = []
  #else
    @exclusivity(unchecked) @usableFromInline var filtered: [_FilteredQuery<T>] = []
    /// Indexes, each on one key path, with their queries.
    @exclusivity(unchecked) @usableFromInline var indexes: [_AnyIndex<T>] = []
    @exclusivity(unchecked) @usableFromInline var sinks: [_CollectorSink<T>] = []
  #endif
  /// Queries (filtered or indexed) and collectors attached.
  @usableFromInline var count = 0
  @inlinable
  init(table: _Table<T>) {
    self.table = table
  }

  /// The nodes of every query, for `_checkInvariants`.
  @usableFromInline
  var queryNodes: [_AnyNode] {
    filtered.map { $0.query.takeUnretainedValue() } + indexes.flatMap { $0.queryNodes }
  }

  /// Tells every consumer what the committed write did to `node`; `old` is its value before.
  /// Called by the witness of `T`'s entities (`_Table.entityHooks()`), specialized.
  @inlinable
  func _feed(_ node: _EntityNode<T>, _ kind: _ChangeKind, old: T?, _ core: _MapCore) {
    _feedQueries(node, kind, old: old, core)
    guard !sinks.isEmpty else { return }
    let change: EntityChange<T>
    switch kind {
    case .inserted: change = .inserted(node.value)
    case .updated: change = .updated(node.value)
    case .removed: change = .removed(node.value)
    case .unchanged: return
    }
    // NB: borrowed from the array, which keeps them.
    sinks.withUnsafeBufferPointer { sinks in
      for sink in sinks { sink.collect(change) }
    }
  }

  /// `_feed(_:_:old:_:)` for the queries and indexes only: what a restore tells them of an
  /// entity it brought into memory, which collectors do not hear of.
  @inlinable
  func _feedQueries(_ node: _EntityNode<T>, _ kind: _ChangeKind, old: T?, _ core: _MapCore) {
    if !filtered.isEmpty {
      let new = node.value
      filtered.withUnsafeBufferPointer { entries in
        for entry in entries.indices {
          let matches = kind != .removed && (entries[entry].filter?(new) ?? true)
          entries[entry].query._withUnsafeGuaranteedRef { query in
            if matches {
              query.place(node, old: old, kind, core)
            } else {
              query.drop(node, old: old, core)
            }
          }
        }
      }
    }
    for index in indexes { index.ops.feed(index, node, kind, old, core) }
  }

  /// What is wrong with the indexes, if anything; for `_checkInvariants`.
  @usableFromInline
  var problem: String? {
    indexes.lazy.compactMap { $0.problem(self.table) }.first
  }

  /// Forgets `node`, which left the map without a change (it was released).
  @usableFromInline
  func forget(_ node: _EntityNode<T>) {
    for index in indexes { index.forget(node) }
  }

  // MARK: Attaching and detaching

  @usableFromInline
  func attach(query: _QueryNode<T>, _ core: _MapCore) {
    filtered.append((.passUnretained(query), query.filter))
    counted(+1, core)
  }

  @usableFromInline
  func detach(query: _QueryNode<T>, _ core: _MapCore) {
    filtered.removeAll { $0.query.toOpaque() == Unmanaged.passUnretained(query).toOpaque() }
    counted(-1, core)
  }

  @usableFromInline
  func attach(sink: _CollectorSink<T>, _ core: _MapCore) {
    sinks.append(sink)
    counted(+1, core)
  }

  func detach(sink: _CollectorSink<T>, _ core: _MapCore) {
    guard let index = sinks.firstIndex(where: { $0 === sink }) else { return }
    sinks.remove(at: index)
    counted(-1, core)
  }

  /// The index on `keyPath`, built from the table on first use.
  ///
  /// - Complexity: O(entities of `T`) the first time, O(indexes of `T`) after.
  @inlinable
  func index<V: Hashable>(on keyPath: KeyPath<T, V>) -> _Index<T, V> {
    if let found = indexes.first(where: { $0.keyPath == keyPath }) {
      return unsafeDowncast(found, to: _Index<T, V>.self)
    }
    let made = _Index(consumers: self, keyPath: keyPath)
    table.slots.forEachNode { made.file($0.takeUnretainedValue()) }
    indexes.append(made)
    return made
  }

  @usableFromInline
  func drop(index: _AnyIndex<T>) {
    indexes.removeAll { $0 === index }
  }

  /// Keeps the counts when a query or collector is attached (+1) or detached (-1): the
  /// table's consumers and the map's. Without any, the table forgets this object, so that
  /// writes to `T` skip the feed.
  @usableFromInline
  func counted(_ delta: Int, _ core: _MapCore) {
    count += delta
    core.audience.consumersChanged(by: delta)
    if count == 0 { table.consumers = nil }
  }
}

/// A secondary index of entity type `T` on one key path, whatever the key's type.
@usableFromInline
class _AnyIndex<T: Identifiable & Sendable> {
  @usableFromInline let keyPath: AnyKeyPath
  /// What needs the key's type, from the subclass, specialized.
  @usableFromInline let ops: _IndexOps<T>

  @inlinable
  init(keyPath: AnyKeyPath, ops: _IndexOps<T>) {
    self.keyPath = keyPath
    self.ops = ops
  }

  /// The index's live queries.
  final var queryNodes: [_AnyNode] { ops.queryNodes(self) }

  /// Forgets `node`, which left the map without a change (it was released).
  final func forget(_ node: _EntityNode<T>) { ops.forget(self, node) }

  /// What is wrong with the index, if anything; for `_checkInvariants`.
  final func problem(_ table: _Table<T>) -> String? { ops.problem(self, table) }
}

/// The operations of an index of `T` that need its key's type: `_Index<T, V>`'s, made where
/// `V` is known.
@usableFromInline
struct _IndexOps<T: Identifiable & Sendable> {
  /// `_Index._feed`.
  @usableFromInline let feed: (_AnyIndex<T>, _EntityNode<T>, _ChangeKind, T?, _MapCore) -> Void
  @usableFromInline let forget: (_AnyIndex<T>, _EntityNode<T>) -> Void
  @usableFromInline let queryNodes: (_AnyIndex<T>) -> [_AnyNode]
  @usableFromInline let problem: (_AnyIndex<T>, _Table<T>) -> String?

  @inlinable
  init<V: Hashable>(key _: V.Type) {
    func index(_ erased: _AnyIndex<T>) -> _Index<T, V> {
      unsafeDowncast(erased, to: _Index<T, V>.self)
    }
    feed = { index($0)._feed($1, $2, old: $3, $4) }
    forget = { index($0)._forget($1) }
    queryNodes = { index($0).queries.values.flatMap { $0 } }
    problem = { index($0)._problem($1) }
  }
}

/// A secondary index of `T` on a key path to a `V`: the entities of each key, and the
/// indexed queries of each key.
///
/// A write costs O(1) index work (two hash lookups, and a move between buckets when the key
/// changed), however many queries are open; then each query of the old and new key does its
/// own O(log *m*) work.
@usableFromInline
final class _Index<T: Identifiable & Sendable, V: Hashable>: _AnyIndex<T> {
  /// NB: unowned(unsafe), by rule 8 of `_Lifetime.swift`: the consumers own this index (in
  /// `indexes`), and each query on it keeps them (`_QueryNode.consumers`) until it has left the
  /// index, so the index never outlives them, and they outlive every call it makes.
  @usableFromInline unowned(unsafe) let consumers: _Consumers<T>
  @usableFromInline let path: KeyPath<T, V>
  /// The entities of each key. NB: unmanaged and keyed by node, by rule 8 of `_Lifetime.swift`:
  /// the index holds nothing; a node leaves it when it is removed (with the change log) or
  /// purged (`forget`), so every node filed is in its table (rule 2).
  @usableFromInline var buckets: [V: [ObjectIdentifier: Unmanaged<_EntityNode<T>>]] = [:]
  /// The key each node was filed under.
  @usableFromInline var keys: [ObjectIdentifier: V] = [:]
  /// The open queries of each key.
  @usableFromInline var queries: [V: [_QueryNode<T>]] = [:]

  @inlinable
  init(consumers: _Consumers<T>, keyPath: KeyPath<T, V>) {
    self.consumers = consumers
    path = keyPath
    super.init(keyPath: keyPath, ops: _IndexOps(key: V.self))
  }

  /// Files `node` under its current key; returns the key it was filed under before, if it
  /// differs.
  @inlinable @discardableResult
  func file(_ node: _EntityNode<T>) -> V? {
    let id = ObjectIdentifier(node)
    let key = node.value[keyPath: path]
    let previous = keys.updateValue(key, forKey: id)
    guard previous != key else { return nil }
    if let previous { unfile(id, from: previous) }
    buckets[key, default: [:]][id] = .passUnretained(node)
    return previous
  }

  @inlinable
  func unfile(_ id: ObjectIdentifier, from key: V) {
    buckets[key]?.removeValue(forKey: id)
    if buckets[key]?.isEmpty == true { buckets[key] = nil }
  }

  @inlinable
  func _feed(_ node: _EntityNode<T>, _ kind: _ChangeKind, old: T?, _ core: _MapCore) {
    if kind == .removed {
      guard let key = keys.removeValue(forKey: ObjectIdentifier(node)) else { return }
      unfile(ObjectIdentifier(node), from: key)
      for query in queries[key] ?? [] { query.drop(node, old: old, core) }
      return
    }
    if let previous = file(node) {
      for query in queries[previous] ?? [] { query.drop(node, old: old, core) }
    }
    for query in queries[node.value[keyPath: path]] ?? [] {
      query.place(node, old: old, kind, core)
    }
  }

  @usableFromInline
  func _problem(_ table: _Table<T>) -> String? {
    guard keys.count == table.count else {
      return "the index on \(path) files \(keys.count) of \(table.count) entities"
    }
    for slot in table.slots.nodes {
      let node = slot.takeUnretainedValue()
      let key = node.value[keyPath: path]
      guard keys[ObjectIdentifier(node)] == key,
        buckets[key]?[ObjectIdentifier(node)]?.toOpaque() == slot.toOpaque()
      else { return "the index on \(path) files an entity under a key it no longer has" }
    }
    return nil
  }

  @inlinable
  func _forget(_ node: _EntityNode<T>) {
    guard let key = keys.removeValue(forKey: ObjectIdentifier(node)) else { return }
    unfile(ObjectIdentifier(node), from: key)
  }

  /// Starts `query` on the entities of `key`.
  ///
  /// - Complexity: O(*m* log *m*) for *m* entities of the key: it never visits the others.
  @inlinable
  func open(_ query: _QueryNode<T>, key: V, _ core: _MapCore) {
    queries[key, default: []].append(query)
    consumers.counted(+1, core)
    // NB: unowned (checked): the query calls this itself, while it keeps the consumers that
    // own this index (rule 8 of `_Lifetime.swift`).
    query.leaveIndex = { [unowned self, unowned query] core in
      self.queries[key]?.removeAll { $0 === query }
      if self.queries[key]?.isEmpty == true { self.queries[key] = nil }
      self.consumers.counted(-1, core)
      if self.queries.isEmpty { self.consumers.drop(index: self) }
    }
    query.start(with: buckets[key].map { Array($0.values) } ?? [], core)
  }
}
