// Writing a value that holds nested entities is one pass of three steps.
//
// 1. Claims. Walk the written value breadth-first, one depth at a time, and resolve each nested
//    entity to its node. The first depth to reach a node claims it, and among occurrences at
//    that depth the last one wins; deeper occurrences lose and are not expanded, which is also
//    why cycles by identity end. Each occurrence is checked against the node's stamp, with its
//    own stamp when it is `Stamped`. The occurrences of a `Mergeable` entity are chained, and
//    merged into its winning claim before it is expanded (an aggregate) or applied.
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
  /// Accepted, but the value is bit for bit the stored one (see `_identical`): the stamp is
  /// recorded, nothing else changes, nothing propagates.
  case identical
}

/// How a pass visits the nested entities of the values it expands.
@usableFromInline
enum _VisitMode: UInt8 {
  /// A write: each occurrence claims its node, created if the map has none.
  case claiming
  /// Nested occurrences only link, without claiming: the pass shows a value over the entities
  /// it nests as they are (see `_MapCore.show(_:in:)`, optimistic layers).
  case showing
  /// A value loaded from the store: occurrences of entities in memory only link (memory is
  /// newer); the others are created and claimed. See `_MapCore.admitLoaded(_:stamp:in:)`.
  case loading
  /// No pass: the walk lists the persisted entities missing from memory, to load them first.
  case probing
  /// No pass: the walk lists the positions of the persisted entities that are neither in
  /// memory nor in the store, which were removed; see `_MapCore.admitLoaded(_:stamp:in:)`.
  case pruning
  /// A shallow write's walk: each occurrence resolves to its node, without a claim; see
  /// `_ShallowWrite.swift`.
  case shallowWalk
  /// A shallow write applies each occurrence the walk resolved.
  case shallowWrite
}

/// One write's claim on one node: an occurrence of that entity in the written value.
@usableFromInline
struct _Claim {
  /// NB: unowned(unsafe), by rules 2 and 3 of `_Lifetime.swift`: a claimed entity is in its
  /// table for the whole pass (a pass drops no node), and the root of a write (a list, an alias
  /// slot) is held by its caller, the alias table or an adoption.
  @usableFromInline unowned(unsafe) let node: _AnyNode
  /// The distance from the root of the write.
  @usableFromInline let depth: Int32
  /// Where the payload is in the node type's stash.
  @usableFromInline var payload: Int32
  @usableFromInline var verdict: _Verdict
  /// The stamp the occurrence was written with.
  @usableFromInline var stamp: Stamp?
  /// The range of the payload's links in the pass's `links` buffer, set when it is expanded.
  @usableFromInline var links: Range<Int> = 0..<0
  /// The previous claim on the same node, or -1: the chain of a node's occurrences, for merging.
  @usableFromInline var previous: Int32

  @inlinable
  init(
    node: _AnyNode, depth: Int32, payload: Int32, verdict: _Verdict, stamp: Stamp?,
    previous: Int32
  ) {
    self.node = node
    self.depth = depth
    self.payload = payload
    self.verdict = verdict
    self.stamp = stamp
    self.previous = previous
  }
}

/// The buffers of the graph pass running now, kept between passes for their capacity.
@usableFromInline
struct _Scratch {
  /// Every claim made, in breadth-first order.
  @usableFromInline var claims: [_Claim] = []
  /// Links found while expanding claims; each claim names its range.
  @usableFromInline var links: [_ChildLink] = []
  /// Every node whose pass bits were set, to clear them when the pass ends. NB: unretained, as
  /// `_Claim.node`: the pass ends before its write can free any of them (rule 3).
  @usableFromInline var marked: [Unmanaged<_AnyNode>] = []
  /// Children the pass linked that may close a cycle; see `_Cycles.swift`.
  @usableFromInline var cycleRoots: [_AnyNode] = []
  /// The accessor, depth and call stamp of the claims being made.
  @usableFromInline var accessor: Int32 = 0
  @usableFromInline var depth: Int32 = 0
  @usableFromInline var stamp: Stamp?
  /// Claims this close to the root do not merge: an `update`'s own entity (depth 0, or 1 under
  /// an alias) started from the stored value.
  @usableFromInline var mergeFromDepth: Int32 = 0
  /// The last cycle number handed out.
  @usableFromInline var lastCycle = 0
  /// How nested occurrences are visited; see `_VisitMode`.
  @usableFromInline var mode = _VisitMode.claiming
  /// While probing: the loads of the persisted entities found missing from memory.
  @usableFromInline var loads: [(_MapCore) -> Void] = []
  /// While loading: the nodes the load created, recorded in the journal as present before the
  /// write when it ends; see `_MapCore.admitLoaded(_:stamp:in:)`.
  @usableFromInline var loaded: [_AnyNode] = []
  /// The entities being loaded, so that a cycle of persisted aggregates loads each once.
  var loading: Set<_RowKey> = []
  /// While pruning: the positions found.
  @usableFromInline var pruned: [Int] = []
  /// The shallow write running now, if any.
  @usableFromInline var shallow = _ShallowState()
  /// Whether a store may take a shallow write; the differential tests turn it off, so that the
  /// pass writes what a shallow write would.
  @usableFromInline var allowsShallowWrites = true
  /// Buffers reused from pass to pass, each empty between uses: the nodes a pass wrote, and the
  /// settle's walk (see `_Settle.swift`). Allocating them was a good share of a small
  /// aggregate's write. NB: unretained, as `_Claim.node`.
  @usableFromInline var seeds: [Unmanaged<_AnyNode>] = []
  var postorder: [Unmanaged<_AnyNode>] = []
  var walk: [(node: Unmanaged<_AnyNode>, nextParent: Int)] = []

  @usableFromInline init() {}

  /// Takes a reused buffer out of its `slot`, leaving an empty one there, so that a nested use
  /// of the same buffer starts afresh instead of clobbering it.
  @usableFromInline
  static func take<Element>(_ slot: inout [Element]) -> [Element] {
    var buffer: [Element] = []
    swap(&buffer, &slot)
    return buffer
  }

  /// Empties `buffer`, keeping its capacity, and puts it back in its `slot`.
  @usableFromInline
  static func giveBack<Element>(_ buffer: inout [Element], to slot: inout [Element]) {
    buffer.removeAll(keepingCapacity: true)
    swap(&buffer, &slot)
  }
}

/// The links of one claim, read in place from the pass's `links` buffer.
///
/// NB: a slice of the buffer would retain it, an atomic operation per claim applied; the core
/// is borrowed for each read, which an unowned reference would retain. It lives only for one
/// relink in a pass of that core, whose caller holds the map (rule 6 of `_Lifetime.swift`).
@usableFromInline
struct _ScratchLinks: RandomAccessCollection {
  @usableFromInline let core: Unmanaged<_MapCore>
  @usableFromInline let range: Range<Int>

  @inlinable
  init(core: _MapCore, range: Range<Int>) {
    self.core = .passUnretained(core)
    self.range = range
  }

  @inlinable var startIndex: Int { range.lowerBound }
  @inlinable var endIndex: Int { range.upperBound }
  @inlinable subscript(position: Int) -> _ChildLink {
    core._withUnsafeGuaranteedRef { $0.scratch.links[position] }
  }
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
    scratch.mergeFromDepth = 0
  }

  /// What the stamp says about writing `payload`, stamped `stamp`, into `node`.
  ///
  /// A newer stamp (or none) applies. An older one, NaN included, is stale: refused and
  /// logged, whatever the value, and never merged. Only a stamp equal to the stored one is
  /// compared with the stored value: it applies when the type accepts equal stamps; otherwise
  /// it is a quiet no-op when the value (merged first, for a `Mergeable` type) is `==` to the
  /// stored one, since refusing it loses nothing, and stale when it is not. An aggregate's own
  /// fields are compared, without its nested entities: those are written on their own stamps
  /// anyway, and a refetched page nesting stubs is no change.
  @inlinable
  func verdict<V>(_ node: _Node<V>, _ payload: V, _ schema: _Schema<V>, stamp: Stamp?) -> _Verdict {
    if node.admits(stamp) { return .accepted }
    // NB: refused, so `stamp` is a number and the node has one; NaN equals nothing.
    guard stamp == node.s.stamp else { return .stale }
    if schema.acceptsEqualStamps { return .accepted }
    let merged = schema.merge.map { $0(payload, node.value) } ?? payload
    return schema.ownFieldsEqual(node.value, merged) ? .unchanged : .stale
  }

  /// Records a claim on `node`, the winning one for now.
  @inlinable
  func offer(_ node: _AnyNode, payload: Int32, verdict: _Verdict, stamp: Stamp?) {
    let index = Int32(scratch.claims.count)
    let previous = node.s.bits.contains(.offered) ? node.s.claimIndex : -1
    scratch.claims.append(
      _Claim(
        node: node, depth: scratch.depth, payload: payload, verdict: verdict, stamp: stamp,
        previous: previous))
    mark(node, .offered)
    node.s.claimIndex = index
  }

  /// Records an occurrence of `node` deeper than its winning claim, to merge it: it joins the
  /// chain of the node's claims without winning.
  @inlinable
  func chainLoser(_ node: _AnyNode, payload: Int32, verdict: _Verdict, stamp: Stamp?) {
    let winner = Int(node.s.claimIndex)
    let index = Int32(scratch.claims.count)
    scratch.claims.append(
      _Claim(
        node: node, depth: scratch.depth, payload: payload, verdict: verdict, stamp: stamp,
        previous: scratch.claims[winner].previous))
    scratch.claims[winner].previous = index
  }

  /// Whether claim `index` is its node's winning claim.
  @inlinable
  func isWinner(_ index: Int) -> Bool {
    scratch.claims[index].node.s.claimIndex == Int32(index)
  }

  /// Visits one nested entity of the claim being expanded.
  @inlinable
  func visit<C: Identifiable & Sendable>(_ child: C, position: Int) {
    guard scratch.mode == .claiming else { return visitSpecially(child, position: position) }
    withTable(C.self) { table in
      table.withNode(for: child) { node, created in
        if created {
          didCreate(node, held: false, journaled: true)
          mark(node, .fresh)
        }
        scratch.links.append(
          _ChildLink(child: node, accessor: scratch.accessor, position: Int32(position)))
        let schema = table.schema
        let loses =
          node.s.bits.contains(.offered)
          && scratch.claims[Int(node.s.claimIndex)].depth < scratch.depth
        // NB: a deeper occurrence loses and is dropped, unless it is to be merged.
        guard !loses || (schema.merge != nil && schema.isLeaf) else { return }
        let stamp = schema.stamp(of: child, call: scratch.stamp)
        let payload = table.stash.append(child, self)
        var verdict = verdict(node, child, schema, stamp: stamp)
        // NB: an `update` (the only write whose claims merge from below the root) hands its
        // body the stored value: a nested entity the body left bit for bit as stored is not
        // a write, and the older stamp its value may carry is no stale write to log.
        if verdict == .stale && scratch.mergeFromDepth > 0 && _identical(node.value, child) {
          verdict = .unchanged
        }
        if loses {
          chainLoser(node, payload: payload, verdict: verdict, stamp: stamp)
        } else {
          offer(node, payload: payload, verdict: verdict, stamp: stamp)
        }
      }
    }
  }

  /// Visits one nested entity in the other modes; see `_VisitMode`.
  @inlinable
  func visitSpecially<C: Identifiable & Sendable>(_ child: C, position: Int) {
    withTable(C.self) { table in
      switch scratch.mode {
      case .probing:
        if table.persisted != nil && table.node(child.id) == nil {
          let id = child.id
          scratch.loads.append { core in core.loadIfMissing(C.self, id: id) }
        }
        for accessor in table.schema.accessors { accessor.forEachChild(child, self) }
      case .showing:
        // NB: a value shown over its nested entities never brings back one that left the map:
        // its occurrence stays a copy, unlinked.
        guard let node = table.node(child.id) else { return }
        scratch.links.append(
          _ChildLink(child: node, accessor: scratch.accessor, position: Int32(position)))
      case .loading:
        table.withNode(for: child) { node, created in
          scratch.links.append(
            _ChildLink(child: node, accessor: scratch.accessor, position: Int32(position)))
          guard created else { return }
          didCreate(node, held: false, journaled: true)
          mark(node, .fresh)
          let stamp = table.schema.stamp(of: child, call: nil)
          offer(node, payload: table.stash.append(child, self), verdict: .accepted, stamp: stamp)
        }
      case .pruning:
        if table.persisted != nil && table.node(child.id) == nil { scratch.pruned.append(position) }
      case .shallowWalk, .shallowWrite:
        visitShallow(child, position: position, in: table)
      case .claiming:
        visit(child, position: position)
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
        // NB: borrowed, not retained: a claimed node stays for the whole pass (`_Claim.node`).
        Unmanaged.passUnretained(scratch.claims[index].node)._withUnsafeGuaranteedRef { node in
          // NB: a leaf has nothing to merge before expansion, no children and nothing to
          // expand, and asking is a virtual call each: its claim keeps its empty range of links.
          guard !node.s.flags.contains(.leaf) else { return }
          if node.s.flags.contains(.mergeable) { node.witness.mergeClaims(node, index, self, true) }
          // NB: a value identical to the stored one holds identical nested values, which its
          // children already have; without a call stamp to record on them, they need no claim.
          if scratch.claims[index].verdict == .accepted && scratch.stamp == nil
            && node.hasChildren && node.witness.isIdentical(node, index, self)
          {
            scratch.claims[index].verdict = .identical
            return
          }
          node.witness.expand(node, index, self)
          scratch.claims[index].links = start..<scratch.links.count
        }
      }
      levelStart = levelEnd
    }
  }

  /// Applies every accepted winning claim, and appends the nodes written to `seeds`.
  func applyClaims(into seeds: inout [Unmanaged<_AnyNode>]) {
    // NB: an alias is logged as set after the entities it names are logged as stored.
    var alias: (node: _AnyNode, stamp: Stamp?)?
    for index in scratch.claims.indices where isWinner(index) {
      // NB: borrowed, not retained, and the claim read field by field rather than copied: a
      // claimed node stays for the whole pass (`_Claim.node`).
      Unmanaged.passUnretained(scratch.claims[index].node)._withUnsafeGuaranteedRef { node in
        if node.s.flags.contains(.mergeable) { node.witness.mergeClaims(node, index, self, false) }
        // NB: a node the pass created is never identical to its claim; asking is a virtual call.
        if scratch.claims[index].verdict == .accepted && !node.s.bits.contains(.fresh)
          && node.witness.isIdentical(node, index, self)
        {
          scratch.claims[index].verdict = .identical
        }
        let stamp = scratch.claims[index].stamp
        switch scratch.claims[index].verdict {
        case .stale:
          outbox.logStale(node, incoming: stamp)
          return
        case .unchanged:
          return
        case .identical:
          recordJournaled(stamp, on: node)
          outbox.logStored(node, stamp: stamp)
          return
        case .accepted:
          break
        }
        touch(node)
        node.witness.apply(node, index, self)
        // NB: a node nothing links to (a batch list, a root aggregate) cannot be on a cycle:
        // its new links close none.
        if relink(node, toScratchLinks: scratch.claims[index].links) && node.hasParents {
          for link in node.children where link.child === node || link.child.hasChildren {
            scratch.cycleRoots.append(link.child)
          }
        }
        record(stamp, on: node)
        if node.s.flags.contains(.alias) {
          alias = (node, stamp)
        } else {
          outbox.logStored(node, stamp: stamp)
        }
        mark(node, .claimed)
        seeds.append(.passUnretained(node))
      }
    }
    if let alias { outbox.logStored(alias.node, stamp: alias.stamp) }
    if !scratch.cycleRoots.isEmpty {
      numberCycles(from: scratch.cycleRoots)
      scratch.cycleRoots.removeAll(keepingCapacity: true)
    }
  }

  /// Records `stamp` as the node's newest, unless it is `nil` or NaN.
  @inlinable
  func record(_ stamp: Stamp?, on node: _AnyNode) {
    if let stamp, !stamp.isNaN { node.s.stamp = stamp }
  }

  /// Records `stamp` on a node the write does not otherwise touch, journaling the change so
  /// that a rollback restores the stamp too.
  @inlinable
  func recordJournaled(_ stamp: Stamp?, on node: _AnyNode) {
    guard let stamp, !stamp.isNaN, stamp != node.s.stamp else { return }
    touch(node)
    node.s.stamp = stamp
  }
}
