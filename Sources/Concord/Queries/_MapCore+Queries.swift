extension _MapCore {
  /// Runs `start` now, in a write that has changed nothing yet, or when the current write
  /// commits, after the change log has fed the consumers already there: a query starts from
  /// committed state, and never sees a write that was under way when it opened.
  @usableFromInline
  func startNowOrAtCommit(_ start: @escaping () -> Void) {
    if frame.depth == 1 && journal.entries.isEmpty {
      start()
    } else {
      registry.pendingStarts.append(start)
      audience.startsPending = true
    }
  }

  /// Opens a live query of `T` and returns its node, held for a handle: unretained, since that
  /// hold keeps it (rule 6 of `_Lifetime.swift`).
  ///
  /// - Complexity: O(*n* + *m* log *m*) for *n* entities of `T` and *m* matches.
  @inlinable
  func openQuery<T: Identifiable & Sendable>(
    _: T.Type, filter: (@Sendable (T) -> Bool)?, sortedBy: (@Sendable (T, T) -> Bool)?
  ) -> Unmanaged<_Node<[T]>> {
    let table = registry.table(for: T.self)
    // NB: an entity in the store counts as stored: the caller loads them (`openReading`).
    let query = _QueryNode(table: table, filter: filter, sortedBy: sortedBy)
    query.adopt()
    let held = holdForHandle(query)
    startNowOrAtCommit { [self] in
      let consumers = registry.table(for: T.self).makeConsumersIfNeeded()
      query.consumers = consumers
      let nodes = table.slots.nodes.filter { slot in
        slot._withUnsafeGuaranteedRef { filter?($0.value) ?? true }
      }
      consumers.attach(query: query, self)
      query.start(with: nodes, self)
    }
    return held
  }

  /// Opens a live query of the entities of `T` whose `keyPath` is `key`, from the index on
  /// `keyPath`, and returns its node, held for a handle (unretained, as in `openQuery`).
  ///
  /// - Complexity: O(*n*) for *n* entities of `T` when the index is built; O(*m* log *m*) for
  ///   *m* matches otherwise.
  @inlinable
  func openIndexedQuery<T: Identifiable & Sendable, V: Hashable & Sendable>(
    _: T.Type, keyPath: KeyPath<T, V>, key: V, sortedBy: (@Sendable (T, T) -> Bool)?
  ) -> Unmanaged<_Node<[T]>> {
    let table = registry.table(for: T.self)
    let query = _QueryNode(table: table, filter: nil, sortedBy: sortedBy)
    query.adopt()
    let held = holdForHandle(query)
    startNowOrAtCommit { [self] in
      let consumers = registry.table(for: T.self).makeConsumersIfNeeded()
      query.consumers = consumers
      consumers.index(on: keyPath).open(query, key: key, self)
    }
    return held
  }

  /// The entities of `T` for which `filter` is true, in `sortedBy` order, then in the order
  /// they were first stored, as the write under way sees them: a snapshot, for
  /// ``IdentityMap/Transaction/entities(_:filter:sortedBy:)``. For a persisted type, the
  /// store's entities are loaded first, as a query's are, and released when the write ends
  /// unless something holds them.
  ///
  /// - Complexity: O(*n* + *m* log *m*) for *n* entities of `T` (with the store's) and *m*
  ///   results.
  @inlinable
  func entities<T: Identifiable & Sendable>(
    _: T.Type, filter: (@Sendable (T) -> Bool)?, sortedBy: (@Sendable (T, T) -> Bool)?
  ) -> [T] {
    let table = registry.table(for: T.self)
    if table.persisted != nil { loadAll(into: table) }
    var values: [T] = []
    var sequences: [UInt32] = []
    table.slots.forEachNode { slot in
      slot._withUnsafeGuaranteedRef { node in
        guard filter?(node.value) ?? true else { return }
        values.append(node.value)
        sequences.append(node.sequence)
      }
    }
    var positions = Array(values.indices)
    values.withUnsafeBufferPointer { values in
      sequences.withUnsafeBufferPointer { sequences in
        positions.withUnsafeMutableBufferPointer { positions in
          _CreationOrder.sort(positions, of: values, by: sortedBy) { sequences[$0] }
        }
      }
    }
    return positions.map { values[$0] }
  }

  /// Opens a collector of `T`'s changes. NB: attached at once, even in the middle of a write:
  /// it needs no filling, and so it collects the whole write it was opened in.
  @inlinable
  func openCollector<T: Identifiable & Sendable>(_: T.Type) -> _CollectorSink<T> {
    let sink = _CollectorSink<T>()
    registry.table(for: T.self).makeConsumersIfNeeded().attach(sink: sink, self)
    return sink
  }

  /// Feeds the consumers with the committed write's changes, then starts the queries opened
  /// during it.
  ///
  /// Filters, comparators and key paths run here, under the lock; see
  /// ``IdentityMap/query(_:filter:sortedBy:)``.
  func feedConsumers() {
    if audience.consumers > 0 {
      // NB: the queries record themselves in the journal as they change: feed the entities'
      // records only, the ones there before.
      // NB: each node borrowed, not retained: the journal keeps it, in whichever buffer the
      // records the queries append leave it.
      let end = journal.entries.count
      for index in 0..<end where journal.entries[index].previousMark == 0 {
        let node = Unmanaged.passUnretained(journal.entries[index].node)
        guard node._withUnsafeGuaranteedRef({ $0.witness.hasConsumers($0) }),
          let kind = journal.change(at: index)
        else { continue }
        let saved = journal.entries[index].saved
        let stamp = journal.entries[index].stamp
        node._withUnsafeGuaranteedRef { $0.witness.feedConsumers($0, kind, saved, stamp, self) }
      }
    }
    while !registry.pendingStarts.isEmpty {
      let starts = registry.pendingStarts
      registry.pendingStarts = []
      for start in starts { start() }
    }
    audience.startsPending = false
  }

  /// Runs `work` under the lock as soon as it is safe: now, or, when this thread is inside a
  /// frame of the map (a deinit in the middle of a write), when that write ends.
  func detachSoon(_ work: @escaping (_MapCore) -> Void) {
    lock.lock()
    guard frame.depth == 0 else {
      lifetime.deferred.append(.perform(work))
      lock.unlock()
      return
    }
    frame.depth = 1
    work(self)
    endWrite()
  }
}
