// Writing a value that holds nested entities happens in three passes.
//
// 1. Claims. Walk the written value breadth-first, one depth at a time, and resolve each nested
//    entity to its node. The first depth to reach a node claims it, and among occurrences at that
//    depth the last one wins; deeper occurrences lose and are not expanded, which is also why
//    cycles by identity end. Each claim is checked against the node's stamp once.
// 2. Apply. Each accepted winner's payload becomes its node's value, and the node is relinked to
//    the children its payload holds.
// 3. Settle. Nodes are finalized children first (see `_Propagation.swift`): a claimed node has
//    every child slot rewritten with the child's current value, so it shows the freshest version
//    of each nested entity; a changed node pushes itself into its parents.

/// One write's claim on one node: the winning occurrence of that entity in the written value.
@usableFromInline
class _AnyClaim {
  /// The distance from the root of the write.
  @usableFromInline let depth: Int
  /// The claim's index in the write's claims.
  @usableFromInline final var index: Int32 = 0
  /// Whether the node's stamp lets this write through.
  let accepted: Bool
  /// Links to the children the payload holds, found while expanding.
  final var links: [_ChildLink] = []

  @usableFromInline
  init(depth: Int, accepted: Bool) {
    self.depth = depth
    self.accepted = accepted
  }

  @usableFromInline var node: _AnyNode { fatalError("abstract") }

  /// Claims the nested entities of the payload, one depth further.
  func expand(_: _Expansion) { fatalError("abstract") }

  /// Makes the payload the node's value and links the node to the payload's children.
  func apply(_: _MapCore) { fatalError("abstract") }

  /// Rewrites every child slot with the child's current value. Returns whether the value changed.
  func settle(_: _MapCore, stamp _: Stamp?) -> Bool { fatalError("abstract") }
}

@usableFromInline
final class _Claim<Value: Sendable>: _AnyClaim {
  let target: _Node<Value>
  let payload: Value
  let schema: _Schema<Value>
  /// The node's value before this write; `nil` for a node this write created.
  private var old: Value?

  @usableFromInline
  init(target: _Node<Value>, payload: Value, schema: _Schema<Value>, depth: Int, accepted: Bool) {
    self.target = target
    self.payload = payload
    self.schema = schema
    super.init(depth: depth, accepted: accepted)
  }

  @usableFromInline override var node: _AnyNode { target }

  override func expand(_ expansion: _Expansion) {
    for accessor in schema.accessors {
      expansion.accessor = accessor
      accessor.forEachChild(payload, expansion)
    }
    links = expansion.takeLinks()
  }

  override func apply(_ core: _MapCore) {
    if target.flags.contains(.fresh) {
      target.flags.remove(.fresh)
    } else {
      old = target.value
      if core.batch.recordsUndo { core.batch.undo.append(.value(target.makeRestorer())) }
    }
    target.value = payload
    core.relink(target, to: links)
  }

  override func settle(_ core: _MapCore, stamp: Stamp?) -> Bool {
    let slots = target.extras?.children.count ?? 0
    for slot in 0..<slots { target.patch(slot: slot) }
    core.record(stamp, on: target)
    defer { old = nil }
    guard let old else { return true }
    return schema.differ(old, target.value)
  }
}

/// The state of the claims pass of one write.
@usableFromInline
final class _Expansion {
  // NB: unowned(unsafe): an expansion lives only inside a write of `core`.
  @usableFromInline unowned(unsafe) let core: _MapCore
  @usableFromInline let stamp: Stamp?
  /// The write's epoch: claim marks on nodes are only valid at it.
  @usableFromInline let epoch: UInt64
  /// The depth of the claims being made.
  @usableFromInline var depth = 0
  /// The accessor whose children are being visited.
  @usableFromInline var accessor: AnyObject?
  /// Every claim made, in breadth-first order.
  @usableFromInline var claims: [_AnyClaim] = []
  /// Claims made at `depth`, waiting to be expanded.
  private var next: [_AnyClaim] = []
  /// Links found while expanding the current claim.
  @usableFromInline var links: [_ChildLink] = []

  init(core: _MapCore, stamp: Stamp?) {
    self.core = core
    self.stamp = stamp
    epoch = core.nextEpoch()
  }

  /// Records `claim`, the winning claim on its node for now.
  @usableFromInline
  func offer(_ claim: _AnyClaim) {
    claim.index = Int32(claims.count)
    claims.append(claim)
    next.append(claim)
    let node = claim.node
    node.claimIndex = claim.index
    node.insert(.offered, at: epoch)
  }

  /// Whether `claim` is its node's winning claim.
  @inline(__always)
  func isWinner(_ claim: _AnyClaim) -> Bool {
    claim.node.claimIndex == claim.index
  }

  /// The winning claim on `node`, if this write claimed it.
  @inlinable
  func claim(on node: _AnyNode) -> _AnyClaim? {
    node.bits(at: epoch).contains(.offered) ? claims[Int(node.claimIndex)] : nil
  }

  /// Visits one nested entity of the claim being expanded.
  @inlinable
  func visit<C: Identifiable & Sendable>(_ child: C, position: Int) {
    let table = core.table(for: C.self)
    let node = core.entityNode(for: child, in: table)
    links.append(
      _ChildLink(
        child: node, accessor: accessor.unsafelyUnwrapped, position: position, backIndex: 0))
    if let existing = claim(on: node), existing.depth < depth { return }
    offer(
      _Claim(
        target: node, payload: child, schema: table.schema, depth: depth,
        accepted: node.stamp._admits(stamp)))
  }

  /// Visits each entity of a collection, at its offset.
  @inlinable
  func visitAll<S: Sequence>(_ children: S) where S.Element: Identifiable & Sendable {
    for (offset, child) in children.enumerated() { visit(child, position: offset) }
  }

  func takeNext() -> [_AnyClaim] {
    defer { next = [] }
    return next
  }

  func takeLinks() -> [_ChildLink] {
    defer { links = [] }
    return links
  }
}

extension _MapCore {
  /// Stores `value` as a root write and calls `body` with its node, borrowed.
  ///
  /// - Parameter held: Whether `body` takes a hold on the node (a handle); if not, a node this
  ///   write creates is checked for release when the write ends.
  /// - Complexity: O(1) for a value without nested entities, plus O(parents touched) when it
  ///   changed; O(nested occurrences + parents touched) otherwise.
  @inlinable
  func store<T: Identifiable & Sendable, R>(
    _ value: T, stamp: Stamp?, held: Bool, _ body: (_EntityNode<T>) -> R
  ) -> R {
    withTable(for: T.self) { table in
      guard table.schema.isLeaf else {
        let node = entityNode(for: value, in: table)
        writeTree(into: node, payload: value, schema: table.schema, stamp: stamp)
        return body(node)
      }
      // A value holding no nested entity: one lookup, no claim.
      return table.withNode(for: value, creating: .registered) { node, created in
        if created {
          didCreate(node, held: held)
          record(stamp, on: node)
          logStored(node, stamp: stamp)
        } else {
          writeLeaf(node, value, stamp: stamp, schema: table.schema)
        }
        return body(node)
      }
    }
  }

  /// The node of `value`'s entity, registered fresh if the map has none.
  ///
  /// A fresh node holds nothing yet; unless a parent links it or a handle is made, it is purged
  /// when the write ends.
  @inlinable
  func entityNode<T: Identifiable & Sendable>(for value: T, in table: _Table<T>) -> _EntityNode<T> {
    table.withNode(for: value, creating: [.registered, .fresh]) { node, created in
      if created { didCreate(node) }
      return node
    }
  }

  /// Books a node just registered in its table.
  @usableFromInline
  func didCreate(_ node: _AnyNode, held: Bool = false) {
    node.epoch = epochCounter
    liveCount += 1
    if batch.recordsUndo { batch.undo.append(.inserted(node)) }
    if !held { noteHoldDropped(node) }
  }

  /// Writes `value` into `node`, which holds no nested entity.
  @inlinable
  func writeLeaf<T: Sendable>(_ node: _Node<T>, _ value: T, stamp: Stamp?, schema: _Schema<T>) {
    guard node.stamp._admits(stamp) else {
      logStale(node, incoming: stamp)
      return
    }
    if batch.recordsUndo { batch.undo.append(.value(node.makeRestorer())) }
    let changed = schema.differ(node.value, value)
    node.value = value
    record(stamp, on: node)
    logStored(node, stamp: stamp)
    guard changed else { return }
    let epoch = nextEpoch()
    node.insert(.settled, at: epoch)
    noteChanged(node)
    if node.hasParents {
      pushPatch(from: node, epoch: epoch)
      settle(from: [node], epoch: epoch, expansion: nil)
    }
  }

  /// Writes `payload` into `root` and every nested entity it holds. Returns whether the root
  /// itself was written (its stamp let the write through).
  ///
  /// - Complexity: O(nested occurrences + parents touched).
  @usableFromInline @discardableResult
  func writeTree<V: Sendable>(into root: _Node<V>, payload: V, schema: _Schema<V>, stamp: Stamp?)
    -> Bool
  {
    let expansion = _Expansion(core: self, stamp: stamp)
    let rootClaim = _Claim(
      target: root, payload: payload, schema: schema, depth: 0, accepted: root.stamp._admits(stamp))
    expansion.offer(rootClaim)
    var level = expansion.takeNext()
    while !level.isEmpty {
      expansion.depth += 1
      for claim in level where expansion.isWinner(claim) {
        claim.expand(expansion)
      }
      level = expansion.takeNext()
    }

    let epoch = expansion.epoch
    var seeds: [_AnyNode] = []
    for claim in expansion.claims where expansion.isWinner(claim) {
      guard claim.accepted else {
        logStale(claim.node, incoming: stamp)
        continue
      }
      claim.apply(self)
      claim.node.insert(.claimed, at: epoch)
      seeds.append(claim.node)
      logStored(claim.node, stamp: stamp)
    }
    // NB: deepest first, so that in a cycle the node closest to the root settles last and sees
    // every other node of the write already final.
    settle(from: seeds.reversed(), epoch: epoch, expansion: expansion)
    return rootClaim.accepted
  }

  /// Records `stamp` as the node's newest, unless it is `nil` or NaN.
  @inlinable
  func record(_ stamp: Stamp?, on node: _AnyNode) {
    if let stamp, !stamp.isNaN { node.stamp = stamp }
  }
}

extension Dictionary {
  /// The value for `key`, inserting `make()` if there is none, with a single hash lookup.
  @inlinable
  mutating func _getOrInsert(_ key: Key, _ make: () -> Value) -> Value {
    func project(_ value: inout Value) -> Value { value }
    return project(&self[key, default: make()])
  }
}
