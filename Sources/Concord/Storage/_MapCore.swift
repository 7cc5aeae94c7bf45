/// Everything one `IdentityMap` owns, behind its lock.
///
/// Data flows one way. A public method takes the lock with ``write(_:)`` or ``read(_:)``; the
/// graph and storage code mutates nodes and records in ``batch`` what must be told; when the
/// outermost write ends, ``write(_:)`` settles lifetimes, takes the batch's deliveries, releases
/// the lock, and only then calls user code: loggers, callbacks, streams.
final class _MapCore: @unchecked Sendable {
  // NB: @unchecked because every mutable field and every node reachable from here is only
  // touched while holding `lock`; subscribers' delivery state is guarded by `deliveryLock`.

  /// Guards all the map's state. Recursive, so that a write made from inside an `update` body
  /// or a transaction body joins the enclosing write instead of deadlocking.
  let lock = Lock(recursive: true)
  /// Guards subscribers' delivery state. Never held while calling out, never held while taking
  /// `lock`.
  let deliveryLock = Lock()
  let logger: (any IdentityMapLogger)?

  // MARK: State guarded by `lock`

  /// One table per entity type.
  private var tables: [ObjectIdentifier: _AnyTable] = [:]
  /// The last table looked up: most calls in a row are about one type.
  private var lastTable: (key: ObjectIdentifier, table: _AnyTable)?
  /// The alias slots.
  var aliases: [_AliasID: _AnyNode] = [:]
  /// Registered entity nodes, all types together.
  var liveCount = 0
  /// The last epoch handed out; see `_AnyNode.epoch`.
  private(set) var epochCounter: UInt64 = 1
  /// The number of the last transaction opened.
  var transactionSerial = 0
  /// How many frames of this map the thread holding `lock` is inside.
  private(set) var depth = 0
  /// What the current outermost write has to settle and tell.
  var batch = _Batch()
  /// Work from deinits that ran while this thread was inside a write, done before it ends.
  /// NB: kept out of `batch` so that a deinit firing while `batch` is being mutated touches a
  /// different stored property.
  var deferred: [_Deferred] = []

  init(logger: (any IdentityMapLogger)?) {
    self.logger = logger
  }

  // MARK: Entering and leaving the lock

  /// Runs `body` under the lock without writing.
  @inline(__always)
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
  private func endWrite() {
    settleLifetimes()
    let outcome = batch.takeOutcome()
    depth -= 1
    lock.unlock()
    outcome.run(logger: logger, deliveryLock: deliveryLock)
  }

  /// A new epoch for one write. Epochs only grow.
  @inline(__always)
  func nextEpoch() -> UInt64 {
    epochCounter &+= 1
    return epochCounter
  }

  // MARK: Tables

  /// The table of entity type `T`, created on first use.
  @inline(__always)
  func table<T: Identifiable & Sendable>(for _: T.Type) -> _Table<T> {
    let key = ObjectIdentifier(T.self)
    if let lastTable, lastTable.key == key {
      return unsafeDowncast(lastTable.table, to: _Table<T>.self)
    }
    return slowTable(for: T.self, key: key)
  }

  @inline(never)
  private func slowTable<T: Identifiable & Sendable>(for _: T.Type, key: ObjectIdentifier)
    -> _Table<T>
  {
    let table: _Table<T>
    if let existing = tables[key] {
      table = unsafeDowncast(existing, to: _Table<T>.self)
    } else {
      table = _Table<T>()
      tables[key] = table
    }
    lastTable = (key, table)
    return table
  }

  /// Calls `body` with every registered entity node.
  func forEachEntityNode(_ body: (_AnyNode) -> Void) {
    for table in tables.values { table.forEachNode(body) }
  }

  // MARK: Handles

  /// The handle shared by every observer of `node`, made if none lives.
  @inline(__always)
  func handle<Value>(for node: _Node<Value>) -> _Handle<Value> {
    if let handle = node.handle { return handle }
    let handle = _Handle(core: self, node: node)
    node.handle = handle
    node.externalHolds += 1
    return handle
  }

  /// Called by a handle's deinit: the handle's hold on `node` is gone.
  func releaseHandle(of node: _AnyNode) {
    write {
      if depth > 1 {
        // NB: a deinit inside one of our frames (a handle dropped in a transaction body, or
        // held by a value we just replaced) must not touch the graph mid-write.
        deferred.append(.releaseHold(node))
      } else {
        dropExternalHold(on: node)
      }
    }
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
    if logger != nil { batch.events.append(event) }
  }

  /// Records that `node` was written, if it is an entity.
  @inline(__always)
  func logStored(_ node: _AnyNode, stamp: Stamp?) {
    guard logger != nil, let reference = node.makeReference() else { return }
    batch.events.append { .stored(reference(), modifiedAt: stamp) }
  }

  /// Records that a write to `node` stamped `incoming` was refused.
  func logStale(_ node: _AnyNode, incoming: Stamp?) {
    guard logger != nil else { return }
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
enum _Deferred {
  /// A handle's hold on the node is gone.
  case releaseHold(_AnyNode)
  /// A subscription was cancelled.
  case cancel(_AnyNode, _AnySubscriber)
}
