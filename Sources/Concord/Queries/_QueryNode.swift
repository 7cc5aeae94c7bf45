// Live queries: a query is a node whose value is its result, kept current by the change log.
//
// When a write commits, `feedConsumers()` reads its journal records (the same ones the change
// log publishes from) and hands each changed entity of a type with queries to that type's
// `_Consumers`. A filtered query evaluates its filter on the new value; an indexed query is
// told by its index whether the entity's key matches. The query then inserts, moves or drops
// the entity with a binary search.
//
// Order is total: the comparator, then creation order (`_EntityNode.sequence`). So the
// position of a member is found by binary search with the value the query last saw of it,
// which is the value the write's journal saved (with consumers, every record saves its value).
// A comparator that is not a strict weak order, or that changes its mind, only costs a linear
// scan as a fallback: membership is kept in a set, never inferred from the order.
//
// A write asks every filtered query of its type whether the entity is a member, and nearly
// all say no. A small Bloom filter of the members (`_MemberFilter`), which stays in the
// processor's cache, answers first; only a "perhaps" reaches the set.

/// One member of a query's result.
@usableFromInline
struct _QueryMember<T: Identifiable & Sendable> {
  /// NB: unmanaged, by rules 6 and 8 of `_Lifetime.swift`: the query holds its member with an
  /// external hold, and the member is in its table (or adopted while removed) as long as the
  /// query holds it.
  @usableFromInline let node: Unmanaged<_EntityNode<T>>
  /// The node's `sequence`, copied so that a binary search reads it without reaching the node;
  /// rewritten when the table renumbers (`renumbered()`).
  @usableFromInline let sequence: UInt32

  @inlinable
  init(_ node: _EntityNode<T>) {
    self.node = .passUnretained(node)
    sequence = node.sequence
  }

  @inlinable
  func `is`(_ other: _EntityNode<T>) -> Bool {
    node.toOpaque() == Unmanaged.passUnretained(other).toOpaque()
  }
}

/// The node behind a live query's handle. Its value is the result, in order; it holds each
/// member with one external hold, and only its members.
///
/// NB: the methods are `@inlinable` and reached through `_Consumers<T>` and the query
/// witness (`_Table.queryHooks()`), in code specialized for `T`: run unspecialized, a generic
/// class's methods look up metadata at every step, and opening a query cost 60 times a sort.
@usableFromInline
final class _QueryNode<T: Identifiable & Sendable>: _Node<[T]> {
  /// The consumers of `T` the query is attached to, once started.
  @usableFromInline var consumers: _Consumers<T>?
  /// `nil` for a query of every entity of the type, and for an indexed query, whose index
  /// does the matching.
  @usableFromInline let filter: (@Sendable (T) -> Bool)?
  @usableFromInline let areInIncreasingOrder: (@Sendable (T, T) -> Bool)?
  /// For an indexed query: how it leaves its index.
  @usableFromInline var leaveIndex: ((_MapCore) -> Void)?
  // NB: see `_AnyNode.s` on exclusivity checks.
  #if DEBUG
    /// The members, in the order of `value`.
    @usableFromInline var members: [_QueryMember<T>] = []
    /// The members' identities, made at the first write that needs them
    /// (`isMember(_:quick:)`): a query opened and closed with no write of its type never hashes
    /// its members.
    @usableFromInline var memberIDs: Set<ObjectIdentifier>?
    /// The quick test asked before `memberIDs`, made at the first write that needs it too.
    @usableFromInline var memberFilter: _MemberFilter?
  #else
    @exclusivity(unchecked) @usableFromInline var members: [_QueryMember<T>] = []
    @exclusivity(unchecked) @usableFromInline var memberIDs: Set<ObjectIdentifier>?
    @exclusivity(unchecked) @usableFromInline var memberFilter: _MemberFilter?
  #endif
  /// Whether the query is attached to its consumers and holds its members.
  @usableFromInline var isStarted = false

  @inlinable
  init(
    table: _Table<T>, filter: (@Sendable (T) -> Bool)?,
    sortedBy areInIncreasingOrder: (@Sendable (T, T) -> Bool)?
  ) {
    self.filter = filter
    self.areInIncreasingOrder = areInIncreasingOrder
    let witness = table.queryWitness
    super.init(value: [], witness: witness, flags: witness.flags)
  }

  /// The table of the query's type (rule 1 of `_Lifetime.swift`).
  @inlinable
  var table: _Table<T> { unsafeDowncast(witness.table, to: _Table<T>.self) }

  // MARK: Order

  /// Whether (`first`, `firstSequence`) comes before (`second`, `secondSequence`) in the order
  /// of `areInIncreasingOrder`, then of creation.
  ///
  /// NB: static, given the comparator: callers load it from the query once, rather than
  /// retaining and releasing it at every comparison of a sort or a search.
  @inlinable @inline(__always)
  static func precedes(
    _ first: T, _ firstSequence: UInt32, _ second: T, _ secondSequence: UInt32,
    by areInIncreasingOrder: (@Sendable (T, T) -> Bool)?
  ) -> Bool {
    if let areInIncreasingOrder {
      if areInIncreasingOrder(first, second) { return true }
      if areInIncreasingOrder(second, first) { return false }
    }
    return firstSequence < secondSequence
  }

  /// The same, with the query's comparator.
  @inlinable @inline(__always)
  func precedes(_ first: T, _ firstSequence: UInt32, _ second: T, _ secondSequence: UInt32)
    -> Bool
  {
    Self.precedes(first, firstSequence, second, secondSequence, by: areInIncreasingOrder)
  }

  /// Where (`element`, `sequence`) goes: the first position not before it.
  ///
  /// - Complexity: O(log *m*) comparisons.
  @inlinable
  func insertionIndex(_ element: T, _ sequence: UInt32) -> Int {
    let order = areInIncreasingOrder
    var low = 0
    var high = value.count
    while low < high {
      let middle = (low + high) / 2
      if Self.precedes(value[middle], members[middle].sequence, element, sequence, by: order) {
        low = middle + 1
      } else {
        high = middle
      }
    }
    return low
  }

  /// Copies its members' sequence numbers again: their table renumbered them, in the same
  /// order (`_Table.renumberNodes()`). At a commit, after the consumers were fed: every member
  /// is in its table then (a removed one was dropped), so every member was renumbered.
  func renumbered() {
    members = members.map { member in
      member.node._withUnsafeGuaranteedRef { node in
        assert(node.s.flags.contains(.registered), "a member left its table before renumbering")
        return _QueryMember(node)
      }
    }
  }

  /// Whether `node` is a member, for a reader under the shared lock (`holders(of:)`): it asks
  /// the set of the members' identities if a write made it, and the members otherwise, and
  /// changes nothing. (It made the set, as `isMember(_:quick:)` does: two readers at once
  /// wrote it together.)
  @inlinable
  func hasMember(_ node: _EntityNode<T>) -> Bool {
    if let memberIDs { return memberIDs.contains(ObjectIdentifier(node)) }
    return members.contains { $0.is(node) }
  }

  /// Whether `node` is a member; the first call makes the set of the members' identities.
  ///
  /// - Parameter quick: Whether the member filter answers first (see `_MemberFilter`); the
  ///   first call that asks makes it. `_Pass.isExhaustive` turns it off.
  /// - Complexity: O(1), and O(members) at the first call.
  @inlinable
  func isMember(_ node: _EntityNode<T>, quick: Bool) -> Bool {
    if quick {
      if memberFilter == nil {
        memberFilter = _MemberFilter(
          members.lazy.map { UInt(bitPattern: $0.node.toOpaque()) }, count: members.count)
      }
      let identity = _MemberFilter.identity(of: node)
      if !memberFilter.unsafelyUnwrapped.mayContain(identity) { return false }
    }
    if let memberIDs { return memberIDs.contains(ObjectIdentifier(node)) }
    let made = Set(members.lazy.map { ObjectIdentifier($0.node.takeUnretainedValue()) })
    memberIDs = made
    return made.contains(ObjectIdentifier(node))
  }

  /// The position of `node` in the result, if it is a member, found with `old`, its value
  /// when the query last saw it.
  @inlinable
  func position(of node: _EntityNode<T>, old: T?, _ core: _MapCore) -> Int? {
    guard isMember(node, quick: !core.pass.isExhaustive) else { return nil }
    if let old {
      let index = insertionIndex(old, node.sequence)
      if index < members.count && members[index].is(node) { return index }
    }
    // NB: a comparator that is not a strict weak order, or that reads the map and changed
    // its mind, misleads the search; the set says the node is here.
    return members.firstIndex { $0.is(node) }
  }

  // MARK: Maintenance

  /// Makes `node`, whose new value matches, a member in its place. `old` is its value when
  /// the query last saw it; `kind` what the write did to it.
  @inlinable
  func place(_ node: _EntityNode<T>, old: T?, _ kind: _ChangeKind, _ core: _MapCore) {
    let new = node.value
    let sequence = node.sequence
    guard let index = position(of: node, old: old, core) else {
      core.journal.touch(self, core.audience)
      let index = insertionIndex(new, sequence)
      value.insert(new, at: index)
      members.insert(_QueryMember(node), at: index)
      memberIDs?.insert(ObjectIdentifier(node))
      memberFilter?.insert(_MemberFilter.identity(of: node))
      if memberFilter?.isWorn(members: members.count) == true { memberFilter = nil }
      core.lifetime.hold(node, pinning: core)
      return
    }
    let fits =
      (index == 0 || precedes(value[index - 1], members[index - 1].sequence, new, sequence))
      && (index == value.count - 1
        || precedes(new, sequence, value[index + 1], members[index + 1].sequence))
    // NB: an `.unchanged` write is `==` to the value the query has: the copy is refreshed so
    // that the query agrees with `find`, and nobody is told.
    if kind != .unchanged || !fits { core.journal.touch(self, core.audience) }
    if fits {
      value[index] = new
      return
    }
    value.remove(at: index)
    let member = members.remove(at: index)
    let target = insertionIndex(new, sequence)
    value.insert(new, at: target)
    members.insert(member, at: target)
  }

  /// Takes `node` out of the result, if it is a member.
  @inlinable
  func drop(_ node: _EntityNode<T>, old: T?, _ core: _MapCore) {
    guard let index = position(of: node, old: old, core) else { return }
    core.journal.touch(self, core.audience)
    value.remove(at: index)
    members.remove(at: index)
    memberIDs?.remove(ObjectIdentifier(node))
    memberFilter?.departures += 1
    if memberFilter?.isWorn(members: members.count) == true { memberFilter = nil }
    core.dropExternalHold(on: node)
  }

  /// Fills the result with `nodes`, which match, and holds them. They are unretained: their
  /// table keeps them (rule 2 of `_Lifetime.swift`), and from here on the query's holds do.
  ///
  /// - Complexity: O(*m* log *m*) for *m* members.
  @inlinable
  func start(with nodes: [Unmanaged<_EntityNode<T>>], _ core: _MapCore) {
    // NB: recorded, so that a subscription opened on the handle in the write that opened the
    // query is told of its first result at commit.
    core.journal.touch(self, core.audience)
    // NB: the nodes stay unmanaged: a strong array of them retains and releases each one.
    // One loop reads each node's sequence number and value and takes its hold: with a loop for
    // each, as before, each node was reached three times, and with a thousand members each
    // time from beyond the first-level cache (`query.indexed.open` took a fifth longer).
    // NB: not for no nodes: with no capacity, the initializer writes the count of the empty
    // array all arrays share, and two maps opening empty queries at once race on it
    // (ThreadSanitizer reported it).
    var members: [_QueryMember<T>] = []
    let values =
      nodes.isEmpty
      ? []
      : [T](unsafeUninitializedCapacity: nodes.count) { values, initialized in
        members = [_QueryMember<T>](unsafeUninitializedCapacity: nodes.count) { members, made in
          for index in nodes.indices {
            _AnyNode.cacheAhead(in: nodes, from: index) { $0 }
            nodes[index]._withUnsafeGuaranteedRef { node in
              (members.baseAddress! + index).initialize(to: _QueryMember(node))
              (values.baseAddress! + index).initialize(to: node.value)
              core.lifetime.hold(node, pinning: core)
            }
          }
          made = nodes.count
        }
        initialized = nodes.count
      }
    // NB: positions are sorted, not the members and values: a comparison moves two integers.
    var positions = Array(values.indices)
    members.withUnsafeBufferPointer { members in
      values.withUnsafeBufferPointer { values in
        positions.withUnsafeMutableBufferPointer { positions in
          _CreationOrder.sort(positions, of: values, by: areInIncreasingOrder) {
            members[$0].sequence
          }
        }
      }
    }
    value = positions.map { values[$0] }
    self.members = positions.map { members[$0] }
    memberIDs = nil
    memberFilter = nil
    isStarted = true
  }

  /// Stops maintaining the query and gives back its holds on its members.
  @inlinable
  func _detach(_ core: _MapCore) {
    guard isStarted else { return }
    isStarted = false
    if let leaveIndex {
      leaveIndex(core)
      self.leaveIndex = nil
    } else {
      consumers?.detach(query: self, core)
    }
    consumers = nil
    let dropped = members
    members = []
    memberIDs = nil
    memberFilter = nil
    for index in dropped.indices {
      _AnyNode.cacheAhead(in: dropped, from: index) { $0.node }
      dropped[index].node._withUnsafeGuaranteedRef {
        core.dropExternalHold(on: $0)
      }
    }
  }

  /// What is wrong with the query, if anything; for `_checkInvariants`.
  @usableFromInline
  var problem: String? {
    guard isStarted else { return "a live query was never started" }
    guard members.count == value.count, (memberIDs?.count ?? members.count) == members.count
    else {
      return "\(value.count) values, \(members.count) members, \(memberIDs?.count ?? -1) ids"
    }
    let equality = table.schema.equality
    for (index, member) in members.enumerated() {
      let node = member.node.takeUnretainedValue()
      guard node.s.flags.contains(.registered), !node.s.flags.contains(.removed) else {
        return "member \(index) of \(T.self) is not stored"
      }
      guard memberIDs?.contains(ObjectIdentifier(node)) ?? true, node.externalHolds > 0 else {
        return "member \(index) of \(T.self) is not held"
      }
      if let memberFilter, !memberFilter.mayContain(UInt(bitPattern: member.node.toOpaque())) {
        return "member \(index) of \(T.self) is missing from the member filter"
      }
      if let equality, !equality.equal(value[index], node.value) {
        return "member \(index) of \(T.self) differs from the stored value"
      }
      if member.sequence != node.sequence {
        return "member \(index) of \(T.self) copies another sequence number than its node's"
      }
      if areInIncreasingOrder == nil && index > 0
        && members[index - 1].sequence >= member.sequence
      {
        return "members \(index - 1) and \(index) of \(T.self) are out of creation order"
      }
      // NB: the filter and the comparator are user code, which may read the map: the
      // invariant check never calls them. The model-based tests compare order and
      // membership with a brute-force filter and sort.
    }
    return nil
  }
}
