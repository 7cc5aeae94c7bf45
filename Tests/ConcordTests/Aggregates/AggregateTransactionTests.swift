import TestSupport
import Testing

@testable import Concord

@Suite("Aggregates: transactions")
struct AggregateTransactionTests {
  @Test func eachParentIsToldOncePerTransaction() {
    let map = IdentityMap()
    let shelf = map.store(
      Shelf.make(1, owner: .ursula, books: [.make("a", by: .ged), .make("b", by: .ged)]))
    let received = Locked<[Shelf]>([])
    let subscription = shelf.observe { received.append($0) }
    map.transaction { transaction in
      transaction.update(Author.self, id: 2) { $0.name = "Sparrowhawk" }
      transaction.update(Author.self, id: 1) { $0.name = "Le Guin" }
      transaction.update(Book.self, id: "b") { $0.title = "B!" }
    }
    #expect(received.value.count == 1)
    #expect(received.value.first?.owner.name == "Le Guin")
    #expect(received.value.first?.books.map(\.author.name) == ["Sparrowhawk", "Sparrowhawk"])
    #expect(received.value.first?.books.last?.title == "B!")
    subscription.cancel()
  }

  @Test func aRolledBackTransactionRestoresValuesAndLinks() {
    let map = IdentityMap()
    let shelf = map.store(Shelf.make(1, books: [.make("a", by: .ged)]))
    let before = shelf.value
    try? map.transaction { transaction in
      transaction.store(Shelf.make(1, books: [.make("b", by: .ursula)]))
      transaction.remove(Author.self, id: 2)
      transaction.update(Author.self, id: 1) { $0.name = "Le Guin" }
      throw Rejected()
    }
    #expect(shelf.value == before)
    #expect(map.find(Book.self, id: "b") == nil)
    #expect(map.find(Book.self, id: "a")?.isRemoved == false)
    map.store(Author(id: 2, name: "Sparrowhawk"))
    #expect(shelf.value.books[0].author.name == "Sparrowhawk", "the restored links propagate again")
    #expect(map.count == 4)
  }

  @Test func aRolledBackRemovalCascadeComesBackWhole() {
    let map = IdentityMap()
    let page = map.store(FeedPage(id: 1, shelves: [.make(1, owner: .ged)]))
    let shelf = map.find(Shelf.self, id: 1)!
    try? map.transaction { transaction in
      transaction.remove(Author.self, id: 2)
      #expect(shelf.isRemoved)
      throw Rejected()
    }
    #expect(!shelf.isRemoved)
    #expect(page.value.shelves.map(\.id) == [1])
    map.update(Author.self, id: 2) { $0.name = "Sparrowhawk" }
    #expect(page.value.shelves[0].owner.name == "Sparrowhawk")
  }
}
