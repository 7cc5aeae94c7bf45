// Transactions: a savepoint of every part that records what a write did, and a rollback that
// asks each part to undo its own records, newest first: the journal hands back each node's state
// before the transaction, which the frame puts back through the node's own operations (its
// links through the lifetimes, its value through its witness, its registration through its
// table); the outbox forgets the log and the nodes written since; the tombstones run their
// undos; persistence drops the changes listed since.

extension _MapCore {
  /// Opens a transaction inside the current write: a savepoint of the journal, the log, the
  /// nodes listed as written, the changes listed for the store and the tombstones' undos.
  @usableFromInline
  func beginTransaction() -> _Savepoint {
    journal.begin(
      events: outbox.eventCount, written: outbox.writtenCount,
      persisted: persistence?.pendingCount ?? 0, tombstones: tombstones.undoCount)
  }

  /// Closes the innermost transaction, keeping its writes; see `_Journal.commit(_:)`.
  @usableFromInline
  func commitTransaction(_ savepoint: _Savepoint) {
    journal.commit(savepoint)
  }

  /// Whether the transaction numbered `serial` is still open.
  @usableFromInline
  func isOpen(transaction serial: Int) -> Bool {
    journal.isOpen(transaction: serial)
  }

  /// The serial number of the innermost open transaction; 0 when none is.
  @usableFromInline
  var innermostTransaction: Int { journal.transactions.last ?? 0 }

  /// Closes the innermost transaction and undoes everything it did, newest first.
  ///
  /// Entities it created leave the map, and their handles report `isRemoved`. A batch handle it
  /// created shows those of the entities it was stored with that exist after the rollback,
  /// as a batch handle made before the transaction shows its own.
  @usableFromInline
  func rollBack(to savepoint: _Savepoint) {
    var createdLists: [(list: _AnyNode, links: [_ChildLink])] = []
    journal.rollBack(to: savepoint) { entry in
      if entry.saved == _JournalEntry.created && entry.node.s.flags.contains(.list) {
        createdLists.append((entry.node, entry.links ?? []))
      } else {
        restore(entry)
      }
    }
    outbox.rollBack(toEvents: savepoint.events, written: savepoint.written)
    // NB: each undo runs once taken: it counts the tombstones again.
    while let undo = tombstones.popUndo(after: savepoint.tombstones) { undo(self) }
    persistence?.rollBack(to: savepoint.persisted)
    for (list, links) in createdLists { restoreCreated(list, links: links) }
    // NB: cycle numbers are not journaled: the links put back may close cycles again whose
    // members the transaction had numbered apart; number them afresh.
    pass.numberNewCycles()
  }

  /// Puts `entry`'s node back in the state it records.
  private func restore(_ entry: _JournalEntry) {
    let node = entry.node
    let links = entry.links ?? []
    if lifetime.relink(node, to: links) {
      for link in links where link.child === node || link.child.hasChildren {
        pass.noteCycleRoot(link.child)
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
      node.disown(into: &outbox.graveyard)
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
    if wasAnchored != node.s.flags.contains(.anchored) {
      lifetime.setAnchor(node, wasAnchored)
    }
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
    lifetime.relink(list, to: links)
    list.witness.materialize(list)
    let gone = list.children.indices.filter { !list.children[$0].child.isPresent }
    if !gone.isEmpty { lifetime.relink(list, to: list.witness.dropChildren(list, gone)) }
    journal.recordCreated(list)
  }
}
