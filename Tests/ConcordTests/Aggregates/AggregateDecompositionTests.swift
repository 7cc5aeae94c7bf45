import Testing

@testable import Concord

@Suite("Aggregates: decomposition")
struct AggregateDecompositionTests {
  @Test func storingAnAggregateStoresEachNestedEntity() {
    let map = IdentityMap()
    let pinned = Book.make("p", by: .ged)
    let inMedia = Book.make("m", by: .ged)
    let shelf = map.store(
      Shelf.make(
        1, owner: .ursula, books: [.make("a", by: .ursula), .make("b", by: .ged)], pinned: pinned,
        media: .book(inMedia)))
    #expect(map.find(Author.self, id: 1)?.value == .ursula)
    #expect(map.find(Author.self, id: 2)?.value == .ged)
    #expect(map.find(Book.self, id: "a")?.value.author == .ursula)
    #expect(map.find(Book.self, id: "p")?.value == pinned)
    #expect(map.find(Book.self, id: "m")?.value == inMedia)
    #expect(map.count == 7, "1 shelf, 4 books, 2 authors")
    withExtendedLifetime(shelf) {}
  }

  @Test func nestingIsRecursive() {
    let map = IdentityMap()
    let page = map.store(
      FeedPage(id: 1, shelves: [.make(1, books: [.make("a", by: .ged)]), .make(2)]))
    #expect(map.find(Shelf.self, id: 2) != nil)
    #expect(map.find(Book.self, id: "a")?.value.author == .ged)
    #expect(map.count == 6, "page, 2 shelves, 1 book, 2 authors")
    withExtendedLifetime(page) {}
  }

  @Test func theAggregateValueIsKeptAsStored() {
    let map = IdentityMap()
    let value = Shelf.make(
      1, books: [.make("a", by: .ged), .make("b", by: .ursula)], pinned: .make("a", by: .ged))
    let shelf = map.store(value)
    #expect(shelf.value == value)
  }

  @Test func schemaIsBuiltOncePerTypeAndShared() {
    let first = _Schema<Shelf>.entity
    let second = _Schema<Shelf>.entity
    #expect(first === second)
    #expect(first.accessors.count == 4)
    #expect(_Schema<Author>.entity.isLeaf)
  }

  @Test func anAggregateReachedThroughAPlainGenericIsStillDecomposed() {
    func storeAnything<T: Identifiable & Sendable>(_ value: T, in map: IdentityMap)
      -> EntityObserver<T>
    {
      map.store(value)
    }
    let map = IdentityMap()
    let book = storeAnything(Book.make("a", by: .ged), in: map)
    map.store(Author(id: 2, name: "Sparrowhawk"))
    #expect(book.value.author.name == "Sparrowhawk")
  }

  @Test func batchOfAggregates() {
    let map = IdentityMap()
    let books = map.store([Book.make("a", by: .ged), Book.make("b", by: .ged)])
    map.store(Author(id: 2, name: "Sparrowhawk"))
    #expect(books.value.map(\.author.name) == ["Sparrowhawk", "Sparrowhawk"])
    #expect(map.count == 3)
  }

  @Test func aliasOfAggregates() {
    let map = IdentityMap()
    let featured = map.store([Book.make("a", by: .ged)], named: .featured)
    map.store(Author(id: 2, name: "Sparrowhawk"))
    #expect(featured.value?.first?.author.name == "Sparrowhawk")
    let single = map.store(Shelf.make(1, owner: .ged), named: AliasKey<Shelf>("mine"))
    #expect(single.value?.owner.name == "Ged")
    #expect(
      featured.value?.first?.author.name == "Ged", "the alias's write reached the other alias")
  }

  @Test func updatingAnAggregateDecomposesItAgain() {
    let map = IdentityMap()
    let shelf = map.store(Shelf.make(1, books: [.make("a", by: .ged)]))
    map.update(Shelf.self, id: 1) { shelf in
      shelf.books.append(.make("b", by: Author(id: 3, name: "Tenar")))
      shelf.books[0].author.name = "Sparrowhawk"
    }
    #expect(map.find(Book.self, id: "b")?.value.author.name == "Tenar")
    #expect(map.find(Author.self, id: 2)?.value.name == "Sparrowhawk")
    #expect(shelf.value.books.count == 2)
  }

  @Test func updateOnANestedEntityOfAnAggregateUpdatesIt() {
    let map = IdentityMap()
    let shelf = map.store(Shelf.make(1, books: [.make("a", by: .ged)]))
    map.update(Book.self, id: "a") { $0.title = "A Wizard of Earthsea" }
    #expect(shelf.value.books[0].title == "A Wizard of Earthsea")
  }
}
