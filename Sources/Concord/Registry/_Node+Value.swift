// The operations on a node's value, typed by `Value`: what a node's witness runs (see
// `_Witness.swift`). They are `@inlinable`, so that the witness, made where the type is known,
// runs them specialized.

extension _Node {
  // MARK: Graph

  /// Writes the child linked at `slot` into the value.
  @inlinable
  final func _patch(slot: Int) {
    let link = s.extras.unsafelyUnwrapped.children[slot]
    withSchema { schema in
      // NB: borrowed, not retained (rule 7 of `_Lifetime.swift`): the link's child is in the
      // map (rule 4), and the schema keeps its accessors. A fan-out patches every parent of a
      // child, and each retain and release is an atomic operation.
      let accessor = Unmanaged.passUnretained(schema.accessor(link.accessor))
      let child = Unmanaged.passUnretained(link.child)
      guard link.child !== self else {
        // NB: a value holding its own entity (a member among its friends) reads itself while
        // being written: write into a copy.
        var copy = value
        accessor._withUnsafeGuaranteedRef { $0.write(link.child, Int(link.position), &copy) }
        value = copy
        return
      }
      accessor._withUnsafeGuaranteedRef { accessor in
        child._withUnsafeGuaranteedRef { accessor.write($0, Int(link.position), &value) }
      }
    }
  }

  /// Rebuilds the value from the current values of its children, cutting cycles; see
  /// `_Node+Materialize.swift`.
  @inlinable
  final func _materialize() {
    guard cycle == 0 else {
      value = _materialized()
      return
    }
    withSchema { _rebuildFromChildren(schema: $0) }
  }

  /// Rewrites the value of a node on no cycle with its children's stored values, by its
  /// `schema`: `_materialize()` for the common case.
  @inlinable
  final func _rebuildFromChildren(schema: _Schema<Value>) {
    // NB: when every slot already holds its child's value (a new aggregate, a page stored
    // again unchanged), rebuilding writes nothing, yet copying the value to rebuild it retains
    // and releases every reference it holds.
    guard !_holdsItsChildren(schema: schema) else { return }
    value = _rebuiltFromChildren(schema: schema)
  }

  /// Whether every child slot of the value holds that child's stored value bit for bit.
  @inlinable
  final func _holdsItsChildren(schema: _Schema<Value>) -> Bool {
    guard s.extras != nil else { return true }
    // NB: the extras, each accessor and each child borrowed (rule 7 of `_Lifetime.swift`), as
    // in `_rebuiltFromChildren`.
    return Unmanaged.passUnretained(s.extras.unsafelyUnwrapped)._withUnsafeGuaranteedRef {
      extras in
      for index in extras.children.indices {
        let link = extras.children[index]
        let holds = Unmanaged.passUnretained(schema.accessor(link.accessor))
          ._withUnsafeGuaranteedRef { accessor in
            Unmanaged.passUnretained(link.child)._withUnsafeGuaranteedRef {
              accessor.holds($0, Int(link.position), &value)
            }
          }
        if !holds { return false }
      }
      return true
    }
  }

  /// The value of a node on no cycle, rebuilt from its children's stored values with its
  /// `schema`.
  @inlinable
  final func _rebuiltFromChildren(schema: _Schema<Value>) -> Value {
    var copy = value
    guard s.extras != nil else { return copy }
    // NB: the extras, each accessor and each child borrowed too (rule 7: the node keeps its
    // extras, the schema its accessors, and linked children are in the map, rule 4), the
    // links read by index rather than copied.
    Unmanaged.passUnretained(s.extras.unsafelyUnwrapped)._withUnsafeGuaranteedRef { extras in
      for index in extras.children.indices {
        let link = extras.children[index]
        Unmanaged.passUnretained(schema.accessor(link.accessor))._withUnsafeGuaranteedRef {
          accessor in
          Unmanaged.passUnretained(link.child)._withUnsafeGuaranteedRef {
            accessor.write($0, Int(link.position), &copy)
          }
        }
      }
    }
    return copy
  }

  /// Whether the value cannot exist without the child at `slot`.
  @inlinable
  final func _requiresChild(atSlot slot: Int) -> Bool {
    let link = s.extras.unsafelyUnwrapped.children[slot]
    return withSchema { $0.accessor(link.accessor).requiresChild }
  }

  /// Removes the children at `slots` from the value, and returns the links that remain with
  /// their new positions.
  @inlinable
  final func _dropChildren(atSlots slots: [Int]) -> [_ChildLink] {
    let links = children
    let droppedSlots = Set(slots)
    // The dropped positions of each accessor, applied once per accessor, ascending.
    var dropped: [Int32: [Int]] = [:]
    for slot in droppedSlots {
      dropped[links[slot].accessor, default: []].append(Int(links[slot].position))
    }
    var copy = value
    withSchema { schema in
      for (accessor, positions) in dropped {
        schema.accessor(accessor).remove.unsafelyUnwrapped(positions.sorted(), &copy)
      }
    }
    value = copy
    for key in dropped.keys { dropped[key]!.sort() }
    // The other links keep their order; their positions shift down past the dropped ones.
    return links.indices.compactMap { slot in
      let link = links[slot]
      guard !droppedSlots.contains(slot) else { return nil }
      let shift = dropped[link.accessor]?._countLess(than: Int(link.position)) ?? 0
      return _ChildLink(
        child: link.child, accessor: link.accessor, position: link.position - Int32(shift))
    }
  }

  // MARK: The pass (see `_Pass.swift`)

  /// Walks the nested entities of the payload of claim `index`, in the pass's current walk.
  @inlinable
  final func _expand(claim index: Int, _ pass: _Pass) {
    withSchema { schema in
      // NB: a leaf has nothing to visit; copying its payload out would retain its references.
      guard !schema.erasedAccessors.isEmpty else { return }
      let payload = withStash { $0.values[Int(pass.claims[index].payload)] }
      pass.walkNested(in: payload, schema: schema, claim: index)
    }
  }

  /// Folds the stored value (unless the pass created the node) and every accepted occurrence
  /// of the node into the payload of its winning claim `index`: the losing occurrences first,
  /// in the order the claims walk met them, the winner last. An aggregate merges before it is
  /// expanded, with the occurrences met so far and those an earlier walk of the pass met after
  /// (see `_Pass.claimAll`); an entity without nested entities merges before it is applied,
  /// with all of them. Does nothing unless `Value` is ``Mergeable``.
  @inlinable
  final func _mergeClaims(_ index: Int, _ pass: _Pass, atExpansion: Bool) {
    withSchema { schema in
      guard let merging = schema.merging, schema.isLeaf != atExpansion,
        pass.claims[index].depth >= pass.request.mergeFromDepth
      else { return }
      _mergeClaimChain(index, pass, merging)
    }
  }

  // NB: apart from the check above, so that the check, made for every claim of every type,
  // stays small where it is inlined; inlinable, though never inlined, so that the client's
  // module specializes it for `Value` (unspecialized, it looked up `Value?`'s and the stash's
  // metadata at every merge).
  @inlinable @inline(never)
  final func _mergeClaimChain(
    _ index: Int, _ pass: _Pass, _ merging: any _Merging<Value>
  ) {
    let fresh = s.bits.contains(.fresh)
    var chain: [Int] = []
    var next = Int(pass.claims[index].previous)
    while next >= 0 {
      chain.append(next)
      next = Int(pass.claims[next].previous)
    }
    let late =
      pass.learned.lateLosers.isEmpty ? [] : pass.learned.lateLosers[ObjectIdentifier(self)] ?? []
    guard !(fresh && chain.isEmpty && late.isEmpty) else { return }
    chain.sort()
    let stash = stash.takeUnretainedValue()
    var merged: Value? = fresh ? nil : value
    var stamp: Stamp?
    var applies = false
    func fold(_ claim: _Claim) {
      guard claim.verdict == .accepted else { return }
      let payload = stash.values[Int(claim.payload)]
      merged = merged.map { merging.merge(payload, into: $0) } ?? payload
      applies = true
      if let claimStamp = claim.stamp, !claimStamp.isNaN {
        stamp = max(stamp ?? claimStamp, claimStamp)
      }
    }
    for claimIndex in chain { fold(pass.claims[claimIndex]) }
    for claim in late { fold(claim) }
    fold(pass.claims[index])
    // NB: a node none of whose occurrences applies keeps its winner's verdict.
    guard let merged, applies else { return }
    pass.claims[index].payload = pass.withCore {
      $0.journal.keep(merged, in: stash)
    }
    pass.claims[index].verdict = .accepted
    pass.claims[index].stamp = stamp
  }

  /// Whether the payload of claim `index` is bit for bit the node's value (see `_identical`);
  /// never for a node the pass created, nor for a type that is not `Equatable`, whose
  /// subscribers are told of every write.
  @inlinable
  final func _isIdentical(toClaim index: Int, _ pass: _Pass) -> Bool {
    guard !s.bits.contains(.fresh) && withSchema({ $0.isEquatable }) else { return false }
    return _holdsPayload(Int(pass.claims[index].payload))
  }

  /// Whether the value is bit for bit the one at `payload` in the stash. Compares in place.
  @inlinable
  final func _holdsPayload(_ payload: Int) -> Bool {
    withUnsafePointer(to: &value) { stored in
      withStash {
        $0.values.withUnsafeBufferPointer { payloads in
          _identical(at: stored, payloads.baseAddress! + payload)
        }
      }
    }
  }

  /// Makes the payload of claim `index` the node's value.
  @inlinable
  final func _apply(claim index: Int, _ pass: _Pass) {
    let payload = Int(pass.claims[index].payload)
    // NB: a node the pass created already holds its first occurrence, most often the payload
    // itself: skipping the copy spares a retain and a release per reference in the value.
    if s.bits.contains(.fresh) && _holdsPayload(payload) { return }
    value = withStash { $0.values[payload] }
  }

  // MARK: The journal

  /// Keeps a copy of the value in the write's stash and returns where, for the journal.
  @inlinable
  final func _saveValue(enlistingIn stashes: inout [Unmanaged<_AnyStash>]) -> Int32 {
    withStash { $0.append(value, enlistingIn: &stashes) }
  }

  /// Puts back the value saved at `index`.
  @inlinable
  final func _restoreValue(_ index: Int32) {
    value = withStash { $0.values[Int(index)] }
  }

  /// Whether the value differs from the one saved at `index`: always, unless `Value` is
  /// `Equatable` and the two are `==`.
  @inlinable
  final func _differs(fromSaved index: Int32) -> Bool {
    withSchema { schema in withStash { schema.differ($0.values[Int(index)], value) } }
  }

  // MARK: Deliveries

  /// A snapshot of the value for the subscribers, to deliver after the lock is released.
  @inlinable
  final func _makeDelivery(version: UInt64) -> _Delivery? {
    guard let subscribers = s.extras?.subscribers, !subscribers.isEmpty else { return nil }
    return .value(value, version: version, to: subscribers)
  }

  /// The removal of the node, with its value, for `subscribers`.
  @inlinable
  final func _makeRemovalDelivery(to subscribers: [_AnySubscriber]) -> _Delivery {
    .removal(lastValue: value, to: subscribers)
  }

  /// A snapshot of the value for one subscriber.
  @inlinable
  final func _makeDelivery(to subscriber: _AnySubscriber, version: UInt64) -> _Delivery {
    .value(value, version: version, to: [subscriber])
  }

  // MARK: Checks (see `_MapCore+Invariants.swift`)

  /// Whether the node's `.mergeable` and `.leaf` flags say what its schema says.
  @usableFromInline
  final func _flagsMatchSchema() -> Bool {
    withSchema { schema in
      s.flags.contains(.mergeable) == (schema.merging != nil)
        && (!s.flags.contains(.leaf) || schema.isLeaf)
    }
  }

  /// Whether every child slot holds its child's stored value.
  @usableFromInline
  final func _slotsMatchChildren() -> Bool {
    withSchema { schema in
      guard let equality = schema.equality else { return true }
      if cycle != 0 { return equality.equal(value, _materialized()) }
      var copy = value
      for link in children {
        schema.accessor(link.accessor).write(link.child, Int(link.position), &copy)
      }
      return equality.equal(value, copy)
    }
  }
}
