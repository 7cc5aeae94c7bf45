/// A type that carries its own modification stamp, such as a server's `updated_at`.
///
/// Real data is stamped per entity: each issue of a page has its own `updated_at`, and so does
/// the user nested in it. A `Stamped` value is compared with the stored one on its own stamp,
/// on every path that writes it (nested, batch, alias, transaction included), so a page of 100
/// issues is stored in one call with each issue's own stamp:
///
/// ```swift
/// struct Issue: Aggregate, Stamped, Equatable {
///   var id: Int
///   var title: String
///   var updatedAt: Date
///   var user: User
///   var stamp: Stamp? { updatedAt.stamp }
///   static var nestedEntities: [NestedEntity<Issue>] { [.init(\.user)] }
/// }
///
/// map.store(page.issues)    // each issue checked and recorded with its own updated_at
/// ```
///
/// The rules:
/// - A value's own `stamp` is the one compared and recorded. The call's `modifiedAt` applies
///   only to values that are not `Stamped`, or whose `stamp` is `nil`.
/// - An entity that is not `Stamped`, nested in one that is, takes the call's `modifiedAt`
///   (often `nil`), never its parent's stamp: a user stub inside an issue is not "as new as the
///   issue".
/// - An alias records the stamp of the value written to it.
/// - `update` compares and records the stamp of the value its body returns. A body that leaves
///   the stamp as it was writes with the call's `modifiedAt` instead, and with none it applies
///   and the stored stamp stays: a local edit is not refused for keeping the server's stamp.
public protocol Stamped {
  /// When this value was last modified; higher is newer. `nil` when unknown.
  var stamp: Stamp? { get }
  /// Whether a value whose stamp equals the stored one applies (the later arrival wins), for
  /// servers whose timestamps have one-second resolution. The default is `false`: an equal
  /// stamp is refused, unless the value (merged first, for a ``Mergeable`` type) is `==` to the
  /// stored one, which is a quiet no-op. An older stamp is refused whatever the value.
  static var acceptsEqualStamps: Bool { get }
}

extension Stamped {
  /// `false`: a value whose stamp equals the stored one is refused.
  public static var acceptsEqualStamps: Bool { false }
}
