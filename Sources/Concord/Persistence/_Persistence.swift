import Dispatch

/// A map's link to its ``PersistentStore``: what the committing write hands over, the
/// background writer that applies it, and the changes committed but not yet applied, which
/// reads consult before the store.
///
/// Ordering. Commits hand their changes over under the map's lock, so they queue in commit
/// order; the writer applies every queued commit as one store transaction, oldest first. A
/// change stays in `unapplied` until the transaction holding it is applied, so a read made
/// under the map's lock sees each row either there or in the store, never neither.
///
/// A failed transaction loses nothing: its changes stay queued and in `unapplied`, it is
/// logged, and the next flush tries it again and throws the error once.
@usableFromInline
final class _Persistence: @unchecked Sendable {
  // NB: @unchecked because `current` and `kinds` are only touched under the map's
  // lock, and everything else only under `lock`.

  let store: any PersistentStore
  let logger: (any IdentityMapLogger)?
  /// Guards the queue, `unapplied`, the error and the writer's state. A leaf: never held while
  /// calling the store or the logger.
  private let lock = Lock()
  private let writer = DispatchQueue(label: "Concord.persistence.writer")

  // Under the map's lock.

  /// The changes of the write committing now, handed over when it commits.
  var current: [_PersistOp] = []
  /// The persisted types' kinds, by type, and the types of each kind.
  var kinds: [ObjectIdentifier: String] = [:]
  var kindOwners: [String: ObjectIdentifier] = [:]

  // Under `lock`.

  /// Commits handed over and not yet taken by the writer, oldest first.
  private var queued: [_PersistOp] = []
  /// Taken by the writer, failed, to try again first.
  private var failed: [_PersistOp] = []
  /// The newest unapplied change of each row.
  private var unapplied: [_RowKey: _PersistOp] = [:]
  /// Unapplied deletions of whole kinds (and of everything, under the empty kind), with the
  /// serial of the newest.
  private var unappliedWipes: [String: Int] = [:]
  private var lastSerial = 0
  private var isWriting = false
  private var firstError: (any Error)?

  init(store: any PersistentStore, logger: (any IdentityMapLogger)?) {
    self.store = store
    self.logger = logger
  }

  // MARK: Handing over

  /// Queues the changes of the write that commits now, and wakes the writer. Under the map's
  /// lock, so commits queue in commit order.
  func handOver() {
    guard !current.isEmpty else { return }
    var ops = current
    current.removeAll(keepingCapacity: true)
    lock.lock()
    for index in ops.indices {
      lastSerial += 1
      ops[index].serial = lastSerial
      note(ops[index])
    }
    queued.append(contentsOf: ops)
    let wake = !isWriting
    isWriting = true
    lock.unlock()
    if wake { writer.async { self.write() } }
  }

  /// Lists `op` as unapplied. Under `lock`.
  private func note(_ op: _PersistOp) {
    switch op.target {
    case .row(let key): unapplied[key] = op
    case .kind(let kind): unappliedWipes[kind] = op.serial
    }
  }

  // MARK: Writing

  /// Applies whatever is queued, one store transaction per round, until nothing is. On the
  /// writer queue.
  private func write() {
    while true {
      lock.lock()
      let ops = failed + queued
      failed = []
      queued = []
      guard !ops.isEmpty else {
        isWriting = false
        lock.unlock()
        return
      }
      lock.unlock()
      if !apply(ops) { return }
    }
  }

  /// Applies `ops` as one transaction. Returns `false` when it failed: the writer stops until
  /// the next hand-over or flush, which tries them again.
  private func apply(_ ops: [_PersistOp]) -> Bool {
    var changes: [PersistentChange] = []
    changes.reserveCapacity(ops.count)
    var encodable: [_PersistOp] = []
    for op in ops {
      do {
        changes.append(try op.change(store))
        encodable.append(op)
      } catch {
        // NB: a value that cannot be encoded will not be next time either: it is reported,
        // and stays readable from `unapplied` for as long as the map lives.
        report(error, while: "encoding \(op.description)")
      }
    }
    do {
      try store.apply(changes)
    } catch {
      lock.lock()
      failed = encodable
      isWriting = false
      lock.unlock()
      report(error, while: "writing \(changes.count) changes")
      return false
    }
    lock.lock()
    for op in encodable {
      switch op.target {
      case .row(let key):
        if unapplied[key]?.serial == op.serial { unapplied[key] = nil }
      case .kind(let kind):
        if unappliedWipes[kind] == op.serial { unappliedWipes[kind] = nil }
      }
    }
    lock.unlock()
    return true
  }

  /// Keeps the first error since the last flush, and logs it.
  private func report(_ error: any Error, while doing: String) {
    lock.lock()
    if firstError == nil { firstError = error }
    lock.unlock()
    logger?.log(.persistenceFailed("\(doing): \(error)"))
  }

  /// Waits until everything handed over so far is applied (or has failed), and throws the
  /// first error since the last flush. Retries what failed before.
  func flush() throws {
    writer.sync {
      lock.lock()
      isWriting = true
      lock.unlock()
      write()
    }
    lock.lock()
    let error = firstError
    firstError = nil
    lock.unlock()
    if let error { throw error }
  }

  // MARK: Reading

  /// What the unapplied changes say of a row: its newest value, its deletion, or nothing
  /// (the store knows).
  func unappliedState(of key: _RowKey) -> _Unapplied {
    lock.lock()
    defer { lock.unlock() }
    // NB: a wipe deletes the rows changed before it, not after.
    let wipe = max(unappliedWipes[key.kind] ?? 0, unappliedWipes[""] ?? 0)
    if let op = unapplied[key], op.serial > wipe {
      return op.value.map { .saved($0, op.stamp) } ?? .deleted
    }
    return wipe > 0 ? .deleted : .unknown
  }

  /// Reads `key`'s record from the store, logging a failure as a missing record.
  func readRecord(_ describe: @autoclosure () -> String, _ read: () throws -> PersistentRecord?)
    -> PersistentRecord?
  {
    do {
      return try read()
    } catch {
      logger?.log(.persistenceFailed("reading \(describe()): \(error)"))
      return nil
    }
  }
}

/// A row of the store: an entity's kind and id, or an alias's name under its value type's kind
/// prefixed with `@`.
struct _RowKey: Hashable, @unchecked Sendable {
  // NB: @unchecked for `AnyHashable`, which holds an entity id, itself `Sendable`.
  let kind: String
  let id: AnyHashable
}

/// What unapplied changes say about a row.
enum _Unapplied {
  case saved(any Sendable, Stamp?)
  case deleted
  case unknown
}

/// One change committed for the store: its row, the value for reads until it is applied, and
/// how to encode it, which the writer does.
struct _PersistOp: Sendable, CustomStringConvertible {
  enum Target: @unchecked Sendable {
    // NB: @unchecked for the `AnyHashable` in `_RowKey`.
    case row(_RowKey)
    /// A whole kind (`@kind` for the aliases of a kind); the empty kind for everything.
    case kind(String)
  }

  var serial = 0
  let target: Target
  /// The value saved (an entity, or an alias's ids), or `nil` for a deletion.
  let value: (any Sendable)?
  let stamp: Stamp?
  let change: @Sendable (any PersistentStore) throws -> PersistentChange

  var description: String {
    switch target {
    case .row(let key): key.kind.hasPrefix("@") ? "alias \"\(key.id)\"" : "\(key.kind)(\(key.id))"
    case .kind(let kind): kind.isEmpty ? "everything" : "every \(kind)"
    }
  }
}
