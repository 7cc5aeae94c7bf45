// The README's aggregates example, line for line; `.ci/check-readme` checks that every line of
// it is in this target. `Author` is declared once, in QuickStartTests.swift.

import Concord
import Testing

struct Book: Aggregate, Equatable {
  var id: String
  var title: String
  var author: Author  // a nested entity
  static var nestedEntities: [NestedEntity<Book>] { [.init(\.author)] }
}

enum Media: Sendable, Equatable {
  case book(Book)
  case none

  // Enum payloads are reached through a computed optional property with a setter.
  var book: Book? {
    get { if case .book(let book) = self { book } else { nil } }
    set { self = newValue.map(Media.book) ?? .none }
  }
}

struct Shelf: Aggregate, Equatable {
  var id: Int
  var owner: Author  // required: removing it removes the shelf
  var books: [Book]  // a collection of aggregates
  var pinned: Book?  // optional: removing it sets nil
  var media: Media
  static var nestedEntities: [NestedEntity<Shelf>] {
    [.init(\.owner), .init(\.books), .init(\.pinned), .init(\.media.book)]
  }
}

// The article "Aggregates": a removal rule.
struct Boost: Aggregate, Equatable {
  var id: Int
  var book: Book?  // the boosted book
  static var nestedEntities: [NestedEntity<Boost>] { [.init(\.book, onRemoval: .removeParent)] }
}

@Test func aRemovalRuleRemovesTheBoost() {
  let map = IdentityMap()
  let book = Book(id: "tehanu", title: "Tehanu", author: Author(id: 1, name: "Ursula"))
  let boost = map.store(Boost(id: 1, book: book))
  #expect(map.parents(of: Book.self, id: "tehanu") == [EntityReference(Boost.self, id: 1)])
  map.remove(Book.self, id: "tehanu")
  #expect(boost.isRemoved)
}

@Test func aggregatesExample() {
  let map = IdentityMap()
  let ursula = Author(id: 1, name: "Ursula")
  let shelf = map.store(
    Shelf(
      id: 1, owner: ursula,
      books: [Book(id: "earthsea", title: "A Wizard of Earthsea", author: ursula)],
      pinned: nil, media: .none),
    modifiedAt: 100)
  #expect(map.count == 3)

  // Each nested entity is stored on its own, with the aggregate's stamp.
  let book = map.find(Book.self, id: "earthsea")!

  // An event renames the author: every aggregate holding her is rewritten and told once.
  let subscription = shelf.observe { print("shelf owner:", $0.owner.name) }
  map.update(Author.self, id: 1, modifiedAt: 101) { $0.name = "Ursula K. Le Guin" }
  // book.value.author.name == "Ursula K. Le Guin", and so do shelf.value.owner and books[0].author
  #expect(book.value.author.name == "Ursula K. Le Guin")
  #expect(shelf.value.owner.name == "Ursula K. Le Guin")
  #expect(shelf.value.books[0].author.name == "Ursula K. Le Guin")

  // Removal cascades: collections drop the entity, optionals become nil, and an aggregate that
  // cannot exist without it is removed too.
  map.remove(Book.self, id: "earthsea")  // shelf.value.books == []
  #expect(shelf.value.books == [])
  #expect(book.isRemoved)
  subscription.cancel()
}
