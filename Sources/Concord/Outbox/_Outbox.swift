// The outbox: the change log, and what the write leaves to do once the lock is released.
//
// Every committed change of a node passes through one place, `publish(_:_:)`,
// whether or not anyone observes it: the commit walks the journal (see `_Journal.swift`) and
// publishes, for each node the write touched, what happened to it; the outermost write of a
// lone entity publishes its change directly, which is what the commit would find. Releases
// (`logReleased`) come after, when lifetimes settle. Consumers read the change log here and only
// here: observation queues deliveries, the logger queues events, and live queries, indexes and
// collectors read the same journal records just before (`_MapCore.feedConsumers()`), through
// the same `_Journal.change(at:)`.

/// What happened to a node in one committed write.
@usableFromInline
enum _ChangeKind: UInt8 {
  /// Stored where nothing was: a new entity, an alias set from empty, a new batch list.
  case inserted
  /// A stored value changed.
  case updated
  /// Written, but `==` to what was stored: nobody is told.
  case unchanged
  /// Taken out of the map (an entity) or emptied (an alias).
  case removed
}

/// What a write drops and keeps until the lock is released (rule 3 of `_Lifetime.swift`).
///
/// NB: the first two objects inline: a write that drops anything mostly drops one node, or one
/// node and the map's retain of itself, and an array would be allocated for them at every such
/// write (it leaves with the outcome, so its storage cannot be reused).
@usableFromInline
struct _Graveyard {
  @usableFromInline var first: AnyObject?
  @usableFromInline var second: AnyObject?
  @usableFromInline var more: [AnyObject] = []

  @inlinable init() {}

  /// Whether nothing is kept.
  @inlinable var isEmpty: Bool { first == nil }

  /// Keeps `object` until the graveyard is released.
  ///
  /// NB: `consuming`, so that the caller's reference moves in, without a retain here and a
  /// release in the caller.
  @inlinable
  mutating func append(_ object: consuming AnyObject) {
    if first == nil {
      first = object
    } else if second == nil {
      second = object
    } else {
      more.append(object)
    }
  }
}

/// What the current write will log and deliver once the lock is released.
@usableFromInline
struct _Outbox {
  /// The version of the newest delivery made; each delivery takes the next one, so that a
  /// subscriber can tell an older value from a newer one. NB: it starts above 0, the version a
  /// subscriber that asked for the current value starts from.
  @usableFromInline var version: UInt64 = 1
  /// Whether the map has a logger (`_MapCore.logger`). NB: a Bool, because testing the optional
  /// existential copies it.
  @usableFromInline let isLogging: Bool
  /// Log events, rendered after the lock is released. Empty without a logger.
  @usableFromInline var events: [() -> IdentityMapEvent] = []
  /// Objects to release only after the lock is released: dropped nodes, cancelled callbacks.
  @usableFromInline var graveyard = _Graveyard()
  /// Deliveries, the first one inline: most writes change one observed node.
  @usableFromInline var deliveries = _Deliveries()
  /// While an optimistic layer is pending: whether the write lists the nodes it stores into
  /// (`written`), to keep them underneath or in the layer; see `_Layers`.
  @usableFromInline var recordsWrites = false
  @usableFromInline var written: [_AnyNode] = []
  /// Subscriptions opened inside a write that asked for the current value: they get the value
  /// at commit, so that nothing uncommitted is ever delivered.
  @usableFromInline var initials: [(node: _AnyNode, subscriber: _AnySubscriber)] = []

  @usableFromInline
  init(isLogging: Bool) {
    self.isLogging = isLogging
  }

  /// Keeps `object` until the lock is released (rule 3 of `_Lifetime.swift`): a node the write
  /// dropped, say.
  @inlinable
  mutating func bury(_ object: consuming AnyObject) {
    graveyard.append(object)
  }

  /// Delivers `node`'s value to `subscriber`, opened inside the write, once the write commits.
  mutating func deliverAtCommit(_ subscriber: _AnySubscriber, of node: _AnyNode) {
    initials.append((node, subscriber))
  }

  /// How many events the write logged so far: a transaction's savepoint.
  var eventCount: Int { mutating get { events.count } }

  /// How many nodes the write listed as stored into so far: a transaction's savepoint.
  var writtenCount: Int { mutating get { written.count } }

  /// Forgets the events logged and the nodes listed since a transaction's savepoint: it rolled
  /// back.
  mutating func rollBack(toEvents events: Int, written: Int) {
    forgetEvents(after: events)
    if self.written.count > written { self.written.removeSubrange(written...) }
  }

  /// Forgets the events logged after the first `count`.
  ///
  /// NB: only when there are some: on the empty array a map without a logger keeps, the
  /// removal allocated a buffer, and `show(_:stamp:in:)` ran it twice per write under a layer.
  @inlinable
  mutating func forgetEvents(after count: Int) {
    if events.count > count { events.removeSubrange(count...) }
  }

  /// Whether the write left nothing to log or deliver.
  @inlinable
  var isIdle: Bool {
    mutating get {
      events.isEmpty && graveyard.isEmpty && deliveries.isEmpty && initials.isEmpty
    }
  }

  /// Hands over what must happen after the lock is released, and starts afresh.
  ///
  /// NB: only moves references: nothing is released here, under the lock. Swapped out rather
  /// than copied and then emptied, which retained and released each part at every write.
  @usableFromInline
  mutating func takeOutcome() -> _Outcome {
    var events: [() -> IdentityMapEvent] = []
    var graveyard = _Graveyard()
    var deliveries = _Deliveries()
    swap(&events, &self.events)
    swap(&graveyard, &self.graveyard)
    swap(&deliveries, &self.deliveries)
    return _Outcome(events: events, graveyard: graveyard, deliveries: deliveries)
  }

  /// A version for a new delivery.
  @inlinable
  mutating func nextVersion() -> UInt64 {
    version &+= 1
    return version
  }

  /// Records a log event, rendered after the lock is released.
  @inlinable
  mutating func log(_ event: @escaping () -> IdentityMapEvent) {
    if isLogging { events.append(event) }
  }

  /// Records that a write to `node` stamped `incoming` was refused.
  @usableFromInline
  mutating func logStale(_ node: _AnyNode, incoming: Stamp?) {
    guard isLogging else { return }
    let stored = node.s.stamp
    let incoming = incoming ?? .nan
    if let reference = node.witness.reference(node) {
      events.append {
        .discardedStale(.entity(reference), storedStamp: stored, incomingStamp: incoming)
      }
    } else if let name = node.witness.aliasName(node) {
      events.append { .discardedStale(.alias(name), storedStamp: stored, incomingStamp: incoming) }
    }
  }

  /// Records that a write aimed at `node` itself (not merely reaching it through a nested
  /// entity) was applied, with `stamp`.
  @inlinable
  mutating func logStored(_ node: _AnyNode, stamp: Stamp?) {
    if isLogging { _logStored(node, stamp: stamp) }
    if recordsWrites { written.append(node) }
  }

  @usableFromInline
  mutating func _logStored(_ node: _AnyNode, stamp: Stamp?) {
    if let reference = node.witness.reference(node) {
      events.append { .stored(reference, modifiedAt: stamp) }
    } else if let name = node.witness.aliasName(node) {
      events.append { .aliasSet(name) }
    }
  }

  /// Records that `node`, an entity nobody held, left the map.
  @usableFromInline
  mutating func logReleased(_ node: _AnyNode) {
    guard isLogging, let reference = node.witness.reference(node) else { return }
    events.append { .released(reference) }
  }
}

extension _Outbox {
  /// The change log: publishes what the write did to `node` to every consumer.
  @inlinable
  mutating func publish(_ node: _AnyNode, _ kind: _ChangeKind) {
    if node.hasSubscribers {
      if kind == .removed && !node.s.flags.contains(.alias) {
        deliveries.append(node.witness.removalDelivery(node, node.extras.subscribers))
      } else if kind != .unchanged, let delivery = node.witness.delivery(node, nextVersion()) {
        deliveries.append(delivery)
      }
    }
    if kind == .removed && isLogging { logRemoved(node) }
  }

  /// The log's view of a removal.
  @usableFromInline
  mutating func logRemoved(_ node: _AnyNode) {
    if let reference = node.witness.reference(node) {
      log { .removed(reference) }
    } else if let name = node.witness.aliasName(node) {
      log { .aliasRemoved(name) }
    }
  }

  /// Publishes what the write did to each node it touched, by comparing the node's first
  /// record in `journal` with the node now (`_Journal.change(at:)`); with a logger of changed
  /// values (`audience`), logs the values too. Then gives every subscription opened during the
  /// write that asked for the current value the value committed.
  @usableFromInline
  mutating func publish(_ journal: inout _Journal, _ audience: _Audience) {
    // Nodes whose subscribers get a value from the change log, so that a subscription opened
    // during the write is not given the same value twice.
    var told: Set<ObjectIdentifier> = []
    // NB: by index: copying each record out would retain and release its fields.
    for index in journal.entries.indices where journal.entries[index].previousMark == 0 {
      // NB: borrowed, as in `_Journal.change(at:)`.
      Unmanaged.passUnretained(journal.entries[index].node)._withUnsafeGuaranteedRef { node in
        // NB: a node nobody subscribes to, in a map with no log and no subscription opened in
        // the write: whatever the change, nobody below is told of it (the consumers were fed
        // from the journal already), so it is not even worked out, which compared the value
        // before with the value now.
        guard
          node.hasSubscribers || isLogging || audience.logsChangedValues || !initials.isEmpty
        else { return }
        guard let kind = journal.change(at: index) else {
          // Created and taken out again within the write: nothing committed, but streams
          // opened on it meanwhile end.
          if node.hasSubscribers && node.s.flags.contains(.removed) {
            deliveries.append(node.witness.removalDelivery(node, node.extras.subscribers))
          }
          return
        }
        publish(node, kind)
        if audience.logsChangedValues && kind != .unchanged {
          node.witness.logChange(node, kind, journal.entries[index].saved, &self)
        }
        if !initials.isEmpty && kind != .unchanged { told.insert(ObjectIdentifier(node)) }
      }
    }
    for (node, subscriber) in initials where !told.contains(ObjectIdentifier(node)) {
      if node.s.flags.contains(.removed) && !node.s.flags.contains(.alias) {
        deliveries.append(node.witness.removalDelivery(node, [subscriber]))
      } else {
        deliveries.append(node.witness.deliveryTo(node, subscriber, nextVersion()))
      }
    }
    initials.removeAll()
  }
}
