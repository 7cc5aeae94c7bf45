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
// pinned, that is, while anything but an alias's anchor holds it from outside (see `pin()`).
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
//   retain) once out of it. The map holds itself while any node is pinned (`pin()`), so a
//   handle may refer to its map unretained; the map's last release happens at the very end of
//   `_MapCore.endWrite()`.
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
  /// `pin()`.
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

extension _MapCore {
  // MARK: Handles

  /// A new handle on `node`: one more external hold, given back when the handle is released.
  /// The node is returned unretained: that hold keeps it (rule 6).
  ///
  /// NB: every `store` and `find` makes its own handle, rather than sharing one per node. A
  /// shared handle needs a weak reference from the node (so that a `find` racing with the last
  /// release never revives a dying object), and Swift's weak references cost a 48-byte side
  /// table per node and a slower load. Copies of one `EntityObserver` still share its handle.
  ///
  /// This takes the hold, under the exclusive lock; the caller makes the handle object once the
  /// lock is released (`IdentityMap._observer(_:)`), so that its allocation does not lengthen
  /// the critical section other threads wait on.
  @inlinable
  func holdForHandle<Value>(_ node: _Node<Value>) -> Unmanaged<_Node<Value>> {
    unbuffer(node)
    takeExternalHold(on: node)
    lifetime.handles += 1
    return .passUnretained(node)
  }

  /// A new handle's hold on the entity `id` of `T`, taken under the lock shared with other
  /// readers, if that can be done by only reading.
  ///
  /// It cannot when the calling thread is inside one of this map's frames, nor when nothing
  /// outside the graph holds the entity: held only by parents, or by the release buffer, its
  /// first hold changes what the next write settles (see `_AnyNode+Holds.swift`). The caller
  /// then takes the exclusive path, `holdForHandle(_:)` under `read(_:)`, which stays as it was.
  ///
  /// - Complexity: O(1).
  @inlinable
  func holdForHandleShared<T: Identifiable & Sendable>(_: T.Type, id: T.ID) -> _SharedHold<T> {
    let hold = readShared { () -> _SharedHold<T> in
      // NB: no table yet means no entity: making one is for the first write of `T`.
      guard let table = existingTable(for: T.self) else { return .absent }
      return table._withUnsafeGuaranteedRef { table in
        unsafeDowncast(table, to: _Table<T>.self).withNode(id) { node in
          node.addExternalHoldIfHeld() ? .held(.passUnretained(node)) : .exclusive
        } ?? .absent
      }
    }
    guard let hold else { return .exclusive }
    if case .held = hold { handleStripes.add(1) }
    return hold
  }

  /// Called by a handle's deinit: the handle's hold on `node` is gone.
  ///
  /// Without any lock when another hold remains on an entity or a batch list; otherwise under
  /// the exclusive lock, as a write, which may purge the node.
  @usableFromInline
  func releaseHandle(of node: _AnyNode) {
    // NB: uncounted first, while this handle's hold still pins the node and so the map: once
    // the hold is given back, another thread may give back the last one and free the map.
    handleStripes.add(-1)
    if node.releasesWithoutLock && node.dropExternalHoldIfShared() { return }
    releaseHandleExclusively(of: node)
  }

  /// `releaseHandle(of:)`'s path under the exclusive lock.
  ///
  /// NB: the last hold on the map's last pinned node frees the map at the end of `endWrite()`:
  /// that call is the last thing this method and its callers do.
  @usableFromInline
  func releaseHandleExclusively(of node: _AnyNode) {
    lock.lock()
    if frame.depth > 0 {
      // NB: a deinit inside one of our frames (a handle dropped in a transaction body, or held
      // by a value we just replaced) must not touch the graph mid-write. A hold that was not
      // the last one went without the lock (`releaseHandle(of:)`): that changes no decision a
      // write makes (see `_AnyNode+Holds.swift`), nor what `holders(of:id:)` counts.
      lifetime.deferred.append(.releaseHold(node))
      lock.unlock()
      return
    }
    frame.depth = 1
    dropExternalHold(on: node)
    endWrite()
  }

  // MARK: Holds

  /// Takes one external hold on `node`, under the exclusive lock.
  @inlinable
  func takeExternalHold(on node: _AnyNode) {
    let before = node.addExternalHold()
    if before <= 1 && before == node.anchorHolds { pin() }
  }

  /// Removes one external hold from `node`, under the exclusive lock.
  @inlinable
  func dropExternalHold(on node: _AnyNode) {
    let after = node.removeExternalHold()
    if after <= 1 && after == node.anchorHolds { unpin() }
    noteHoldDropped(node)
  }

  /// Counts one more pinned node: one that something besides an alias's anchor holds from
  /// outside the graph. The map keeps itself alive while any node is pinned.
  ///
  /// NB: whether a node is pinned (`externalHolds > anchorHolds`) only changes under the
  /// exclusive lock: without it, a count only moves above 1 (see `_AnyNode+Holds.swift`), and
  /// only on nodes without an anchor (`releasesWithoutLock`). An anchor does not pin: the map
  /// owns its aliases, and a set alias would keep the map alive for good. Every other holder
  /// keeps the map alive anyway: subscriptions, optimistic layers and collectors hold it, and
  /// query memberships last no longer than their query's own holders.
  @inlinable
  func pin() {
    if lifetime.pinnedNodes == 0 { lifetime.selfRetain = self }
    lifetime.pinnedNodes += 1
  }

  /// Counts one pinned node fewer; see `pin()`. The last one lets the map go, after the lock.
  @usableFromInline
  func unpin() {
    lifetime.pinnedNodes -= 1
    // NB: the map may only let go of itself after its lock is released, at the very end of its
    // last frame: the retain goes with the outcome, which `endWrite()` releases last.
    if lifetime.pinnedNodes == 0, let retain = lifetime.selfRetain.take() {
      outbox.graveyard.append(retain)
    }
  }

  // MARK: Settling

  /// Queues `node` for the end-of-write check if it lost its last external hold.
  @inlinable
  func noteHoldDropped(_ node: _AnyNode) {
    guard node.externalHolds == 0, !node.s.flags.contains(.candidate) else { return }
    node.s.flags.insert(.candidate)
    lifetime.candidates.append(.passUnretained(node))
  }

  /// Runs deferred deinit work and purges what nobody holds (or buffers it, with retention),
  /// until nothing is left to do.
  func settleLifetimes() {
    while true {
      while let work = lifetime.deferred.popLast() {
        switch work {
        case .releaseHold(let node): dropExternalHold(on: node)
        case .cancel(let node, let subscriber): detach(subscriber, from: node)
        case .perform(let work): work(self)
        }
      }
      var maybeCyclic: [_AnyNode] = []
      var index = 0
      // NB: purging appends new candidates to the array being walked.
      while index < lifetime.candidates.count {
        let candidate = lifetime.candidates[index]
        index += 1
        // NB: borrowed, not retained; see `_Lifetime.candidates`.
        candidate._withUnsafeGuaranteedRef { node in
          node.s.flags.remove(.candidate)
          guard node.externalHolds == 0,
            node.s.flags.isDisjoint(with: [.purged, .buffered])
          else { return }
          if node.internalHolds == 0 {
            if buffers(node) { lifetime.buffer.enter(node) } else { purge(node) }
          } else if node.cycle != 0 {
            // NB: only a node that was ever on a cycle by identity can be on one held by
            // itself alone; see `_Pass+Cycles.swift`.
            maybeCyclic.append(node)
          }
        }
      }
      lifetime.candidates.removeAll(keepingCapacity: true)
      while lifetime.buffer.overflows, let oldest = lifetime.buffer.evictOldest() {
        purge(oldest)
      }
      if !maybeCyclic.isEmpty {
        collectCycles(from: maybeCyclic)
      } else if lifetime.deferred.isEmpty && lifetime.candidates.isEmpty {
        // NB: an eviction above may have left new candidates: its children.
        return
      }
    }
  }

  /// Takes `node`, which nobody holds, out of the map and drops its links.
  func purge(_ node: _AnyNode) {
    disown(node)
    node.s.flags.insert(.purged)
    if node.s.flags.contains(.query) { node.witness.detachConsumer(node, self) }
    if node.s.flags.contains(.registered) {
      node.witness.unregister(node, self)
      if !node.s.flags.contains(.alias) { outbox.logReleased(node) }
    }
    unlinkChildren(of: node)
  }

  /// Frees the garbage cycles reachable from `roots`, nodes that only parents still hold.
  ///
  /// Trial deletion: subtract, for every link inside the subgraph reachable from the roots, one
  /// hold from its child. A node left with holds is held from outside the subgraph, and so is
  /// everything it reaches; the rest is only held by itself and goes, without passing through
  /// the release buffer (a member of a cycle cannot leave alone).
  ///
  /// - Complexity: O(nodes and links reachable from `roots`).
  func collectCycles(from roots: [_AnyNode]) {
    var trialHolds: [ObjectIdentifier: Int32] = [:]
    var subgraph: [_AnyNode] = []
    var stack: [_AnyNode] = []
    func reach(_ node: _AnyNode) {
      let key = ObjectIdentifier(node)
      guard trialHolds[key] == nil else { return }
      // NB: a count may drop meanwhile on another thread, never to 0: a node held from outside
      // stays live whatever number is read.
      trialHolds[key] = node.externalHolds + node.internalHolds
      subgraph.append(node)
      stack.append(node)
    }
    for root in roots
    where root.externalHolds == 0 && root.internalHolds > 0
      && !root.s.flags.contains(.buffered)
    {
      reach(root)
      while let node = stack.popLast() {
        for link in node.children {
          reach(link.child)
          trialHolds[ObjectIdentifier(link.child)]! -= 1
        }
      }
    }
    var live: Set<ObjectIdentifier> = []
    for node in subgraph where trialHolds[ObjectIdentifier(node)]! > 0 {
      guard live.insert(ObjectIdentifier(node)).inserted else { continue }
      stack.append(node)
      while let reached = stack.popLast() {
        for link in reached.children where live.insert(ObjectIdentifier(link.child)).inserted {
          stack.append(link.child)
        }
      }
    }
    for node in subgraph where !live.contains(ObjectIdentifier(node)) {
      purge(node)
    }
  }

  // MARK: Memory

  /// Holds `node` with a manual retain: handles hold nodes unowned, so a node that no table
  /// holds (a batch list, a removed entity still observed) is kept alive by the map while
  /// anything outside holds it (rule 6). NB: this spares an atomic retain and release of the
  /// node on every `find`.
  @usableFromInline
  func adopt(_ node: _AnyNode) {
    guard !node.s.flags.contains(.adopted) else { return }
    node.s.flags.insert(.adopted)
    _ = Unmanaged.passUnretained(node).retain()
  }

  /// Gives back the manual retain of `adopt(_:)`, if any. The node itself is released only after
  /// the lock, with the outbox (rule 3).
  func disown(_ node: _AnyNode) {
    guard node.s.flags.contains(.adopted) else { return }
    node.s.flags.remove(.adopted)
    outbox.graveyard.append(node)
    Unmanaged.passUnretained(node).release()
  }

  /// Takes `node` out of its table, keeping it alive if something outside still holds it.
  func unregisterKeepingHolders(_ node: _AnyNode) {
    node.witness.unregister(node, self)
    if node.externalHolds > 0 { adopt(node) }
  }
}
