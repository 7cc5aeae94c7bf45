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

extension _MapCore {
  /// Finalizes, children first, the seeds of a pass and every ancestor they reach.
  ///
  /// A claimed node is rebuilt from its children. A node on a cycle that a child patched is
  /// rebuilt too (see `_Materialize.swift`); any other patched node was patched in place. Each
  /// written node then patches its own parents.
  ///
  /// The seeds are unretained: the pass drops no node (purges wait for the commit).
  @usableFromInline
  func settle(from seeds: [Unmanaged<_AnyNode>]) {
    // NB: the walk's buffers are the scratch's, taken out while in use: allocating them was a
    // good share of a small aggregate's write. A nested settle starts from empty ones.
    var postorder = _Scratch.take(&scratch.postorder)
    var stack = _Scratch.take(&scratch.walk)
    defer {
      _Scratch.giveBack(&postorder, to: &scratch.postorder)
      _Scratch.giveBack(&stack, to: &scratch.walk)
    }
    topologicalOrder(from: seeds, into: &postorder, stack: &stack)
    for node in postorder.reversed() {
      node._withUnsafeGuaranteedRef { node in
        let bits = node.s.bits
        guard !bits.contains(.settled) else { return }
        mark(node, .settled)
        guard bits.contains(.claimed) || bits.contains(.patched) else { return }
        if bits.contains(.claimed) || node.cycle != 0 { node.materialize(self) }
        if node.s.flags.contains(.alias) { settleAlias(node) }
        pushPatch(from: node)
      }
    }
  }

  /// Propagates a write of `node` that a pass did not claim (a leaf write, an update's root):
  /// its parents and their ancestors are rewritten.
  @usableFromInline
  func propagate(from node: _AnyNode) {
    mark(node, .settled)
    // NB: when no parent goes further (a flat fan-out, the common case), patching them was
    // all there was to do.
    if pushPatch(from: node) {
      settle(from: node.s.extras.unsafelyUnwrapped.parents.map { .passUnretained($0.parent) })
    }
    endPass()
  }

  /// Writes the value of `node` into each parent slot holding it, unless that parent is already
  /// final for this pass or will be rebuilt from its claim anyway. Returns whether any parent
  /// goes further: it has parents of its own, lies on a cycle, or is an alias.
  @discardableResult
  func pushPatch(from node: _AnyNode) -> Bool {
    guard node.s.extras != nil else { return false }
    // NB: the extras borrowed, not retained.
    let extras = Unmanaged.passUnretained(node.s.extras.unsafelyUnwrapped)
    var goesFurther = false
    // NB: by index, each parent borrowed: copying the array or retaining each parent is an
    // atomic operation per parent of a fan-out.
    var index = 0
    while index < extras._withUnsafeGuaranteedRef({ $0.parents.count }) {
      let reference = extras._withUnsafeGuaranteedRef { $0.parents[index] }
      index += 1
      Unmanaged.passUnretained(reference.parent)._withUnsafeGuaranteedRef { parent in
        if !goesFurther { goesFurther = parent.hasParents || parent.cycle != 0 }
        if parent.s.flags.contains(.alias) { goesFurther = true }
        guard parent.s.bits.isDisjoint(with: [.settled, .claimed]) else { return }
        if recordsPatch(of: parent) { touch(parent) }
        if parent.cycle == 0 { parent.patch(slot: Int(reference.slot), self) }
        mark(parent, .patched)
      }
    }
    return goesFurther
  }

  /// Appends to `postorder` the seeds and their ancestors, each once, every node after all of
  /// its parents: read in reverse, every node comes before its parents.
  ///
  /// A post-order of a depth-first walk up the back-references, with an explicit `stack` (left
  /// empty) so that long chains cannot overflow the thread's stack. In a cycle, the order among
  /// its nodes follows the walk.
  ///
  /// The nodes are unretained: the pass drops no node (purges wait for the commit), and a
  /// retain and a release per node and per link were a good share of a small aggregate's write.
  ///
  /// - Complexity: O(ancestors and their links).
  func topologicalOrder(
    from seeds: [Unmanaged<_AnyNode>], into postorder: inout [Unmanaged<_AnyNode>],
    stack: inout [(node: Unmanaged<_AnyNode>, nextParent: Int)]
  ) {
    for seed in seeds where !seed._withUnsafeGuaranteedRef({ $0.s.bits.contains(.visited) }) {
      seed._withUnsafeGuaranteedRef { mark($0, .visited) }
      stack.append((seed, 0))
      while let (node, nextParent) = stack.last {
        let parent = node._withUnsafeGuaranteedRef { node -> Unmanaged<_AnyNode>? in
          // NB: the extras borrowed through optional chaining, not bound and retained.
          guard nextParent < node.s.extras?.parents.count ?? 0 else { return nil }
          return Unmanaged.passUnretained(
            node.s.extras.unsafelyUnwrapped.parents[nextParent].parent)
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
