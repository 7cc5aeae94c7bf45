// Handles: each `store` and `find` takes an external hold for the handle it returns, and the
// handle's deinit gives it back; see `_AnyNode+Holds.swift` for the holds taken and given back
// without the exclusive lock.

extension _MapCore {
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
    lifetime.hold(node, pinning: self)
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
    lifetime.dropExternalHold(on: node, graveyard: &outbox.graveyard)
    endWrite()
  }

  // MARK: Purge
  //
  // The end of a write's lifetimes: the deferred work of deinits, then the purge of what nobody
  // holds (see `_Lifetime.swift`), until nothing is left to do.

  /// Runs deferred deinit work and purges what nobody holds (or buffers it, with retention),
  /// until nothing is left to do.
  func settleLifetimes() {
    while true {
      while let work = lifetime.deferred.popLast() {
        switch work {
        case .releaseHold(let node):
          lifetime.dropExternalHold(on: node, graveyard: &outbox.graveyard)
        case .cancel(let node, let subscriber): detach(subscriber, from: node)
        case .perform(let work): work(self)
        }
      }
      var maybeCyclic: [_AnyNode] = []
      var index = 0
      // NB: purging appends new candidates to the array being walked.
      while index < lifetime.candidates.count {
        let candidate = lifetime.candidates[index]
        _AnyNode.cacheAhead(in: lifetime.candidates, from: index) { $0 }
        index += 1
        // NB: borrowed, not retained; see `_Lifetime.candidates`.
        candidate._withUnsafeGuaranteedRef { node in
          node.s.flags.remove(.candidate)
          guard node.externalHolds == 0,
            node.s.flags.isDisjoint(with: [.purged, .buffered])
          else { return }
          if node.internalHolds == 0 {
            if lifetime.buffers(node) { lifetime.buffer.enter(node) } else { purge(node) }
          } else if node.cycle != 0 {
            // NB: only a node that was ever on a cycle by identity can be on one held by
            // itself alone; see `_Pass+Cycles.swift`.
            maybeCyclic.append(node)
          }
        }
      }
      lifetime.candidates.removeAllKeepingCapacity()
      while lifetime.buffer.overflows, let oldest = lifetime.buffer.evictOldest() {
        // NB: borrowed: the purge hands the table's retain to the write's graveyard.
        oldest._withUnsafeGuaranteedRef { purge($0) }
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
    node.disown(into: &outbox.graveyard)
    node.s.flags.insert(.purged)
    if node.s.flags.contains(.query) { node.witness.detachConsumer(node, self) }
    if node.s.flags.contains(.registered) {
      node.witness.unregister(node, self)
      if !node.s.flags.contains(.alias) { outbox.logReleased(node) }
    }
    lifetime.unlinkChildren(of: node)
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

  /// Takes `node` out of its table, keeping it alive if something outside still holds it.
  func unregisterKeepingHolders(_ node: _AnyNode) {
    node.witness.unregister(node, self)
    if node.externalHolds > 0 { node.adopt() }
  }

  /// Gives back one external hold on `node` (a query's on a member it drops, say); what the
  /// node's release drops waits in the write's graveyard.
  @inlinable
  func dropExternalHold(on node: _AnyNode) {
    lifetime.dropExternalHold(on: node, graveyard: &outbox.graveyard)
  }

  // MARK: Subscriptions
  //
  // Subscriptions: a subscriber attached to a node is an external hold on it, and is told of each
  // change the node's commit publishes (see `_Outbox`).

  /// Attaches to `node` the subscriber `make` builds from the version it starts after, and
  /// returns it with what to tell it now: the node's value, the newest version handed out,
  /// whether the node is removed, and whether the calling thread is inside a write. Inside one,
  /// a subscriber that asked for the current value gets the value committed when the write
  /// ends, so that nothing uncommitted is ever delivered.
  @usableFromInline
  func subscribe<Value>(
    to node: _Node<Value>, includingCurrentValue: Bool,
    _ make: (_ lastVersion: UInt64) -> _Subscriber<Value>
  ) -> (_Subscriber<Value>, Value, UInt64, isRemoved: Bool, insideWrite: Bool) {
    // NB: without the current value, start at the newest version handed out, so that a commit
    // already in flight is not delivered; with it, start below every version, and let the
    // current value itself go through the ordered path.
    let subscriber = make(includingCurrentValue ? 0 : outbox.version)
    attach(subscriber, to: node)
    let insideWrite = frame.depth > 1
    if includingCurrentValue && insideWrite { outbox.deliverAtCommit(subscriber, of: node) }
    return (subscriber, node.value, outbox.version, node.s.flags.contains(.removed), insideWrite)
  }

  /// Adds `subscriber` to `node`: it holds the node from now on.
  @usableFromInline
  func attach(_ subscriber: _AnySubscriber, to node: _AnyNode) {
    lifetime.unbuffer(node)
    node.extras.subscribers.append(subscriber)
    lifetime.takeExternalHold(on: node, pinning: self)
    lifetime.openSubscriptions += 1
  }

  /// Cancels `subscriber` and gives back its hold on `node`.
  ///
  /// NB: not a `write`: a subscription may be cancelled by a deinit that runs in the middle of
  /// a write, where writing is not allowed; the hold is then given back when that write ends.
  func cancel(_ subscriber: _AnySubscriber, on node: _AnyNode) {
    guard case .some(let dropped) = subscriber.cancel(deliveryLock) else { return }
    lock.lock()
    // NB: the dropped callback goes with the outbox, released after the outermost frame
    // unlocks: its captures' deinits are user code.
    if let dropped { outbox.bury(dropped) }
    guard frame.depth == 0 else {
      lifetime.deferred.append(.cancel(node, subscriber))
      lock.unlock()
      return
    }
    frame.depth = 1
    detach(subscriber, from: node)
    endWrite()
  }

  /// Removes `subscriber` from `node`. Its callback is released only after the lock.
  func detach(_ subscriber: _AnySubscriber, from node: _AnyNode) {
    guard let extras = node.s.extras,
      let index = extras.subscribers.firstIndex(where: { $0 === subscriber })
    else { return }
    outbox.bury(extras.subscribers.remove(at: index))
    lifetime.openSubscriptions -= 1
    lifetime.dropExternalHold(on: node, graveyard: &outbox.graveyard)
  }
}
