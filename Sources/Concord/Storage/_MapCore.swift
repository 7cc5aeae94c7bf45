/// Everything one `IdentityMap` owns, behind its lock.
///
/// Data flows one way. A public method takes the lock with ``write(_:)`` or ``read(_:)``; the
/// graph and storage code mutates nodes and records in ``batch`` what must be told; when the
/// outermost write ends, ``write(_:)`` settles lifetimes, takes the batch's deliveries, releases
/// the lock, and only then calls user code: loggers, callbacks, streams.
@usableFromInline
final class _MapCore: @unchecked Sendable {
  // NB: @unchecked because every mutable field and every node reachable from here is only
  // touched while holding `lock`; subscribers' delivery state is guarded by `deliveryLock`.

  /// Guards all the map's state. Recursive, so that a write made from inside an `update` body
  /// or a transaction body joins the enclosing write instead of deadlocking.
  @usableFromInline let lock = Lock(recursive: true)
  /// Guards subscribers' delivery state. Never held while calling out, never held while taking
  /// `lock`.
  let deliveryLock = Lock()
  let logger: (any IdentityMapLogger)?
  /// Whether there is a logger. NB: a Bool, because testing the optional existential copies it.
  @usableFromInline let isLogging: Bool

  // MARK: State guarded by `lock`

  /// One table per entity type.
  #if DEBUG
    private var tables: [ObjectIdentifier: _AnyTable] = [:]
  #else
    @exclusivity(unchecked) private var tables: [ObjectIdentifier: _AnyTable] = [:]
  #endif
  /// The last table looked up, by type: most calls in a row are about one type.
  /// NB: unmanaged: tables live as long as the map, and the hot path then borrows the table
  /// without a retain and release.
  #if DEBUG
    @usableFromInline var lastTableKey: ObjectIdentifier?
    @usableFromInline var lastTable: Unmanaged<_AnyTable>?
  #else
    @exclusivity(unchecked) @usableFromInline var lastTableKey: ObjectIdentifier?
    @exclusivity(unchecked) @usableFromInline var lastTable: Unmanaged<_AnyTable>?
  #endif
  /// How many handles on this map's nodes are alive, and the reference that keeps the map
  /// alive meanwhile. NB: handles hold the map unowned, which spares two atomic reference-count
  /// operations on the shared map object per `find` and per release; the map holds itself
  /// while any handle lives instead.
  #if DEBUG
    @usableFromInline var liveHandles = 0
    @usableFromInline var selfRetain: _MapCore?
  #else
    @exclusivity(unchecked) @usableFromInline var liveHandles = 0
    @exclusivity(unchecked) @usableFromInline var selfRetain: _MapCore?
  #endif
  /// The alias slots.
  #if DEBUG
    var aliases: [_AliasID: _AnyNode] = [:]
  #else
    @exclusivity(unchecked) var aliases: [_AliasID: _AnyNode] = [:]
  #endif
  /// Registered entity nodes, all types together.
  #if DEBUG
    var liveCount = 0
  #else
    @exclusivity(unchecked) var liveCount = 0
  #endif
  /// The last epoch handed out; see `_AnyNode.epoch`.
  #if DEBUG
    @usableFromInline var epochCounter: UInt64 = 1
  #else
    @exclusivity(unchecked) @usableFromInline var epochCounter: UInt64 = 1
  #endif
  /// The number of the last transaction opened.
  var transactionSerial = 0
  /// How many frames of this map the thread holding `lock` is inside.
  #if DEBUG
    @usableFromInline var depth = 0
  #else
    @exclusivity(unchecked) @usableFromInline var depth = 0
  #endif
  /// What the current outermost write has to settle and tell.
  #if DEBUG
    @usableFromInline var batch = _Batch()
  #else
    @exclusivity(unchecked) @usableFromInline var batch = _Batch()
  #endif
  /// Work from deinits that ran while this thread was inside a write, done before it ends.
  /// NB: kept out of `batch` so that a deinit firing while `batch` is being mutated touches a
  /// different stored property.
  #if DEBUG
    @usableFromInline var deferred: [_Deferred] = []
  #else
    @exclusivity(unchecked) @usableFromInline var deferred: [_Deferred] = []
  #endif

  @usableFromInline
  init(logger: (any IdentityMapLogger)?) {
    self.logger = logger
    isLogging = logger != nil
  }

  deinit {
    // NB: links are strong, so what an alias still held may form cycles by identity; drop
    // every link so that the tables' release frees all nodes. Nothing else can reach them now.
    for table in tables.values { table.forEachNode { $0.extras?.children.removeAll() } }
    for alias in aliases.values { alias.extras?.children.removeAll() }
  }

  // MARK: Entering and leaving the lock

  /// Runs `body` under the lock without writing.
  @inlinable
  func read<R>(_ body: () -> R) -> R {
    lock.lock()
    depth += 1
    defer {
      if depth == 1 && !deferred.isEmpty {
        // NB: a handle released during the read (in a value's deinit, say) still counts at once.
        endWrite()
      } else {
        depth -= 1
        lock.unlock()
      }
    }
    return body()
  }

  /// Runs `body` as a write. The outermost write then settles lifetimes, releases the lock, and
  /// delivers what changed; a nested write (from an `update` or transaction body, on the same
  /// thread) is part of the enclosing one.
  @inlinable
  func write<R>(_ body: () throws -> R) rethrows -> R {
    lock.lock()
    depth += 1
    if depth > 1 {
      defer {
        depth -= 1
        lock.unlock()
      }
      return try body()
    }
    defer { endWrite() }
    return try body()
  }

  /// Ends the outermost write: settles lifetimes, releases the lock, then logs and delivers.
  @usableFromInline
  func endWrite() {
    if batch.isIdle && deferred.isEmpty {
      depth -= 1
      lock.unlock()
      return
    }
    settleLifetimes()
    let outcome = batch.takeOutcome()
    depth -= 1
    lock.unlock()
    outcome.run(logger: logger, deliveryLock: deliveryLock)
  }

  /// A new epoch for one write. Epochs only grow.
  @inlinable
  func nextEpoch() -> UInt64 {
    epochCounter &+= 1
    return epochCounter
  }

  // MARK: Tables

  /// The table of entity type `T`, created on first use.
  @inlinable
  func table<T: Identifiable & Sendable>(for _: T.Type) -> _Table<T> {
    withTable(for: T.self) { $0 }
  }

  /// Calls `body` with the table of entity type `T`, borrowed without reference counting.
  @inlinable
  func withTable<T: Identifiable & Sendable, R>(for _: T.Type, _ body: (_Table<T>) -> R) -> R {
    let key = ObjectIdentifier(T.self)
    if lastTableKey != key { cacheTable(for: T.self, key: key) }
    return lastTable.unsafelyUnwrapped._withUnsafeGuaranteedRef {
      body(unsafeDowncast($0, to: _Table<T>.self))
    }
  }

  @usableFromInline @inline(never)
  func cacheTable<T: Identifiable & Sendable>(for _: T.Type, key: ObjectIdentifier) {
    let table: _AnyTable
    if let existing = tables[key] {
      table = existing
    } else {
      table = _Table<T>()
      tables[key] = table
    }
    lastTableKey = key
    lastTable = Unmanaged.passUnretained(table)
  }

  /// Calls `body` with every registered entity node.
  func forEachEntityNode(_ body: (_AnyNode) -> Void) {
    for table in tables.values { table.forEachNode(body) }
  }

  // MARK: Handles

  /// A new handle on `node`: one more external hold, given back when the handle is released.
  ///
  /// NB: every `store` and `find` makes its own handle, rather than sharing one per node. A
  /// shared handle needs a weak reference from the node (so that a `find` racing with the last
  /// release never revives a dying object), and Swift's weak references cost a 48-byte side
  /// table per node and a slower load. Copies of one `EntityObserver` still share its handle.
  @inlinable
  func handle<Value>(for node: _Node<Value>) -> _Handle<Value> {
    node.externalHolds += 1
    if liveHandles == 0 { selfRetain = self }
    liveHandles += 1
    return _Handle(core: self, node: node)
  }

  /// Called by a handle's deinit: the handle's hold on `node` is gone.
  @usableFromInline
  func releaseHandle(of node: _AnyNode) {
    lock.lock()
    liveHandles -= 1
    // NB: the map may only let go of itself after its lock is released, by its last frame.
    let lastRetain = liveHandles == 0 ? selfRetain.take() : nil
    if depth > 0 {
      // NB: a deinit inside one of our frames (a handle dropped in a transaction body, or held
      // by a value we just replaced) must not touch the graph mid-write.
      deferred.append(.releaseHold(node))
      if let lastRetain { batch.graveyard.append(lastRetain) }
      lock.unlock()
      return
    }
    node.externalHolds -= 1
    if node.externalHolds > 0 {
      // The common case: another holder remains, nothing to settle.
      lock.unlock()
      withExtendedLifetime(lastRetain) {}
      return
    }
    depth = 1
    noteHoldDropped(node)
    if let lastRetain { batch.graveyard.append(lastRetain) }
    endWrite()
  }

  /// Removes one external hold from `node`.
  @inline(__always)
  func dropExternalHold(on node: _AnyNode) {
    node.externalHolds -= 1
    noteHoldDropped(node)
  }

  // MARK: Logging

  /// Records a log event, rendered after the lock is released.
  @inline(__always)
  func log(_ event: @escaping () -> IdentityMapEvent) {
    if isLogging { batch.events.append(event) }
  }

  /// Records that `node` was written, if it is an entity.
  @usableFromInline
  func logStored(_ node: _AnyNode, stamp: Stamp?) {
    guard isLogging, let reference = node.makeReference() else { return }
    batch.events.append { .stored(reference(), modifiedAt: stamp) }
  }

  /// Records an event about `node`, if it is an entity; `event` names it when rendered.
  func logEntity(_ node: _AnyNode, _ event: @escaping (EntityReference) -> IdentityMapEvent) {
    guard isLogging, let reference = node.makeReference() else { return }
    batch.events.append { event(reference()) }
  }

  /// Records that a write to `node` stamped `incoming` was refused.
  @usableFromInline
  func logStale(_ node: _AnyNode, incoming: Stamp?) {
    guard isLogging else { return }
    let stored = node.stamp
    let incoming = incoming ?? .nan
    if let reference = node.makeReference() {
      batch.events.append {
        .discardedStale(.entity(reference()), storedStamp: stored, incomingStamp: incoming)
      }
    } else if let alias = node.extras?.alias {
      batch.events.append {
        .discardedStale(.alias(alias.name), storedStamp: stored, incomingStamp: incoming)
      }
    }
  }
}

/// A deinit's work, deferred because it ran while this thread was inside a write.
@usableFromInline
enum _Deferred {
  /// A handle's hold on the node is gone.
  case releaseHold(_AnyNode)
  /// A subscription was cancelled.
  case cancel(_AnyNode, _AnySubscriber)
}
