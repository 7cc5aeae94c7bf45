// Tombstones: the stamps of removed entities, kept so that a replayed write no newer than the
// removal is refused (see `TombstonePolicy`).
//
// Each table keeps its type's tombstones in its index of nodes, by id, and their records in the
// order they were made (`_TombstoneIndex`); the map keeps the limit and the count of all of them
// (`_Tombstones`). A removal makes its
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

/// The tombstones of one entity type, in the order they were made.
///
/// The table's index of nodes (`_NodeIndex`) files each tombstone under its id, in a bucket
/// whose mark is the tombstone's place in `records`: finding a tombstone is the probe that finds
/// a node, and a removal turns the node's bucket into its tombstone. A record is live while the
/// index's tombstone of its id marks it; the others are stale, left by tombstones dropped or
/// made again, and go when they outnumber the live ones (`compactIfNeeded`), never while a
/// transaction may still put back a tombstone by its record (`_Tombstones.undo`).
@usableFromInline
struct _TombstoneIndex<ID: Hashable> {
  /// Every tombstone made, oldest first, from `head` on; sorted by serial number.
  @usableFromInline var records: [(id: ID, tomb: _Tomb)] = []
  @usableFromInline var head = 0

  @usableFromInline init() {}

  /// The tombstone of `id` and its place in `records`, if it has one.
  @inlinable
  func find<Node>(_ id: ID, in slots: _NodeIndex<ID, Node>) -> (bucket: Int, tomb: _Tomb)? {
    guard slots.tombCount > 0, let bucket = slots.findTomb(id) else { return nil }
    return (bucket, records[slots.mark(at: bucket)].tomb)
  }

  /// The stamp of the tombstone of `id`, if it has one.
  @inlinable
  func stamp<Node>(of id: ID, in slots: _NodeIndex<ID, Node>) -> Stamp? {
    find(id, in: slots)?.tomb.stamp
  }

  /// Records the tombstone of `id`, newer than every other; returns the one it replaces.
  @inlinable mutating func insert<Node>(
    _ id: ID, _ tomb: _Tomb, in slots: inout _NodeIndex<ID, Node>
  ) -> _Tomb? {
    let previous = find(id, in: slots)
    if let previous {
      slots.setMark(records.count, at: previous.bucket)
    } else {
      slots.insertTomb(id, mark: records.count)
    }
    records.append((id, tomb))
    return previous?.tomb
  }

  /// Turns the node of `bucket`, whose id is `id` and has no tombstone, into the tombstone
  /// `tomb`, newer than every other: a removal's one probe.
  @inlinable mutating func entomb<Node>(
    at bucket: Int, _ id: ID, _ tomb: _Tomb, in slots: inout _NodeIndex<ID, Node>
  ) {
    slots.entomb(at: bucket, mark: records.count)
    records.append((id, tomb))
  }

  /// Forgets the tombstone of `id`; returns it.
  @inlinable mutating func remove<Node>(
    _ id: ID, in slots: inout _NodeIndex<ID, Node>
  ) -> _Tomb? {
    guard let (bucket, tomb) = find(id, in: slots) else { return nil }
    slots.removeEntry(at: bucket)
    return tomb
  }

  /// Makes `tomb` the tombstone of `id` again, or forgets it when `nil`: the undo of a change a
  /// transaction made, whose record is still there (no compaction runs while the transaction
  /// is open). Returns whether `id` had one.
  @inlinable mutating func put<Node>(
    _ id: ID, _ tomb: _Tomb?, in slots: inout _NodeIndex<ID, Node>
  ) -> Bool {
    guard let tomb else { return remove(id, in: &slots) != nil }
    // NB: `records` is sorted by serial, stale records included: a binary search finds it.
    var low = 0
    var high = records.count
    while low < high {
      let middle = (low + high) / 2
      if records[middle].tomb.serial < tomb.serial { low = middle + 1 } else { high = middle }
    }
    precondition(
      low < records.count && records[low].tomb.serial == tomb.serial,
      "Concord: a rolled-back tombstone lost its record")
    head = Swift.min(head, low)
    if let (bucket, _) = find(id, in: slots) {
      slots.setMark(low, at: bucket)
      return true
    }
    slots.insertTomb(id, mark: low)
    return false
  }

  /// Whether `records[index]` is its id's tombstone.
  @inlinable
  func isLive<Node>(_ index: Int, in slots: _NodeIndex<ID, Node>) -> Bool {
    slots.findTomb(records[index].id).map { slots.mark(at: $0) == index } ?? false
  }

  /// The serial number of the oldest tombstone, dropping the stale records before it.
  @inlinable mutating func oldestSerial<Node>(in slots: _NodeIndex<ID, Node>) -> UInt64? {
    guard slots.tombCount > 0 else { return nil }
    while head < records.count {
      if isLive(head, in: slots) { return records[head].tomb.serial }
      head += 1
    }
    return nil
  }

  /// Forgets the oldest tombstone, and returns it with its id.
  @inlinable mutating func removeOldest<Node>(
    in slots: inout _NodeIndex<ID, Node>
  ) -> (id: ID, tomb: _Tomb)? {
    guard oldestSerial(in: slots) != nil else { return nil }
    let (id, tomb) = records[head]
    head += 1
    _ = remove(id, in: &slots)
    return (id, tomb)
  }

  /// Forgets every tombstone.
  @inlinable mutating func removeAll<Node>(in slots: inout _NodeIndex<ID, Node>) {
    slots.removeAllTombs()
    records = []
    head = 0
  }

  /// Drops the stale records once they outnumber the live ones, and marks the live ones'
  /// buckets with their new places: O(records), so O(1) amortized.
  @inlinable mutating func compactIfNeeded<Node>(in slots: inout _NodeIndex<ID, Node>) {
    guard records.count > 2 * slots.tombCount + 32 else { return }
    // The bucket of each live record, by the record's place. NB: found by walking the buckets,
    // which hashes nothing, unless they far outnumber the records (a large table with few
    // tombstones): then by finding each record's.
    var buckets = [Int](repeating: -1, count: records.count)
    if slots.mask < 4 * records.count {
      for bucket in 0...slots.mask where slots.tags[bucket] != 0 && !slots.holdsNode(bucket) {
        buckets[slots.mark(at: bucket)] = bucket
      }
    } else {
      for index in head..<records.count {
        if let bucket = slots.findTomb(records[index].id), slots.mark(at: bucket) == index {
          buckets[index] = bucket
        }
      }
    }
    var live: [(id: ID, tomb: _Tomb)] = []
    live.reserveCapacity(slots.tombCount)
    for index in head..<records.count where buckets[index] >= 0 {
      slots.setMark(live.count, at: buckets[index])
      live.append(records[index])
    }
    records = live
    head = 0
  }

  /// What is wrong with the tombstones, if anything: records out of order, a count that
  /// differs from the live records, or an entity stored with a tombstone; for
  /// `_checkInvariants`, after every write. NB: O(records), not O(buckets): each live record is
  /// found by its id, so that the check stays cheap in a large table. (`_NodeIndex.problem`
  /// checks each bucket.)
  @inlinable
  func problem<Node>(in slots: _NodeIndex<ID, Node>) -> String? {
    var live = 0
    for index in head..<records.count {
      if index > 0 && records[index - 1].tomb.serial >= records[index].tomb.serial {
        return "tombstones out of order"
      }
      guard isLive(index, in: slots) else { continue }
      live += 1
      if slots[records[index].id] != nil {
        return "\(records[index].id) is stored and has a tombstone"
      }
    }
    return live == slots.tombCount ? nil : "\(slots.tombCount) tombstones, \(live) recorded"
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

  /// Counts `delta` more tombstones in the tables (fewer, when negative).
  @inlinable mutating func counted(_ delta: Int) {
    count += delta
  }

  /// Whether the tables hold more tombstones than the limit.
  @inlinable var isOverLimit: Bool { count > limit }

  /// Records how to put back a change made inside the open transactions; see `undo`.
  @inlinable mutating func recordUndo(_ undo: @escaping (_MapCore) -> Void) {
    self.undo.append(undo)
  }

  /// How many undos the open transactions recorded: a transaction's savepoint.
  var undoCount: Int { mutating get { undo.count } }

  /// The newest undo recorded after a transaction's `savepoint`, taken off the list: the
  /// caller runs it (see `_MapCore.rollBack(to:)`). `nil` once there is none.
  mutating func popUndo(after savepoint: Int) -> ((_MapCore) -> Void)? {
    undo.count > savepoint ? undo.removeLast() : nil
  }
}

extension _Table {
  /// Whether the type has a tombstone: the check every write of a created node makes.
  @inlinable var hasTombstones: Bool { slots.tombCount > 0 }

  /// The stamp of the tombstone of `id`, if it has one.
  @inlinable func tombstone(of id: T.ID) -> Stamp? { tombstones.stamp(of: id, in: slots) }

  /// Whether the write of `node`, which the write under way just created, stamped `stamp`, is
  /// refused by the entity's tombstone: a stamped write no newer than the removal (NaN
  /// included). A write that is not refused brings the entity back and drops the tombstone; one
  /// with no stamp always does. A refused node shows the tombstone's stamp, which its stale
  /// write is logged against, and goes when the pass ends (see `_PassBuffers.refused`), unless
  /// a newer occurrence in the same write is not refused: its node then starts unstamped again.
  ///
  /// - Complexity: O(1); one check of a count while the type has no tombstone.
  @inlinable
  func refusesCreated(_ node: _EntityNode<T>, stamp: Stamp?, _ core: _MapCore) -> Bool {
    guard hasTombstones, let tomb = tombstone(of: node.value.id) else { return false }
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
    let tomb = _Tomb(stamp: stamp, serial: core.tombstones.nextSerial())
    let previous = tombstones.insert(id, tomb, in: &slots)
    if previous == nil { core.tombstones.counted(1) }
    noteUndo(id, previous, core)
    didEntomb(core)
  }

  /// Takes the node of `bucket`, the entity `id`, out of the index and leaves its tombstone
  /// there, stamped `stamp`, in the same bucket: a removal's one probe. The caller takes over
  /// the table's retain of the node. Only outside transactions, for an entity with no
  /// tombstone (no stored entity has one), a stamp and a map that keeps tombstones.
  @inlinable func entombInPlace(at bucket: Int, _ id: T.ID, stamp: Stamp, _ core: _MapCore) {
    assert(tombstone(of: id) == nil, "Concord: a stored entity has a tombstone")
    tombstones.entomb(
      at: bucket, id, _Tomb(stamp: stamp, serial: core.tombstones.nextSerial()), in: &slots)
    core.tombstones.counted(1)
    didEntomb(core)
  }

  /// Forgets the oldest tombstones beyond the limit, and drops stale records if they are many.
  @inlinable func didEntomb(_ core: _MapCore) {
    while core.tombstones.isOverLimit { core.evictOldestTombstone() }
    compactTombstones(core)
  }

  /// Drops the stale tombstone records once they outnumber the live ones, unless a transaction
  /// is open: its rollback puts tombstones back by their records.
  @inlinable func compactTombstones(_ core: _MapCore) {
    if core.journal.level == 0 { tombstones.compactIfNeeded(in: &slots) }
  }

  /// Forgets the tombstone of the entity `id`, stored again.
  @inlinable func unentomb(_ id: T.ID, _ core: _MapCore) {
    guard let previous = tombstones.remove(id, in: &slots) else { return }
    core.tombstones.counted(-1)
    noteUndo(id, previous, core)
    compactTombstones(core)
  }

  /// Forgets the table's oldest tombstone; a persisted type's record of it is deleted with the
  /// write's other changes.
  @inlinable func evictOldestTombstone(_ core: _MapCore) {
    guard let (id, tomb) = tombstones.removeOldest(in: &slots) else { return }
    core.tombstones.counted(-1)
    persisted?.stage(_Row(id: id, value: nil, stamp: nil))
    guard core.journal.level > 0 else { return }
    core.tombstones.recordUndo { core in
      if !self.tombstones.put(id, tomb, in: &self.slots) { core.tombstones.counted(1) }
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
    where tombstone(of: id) == nil && slots[id] == nil {
      entomb(id, stamp: stamp, core)
    }
  }

  /// Forgets every tombstone of the table.
  @inlinable func clearTombstones(_ core: _MapCore) {
    guard hasTombstones else { return }
    core.tombstones.counted(-slots.tombCount)
    guard core.journal.level > 0 else { return tombstones.removeAll(in: &slots) }
    // NB: the records stay as they are for the undo, which files the live ones again.
    let saved = tombstones
    var live: [(id: T.ID, mark: Int)] = []
    slots.forEachTomb { live.append(($0, $1)) }
    tombstones.removeAll(in: &slots)
    core.tombstones.recordUndo { core in
      self.tombstones = saved
      for (id, mark) in live { self.slots.insertTomb(id, mark: mark) }
      core.tombstones.counted(live.count)
    }
  }

  /// Inside a transaction, records how to put back `previous` as the tombstone of `id`.
  @inlinable func noteUndo(_ id: T.ID, _ previous: _Tomb?, _ core: _MapCore) {
    guard core.journal.level > 0 else { return }
    core.tombstones.recordUndo { core in
      let had = self.tombstones.put(id, previous, in: &self.slots)
      core.tombstones.counted((previous == nil ? 0 : 1) - (had ? 1 : 0))
    }
  }
}
