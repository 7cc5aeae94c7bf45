// Rollback: a transaction that throws puts back, newest first, every node it recorded.

extension _Journal {
  /// Closes the innermost transaction and restores every node it touched, newest first.
  ///
  /// Entities it created leave the map, and their handles report `isRemoved`. A batch handle it
  /// created shows those of the entities it was stored with that exist after the rollback,
  /// as a batch handle made before the transaction shows its own.
  @usableFromInline
  mutating func rollBack(to savepoint: _Savepoint, in core: _MapCore) {
    var createdLists: [(list: _AnyNode, links: [_ChildLink])] = []
    while entries.count > savepoint.entries {
      let entry = entries.removeLast()
      let node = entry.node
      node.s.journalMark = entry.previousMark
      if entry.saved == _JournalEntry.created && node.s.flags.contains(.list) {
        createdLists.append((node, entry.links ?? []))
        continue
      }
      restore(entry, in: core)
    }
    transactions.removeLast()
    core.outbox.events.removeSubrange(savepoint.events...)
    core.rollBackTombstones(to: savepoint.tombstones)
    if core.outbox.written.count > savepoint.written {
      core.outbox.written.removeSubrange(savepoint.written...)
    }
    if let persistence = core.persistence, persistence.current.count > savepoint.persisted {
      persistence.current.removeSubrange(savepoint.persisted...)
    }
    for (list, links) in createdLists { restoreCreated(list, links: links, in: core) }
    // NB: cycle numbers are not journaled: the links put back may close cycles again whose
    // members the transaction had numbered apart; number them afresh.
    core.pass.numberNewCycles()
  }

  /// Puts `entry`'s node back in the state it records.
  private mutating func restore(_ entry: _JournalEntry, in core: _MapCore) {
    let node = entry.node
    let links = entry.links ?? []
    if core.lifetime.relink(node, to: links) {
      for link in links where link.child === node || link.child.hasChildren {
        core.pass.buffers.cycleRoots.append(link.child)
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
      node.witness.reregister(node, core)
      node.disown(into: &core.outbox.graveyard)
    } else if !wasRegistered && isRegistered && !node.s.flags.contains(.alias) {
      core.unregisterKeepingHolders(node)
    }
    let created = entry.saved == _JournalEntry.created
    if entry.flags.contains(.removed) || (created && !node.s.flags.contains(.alias)) {
      node.s.flags.insert(.removed)
    } else {
      node.s.flags.remove(.removed)
    }
    let wasAnchored = entry.flags.contains(.anchored)
    if wasAnchored != node.s.flags.contains(.anchored) {
      core.lifetime.setAnchor(node, wasAnchored)
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
  private mutating func restoreCreated(
    _ list: _AnyNode, links: [_ChildLink], in core: _MapCore
  ) {
    core.lifetime.relink(list, to: links)
    list.witness.materialize(list)
    let gone = list.children.indices.filter { !list.children[$0].child.isPresent }
    if !gone.isEmpty { core.lifetime.relink(list, to: list.witness.dropChildren(list, gone)) }
    recordCreated(list)
  }
}
