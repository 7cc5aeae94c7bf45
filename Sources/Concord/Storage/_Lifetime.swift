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

extension _MapCore {
  /// Queues `node` for the end-of-write check if it lost its last external hold.
  @usableFromInline
  func noteHoldDropped(_ node: _AnyNode) {
    guard node.externalHolds == 0, !node.flags.contains(.candidate) else { return }
    node.flags.insert(.candidate)
    batch.candidates.append(node)
  }

  /// Runs deferred deinit work and purges what nobody holds, until nothing is left to do.
  func settleLifetimes() {
    while true {
      while let work = deferred.popLast() {
        switch work {
        case .releaseHold(let node): dropExternalHold(on: node)
        case .cancel(let node, let subscriber): detach(subscriber, from: node)
        }
      }
      var maybeCyclic: [_AnyNode] = []
      var index = 0
      // NB: purging appends new candidates to the array being walked.
      while index < batch.candidates.count {
        let node = batch.candidates[index]
        index += 1
        node.flags.remove(.candidate)
        guard node.externalHolds == 0 else { continue }
        if node.internalHolds == 0 {
          purge(node)
        } else if node.hasChildren {
          maybeCyclic.append(node)
        }
      }
      batch.candidates.removeAll(keepingCapacity: true)
      if !maybeCyclic.isEmpty {
        collectCycles(from: maybeCyclic)
      } else if deferred.isEmpty {
        return
      }
    }
  }

  /// Takes `node`, which nobody holds, out of the map and drops its links.
  func purge(_ node: _AnyNode) {
    disown(node)
    if node.flags.contains(.registered) {
      node.unregister(from: self)
      logEntity(node, IdentityMapEvent.released)
    }
    unlinkChildren(of: node)
  }

  /// Frees the garbage cycles reachable from `roots`, nodes that only parents still hold.
  ///
  /// Trial deletion: subtract, for every link inside the subgraph reachable from the roots, one
  /// hold from its child. A node left with holds is held from outside the subgraph, and so is
  /// everything it reaches; the rest is only held by itself and goes.
  ///
  /// - Complexity: O(nodes and links reachable from `roots`).
  func collectCycles(from roots: [_AnyNode]) {
    var trialHolds: [ObjectIdentifier: Int32] = [:]
    var subgraph: [_AnyNode] = []
    var stack: [_AnyNode] = []
    func reach(_ node: _AnyNode) {
      let key = ObjectIdentifier(node)
      guard trialHolds[key] == nil else { return }
      trialHolds[key] = node.externalHolds + node.internalHolds
      subgraph.append(node)
      stack.append(node)
    }
    for root in roots where root.externalHolds == 0 && root.internalHolds > 0 {
      reach(root)
      while let node = stack.popLast() {
        for link in node.extras?.children ?? [] {
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
        for link in reached.extras?.children ?? []
        where live.insert(ObjectIdentifier(link.child)).inserted {
          stack.append(link.child)
        }
      }
    }
    for node in subgraph where !live.contains(ObjectIdentifier(node)) {
      purge(node)
    }
  }

  /// Holds `node` with a manual retain: handles hold nodes unowned, so a node that no table
  /// holds (a batch list, a removed entity still observed) is kept alive by the map while
  /// anything outside holds it. NB: this spares an atomic retain and release of the node on
  /// every `find`.
  @usableFromInline
  func adopt(_ node: _AnyNode) {
    guard !node.flags.contains(.adopted) else { return }
    node.flags.insert(.adopted)
    _ = Unmanaged.passUnretained(node).retain()
  }

  /// Gives back the manual retain of `adopt(_:)`, if any. The node itself is released only after
  /// the lock, with the batch.
  func disown(_ node: _AnyNode) {
    guard node.flags.contains(.adopted) else { return }
    node.flags.remove(.adopted)
    batch.graveyard.append(node)
    Unmanaged.passUnretained(node).release()
  }

  /// Takes `node` out of its table, keeping it alive if something outside still holds it.
  func unregisterKeepingHolders(_ node: _AnyNode) {
    node.unregister(from: self)
    if node.externalHolds > 0 { adopt(node) }
  }

  /// Sets or clears the anchor of an alias node after its value changed: a set alias holds
  /// itself.
  func updateAnchor(_ node: _AnyNode) {
    let anchored = node.flags.contains(.anchored)
    guard node.holdsAliasValue != anchored else { return }
    if batch.recordsUndo { batch.undo.append(.anchor(node, wasAnchored: anchored)) }
    setAnchor(node, !anchored)
  }

  /// Anchors or unanchors an alias node.
  func setAnchor(_ node: _AnyNode, _ anchored: Bool) {
    if anchored {
      node.flags.insert(.anchored)
      node.externalHolds += 1
    } else {
      node.flags.remove(.anchored)
      dropExternalHold(on: node)
    }
  }
}
