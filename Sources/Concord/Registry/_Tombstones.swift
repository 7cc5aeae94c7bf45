// Tombstones: the stamps of removed entities, kept so that a replayed write no newer than the
// removal is refused (see `TombstonePolicy`).
//
// Each table keeps its type's tombstones by id (`_TombstoneIndex`), in the order they were made;
// the map keeps the limit and the count of all of them (`_Tombstones`). A removal makes its
// tombstones at once and a write that stores the entity again drops it, so that a later write in
// the same transaction is judged against them; inside a transaction every change is undone by a
// record (`_Tombstones.undo`) if it throws. When there are more than the limit, the oldest
// tombstone of any table goes first: the tables' oldest are compared, which costs a look at each
// table holding tombstones, and only when the limit is reached.

/// One tombstone: the stamp a removed entity had, and when it was made.
@usableFromInline
struct _Tomb {
  @usableFromInline let stamp: Stamp
  /// The map-wide serial number of the tombstone: older tombstones have lower ones.
  @usableFromInline let serial: UInt64

  @inlinable
  init(stamp: Stamp, serial: UInt64) {
    self.stamp = stamp
    self.serial = serial
  }
}

/// The tombstones of one entity type, by id, and their order.
@usableFromInline
struct _TombstoneIndex<ID: Hashable> {
  @usableFromInline var tombs: [ID: _Tomb] = [:]
  /// Every tombstone made, oldest first, from `head` on; an entry is stale when its id's
  /// tombstone is gone or newer.
  @usableFromInline var order: [(id: ID, serial: UInt64)] = []
  @usableFromInline var head = 0

  @usableFromInline init() {}

  /// Whether the type has no tombstone: the check every write of the type makes.
  @inlinable var isEmpty: Bool { tombs.isEmpty }

  @inlinable var count: Int { tombs.count }

  /// The stamp of the tombstone of `id`, if it has one.
  @inlinable
  func stamp(of id: ID) -> Stamp? { tombs[id]?.stamp }

  /// Records the tombstone of `id`, newer than every other; returns the one it replaces.
  @inlinable mutating func insert(_ id: ID, _ tomb: _Tomb) -> _Tomb? {
    order.append((id, tomb.serial))
    let previous = tombs.updateValue(tomb, forKey: id)
    compactIfNeeded()
    return previous
  }

  /// Forgets the tombstone of `id`; returns it.
  @inlinable mutating func remove(_ id: ID) -> _Tomb? {
    guard let previous = tombs.removeValue(forKey: id) else { return nil }
    compactIfNeeded()
    return previous
  }

  /// Makes `tomb` the tombstone of `id` again, in its place by age, or forgets it when `nil`:
  /// the undo of a change a transaction made. Returns whether `id` had one.
  @inlinable mutating func put(_ id: ID, _ tomb: _Tomb?) -> Bool {
    guard let tomb else { return remove(id) != nil }
    let had = tombs.updateValue(tomb, forKey: id) != nil
    // NB: `order` is sorted by serial, stale entries included: a binary search finds the place.
    var low = head
    var high = order.count
    while low < high {
      let middle = (low + high) / 2
      if order[middle].serial < tomb.serial { low = middle + 1 } else { high = middle }
    }
    // NB: its entry may still be there, stale while it was gone: serial numbers are unique.
    if low == order.count || order[low].serial != tomb.serial {
      order.insert((id, tomb.serial), at: low)
    }
    return had
  }

  /// The serial number of the oldest tombstone, dropping the stale entries before it.
  @inlinable mutating func oldestSerial() -> UInt64? {
    while head < order.count {
      let (id, serial) = order[head]
      if tombs[id]?.serial == serial { return serial }
      head += 1
    }
    return nil
  }

  /// Forgets the oldest tombstone, and returns it with its id.
  @inlinable mutating func removeOldest() -> (id: ID, tomb: _Tomb)? {
    guard oldestSerial() != nil else { return nil }
    let id = order[head].id
    head += 1
    let tomb = tombs.removeValue(forKey: id)
    compactIfNeeded()
    return tomb.map { (id, $0) }
  }

  @inlinable mutating func removeAll() {
    tombs = [:]
    order = []
    head = 0
  }

  /// Drops the stale entries of `order` once they outnumber the live ones: O(1) amortized.
  @inlinable mutating func compactIfNeeded() {
    guard order.count > 2 * tombs.count + 32 else { return }
    order = order[head...].filter { tombs[$0.id]?.serial == $0.serial }
    head = 0
  }

  /// What is wrong with the index, if anything; for `_checkInvariants`.
  @inlinable var problem: String? {
    let live = order[head...].filter { tombs[$0.id]?.serial == $0.serial }
    guard live.count == tombs.count else {
      return "\(tombs.count) tombstones, \(live.count) in order"
    }
    guard zip(live, live.dropFirst()).allSatisfy({ $0.serial < $1.serial }) else {
      return "tombstones out of order"
    }
    return nil
  }
}

/// The map's tombstones: its limit, how many its tables hold, and how to undo what the open
/// transactions did to them.
@usableFromInline
struct _Tombstones {
  /// How many are kept; 0 when the map keeps none.
  @usableFromInline let limit: Int
  /// How many the tables hold.
  @usableFromInline var count = 0
  /// The serial number of the last one made.
  @usableFromInline var serial: UInt64 = 0
  /// What puts back each change made inside the open transactions, oldest first: a rollback
  /// runs those made since its savepoint (`_Savepoint.tombstones`), newest first. Emptied when
  /// the write ends.
  @usableFromInline var undo: [(_MapCore) -> Void] = []

  @usableFromInline
  init(_ policy: TombstonePolicy) {
    limit = policy.limit
  }

  /// The next serial number.
  @inlinable mutating func nextSerial() -> UInt64 {
    serial += 1
    return serial
  }
}

extension _Table {
  /// Whether the write of `node`, which the write under way just created, stamped `stamp`, is
  /// refused by the entity's tombstone: a stamped write no newer than the removal (NaN
  /// included). A write that is not refused brings the entity back and drops the tombstone; one
  /// with no stamp always does. A refused node shows the tombstone's stamp, which its stale
  /// write is logged against, and goes when the pass ends (see `_PassBuffers.refused`), unless
  /// a newer occurrence in the same write is not refused: its node then starts unstamped again.
  ///
  /// - Complexity: O(1); one check of an empty dictionary while the type has no tombstone.
  @inlinable
  func refusesCreated(_ node: _EntityNode<T>, stamp: Stamp?, _ core: _MapCore) -> Bool {
    guard !tombstones.isEmpty, let tomb = tombstones.stamp(of: node.value.id) else { return false }
    if let stamp, !(stamp > tomb) {
      node.s.stamp = tomb
      return true
    }
    unentomb(node.value.id, core)
    node.s.stamp = .nan
    return false
  }

  /// Records the tombstone of the entity `id`, removed with `stamp` (nothing when it had none,
  /// or the map keeps none), and forgets the oldest beyond the limit.
  @inlinable func entomb(_ id: T.ID, stamp: Stamp, _ core: _MapCore) {
    guard core.tombstones.limit > 0, !stamp.isNaN else { return }
    let previous = tombstones.insert(id, _Tomb(stamp: stamp, serial: core.tombstones.nextSerial()))
    if previous == nil { core.tombstones.count += 1 }
    noteUndo(id, previous, core)
    while core.tombstones.count > core.tombstones.limit { core.evictOldestTombstone() }
  }

  /// Forgets the tombstone of the entity `id`, stored again.
  @inlinable func unentomb(_ id: T.ID, _ core: _MapCore) {
    guard let previous = tombstones.remove(id) else { return }
    core.tombstones.count -= 1
    noteUndo(id, previous, core)
  }

  /// Forgets the table's oldest tombstone; a persisted type's record of it is deleted with the
  /// write's other changes.
  @inlinable func evictOldestTombstone(_ core: _MapCore) {
    guard let (id, tomb) = tombstones.removeOldest() else { return }
    core.tombstones.count -= 1
    persisted?.stage(_Row(id: id, value: nil, stamp: nil))
    guard core.journal.level > 0 else { return }
    core.tombstones.undo.append { core in
      if !self.tombstones.put(id, tomb) { core.tombstones.count += 1 }
      // NB: the deletion of its record was staged at once: the record goes back after it.
      self.persisted?.stage(_Row(id: id, value: nil, stamp: tomb.stamp))
    }
  }

  /// Keeps the tombstones the store has for the table's type, oldest stamp first, as far as
  /// the limit goes; those beyond it are deleted from the store. What `persist(_:as:)` does, so
  /// that the tombstones stay bounded across launches.
  ///
  /// - Complexity: O(tombstones of the type in the store).
  @usableFromInline func adoptStoredTombstones(
    _ stored: [(id: T.ID, stamp: Stamp)], _ core: _MapCore
  ) {
    for (id, stamp) in stored.sorted(by: { $0.stamp < $1.stamp })
    where tombstones.stamp(of: id) == nil && slots[id] == nil {
      entomb(id, stamp: stamp, core)
    }
  }

  /// Forgets every tombstone of the table.
  @inlinable func clearTombstones(_ core: _MapCore) {
    guard !tombstones.isEmpty else { return }
    let saved = tombstones
    core.tombstones.count -= saved.count
    tombstones.removeAll()
    guard core.journal.level > 0 else { return }
    core.tombstones.undo.append { core in
      self.tombstones = saved
      core.tombstones.count += saved.count
    }
  }

  /// Inside a transaction, records how to put back `previous` as the tombstone of `id`.
  @inlinable func noteUndo(_ id: T.ID, _ previous: _Tomb?, _ core: _MapCore) {
    guard core.journal.level > 0 else { return }
    core.tombstones.undo.append { core in
      let had = self.tombstones.put(id, previous)
      core.tombstones.count += (previous == nil ? 0 : 1) - (had ? 1 : 0)
    }
  }
}

extension _MapCore {
  /// Forgets the oldest tombstone of any table.
  ///
  /// - Complexity: O(tables).
  @usableFromInline
  func evictOldestTombstone() {
    var oldest: (table: _AnyTable, serial: UInt64)?
    for table in registry.tables {
      if let serial = table.queries.oldestTombstone(table), serial < oldest?.serial ?? .max {
        oldest = (table, serial)
      }
    }
    oldest.map { $0.table.queries.evictTombstone($0.table, self) }
  }

  /// Puts the tombstones back as they were when the transaction of `savepoint` began.
  func rollBackTombstones(to savepoint: Int) {
    while tombstones.undo.count > savepoint { tombstones.undo.removeLast()(self) }
  }
}
