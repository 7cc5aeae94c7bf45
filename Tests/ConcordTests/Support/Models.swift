import Concord

// Models shared by the tests, shaped like the ones in the documentation (`Concord.docc`).

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

/// A self-referencing aggregate: friends are members too.
struct Member: Aggregate, Equatable {
  var id: Int
  var name: String
  var friends: [Member]
  static var nestedEntities: [NestedEntity<Member>] { [.init(\.friends)] }
}

/// Three levels deep: a feed page holds shelves, which hold books, which hold an author.
struct FeedPage: Aggregate, Equatable {
  var id: Int
  var shelves: [Shelf]
  static var nestedEntities: [NestedEntity<FeedPage>] { [.init(\.shelves)] }
}

/// An author that nests its books: with `Book.author`, a cycle by identity.
struct Writer: Aggregate, Equatable {
  var id: Int
  var name: String
  var works: [Work]
  static var nestedEntities: [NestedEntity<Writer>] { [.init(\.works)] }
}

struct Work: Aggregate, Equatable {
  var id: Int
  var title: String
  var writer: Writer?
  static var nestedEntities: [NestedEntity<Work>] { [.init(\.writer)] }
}

/// Optional and non-array collections.
struct Library: Aggregate, Equatable {
  var id: Int
  var archive: [Author]?
  var staff: ContiguousArray<User>
  var guests: ContiguousArray<User>?
  static var nestedEntities: [NestedEntity<Library>] {
    [.init(\.archive), .init(\.staff), .init(\.guests)]
  }
}

/// A Book that is not Equatable, to see every write.
struct Draft: Aggregate {
  var id: Int
  var author: Author
  static var nestedEntities: [NestedEntity<Draft>] { [.init(\.author)] }
}

extension Author {
  static let ursula = Author(id: 1, name: "Ursula")
  static let ged = Author(id: 2, name: "Ged")
}

extension Book {
  static func make(_ id: String, by author: Author, title: String? = nil) -> Book {
    Book(id: id, title: title ?? "Book \(id)", author: author)
  }
}

extension Shelf {
  static func make(
    _ id: Int, owner: Author = .ursula, books: [Book] = [], pinned: Book? = nil,
    media: Media = .none
  ) -> Shelf {
    Shelf(id: id, owner: owner, books: books, pinned: pinned, media: media)
  }
}
