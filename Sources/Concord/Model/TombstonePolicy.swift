/// How many removed entities a map remembers, so that a replayed write does not bring them
/// back.
///
/// A stream that replays its events on reconnect sends an `update` after the `delete` that
/// followed it. When a removed entity had a stamp, the map keeps that stamp as a tombstone: a
/// later write of the entity whose stamp is no newer is refused and logged as stale, as a write
/// older than a stored entity would be. A newer stamp brings the entity back, and so does a
/// write with no stamp at all.
///
/// ```swift
/// let map = IdentityMap(tombstones: .keepNewest(50_000))
/// map.store(status)                               // stamped 10
/// map.remove(Status.self, id: status.id)          // a `delete` event
/// map.store(status)                               // replayed: refused, logged as stale
/// ```
///
/// - A tombstone is made by the removal itself: a later write in the same transaction meets
///   it, and a transaction that throws puts the tombstones back as they were.
/// - The newest tombstones are kept; when there are more than the limit, the oldest are
///   forgotten first. An entity stored again loses its tombstone.
/// - ``IdentityMap/removeAll()`` and ``IdentityMap/reset()`` forget every tombstone.
/// - The tombstones of a persisted type are kept by the store, as records with no payload (see
///   ``PersistentRecord/isTombstone``), so they survive restarts.
///
/// A struct with static members rather than an enum, as ``RetentionPolicy`` is, so that a later
/// version can add policies without breaking a `switch`; compare policies with `==`.
public struct TombstonePolicy: Sendable, Hashable {
  /// How many tombstones the policy keeps: 0 for none.
  @usableFromInline let limit: Int

  @usableFromInline
  init(limit: Int) {
    self.limit = limit
  }

  /// Removed entities leave nothing behind: a replayed write brings them back.
  public static var none: TombstonePolicy { TombstonePolicy(limit: 0) }

  /// The newest `count` tombstones are kept; a count of zero or less is ``none``.
  public static func keepNewest(_ count: Int) -> TombstonePolicy {
    TombstonePolicy(limit: max(count, 0))
  }

  /// The default: the newest 10,000 tombstones.
  public static var `default`: TombstonePolicy { .keepNewest(10_000) }
}
