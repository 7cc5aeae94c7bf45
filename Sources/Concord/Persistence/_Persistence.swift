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

  @usableFromInline let store: any PersistentStore
  let logger: (any IdentityMapLogger)?
  /// Guards the queue, `unapplied`, the error and the writer's state. A leaf: never held while
  /// calling the store or the logger.
  private let lock = Lock()
  private let writer = DispatchQueue(label: "Concord.persistence.writer")

  // Under the map's lock.

  /// The changes of the write committing now, handed over when it commits.
  #if DEBUG
    @usableFromInline var current: [_PersistOp] = []
  #else
    // NB: as the core's parts: the map's lock makes every access exclusive.
    @exclusivity(unchecked) @usableFromInline var current: [_PersistOp] = []
  #endif
  /// The persisted types' kinds, by type, and the types of each kind.
  var kinds: [ObjectIdentifier: String] = [:]
  var kindOwners: [String: ObjectIdentifier] = [:]

  // Under `lock`.

  /// Commits handed over and not yet taken by the writer, oldest first.
  #if DEBUG
    private var queued: [_PersistOp] = []
  #else
    @exclusivity(unchecked) private var queued: [_PersistOp] = []
  #endif
  /// Taken by the writer, failed, to try again first.
  private var failed: [_PersistOp] = []
  /// Unapplied deletions of whole kinds (`@` for every alias, the empty kind for everything),
  /// with the serial of the newest. NB: the unapplied changes of rows are kept by type, in
  /// `_Persisted.unapplied`, keyed by the typed id: no `AnyHashable` on the commit path.
  var unappliedWipes: [String: Int] = [:]
  /// The newest unapplied change of each alias: the entities it names, or `nil` when deleted.
  var unappliedAliases: [String: (serial: Int, values: Any?, stamp: Stamp?)] = [:]
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
    lock.lock()
    for op in current {
      lastSerial += 1
      op.serial = lastSerial
      op.note(in: self)
    }
    queued.append(contentsOf: current)
    current.removeAll(keepingCapacity: true)
    let wake = !isWriting
    isWriting = true
    lock.unlock()
    // NB: the writer starts a moment later, so that the commits made meanwhile join its
    // transaction: waking it for each commit would cost the committing thread more than the
    // commit. `flush()` does not wait for the moment.
    if wake { writer.asyncAfter(deadline: .now() + Self.gathering) { self.write() } }
  }

  /// How long the writer gathers commits before it writes them.
  static let gathering = DispatchTimeInterval.milliseconds(2)

  // MARK: Writing

  /// Applies whatever is queued, one store transaction per round, until nothing is. On the
  /// writer queue.
  private func write() {
    while true {
      lock.lock()
      var ops: [_PersistOp] = []
      // NB: swapped out, not copied: the committing thread waits for this lock.
      swap(&ops, &queued)
      if !failed.isEmpty {
        ops = failed + ops
        failed = []
      }
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
    // NB: in slices, so that a committing thread never waits long for the lock.
    for start in stride(from: 0, to: encodable.count, by: 256) {
      lock.lock()
      for op in encodable[start..<min(start + 256, encodable.count)] { op.forget(in: self) }
      lock.unlock()
    }
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

  /// Runs `body` under the lock that guards what is unapplied.
  func withLock<R>(_ body: () -> R) -> R {
    lock.lock()
    defer { lock.unlock() }
    return body()
  }

  /// The serial of the newest unapplied wipe of `kind`'s rows. Under `withLock`.
  func wipeSerial(of kind: String) -> Int {
    max(unappliedWipes[kind] ?? 0, unappliedWipes[""] ?? 0)
  }

  /// What the unapplied changes say of the alias `name`.
  func unappliedAlias(_ name: String) -> _Unapplied<Any> {
    withLock {
      let wipe = wipeSerial(of: "@")
      if let change = unappliedAliases[name], change.serial > wipe {
        return change.values.map { .saved($0, change.stamp) } ?? .deleted
      }
      return wipe > 0 ? .deleted : .unknown
    }
  }
}

/// What unapplied changes say about a row.
enum _Unapplied<Value> {
  case saved(Value, Stamp?)
  case deleted
  case unknown
}

/// One change committed for the store. The writer encodes it (`change`), and until it is
/// applied, reads find it where `note` lists it.
///
/// NB: a class, one allocation a change, with typed subclasses: reads must find a change by
/// the entity's own id, and an `AnyHashable` key or a closure per change cost the committing
/// thread more than the write.
@usableFromInline
class _PersistOp: @unchecked Sendable, CustomStringConvertible {
  // NB: @unchecked because `serial` is set under `_Persistence`'s lock before the op is shared,
  // and the values subclasses hold are `Sendable`.
  @usableFromInline var serial = 0

  @usableFromInline init() {}

  /// The change, encoded for `store`. On the writer.
  func change(_ store: any PersistentStore) throws -> PersistentChange { fatalError("abstract") }
  /// Lists the op as the newest unapplied change of its row. Under `_Persistence`'s lock.
  func note(in _: _Persistence) {}
  /// Unlists the op, applied, unless a newer change of its row came. Under the same lock.
  func forget(in _: _Persistence) {}

  @usableFromInline var description: String { "a change" }
}

/// The deletion of a whole kind of rows: see `_Persistence.unappliedWipes`.
final class _WipeOp: _PersistOp, @unchecked Sendable {
  let target: String
  let wipe: PersistentChange

  init(target: String, _ change: PersistentChange) {
    self.target = target
    wipe = change
  }

  override func change(_: any PersistentStore) throws -> PersistentChange { wipe }

  override func note(in persistence: _Persistence) {
    persistence.unappliedWipes[target] = serial
  }

  override func forget(in persistence: _Persistence) {
    if persistence.unappliedWipes[target] == serial { persistence.unappliedWipes[target] = nil }
  }

  override var description: String { "\(wipe)" }
}

/// A change of an alias: its deletion, whatever its type, or (`_AliasSave`) the entities it
/// names. Listed for reads by name, with the values saved (`nil` for a deletion).
@usableFromInline
class _AliasOp: _PersistOp, @unchecked Sendable {
  let name: String
  /// The entities the alias names, as `[T]`; `nil` for a deletion.
  let values: Any?
  let stamp: Stamp?

  @usableFromInline
  init(name: String, values: Any?, stamp: Stamp?) {
    self.name = name
    self.values = values
    self.stamp = stamp
  }

  override func change(_: any PersistentStore) throws -> PersistentChange {
    .deleteAlias(name: name)
  }

  override func note(in persistence: _Persistence) {
    persistence.unappliedAliases[name] = (serial, values, stamp)
  }

  override func forget(in persistence: _Persistence) {
    if persistence.unappliedAliases[name]?.serial == serial {
      persistence.unappliedAliases[name] = nil
    }
  }

  override var description: String { "alias \"\(name)\"" }
}
