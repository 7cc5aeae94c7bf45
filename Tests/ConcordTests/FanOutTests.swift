import TestSupport
import Testing

@testable import Concord

@Suite("Aggregates: fan-out")
struct FanOutTests {
  @Test func oneAuthorSharedByAThousandBooks() {
    let map = IdentityMap()
    let books = (0..<1_000).map { map.store(Book.make("\($0)", by: .ged)) }
    let calls = Locked(0)
    let subscriptions = books.map { $0.observe { _ in calls.increment() } }
    #expect(map.count == 1_001)
    map.update(Author.self, id: 2) { $0.name = "Sparrowhawk" }
    #expect(books.allSatisfy { $0.value.author.name == "Sparrowhawk" })
    #expect(calls.value == 1_000, "each book is told exactly once")
    withExtendedLifetime(subscriptions) {}
  }

  @Test func oneAuthorSharedByAThousandShelvesThroughTheirBooks() {
    let map = IdentityMap()
    let shelves = map.store(
      (0..<1_000).map { Shelf.make($0, owner: .ursula, books: [.make("b\($0)", by: .ged)]) })
    map.store(Author(id: 2, name: "Sparrowhawk"))
    #expect(shelves.value.allSatisfy { $0.books[0].author.name == "Sparrowhawk" })
  }
}
