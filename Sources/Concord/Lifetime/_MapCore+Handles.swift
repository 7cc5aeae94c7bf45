// Handles: each `store` and `find` takes an external hold for the handle it returns, and the
// handle's deinit gives it back; see `_AnyNode+Holds.swift` for the holds taken and given back
// without the exclusive lock.

extension _MapCore {
  /// A new handle on `node`: one more external hold, given back when the handle is released.
  /// The node is returned unretained: that hold keeps it (rule 6).
  ///
  /// NB: every `store` and `find` makes its own handle, rather than sharing one per node. A
  /// shared handle needs a weak reference from the node (so that a `find` racing with the last
  /// release never revives a dying object), and Swift's weak references cost a 48-byte side
  /// table per node and a slower load. Copies of one `EntityObserver` still share its handle.
  ///
  /// This takes the hold, under the exclusive lock; the caller makes the handle object once the
  /// lock is released (`IdentityMap._observer(_:)`), so that its allocation does not lengthen
  /// the critical section other threads wait on.
  @inlinable
  func holdForHandle<Value>(_ node: _Node<Value>) -> Unmanaged<_Node<Value>> {
    lifetime.hold(node, pinning: self)
    lifetime.handles += 1
    return .passUnretained(node)
  }

  /// A new handle's hold on the entity `id` of `T`, taken under the lock shared with other
  /// readers, if that can be done by only reading.
  ///
  /// It cannot when the calling thread is inside one of this map's frames, nor when nothing
  /// outside the graph holds the entity: held only by parents, or by the release buffer, its
  /// first hold changes what the next write settles (see `_AnyNode+Holds.swift`). The caller
  /// then takes the exclusive path, `holdForHandle(_:)` under `read(_:)`, which stays as it was.
  ///
  /// - Complexity: O(1).
  @inlinable
  func holdForHandleShared<T: Identifiable & Sendable>(_: T.Type, id: T.ID) -> _SharedHold<T> {
    let hold = readShared { () -> _SharedHold<T> in
      // NB: no table yet means no entity: making one is for the first write of `T`.
      guard let table = existingTable(for: T.self) else { return .absent }
      return table._withUnsafeGuaranteedRef { table in
        unsafeDowncast(table, to: _Table<T>.self).withNode(id) { node in
          node.addExternalHoldIfHeld() ? .held(.passUnretained(node)) : .exclusive
        } ?? .absent
      }
    }
    guard let hold else { return .exclusive }
    if case .held = hold { handleStripes.add(1) }
    return hold
  }

  /// Called by a handle's deinit: the handle's hold on `node` is gone.
  ///
  /// Without any lock when another hold remains on an entity or a batch list; otherwise under
  /// the exclusive lock, as a write, which may purge the node.
  @usableFromInline
  func releaseHandle(of node: _AnyNode) {
    // NB: uncounted first, while this handle's hold still pins the node and so the map: once
    // the hold is given back, another thread may give back the last one and free the map.
    handleStripes.add(-1)
    if node.releasesWithoutLock && node.dropExternalHoldIfShared() { return }
    releaseHandleExclusively(of: node)
  }

  /// `releaseHandle(of:)`'s path under the exclusive lock.
  ///
  /// NB: the last hold on the map's last pinned node frees the map at the end of `endWrite()`:
  /// that call is the last thing this method and its callers do.
  @usableFromInline
  func releaseHandleExclusively(of node: _AnyNode) {
    lock.lock()
    if frame.depth > 0 {
      // NB: a deinit inside one of our frames (a handle dropped in a transaction body, or held
      // by a value we just replaced) must not touch the graph mid-write. A hold that was not
      // the last one went without the lock (`releaseHandle(of:)`): that changes no decision a
      // write makes (see `_AnyNode+Holds.swift`), nor what `holders(of:id:)` counts.
      lifetime.deferred.append(.releaseHold(node))
      lock.unlock()
      return
    }
    frame.depth = 1
    lifetime.dropExternalHold(on: node, graveyard: &outbox.graveyard)
    endWrite()
  }

}
