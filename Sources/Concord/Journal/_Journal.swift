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

/// A point to roll back to: where the journal and the log were when a transaction began.
struct _Savepoint {
  let serial: Int
  let entries: Int
  let events: Int
  /// How many nodes the write had listed as stored into; see `_Outbox.written`.
  let written: Int
  /// How many changes for the store the write had listed; see `_Persistence.current`.
  let persisted: Int
}

extension _MapCore {
  /// Records `node`'s state, unless it was already recorded at the current transaction level.
  /// Call it before any change to the node.
  @inlinable
  func touch(_ node: _AnyNode) {
    if node.s.journalMark == journal.mark { return }
    let wasPresent = node.isPresent
    // NB: the value is saved when something needs it: a rollback, a subscriber to tell only
    // if it changed, an alias's log. Otherwise the node is counted as updated, which tells
    // nobody, and the copy and the `==` are saved on every parent a change reaches.
    // An entity whose type has queries or collectors: its value before the write is what they
    // compare with. (Persistence alone needs no old value: it saves what changed.)
    let needsValue =
      journal.level > 0 || node.hasSubscribers || node.s.flags.contains(.alias)
      || (registry.consumerCount > 0
        && (node.witness.readsOldValues(node)
          || (registry.logsChangedValues && node.s.flags.isDisjoint(with: [.list, .query]))))
    let saved = needsValue ? node.witness.saveValue(node, self) : _JournalEntry.notSaved
    appendEntry(node, saved: saved, wasPresent: wasPresent)
  }

  /// Whether the write of `node`, a root of type `V` about to be written by a pass (and
  /// `created` by this write), can be published as it is made, skipping the journal: only a
  /// value holding no nested entity, whose node no parent shows, written in the outermost
  /// write while it has touched nothing else (so that nothing later in it can touch the node
  /// again), when no query or collector (nor a logger of changed values) reads its type's
  /// changes from the journal, and never under optimistic layers, which raise their values
  /// before commit. Returns the change to publish then: `.inserted` for a node the write
  /// created, `.updated` otherwise (see `_Pass.run(into:...)`); `nil` when the journal
  /// records the write.
  /// (A persisted type's change is handed to persistence as it is published: see
  /// `publishDirectly(_:_:stampBefore:)`.)
  @inlinable
  func publishesDirectly<V>(_ node: _Node<V>, schema: _Schema<V>, created: Bool) -> _ChangeKind? {
    guard
      schema.isLeaf && !node.hasParents && frame.depth == 1 && journal.entries.isEmpty
        && !layers.isLowered
        && (registry.consumerCount == 0
          || !(node.witness.readsOldValues(node) || registry.logsChangedValues))
    else { return nil }
    return created ? .inserted : .updated
  }

  /// Whether a parent that a propagation patches needs its journal record.
  ///
  /// Outside transactions (so outside an optimistic layer's own writes) and while no layer is
  /// lowered, nothing rolls the patch back; with no subscriber on the parent, no consumer of the
  /// change log (a query, a collector, a logger of changed values), no persisted type and no
  /// alias, the commit would read the record only to find that nobody is to be told. A fan-out
  /// then skips the record for each parent.
  @inlinable
  func recordsPatch(of parent: _AnyNode) -> Bool {
    journal.level > 0 || layers.isLowered || registry.consumerCount > 0
      || !registry.pendingStarts.isEmpty || registry.persistedTypes > 0
      || parent.s.flags.contains(.alias) || parent.hasSubscribers
  }

  /// Publishes a change made without the journal (see `publishesDirectly`), and persists it
  /// when its type is persisted. `stampBefore` is the node's stamp before the write.
  @inlinable
  func publishDirectly(_ node: _AnyNode, _ kind: _ChangeKind, stampBefore: Stamp) {
    publish(node, kind)
    if registry.persistedTypes > 0 {
      node.witness.feedConsumers(node, kind, _JournalEntry.notSaved, stampBefore, self)
    }
  }

  /// Records a node the current write just created: before, it did not exist.
  @inlinable
  func touchCreated(_ node: _AnyNode) {
    appendEntry(node, saved: _JournalEntry.created, wasPresent: false)
  }

  @usableFromInline
  func appendEntry(_ node: _AnyNode, saved: Int32, wasPresent: Bool) {
    let flags = node.s.flags.intersection([.registered, .removed, .anchored])
    let previousMark = node.s.journalMark
    node.s.journalMark = journal.mark
    journal.entries.append(
      _JournalEntry(
        node: node, previousMark: previousMark, saved: saved,
        stamp: node.s.stamp, links: journal.level > 0 ? node.children : nil,
        flags: saved == _JournalEntry.created ? [] : flags, wasPresent: wasPresent))
  }

  // MARK: Transactions

  /// Opens a transaction inside the current write.
  func beginTransaction() -> _Savepoint {
    precondition(
      journal.transactions.count < Int(UInt8.max) - 1,
      "Concord: transactions nest at most \(Int(UInt8.max) - 2) deep")
    journal.lastSerial += 1
    journal.transactions.append(journal.lastSerial)
    return _Savepoint(
      serial: journal.lastSerial, entries: journal.entries.count, events: outbox.events.count,
      written: outbox.written.count, persisted: persistence?.current.count ?? 0)
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
  func commitTransaction(_ savepoint: _Savepoint) {
    let mark = journal.mark
    journal.transactions.removeLast()
    let enclosing = journal.mark
    for index in savepoint.entries..<journal.entries.count
    where journal.entries[index].node.s.journalMark == mark {
      journal.entries[index].node.s.journalMark = enclosing
    }
  }

  /// Whether the transaction numbered `serial` is still open.
  func isOpen(transaction serial: Int) -> Bool {
    journal.transactions.contains(serial)
  }

  /// Closes the innermost transaction and restores every node it touched, newest first.
  ///
  /// Entities it created leave the map, and their handles report `isRemoved`. A batch handle it
  /// created shows those of the entities it was stored with that exist after the rollback,
  /// as a batch handle made before the transaction shows its own.
  func rollBack(to savepoint: _Savepoint) {
    var createdLists: [(list: _AnyNode, links: [_ChildLink])] = []
    while journal.entries.count > savepoint.entries {
      let entry = journal.entries.removeLast()
      let node = entry.node
      node.s.journalMark = entry.previousMark
      if entry.saved == _JournalEntry.created && node.s.flags.contains(.list) {
        createdLists.append((node, entry.links ?? []))
        continue
      }
      restore(entry)
    }
    journal.transactions.removeLast()
    outbox.events.removeSubrange(savepoint.events...)
    if outbox.written.count > savepoint.written {
      outbox.written.removeSubrange(savepoint.written...)
    }
    if let persistence, persistence.current.count > savepoint.persisted {
      persistence.current.removeSubrange(savepoint.persisted...)
    }
    for (list, links) in createdLists { restoreCreated(list, links: links) }
    // NB: cycle numbers are not journaled: the links put back may close cycles again whose
    // members the transaction had numbered apart; number them afresh.
    if !pass.buffers.cycleRoots.isEmpty {
      pass.numberCycles(from: pass.buffers.cycleRoots)
      pass.buffers.cycleRoots.removeAll(keepingCapacity: true)
    }
  }

  /// Puts `entry`'s node back in the state it records.
  private func restore(_ entry: _JournalEntry) {
    let node = entry.node
    let links = entry.links ?? []
    if relink(node, to: links) {
      for link in links where link.child === node || link.child.hasChildren {
        pass.buffers.cycleRoots.append(link.child)
      }
    }
    if entry.saved >= 0 {
      node.witness.restoreValue(node, entry.saved)
    } else if node.s.flags.contains(.alias) {
      node.witness.clearAliasValue(node)
    }
    node.s.stamp = entry.stamp
    let wasRegistered = entry.flags.contains(.registered)
    let isRegistered = node.s.flags.contains(.registered)
    if wasRegistered && !isRegistered {
      node.witness.reregister(node, self)
      disown(node)
    } else if !wasRegistered && isRegistered && !node.s.flags.contains(.alias) {
      unregisterKeepingHolders(node)
    }
    let created = entry.saved == _JournalEntry.created
    if entry.flags.contains(.removed) || (created && !node.s.flags.contains(.alias)) {
      node.s.flags.insert(.removed)
    } else {
      node.s.flags.remove(.removed)
    }
    let wasAnchored = entry.flags.contains(.anchored)
    if wasAnchored != node.s.flags.contains(.anchored) { setAnchor(node, wasAnchored) }
  }

  /// Puts a batch list the rolled-back transaction created back to the entities it was
  /// stored with (`links`), keeps those still in the map, and shows their restored values.
  ///
  /// The list outlives the rollback (its handle holds it), but it did not exist before the
  /// transaction, nor before the enclosing one: the record it gets there says so (created),
  /// with the entities it keeps, so that a rollback of the enclosing transaction does the same
  /// again. NB: a record of the state the body left, handed to the enclosing level, would have
  /// that rollback link the list back to entities this one took out, which are freed once the
  /// write ends.
  private func restoreCreated(_ list: _AnyNode, links: [_ChildLink]) {
    relink(list, to: links)
    list.witness.materialize(list)
    let gone = list.children.indices.filter { !list.children[$0].child.isPresent }
    if !gone.isEmpty { relink(list, to: list.witness.dropChildren(list, gone)) }
    touchCreated(list)
  }
}
