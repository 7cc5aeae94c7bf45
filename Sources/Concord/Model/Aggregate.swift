/// An `Identifiable` value that holds other entities.
///
/// The map decomposes an aggregate through ``nestedEntities``: it stores each nested entity on
/// its own, links the aggregate to it, and rewrites the aggregate whenever that entity changes
/// anywhere, at any depth. Nesting is recursive: a nested entity may itself be an aggregate.
///
/// ```swift
/// struct Book: Aggregate, Equatable {
///   var id: String
///   var title: String
///   var author: Author
///   static var nestedEntities: [NestedEntity<Book>] { [.init(\.author)] }
/// }
///
/// struct Shelf: Aggregate, Equatable {
///   var id: Int
///   var owner: Author           // a single entity
///   var books: [Book]           // a collection of aggregates
///   var pinned: Book?           // an optional entity
///   var media: Media            // an enum, reached through a computed property
///   static var nestedEntities: [NestedEntity<Shelf>] {
///     [.init(\.owner), .init(\.books), .init(\.pinned), .init(\.media.book)]
///   }
/// }
/// ```
///
/// The map reads `nestedEntities` once per type and caches it.
public protocol Aggregate: Identifiable, Sendable where ID: Sendable {
  /// The key paths of the entities this value holds.
  static var nestedEntities: [NestedEntity<Self>] { get }
}

/// A key path from an aggregate to the entities it holds.
///
/// There is an initializer for each shape of property, with `Identifiable` or ``Aggregate``
/// elements alike:
///
/// | property | removal of the nested entity |
/// |---|---|
/// | `T` | removes the aggregate too |
/// | `T?` | sets the property to `nil` |
/// | `[T]` or any `MutableCollection & RangeReplaceableCollection` | drops the element |
/// | `[T]?` or an optional collection | drops the element |
///
/// ## Enum payloads
///
/// Reach an entity inside an enum through a computed optional property with a setter; the map
/// reads it to decompose the aggregate, and writes it to keep the payload current:
///
/// ```swift
/// enum Media: Sendable, Equatable {
///   case book(Book)
///   case none
///
///   var book: Book? {
///     get { if case .book(let book) = self { book } else { nil } }
///     set { self = newValue.map(Media.book) ?? .none }
///   }
/// }
/// // in Shelf: .init(\.media.book)
/// ```
///
/// When the book is removed, the map sets the property to `nil`, so the setter decides what
/// that means for the enum (here, `.none`).
public struct NestedEntity<Root>: Sendable {
  @usableFromInline let _accessor: _Accessor<Root>

  /// A nested entity that the aggregate cannot exist without.
  ///
  /// Removing the entity removes the aggregate too.
  @inlinable
  public init<T: Identifiable & Sendable>(_ keyPath: WritableKeyPath<Root, T> & Sendable) {
    _accessor = .single(keyPath)
  }

  /// An optional nested entity. Removing the entity sets the property to `nil`.
  @inlinable
  public init<T: Identifiable & Sendable>(_ keyPath: WritableKeyPath<Root, T?> & Sendable) {
    _accessor = .optional(keyPath)
  }

  /// An array of nested entities. Removing one drops it from the array.
  @inlinable
  public init<T: Identifiable & Sendable>(_ keyPath: WritableKeyPath<Root, [T]> & Sendable) {
    _accessor = .collection(keyPath)
  }

  /// An optional array of nested entities. Removing one drops it from the array.
  @inlinable
  public init<T: Identifiable & Sendable>(_ keyPath: WritableKeyPath<Root, [T]?> & Sendable) {
    _accessor = .optionalCollection(keyPath)
  }

  /// Any mutable, range-replaceable collection of nested entities, such as `ContiguousArray`
  /// or an `IdentifiedArray`. Removing one drops it from the collection.
  ///
  /// - Complexity: Writing one element back is O(*n*) when the collection is not
  ///   random-access; prefer `Array` for large collections.
  @inlinable
  public init<C: MutableCollection & RangeReplaceableCollection & Sendable>(
    _ keyPath: WritableKeyPath<Root, C> & Sendable
  ) where C.Element: Identifiable & Sendable {
    _accessor = .collection(keyPath)
  }

  /// An optional collection of nested entities. Removing one drops it from the collection.
  @inlinable
  public init<C: MutableCollection & RangeReplaceableCollection & Sendable>(
    _ keyPath: WritableKeyPath<Root, C?> & Sendable
  ) where C.Element: Identifiable & Sendable {
    _accessor = .optionalCollection(keyPath)
  }
}
