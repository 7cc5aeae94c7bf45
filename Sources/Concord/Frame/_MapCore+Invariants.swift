// The engine's invariants, as code.
//
// Built with `-Xswiftc -DCONCORD_INTERNAL_CHECKS`, the map checks them after every outermost
// write (see `_MapCore.commit()`): all of them while the map holds at most 512 entities, and
// around the nodes the write touched beyond that, so that big tests stay linear. Tests call
// `_checkInvariants()` directly after each step of a random run. A broken invariant stops the
// program and says which one, and on which node.

extension _MapCore {
  /// Checks every invariant over the whole map.
  ///
  /// - Complexity: O(nodes + links).
  func _checkInvariants() {
    _checkInvariants(around: nil)
  }

  /// Checks the invariants of the nodes `touched` and their neighbours, or of every node when
  /// `touched` is `nil`, plus the map-wide ones.
  func _checkInvariants(around touched: [_AnyNode]?) {
    check(journal.entries.isEmpty && journal.stashes.isEmpty, "the journal outlived its write")
    check(journal.transactions.isEmpty, "a transaction outlived its write")
    check(pass.claims.isEmpty && pass.marked.isEmpty, "a pass outlived its write")
    check(lifetime.candidates.isEmpty && lifetime.deferred.isEmpty, "lifetimes left unsettled")
    check(outbox.initials.isEmpty, "a subscription's current value was never delivered")
    check(!lifetime.buffer.overflows, "the release buffer holds more than its capacity")
    // NB: the whole queue, so only while the whole map is checked.
    if touched == nil, let problem = lifetime.buffer.problem() {
      check(false, "release buffer: \(problem)")
    }
    let registered = registry.tables.reduce(0) { $0 + $1.count }
    check(
      registered == registry.liveCount, "count is \(registry.liveCount), tables hold \(registered)")
    check(
      registry.pendingStarts.isEmpty && !audience.startsPending, "a query was never started")
    let layered = Set(layers.order.flatMap { $0.entries.map(\.serial) })
    check(
      layers.pendingCount >= layered.count && lifetime.openSubscriptions >= 0,
      "\(layers.pendingCount) pending layers counted, \(layered.count) over entities, or "
        + "\(lifetime.openSubscriptions) subscriptions")
    check(
      !audience.underLayers && !outbox.recordsWrites && outbox.written.isEmpty,
      "a write left the optimistic layers lowered")
    // NB: `_Layers.shadow(of:)` relies on the index listing the order's shadows, past a few.
    check(
      layers.index.count == (layers.order.count > _Layers.indexedAbove ? layers.order.count : 0),
      "the shadows' index lists \(layers.index.count) of \(layers.order.count)")
    check(
      Set(layers.order.map { ObjectIdentifier($0.node) }).count == layers.order.count,
      "an entity has two shadows")
    for shadow in layers.order {
      check(
        layers.index.isEmpty || layers.index[ObjectIdentifier(shadow.node)] === shadow,
        "the order lists a shadow that the shadows' index does not")
      if let problem = shadow.problem() { check(false, problem) }
    }
    let consumers =
      registry.tables.reduce(0) { $0 + $1.consumerCount } + (audience.logsChangedValues ? 1 : 0)
    check(
      consumers == audience.consumers,
      "\(audience.consumers) consumers counted, \(consumers) attached")
    let persisted = registry.tables.filter(\.isPersisted).count
    check(
      persisted == audience.persistedTypes && persisted == (persistence?.kinds.count ?? 0)
        && persistence?.current.isEmpty ?? true,
      "\(audience.persistedTypes) persisted types counted, \(persisted) tables persisted, or "
        + "changes for the store left after the commit")
    if let problem = persistence?.checkLayers() { check(false, problem) }
    check(persistence?.foresees != true, "a write's foresight outlived its body")
    check(persistence?.foreseenLoads == nil, "a write's foreseen loads outlived its body")
    let tombs = registry.tables.reduce(0) { $0 + $1.queries.tombstoneCount($1) }
    check(
      tombs == tombstones.count && tombs <= tombstones.limit && tombstones.undo.isEmpty,
      "\(tombstones.count) tombstones counted, \(tombs) held, limit \(tombstones.limit), or "
        + "\(tombstones.undo.count) undo records left after the write")
    for table in registry.tables {
      if let problem = table.queries.tombstoneProblem(table) { check(false, problem) }
    }

    var nodes: [_AnyNode] = []
    if let touched {
      nodes = touched.filter { !$0.s.flags.contains(.purged) }
      for node in nodes {
        nodes += node.children.map(\.child)
        nodes += node.parentReferences.map(\.parent)
      }
    } else {
      registry.forEachEntityNode { nodes.append($0) }
      nodes += registry.aliases.values
      // NB: queries and indexes are as large as the map: checked with it, never around a write.
      for table in registry.tables {
        nodes += table.queries.queryNodes(table)
        if let problem = table.queries.indexProblem(table) { check(false, problem) }
      }
    }
    check(
      (lifetime.selfRetain != nil) == (lifetime.pinnedNodes > 0)
        && lifetime.handles + handleStripes.sum >= 0,
      "\(lifetime.pinnedNodes) pinned nodes with\(lifetime.selfRetain == nil ? "out" : "") the "
        + "map holding itself, or \(lifetime.handles + handleStripes.sum) handles")
    var seen: Set<ObjectIdentifier> = []
    var subscribers = 0
    var pinned = 0
    var index = 0
    while index < nodes.count {
      let node = nodes[index]
      index += 1
      guard seen.insert(ObjectIdentifier(node)).inserted else { continue }
      checkNode(node)
      subscribers += node.s.extras?.subscribers.count ?? 0
      if node.externalHolds > node.anchorHolds { pinned += 1 }
      if touched == nil {
        // NB: batch lists and removed nodes still observed are in no table; reach them as
        // parents.
        nodes += node.parentReferences.map(\.parent)
      }
    }
    // NB: at most: a removed entity still observed, with no parent, is in no table.
    check(
      touched != nil || subscribers <= lifetime.openSubscriptions,
      "\(lifetime.openSubscriptions) subscriptions counted, \(subscribers) attached")
    check(
      touched != nil || pinned <= lifetime.pinnedNodes,
      "\(lifetime.pinnedNodes) pinned nodes counted, \(pinned) found")
  }

  private func checkNode(_ node: _AnyNode) {
    let flags = node.s.flags
    let name =
      node.witness.reference(node)?.description ?? node.witness.aliasName(node).map {
        "alias \($0)"
      } ?? "list"
    check(node.s.bits.isEmpty, "\(name) kept pass bits \(node.s.bits.rawValue)")
    check(
      node.core.toOpaque() == Unmanaged.passUnretained(self).toOpaque(),
      "\(name): its witness names another map")
    check(node.s.journalMark == 0, "\(name) kept a journal mark")
    check(!flags.contains(.candidate), "\(name) is still a release candidate")
    check(!flags.contains(.purged), "\(name) was purged but is still reachable")
    let children = node.children
    let parents = node.parentReferences
    // NB: a buffered node keeps its slot in the release buffer where its internal holds are
    // (`_AnyNode.bufferSlot`): it has none, and no parent.
    let internalHolds = flags.contains(.buffered) ? 0 : Int(node.internalHolds)
    check(internalHolds == parents.count, "\(name): internal holds ≠ parent links")
    for (index, reference) in parents.enumerated() {
      let links = reference.parent.children
      check(
        Int(reference.slot) < links.count && links[Int(reference.slot)].child === node
          && Int(links[Int(reference.slot)].backIndex) == index,
        "\(name): back-reference \(index) does not match its parent's link")
    }
    for (slot, link) in children.enumerated() {
      let back = link.child.parentReferences
      check(
        Int(link.backIndex) < back.count && back[Int(link.backIndex)].parent === node
          && Int(back[Int(link.backIndex)].slot) == slot,
        "\(name): link \(slot) has no matching back-reference")
      check(!link.child.s.flags.contains(.removed), "\(name) links a removed entity")
      check(!link.child.s.flags.contains(.purged), "\(name) links a purged node")
    }
    let subscribers = node.s.extras?.subscribers.count ?? 0
    let anchor = flags.contains(.anchored) ? 1 : 0
    check(
      Int(node.externalHolds) >= subscribers + anchor,
      "\(name): \(node.externalHolds) external holds for \(subscribers) subscribers")
    if flags.contains(.alias) {
      check(
        node.witness.holdsAliasValue(node) == flags.contains(.anchored), "\(name): anchor ≠ value")
      check(
        node.witness.holdsAliasValue(node) || node.s.stamp.isNaN, "\(name) is empty but has a stamp"
      )
    }
    if flags.contains(.registered) && !flags.contains(.alias) {
      check(!flags.contains(.removed), "\(name) is registered and removed")
      let buffered = flags.contains(.buffered)
      check(
        node.externalHolds > 0 || internalHolds > 0 || buffered,
        "\(name) is registered but nothing holds it")
      check(
        !buffered || (node.externalHolds == 0 && parents.isEmpty),
        "\(name) is held but still in the release buffer")
    }
    check(
      !node.s.flags.contains(.exchanged),
      "\(name) still holds its value underneath a layer after a write")
    if let problem = node.witness.problem(node, self) { check(false, "\(name): \(problem)") }
  }

  private func check(_ condition: Bool, _ message: @autoclosure () -> String) {
    precondition(condition, "Concord internal check failed: \(message())")
  }
}
