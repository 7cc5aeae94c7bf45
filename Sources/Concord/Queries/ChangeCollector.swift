/// What happens to the entities of one type, collected until you drain it.
///
/// A collector is for code that reacts to changes in batches rather than one by one: a cache
/// that writes what changed to disk every few seconds, a search index, a badge count. Open one
/// with ``IdentityMap/collector(_:)``; from then on, every committed write that inserts,
/// updates or removes an entity of the type is recorded, and ``drain()`` hands over one entry
/// per entity, in the order each first changed since the last drain.
///
/// ```swift
/// let changes = map.collector(Issue.self)
/// let shown = map.store(issue)
/// map.update(Issue.self, id: issue.id) { $0.title = "Renamed" }
/// changes.drain()  // [.inserted(the renamed issue)]
/// ```
///
/// Entries collapse, so a drain says where each entity ended up, not how it got there:
///
/// | Since the last drain | Drained as |
/// |---|---|
/// | inserted, then updated | `.inserted(newest)` |
/// | updated, then updated | `.updated(newest)` |
/// | inserted, then removed | nothing |
/// | updated, then removed | `.removed(last value)` |
/// | removed, then inserted again | `.updated(newest)` |
/// | inserted, released, inserted again | `.inserted(newest)` |
///
/// Releases are not changes: an entity that leaves the map because nothing holds it is not
/// reported, and the collector holds nothing alive. Writes that are `==` to the stored value,
/// and transactions that roll back, are not reported either.
///
/// A collector opened inside an `update` or transaction body collects that whole write when it
/// commits (an entity written there before the collector opened may be reported as updated
/// even if its new value is `==` to the old one).
///
/// Recording happens under the map's lock and ``drain()`` takes the collector's own lock, so a
/// collector loses nothing to concurrent writers, and can be drained from any thread.
public final class ChangeCollector<T: Identifiable & Sendable>: Sendable {
  @usableFromInline let sink: _CollectorSink<T>
  let core: _MapCore

  @usableFromInline
  init(sink: _CollectorSink<T>, core: _MapCore) {
    self.sink = sink
    self.core = core
  }

  deinit {
    cancel()
  }

  /// What changed since the last drain: one entry per entity, in the order each entity first
  /// changed (the changes one write commits come in no promised order among themselves). The
  /// collector forgets them.
  ///
  /// - Complexity: O(*n*) for *n* entries.
  @inlinable
  public func drain() -> [EntityChange<T>] {
    sink.drain()
  }

  /// Stops collecting. What was collected before can still be drained. Calling it again does
  /// nothing; deinitializing the collector cancels it.
  public func cancel() {
    guard sink.cancel() else { return }
    core.detachSoon { [sink] core in
      core.registry.table(for: T.self).consumers?.detach(sink: sink, core)
    }
  }
}

/// Where a collector's changes accumulate. The map records into it under its lock; the sink's
/// own lock, a leaf, guards its state against `drain` on another thread.
@usableFromInline
final class _CollectorSink<T: Identifiable & Sendable>: @unchecked Sendable {
  // NB: @unchecked because every mutable field is only touched while holding `lock`.
  @usableFromInline let lock = Lock()
  // NB: exclusivity checks are off in release builds only, as in `_AnyNode`: the lock already
  // makes every access exclusive, and the dynamic checks cost a tenth of a collected change.
  #if DEBUG
    @usableFromInline var isCancelled = false
    /// The entity of each entry and the serial of its first change; an entry collapsed to
    /// nothing leaves a stale pair here, skipped at drain.
    @usableFromInline var order: [(id: T.ID, serial: Int)] = []
    @usableFromInline var entries: [T.ID: (change: EntityChange<T>, serial: Int)] = [:]
    @usableFromInline var serial = 0
  #else
    @exclusivity(unchecked) @usableFromInline var isCancelled = false
    /// The entity of each entry and the serial of its first change; an entry collapsed to
    /// nothing leaves a stale pair here, skipped at drain.
    @exclusivity(unchecked) @usableFromInline var order: [(id: T.ID, serial: Int)] = []
    @exclusivity(unchecked) @usableFromInline
    var entries: [T.ID: (change: EntityChange<T>, serial: Int)] = [:]
    @exclusivity(unchecked) @usableFromInline var serial = 0
  #endif

  @inlinable
  init() {}

  /// Records `change`, collapsing it into the entity's pending entry. Ignored once cancelled.
  @inlinable
  func collect(_ change: EntityChange<T>) {
    lock.withLock {
      guard !isCancelled else { return }
      let id = change.value.id
      // NB: one lookup for an entity's first change since the last drain, the common case.
      guard let pending = entries.updateValue((change, serial + 1), forKey: id) else {
        serial += 1
        order.append((id, serial))
        return
      }
      if let collapsed = Self.collapse(pending.change, change) {
        entries[id] = (collapsed, pending.serial)
      } else {
        entries[id] = nil
      }
    }
  }

  /// `first` then `then`, as one entry; `nil` when they cancel out.
  @inlinable
  static func collapse(_ first: EntityChange<T>, _ then: EntityChange<T>) -> EntityChange<T>? {
    switch (first, then) {
    case (.inserted, .removed): nil
    case (.inserted, _): .inserted(then.value)
    case (.removed, .inserted), (.removed, .updated): .updated(then.value)
    case (.updated, .inserted): .updated(then.value)
    case (_, .removed): .removed(then.value)
    case (_, .updated), (_, .inserted): then
    }
  }

  @inlinable
  func drain() -> [EntityChange<T>] {
    lock.withLock {
      var drained: [EntityChange<T>] = []
      drained.reserveCapacity(entries.count)
      for (id, serial) in order {
        guard let entry = entries[id], entry.serial == serial else { continue }
        drained.append(entry.change)
      }
      order.removeAll(keepingCapacity: true)
      entries.removeAll(keepingCapacity: true)
      return drained
    }
  }

  /// Stops recording. Returns whether this call did it.
  @usableFromInline
  func cancel() -> Bool {
    lock.withLock {
      defer { isCancelled = true }
      return !isCancelled
    }
  }

}
