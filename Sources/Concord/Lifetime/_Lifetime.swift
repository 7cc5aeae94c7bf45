// Lifetime: a node lives while something holds it. External holds come from handles,
// subscriptions and an alias anchor; internal holds from live parents' links. A node that loses
// a hold becomes a candidate; when the outermost write ends, candidates with no hold at all are
// purged, which drops their links and may cascade. A candidate still held only by parents may
// sit on a cycle by identity (a member among its friends' friends), which counting alone never
// frees: those go through trial deletion (`collectCycles`).
//
// Memory follows the holds: a table keeps its nodes with a manual retain, and a node no table
// keeps (a batch list, a removed entity still observed) is adopted with one while anything
// outside holds it. Handles hold their node unowned, so purging is what frees it.
//
// Handles hold the map unowned too, which spares two atomic reference-count operations on the
// shared map object per `find` and per release: the map holds itself while any node is
// pinned, that is, while anything but an alias's anchor holds it from outside (see `_Lifetime.pin(_:)`).
// A handle holds its node, so it pins it, and the map outlives every handle.
//
// Unretained references. The engine refers to most objects without retaining them (each
// retain and release is an atomic operation, and a page write makes thousands). Every such
// reference (`unowned(unsafe)`, `Unmanaged`) relies on one of these rules, which its comment
// names; `ReferenceLifetimeTests` breaks each rule's guarantee in a way that would touch freed
// memory, under AddressSanitizer in CI.
//
// - Rule 1, tables. A map's tables, and what each owns (its schema, stash, consumers and
//   persisted type), live as long as the map: `_Registry.tables` only ever grows. The map
//   outlives every node its graph reaches and every write running on it (rule 6).
// - Rule 2, slots. A table keeps each node registered in it with a manual retain, given back
//   when the node leaves the table (into the graveyard, rule 3) or when the table goes.
// - Rule 3, graveyard. Nothing a write drops is freed before the write ends: a node leaving
//   its table or its alias slot, an adopted node disowned, a subscriber detached go to
//   `_Outbox.graveyard`, released after the lock. So what a write lists about a node (journal
//   records, claims, pass marks, seeds, candidates, stashes) stays valid until its end, and the
//   write empties those lists before then.
// - Rule 4, links. A link names a child that is in the map: a removal unlinks the removed
//   node from its parents and from its children; a purge only takes a node no parent links
//   (a dead cycle's members unlink one another as they go); a rollback relinks a node only to
//   what was linked before the transaction, and a batch list it gives back its entities drops
//   those the rollback took out before the write ends (`restoreCreated`).
//   `_checkInvariants` verifies that no link names a removed or purged node.
// - Rule 5, back-references. A node unlinks its children before it leaves the map, so a
//   child's back-reference never names a parent that is gone.
// - Rule 6, pins. A handle, a subscription, a query membership and a shadow each hold their
//   node with an external hold: a node so held stays in its table, or is adopted (a manual
//   retain) once out of it. The map holds itself while any node is pinned (`_Lifetime.pin(_:)`), so a
//   handle may reach its map unretained (through its node's witness, `_AnyNode.core`); the map's
//   last release happens at the very end of `_MapCore.endWrite()`.
// - Rule 7, borrows. `Unmanaged.passUnretained(x)._withUnsafeGuaranteedRef` lends `x` to a
//   closure without a retain: `x` is kept for the call by one of the rules above, or by the
//   caller's own strong reference, and the closure never lets it escape.
// - Rule 8, consumers. A query holds each member with an external hold (rule 6); an index
//   files a node only while it is in its table, and forgets it when it is removed (the change
//   log) or purged (`forget`); an index lives in its type's consumers, which each query on it
//   keeps (`_QueryNode.consumers`) until it has left the index.
// - Rule 9, persistence. A persisted type is owned by its map's table and by its persistence
//   (`_Persistence.types`), so it never outlives the persistence it refers to.

/// What the current write has to settle about lifetimes, and the map's handle count.
@usableFromInline
struct _Lifetime {
  /// Nodes that lost their last external hold; see `settleLifetimes`.
  /// NB: unretained, as the journal's records are (rule 3): a node the write drops goes to the
  /// outbox's graveyard, released only after the lock, and candidates are settled before it
  /// is. A retain and a release per candidate were a share of every node a write creates.
  @usableFromInline var candidates: [Unmanaged<_AnyNode>] = []
  /// Work from deinits that ran while this thread was inside a write, done before it ends.
  @usableFromInline var deferred: [_Deferred] = []
  /// How many nodes are pinned, and the reference that keeps the map alive meanwhile; see
  /// `pin(_:)`.
  @usableFromInline var pinnedNodes = 0
  @usableFromInline var selfRetain: _MapCore?
  /// How many handles were made under the exclusive lock. NB: the live handles are this plus
  /// `_MapCore.handleStripes`, where handles made under the shared lock count and every
  /// handle's release uncounts: a count both readers changed on every `find` would move its
  /// cache line between their cores each time.
  @usableFromInline var handles = 0
  /// How many subscriptions are attached to nodes; for `IdentityMap.statistics`.
  var openSubscriptions = 0
  /// Entities kept after their last holder went; see `RetentionPolicy`.
  @usableFromInline var buffer: _ReleaseBuffer

  @usableFromInline
  init(retention: RetentionPolicy) {
    buffer = _ReleaseBuffer(capacity: retention.capacity)
  }

  /// Whether the write left lifetimes to settle.
  @inlinable
  var hasWork: Bool { mutating get { !candidates.isEmpty || !deferred.isEmpty } }
}

/// What `_MapCore.holdForHandleShared(_:id:)` found.
@usableFromInline
enum _SharedHold<Value: Sendable> {
  /// A new handle's hold on the entity, taken: the hold keeps the node (rule 6).
  case held(Unmanaged<_Node<Value>>)
  /// The map has no such entity in memory.
  case absent
  /// It takes the exclusive lock to say.
  case exclusive
}

/// A deinit's work, deferred because it ran while this thread was inside a write.
@usableFromInline
enum _Deferred {
  /// A handle's hold on the node is gone.
  case releaseHold(_AnyNode)
  /// A subscription was cancelled.
  case cancel(_AnyNode, _AnySubscriber)
  /// Other bookkeeping, such as detaching a cancelled collector.
  case perform((_MapCore) -> Void)
}

extension _Lifetime {
  // MARK: Holds

  /// Takes one external hold on `node`, under the exclusive lock; the first one pins the map
  /// `core` (see `pin(_:)`).
  @inlinable
  mutating func takeExternalHold(on node: _AnyNode, pinning core: _MapCore) {
    let before = node.addExternalHold()
    if before <= 1 && before == node.anchorHolds { pin(core) }
  }

  /// Removes one external hold from `node`, under the exclusive lock; the last one of the map's
  /// last pinned node lets the map go, after the lock (see `unpin(into:)`).
  @inlinable
  mutating func dropExternalHold(on node: _AnyNode, graveyard: inout _Graveyard) {
    let after = node.removeExternalHold()
    if after <= 1 && after == node.anchorHolds { unpin(into: &graveyard) }
    noteHoldDropped(node)
  }

  /// Counts one more pinned node: one that something besides an alias's anchor holds from
  /// outside the graph. The map `core` keeps itself alive while any node is pinned.
  ///
  /// NB: whether a node is pinned (`externalHolds > anchorHolds`) only changes under the
  /// exclusive lock: without it, a count only moves above 1 (see `_AnyNode+Holds.swift`), and
  /// only on nodes without an anchor (`releasesWithoutLock`). An anchor does not pin: the map
  /// owns its aliases, and a set alias would keep the map alive for good. Every other holder
  /// keeps the map alive anyway: subscriptions, optimistic layers and collectors hold it, and
  /// query memberships last no longer than their query's own holders.
  @inlinable
  mutating func pin(_ core: _MapCore) {
    if pinnedNodes == 0 { selfRetain = core }
    pinnedNodes += 1
  }

  /// Counts one pinned node fewer; see `pin(_:)`. The last one lets the map go: its retain of
  /// itself goes to `graveyard`, released after the lock.
  ///
  /// NB: the map may only let go of itself after its lock is released, at the very end of its
  /// last frame: the retain goes with the outcome, which `_MapCore.endWrite()` releases last.
  @usableFromInline
  mutating func unpin(into graveyard: inout _Graveyard) {
    pinnedNodes -= 1
    if pinnedNodes == 0, let retain = selfRetain.take() { graveyard.append(retain) }
  }

  /// One more hold on `node` from outside the graph: a handle's, or a live query's that has it
  /// as a member. It leaves the release buffer, and its first hold pins the map `core`.
  @inlinable
  mutating func hold(_ node: _AnyNode, pinning core: _MapCore) {
    unbuffer(node)
    takeExternalHold(on: node, pinning: core)
  }

  /// Queues `node` for the end-of-write check if it lost its last external hold.
  @inlinable
  mutating func noteHoldDropped(_ node: _AnyNode) {
    guard node.externalHolds == 0, !node.s.flags.contains(.candidate) else { return }
    node.s.flags.insert(.candidate)
    candidates.append(.passUnretained(node))
  }

  // MARK: Anchors

  /// Brings an alias node's anchor and stamp in line with its value after a write: a set alias
  /// holds itself, and an empty one has no stamp (whether or not anything observes it).
  @usableFromInline
  mutating func settleAnchor(of node: _AnyNode) {
    if !node.witness.holdsAliasValue(node) { node.s.stamp = .nan }
    let anchored = node.s.flags.contains(.anchored)
    guard node.witness.holdsAliasValue(node) != anchored else { return }
    setAnchor(node, !anchored)
  }

  /// Anchors or unanchors an alias node.
  ///
  /// NB: the flag and the hold change together, so that the node stays pinned or unpinned
  /// (see `_Lifetime.pin(_:)`): an anchor does not keep the map alive.
  @usableFromInline
  mutating func setAnchor(_ node: _AnyNode, _ anchored: Bool) {
    if anchored {
      node.s.flags.insert(.anchored)
      node.addExternalHold()
    } else {
      node.s.flags.remove(.anchored)
      node.removeExternalHold()
      noteHoldDropped(node)
    }
  }

  // MARK: The release buffer

  /// Takes `node` out of the release buffer, if it is there: a new holder came (a handle, a
  /// subscription, a parent), or it is being removed.
  @inlinable
  mutating func unbuffer(_ node: _AnyNode) {
    if node.s.flags.contains(.buffered) { buffer.takeOut(node) }
  }

  /// Whether `node`, which nothing holds any more, goes into the release buffer rather than
  /// leaving the map: a registered entity, with retention on.
  func buffers(_ node: _AnyNode) -> Bool {
    buffer.capacity > 0 && node.s.flags.contains(.registered)
      && !node.s.flags.contains(.alias)
  }
}
