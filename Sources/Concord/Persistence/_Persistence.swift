import Dispatch
import _ConcordAtomics

/// A map's link to its ``PersistentStore``: what the committing write hands over, the
/// background writer that applies it, and the changes committed but not yet applied, which
/// reads consult before the store.
///
/// Layers. What a commit hands over joins the open layer. The writer closes it (it goes in
/// flight) and applies it as one store transaction: the commits of a layer are consecutive,
/// and a layer is closed between two commits, so a commit reaches the store in one
/// transaction. A layer holds, in this order, the deletions of whole kinds made in it
/// (`_StoreLayer`), the rows of each persisted type (`_Persisted`, which keeps them by type so
/// that a commit allocates no object per change), and the newest change of each alias.
///
/// Locking. The layers are guarded by the map's lock: a commit adds to the open layer without
/// taking another lock, and the writer takes the map's lock briefly, to close the open layer,
/// to drop the layer it applied, or to note that it stopped. It encodes and writes outside it,
/// reading the layer in flight, which only it changes.
///
/// Reads. A layer stays readable until the transaction holding it is applied, so a read made
/// under the map's lock finds each row in a layer or in the store, never neither. A read looks
/// through the layers newest first.
///
/// A failed transaction loses nothing: its layer stays in flight and readable, it is logged, and
/// the next hand-over or flush tries it again, as it was encoded, before the writer closes the
/// open layer; the next flush throws the error once. So at most one layer is in flight.
@usableFromInline
final class _Persistence: @unchecked Sendable {
  // NB: @unchecked because everything is touched under the map's lock, except `firstError`,
  // under `errorLock`, and the layers in flight, which the writer also reads outside it.

  @usableFromInline let store: any PersistentStore
  let logger: (any IdentityMapLogger)?
  /// The map's lock.
  private let mapLock: ReadWriteLock
  /// Guards `firstError`. A leaf: never held while calling the store or the logger.
  private let errorLock = Lock()
  private let writer = DispatchQueue(label: "Concord.persistence.writer")

  // NB: the state every persisted write reads or writes skips the exclusivity checks in
  // release builds, as the core's parts do: the map's lock makes every access exclusive. Debug
  // builds, where the tests run, keep them.
  #if DEBUG
    /// The changes of the write under way that are not rows a commit records: deletions of
    /// kinds, alias changes, and removals found by loads, in order. A transaction's rollback
    /// drops its own.
    @usableFromInline var current: [_PersistOp] = []
    /// Whether anything joined the open layer since it opened.
    @usableFromInline var hasOpen = false
    /// The persisted types with entities the write under way could not read, and the aliases
    /// it could not read: their writes are refused until the write ends (see
    /// `_Verdict.unreadable`).
    var unreadableTypes: [_AnyPersisted] = []
    var unreadableAliases: Set<String> = []
    /// Set when a check for nested entities missing from memory met one the store could not
    /// read; see `_MapCore.isMissing(_:)`.
    @usableFromInline var metUnreadable = false
    /// How many prefetches are reading the store outside the map's lock: while any is, every
    /// change handed over notes its entity as touched (see `_Prefetch.swift`).
    @usableFromInline var prefetching = 0
    /// What the write under way admits from a prefetch; `nil` outside such a write.
    @usableFromInline var prefetched: _Prefetch?
    /// Whether anything was noted as touched since the prefetches outstanding began: when
    /// nothing was, the last one to end has nothing to forget (a persisted write's own
    /// prefetch, which reads nothing, ends at once).
    @usableFromInline var touchedAny = false
    /// Set for the body of a write whose prefetch walked the values it writes and found, in
    /// the same exclusive section, every entity they nest in memory (see
    /// `_Prefetch.walkedValues`): that body's own check for missing entities would find none.
    /// Taken by the first store of the body (`_MapCore.takeForesight()`), before any user code
    /// runs; cleared when the body ends.
    @usableFromInline var foresees = false
    /// With `foresees`, in a write admitting a prefetch: the prefetch whose walk's missing
    /// entities the store that takes the foresight loads first (`_Prefetch.admitVisited(_:)`),
    /// where its own check would have loaded them.
    @usableFromInline var foreseenLoads: _Prefetch?
    /// Whether writes check for missing entities even when their prefetch already did: tests
    /// run the same steps both ways.
    @usableFromInline var rechecksForeseen = false
    /// A prefetch that asked for nothing, for the next write; see `takePrefetch()`.
    @usableFromInline var sparePrefetch: _Prefetch?
  #else
    @exclusivity(unchecked) @usableFromInline var current: [_PersistOp] = []
    @exclusivity(unchecked) @usableFromInline var hasOpen = false
    @exclusivity(unchecked) var unreadableTypes: [_AnyPersisted] = []
    @exclusivity(unchecked) var unreadableAliases: Set<String> = []
    @exclusivity(unchecked) @usableFromInline var metUnreadable = false
    @exclusivity(unchecked) @usableFromInline var prefetching = 0
    @exclusivity(unchecked) @usableFromInline var prefetched: _Prefetch?
    @exclusivity(unchecked) @usableFromInline var touchedAny = false
    @exclusivity(unchecked) @usableFromInline var foresees = false
    @exclusivity(unchecked) @usableFromInline var foreseenLoads: _Prefetch?
    @exclusivity(unchecked) @usableFromInline var rechecksForeseen = false
    @exclusivity(unchecked) @usableFromInline var sparePrefetch: _Prefetch?
  #endif
  /// The aggregates being loaded, so that a cycle of persisted aggregates loads each once; see
  /// `_MapCore.load(_:into:)`. Plain entities, which nest nothing, are not noted.
  @usableFromInline var loading: Set<_RowKey> = []
  /// The aliases that changed for the store while a prefetch was outstanding, and whether all
  /// of them may have; as `_Persisted.touched` is for entities.
  var touchedAliases: Set<String> = []
  var touchesAllAliases = false
  /// The persisted types' kinds, by type, and the types of each kind.
  var kinds: [ObjectIdentifier: String] = [:]
  var kindOwners: [String: ObjectIdentifier] = [:]
  /// Every persisted type, in the order they were named.
  private(set) var types: [_AnyPersisted] = []
  /// The layer the commits join.
  private(set) var open = _StoreLayer()
  /// The layer taken by the writer and not yet applied, if any (kept in an array, which every
  /// type's rows parallel). Only the writer adds or removes it.
  private(set) var inFlight: [_StoreLayer] = []
  /// The layer in flight, encoded, once the writer encoded it: a retry applies it as it is, and
  /// what did not encode is reported once. Only on the writer.
  private var encoded: (changes: [PersistentChange], unencodableAliases: [_AliasOp])?
  /// Alias changes the writer could not encode: readable for as long as the map lives, unless
  /// a newer change of the alias is applied.
  private var stuckAliases: [String: _AliasOp] = [:]
  /// Whether a write is due or under way: set by the hand-over that wakes the writer and by a
  /// flush, cleared when the writer finds nothing left to apply or a write fails. Under the
  /// map's lock.
  #if DEBUG
    private var isWriting = false
  #else
    @exclusivity(unchecked) private var isWriting = false
  #endif

  /// The first error since the last flush. Under `errorLock`.
  private var firstError: (any Error)?

  // MARK: Sharing (see `_MapCore.syncExternalChanges()`)

  /// Whether other processes commit to the store too (`PersistentStore.isShared`).
  let isShared: Bool
  /// The error every write meets, for a store that never writes
  /// (`PersistentStore.writeRefusal`): commits then hand nothing over.
  let refusal: (any Error)?
  /// Whether the write under way applies another process's commits, which came from the store
  /// and never go back to it. Set by `beginExternal()`, cleared when the write hands over.
  #if DEBUG
    private(set) var applyingExternal = false
  #else
    @exclusivity(unchecked) private(set) var applyingExternal = false
  #endif
  /// Whether commits hand nothing over: `applyingExternal`, or a store that refuses writes.
  /// NB: one flag for the commit's hot path to test, without an exclusivity check in release
  /// builds (as `current`): the map's lock makes every access exclusive.
  #if DEBUG
    @usableFromInline private(set) var diverts = false
  #else
    @exclusivity(unchecked) @usableFromInline private(set) var diverts = false
  #endif
  /// Whether the map watches the store for other processes' commits.
  var watching = false
  /// One sync at a time, in the order they read the store; `syncOwner` is the thread (its
  /// index + 1) running one, under `ownerLock`.
  private let syncLock = Lock()
  private let ownerLock = Lock()
  private var syncOwner = 0

  init(store: any PersistentStore, logger: (any IdentityMapLogger)?, mapLock: ReadWriteLock) {
    self.store = store
    self.logger = logger
    self.mapLock = mapLock
    isShared = store.isShared
    refusal = store.writeRefusal
    diverts = refusal != nil
  }

  deinit {
    if watching { store.observeExternalChanges(nil) }
  }

  /// Adds a newly persisted type.
  @usableFromInline
  func register(_ persisted: _AnyPersisted) {
    persisted.startInFlight(inFlight.count)
    types.append(persisted)
  }

  // MARK: Handing over

  /// Adds what the write hands over to the open layer, and wakes the writer. At commit, when
  /// nothing can roll the write back, so commits join in commit order. Forgets what the write
  /// could not read: the next write reads it again.
  @usableFromInline
  func handOver() {
    if !unreadableTypes.isEmpty || !unreadableAliases.isEmpty { forgetUnreadable() }
    handOverCurrent()
    if applyingExternal {
      applyingExternal = false
      diverts = refusal != nil
    }
    guard hasOpen, !isWriting else { return }
    isWriting = true
    // NB: the writer starts a moment later, so that the commits made meanwhile join its
    // transaction: waking it for each commit would cost the committing thread more than the
    // commit. `flush()` does not wait for the moment.
    writer.asyncAfter(deadline: .now() + Self.gathering) { self.writeIfStillDue() }
  }

  /// A hand-over's wake-up: writes, unless what it was woken for was taken meanwhile. A flush
  /// (or another wake-up) that ran first wrote it, or failed and reported the failure, after
  /// which the writer waits for the next hand-over or flush. So a wake-up that comes late tries
  /// nothing again: it would report a second failure, which the next flush would throw even
  /// once the store works again (`isWriting` is false whenever no write is due). On the writer.
  private func writeIfStillDue() {
    guard mapLock.withLock({ isWriting }) else { return }
    write()
  }

  /// How many changes of the write under way are listed: a transaction's savepoint.
  var pendingCount: Int { current.count }

  /// Forgets the changes listed since a transaction's savepoint: it rolled back.
  func rollBack(to savepoint: Int) {
    if current.count > savepoint { current.removeSubrange(savepoint...) }
  }

  /// Forgets the entities and aliases the write could not read.
  func forgetUnreadable() {
    for persisted in unreadableTypes { persisted.forgetUnreadable() }
    unreadableTypes.removeAll()
    unreadableAliases.removeAll()
  }

  /// Adds the changes of `current` to the open layer. A commit's rows join it as they are
  /// recorded, after anything `current` holds: they say what each entity is at the end of the
  /// write, after anything it deleted.
  @usableFromInline
  func handOverCurrent() {
    guard !current.isEmpty else { return }
    guard !diverts else {
      // NB: a deletion of a kind, an alias or a tombstone's record, in a map whose store
      // refuses writes: the flush says so (the entities' and aliases' writes are logged).
      if !applyingExternal { noteRefused() }
      return current.removeAll(keepingCapacity: true)
    }
    for op in current { op.handOver(to: self) }
    current.removeAll(keepingCapacity: true)
    hasOpen = true
  }

  /// How long the writer gathers commits before it writes them.
  static let gathering = DispatchTimeInterval.milliseconds(2)

  /// Runs `body` on the writer after the wake-ups of every hand-over made so far, whose
  /// deadlines are earlier by a margin: for tests of what a late wake-up does.
  func afterWakeUps(_ body: @escaping @Sendable () -> Void) {
    writer.asyncAfter(deadline: .now() + Self.gathering + .milliseconds(20), execute: body)
  }

  /// Records in the open layer the deletion `change`, of a kind's rows, of a kind's aliases or
  /// of everything: what the layer holds before it is moot.
  func wipe(_ change: PersistentChange) {
    open.wipes.append(change)
    switch change {
    case .deleteEverything:
      open.wipesEverything = true
      open.aliases.removeAll()
      if prefetching > 0 { touchesAllAliases = true }
      for persisted in types {
        persisted.wipeOpen()
        if prefetching > 0 { persisted.touchAll() }
      }
      if prefetching > 0 { touchedAny = true }
    case .deleteKind(let kind):
      open.wipedKinds.insert(kind)
      for persisted in types where persisted.kind == kind {
        persisted.wipeOpen()
        if prefetching > 0 { persisted.touchAll() }
      }
      if prefetching > 0 { touchedAny = true }
    case .deleteAliases(let kind):
      open.wipedAliasKinds.insert(kind)
      if prefetching > 0 {
        touchesAllAliases = true
        touchedAny = true
      }
      open.aliases = open.aliases.filter { $0.value.kind != kind }
    case .save, .delete, .saveAlias, .deleteAlias:
      preconditionFailure("Concord: \(change) is not a deletion of a kind")
    }
  }

  /// Records in the open layer the change `op` of an alias.
  func noteAlias(_ op: _AliasOp) {
    open.aliases[op.name] = op
    if prefetching > 0 {
      touchedAliases.insert(op.name)
      touchedAny = true
    }
  }

  // MARK: Writing

  /// Applies whatever is handed over, one store transaction per round, until nothing is. On
  /// the writer queue.
  private func write() {
    while true {
      mapLock.lock()
      // NB: a layer that failed is tried again on its own, so that reads never look through
      // more than the open layer and one in flight, however long the store fails.
      if hasOpen && inFlight.isEmpty {
        inFlight.append(open)
        open = _StoreLayer()
        hasOpen = false
        for persisted in types { persisted.closeOpen() }
      }
      guard !inFlight.isEmpty else {
        isWriting = false
        mapLock.unlock()
        return
      }
      let layers = inFlight
      let types = types
      mapLock.unlock()
      if !apply(layers, types) { return }
    }
  }

  /// Applies the layer in flight as one transaction. Returns `false` when it failed: the
  /// writer stops until the next hand-over or flush, which tries it again.
  private func apply(_ layers: [_StoreLayer], _ types: [_AnyPersisted]) -> Bool {
    let encoded = self.encoded ?? encode(layers, types)
    self.encoded = encoded
    do {
      try store.apply(encoded.changes)
    } catch {
      mapLock.withLock { isWriting = false }
      report(error, while: "writing \(encoded.changes.count) changes")
      return false
    }
    self.encoded = nil
    var released: [Any] = []
    mapLock.lock()
    for layer in layers {
      if layer.wipesEverything {
        released.append(stuckAliases)
        stuckAliases.removeAll()
      } else if !layer.wipedAliasKinds.isEmpty {
        released.append(stuckAliases)
        stuckAliases = stuckAliases.filter { !layer.wipedAliasKinds.contains($0.value.kind ?? "") }
      }
      if !stuckAliases.isEmpty {
        for name in layer.aliases.keys {
          released.append(stuckAliases.removeValue(forKey: name) as Any)
        }
      }
    }
    for op in encoded.unencodableAliases { stuckAliases[op.name] = op }
    if prefetching > 0 { noteApplied(layers) }
    // NB: every type, those named while the writer wrote included.
    for persisted in self.types { released.append(persisted.applied(layers)) }
    inFlight.removeAll()
    mapLock.unlock()
    // NB: the values the layers held go here, after the lock, like everything a write drops:
    // a deinit may use the map.
    withExtendedLifetime(released) {}
    return true
  }

  /// The changes of `layers`, encoded for the store, and the alias changes that did not
  /// encode. What did not encode is reported. On the writer, outside the map's lock.
  private func encode(_ layers: [_StoreLayer], _ types: [_AnyPersisted]) -> (
    changes: [PersistentChange], unencodableAliases: [_AliasOp]
  ) {
    var changes: [PersistentChange] = []
    var unencodable: [_AliasOp] = []
    for (position, layer) in layers.enumerated() {
      changes += layer.wipes
      for persisted in types { persisted.encode(position, store, into: &changes) }
      // NB: sorted, so that the store sees the same order in every run.
      for name in layer.aliases.keys.sorted() {
        let op = layer.aliases[name]!
        do {
          changes.append(try op.change(store))
        } catch {
          // NB: a value that cannot be encoded will not be next time either: it is reported,
          // and stays readable for as long as the map lives.
          report(error, while: "encoding alias \"\(name)\"")
          unencodable.append(op)
        }
      }
    }
    return (changes, unencodable)
  }

  // MARK: Diverting (a store that refuses writes, another process's commits)

  /// The write under way applies another process's commits: nothing it commits is handed over.
  func beginExternal() {
    applyingExternal = true
    diverts = true
  }

  /// A commit of `target` was not handed over: logged, and thrown by the next flush, when the
  /// store refuses writes; nothing when it came from another process.
  @usableFromInline
  func divert(_ target: IdentityMapEvent.Target, _ core: _MapCore) {
    guard !applyingExternal, refusal != nil else { return }
    core.outbox.log { .notPersisted(target) }
    noteRefused()
  }

  /// Keeps the store's refusal as the first error since the last flush, once per flush.
  private func noteRefused() {
    guard let refusal else { return }
    errorLock.withLock {
      if firstError == nil { firstError = refusal }
    }
  }

  /// Logs `message` as a persistence failure, without keeping it for the next flush: a failed
  /// sync, which the next sync tries again.
  func log(_ message: String) {
    logger?.log(.persistenceFailed(message))
  }

  // MARK: Syncing

  /// Runs `body` as the map's one sync; nothing, returning at once, when the calling thread is
  /// running a sync already (a callback of it syncs: the sync under way goes on after it).
  func syncing(_ body: () throws -> Void) rethrows {
    let thread = _concord_thread_index() + 1
    guard ownerLock.withLock({ syncOwner != thread }) else { return }
    syncLock.lock()
    ownerLock.withLock { syncOwner = thread }
    defer {
      ownerLock.withLock { syncOwner = 0 }
      syncLock.unlock()
    }
    try body()
  }

  /// On the writer, once everything handed over is applied (or failed) and before it applies
  /// anything else: runs `prepare` under the map's lock, then reads what other processes
  /// committed. So every commit of this map that the store has not taken yet is newer, in the
  /// store, than everything read. `prepare` begins a prefetch (see `_MapCore`), which
  /// `failed` ends, under the map's lock, when the read throws.
  func readExternal(prepare: () -> Void, failed: () -> Void) throws -> PersistentExternalChanges {
    try writer.sync {
      mapLock.withLock { isWriting = true }
      write()
      mapLock.withLock(prepare)
      do {
        return try store.externalChanges()
      } catch {
        mapLock.withLock(failed)
        throw error
      }
    }
  }

  /// Whether this map changed the alias `name` since the store last took its writes: a change
  /// not yet applied (a deletion of all aliases, or of a kind's, included), or one applied
  /// while a prefetch is outstanding (see `noteApplied(_:)`). Under the map's lock.
  func changedSinceApplied(alias name: String) -> Bool {
    if isTouched(alias: name) || stuckAliases[name] != nil { return true }
    for op in current {
      if (op as? _AliasOp)?.name == name || op is _WipeOp { return true }
    }
    return CollectionOfOne(open).contains { layer in
      layer.aliases[name] != nil || layer.wipesEverything || !layer.wipedAliasKinds.isEmpty
    }
      || inFlight.contains { layer in
        layer.aliases[name] != nil || layer.wipesEverything || !layer.wipedAliasKinds.isEmpty
      }
  }

  /// The persisted types by kind, for decoding what the store read. Under the map's lock.
  func typesByKind() -> [String: _AnyPersisted] {
    Dictionary(types.map { ($0.kind, $0) }, uniquingKeysWith: { first, _ in first })
  }

  /// Keeps the first error since the last flush, and logs it.
  @usableFromInline
  func report(_ error: any Error, while doing: String) {
    errorLock.withLock {
      if firstError == nil { firstError = error }
    }
    logger?.log(.persistenceFailed("\(doing): \(error)"))
  }

  /// Waits until everything handed over so far is applied (or has failed), and throws the
  /// first error since the last flush. Retries what failed before. Not under the map's lock:
  /// the writer takes it.
  func flush() throws {
    try flush(then: {})
  }

  /// `flush()`, then `body` on the writer before it applies anything else: the store then
  /// holds exactly what was committed before the call. Throws the flush's error first.
  func flush(then body: () throws -> Void) throws {
    try writer.sync {
      mapLock.withLock { isWriting = true }
      write()
      let error = errorLock.withLock {
        defer { firstError = nil }
        return firstError
      }
      if let error { throw error }
      try body()
    }
  }

  /// Applies, on the calling thread, everything handed over and not yet applied; throws the
  /// store's error if any of it failed, which stays to be retried. Only on the writer (in
  /// `flush(then:)`): a restore, which must find every write committed before it in the store
  /// before it replaces it. A write committed meanwhile waits, and is applied after it.
  func applyPending() throws {
    mapLock.withLock {
      handOverCurrent()
      isWriting = true
    }
    write()
    // NB: a failed layer stays in flight; what a commit handed over since is not a failure.
    let pending = mapLock.withLock { !inFlight.isEmpty }
    guard pending else { return }
    let error = errorLock.withLock {
      defer { firstError = nil }
      return firstError
    }
    throw error ?? _WritesNotApplied()
  }

  // MARK: Prefetching (see `_Prefetch.swift`)

  /// A prefetch for a write to fill: the one the last write gave back, if it asked for nothing.
  @usableFromInline
  func takePrefetch() -> _Prefetch {
    guard let prefetch = sparePrefetch else { return _Prefetch() }
    sparePrefetch = nil
    return prefetch
  }

  /// Takes back `prefetch`, which a write filled and did not need, for the next write: most
  /// persisted writes find everything in memory, and would otherwise allocate one each.
  @usableFromInline
  func giveBack(_ prefetch: consuming _Prefetch) {
    if prefetch.types.isEmpty { sparePrefetch = prefetch }
  }

  /// A prefetch starts: from now on, changes handed over note what they touch.
  @usableFromInline
  func beginPrefetch() {
    prefetching += 1
  }

  /// The writer applied `layers` while a prefetch is outstanding, which may have read the
  /// store before or after: what they change counts as touched. (A change not yet applied
  /// needs nothing: a read under the lock finds it among the unapplied changes first.)
  ///
  /// - Complexity: O(the layers' changes), once per layer applied, whatever the number of
  ///   prefetches.
  func noteApplied(_ layers: [_StoreLayer]) {
    touchedAny = true
    for persisted in types {
      persisted.touchApplied(
        wiped: layers.contains { wipes(persisted.kind, aliases: false, in: $0) })
    }
    for layer in layers {
      touchedAliases.formUnion(layer.aliases.keys)
      if layer.wipesEverything || !layer.wipedAliasKinds.isEmpty { touchesAllAliases = true }
    }
  }

  /// Whether the alias `name` may have changed in the store since a prefetch began reading.
  func isTouched(alias name: String) -> Bool {
    touchesAllAliases || touchedAliases.contains(name)
  }

  /// The store's whole content was replaced (a restore): everything counts as touched.
  func touchEverything() {
    guard prefetching > 0 else { return }
    for persisted in types { persisted.touchAll() }
    touchesAllAliases = true
    touchedAny = true
  }

  /// A prefetch ends, admitted or dropped; the last one forgets what was touched.
  @usableFromInline
  func endPrefetch() {
    prefetching -= 1
    guard prefetching == 0, touchedAny else { return }
    touchedAny = false
    for persisted in types { persisted.forgetTouched() }
    touchedAliases.removeAll()
    touchesAllAliases = false
  }

  // MARK: Reading

  /// Whether the open layer deletes `kind`'s rows before its own.
  @usableFromInline
  func openWipes(_ kind: String) -> Bool {
    wipes(kind, aliases: false, in: open)
  }

  /// Whether `layer` deletes `kind`'s rows (with `aliases`, its aliases) before its own.
  func wipes(_ kind: String, aliases: Bool, in layer: _StoreLayer) -> Bool {
    layer.wipesEverything
      || (aliases ? layer.wipedAliasKinds.contains(kind) : layer.wipedKinds.contains(kind))
  }

  /// What the unapplied changes say of the alias `name`, whose value type has `kind`: those
  /// of the write under way first.
  func unappliedAlias(_ name: String, kind: String) -> _Unapplied<Any> {
    for op in current.reversed() {
      if let op = op as? _AliasOp, op.name == name {
        return op.values.map { .saved($0, op.stamp) } ?? .deleted
      }
      if op.deletes(kind, aliases: true) { return .deleted }
    }
    for layer in CollectionOfOne(open) + inFlight.reversed() {
      if let op = layer.aliases[name] { return op.values.map { .saved($0, op.stamp) } ?? .deleted }
      if wipes(kind, aliases: true, in: layer) { return .deleted }
    }
    if let op = stuckAliases[name] { return op.values.map { .saved($0, op.stamp) } ?? .deleted }
    return .unknown
  }

  /// What is wrong with the layers; `nil` when nothing is.
  func checkLayers() -> String? {
    if inFlight.count > 1 { return "\(inFlight.count) layers in flight" }
    for persisted in types {
      if let problem = persisted.checkLayers(inFlight: inFlight.count) { return problem }
    }
    return nil
  }
}

/// One layer of unapplied changes: the deletions of whole kinds made in it, and the newest
/// change of each alias. Its rows are kept by type, in `_Persisted`.
struct _StoreLayer {
  /// The deletions, in order. The store applies them before the layer's rows and aliases.
  var wipes: [PersistentChange] = []
  var wipesEverything = false
  var wipedKinds: Set<String> = []
  var wipedAliasKinds: Set<String> = []
  /// The newest change of each alias made in the layer.
  var aliases: [String: _AliasOp] = [:]
}

/// What unapplied changes say about a row.
@usableFromInline
enum _Unapplied<Value> {
  case saved(Value, Stamp?)
  /// Deleted, leaving a tombstone stamped so (see `TombstonePolicy`).
  case tombstone(Stamp)
  case deleted
  case unknown
  /// The store failed to read it: it may hold anything (see `_Verdict.unreadable`).
  case failed
}

/// A change a write hands over that is not a row a commit records: see
/// `_Persistence.current`.
@usableFromInline
class _PersistOp: @unchecked Sendable {
  // NB: @unchecked because the values subclasses hold are `Sendable`.

  /// Adds the change to the open layer.
  func handOver(to _: _Persistence) {}

  /// Whether the change deletes every row of `kind` (with `aliases`, every alias of it).
  func deletes(_ kind: String, aliases: Bool) -> Bool { false }
}

/// The deletion of a kind's rows, of a kind's aliases, or of everything.
final class _WipeOp: _PersistOp, @unchecked Sendable {
  let wipe: PersistentChange

  init(_ change: PersistentChange) {
    wipe = change
  }

  override func handOver(to persistence: _Persistence) { persistence.wipe(wipe) }

  override func deletes(_ kind: String, aliases: Bool) -> Bool {
    switch wipe {
    case .deleteEverything: true
    case .deleteKind(let wiped): !aliases && wiped == kind
    case .deleteAliases(let wiped): aliases && wiped == kind
    case .save, .delete, .saveAlias, .deleteAlias: false
    }
  }
}

/// A change of an alias: its deletion, whatever its type, or (`_AliasSave`) the entities it
/// names, with the values saved (`nil` for a deletion).
@usableFromInline
class _AliasOp: _PersistOp, @unchecked Sendable {
  let name: String
  /// The kind of the alias's value type; `nil` for a deletion.
  let kind: String?
  /// The entities the alias names, as `[T]`; `nil` for a deletion.
  let values: Any?
  let stamp: Stamp?

  @usableFromInline
  init(name: String, kind: String?, values: Any?, stamp: Stamp?) {
    self.name = name
    self.kind = kind
    self.values = values
    self.stamp = stamp
  }

  override func handOver(to persistence: _Persistence) { persistence.noteAlias(self) }

  /// The change, encoded for `store`. On the writer.
  func change(_: any PersistentStore) throws -> PersistentChange {
    .deleteAlias(name: name)
  }
}

/// The error of a restore when the writes committed before it could not all be applied, and
/// the store kept no error of its own to say why.
struct _WritesNotApplied: Error, CustomStringConvertible {
  var description: String {
    "the store could not apply the writes committed before the restore; nothing was restored"
  }
}
