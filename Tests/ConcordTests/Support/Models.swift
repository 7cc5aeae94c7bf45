import Concord

// Models shared by the tests, shaped like the ones in API.md.

struct Author: Identifiable, Sendable, Equatable {
  var id: Int
  var name: String
}

struct User: Identifiable, Sendable, Equatable {
  var id: Int
  var name: String
}

/// A plain entity that is not Equatable: every write notifies.
struct Note: Identifiable, Sendable {
  var id: Int
  var text: String
}

struct Book: Aggregate, Equatable {
  var id: String
  var title: String
  var author: Author
  static var nestedEntities: [NestedEntity<Book>] { [.init(\.author)] }
}

enum Media: Sendable, Equatable {
  case book(Book)
  case none

  var book: Book? {
    get { if case .book(let book) = self { book } else { nil } }
    set { self = newValue.map(Media.book) ?? .none }
  }
}

struct Shelf: Aggregate, Equatable {
  var id: Int
  var owner: Author
  var books: [Book]
  var pinned: Book?
  var media: Media
  static var nestedEntities: [NestedEntity<Shelf>] {
    [.init(\.owner), .init(\.books), .init(\.pinned), .init(\.media.book)]
  }
}

extension AliasKey where Value == User {
  static var currentUser: Self { .init("currentUser") }
}

extension AliasKey where Value == [Book] {
  static var featured: Self { .init("featured") }
}

extension AliasKey where Value == [User] {
  static var team: Self { .init("team") }
}

/// An entity whose value only grows: each write commits the next number.
struct Counter: Identifiable, Sendable, Equatable {
  var id: Int
  var value: Int
}
