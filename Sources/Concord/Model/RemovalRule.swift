/// What the removal of a nested entity does to the aggregate that holds it.
///
/// By default, the shape of the property decides (see ``NestedEntity``): an aggregate cannot
/// exist without a non-optional entity and goes with it, an optional becomes `nil`, and a
/// collection drops the element. Some aggregates mean nothing without an entity they hold in
/// an optional: a boost of a deleted status is a boost of nothing. Declare such a key path with
/// ``removeParent``, and the removal of the entity removes the aggregate too:
///
/// ```swift
/// struct Status: Aggregate, Stamped {
///   var id: String
///   var account: Account
///   var reblog: Boosted?   // the boosted status
///   static var nestedEntities: [NestedEntity<Status>] {
///     [.init(\.account), .init(\.reblog, onRemoval: .removeParent)]
///   }
/// }
/// ```
///
/// The aggregate is removed in the same write, and is told like any removal: its handles report
/// `isRemoved`, and its own parents follow their rules in turn. A cascade that comes back to an
/// entity already removed stops there, so each entity is removed once, even around a cycle.
///
/// A struct with static members rather than an enum, so that a later version can add rules
/// without breaking a `switch`; compare rules with `==`.
public struct RemovalRule: Sendable, Hashable {
  /// Whether the aggregate goes with the entity, whatever the property's shape.
  @usableFromInline let removesParent: Bool

  @usableFromInline
  init(removesParent: Bool) {
    self.removesParent = removesParent
  }

  /// The rule of the property's shape: an optional becomes `nil`, a collection drops the
  /// element, and a non-optional entity removes the aggregate.
  public static var `default`: RemovalRule { RemovalRule(removesParent: false) }

  /// The aggregate is removed with the entity, whatever the shape of the property.
  public static var removeParent: RemovalRule { RemovalRule(removesParent: true) }
}

extension NestedEntity {
  /// A nested entity the aggregate cannot exist without, whatever `rule` says: removing the
  /// entity removes the aggregate too.
  @inlinable
  public init<T: Identifiable & Sendable>(
    _ keyPath: WritableKeyPath<Root, T> & Sendable, onRemoval rule: RemovalRule
  ) {
    self.init(keyPath)
  }

  /// An optional nested entity. Removing the entity sets the property to `nil`, or with
  /// ``RemovalRule/removeParent`` removes the aggregate.
  @inlinable
  public init<T: Identifiable & Sendable>(
    _ keyPath: WritableKeyPath<Root, T?> & Sendable, onRemoval rule: RemovalRule
  ) {
    self.init(_accessor: .optional(keyPath), rule)
  }

  /// An array of nested entities. Removing one drops it from the array, or with
  /// ``RemovalRule/removeParent`` removes the aggregate.
  @inlinable
  public init<T: Identifiable & Sendable>(
    _ keyPath: WritableKeyPath<Root, [T]> & Sendable, onRemoval rule: RemovalRule
  ) {
    self.init(_accessor: .collection(keyPath), rule)
  }

  /// An optional array of nested entities. Removing one drops it from the array, or with
  /// ``RemovalRule/removeParent`` removes the aggregate.
  @inlinable
  public init<T: Identifiable & Sendable>(
    _ keyPath: WritableKeyPath<Root, [T]?> & Sendable, onRemoval rule: RemovalRule
  ) {
    self.init(_accessor: .optionalCollection(keyPath), rule)
  }

  /// Any mutable, range-replaceable collection of nested entities. Removing one drops it from
  /// the collection, or with ``RemovalRule/removeParent`` removes the aggregate.
  @inlinable
  public init<C: MutableCollection & RangeReplaceableCollection & Sendable>(
    _ keyPath: WritableKeyPath<Root, C> & Sendable, onRemoval rule: RemovalRule
  ) where C.Element: Identifiable & Sendable {
    self.init(_accessor: .collection(keyPath), rule)
  }

  /// An optional collection of nested entities. Removing one drops it from the collection, or
  /// with ``RemovalRule/removeParent`` removes the aggregate.
  @inlinable
  public init<C: MutableCollection & RangeReplaceableCollection & Sendable>(
    _ keyPath: WritableKeyPath<Root, C?> & Sendable, onRemoval rule: RemovalRule
  ) where C.Element: Identifiable & Sendable {
    self.init(_accessor: .optionalCollection(keyPath), rule)
  }

  @inlinable
  init(_accessor accessor: _Accessor<Root>, _ rule: RemovalRule) {
    _accessor = accessor.ruled(by: rule)
  }
}
