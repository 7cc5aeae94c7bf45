/// What the current outermost write has collected: what to tell once the lock is released, what
/// to check before, and how to undo it while a transaction is open.
@usableFromInline
struct _Batch {
  @usableFromInline init() {}

  /// Nodes with subscribers whose value changed, in the order they first changed.
  @usableFromInline var changed: [_AnyNode] = []
  /// Removed nodes with subscribers: their streams finish.
  @usableFromInline var removed: [_AnyNode] = []
  /// Log events, rendered after the lock is released. Empty without a logger.
  @usableFromInline var events: [() -> IdentityMapEvent] = []
  /// Nodes that lost their last external hold; see `settleLifetimes`.
  @usableFromInline var candidates: [_AnyNode] = []
  /// Objects to release only after the lock is released, such as cancelled callbacks.
  @usableFromInline var graveyard: [AnyObject] = []
  /// How to revert each mutation, recorded while a transaction is open.
  @usableFromInline var undo: [_Undo] = []
  /// The open transactions, innermost last.
  @usableFromInline var transactions: [Int] = []
  /// Set while reverting, so that reverting records nothing.
  @usableFromInline var isRollingBack = false

  /// Whether the write left nothing to settle or tell.
  @inline(__always)
  var isIdle: Bool {
    candidates.isEmpty && changed.isEmpty && removed.isEmpty && events.isEmpty && graveyard.isEmpty
      && undo.isEmpty
  }

  /// Whether mutations must be recorded in `undo`.
  @inlinable
  var recordsUndo: Bool { !transactions.isEmpty && !isRollingBack }

  /// Hands over what must happen after the lock is released, and starts afresh.
  ///
  /// NB: only moves references: nothing is released here, under the lock.
  mutating func takeOutcome() -> _Outcome {
    var outcome = _Outcome(events: events, graveyard: graveyard, undo: undo)
    for node in changed {
      node.flags.remove(.queued)
      if let delivery = node.makeDelivery() { outcome.append(delivery) }
    }
    for node in removed {
      if let subscribers = node.extras?.subscribers, !subscribers.isEmpty {
        outcome.append(_FinishDelivery(subscribers: subscribers))
      }
    }
    // NB: `changed` and `removed` keep their buffers for the next write. Dropping their
    // references here frees no node: a node purged by this write went to the graveyard.
    changed.removeAll(keepingCapacity: true)
    removed.removeAll(keepingCapacity: true)
    events = []
    graveyard = []
    undo = []
    return outcome
  }
}

/// A point to roll back to: how long each log of the batch was when a transaction began.
struct _Savepoint {
  let transaction: Int
  let undo: Int
  let changed: Int
  let removed: Int
  let events: Int
}

/// How to revert one mutation.
@usableFromInline
enum _Undo {
  /// Restores a node's value and stamp.
  case value(() -> Void)
  /// Restores a node's links to its children.
  case links(_AnyNode, [_ChildLink])
  /// Takes out an entity node the transaction created.
  case inserted(_AnyNode)
  /// Puts back a node the transaction removed.
  case removed(_AnyNode, wasRegistered: Bool)
  /// Restores an alias anchor.
  case anchor(_AnyNode, wasAnchored: Bool)
}

extension _MapCore {
  /// Opens a transaction inside the current write.
  func beginTransaction() -> _Savepoint {
    transactionSerial += 1
    batch.transactions.append(transactionSerial)
    return _Savepoint(
      transaction: transactionSerial, undo: batch.undo.count, changed: batch.changed.count,
      removed: batch.removed.count, events: batch.events.count)
  }

  /// Closes the innermost transaction, keeping its writes. An enclosing transaction can still
  /// revert them.
  func commitTransaction(_: _Savepoint) {
    batch.transactions.removeLast()
  }

  /// Closes the innermost transaction and reverts every mutation it made, in reverse order.
  func rollBack(to savepoint: _Savepoint) {
    batch.isRollingBack = true
    while batch.undo.count > savepoint.undo {
      switch batch.undo.removeLast() {
      case .value(let restore):
        restore()
      case .links(let node, let links):
        relink(node, to: links)
      case .inserted(let node):
        unregisterKeepingHolders(node)
        node.flags.insert(.removed)
      case .removed(let node, let wasRegistered):
        node.flags.remove(.removed)
        if wasRegistered {
          node.reregister(in: self)
          disown(node)
        }
      case .anchor(let node, let wasAnchored):
        setAnchor(node, wasAnchored)
      }
    }
    batch.isRollingBack = false
    for node in batch.changed[savepoint.changed...] { node.flags.remove(.queued) }
    batch.changed.removeSubrange(savepoint.changed...)
    batch.removed.removeSubrange(savepoint.removed...)
    batch.events.removeSubrange(savepoint.events...)
    batch.transactions.removeLast()
  }

  /// Whether the transaction numbered `serial` is still open.
  func isOpen(transaction serial: Int) -> Bool {
    batch.transactions.contains(serial)
  }
}
