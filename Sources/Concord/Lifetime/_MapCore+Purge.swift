// The end of a write's lifetimes: the deferred work of deinits, then the purge of what nobody
// holds (see `_Lifetime.swift`), until nothing is left to do.

extension _MapCore {
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
}
