extension _MapCore {
  /// Removes `nodes` and everything that cannot exist without them.
  ///
  /// Each parent of a removed node loses it: dropped from a collection, set to `nil` if
  /// optional, and removed in turn if it held the node in a non-optional property. The parents
  /// that survive then propagate like any write. Removed nodes leave their table, drop their own
  /// links (their children may be released), and their streams finish.
  ///
  /// - Complexity: O(removed nodes + their links + ancestors touched).
  func remove(_ nodes: [_AnyNode]) {
    let epoch = nextEpoch()
    var removed: [_AnyNode] = []
    func markRemoved(_ node: _AnyNode) {
      guard !node.flags.contains(.removed) else { return }
      node.flags.insert(.removed)
      removed.append(node)
    }
    nodes.forEach(markRemoved)

    // Walk up: each parent either loses slots or is removed too.
    var lostSlots: [ObjectIdentifier: [Int]] = [:]
    var survivors: [_AnyNode] = []
    var index = 0
    while index < removed.count {
      let node = removed[index]
      index += 1
      for reference in node.extras?.parents ?? [] {
        let parent = reference.parent
        guard !parent.flags.contains(.removed) else { continue }
        if parent.requiresChild(atSlot: reference.slot) {
          markRemoved(parent)
        } else {
          let key = ObjectIdentifier(parent)
          if lostSlots[key] == nil { survivors.append(parent) }
          lostSlots[key, default: []].append(reference.slot)
        }
      }
    }

    for node in removed {
      let wasRegistered = node.flags.contains(.registered)
      if batch.recordsUndo { batch.undo.append(.removed(node, wasRegistered: wasRegistered)) }
      if wasRegistered {
        unregisterKeepingHolders(node)
        logEntity(node, IdentityMapEvent.removed)
      }
      relink(node, to: [])
      if node.hasSubscribers { batch.removed.append(node) }
    }

    var seeds: [_AnyNode] = []
    for parent in survivors where !parent.flags.contains(.removed) {
      if batch.recordsUndo { batch.undo.append(.value(parent.makeRestorer())) }
      let remaining = parent.dropChildren(
        atSlots: lostSlots[ObjectIdentifier(parent)].unsafelyUnwrapped)
      relink(parent, to: remaining)
      parent.insert(.patched, at: epoch)
      seeds.append(parent)
    }
    settle(from: seeds, epoch: epoch, expansion: nil)
  }
}
