// Writing a value that holds nested entities is one pass of three steps.
//
// 1. Claims. Walk the written value breadth-first, one depth at a time, and resolve each nested
//    entity to its node. The first depth to reach a node claims it, and among occurrences at
//    that depth the last one wins; deeper occurrences lose and are not expanded, which is also
//    why cycles by identity end. Each claim is checked against the node's stamp once.
// 2. Apply. Each accepted winner's payload becomes its node's value, and the node is relinked
//    to the children its payload holds. Cycles the new links close are numbered.
// 3. Settle. Nodes are finalized children first (see `_Settle.swift`): a claimed node has every
//    child slot rewritten with the child's value, so it shows the freshest version of each
//    nested entity; a node that was written pushes itself into its parents.
//
// Claims, links and payloads live in buffers reused by every pass, not in objects.

/// What a write's stamp says about one claim.
@usableFromInline
enum _Verdict: UInt8 {
  /// The write applies.
  case accepted
  /// The stored stamp is as new or newer: refused, and logged.
  case stale
  /// The stamp equals the stored one and the value is `==` to the stored one: a quiet no-op.
  case unchanged
}

/// One write's claim on one node: an occurrence of that entity in the written value.
@usableFromInline
struct _Claim {
  /// NB: unowned(unsafe): during a pass, tables, the journal and the caller keep nodes alive.
  @usableFromInline unowned(unsafe) let node: _AnyNode
  /// The distance from the root of the write.
  @usableFromInline let depth: Int32
  /// Where the payload is in the node type's stash.
  @usableFromInline let payload: Int32
  @usableFromInline let verdict: _Verdict
  /// The stamp the occurrence was written with.
  @usableFromInline let stamp: Stamp?
  /// The range of the payload's links in the pass's `links` buffer, set when it is expanded.
  @usableFromInline var links: Range<Int> = 0..<0

  @inlinable
  init(node: _AnyNode, depth: Int32, payload: Int32, verdict: _Verdict, stamp: Stamp?) {
    self.node = node
    self.depth = depth
    self.payload = payload
    self.verdict = verdict
    self.stamp = stamp
  }
}

/// The buffers of the graph pass running now, kept between passes for their capacity.
@usableFromInline
struct _Scratch {
  /// Every claim made, in breadth-first order.
  @usableFromInline var claims: [_Claim] = []
  /// Links found while expanding claims; each claim names its range.
  @usableFromInline var links: [_ChildLink] = []
  /// Every node whose pass bits were set, to clear them when the pass ends.
  @usableFromInline var marked: [Unmanaged<_AnyNode>] = []
  /// Children the pass linked that may close a cycle; see `_Cycles.swift`.
  @usableFromInline var cycleRoots: [_AnyNode] = []
  /// The accessor, depth and stamp of the claims being made.
  @usableFromInline var accessor: Int32 = 0
  @usableFromInline var depth: Int32 = 0
  @usableFromInline var stamp: Stamp?
  /// The last cycle number handed out.
  @usableFromInline var lastCycle = 0

  @usableFromInline init() {}
}

extension _MapCore {
  /// Sets pass bits on `node`, listing it for the end of the pass.
  @inlinable
  func mark(_ node: _AnyNode, _ bits: _PassBits) {
    if node.s.bits.isEmpty { scratch.marked.append(Unmanaged.passUnretained(node)) }
    node.s.bits.formUnion(bits)
  }

  /// Ends a pass: clears every pass bit and empties the buffers.
  @usableFromInline
  func endPass() {
    for node in scratch.marked { node._withUnsafeGuaranteedRef { $0.s.bits = [] } }
    scratch.marked.removeAll(keepingCapacity: true)
    scratch.claims.removeAll(keepingCapacity: true)
    scratch.links.removeAll(keepingCapacity: true)
    scratch.depth = 0
    scratch.stamp = nil
  }

  /// What the stamp says about writing `payload` into `node`.
  @inlinable
  func verdict<V>(_ node: _Node<V>, _ payload: V, _ schema: _Schema<V>, stamp: Stamp?) -> _Verdict {
    if node.admits(stamp) { return .accepted }
    if let stamp, stamp == node.s.stamp, !schema.differ(node.value, payload) {
      return .unchanged
    }
    return .stale
  }

  /// Records a claim on `node`, the winning one for now.
  @inlinable
  func offer(_ node: _AnyNode, payload: Int32, verdict: _Verdict, stamp: Stamp?) {
    let index = Int32(scratch.claims.count)
    scratch.claims.append(
      _Claim(node: node, depth: scratch.depth, payload: payload, verdict: verdict, stamp: stamp))
    mark(node, .offered)
    node.s.claimIndex = index
  }

  /// Whether claim `index` is its node's winning claim.
  @inlinable
  func isWinner(_ index: Int) -> Bool {
    scratch.claims[index].node.s.claimIndex == Int32(index)
  }

  /// Visits one nested entity of the claim being expanded.
  @inlinable
  func visit<C: Identifiable & Sendable>(_ child: C, position: Int) {
    withTable(C.self) { table in
      table.withNode(for: child) { node, created in
        if created { didCreate(node, held: false, journaled: true) }
        scratch.links.append(
          _ChildLink(child: node, accessor: scratch.accessor, position: Int32(position)))
        if node.s.bits.contains(.offered),
          scratch.claims[Int(node.s.claimIndex)].depth < scratch.depth
        {
          return
        }
        let stamp = scratch.stamp
        offer(
          node, payload: table.stash.append(child, self),
          verdict: verdict(node, child, table.schema, stamp: stamp), stamp: stamp)
      }
    }
  }

  /// Visits each entity of a collection, at its offset.
  @inlinable
  func visitAll<S: Sequence>(_ children: S) where S.Element: Identifiable & Sendable {
    for (offset, child) in children.enumerated() { visit(child, position: offset) }
  }

  /// Expands the claims breadth-first, from the root claim already offered.
  func expandClaims() {
    var levelStart = 0
    while levelStart < scratch.claims.count {
      let levelEnd = scratch.claims.count
      scratch.depth += 1
      for index in levelStart..<levelEnd where isWinner(index) {
        let start = scratch.links.count
        scratch.claims[index].node.expand(claim: index, self)
        scratch.claims[index].links = start..<scratch.links.count
      }
      levelStart = levelEnd
    }
  }

  /// Applies every accepted winning claim, and returns the nodes written.
  func applyClaims() -> [_AnyNode] {
    var seeds: [_AnyNode] = []
    // NB: an alias is logged as set after the entities it names are logged as stored.
    var alias: (node: _AnyNode, stamp: Stamp?)?
    for index in scratch.claims.indices where isWinner(index) {
      let claim = scratch.claims[index]
      let node = claim.node
      switch claim.verdict {
      case .stale:
        outbox.logStale(node, incoming: claim.stamp)
        continue
      case .unchanged:
        continue
      case .accepted:
        break
      }
      touch(node)
      node.apply(claim: index, self)
      if relink(node, to: scratch.links[claim.links]) {
        for link in node.children where link.child === node || link.child.hasChildren {
          scratch.cycleRoots.append(link.child)
        }
      }
      record(claim.stamp, on: node)
      if node.s.flags.contains(.alias) {
        alias = (node, claim.stamp)
      } else {
        outbox.logStored(node, stamp: claim.stamp)
      }
      mark(node, .claimed)
      seeds.append(node)
    }
    if let alias { outbox.logStored(alias.node, stamp: alias.stamp) }
    if !scratch.cycleRoots.isEmpty {
      numberCycles(from: scratch.cycleRoots)
      scratch.cycleRoots.removeAll(keepingCapacity: true)
    }
    return seeds
  }

  /// Records `stamp` as the node's newest, unless it is `nil` or NaN.
  @inlinable
  func record(_ stamp: Stamp?, on node: _AnyNode) {
    if let stamp, !stamp.isNaN { node.s.stamp = stamp }
  }
}
