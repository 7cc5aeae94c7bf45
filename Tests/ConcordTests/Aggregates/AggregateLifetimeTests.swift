import Testing

@testable import Concord

@Suite("Aggregates: lifetime")
struct AggregateLifetimeTests {
  @Test func aLiveParentKeepsItsChildrenAlive() {
    let map = IdentityMap()
    let shelf = map.store(Shelf.make(1, books: [.make("a", by: .ged)]))
    #expect(map.find(Author.self, id: 2) != nil, "nobody else holds the author")
    #expect(map.find(Book.self, id: "a") != nil)
    withExtendedLifetime(shelf) {}
  }

  @Test func releasingTheParentReleasesChildrenNobodyElseHolds() {
    let map = IdentityMap()
    let ged = map.store(Author.ged)
    let before = map.count
    do {
      let page = map.store(
        FeedPage(id: 1, shelves: [.make(1, owner: .ursula, books: [.make("a", by: .ged)])]))
      #expect(map.count == before + 4)
      #expect(page.value.shelves.count == 1)
    }
    #expect(map.count == before, "page, shelf, book and Ursula are gone")
    #expect(map.find(Author.self, id: 1) == nil)
    #expect(!ged.isRemoved)
    #expect(map.find(Author.self, id: 2) != nil, "Ged is held by his own handle")
  }

  @Test func aChildHeldByAnotherParentStays() {
    let map = IdentityMap()
    let second = map.store(Book.make("b", by: .ged))
    do {
      let first = map.store(Book.make("a", by: .ged))
      #expect(first.value.author == .ged)
    }
    #expect(map.find(Book.self, id: "a") == nil)
    #expect(map.find(Author.self, id: 2) != nil)
    map.store(Author(id: 2, name: "Sparrowhawk"))
    #expect(second.value.author.name == "Sparrowhawk")
  }

  @Test func releasingAChildHandleKeepsTheChildWhileItsParentLives() {
    let map = IdentityMap()
    let book = map.store(Book.make("a", by: .ged))
    do {
      let author = map.find(Author.self, id: 2)
      #expect(author != nil)
    }
    #expect(map.count == 2)
    map.store(Author(id: 2, name: "Sparrowhawk"))
    #expect(book.value.author.name == "Sparrowhawk")
  }

  @Test func releasingAMiddleAggregateWhoseParentLivesKeepsIt() {
    let map = IdentityMap()
    let shelf = map.store(Shelf.make(1, books: [.make("a", by: .ged)]))
    do {
      let book = map.find(Book.self, id: "a")
      #expect(book?.value.author == .ged)
    }
    #expect(map.count == 4)
    map.update(Book.self, id: "a") { $0.title = "still here" }
    #expect(shelf.value.books[0].title == "still here")
  }

  @Test func aBatchHandleHoldsItsElementsAndTheirChildren() {
    let map = IdentityMap()
    do {
      let books = map.store([Book.make("a", by: .ged), .make("b", by: .ursula)])
      #expect(map.count == 4)
      #expect(books.value.count == 2)
    }
    #expect(map.count == 0)
  }
}
