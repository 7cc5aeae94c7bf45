/// A type whose incoming values are merged into the stored value instead of replacing it.
///
/// Real payloads are partial: a list endpoint nests a *simple* user, with fewer fields than the
/// full profile. Conform the type to `Mergeable`, and a stub no longer wipes what the map knows:
///
/// ```swift
/// struct User: Mergeable, Equatable {
///   var id: Int
///   var login: String
///   var name: String?        // only in the full profile
///   var bio: String?         // only in the full profile
///
///   static func merge(_ incoming: User, into stored: User) -> User {
///     incoming.keepingStoredValues(of: stored, whereNil: \.name, \.bio)
///   }
/// }
/// ```
///
/// The map merges on every path that writes a value of the type: `store`, `store([T])`, nested
/// occurrences inside aggregates at any depth, aliases, and transactions. It does not merge in
/// `update`, whose body already starts from the stored value (entities nested in the result of
/// an `update` are merged as by `store`).
///
/// - The stamp check comes first. A value stamped older than the stored one is refused and
///   logged without any merge, whatever it holds. Only a value whose stamp equals the stored
///   one is merged, to be compared: `==` to the stored value, it is a quiet no-op, otherwise it
///   is refused and logged (see ``Stamp``).
/// - The merged value then goes through `Equatable` dedupe like any write.
/// - When one write holds the entity more than once, every occurrence is merged: the losing
///   ones first, the winning one (see "One write, many occurrences" in <doc:Aggregates>) last,
///   so the winner's fields prevail and nothing is wiped, even when the entity is new.
/// - A Mergeable ``Aggregate`` is decomposed from the value every occurrence merged into, its
///   deeper copies included (a status on a timeline page, and the same status in a boost on
///   it): a nested entity that only a losing copy holds is stored and linked too.
///
/// `merge` runs while the map is locked, in the middle of a write: keep it a pure function of
/// its arguments. It may read the map, but not write to it.
public protocol Mergeable: Identifiable, Sendable {
  /// The value to store when `incoming` is written over `stored`.
  static func merge(_ incoming: Self, into stored: Self) -> Self
}

extension Mergeable {
  /// This value, with each listed optional property that is `nil` here taken from `stored`.
  ///
  /// The ready policy for partial payloads, "an incoming `nil` keeps the stored value", in one
  /// line of ``merge(_:into:)``:
  ///
  /// ```swift
  /// static func merge(_ incoming: User, into stored: User) -> User {
  ///   incoming.keepingStoredValues(of: stored, whereNil: \.name, \.bio, \.avatarURL)
  /// }
  /// ```
  ///
  /// Properties not listed take the incoming value, `nil` included: list exactly the fields a
  /// partial payload leaves out.
  public func keepingStoredValues<each Field>(
    of stored: Self, whereNil keyPaths: repeat WritableKeyPath<Self, (each Field)?>
  ) -> Self {
    var merged = self
    for keyPath in repeat each keyPaths {
      if merged[keyPath: keyPath] == nil { merged[keyPath: keyPath] = stored[keyPath: keyPath] }
    }
    return merged
  }
}
