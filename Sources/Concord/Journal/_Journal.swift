// The journal: what each node was before the current write touched it.
//
// Before the engine changes a node (its value, stamp, links, registration or anchor), it calls
// `touch(_:)`, which records the node's state once per transaction level. The journal serves
// two purposes with one record:
//
// - Rollback. A transaction that throws restores, newest first, every node recorded since it
//   began; nested transactions each restore only their own level.
// - The change log. When the outermost write commits, each node's *first* record holds its state
//   before the write, so comparing it with the node now says what the write did to it:
//   inserted, updated (and whether `==` sees a difference), or removed. A transaction that ends
//   where it started therefore changes nothing, however many writes it made.
//
// Saved values live in per-type stashes (`_Stash`), so recording a node costs no allocation.

/// A node's state before a write touched it, at one transaction level.
@usableFromInline
struct _JournalEntry {
  /// NB: unowned(unsafe), by rule 3 of `_Lifetime.swift`: every node a write drops (from a
  /// table, an alias slot or an adoption) goes to the outbox's graveyard, released only after
  /// the lock, so it outlives its records, which the commit empties.
  @usableFromInline unowned(unsafe) let node: _AnyNode
  /// The node's `journalMark` before this record: 0 when this is the write's first record of
  /// the node, which holds its state before the write.
  @usableFromInline let previousMark: UInt8
  /// Where the value was saved in the node type's stash; `created` for a node the write
  /// created, `notSaved` when nothing needed the value.
  @usableFromInline let saved: Int32
  @usableFromInline let stamp: Stamp
  /// The links, saved inside a transaction only: nothing else restores them. For a batch list
  /// the write created, the entities it was stored with (see `_MapCore.storeList`).
  @usableFromInline var links: [_ChildLink]?
  /// `.registered`, `.removed` and `.anchored`, as they were.
  @usableFromInline let flags: _NodeFlags
  /// Whether the node was stored: see `_AnyNode.isPresent`.
  @usableFromInline let wasPresent: Bool

  /// `saved` for a node the write created: it had no value.
  @inlinable static var created: Int32 { -1 }
  /// `saved` when the value was not kept; see `touch(_:)`.
  @inlinable static var notSaved: Int32 { -2 }

  @inlinable
  init(
    node: _AnyNode, previousMark: UInt8, saved: Int32, stamp: Stamp,
    links: [_ChildLink]?, flags: _NodeFlags, wasPresent: Bool
  ) {
    self.node = node
    self.previousMark = previousMark
    self.saved = saved
    self.stamp = stamp
    self.links = links
    self.flags = flags
    self.wasPresent = wasPresent
  }
}

/// The current write's journal and transaction levels.
///
/// NB: the computed properties of this and the other parts of the core have mutating getters:
/// a non-mutating one, read through the core, copies the whole part first (and retains every
/// array in it), on the hot path.
@usableFromInline
struct _Journal {
  @usableFromInline var entries: [_JournalEntry] = []
  /// The stashes holding this write's saved values and payloads, emptied when it ends.
  /// NB: unretained (rules 1 and 3 of `_Lifetime.swift`): a stash lives in its table, which
  /// lives as long as the map, or in a list, alias or query node, which a write that drops it
  /// puts in the graveyard, released after the commit has emptied this list.
  @usableFromInline var stashes: [Unmanaged<_AnyStash>] = []
  /// The nodes the load under way created, recorded as present before the write when the load
  /// ends (`recordLoaded()`); see `_MapCore.admitLoaded(_:stamp:in:)`.
  @usableFromInline var loaded: [_AnyNode] = []
  /// The serial numbers of the open transactions, innermost last.
  @usableFromInline var transactions: [Int] = []
  /// The serial number of the last transaction opened.
  var lastSerial = 0

  @usableFromInline init() {}

  /// How many transactions are open.
  @inlinable
  var level: Int32 { mutating get { Int32(transactions.count) } }

  /// The `journalMark` of a node recorded at the current level.
  @inlinable
  var mark: UInt8 { mutating get { UInt8(truncatingIfNeeded: transactions.count + 1) } }
}

/// Where each node's first record is in a write's journal: its state before the write.
///
/// NB: a few records are looked through in order: most optimistic layers write one entity
/// or a few, and the list below cost an allocation and a sort for each
/// (`optimistic.apply+rollback`). Past `scanningUpTo` records, a list ordered by node is searched
/// by halves, not a dictionary, which cost an allocation and a hash per record more.
struct _FirstRecords {
  private let entries: [_JournalEntry]
  /// The first records by node, when there are more records than the caller would look through;
  /// empty otherwise.
  private var byNode: [(node: ObjectIdentifier, index: Int)] = []
  private let scans: Bool

  /// Finds the first records in `entries`, looking through at most `scanningUpTo` of them in
  /// order for each node (`_Pass.isExhaustive` asks for none, so that the differential tests
  /// search the ordered list).
  init(_ entries: [_JournalEntry], scanningUpTo limit: Int) {
    self.entries = entries
    scans = entries.count <= limit
    guard !scans else { return }
    for index in entries.indices where entries[index].previousMark == 0 {
      byNode.append((ObjectIdentifier(entries[index].node), index))
    }
    byNode.sort { $0.node < $1.node }
  }

  /// The index of `node`'s first record, if the write touched it.
  ///
  /// - Complexity: O(*n*) for *n* records up to the limit the records were made with, O(log *n*)
  ///   for *n* nodes touched past it.
  func index(of node: _AnyNode) -> Int? {
    if scans {
      return entries.firstIndex { $0.node === node && $0.previousMark == 0 }
    }
    let key = ObjectIdentifier(node)
    var low = 0
    var high = byNode.count
    while low < high {
      let middle = (low + high) / 2
      if byNode[middle].node < key { low = middle + 1 } else { high = middle }
    }
    return low < byNode.count && byNode[low].node == key ? byNode[low].index : nil
  }
}

/// A point to roll back to: where the journal and the log were when a transaction began.
@usableFromInline
struct _Savepoint {
  let serial: Int
  let entries: Int
  let events: Int
  /// How many nodes the write had listed as stored into; see `_Outbox.written`.
  let written: Int
  /// How many changes for the store the write had listed; see `_Persistence.current`.
  let persisted: Int
  /// How many tombstone changes the write had made inside transactions; see
  /// `_Tombstones.undo`.
  let tombstones: Int
}

extension _Journal {
  // MARK: Records

  /// Records `node`'s state, unless it was already recorded at the current transaction level.
  /// Call it before any change to the node.
  ///
  /// The value is saved when something needs it: a rollback, a subscriber to tell only if it
  /// changed, an alias's log, a consumer of its type's changes (`audience`), which compares
  /// with it. Otherwise the node is counted as updated, which tells nobody, and the copy and
  /// the `==` are saved on every parent a change reaches. (Persistence alone needs no old
  /// value: it saves what changed.)
  @inlinable
  mutating func touch(_ node: _AnyNode, _ audience: _Audience) {
    if node.s.journalMark == mark { return }
    let wasPresent = node.isPresent
    let saved =
      savesValue(of: node, audience)
      ? node.witness.saveValue(node, &stashes) : _JournalEntry.notSaved
    append(node, saved: saved, wasPresent: wasPresent)
  }

  /// Whether `touch(_:_:)` saves `node`'s value: whether anything reads what the node was
  /// before the write.
  @inlinable
  mutating func savesValue(of node: _AnyNode, _ audience: _Audience) -> Bool {
    level > 0 || node.hasSubscribers || node.s.flags.contains(.alias)
      || audience.readsChanges(of: node)
  }

  /// Whether anyone would read a record of `node` made now: whoever reads its value before the
  /// write (`savesValue(of:_:)`), the store (which saves what changed), or a query or
  /// collector waiting to start at the commit. When no one would, a change to the node needs
  /// no record: the commit would find it and tell no one.
  @inlinable
  mutating func isRead(_ node: _AnyNode, _ audience: _Audience) -> Bool {
    savesValue(of: node, audience) || audience.persistedTypes > 0 || audience.startsPending
  }

  /// Keeps `value` aside in `stash` for the write under way, and returns where: a claim's
  /// payload, say. The stash is emptied when the write ends (see `forget()`).
  @inlinable
  mutating func keep<Value>(_ value: Value, in stash: _Stash<Value>) -> Int32 {
    stash.append(value, enlistingIn: &stashes)
  }

  /// Records a node the current write just created: before, it did not exist.
  @inlinable
  mutating func recordCreated(_ node: _AnyNode) {
    append(node, saved: _JournalEntry.created, wasPresent: false)
  }

  /// Appends the record of `node`, whose value was saved at `saved`, and marks the node as
  /// recorded at the current level.
  @usableFromInline
  mutating func append(_ node: _AnyNode, saved: Int32, wasPresent: Bool) {
    let flags = node.s.flags.intersection([.registered, .removed, .anchored])
    let previousMark = node.s.journalMark
    node.s.journalMark = mark
    entries.append(
      _JournalEntry(
        node: node, previousMark: previousMark, saved: saved,
        stamp: node.s.stamp, links: level > 0 ? node.children : nil,
        flags: saved == _JournalEntry.created ? [] : flags, wasPresent: wasPresent))
  }

  /// Marks `node`, which a load from the store just created: no write touches it again at
  /// this level, and `recordLoaded()` records it when the load ends.
  @inlinable
  mutating func noteLoaded(_ node: _AnyNode) {
    node.s.journalMark = mark
    loaded.append(node)
  }

  /// Records the nodes the load created (`noteLoaded(_:)`) as present before the write, with
  /// the values and stamps they were loaded with: a load changes nothing anyone sees.
  @usableFromInline
  mutating func recordLoaded() {
    for node in loaded {
      entries.append(
        _JournalEntry(
          node: node, previousMark: 0, saved: node.witness.saveValue(node, &stashes),
          stamp: node.s.stamp, links: level > 0 ? node.children : nil,
          flags: node.s.flags.intersection([.registered, .removed, .anchored]),
          wasPresent: true))
    }
    loaded.removeAll()
  }

  /// Whether the write of `node`, a root of type `V` about to be written by a pass (and
  /// `created` by this write), can be published as it is made, skipping the journal: only a
  /// value holding no nested entity, whose node no parent shows, written in the `outermost`
  /// write while it has recorded nothing else (so that nothing later in it can touch the node
  /// again), when no consumer reads its type's changes from the journal. Not under optimistic
  /// layers, which roll the write back into them before it commits, but for a node whose
  /// shadow exchanged its value for the one underneath (see `_Shadow._lower(_:)`), when no
  /// subscriber would be told the value underneath (implied today: the lowering of a node
  /// with subscribers records it, so the journal is not empty) and no type is persisted (the
  /// store would be handed the value underneath, where a journaled commit hands over the
  /// visible one; `PersistentOptimisticTests`): the write changes nothing anyone sees, and
  /// raising the node gives it back what it showed. Returns the
  /// change to publish then: `.inserted` for a node the write created, `.updated` otherwise
  /// (see `_Pass.run(into:...)`); `nil` when the journal records the write.
  /// (A persisted type's change is handed to persistence as it is published: see
  /// `_MapCore.publishDirectly(_:_:stampBefore:)`.)
  @inlinable
  mutating func publishesDirectly<V>(
    _ node: _Node<V>, schema: _Schema<V>, created: Bool, outermost: Bool, _ audience: _Audience
  ) -> _ChangeKind? {
    guard
      schema.isLeaf && !node.hasParents && outermost && entries.isEmpty
        && !audience.readsChanges(of: node)
        && (!audience.underLayers
          || (node.s.flags.contains(.exchanged) && !node.hasSubscribers
            && audience.persistedTypes == 0))
    else { return nil }
    return created ? .inserted : .updated
  }

  /// Whether a parent that a propagation patches needs its record.
  ///
  /// Outside transactions (so outside an optimistic layer's own writes), with no subscriber on
  /// the parent and no alias, and while nothing else hears every change (`audience`), nothing
  /// reads the record: a rollback would not happen, and the commit would only find that
  /// nobody is to be told. A fan-out then skips the record for each parent.
  @inlinable
  mutating func recordsPatch(of parent: _AnyNode, _ audience: _Audience) -> Bool {
    level > 0 || audience.hearsEveryChange || parent.s.flags.contains(.alias)
      || parent.hasSubscribers
  }

  // MARK: The change log

  /// What the write did to the node of record `index`, which is the node's first: its state
  /// before the write compared with its state now. `nil` for a node created and taken out
  /// again within the write, which committed nothing.
  @usableFromInline
  mutating func change(at index: Int) -> _ChangeKind? {
    let wasPresent = entries[index].wasPresent
    let saved = entries[index].saved
    // NB: borrowed, not retained (see `_JournalEntry.node`): a retain and a release per record
    // were a good share of a fan-out's commit.
    return Unmanaged.passUnretained(entries[index].node)._withUnsafeGuaranteedRef { node in
      if node.isPresent {
        if !wasPresent { return .inserted }
        // NB: a value not saved (see `touch(_:_:)`) counts as changed.
        return saved < 0 || node.witness.differs(node, saved) ? .updated : .unchanged
      }
      return wasPresent ? .removed : nil
    }
  }

  /// Forgets the committed write: clears the records, the nodes' marks and the stashes.
  ///
  /// NB: by index: copying each record out would retain and release its fields. And only when
  /// there is anything: a write that published directly leaves both empty, and emptying them
  /// anyway was a good share of its commit.
  @usableFromInline
  mutating func forget() {
    if !entries.isEmpty {
      for index in entries.indices { entries[index].node.s.journalMark = 0 }
      entries.removeAllKeepingCapacity()
    }
    if !stashes.isEmpty {
      for stash in stashes { stash._withUnsafeGuaranteedRef { $0.clear($0) } }
      stashes.removeAllKeepingCapacity()
    }
  }

  // MARK: Transactions

  /// Opens a transaction inside the current write, which had logged `events` events, listed
  /// `written` nodes and `persisted` changes for the store so far.
  @usableFromInline
  mutating func begin(events: Int, written: Int, persisted: Int, tombstones: Int)
    -> _Savepoint
  {
    precondition(
      transactions.count < Int(UInt8.max) - 1,
      "Concord: transactions nest at most \(Int(UInt8.max) - 2) deep")
    lastSerial += 1
    transactions.append(lastSerial)
    return _Savepoint(
      serial: lastSerial, entries: entries.count, events: events, written: written,
      persisted: persisted, tombstones: tombstones)
  }

  /// Closes the innermost transaction, keeping its writes. An enclosing transaction can still
  /// revert them.
  ///
  /// The nodes it recorded become recorded at the enclosing level: their records there hold
  /// their state before the enclosing transaction touched them, if it had not already. NB: the
  /// marks must go down with the level; left as they were, a later transaction at the same
  /// level (a sibling) would take them for its own records, record nothing, and a rollback of
  /// the sibling would not restore them.
  ///
  /// - Complexity: O(records made since the transaction began).
  @usableFromInline
  mutating func commit(_ savepoint: _Savepoint) {
    let innermost = mark
    transactions.removeLast()
    let enclosing = mark
    for index in savepoint.entries..<entries.count
    where entries[index].node.s.journalMark == innermost {
      entries[index].node.s.journalMark = enclosing
    }
  }

  /// Whether the transaction numbered `serial` is still open.
  func isOpen(transaction serial: Int) -> Bool {
    transactions.contains(serial)
  }

  /// Closes the innermost transaction, handing `restore` each record made since `savepoint`,
  /// newest first, and forgetting it: the caller puts each node back as the record says (see
  /// `_MapCore.rollBack(to:)`).
  mutating func rollBack(to savepoint: _Savepoint, _ restore: (_JournalEntry) -> Void) {
    while entries.count > savepoint.entries {
      let entry = entries.removeLast()
      entry.node.s.journalMark = entry.previousMark
      restore(entry)
    }
    transactions.removeLast()
  }
}

extension Array {
  /// Empties the array and keeps its buffer for the next write, as
  /// `removeAll(keepingCapacity: true)` does.
  ///
  /// NB: that call goes through `replaceSubrange`, which costs about 15 ns more than popping
  /// the one or two elements a write usually leaves (the journal's records, the nodes listed
  /// under a layer): twice per write under a layer. Longer arrays take the bulk removal.
  @inlinable
  mutating func removeAllKeepingCapacity() {
    guard count > 4 else {
      while popLast() != nil {}
      return
    }
    removeAll(keepingCapacity: true)
  }

  /// Removes the elements that `shouldRemove` picks, keeping the others in their order and the
  /// buffer for the next write.
  ///
  /// NB: `removeAll(where:)` that empties the array gives its buffer back, and the next append
  /// allocates one: the order of the optimistic layers did so on every layer and its rollback.
  @inlinable
  mutating func removeAllKeepingCapacity(where shouldRemove: (Element) -> Bool) {
    var kept = 0
    for index in indices where !shouldRemove(self[index]) {
      if index != kept { swapAt(kept, index) }
      kept += 1
    }
    while count > kept { removeLast() }
  }
}
