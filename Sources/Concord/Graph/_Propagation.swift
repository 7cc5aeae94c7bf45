// Propagation: when a node changes, every live node holding it must be rewritten, children
// before parents, each once per write, and nothing else.
//
// Each parent keeps, per child occurrence, a link saying where the child sits in its value (the
// accessor's key path plus a position); the child keeps a back-reference naming that link. A
// changed child walks its back-references and patches its value straight into each parent's
// slot (`pushPatch`), without scanning the parent's other children. The walk that orders the
// work (`topologicalOrder`) only follows back-references, so it visits the ancestors of what was
// written and nothing else: the cost is proportional to the parents touched, not to the map.

extension _MapCore {
  /// Finalizes, children first, the seeds of a write and every ancestor they reach.
  ///
  /// A claimed node settles through its claim. Any other node changed if a child patched it.
  /// A node that changed is queued for delivery and patches its own parents in turn.
  @usableFromInline
  func settle(from seeds: [_AnyNode], epoch: UInt64, expansion: _Expansion?) {
    for node in topologicalOrder(from: seeds, epoch: epoch) {
      let bits = node.bits(at: epoch)
      guard !bits.contains(.settled) else { continue }
      let changed: Bool
      if bits.contains(.claimed), let claim = expansion?.claim(on: node) {
        changed = claim.settle(self, stamp: expansion.unsafelyUnwrapped.stamp)
      } else {
        changed = bits.contains(.patched)
      }
      node.insert(.settled, at: epoch)
      if changed {
        noteChanged(node)
        pushPatch(from: node, epoch: epoch)
      }
    }
  }

  /// Writes the value of `node` into each parent slot holding it, unless that parent is already
  /// final for this write or will be rebuilt from its claim anyway.
  @usableFromInline
  func pushPatch(from node: _AnyNode, epoch: UInt64) {
    guard let parents = node.extras?.parents else { return }
    for reference in parents {
      let parent = reference.parent
      guard parent.bits(at: epoch).isDisjoint(with: [.settled, .claimed]) else { continue }
      if batch.recordsUndo { batch.undo.append(.value(parent.makeRestorer())) }
      parent.patch(slot: reference.slot)
      parent.insert(.patched, at: epoch)
    }
  }

  /// The seeds and their ancestors, each once, every node before all of its parents.
  ///
  /// A reverse post-order of a depth-first walk up the back-references, with an explicit stack
  /// so that long chains cannot overflow the thread's stack. In a cycle, the order among its
  /// nodes follows the walk.
  ///
  /// - Complexity: O(ancestors and their links).
  func topologicalOrder(from seeds: [_AnyNode], epoch: UInt64) -> [_AnyNode] {
    var postorder: [_AnyNode] = []
    var stack: [(node: _AnyNode, nextParent: Int)] = []
    for seed in seeds where !seed.bits(at: epoch).contains(.visited) {
      seed.insert(.visited, at: epoch)
      stack.append((seed, 0))
      while let (node, nextParent) = stack.last {
        if let parents = node.extras?.parents, nextParent < parents.count {
          stack[stack.count - 1].nextParent = nextParent + 1
          let parent = parents[nextParent].parent
          if !parent.bits(at: epoch).contains(.visited) {
            parent.insert(.visited, at: epoch)
            stack.append((parent, 0))
          }
        } else {
          stack.removeLast()
          postorder.append(node)
        }
      }
    }
    return postorder.reversed()
  }

  /// Books a committed change of `node`: queued for delivery if observed, and an alias re-anchors.
  @usableFromInline
  func noteChanged(_ node: _AnyNode) {
    if node.flags.contains(.alias) { updateAnchor(node) }
    guard node.hasSubscribers, !node.flags.contains(.queued) else { return }
    node.flags.insert(.queued)
    batch.changed.append(node)
  }
}
