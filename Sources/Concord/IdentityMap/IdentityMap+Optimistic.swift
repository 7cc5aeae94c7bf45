import _ConcordAtomics

extension IdentityMap {
  /// Applies the writes of `body` as a layer over the map, shown to everyone at once, and
  /// returns the layer, to commit when the server confirms or roll back when it fails.
  ///
  /// ```swift
  /// let like = map.optimistic { transaction in
  ///   transaction.update(Post.self, id: post.id) { $0.likes += 1 }
  /// }
  /// do {
  ///   try await api.like(post.id)
  ///   like.commit()
  /// } catch {
  ///   like.rollback()  // the post shows what the server last said
  /// }
  /// ```
  ///
  /// Every entity the body changes (directly, or nested in an aggregate it stores) shows the
  /// layer's value while the layer is pending; an entity the body stores as it was keeps
  /// following what happens underneath. Writes that arrive meanwhile from outside the
  /// layers (`store`, `update`, transactions, on any thread) go *underneath*: they are kept,
  /// compared by stamp with the value underneath, merged into it for a ``Mergeable`` type, and
  /// `update` starts from it, but the layer's value stays visible until the layer ends. Layers
  /// stack in the order they were made; an entity shows the newest pending layer's value.
  ///
  /// Aggregates holding a layered entity show its layered value, and after a rollback what is
  /// underneath. Each visible change notifies once, with the visible value, and a change that
  /// reveals a value `==` to the one shown notifies nobody. Live queries and collectors see
  /// visible values only.
  ///
  /// **Removal.** A layer does not hide entities: a `remove` in the body is an ordinary
  /// removal, which rollback does not undo, and the layers below forget the entity. A removal
  /// from outside also wins over every layer, and over the layers of the aggregates that nested
  /// the entity: they keep what they show, without it, as their value underneath. To delete optimistically, write a flag in the
  /// layer (`$0.isDeleted = true`) and leave flagged entities out of your lists with a live
  /// query; remove the entity once the server confirms.
  ///
  /// **Other limits.** An entity that only a layer created is, underneath, what the layer wrote:
  /// outside writes compare with that value until one of them stores the entity. Aliases set in
  /// the body are ordinary writes. Inside a write from outside (an `update` or transaction
  /// body), `find` and handles show the values underneath.
  ///
  /// A pending layer holds the entities it wrote. Dropping the layer while it is pending rolls
  /// it back, so keep it until the server answers: the result is not discardable, and a bare
  /// `map.optimistic { … }`, which would undo itself at once, draws a compiler warning.
  ///
  /// - Parameter body: The layer's writes. If it throws, nothing is applied and no layer is made.
  /// - Returns: The layer.
  /// - Precondition: Not called inside an `update` or transaction body.
  /// - Complexity: While any layer is pending, each write from outside also lowers and raises
  ///   every shadowed entity: O(shadowed entities) more work per write. With none pending,
  ///   writes cost what they did.
  public func optimistic(_ body: (IdentityMap.Transaction) throws -> Void) rethrows
    -> OptimisticLayer
  {
    try _core.write(lowering: false) {
      precondition(
        _core.isOutermost,
        "Concord: optimistic(_:) was called inside an update or transaction body; make layers "
          + "from outside any write")
      return try _core.applyLayer {
        try body(Transaction(map: self, serial: _core.innermostTransaction))
      }
    }
  }
}

/// A pending optimistic change, made by ``IdentityMap/optimistic(_:)``.
///
/// End it with ``commit()`` when the server confirms, or ``rollback()`` when it fails. Both are
/// idempotent, both may be called from any thread and from a callback, and only the first call
/// of either has an effect. Called inside an `update` or transaction body, they take effect when
/// that write ends, even if it throws. A layer dropped while pending is rolled back.
public final class OptimisticLayer: @unchecked Sendable {
  // NB: the handle is the layer's record too (one object a layer, not two). @unchecked
  // because every field but `endedWord` is only touched while holding the map's lock, and
  // `endedWord` only atomically.

  /// 1 once the layer ended, 0 before. NB: the first stored property, read and written only
  /// through its address (`endedAddress`), atomically: it is set under the lock, and read
  /// without it (see `hasEnded`).
  private var endedWord = 0
  /// The layer's place among the layers: a newer layer has a higher serial.
  let serial: Int
  let core: _MapCore
  /// The entities the layer wrote, in the order it first wrote them. NB: see `_AnyShadow` on
  /// exclusivity checks.
  #if DEBUG
    var nodes = _InlineList<_AnyNode>()
  #else
    @exclusivity(unchecked) var nodes = _InlineList<_AnyNode>()
  #endif

  init(serial: Int, core: _MapCore) {
    self.serial = serial
    self.core = core
  }

  deinit {
    // NB: asked here first, so that a handle dropped after its `rollback()` or `commit()` (the
    // usual case) takes no lock and makes no call.
    guard !hasEnded else { return }
    core.end(self, commit: false, dropped: true)
  }

  private var endedAddress: UnsafeMutablePointer<Int> {
    _getUnsafePointerToStoredProperties(self).assumingMemoryBound(to: Int.self)
  }

  /// Whether the layer ended, from any thread, with or without the lock: once it reads `true`
  /// it stays `true`. Without the lock, `false` may be stale; a caller with something to do for
  /// a pending layer asks again under the lock.
  var hasEnded: Bool { _concord_load_acquire_word(endedAddress) != 0 }

  /// Ends the layer, under the lock (`_MapCore.finish`), for good.
  func markEnded() {
    _concord_store_release_word(endedAddress, 1)
  }

  /// A layer that takes over this one's writes, for the end of a handle dropped inside a write,
  /// which the write's end carries out: the handle itself is going. Under the lock.
  func heir() -> OptimisticLayer {
    let heir = OptimisticLayer(serial: serial, core: core)
    swap(&heir.nodes, &nodes)
    markEnded()
    return heir
  }

  /// Makes the layer's values the values underneath, and ends the layer. Each entity keeps the
  /// stamp the layer's write gave it (or, for a write that gave none, the stamp it had then), and
  /// a newer stamp underneath, a server write made since, still wins. A ``Mergeable`` value merges
  /// into the value underneath. Layers made later stay on top. Does nothing after the layer
  /// ended.
  public func commit() {
    core.end(self, commit: true)
  }

  /// Commits the layer and stores `answer`, the server's reply to the request the layer
  /// anticipated, underneath, in one write: subscribers are told once, from the layer's value to
  /// the answer.
  ///
  /// A server often leaves an entity's stamp alone on the changes a layer makes (a status's
  /// `edited_at` does not move when it is favourited), so the answer comes with the stamp the
  /// entity already has, which ``commit()`` followed by `store` would refuse: the layer's guess
  /// would stay. Here, for the entities the layer wrote, an answer whose stamp equals the
  /// stored one applies; an older one is refused as stale, and a newer one applies as always.
  ///
  /// ```swift
  /// let favourite = map.optimistic { $0.update(Status.self, id: id) { $0.favouritesCount += 1 } }
  /// let confirmed = try await api.favourite(id)  // the status, as the server now has it
  /// favourite.commit(confirmedBy: confirmed)
  /// ```
  ///
  /// An entity of `answer` the layer did not write (nested in it, say) is stored as `store`
  /// would. After the layer ended (committed, rolled back or dropped), this stores the answer
  /// as `store` would, and nothing else. Called inside an `update` or transaction body, it
  /// takes effect when that write ends.
  public func commit<T: Identifiable & Sendable>(confirmedBy answer: T) {
    commit(confirmedBy: [answer])
  }

  /// Commits the layer and stores `answers`, the server's reply, in one write, as the version
  /// with one answer does. The answers are stored one after the other, as separate `store`
  /// calls in a transaction would.
  public func commit<T: Identifiable & Sendable>(confirmedBy answers: [T]) {
    core.end(self, commit: true) { core in
      for answer in answers { core.store(answer, stamp: nil, held: false) { _ in } }
    }
  }

  /// Undoes the layer: each entity it wrote shows what is underneath, including writes that
  /// arrived while it was pending, with the layers made later re-applied on top. Entities only
  /// the layer created are removed. Does nothing after the layer ended.
  public func rollback() {
    core.end(self, commit: false)
  }

  /// Whether the layer is neither committed nor rolled back.
  public var isPending: Bool {
    !hasEnded
  }
}
