import _ConcordAtomics

// A node's external hold count is the one part of a node touched without the exclusive lock:
// a `find` takes a hold under the lock shared with other readers, and a handle's deinit gives
// its hold back with no lock at all. Every access is atomic, and three rules keep every
// decision made under the exclusive lock valid:
//
// 1. The count moves between 0 and 1 only under the exclusive lock.
// 2. Without it, a hold is only added to a count of at least 1 (`addExternalHoldIfHeld`).
// 3. Without it, a hold is only given back from a count of at least 2, so that one remains
//    (`dropExternalHoldIfShared`).
//
// So a count the exclusive lock reads as 0 stays 0 (a purge or a settle decision holds), and
// one it reads as positive stays positive (nothing it adopts or keeps goes), whatever other
// threads do meanwhile. The map's keeping itself alive (`_Lifetime.pin(_:)`) is tied to the same
// transitions.

extension _AnyNode {
  /// Where the external hold count lives: the node's first stored property.
  @inlinable
  final var externalHoldsAddress: UnsafeMutablePointer<Int32> {
    _getUnsafePointerToStoredProperties(self).assumingMemoryBound(to: Int32.self)
  }

  /// The external hold count. Under the exclusive lock, whether it is 0 is settled; the exact
  /// number may drop meanwhile (by handles given back on other threads), never to 0.
  @inlinable
  final var externalHolds: Int32 {
    _concord_load_relaxed_i32(externalHoldsAddress)
  }

  /// One more external hold, under the exclusive lock. Returns the count before.
  @inlinable @discardableResult
  final func addExternalHold() -> Int32 {
    let address = externalHoldsAddress
    let count = _concord_load_relaxed_i32(address)
    // NB: at 0 no other thread may change the count (rules 2 and 3): a plain store does, which
    // spares a new entity's store a locked instruction.
    if count == 0 {
      _concord_store_relaxed_i32(address, 1)
      return 0
    }
    return _concord_fetch_add_relaxed_i32(address, 1)
  }

  /// One external hold fewer, under the exclusive lock. Returns the count after.
  ///
  /// NB: acquire, as a reference count's last release: a handle given back on another thread
  /// touched the node (and the map's handle count) before its release order decrement, and
  /// what this thread does next may free both.
  @inlinable @discardableResult
  final func removeExternalHold() -> Int32 {
    let address = externalHoldsAddress
    let count = _concord_load_acquire_i32(address)
    // NB: at 1 no other thread may change the count (rule 3; rule 2 needs a shared lock).
    if count == 1 {
      _concord_store_relaxed_i32(address, 0)
      return 0
    }
    return _concord_fetch_sub_acq_rel_i32(address, 1) - 1
  }

  /// One more external hold, without the exclusive lock, if there is one already (rule 2).
  /// Returns whether it took it.
  @inlinable
  final func addExternalHoldIfHeld() -> Bool {
    let address = externalHoldsAddress
    var count = _concord_load_relaxed_i32(address)
    while count > 0 {
      let found = _concord_compare_exchange_relaxed_i32(address, count, count + 1)
      if found == count { return true }
      count = found
    }
    return false
  }

  /// One external hold fewer, without any lock, if another remains (rule 3). Returns whether
  /// it gave it back. NB: release order: see `removeExternalHold()`.
  @inlinable
  final func dropExternalHoldIfShared() -> Bool {
    let address = externalHoldsAddress
    var count = _concord_load_relaxed_i32(address)
    while count > 1 {
      let found = _concord_compare_exchange_release_i32(address, count, count - 1)
      if found == count { return true }
      count = found
    }
    return false
  }
}

extension _AnyNode {
  // MARK: Memory

  /// Holds the node with a manual retain: handles hold nodes unowned, so a node that no table
  /// holds (a batch list, a removed entity still observed) is kept alive by the map while
  /// anything outside holds it (rule 6). NB: this spares an atomic retain and release of the
  /// node on every `find`.
  @usableFromInline
  final func adopt() {
    guard !s.flags.contains(.adopted) else { return }
    s.flags.insert(.adopted)
    _ = Unmanaged.passUnretained(self).retain()
  }

  /// Gives back the manual retain of `adopt()`, if any. The node itself goes to `graveyard`,
  /// released only after the lock (rule 3).
  @usableFromInline
  final func disown(into graveyard: inout _Graveyard) {
    guard s.flags.contains(.adopted) else { return }
    s.flags.remove(.adopted)
    graveyard.append(self)
    Unmanaged.passUnretained(self).release()
  }
}

extension _AnyNode {
  // MARK: Cache

  /// How many places ahead a loop over scattered nodes asks for a node (see
  /// `cacheAhead(in:from:node:)`): far enough for its line to arrive from memory while the
  /// loop works on the ones before it, near enough that it is still in cache when the loop
  /// comes to it.
  @inlinable static var cacheAheadDistance: Int { 8 }

  /// Asks the processor for the node of the element `cacheAheadDistance` places after `index`
  /// in `elements`, if there is one, so that a loop over nodes in no order of memory (a hash
  /// table's, a sort's) does not wait for each of them in turn. A hint only: it changes
  /// nothing. (`prefetch`, elsewhere in the engine, is the store's reading ahead.)
  ///
  /// NB: the node's address is handed to the processor, never followed here: a node the loop
  /// does not reach is not touched, and a hint at memory freed meanwhile does no harm.
  @inlinable @inline(__always)
  static func cacheAhead<Element, Node: AnyObject>(
    in elements: [Element], from index: Int, node: (Element) -> Unmanaged<Node>
  ) {
    let next = index &+ cacheAheadDistance
    guard next < elements.count else { return }
    _concord_prefetch_for_write(UnsafeRawPointer(node(elements[next]).toOpaque()))
  }
}
