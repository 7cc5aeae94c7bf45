/// The name of a long-lived slot in an ``IdentityMap``, such as the current user.
///
/// An alias holds its entity (or entities) alive until it is removed or replaced, even when
/// nobody observes it. Declare keys as static members so call sites read well:
///
/// ```swift
/// extension AliasKey where Value == User {
///   static var currentUser: Self { .init("currentUser") }
/// }
/// extension AliasKey where Value == [Book] {
///   static var featured: Self { .init("featured") }
/// }
///
/// map.store(me, named: .currentUser)
/// let user = map.find(named: .currentUser)   // EntityObserver<User?>
/// ```
///
/// Two keys are the same alias when they have the same name *and* the same `Value` type, so
/// `AliasKey<User>("me")` and `AliasKey<[User]>("me")` never collide.
public struct AliasKey<Value>: Hashable, Sendable, CustomStringConvertible {
  /// The alias name.
  public let name: String

  /// Creates a key for the alias called `name`.
  public init(_ name: String) {
    self.name = name
  }

  /// The alias name.
  public var description: String { name }

  @inlinable
  var _id: _AliasID { _AliasID(valueType: ObjectIdentifier(Value.self), name: name) }
}

/// The identity of an alias slot: its value type and its name.
@usableFromInline
struct _AliasID: Hashable {
  @usableFromInline let valueType: ObjectIdentifier
  @usableFromInline let name: String

  @inlinable
  init(valueType: ObjectIdentifier, name: String) {
    self.valueType = valueType
    self.name = name
  }
}
