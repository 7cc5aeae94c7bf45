// Settling: when nodes are written, every live node holding them must be rewritten, children
// before parents, each once per pass, and nothing else.
//
// Each parent keeps, per child occurrence, a link saying where the child sits in its value (the
// accessor plus a position); the child keeps a back-reference naming that link. A written
// child walks its back-references and patches its value straight into each parent's slot
// (`pushPatch`), without scanning the parent's other children. The walk that orders the work
// (`topologicalOrder`) only follows back-references, so it visits the ancestors of what was
// written and nothing else: the cost is proportional to the parents touched, not to the map.
//
// A written node always propagates, even when its value is `==` to the old one: `==` may be
// looser than the value (comparing ids only, say), and the parents must show what `find` shows.
// Equality only decides who is told, when the write commits (see `_Outbox.swift`).

extension _Pass {
  /// Finalizes, children first, the seeds of a pass and every ancestor they reach.
  ///
  /// A claimed aggregate is rebuilt from its children when some occurrence of the pass did not
  /// end up as written (`_Pass.rebuilds`). A node on a cycle that a child patched or that the
  /// pass claimed is rebuilt too (see `_Node+Materialize.swift`); any other patched node was patched
  /// in place. Each settled node then patches its own parents.
  ///
  /// The seeds are unretained (rules 2 and 3 of `_Lifetime.swift`): the pass drops no node
  /// (purges wait for the commit), and one a write takes out waits in the graveyard.
  @usableFromInline
  func settle(from seeds: [Unmanaged<_AnyNode>]) {
    if seeds.count == 1 {
      seeds[0]._withUnsafeGuaranteedRef { settle(from: $0) }
    } else {
      settleInOrder(from: seeds)
    }
  }

  /// `settle(from:)` for one seed: the root of a write that nests no entity.
  @usableFromInline
  func settle(from node: _AnyNode) {
    // NB: the common case, one node written whose parents go no further (a flat fan-out):
    // patching them is all there is to do, in no particular order.
    guard node.cycle == 0, !node.s.flags.contains(.alias), !(rebuilds && node.hasChildren)
    else {
      return settleInOrder(from: CollectionOfOne(.passUnretained(node)))
    }
    mark(node, .settled)
    if pushPatch(from: node) {
      settleInOrder(
        from: (0..<node.parentCount).lazy.map { .passUnretained(node.parent(at: $0).parent) })
    }
  }

  /// `settle(from:)`, every node after its children.
  func settleInOrder<Seeds: Collection<Unmanaged<_AnyNode>>>(from seeds: Seeds) {
    // NB: the walk's buffers are the pass's, taken out while in use: allocating them was a
    // good share of a small aggregate's write. A nested settle starts from empty ones.
    var postorder = _PassBuffers.take(&buffers.postorder)
    var stack = _PassBuffers.take(&buffers.walk)
    defer {
      _PassBuffers.giveBack(&postorder, to: &buffers.postorder)
      _PassBuffers.giveBack(&stack, to: &buffers.walk)
    }
    topologicalOrder(from: seeds, into: &postorder, stack: &stack)
    for node in postorder.reversed() {
      node._withUnsafeGuaranteedRef { node in
        let bits = node.s.bits
        guard !bits.contains(.settled) else { return }
        mark(node, .settled)
        guard bits.contains(.claimed) || bits.contains(.patched) else { return }
        if (bits.contains(.claimed) && rebuilds) || node.cycle != 0 {
          node.witness.materialize(node)
        }
        if node.s.flags.contains(.alias) { withCore { $0.lifetime.settleAnchor(of: node) } }
        pushPatch(from: node)
      }
    }
  }

  /// Writes the value of `node` into each parent slot holding it, unless that parent is already
  /// final for this pass or will be rebuilt from its claim anyway. Returns whether any parent
  /// goes further: it has parents of its own, lies on a cycle, or is an alias.
  @discardableResult
  func pushPatch(from node: _AnyNode) -> Bool {
    guard let first = node.s.firstParent else { return false }
    var goesFurther = patch(parent: first, goesFurther: false)
    guard node.s.extras != nil else { return goesFurther }
    // NB: the other parents by index, the extras borrowed (rule 7: the node keeps them): copying
    // the array would retain it.
    // The count is read each time, though a patch never adds or removes a parent.
    let extras = Unmanaged.passUnretained(node.s.extras.unsafelyUnwrapped)
    var index = 0
    while index < extras._withUnsafeGuaranteedRef({ $0.moreParents.count }) {
      goesFurther = patch(
        parent: extras._withUnsafeGuaranteedRef { $0.moreParents[index] },
        goesFurther: goesFurther)
      index += 1
    }
    return goesFurther
  }

  /// Writes a child's value into the slot `reference` names, as `pushPatch(from:)` says, and
  /// returns whether a parent goes further: `goesFurther`, if an earlier one did, or this one.
  @inline(__always)
  private func patch(parent reference: _ParentRef, goesFurther: Bool) -> Bool {
    // NB: the parent borrowed (rules 5 and 7): retaining it is an atomic operation per parent
    // of a fan-out.
    Unmanaged.passUnretained(reference.parent)._withUnsafeGuaranteedRef { parent in
      let goesFurther =
        goesFurther || parent.hasParents || parent.cycle != 0
        || parent.s.flags.contains(.alias)
      // NB: a claimed parent is rebuilt from its children when the pass rebuilds; otherwise
      // its slots hold what its claim wrote, and a child another occurrence changed (one
      // nested in an aggregate written bit for bit as stored, which is not expanded) is
      // patched in like any other.
      let bits = parent.s.bits
      guard !bits.contains(.settled), !(rebuilds && bits.contains(.claimed)) else {
        return goesFurther
      }
      withCore { core in
        if core.journal.recordsPatch(of: parent, core.audience) {
          core.journal.touch(parent, core.audience)
        }
      }
      if parent.cycle == 0 { parent.witness.patch(parent, Int(reference.slot)) }
      mark(parent, .patched)
      return goesFurther
    }
  }

  /// Appends to `postorder` the seeds and their ancestors, each once, every node after all of
  /// its parents: read in reverse, every node comes before its parents.
  ///
  /// A post-order of a depth-first walk up the back-references, with an explicit `stack` (left
  /// empty) so that long chains cannot overflow the thread's stack. In a cycle, the order among
  /// its nodes follows the walk.
  ///
  /// The nodes are unretained: the pass drops no node (purges wait for the commit), parents are
  /// there while linked (rule 5 of `_Lifetime.swift`), and a retain and a release per node and
  /// per link were a good share of a small aggregate's write.
  ///
  /// - Complexity: O(ancestors and their links).
  func topologicalOrder<Seeds: Collection<Unmanaged<_AnyNode>>>(
    from seeds: Seeds, into postorder: inout [Unmanaged<_AnyNode>],
    stack: inout [(node: Unmanaged<_AnyNode>, nextParent: Int)]
  ) {
    for seed in seeds where !seed._withUnsafeGuaranteedRef({ $0.s.bits.contains(.visited) }) {
      seed._withUnsafeGuaranteedRef { mark($0, .visited) }
      stack.append((seed, 0))
      while let (node, nextParent) = stack.last {
        let parent = node._withUnsafeGuaranteedRef { node -> Unmanaged<_AnyNode>? in
          guard nextParent < node.parentCount else { return nil }
          return Unmanaged.passUnretained(node.parent(at: nextParent).parent)
        }
        guard let parent else {
          stack.removeLast()
          postorder.append(node)
          continue
        }
        stack[stack.count - 1].nextParent = nextParent + 1
        parent._withUnsafeGuaranteedRef { parent in
          if !parent.s.bits.contains(.visited) {
            mark(parent, .visited)
            stack.append((Unmanaged.passUnretained(parent), 0))
          }
        }
      }
    }
  }
}
