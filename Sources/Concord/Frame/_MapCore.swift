/// Everything one `IdentityMap` owns, behind its lock: the frame, and the parts it hands a
/// write to. `ARCHITECTURE.md`, at the top of the repository, draws the whole.
///
/// Each folder is a part, with the behaviour over its own state:
///
/// - `Frame/`: the lock, the write frame (this file) and the `_Audience`: who may write now, who
///   reads what a write changes, and what happens when the outermost write ends.
/// - `Registry/`: nodes, the tables of entities (`_Table<T>`, with each type's witnesses), the
///   alias slots.
/// - `Graph/`: the one write pass (`_Pass`: claims, apply, settle), cycles, removal.
/// - `Journal/`: each node's state before the write touched it, transactions, rollback.
/// - `Lifetime/`: holds, pins, links, and the purge of what nobody holds.
/// - `Outbox/`: the changes to publish, and what to log and deliver once the lock is released.
/// - `Observation/`, `Queries/`, `Optimistic/`, `Persistence/`: subscribers, consumers,
///   layers and the store, each fed by the commit.
///
/// The facade (`IdentityMap`) takes the lock with ``write(_:)`` or ``read(_:)``. When the
/// outermost write ends, ``endWrite()`` commits: it feeds the consumers, turns the journal into
/// changes, purges what nobody holds, takes the outbox, releases the lock, and only then calls
/// user code: loggers, callbacks, streams.
@usableFromInline
final class _MapCore: @unchecked Sendable {
  // NB: @unchecked because every mutable part, and every node reachable from here, is only
  // written while holding `lock` exclusively and read while holding it (shared or exclusive),
  // except the atomics: nodes' external hold counts and `handleStripes`. Subscribers'
  // delivery state is guarded by `deliveryLock`.

  /// Guards all the map's state. Exclusive for writes, and re-entrant then, so that a write
  /// made from inside an `update` body or a transaction body joins the enclosing write instead
  /// of deadlocking; shared for the reads that provably only read (``readShared(_:)``).
  @usableFromInline let lock = ReadWriteLock()
  /// Guards subscribers' delivery state. Never held while calling out, never held while taking
  /// `lock`.
  @usableFromInline let deliveryLock = Lock()

  // NB: the parts are structs, each documented on its type. Exclusivity checks are off for them
  // in release builds only: the lock already makes every access exclusive between threads, and
  // the checks cost a good share of a write once the parts are `@usableFromInline`.
  #if DEBUG
    @usableFromInline var frame = _Frame()
    @usableFromInline var registry = _Registry()
    @usableFromInline var journal = _Journal()
    @usableFromInline var lifetime: _Lifetime
    @usableFromInline var outbox: _Outbox
    @usableFromInline var layers = _Layers()
    @usableFromInline var audience = _Audience()
    @usableFromInline var tombstones: _Tombstones
  #else
    @exclusivity(unchecked) @usableFromInline var frame = _Frame()
    @exclusivity(unchecked) @usableFromInline var registry = _Registry()
    @exclusivity(unchecked) @usableFromInline var journal = _Journal()
    @exclusivity(unchecked) @usableFromInline var lifetime: _Lifetime
    @exclusivity(unchecked) @usableFromInline var outbox: _Outbox
    @exclusivity(unchecked) @usableFromInline var layers = _Layers()
    @exclusivity(unchecked) @usableFromInline var audience = _Audience()
    @exclusivity(unchecked) @usableFromInline var tombstones: _Tombstones
  #endif

  /// The write pass: claims, applies and settles every value a write stores; see `_Pass`.
  @usableFromInline let pass = _Pass()

  /// The handles made under the shared lock, less every handle released; see
  /// `_Lifetime.handles`.
  @usableFromInline let handleStripes = _StripedCounter()

  /// Told of every change, after the lock is released; see `_Outbox.events`.
  /// NB: a constant of the core, not a copy per write: copying an optional existential was a
  /// good share of a write that only delivers.
  @usableFromInline let logger: (any IdentityMapLogger)?

  /// Where the persisted types go; see `_Persistence`.
  @usableFromInline let persistence: _Persistence?

  @usableFromInline
  init(
    logger: (any IdentityMapLogger)?, retention: RetentionPolicy = .none,
    persistence store: (any PersistentStore)? = nil, tombstones: TombstonePolicy = .default
  ) {
    self.logger = logger
    self.tombstones = _Tombstones(tombstones)
    outbox = _Outbox(isLogging: logger != nil)
    if logger?.logsChangedValues == true {
      audience.logsChangedValues = true
      audience.consumers = 1
    }
    lifetime = _Lifetime(retention: retention)
    let lock = lock
    persistence = store.map { _Persistence(store: $0, logger: logger, mapLock: lock) }
    pass._core = self
    registry.core = self
    pass.isLogging = logger != nil
  }

  // MARK: Entering and leaving the lock

  /// Runs `body` under the lock without writing.
  ///
  /// Reads are allowed anywhere, even from user code the engine calls in the middle of a write
  /// (an `==`, say); such a read sees the write half done.
  @inlinable
  func read<R>(_ body: () -> R) -> R {
    lock.lock()
    frame.depth += 1
    defer {
      if frame.depth == 1 && (lifetime.hasWork || !layers.deferred.isEmpty) {
        // NB: a handle released during the read (in a value's deinit, say) still counts at once.
        endWrite()
      } else {
        frame.depth -= 1
        lock.unlock()
      }
    }
    return body()
  }

  /// Runs `body` under the lock shared with other readers, or returns `nil` without running
  /// it when the calling thread holds the lock exclusively (it is inside one of this map's
  /// frames): the caller then takes its exclusive path, through ``read(_:)``.
  ///
  /// NB: `read(_:)` stays exclusive: many of its callers change the map (attaching a
  /// subscriber, taking a hold, settling what a deinit left). `body` must only read: change
  /// nothing but atomic hold counts (see `_AnyNode+Holds.swift`), call no user code but an
  /// id's hashing and `==`, and drop nothing whose deinit could reach the map. Several threads
  /// run it at once, and a thread that holds the lock shared must not take it again (see
  /// `ReadWriteLock.lockShared()`).
  @inlinable
  func readShared<R>(_ body: () -> R) -> R? {
    guard lock.lockShared() else { return nil }
    defer { lock.unlockShared() }
    return body()
  }

  /// Runs `body`, which only reads (see ``readShared(_:)``), under the lock shared with other
  /// readers, or under the exclusive hold the calling thread already has.
  @inlinable
  func readOnly<R>(_ body: () -> R) -> R {
    readShared(body) ?? read(body)
  }

  /// Runs `body` as a write. The outermost write then commits, releases the lock, and delivers
  /// what changed; a nested write (from an `update` or transaction body, on the same thread) is
  /// part of the enclosing one.
  ///
  /// A write started from user code the engine calls in the middle of a write stops the
  /// program; see ``runUserCode(_:)``.
  ///
  /// - Parameters:
  ///   - lowering: Whether the write goes underneath the optimistic layers (every write but a
  ///     layer's own); see `_Layers`.
  ///   - afterWaitingReaders: Whether the readers waiting for the lock get in first: for the
  ///     writes of a load admitted in chunks (see `ReadWriteLock.lockAfterWaitingReaders()`).
  @inlinable
  func write<R>(
    lowering: Bool = true, afterWaitingReaders: Bool = false, _ body: () throws -> R
  ) rethrows -> R {
    if afterWaitingReaders { lock.lockAfterWaitingReaders() } else { lock.lock() }
    return try writeHoldingLock(lowering: lowering, body)
  }

  /// Runs `body` as ``write(lowering:afterWaitingReaders:_:)`` does, for a caller that took the
  /// lock for it: the write gives that hold back when it ends. For a caller that looks at the
  /// map under the lock before it decides to write (`end(_:commit:dropped:answer:)`).
  ///
  /// NB: always inlined, as the body of `write` was before it was split out: left to the
  /// optimizer, it became a function of its own, and every write's path with it (a store
  /// of a new entity ran 13% more instructions).
  @inlinable @inline(__always)
  func writeHoldingLock<R>(lowering: Bool, _ body: () throws -> R) rethrows -> R {
    if frame.depth > 0 && frame.phase == .engine { _writeInTheMiddleOfAWrite() }
    frame.depth += 1
    let phase = frame.phase
    frame.phase = .engine
    if frame.depth > 1 {
      defer {
        frame.phase = phase
        frame.depth -= 1
        lock.unlock()
      }
      return try body()
    }
    defer { endWrite() }
    if lowering && layers.isActive { lowerShadows() }
    return try body()
  }

  /// Runs user code that may write to the map (an `update` body, a transaction body): its
  /// writes join the current write.
  @inlinable
  func runUserCode<R>(_ body: () throws -> R) rethrows -> R {
    let phase = frame.phase
    frame.phase = .open
    defer { frame.phase = phase }
    return try body()
  }

  /// Stops the program when the calling thread is inside one of the map's reads or writes:
  /// `call` waits for the persistence writer, which needs the lock.
  func checkOutsideWrites(_ call: String) {
    lock.lock()
    // NB: the lock is recursive: held, the depth is this thread's own.
    let isInside = frame.depth > 0
    lock.unlock()
    precondition(
      !isInside,
      "Concord: \(call) was called inside a write (an `update` or transaction body, or code "
        + "the map calls while it writes); it would wait for the store's writer, which waits "
        + "for the write to end. Call it after the write.")
  }

  @usableFromInline
  func _writeInTheMiddleOfAWrite() -> Never {
    preconditionFailure(
      """
      Concord: the map was written to by code it called in the middle of a write: an `==`, a \
      key path's getter or setter, a merge, a filter or comparator, or the deinit of a value \
      the write replaced. That code may read the map, but writing would corrupt the write \
      under way. Write from an `update` or transaction body, or from an `observe` callback.
      """)
  }

  /// Ends the outermost write: commits, releases the lock, then logs and delivers.
  ///
  /// NB: this may free the map, on its own stack. When the write gave back the last hold that
  /// pinned the map (see `_Lifetime.unpin(into:)`), `outcome` carries the map's retain of itself, and the
  /// caller may have reached the map unretained (a handle's deinit does), so that retain is
  /// the map's last: the map goes with `outcome`. So `outcome` is released by the last
  /// statement below, and neither this method nor any caller touches `self` after it returns.
  /// `MapTeardownTests` drops the last handle of a map from a callback, a deinit and a
  /// transaction body, under AddressSanitizer in CI.
  @usableFromInline
  func endWrite() {
    guard
      !journal.entries.isEmpty || !journal.stashes.isEmpty || lifetime.hasWork || !outbox.isIdle
        || audience.startsPending || audience.underLayers || !layers.deferred.isEmpty
        || !tombstones.undo.isEmpty || !registry.renumbering.isEmpty
    else {
      // NB: a write published directly (see `publishesDirectly`) of a persisted type leaves
      // only its change for the store: nothing else of a commit has work to do.
      if let persistence { persistence.handOver() }
      #if CONCORD_INTERNAL_CHECKS
        // NB: every node while the map is small; the map-wide counts once it is large.
        _checkInvariants(around: registry.liveCount > 512 ? [] : nil)
      #endif
      frame.depth -= 1
      lock.unlock()
      return
    }
    frame.phase = .engine
    if audience.underLayers { raiseShadows() }
    commit()
    // NB: a commit that left nothing to log, deliver or release after the lock (a write that
    // changed nothing anyone sees, say one underneath a layer) hands over no outcome: swapping
    // out its empty parts and releasing them after the lock retained and released each. An
    // empty outcome holds nothing, so not the map's retain of itself either.
    if outbox.isIdle && layers.deferred.isEmpty {
      frame.depth -= 1
      lock.unlock()
      return
    }
    let outcome = outbox.takeOutcome()
    var deferredLayers: [_LayerEnd] = []
    swap(&deferredLayers, &layers.deferred)
    frame.depth -= 1
    lock.unlock()
    outcome.run(logger: logger, deliveryLock: deliveryLock)
    if !deferredLayers.isEmpty { endDeferredLayers(deferredLayers) }
    // NB: the map's last use here: see above.
    withExtendedLifetime(outcome) {}
  }

  /// Publishes the write's changes, settles lifetimes, and forgets the write.
  func commit() {
    if audience.consumers > 0 || audience.startsPending { feedConsumers() }
    if !tombstones.undo.isEmpty { tombstones.undo.removeAll(keepingCapacity: true) }
    // NB: under the lock, so that commits reach the store in commit order.
    persistence?.handOver()
    // NB: a write that published directly (see `publishesDirectly`) leaves an empty journal.
    if !journal.entries.isEmpty || !outbox.initials.isEmpty {
      outbox.publish(&journal, audience)
    }
    if lifetime.hasWork || lifetime.buffer.overflows { settleLifetimes() }
    #if CONCORD_INTERNAL_CHECKS
      // NB: every node while the map is small; around the write's nodes once it is large.
      let touched = registry.liveCount > 512 ? journal.entries.map { $0.node } : nil
    #endif
    journal.forget()
    if !registry.renumbering.isEmpty { renumberTables() }
    #if CONCORD_INTERNAL_CHECKS
      _checkInvariants(around: touched)
    #endif
  }

  /// Renumbers the tables that asked to be (`_Table.scheduleRenumbering()`): after the
  /// journal is forgotten, when no rollback can bring back a node numbered before.
  func renumberTables() {
    let tables = registry.renumbering
    registry.renumbering = []
    for table in tables { table._withUnsafeGuaranteedRef { $0.renumber() } }
  }

  // MARK: Publishing directly

  /// Publishes a change made without the journal (see `_Journal.publishesDirectly`), as the
  /// commit would have, and persists it when its type is persisted. `stampBefore` is the
  /// node's stamp before the write.
  @inlinable
  func publishDirectly(_ node: _AnyNode, _ kind: _ChangeKind, stampBefore: Stamp) {
    outbox.publish(node, kind)
    if audience.persistedTypes > 0 {
      node.witness.feedConsumers(node, kind, _JournalEntry.notSaved, stampBefore, self)
    }
  }

  // MARK: What the facade asks

  /// Whether the map was made with a store.
  @inlinable var hasStore: Bool { persistence != nil }

  /// Whether some entity type is persisted.
  @inlinable var persistsTypes: Bool { audience.persistedTypes > 0 }

  /// The version of the map's deliveries: of two reads under the lock, the one at the higher
  /// version is newer.
  @inlinable var deliveryVersion: UInt64 { outbox.version }

  /// Whether the calling thread, which holds the lock, is in the outermost write.
  @inlinable var isOutermost: Bool { frame.depth == 1 }

  /// The number of live entities; see ``IdentityMap/count``.
  @inlinable var liveCount: Int { registry.liveCount }

  /// The witness of the single aliases of `T`.
  @inlinable
  func aliasWitness<T: Identifiable & Sendable>(of _: T.Type) -> _Witness {
    registry.table(for: T.self).aliasWitness
  }

  /// The witness of the collection aliases of `T`.
  @inlinable
  func collectionAliasWitness<T: Identifiable & Sendable>(of _: T.Type) -> _Witness {
    registry.table(for: T.self).collectionAliasWitness
  }

  /// The slot of the single alias `id` of `T`, made empty if there is none.
  @inlinable
  func aliasSlot<T: Identifiable & Sendable>(_ id: _AliasID, of _: T.Type) -> _AliasNode<T> {
    registry.aliasSlot(id, of: T.self)
  }

  /// The slot of the collection alias `id` of `T`, made empty if there is none.
  @inlinable
  func collectionAliasSlot<T: Identifiable & Sendable>(_ id: _AliasID, of _: T.Type)
    -> _AliasNode<[T]>
  {
    registry.collectionAliasSlot(id, of: T.self)
  }

  // MARK: Tables
  //
  // How the core finds the table of an entity type: the last one looked up, then its registry's
  // list (see `_Registry`).

  /// The table of entity type `T`, unretained, or `nil` if it has none yet.
  ///
  /// NB: unlike `cachedTable(for:)`, it changes nothing, neither the last table looked up nor
  /// the tables: readers sharing the lock call it at once.
  @inlinable
  func existingTable<T: Identifiable & Sendable>(for _: T.Type) -> Unmanaged<_AnyTable>? {
    let key = ObjectIdentifier(T.self)
    if registry.lastKey == key { return registry.lastTable }
    return lookUpTable(key)
  }

  /// `existingTable(for:)` past the last table looked up.
  @usableFromInline @inline(never)
  func lookUpTable(_ key: ObjectIdentifier) -> Unmanaged<_AnyTable>? {
    registry.position(of: key).map { registry.tableRefs[$0] }
  }

  /// Calls `body` with the table of entity type `T`, borrowed without reference counting (rule
  /// 1 of `_Lifetime.swift`).
  @inlinable
  func withTable<T: Identifiable & Sendable, R>(_: T.Type, _ body: (_Table<T>) -> R) -> R {
    registry.cachedTable(for: T.self)._withUnsafeGuaranteedRef {
      body(unsafeDowncast($0, to: _Table<T>.self))
    }
  }
}
