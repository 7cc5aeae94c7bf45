/// Names one remote resource: an answer the map fetches, keeps and refreshes.
///
/// Calls of `IdentityMap.resource(_:policy:staleAfter:keepFor:retry:load:)` with equal keys (the
/// same name and the same `Value` type) share one resource: one cached answer, one fetch in
/// flight, one state. Declare keys where the requests are made, as
/// functions of what the request depends on:
///
/// ```swift
/// extension ResourceKey where Value == [Issue] {
///   static func issues(of repository: String) -> Self { .init("repos/\(repository)/issues") }
/// }
/// ```
///
/// `ResourceKey<User>("me")` and `ResourceKey<[User]>("me")` are two different resources, and
/// ``IdentityMap/invalidateResources(prefix:)`` reaches keys by the start of their name, so
/// names shaped like paths (`repos/apple/swift/issues`) are easy to invalidate together.
public struct ResourceKey<Value: Sendable>: Hashable, Sendable, CustomStringConvertible {
  /// The resource's name.
  public let name: String

  /// The key of the resource named `name`.
  public init(_ name: String) {
    self.name = name
  }

  /// The resource's name.
  public var description: String { name }
}
