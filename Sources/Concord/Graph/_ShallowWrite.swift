// Shallow writes: a value whose nested entities are all leaves, each met once, is written the
// way the claims pass (`_Claims.swift`) would write it, without the pass's buffers.
//
// Most values a client stores are one level deep: an issue with its user and labels, a post
// with its author and books, a page of plain entities behind a batch handle. Every nested
// occurrence is then at depth 1, wins its node's claim (there is no other occurrence), and has
// nothing to expand. What is left of the pass is each occurrence's verdict, merge and write, the
// parent's own claim and links, and the settle of whatever else holds the entities written.
// Doing exactly that, in the same order, spares copying each occurrence into a stash, the
// claims and their links, and the walk that orders the nodes to settle.
//
// A walk first resolves every occurrence to its node, as the pass's walk would (creating the
// ones the map lacks, in the same order), and gives up, leaving the rest to the pass, when an
// entity occurs twice (its occurrences are ranked or merged) or nests entities of its own.

extension _MapCore {
  /// Applies an entity's only occurrence in a write, nested at depth 1 in a parent the write
  /// stores, as the pass applies a winning claim: the stamp decides, a ``Mergeable`` value merges
  /// into the stored one, and a value bit for bit the stored one only records its stamp.
  ///
  /// - Returns: The claim's final verdict, and whether the parent must be rebuilt from the
  ///   entity: whether it now holds something other than `incoming` (the write was refused, or
  ///   merged).
  @inlinable
  func applyLoneOccurrence<T: Identifiable & Sendable>(
    _ incoming: T, to node: _EntityNode<T>, schema: _Schema<T>, call: Stamp?
  ) -> (verdict: _Verdict, rebuildsParent: Bool) {
    var stamp = schema.stamp(of: incoming, call: call)
    var verdict = verdict(node, incoming, schema, stamp: stamp)
    let fresh = node.s.bits.contains(.fresh)
    var merged: T?
    if verdict == .accepted && !fresh, let merge = schema.merge {
      merged = merge(incoming, node.value)
      // NB: as `_Node._mergeClaimChain`: a merged claim keeps a real stamp only.
      if let own = stamp, own.isNaN { stamp = nil }
    }
    if verdict == .accepted && !fresh && schema.isEquatable
      && (merged.map { _identical(node.value, $0) } ?? _identical(node.value, incoming))
    {
      verdict = .identical
    }
    switch verdict {
    case .stale:
      outbox.logStale(node, incoming: stamp)
      return (.stale, true)
    case .unchanged:
      return (.unchanged, true)
    case .identical:
      recordJournaled(stamp, on: node)
      outbox.logStored(node, stamp: stamp)
    case .accepted:
      touch(node)
      // NB: a node the walk created holds this very occurrence already.
      if let merged {
        node.value = merged
      } else if !fresh {
        node.value = incoming
      }
      record(stamp, on: node)
      outbox.logStored(node, stamp: stamp)
    }
    return (verdict, merged != nil)
  }

  /// Writes `payload` into `root` as `writeTree(into:payload:stamp:call:)` would for a `store`,
  /// when every entity it nests is a leaf met once; see the top of this file. Returns `false`
  /// without writing anything when the pass is needed: a persisted type (its entities load
  /// first), optimistic layers pending, a ``Mergeable`` root (its claims merge before
  /// expansion), an entity met twice, or one nesting entities of its own. The nodes the walk
  /// created by then are the ones the pass's walk creates, in the same order.
  ///
  /// - Complexity: O(nested occurrences + parents of the entities written).
  @inlinable
  func writeShallow<T: Identifiable & Sendable>(
    into root: _EntityNode<T>, payload: T, stamp: Stamp?, call: Stamp?, schema: _Schema<T>
  ) -> Bool {
    guard scratch.allowsShallowWrites, scratch.mode == .claiming, registry.persistedTypes == 0,
      !layers.isActive,
      !root.s.flags.contains(.mergeable), !root.table.nestsAggregates
    else { return false }
    let verdict = verdict(root, payload, schema, stamp: stamp)
    let fresh = root.s.bits.contains(.fresh)
    // NB: a value identical to the stored one holds identical nested values, which its children
    // already have; without a call stamp to record on them, the pass claims none of them.
    let identical = !fresh && schema.isEquatable && _identical(root.value, payload)
    if verdict == .accepted && call == nil && root.hasChildren && identical {
      recordJournaled(stamp, on: root)
      outbox.logStored(root, stamp: stamp)
      return true
    }
    // The walk: each occurrence's node, in the pass's order, marked `offered`.
    scratch.stamp = call
    guard visitNested(in: payload, schema: schema, mode: .shallowWalk) else {
      if scratch.shallow.blocked == .nestsEntities { root.table.nestsAggregates = true }
      scratch.shallow = _ShallowState()
      for link in scratch.links {
        // NB: borrowed (rule 7 of `_Lifetime.swift`): the walk's nodes are in their tables.
        Unmanaged.passUnretained(link.child)._withUnsafeGuaranteedRef {
          $0.s.bits.subtract(.offered)
        }
      }
      scratch.links.removeAll(keepingCapacity: true)
      scratch.stamp = nil
      return false
    }
    // The root's claim, as `applyClaims` applies it, then its entities' claims, in order.
    switch verdict {
    case .stale:
      outbox.logStale(root, incoming: stamp)
    case .unchanged, .identical:
      break
    case .accepted where identical:
      recordJournaled(stamp, on: root)
      outbox.logStored(root, stamp: stamp)
    case .accepted:
      touch(root)
      // NB: a root the write created holds the payload already.
      if !fresh { root.value = payload }
      // NB: the links name leaves only, which close no cycle.
      relink(root, toScratchLinks: 0..<scratch.links.count)
      record(stamp, on: root)
      outbox.logStored(root, stamp: stamp)
      mark(root, .claimed)
      scratch.shallow.rootWritten = true
      scratch.seeds.append(.passUnretained(root))
    }
    _ = visitNested(in: payload, schema: schema, mode: .shallowWrite)
    var seeds = _Scratch.take(&scratch.seeds)
    // NB: a written root alone needs settling only to be rebuilt from entities that kept other
    // values, or to reach its own parents.
    if scratch.shallow.rootWritten && seeds.count == 1 && !scratch.shallow.rebuildsRoot
      && !root.hasParents
    {
      seeds.removeAll(keepingCapacity: true)
    }
    scratch.shallow = _ShallowState()
    if !seeds.isEmpty { settle(from: seeds) }
    _Scratch.giveBack(&seeds, to: &scratch.seeds)
    endPass()
    return true
  }

  /// Hands every entity nested in `payload` to `visit(_:position:)` in `mode`, accessor by
  /// accessor, then goes back to claiming. Returns whether the walk went through: `false` when
  /// it met what a shallow write cannot take (see `_ShallowState.blocked`).
  @inlinable
  func visitNested<T>(in payload: T, schema: _Schema<T>, mode: _VisitMode) -> Bool {
    scratch.mode = mode
    for index in schema.erasedAccessors.indices {
      scratch.accessor = Int32(index)
      // NB: borrowed (rule 7): the schema keeps its accessors.
      Unmanaged.passUnretained(schema.accessor(Int32(index)))._withUnsafeGuaranteedRef {
        $0.forEachChild(payload, self)
      }
    }
    scratch.mode = .claiming
    return scratch.shallow.blocked == .none
  }

  /// Visits one nested entity of a shallow write: resolves it in the walk, applies it after.
  @inlinable
  func visitShallow<C: Identifiable & Sendable>(_ child: C, position: Int, in table: _Table<C>) {
    if scratch.mode == .shallowWrite {
      let cursor = scratch.shallow.cursor
      // NB: the walk and this second visit read the same value through the same key paths; a
      // key path that gave other entities the second time (a computed property that is not a
      // plain read) would have each entity written into another's node.
      precondition(
        cursor < scratch.links.count && scratch.links[cursor].accessor == scratch.accessor,
        "Concord: a nested entity's key path gave different entities on two reads of one value")
      let link = scratch.links[cursor]
      scratch.shallow.cursor += 1
      // NB: borrowed (rule 7): the walk's nodes are in their tables (rule 2).
      Unmanaged.passUnretained(link.child)._withUnsafeGuaranteedRef { erased in
        let node = unsafeDowncast(erased, to: _EntityNode<C>.self)
        precondition(
          node.value.id == child.id,
          "Concord: a nested entity's key path gave different entities on two reads of one value")
        let (verdict, rebuildsParent) = applyLoneOccurrence(
          child, to: node, schema: table.schema, call: scratch.stamp)
        if rebuildsParent { scratch.shallow.rebuildsRoot = true }
        // NB: a written entity settles when it has parents to show it besides a root the write
        // rebuilds anyway.
        if verdict == .accepted && node.parentCount > (scratch.shallow.rootWritten ? 1 : 0) {
          mark(node, .claimed)
          scratch.seeds.append(.passUnretained(node))
        }
      }
      return
    }
    table.withNode(for: child) { node, created in
      if created {
        didCreate(node, held: false, journaled: true)
        mark(node, .fresh)
      }
      guard scratch.shallow.blocked == .none else { return }
      if !node.s.flags.contains(.leaf) {
        scratch.shallow.blocked = .nestsEntities
      } else if node.s.bits.contains(.offered) {
        scratch.shallow.blocked = .repeated
      } else {
        mark(node, .offered)
        scratch.links.append(
          _ChildLink(child: node, accessor: scratch.accessor, position: Int32(position)))
      }
    }
  }
}

/// Why a shallow write gave up; see `_MapCore.writeShallow(into:payload:stamp:call:schema:)`.
@usableFromInline
enum _ShallowBlock: UInt8 {
  case none
  /// An entity occurs twice: its occurrences are ranked, or merged, by the pass.
  case repeated
  /// A nested entity nests entities of its own.
  case nestsEntities
}

/// The state of the shallow write running now; see `_ShallowWrite.swift`.
@usableFromInline
struct _ShallowState {
  /// Why the walk gave up, if it did.
  @usableFromInline var blocked = _ShallowBlock.none
  /// The next of the walk's links to apply.
  @usableFromInline var cursor = 0
  /// Whether the root's claim was applied: it is then rebuilt, not patched, by its entities.
  @usableFromInline var rootWritten = false
  /// Whether an entity kept a value other than its occurrence, so that the root must be
  /// rebuilt from its entities.
  @usableFromInline var rebuildsRoot = false

  @usableFromInline init() {}
}
