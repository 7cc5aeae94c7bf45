import ConcordTesting
import TestSupport
import Testing

@testable import Concord

@Suite("Aggregates: removal cascade")
struct RemovalCascadeTests {
  @Test func removingAChildDropsItFromCollections() {
    let map = IdentityMap()
    let shelf = map.store(
      Shelf.make(1, books: [.make("a", by: .ged), .make("b", by: .ursula), .make("c", by: .ged)]))
    map.remove(Book.self, id: "b")
    #expect(shelf.value.books.map(\.id) == ["a", "c"])
    map.update(Book.self, id: "c") { $0.title = "C!" }
    #expect(
      shelf.value.books.map(\.title) == ["Book a", "C!"], "the remaining slots still line up")
  }

  @Test func removingAChildSetsOptionalReferencesToNil() {
    let map = IdentityMap()
    let shelf = map.store(Shelf.make(1, pinned: .make("p", by: .ged)))
    map.remove(Book.self, id: "p")
    #expect(shelf.value.pinned == nil)
    #expect(!shelf.isRemoved)
  }

  @Test func removingARequiredChildRemovesTheParentRecursively() {
    let map = IdentityMap()
    let page = map.store(
      FeedPage(id: 1, shelves: [.make(1, owner: .ged), .make(2, owner: .ursula)]))
    let doomed = map.find(Shelf.self, id: 1)!
    let book = map.store(Book.make("a", by: .ged))
    map.remove(Author.self, id: 2)
    #expect(doomed.isRemoved, "the shelf cannot exist without its owner")
    #expect(book.isRemoved, "nor the book without its author")
    #expect(
      !page.isRemoved, "the page holds shelves in a collection: it only drops the removed one")
    #expect(page.value.shelves.map(\.id) == [2])
    #expect(map.find(Shelf.self, id: 1) == nil)
  }

  @Test func aRemovedParentReleasesItsOtherChildren() {
    let map = IdentityMap()
    let shelf = map.store(Shelf.make(1, owner: .ged, books: [.make("a", by: .ursula)]))
    map.remove(Author.self, id: 2)
    #expect(shelf.isRemoved)
    #expect(map.count == 0, "the book and Ursula were only held by the removed shelf")
  }

  @Test func streamsOfRemovedAggregatesFinish() async {
    let map = IdentityMap()
    let book = map.store(Book.make("a", by: .ged))
    let stream = book.values
    map.remove(Author.self, id: 2)
    var titles: [String] = []
    for await book in stream { titles.append(book.title) }
    #expect(titles == ["Book a"])
  }

  @Test func theCascadeNotifiesSurvivorsOnce() {
    let map = IdentityMap()
    let shelf = map.store(
      Shelf.make(
        1, books: [.make("a", by: .ged), .make("b", by: .ged)], pinned: .make("a", by: .ged)))
    let received = Locked<[Shelf]>([])
    let subscription = shelf.observe { received.append($0) }
    map.remove(Book.self, id: "a")
    #expect(received.value.count == 1)
    #expect(received.value.first?.books.map(\.id) == ["b"])
    #expect(received.value.first?.pinned == nil)
    subscription.cancel()
  }

  @Test func removalIsLoggedForEachRemovedEntity() {
    let logger = RecordingLogger()
    let map = IdentityMap(logger: logger)
    let shelf = map.store(Shelf.make(1, owner: .ged))
    map.remove(Author.self, id: 2)
    #expect(logger.events.contains(.removed(EntityReference(Author.self, id: 2))))
    #expect(logger.events.contains(.removed(EntityReference(Shelf.self, id: 1))))
    withExtendedLifetime(shelf) {}
  }

  @Test func removingAnAggregateKeepsChildrenHeldElsewhere() {
    let map = IdentityMap()
    let ged = map.store(Author.ged)
    let book = map.store(Book.make("a", by: .ged))
    map.remove(Book.self, id: "a")
    #expect(book.isRemoved)
    #expect(!ged.isRemoved)
    map.store(Author(id: 2, name: "Sparrowhawk"))
    #expect(book.value.author.name == "Ged", "a removed aggregate no longer follows its children")
  }
}
