/// How long a map keeps entities that nobody holds any more.
///
/// By default (``none``) an entity leaves the map as soon as its last holder goes, so
/// `_ = map.store(x)` keeps nothing. With ``keepReleased(_:)`` the map keeps the last released
/// entities findable, as a cache would:
///
/// ```swift
/// let map = IdentityMap(retention: .keepReleased(10_000))
/// _ = map.store(issue)
/// map.find(Issue.self, id: issue.id)    // still there
/// ```
public struct RetentionPolicy: Sendable, Hashable {
  /// How many released entities stay findable.
  let capacity: Int

  /// Released entities leave the map at once. The default.
  public static var none: RetentionPolicy { RetentionPolicy(capacity: 0) }

  /// The last `count` released entities stay findable; the least recently released is evicted
  /// first.
  ///
  /// - An entity in the buffer is still stored: `find` finds it (and the new handle takes it
  ///   out of the buffer), `count` counts it, a write is compared with its stamp and merged
  ///   into it, and it keeps its nested entities alive and current.
  /// - Any new holder (a handle, a subscription, a parent aggregate) takes an entity out of the
  ///   buffer; when its last holder goes, it re-enters as the most recently released.
  /// - An entity leaves the map, and the logger's `released` event fires, when it is evicted.
  ///   An evicted aggregate's nested entities then lose that holder, and enter the buffer in
  ///   their turn if nothing else holds them.
  /// - `remove` and `removeAll` take out of the buffer what they remove.
  ///
  /// A count of zero or less is ``none``, as for ``TombstonePolicy/keepNewest(_:)``. A count
  /// above 2^30 (1,073,741,824) keeps 2^30.
  ///
  /// - Complexity: O(1) amortized per release, find and eviction.
  public static func keepReleased(_ count: Int) -> RetentionPolicy {
    RetentionPolicy(capacity: max(count, 0))
  }
}
