// The pass: how every write reaches the nodes it changes. A `store` of one entity, a batch, an
// aggregate at any depth, an alias, an `update`, a value an optimistic layer shows, a value
// loaded from the store: each is one pass over the value written, the root, in three steps.
//
// 1. Claims. The claim walk goes through the root's nested entities breadth-first, one depth at
//    a time, and resolves each occurrence to its node (created if the map has none). Stamps
//    before positions: the occurrence with the newest stamp wins its node; among equal or
//    missing stamps the first depth to reach it wins, and at that depth the last occurrence.
//    Losers are not expanded, which is also why cycles by identity end. Each occurrence is
//    judged against the node's stamp (`verdict`), with its own stamp when it is `Stamped`, and
//    a node the write created against its entity's tombstone (`_Table.refusesCreated`) and
//    against a failed read of it (`_Verdict.unreadable`, which refuses every claim holding it,
//    up to the root). The occurrences of a `Mergeable` entity are chained, and merged into its
//    winning claim before it is expanded (an aggregate) or applied (an entity nesting none).
//    An aggregate bit for bit as stored is not expanded (its nested values are its children's
//    already). Where either shortcut could change a winner (a skipped aggregate nests a node
//    another occurrence claims; an aggregate's occurrence is met after its winner was
//    expanded), the walk runs again knowing it (`claimAll`).
// 2. Apply. The root's claim first, then, in the order the claims were made, the apply walk
//    goes through each expanded value again and applies the winning claims it meets
//    (`apply(claim:to:identical:publishing:assign:)`): the accepted value becomes the node's,
//    and the node is relinked to the occurrences its value holds. Cycles the new links close are
//    numbered.
// 3. Settle. Nodes are finalized children first (see `_Pass+Settle.swift`): a claimed aggregate has
//    every child slot rewritten with the child's value, so it shows the freshest version of each
//    nested entity; a node that was written pushes itself into the parents the pass did not
//    write.
//
// What a pass costs is what its value holds. A claim keeps its occurrence's value aside, in its
// type's stash, only when something needs it later: an aggregate, to be expanded; a `Mergeable`
// entity, to be merged. A plain entity's occurrence is read again by the apply walk from the
// value it is in, so that a page of plain entities is written without copying one. A node is
// settled only when a parent the pass did not write shows it, and a claimed aggregate rebuilds
// from its children only when some occurrence did not end up as written (`_Pass.rebuilds`).
//
// Claims, links and the other buffers are reused by every pass, not allocated.

/// What a write's stamp says about one claim.
@usableFromInline
enum _Verdict: UInt8, BitwiseCopyable {
  /// The write applies.
  case accepted
  /// The stored stamp is as new or newer: refused, and logged.
  case stale
  /// The stamp equals the stored one and the value is `==` to the stored one: a quiet no-op.
  case unchanged
  /// Accepted, but the value is bit for bit the stored one (see `_identical`): the stamp is
  /// recorded, nothing else changes, nothing propagates.
  case identical
  /// Refused: the entity is one the store could not read, or the value nests one at some
  /// depth. A failed read is not an absent entity: writing over it could replace a newer
  /// record. Logged when the read failed, not again here.
  case unreadable
}

/// What a pass does with the entities nested in the value it writes.
@usableFromInline
enum _Nesting: UInt8 {
  /// A write: each occurrence claims its node, created if the map has none.
  case write
  /// Occurrences only link to the entities as they are, and never to one the map lacks: the
  /// root is shown over its nested entities (see `_MapCore.show(_:stamp:in:)`, optimistic
  /// layers).
  case link
  /// A value loaded from the store: occurrences of entities in memory only link (memory is
  /// newer); the others are created and claimed as loaded. See
  /// `_MapCore.admitLoaded(_:stamp:in:)`.
  case load
}

/// Which of a pass's two walks over a value is under way.
@usableFromInline
enum _Walk: UInt8 {
  /// Each occurrence is resolved to its node and claims it.
  case claim
  /// Each occurrence whose claim won is applied, in the order the claim walk met them.
  case apply
}

/// One write's claim on one node: an occurrence of that entity in the written value.
@usableFromInline
struct _Claim: BitwiseCopyable {
  /// NB: unowned(unsafe), by rules 2 and 3 of `_Lifetime.swift`: a claimed entity is in its
  /// table for the whole pass (a pass drops no node), and the root of a write (a list, an alias
  /// slot) is held by its caller, the alias table or an adoption.
  @usableFromInline unowned(unsafe) let node: _AnyNode
  /// How far from the root the occurrence is: 0 for the root.
  @usableFromInline let depth: Int32
  /// Where the occurrence's value is: an index in the stash of the node's type, or
  /// `_Claim.inPlace`: in the value it occurs in (the root's: the pass's own argument), where the
  /// apply walk reads it again.
  @usableFromInline var payload: Int32
  @usableFromInline var verdict: _Verdict
  /// The stamp the occurrence was written with.
  @usableFromInline var stamp: Stamp?
  /// The range of the links its value holds in the pass's `links`, set when it is expanded.
  @inlinable var links: Range<Int> {
    get { Int(linksStart)..<Int(linksEnd) }
    set {
      linksStart = Int32(newValue.lowerBound)
      linksEnd = Int32(newValue.upperBound)
    }
  }
  // NB: two numbers, not a `Range`, which is not bitwise copyable (see `_Buffer`).
  @usableFromInline var linksStart: Int32 = 0
  @usableFromInline var linksEnd: Int32 = 0
  /// The previous claim on the same node, or -1: the chain of a node's occurrences, for merging.
  @usableFromInline var previous: Int32
  /// The claim whose value holds the occurrence, or -1 for the root's.
  @usableFromInline let parent: Int32
  /// Whether a winning claim its value links to is read in place: the apply walk must go
  /// through its value again. Otherwise the claims it links to are applied by index.
  @usableFromInline var readsInPlace = false

  /// `payload` of an occurrence read again where it occurs.
  @inlinable static var inPlace: Int32 { -1 }

  @inlinable
  init(
    node: _AnyNode, depth: Int32, payload: Int32, verdict: _Verdict, stamp: Stamp?,
    previous: Int32, parent: Int32
  ) {
    self.node = node
    self.depth = depth
    self.payload = payload
    self.verdict = verdict
    self.stamp = stamp
    self.previous = previous
    self.parent = parent
  }
}

/// The write pass of one map: the state of the pass running now, the buffers it keeps between
/// passes for their capacity, and the walks that write a value (see the top of this file).
///
/// The pass reaches the rest of its map (tables, journal, outbox, lifetimes) through `core`. A
/// class, so that the typed operations it calls back (a witness expanding a claim, an accessor
/// walking a value) reach the same pass that called them.
@usableFromInline
final class _Pass {
  /// The map this is the pass of. NB: unowned(unsafe), by rule 1 of `_Lifetime.swift`: the map
  /// owns its pass, which lives as long as the map. Set once, by `_MapCore.init`.
  #if DEBUG
    @usableFromInline unowned(unsafe) var _core: _MapCore?
  #else
    @exclusivity(unchecked) @usableFromInline unowned(unsafe) var _core: _MapCore?
  #endif

  // NB: exclusivity checks are off in release builds only, as for the parts of the core: the
  // map's lock already makes every access exclusive between threads.
  #if DEBUG
    /// Every claim made, in breadth-first order. The root's is the first, unless the root
    /// nests no entity: its claim is then all there is, and stays out of the buffer.
    @usableFromInline var claims = _Buffer<_Claim>()
    /// The links found by the claim walk, each claim's in a range of its own. While the pass
    /// runs, a link's `backIndex` is the claim its occurrence made, or -1.
    @usableFromInline var links = _Buffer<_ChildLink>()
    /// Every node whose pass bits were set, to clear them when the pass ends. NB: unretained,
    /// as `_Claim.node`: the pass ends before its write can free any of them (rule 3).
    @usableFromInline var marked = _Buffer<Unmanaged<_AnyNode>>()
    /// Where the walk under way is.
    @usableFromInline var at = _PassPosition()
    /// What the write is.
    @usableFromInline var request = _PassRequest()
    /// Whether some occurrence does not end up as its node's value: it lost to another one,
    /// its claim was refused or merged, or it only links. Then every aggregate the pass writes
    /// is rebuilt from its children, so that it shows their values; otherwise the values it
    /// was written with already do.
    @usableFromInline var rebuilds = false
    /// The nodes to settle, and the settle's and the cycle search's buffers; see
    /// `_PassBuffers`.
    @usableFromInline var buffers = _PassBuffers()
  #else
    @exclusivity(unchecked) @usableFromInline var claims = _Buffer<_Claim>()
    @exclusivity(unchecked) @usableFromInline var links = _Buffer<_ChildLink>()
    @exclusivity(unchecked) @usableFromInline var marked = _Buffer<Unmanaged<_AnyNode>>()
    @exclusivity(unchecked) @usableFromInline var at = _PassPosition()
    @exclusivity(unchecked) @usableFromInline var request = _PassRequest()
    @exclusivity(unchecked) @usableFromInline var rebuilds = false
    @exclusivity(unchecked) @usableFromInline var buffers = _PassBuffers()
  #endif
  // NB: the three below without exclusivity checks in release builds too: `learned` is read
  // at the end of every pass.
  #if DEBUG
    /// The last cycle number handed out; see `_Pass+Cycles.swift`.
    var lastCycle = 0
    /// The entities whose stored stamp an equal one replaces, as a newer one would: those of
    /// the optimistic layer whose server's answer the write stores (`commit(confirmedBy:)`).
    /// Empty otherwise.
    @usableFromInline var confirming: Set<ObjectIdentifier> = []
    /// What the claim walks of the pass under way learned that the next one must know; see
    /// `claimAll(_:_:schema:stashed:)`. Empty between passes.
    @usableFromInline var learned = _Learned()
  #else
    @exclusivity(unchecked) var lastCycle = 0
    @exclusivity(unchecked) @usableFromInline var confirming: Set<ObjectIdentifier> = []
    @exclusivity(unchecked) @usableFromInline var learned = _Learned()
  #endif
  /// Whether the pass takes none of the shortcuts that make it cheap: it keeps every
  /// occurrence's value aside, rebuilds every aggregate it writes from its children, and settles
  /// every node it writes. The differential tests run one map so, beside one that takes them.
  /// NB: a constant once the map is made, as `_core`: read without exclusivity checks.
  @exclusivity(unchecked) @usableFromInline var isExhaustive = false
  /// Whether the map has a logger, which is told of every entity a write stores, nested ones
  /// included (`IdentityMapEvent.stored`): the pass then expands an aggregate bit for bit its
  /// stored value too, as the exhaustive pass does, so that the events do not depend on the
  /// shortcut (nor on the padding bytes that decide it).
  /// NB: a constant once the map is made, as `_core`: read without exclusivity checks.
  @exclusivity(unchecked) @usableFromInline var isLogging = false

  @usableFromInline init() {}

  /// Notes `child`, just linked again (by a rollback), as a place where a cycle may close; see
  /// `_Pass+Cycles.swift`.
  func noteCycleRoot(_ child: _AnyNode) {
    buffers.cycleRoots.append(child)
  }

  /// Calls `body` with the map, borrowed: calls made on it retain nothing (rule 7 of
  /// `_Lifetime.swift`: the map owns its pass, rule 1).
  @inlinable @inline(__always)
  func withCore<R>(_ body: (_MapCore) throws -> R) rethrows -> R {
    try Unmanaged.passUnretained(_core.unsafelyUnwrapped)._withUnsafeGuaranteedRef(body)
  }

  /// Calls `body` with the map's table of `T`, borrowed; see `_MapCore.withTable(_:_:)`.
  @inlinable @inline(__always)
  func withTable<T: Identifiable & Sendable, R>(_: T.Type, _ body: (_Table<T>) -> R) -> R {
    withCore { $0.withTable(T.self, body) }
  }
}

/// What a pass's claim walks learned that the next walk of the same pass must know; see
/// `_Pass.claimAll(_:_:schema:stashed:)`.
@usableFromInline
struct _Learned {
  /// The walk expands aggregates identical to their stored values too.
  @usableFromInline var expandsIdentical = false
  /// The losing occurrences of each `Mergeable` aggregate that an earlier walk met after
  /// expanding its winner, as claims of that walk, in the order met: the next walk merges
  /// them into the winner before expanding it.
  @usableFromInline var lateLosers: [ObjectIdentifier: [_Claim]] = [:]
  /// How many walks ran again.
  @usableFromInline var walks = 0

  @usableFromInline init() {}
}

/// Where the walk of a pass is.
@usableFromInline
struct _PassPosition {
  @usableFromInline var walk = _Walk.claim
  /// The accessor whose occurrences are being walked.
  @usableFromInline var accessor: Int32 = 0
  /// The depth of the occurrences being claimed.
  @usableFromInline var depth: Int32 = 0
  /// The claim whose value is being walked.
  @usableFromInline var claim = 0
  /// The apply walk's next link.
  @usableFromInline var cursor = 0

  @usableFromInline init() {}
}

/// What the write under way is, beyond its root.
@usableFromInline
struct _PassRequest {
  @usableFromInline var nesting = _Nesting.write
  /// The call's `modifiedAt`, for the nested entities that carry no stamp of their own.
  @usableFromInline var stamp: Stamp?
  /// Claims this close to the root do not merge: an `update`'s own entity (depth 0, or 1 under
  /// an alias) started from the stored value.
  @usableFromInline var mergeFromDepth: Int32 = 0

  @usableFromInline init() {}
}

/// Buffers a pass reuses, each empty between passes: allocating them was a good share of a
/// small aggregate's write. NB: unretained nodes, as `_Claim.node`.
@usableFromInline
struct _PassBuffers {
  /// The nodes the pass wrote that must be settled.
  @usableFromInline var seeds: [Unmanaged<_AnyNode>] = []
  /// The settle's walk (see `_Pass+Settle.swift`).
  var postorder: [Unmanaged<_AnyNode>] = []
  var walk: [(node: Unmanaged<_AnyNode>, nextParent: Int)] = []
  /// Children the pass linked that may close a cycle; see `_Pass+Cycles.swift`.
  @usableFromInline var cycleRoots: [_AnyNode] = []
  /// The nodes the pass created for entities whose tombstones refused the write: removed when
  /// the pass ends, so that their parents lose them as they would any removed entity. NB:
  /// unretained: each is in its table until that removal, and then in the write's graveyard
  /// (rules 2 and 3 of `_Lifetime.swift`).
  @usableFromInline var refused: [Unmanaged<_AnyNode>] = []
  /// The nodes a removal takes out; see `_MapCore.remove(_:)`.
  @usableFromInline var removed: [_AnyNode] = []
  /// The claims the walk under way skipped, as identical to their stored values.
  @usableFromInline var skipped: [Int32] = []
  /// The losing claims of `Mergeable` aggregates that the walk under way met after it had
  /// expanded their winners.
  @usableFromInline var lateLosers: [Int32] = []
  /// The claims whose values hold an occurrence of an entity the store could not read.
  @usableFromInline var unreadableIn: [Int32] = []

  @usableFromInline init() {}

  /// Takes a buffer out of its `slot`, leaving an empty one there, so that a nested use of
  /// the same buffer starts afresh instead of clobbering it.
  @usableFromInline
  static func take<Element>(_ slot: inout [Element]) -> [Element] {
    var buffer: [Element] = []
    swap(&buffer, &slot)
    return buffer
  }

  /// Empties `buffer`, keeping its capacity, and puts it back in its `slot`.
  @usableFromInline
  static func giveBack<Element>(_ buffer: inout [Element], to slot: inout [Element]) {
    buffer.removeAllKeepingCapacity()
    swap(&buffer, &slot)
  }
}

/// The links of one claim, read in place from the pass's `links` buffer.
///
/// NB: a slice of the buffer would retain it, an atomic operation per claim applied; the pass
/// is borrowed for each read, which an unowned reference would retain. It lives only for one
/// relink by that pass, whose map is held by its caller (rules 1 and 6 of `_Lifetime.swift`).
@usableFromInline
struct _PassLinks: RandomAccessCollection {
  @usableFromInline let pass: Unmanaged<_Pass>
  @usableFromInline let range: Range<Int>

  @inlinable
  init(pass: _Pass, range: Range<Int>) {
    self.pass = .passUnretained(pass)
    self.range = range
  }

  @inlinable var startIndex: Int { range.lowerBound }
  @inlinable var endIndex: Int { range.upperBound }
  @inlinable subscript(position: Int) -> _ChildLink {
    pass._withUnsafeGuaranteedRef { $0.links[position] }
  }
}

extension _Pass {
  // MARK: The pass

  /// Writes `payload` into `root` and every entity it nests, as one pass (see the top of this
  /// file). Returns whether the root itself was written.
  ///
  /// - Complexity: O(nested occurrences + parents touched).
  ///
  /// - Parameters:
  ///   - stamp: The root's stamp: its own when it is ``Stamped``, the call's otherwise.
  ///   - call: The call's `modifiedAt`, for the nested entities that carry no stamp.
  ///   - verdict: The root's verdict, when the caller decides it (`show` does); otherwise its
  ///     stamp decides.
  ///   - nesting: What the pass does with the entities the value nests.
  ///   - mergeFromDepth: How deep the first claims that merge are: 0 for `store`, more for an
  ///     `update`, whose own entities started from the stored values.
  ///   - publishing: When the caller found that nothing else of the write can touch the root (a
  ///     lone entity's outermost write; see `publishesDirectly`), the root's change is published
  ///     at once instead of journaled: `.inserted` for a root the write created, `.updated`
  ///     otherwise.
  @inlinable @discardableResult
  func run<V: Sendable>(
    into root: _Node<V>, payload: V, stamp: Stamp?, call: Stamp?, verdict: _Verdict? = nil,
    nesting: _Nesting = .write, mergeFromDepth: Int32 = 0, publishing: _ChangeKind? = nil
  ) -> Bool {
    root.withSchema { schema in
      let verdict = verdict ?? self.verdict(root, payload, schema, stamp: stamp)
      let merges = schema.merging != nil && mergeFromDepth == 0
      if schema.isLeaf {
        // A value holding no nested entity: the pass is its root's claim, kept out of the
        // buffers, and nothing is expanded.
        guard merges && verdict == .accepted && !root.s.bits.contains(.fresh) else {
          applyRoot(root, payload, schema, verdict, stamp: stamp, publishing: publishing)
          if !buffers.refused.isEmpty { removeRefused() }
          return verdict == .accepted
        }
        // NB: a Mergeable entity holding no nested entity has no other occurrence: it merges
        // here, into the stored value; a merged claim keeps a real stamp only, as in
        // `_Node._mergeClaimChain`.
        let merged = schema.merging.unsafelyUnwrapped.merge(payload, into: root.value)
        applyRoot(
          root, merged, schema, verdict, stamp: stamp?.isNaN == true ? nil : stamp,
          publishing: publishing)
        return true
      }
      request.stamp = call
      request.nesting = nesting
      request.mergeFromDepth = mergeFromDepth
      // NB: the root's value stays in hand unless something needs it aside: the occurrences of
      // a `Mergeable` aggregate merge from the stash.
      let stashed = merges || isExhaustive
      let rootPayload =
        stashed
        ? withCore { core in
          root.withStash { core.journal.keep(payload, in: $0) }
        } : _Claim.inPlace
      offer(root, payload: rootPayload, verdict: verdict, stamp: stamp, parent: -1)
      if stashed { rebuilds = true }
      // 1. Claims.
      claimAll(root, payload, schema: schema, stashed: stashed)
      // 2. Apply.
      var alias: (node: _AnyNode, stamp: Stamp?)?
      if stashed {
        if isWinner(0) { applyStashed(claim: 0, alias: &alias) }
      } else {
        let fresh = root.s.bits.contains(.fresh)
        let identical = !fresh && schema.isEquatable && _identical(root.value, payload)
        // NB: a newer copy of the root nested in it took the root's node from the root.
        if isWinner(0) {
          let settles = apply(
            claims[0], to: root, identical: identical, publishing: nil, alias: &alias
          ) {
            if !(fresh && _identical(root.value, payload)) { root.value = payload }
          }
          if settles { buffers.seeds.append(.passUnretained(root)) }
        }
      }
      if claims.count > 1 {
        at.walk = .apply
        if !stashed && !claims[0].links.isEmpty {
          if claims[0].readsInPlace {
            walkNested(in: payload, schema: schema, claim: 0)
          } else {
            applyLinked(by: 0)
          }
        }
        for index in claims.indices.dropFirst(stashed ? 0 : 1)
        where !claims[index].links.isEmpty {
          if claims[index].readsInPlace {
            let node = Unmanaged.passUnretained(claims[index].node)
            node._withUnsafeGuaranteedRef { $0.witness.expand($0, index, self) }
          } else {
            applyLinked(by: index)
          }
        }
      }
      // NB: an alias is logged as set after the entities it names are logged as stored.
      if let alias { withCore { $0.outbox.logStored(alias.node, stamp: alias.stamp) } }
      finish()
      if !buffers.refused.isEmpty { removeRefused() }
      return verdict == .accepted
    }
  }

  /// Applies the claim of a root that nests no entity, whose value is `payload`: the whole of
  /// its pass, with no buffer. Its verdict decides, as for any claim (see
  /// `apply(_:to:identical:publishing:alias:assign:)`). Its parents, if any, are settled.
  @inlinable
  func applyRoot<V: Sendable>(
    _ root: _Node<V>, _ payload: V, _ schema: _Schema<V>, _ verdict: _Verdict, stamp: Stamp?,
    publishing: _ChangeKind?
  ) {
    let fresh = root.s.bits.contains(.fresh)
    // NB: published at once, the change is what a commit would find: `==` to the stored value,
    // it is no change. Whether the value is bit for bit the stored one then matters no more.
    let kind = publishing.map { !fresh && !schema.differ(root.value, payload) ? .unchanged : $0 }
    let identical =
      kind == nil && !fresh && schema.isEquatable && _identical(root.value, payload)
    var alias: (node: _AnyNode, stamp: Stamp?)?
    let claim = _Claim(
      node: root, depth: 0, payload: _Claim.inPlace, verdict: verdict, stamp: stamp, previous: -1,
      parent: -1)
    let settles = apply(claim, to: root, identical: identical, publishing: kind, alias: &alias) {
      if !(fresh && _identical(root.value, payload)) { root.value = payload }
    }
    if settles {
      settle(from: root)
      end()
    } else if !marked.isEmpty {
      end()
    }
  }

  /// Removes the nodes the pass created for entities whose tombstones refused the write (see
  /// `_PassBuffers.refused`), once the pass has ended. Created and removed in one write, they
  /// are no change; their parents drop them, or go with them, as the removal rules say.
  @usableFromInline
  func removeRefused() {
    let refused = buffers.refused.map { $0.takeUnretainedValue() }
    buffers.refused.removeAll(keepingCapacity: true)
    withCore { $0.remove(refused, persisting: false, entombing: false) }
  }

  /// The end of every pass: numbers the cycles its links closed, settles what it wrote, and
  /// clears its state.
  @usableFromInline
  func finish() {
    numberNewCycles()
    // 3. Settle.
    if !buffers.seeds.isEmpty {
      var seeds = _PassBuffers.take(&buffers.seeds)
      settle(from: seeds)
      _PassBuffers.giveBack(&seeds, to: &buffers.seeds)
    }
    end()
  }

  /// Claims the entities nested in the root's value, at depth 1, in the pass's claim walk: the
  /// root's value is in hand, unless it was kept aside (`expandClaims(from:)` then does this).
  @inlinable
  func claimNested<V>(ofRoot root: _Node<V>, _ payload: V, schema: _Schema<V>) {
    // NB: a value identical to the stored one holds identical nested values, which its
    // children already have; without a call stamp to record on them, they need no claim. The
    // root's is the write's only occurrence: no other claim can compete with those it skips.
    if claims[0].verdict == .accepted && request.stamp == nil && root.hasChildren
      && !isExhaustive && !isLogging && schema.isEquatable && !root.s.bits.contains(.fresh)
      && _identical(root.value, payload)
    {
      claims[0].verdict = .identical
      return
    }
    at.depth = 1
    walkNested(in: payload, schema: schema, claim: 0)
  }

  /// The claim walk of a pass whose root's claim is made: every occurrence the root's value
  /// nests, breadth-first (see the top of this file).
  ///
  /// Two shortcuts of the walk can change a winner, so the walk checks, when it took one,
  /// that it did not, and otherwise runs again knowing what it missed (`_Learned`): an
  /// aggregate identical to its stored value is not expanded, and a node it nests that another
  /// occurrence claims would have had a say from the skipped one too (the last at its depth, or
  /// the closest to the root); and a `Mergeable` aggregate merges the occurrences met before
  /// it is expanded, so an occurrence of it met later (deeper) is merged by the next walk,
  /// before the expansion. Each walk learns more, and at most four run: only a merge that keeps
  /// nesting new occurrences of entities it merged could ask for more.
  ///
  /// Then every claim whose value nests an entity the store could not read is refused, up to
  /// the root (`refuseHoldersOfUnreadable()`).
  @inlinable
  func claimAll<V>(_ root: _Node<V>, _ payload: V, schema: _Schema<V>, stashed: Bool) {
    let rootClaim = claims[0]
    while true {
      if stashed {
        expandClaims(from: 0)
      } else {
        claimNested(ofRoot: root, payload, schema: schema)
        if claims.count > 1 { expandClaims(from: 1) }
      }
      guard !buffers.skipped.isEmpty || !buffers.lateLosers.isEmpty, learnFromWalk() else {
        break
      }
      restartClaims(from: rootClaim)
    }
    if !buffers.skipped.isEmpty { buffers.skipped.removeAll(keepingCapacity: true) }
    if !buffers.lateLosers.isEmpty { buffers.lateLosers.removeAll(keepingCapacity: true) }
    if !buffers.unreadableIn.isEmpty { refuseHoldersOfUnreadable() }
  }

  /// Records what the claim walk just made missed: the losing occurrences of `Mergeable`
  /// aggregates met after their winners were expanded, and whether an aggregate it skipped
  /// nests a node another claim wants. Returns whether the walk must run again.
  @usableFromInline
  func learnFromWalk() -> Bool {
    guard learned.walks < 3 else { return false }
    var again = false
    if !buffers.lateLosers.isEmpty {
      var found: [ObjectIdentifier: [_Claim]] = [:]
      for index in buffers.lateLosers {
        found[ObjectIdentifier(claims[Int(index)].node), default: []].append(claims[Int(index)])
      }
      for (node, losers) in found where losers.count > (learned.lateLosers[node]?.count ?? 0) {
        learned.lateLosers[node] = losers
        again = true
      }
    }
    if !buffers.skipped.isEmpty && !learned.expandsIdentical && skippedNestAClaimedNode() {
      learned.expandsIdentical = true
      again = true
    }
    if again { learned.walks += 1 }
    return again
  }

  /// Whether an entity nested, at any depth, in an aggregate the walk skipped as identical has
  /// a winning claim that was not skipped.
  ///
  /// - Complexity: O(claims) when no claimed node has a parent; otherwise O(the nodes the
  ///   skipped aggregates nest), which their expansion would have cost anyway.
  @usableFromInline
  func skippedNestAClaimedNode() -> Bool {
    // NB: a page fetched again, all of it as stored, has no other claim than its root's; and a
    // node nested in a stored aggregate has a parent. Most walks end here.
    guard claims.count > buffers.skipped.count + 1,
      claims.indices.dropFirst().contains(where: {
        claims[$0].verdict != .identical && claims[$0].node.hasParents
      })
    else { return false }
    var reached: [Unmanaged<_AnyNode>] = []
    var stack: [Unmanaged<_AnyNode>] = buffers.skipped.map { .passUnretained(claims[Int($0)].node) }
    var found = false
    // NB: borrowed, unretained: the walk's nodes are linked children, in the map (rule 4 of
    // `_Lifetime.swift`).
    while let next = stack.popLast(), !found {
      next._withUnsafeGuaranteedRef { node in
        for link in node.children where !link.child.s.bits.contains(.visited) {
          let child = link.child
          mark(child, .visited)
          reached.append(.passUnretained(child))
          if child.s.bits.contains(.offered)
            && claims[Int(child.s.claimIndex)].verdict != .identical
          {
            found = true
          }
          stack.append(.passUnretained(child))
        }
      }
    }
    for node in reached {
      node._withUnsafeGuaranteedRef { node -> Void in node.s.bits.remove(.visited) }
    }
    return found
  }

  /// Takes the claims back to the root's, `rootClaim`, for another claim walk.
  @usableFromInline
  func restartClaims(from rootClaim: _Claim) {
    for index in claims.indices {
      claims[index].node.s.bits.remove(.offered)
    }
    claims.removeAll()
    claims.append(rootClaim)
    mark(rootClaim.node, .offered)
    rootClaim.node.s.claimIndex = 0
    links.removeAll()
    at = _PassPosition()
    buffers.skipped.removeAll(keepingCapacity: true)
    buffers.lateLosers.removeAll(keepingCapacity: true)
    buffers.unreadableIn.removeAll(keepingCapacity: true)
  }

  /// Refuses, as `.unreadable`, every claim whose value holds an occurrence of an entity the
  /// store could not read, and every claim holding those, up to the root: a failed read is
  /// not an absent entity, and an aggregate written without it would lose it. A batch list,
  /// which is no entity, keeps its other elements and drops the refused one.
  @usableFromInline
  func refuseHoldersOfUnreadable() {
    for start in buffers.unreadableIn {
      var index = Int(start)
      while index >= 0 && claims[index].verdict != .unreadable
        && !claims[index].node.s.flags.contains(.list)
      {
        claims[index].verdict = .unreadable
        rebuilds = true
        index = Int(claims[index].parent)
      }
    }
    buffers.unreadableIn.removeAll(keepingCapacity: true)
  }

  /// Walks the entities nested in `payload`, the value of claim `index`, accessor by accessor,
  /// in the pass's current walk: the claim walk claims each occurrence and records the links
  /// the claim's value holds; the apply walk applies each occurrence whose claim won.
  @inlinable
  func walkNested<V>(in payload: V, schema: _Schema<V>, claim index: Int) {
    let start = links.count
    let walk = at.walk
    at.claim = index
    if walk == .apply { at.cursor = claims[index].links.lowerBound }
    for accessorIndex in schema.erasedAccessors.indices {
      at.accessor = Int32(accessorIndex)
      // NB: borrowed (rule 7 of `_Lifetime.swift`): the schema keeps its accessors.
      Unmanaged.passUnretained(schema.accessor(Int32(accessorIndex)))._withUnsafeGuaranteedRef {
        $0.forEachChild(payload, self)
      }
    }
    if walk == .claim {
      claims[index].links = start..<links.count
    } else {
      // NB: the apply walk reads the value through the same key paths as the claim walk; a
      // key path that gave other entities the second time (a computed property that is not a
      // plain read) would have each entity written into another's node.
      precondition(
        at.cursor == claims[index].links.upperBound,
        "Concord: a nested entity's key path gave different entities on two reads of one value")
    }
  }

  /// Expands the claims breadth-first, level by level, from claim `start`, whose depth's
  /// claims are all made.
  @usableFromInline
  func expandClaims(from start: Int) {
    var levelStart = start
    at.depth = claims[start].depth
    while levelStart < claims.count {
      let levelEnd = claims.count
      at.depth += 1
      for index in levelStart..<levelEnd where isWinner(index) {
        // NB: borrowed, not retained: a claimed node stays for the whole pass (`_Claim.node`).
        Unmanaged.passUnretained(claims[index].node)._withUnsafeGuaranteedRef { node in
          // NB: a leaf has nothing to merge before expansion, no children and nothing to
          // expand, and asking is a virtual call each: its claim keeps its empty range of links.
          guard !node.s.flags.contains(.leaf) else { return }
          if node.s.flags.contains(.mergeable) { node.witness.mergeClaims(node, index, self, true) }
          // NB: a value identical to the stored one holds identical nested values, which its
          // children already have; without a call stamp to record on them, they need no claim,
          // unless another occurrence in the write claims one of them: the walk then runs
          // again without skipping (see `claimAll`), since the skipped claim could have won.
          if claims[index].verdict == .accepted && request.stamp == nil
            && node.hasChildren && !isExhaustive && !isLogging && !learned.expandsIdentical
            && node.witness.isIdentical(node, index, self)
          {
            claims[index].verdict = .identical
            buffers.skipped.append(Int32(index))
            return
          }
          node.witness.expand(node, index, self)
        }
      }
      levelStart = levelEnd
    }
  }

  // MARK: Claiming

  /// Visits one nested entity of a value the pass walks: claims it in the claim walk, applies
  /// its claim in the apply walk.
  @inlinable
  func visit<C: Identifiable & Sendable>(_ child: C, position: Int) {
    withTable(C.self) { table in
      switch at.walk {
      case .apply: applyOccurrence(child, in: table)
      case .claim where request.nesting == .write:
        claimOccurrence(child, position: position, in: table)
      case .claim: linkOccurrence(child, position: position, in: table)
      }
    }
  }

  /// Visits each entity of a collection, at its offset.
  ///
  /// NB: the table is found, and the walk told apart, once for the collection: a page of
  /// entities is the commonest value a pass walks.
  @inlinable
  func visitAll<S: Sequence>(_ children: S) where S.Element: Identifiable & Sendable {
    withTable(S.Element.self) { table in
      switch at.walk {
      case .apply:
        for child in children { applyOccurrence(child, in: table) }
      case .claim where request.nesting == .write:
        for (offset, child) in children.enumerated() {
          claimOccurrence(child, position: offset, in: table)
        }
      case .claim:
        for (offset, child) in children.enumerated() {
          linkOccurrence(child, position: offset, in: table)
        }
      }
    }
  }

  /// Claims the node of `child`, created if the map has none, for the occurrence at `position`
  /// of the accessor being walked.
  @inlinable
  func claimOccurrence<C: Identifiable & Sendable>(
    _ child: C, position: Int, in table: _Table<C>
  ) {
    table.withNode(for: child) { node, created in
      if created {
        withCore { $0.didCreate(node, held: false, journaled: true) }
        mark(node, .fresh)
      }
      let link = links.count
      links.append(
        _ChildLink(
          child: node, accessor: at.accessor, position: Int32(position), backIndex: -1))
      let schema = table.schema
      let isOffered = node.s.bits.contains(.offered)
      let stamp = schema.stamp(of: child, call: request.stamp)
      let loses = isOffered && !displaces(stamp, claims[Int(node.s.claimIndex)])
      let fresh = created || node.s.bits.contains(.fresh)
      // NB: an entity the store could not read is created by the write, and refused at every
      // occurrence, winning or not: the claim holding it is refused in turn (see
      // `refuseHoldersOfUnreadable`).
      let unreadable = fresh && table.cannotRead(child.id)
      if unreadable { buffers.unreadableIn.append(Int32(at.claim)) }
      // NB: an occurrence that loses is dropped, unless it is to be merged.
      guard !loses || schema.merging != nil else {
        rebuilds = true
        return
      }
      // NB: a node the write created is judged against its entity's tombstone, if it has one:
      // again at each occurrence while the tombstone stands, so that a newer one brings the
      // entity back. Not a losing one: it takes no part in what the node becomes.
      let refused =
        !unreadable && !loses && (created || (fresh && table.hasTombstones))
        && withCore { table.refusesCreated(node, stamp: stamp, $0) }
      var verdict =
        unreadable ? .unreadable : refused ? .stale : verdict(node, child, schema, stamp: stamp)
      // NB: an `update` (the only write whose claims merge from below the root) hands its
      // body the stored value: a nested entity the body left bit for bit as stored is not
      // a write, and the older stamp its value may carry is no stale write to log. A node the
      // write created is no stored value, whatever its value is.
      if verdict == .stale && !fresh && request.mergeFromDepth > 0
        && _identical(node.value, child)
      {
        verdict = .unchanged
      }
      // NB: kept aside only when needed: an aggregate is expanded from its value, a Mergeable
      // entity merged; a plain entity is read again where it occurs.
      let kept = schema.merging != nil || !schema.isLeaf || isExhaustive
      let payload =
        kept
        ? withCore { $0.journal.keep(child, in: table.stash) } : _Claim.inPlace
      if !kept { claims[at.claim].readsInPlace = true }
      if verdict != .accepted || isOffered || (schema.merging != nil && !created) {
        rebuilds = true
      }
      if loses {
        // NB: a `Mergeable` aggregate merges its occurrences before it is expanded: one met
        // after that is merged by another walk (see `claimAll`).
        if !schema.isLeaf && verdict == .accepted && Int(node.s.claimIndex) <= at.claim {
          buffers.lateLosers.append(Int32(claims.count))
        }
        chainLoser(node, payload: payload, verdict: verdict, stamp: stamp)
      } else {
        offer(node, payload: payload, verdict: verdict, stamp: stamp, parent: Int32(at.claim))
      }
      links[link].backIndex = Int32(claims.count - 1)
    }
  }

  /// Visits a nested occurrence of a pass that does not write what its value nests: it links
  /// to the entity as it is (an entity that left the map stays a copy, unlinked); loading, an
  /// entity the map lacks is created and claimed, as loaded.
  @inlinable
  func linkOccurrence<C: Identifiable & Sendable>(
    _ child: C, position: Int, in table: _Table<C>
  ) {
    guard request.nesting == .load else {
      rebuilds = true
      guard let node = table.node(child.id) else { return }
      links.append(
        _ChildLink(
          child: node, accessor: at.accessor, position: Int32(position), backIndex: -1))
      return
    }
    table.withNode(for: child) { node, created in
      links.append(
        _ChildLink(
          child: node, accessor: at.accessor, position: Int32(position), backIndex: -1))
      guard created else {
        rebuilds = true
        return
      }
      withCore { $0.didCreate(node, held: false, journaled: true) }
      mark(node, .fresh)
      let schema = table.schema
      let kept = schema.merging != nil || !schema.isLeaf
      let stamp = schema.stamp(of: child, call: nil)
      if !kept { claims[at.claim].readsInPlace = true }
      offer(
        node,
        payload: kept
          ? withCore { $0.journal.keep(child, in: table.stash) }
          : _Claim.inPlace,
        verdict: .accepted, stamp: stamp, parent: Int32(at.claim))
      links[links.count - 1].backIndex = Int32(claims.count - 1)
    }
  }

  /// Whether an occurrence stamped `stamp`, at the depth being claimed, takes its node from
  /// `winner`, the node's winning claim so far: stamps before positions. A newer stamp wins
  /// and an older one loses; between equal stamps, or when either has none, the shallower
  /// occurrence wins, then the later one. So a boost nesting an edited copy of a status beats
  /// the older original on the same page, and a value's deeper copies of itself (a cycle by
  /// identity) lose unless they are newer, which a finite value cannot keep being.
  @inlinable @inline(__always)
  func displaces(_ stamp: Stamp?, _ winner: _Claim) -> Bool {
    if let stamp, let other = winner.stamp, stamp != other, !stamp.isNaN, !other.isNaN {
      return stamp > other
    }
    return winner.depth >= at.depth
  }

  /// Records a claim on `node`, the winning one for now, of an occurrence in the value of
  /// claim `parent` (-1 for the root).
  @inlinable @inline(__always)
  func offer(_ node: _AnyNode, payload: Int32, verdict: _Verdict, stamp: Stamp?, parent: Int32) {
    let index = Int32(claims.count)
    let previous = node.s.bits.contains(.offered) ? node.s.claimIndex : -1
    claims.append(
      _Claim(
        node: node, depth: at.depth, payload: payload, verdict: verdict, stamp: stamp,
        previous: previous, parent: parent))
    mark(node, .offered)
    node.s.claimIndex = index
  }

  /// Records an occurrence of `node` deeper than its winning claim, to merge it: it joins the
  /// chain of the node's claims without winning.
  @inlinable
  func chainLoser(_ node: _AnyNode, payload: Int32, verdict: _Verdict, stamp: Stamp?) {
    let winner = Int(node.s.claimIndex)
    let index = Int32(claims.count)
    claims.append(
      _Claim(
        node: node, depth: at.depth, payload: payload, verdict: verdict, stamp: stamp,
        previous: claims[winner].previous, parent: Int32(at.claim)))
    claims[winner].previous = index
  }

  /// Whether claim `index` is its node's winning claim.
  @inlinable
  func isWinner(_ index: Int) -> Bool {
    claims[index].node.s.claimIndex == Int32(index)
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
    if schema.acceptsEqualStamps
      || (!confirming.isEmpty && confirming.contains(ObjectIdentifier(node)))
    {
      return .accepted
    }
    let merged = schema.merging?.merge(payload, into: node.value) ?? payload
    return schema.ownFieldsEqual(node.value, merged) ? .unchanged : .stale
  }

  // MARK: Applying

  /// Applies the claim of the occurrence `child` met by the apply walk, if it won.
  @inlinable
  func applyOccurrence<C: Identifiable & Sendable>(_ child: C, in table: _Table<C>) {
    let link = links[at.cursor]
    at.cursor += 1
    precondition(
      link.accessor == at.accessor,
      "Concord: a nested entity's key path gave different entities on two reads of one value")
    let index = Int(link.backIndex)
    guard index >= 0, isWinner(index) else { return }
    // NB: borrowed: the link's node is in its table for the whole pass (`_Claim.node`).
    Unmanaged.passUnretained(link.child)._withUnsafeGuaranteedRef { erased in
      guard claims[index].payload == _Claim.inPlace else {
        return applyStashed(claim: index)
      }
      let node = unsafeDowncast(erased, to: _EntityNode<C>.self)
      precondition(
        node.value.id == child.id,
        "Concord: a nested entity's key path gave different entities on two reads of one value")
      let fresh = node.s.bits.contains(.fresh)
      let identical = !fresh && table.schema.isEquatable && _identical(node.value, child)
      var alias: (node: _AnyNode, stamp: Stamp?)?
      let settles = apply(claims[index], to: node, identical: identical, alias: &alias) {
        // NB: a node the pass created already holds its first occurrence, most often this one:
        // skipping the copy spares a retain and a release per reference in the value.
        if !(fresh && _identical(node.value, child)) { node.value = child }
      }
      if settles { buffers.seeds.append(.passUnretained(node)) }
    }
  }

  /// Applies claim `index`, whose value is in its type's stash.
  @usableFromInline
  func applyStashed(claim index: Int) {
    var alias: (node: _AnyNode, stamp: Stamp?)?
    applyStashed(claim: index, alias: &alias)
  }

  /// Applies the winning claims the value of claim `index` links to, in the order of its links,
  /// as the apply walk would when none of them is read in place (see `_Claim.readsInPlace`).
  @usableFromInline
  func applyLinked(by index: Int) {
    for link in claims[index].links {
      let claim = Int(links[link].backIndex)
      if claim >= 0 && isWinner(claim) { applyStashed(claim: claim) }
    }
  }

  /// Applies claim `index`, whose value is in its type's stash; an alias's log waits in `alias`.
  @usableFromInline
  func applyStashed(claim index: Int, alias: inout (node: _AnyNode, stamp: Stamp?)?) {
    // NB: borrowed, not retained, and the claim read field by field rather than copied: a
    // claimed node stays for the whole pass (`_Claim.node`).
    Unmanaged.passUnretained(claims[index].node)._withUnsafeGuaranteedRef { node in
      if node.s.flags.contains(.mergeable) { node.witness.mergeClaims(node, index, self, false) }
      // NB: a node the pass created is never identical to its claim; asking is a virtual call.
      let identical =
        claims[index].verdict == .accepted && !node.s.bits.contains(.fresh)
        && node.witness.isIdentical(node, index, self)
      let settles = apply(claims[index], to: node, identical: identical, alias: &alias) {
        node.witness.apply(node, index, self)
      }
      if settles { buffers.seeds.append(.passUnretained(node)) }
    }
  }

  /// Applies `claim`, the winning claim on `node`, whose value `assign` writes; `identical`
  /// when the claim's value is bit for bit the node's (it only matters to an accepted claim).
  /// Returns whether the node must be settled (see `needsSettling(_:)`).
  ///
  /// The verdict decides: a stale claim is logged, an unchanged one does nothing, an identical
  /// one records its stamp. An accepted one is recorded in the journal (or, with `publishing`,
  /// published at once: see `run(into:...)`), gets its value and the links it holds, records
  /// its stamp, and is logged (an alias's log waits in `alias`).
  @inlinable @inline(__always)
  func apply(
    _ claim: _Claim, to node: _AnyNode, identical: Bool, publishing: _ChangeKind? = nil,
    alias: inout (node: _AnyNode, stamp: Stamp?)?, assign: () -> Void
  ) -> Bool {
    withCore { core in
      let stamp = claim.stamp
      // NB: only an accepted claim can turn out identical: a refused one stays refused.
      switch claim.verdict == .accepted && identical ? .identical : claim.verdict {
      case .stale:
        core.outbox.logStale(node, incoming: stamp)
        // NB: a node the write created whose claim is refused was refused by a tombstone.
        if node.s.bits.contains(.fresh) { buffers.refused.append(.passUnretained(node)) }
        return false
      case .unreadable:
        // NB: as for a refused one; nothing more is logged: the failed read was.
        if node.s.bits.contains(.fresh) { buffers.refused.append(.passUnretained(node)) }
        return false
      case .unchanged:
        return false
      case .identical:
        if publishing == nil {
          recordJournaled(stamp, on: node)
        } else if let stamp, !stamp.isNaN, stamp != node.s.stamp {
          let stampBefore = node.s.stamp
          node.s.stamp = stamp
          core.publishDirectly(node, .unchanged, stampBefore: stampBefore)
        }
        core.outbox.logStored(node, stamp: stamp)
        return false
      case .accepted:
        break
      }
      let stampBefore = node.s.stamp
      if publishing == nil { core.journal.touch(node, core.audience) }
      assign()
      // NB: a node nothing links to (a batch list, a root aggregate) cannot be on a cycle: its
      // new links close none. A plain entity has no link to change.
      if (!claim.links.isEmpty || node.hasChildren)
        && core.lifetime.relink(node, toClaimLinks: _PassLinks(pass: self, range: claim.links))
        && node.hasParents
      {
        for link in node.children where link.child === node || link.child.hasChildren {
          buffers.cycleRoots.append(link.child)
        }
      }
      record(stamp, on: node)
      if node.s.flags.contains(.alias) {
        alias = (node, stamp)
      } else {
        core.outbox.logStored(node, stamp: stamp)
      }
      if let publishing {
        core.publishDirectly(node, publishing, stampBefore: stampBefore)
        return false
      }
      mark(node, .claimed)
      return needsSettling(node)
    }
  }

  /// Whether `node`, just written, must be settled: an alias (its anchor follows its value), a
  /// node on a cycle, an aggregate whose value must be rebuilt from its children, or a node a
  /// parent the pass did not write shows.
  @inlinable @inline(__always)
  func needsSettling(_ node: _AnyNode) -> Bool {
    if node.s.flags.contains(.alias) || node.cycle != 0 || isExhaustive { return true }
    if rebuilds && node.hasChildren { return true }
    guard let first = node.s.firstParent else { return false }
    if !first.parent.s.bits.contains(.claimed) { return true }
    guard let extras = node.s.extras, !extras.moreParents.isEmpty else { return false }
    // NB: borrowed (rule 7 of `_Lifetime.swift`): the node keeps its extras.
    return Unmanaged.passUnretained(extras)._withUnsafeGuaranteedRef {
      $0.moreParents.contains { !$0.parent.s.bits.contains(.claimed) }
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
    withCore { $0.journal.touch(node, $0.audience) }
    node.s.stamp = stamp
  }

  // MARK: Marks

  /// Sets pass bits on `node`, listing it the first time so that `end()` clears them.
  @inlinable @inline(__always)
  func mark(_ node: _AnyNode, _ bits: _PassBits) {
    if node.s.bits.isEmpty { marked.append(Unmanaged.passUnretained(node)) }
    node.s.bits.formUnion(bits)
  }

  /// Ends a pass: clears every pass bit and empties the buffers.
  @usableFromInline
  func end() {
    for index in marked.indices {
      marked[index]._withUnsafeGuaranteedRef { $0.s.bits = [] }
    }
    marked.removeAll()
    // NB: a pass whose root nests no entity makes no claim and moves no position: it has
    // nothing more to clear.
    if !claims.isEmpty {
      claims.removeAll()
      links.removeAll()
      at = _PassPosition()
      request = _PassRequest()
    }
    rebuilds = isExhaustive
    if learned.walks > 0 { learned = _Learned() }
  }
}
