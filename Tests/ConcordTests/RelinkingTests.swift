import TestSupport
import Testing

@testable import Concord

@Suite("Aggregates: relinking")
struct RelinkingTests {
  @Test func restoringWithDifferentChildrenUnlinksTheOldOnes() {
    let map = IdentityMap()
    let ged = map.store(Author.ged)
    let book = map.store(Book.make("a", by: .ged))
    map.store(Book.make("a", by: .ursula))
    let calls = Locked(0)
    let subscription = book.observe { _ in calls.increment() }
    map.store(Author(id: 2, name: "Sparrowhawk"))
    #expect(book.value.author == .ursula, "the old author's updates no longer reach the book")
    #expect(calls.value == 0)
    #expect(ged.value.name == "Sparrowhawk")
    subscription.cancel()
  }

  @Test func theParentStopsKeepingOldChildrenAlive() {
    let map = IdentityMap()
    let shelf = map.store(Shelf.make(1, books: [.make("a", by: .ged), .make("b", by: .ged)]))
    #expect(map.count == 5)
    map.store(Shelf.make(1, books: [.make("b", by: .ged)]))
    #expect(map.find(Book.self, id: "a") == nil)
    #expect(map.count == 4)
    map.store(Shelf.make(1, books: []))
    #expect(map.count == 2, "the shelf and its owner")
    #expect(map.find(Author.self, id: 2) == nil)
    withExtendedLifetime(shelf) {}
  }

  @Test func updateThatChangesChildrenRelinks() {
    let map = IdentityMap()
    let shelf = map.store(Shelf.make(1, books: [.make("a", by: .ged)]))
    map.update(Shelf.self, id: 1) { $0.books = [.make("b", by: .ursula)] }
    #expect(map.find(Book.self, id: "a") == nil)
    map.store(Author(id: 1, name: "Le Guin"))
    #expect(shelf.value.books[0].author.name == "Le Guin")
    #expect(shelf.value.owner.name == "Le Guin")
  }

  @Test func reorderingAChildCollectionKeepsEachSlotCorrect() {
    let map = IdentityMap()
    let shelf = map.store(Shelf.make(1, books: [.make("a", by: .ged), .make("b", by: .ursula)]))
    map.store(Shelf.make(1, books: [.make("b", by: .ursula), .make("a", by: .ged)]))
    map.update(Book.self, id: "a") { $0.title = "A!" }
    #expect(shelf.value.books.map(\.title) == ["Book b", "A!"])
  }

  @Test func aChildMovedToAnotherParentFollowsOnlyThatParent() {
    let map = IdentityMap()
    let first = map.store(Shelf.make(1, books: [.make("a", by: .ged)]))
    let second = map.store(Shelf.make(2, books: []))
    map.store(Shelf.make(1, books: []))
    map.store(Shelf.make(2, books: [.make("a", by: .ged)]))
    map.update(Book.self, id: "a") { $0.title = "moved" }
    #expect(first.value.books.isEmpty)
    #expect(second.value.books.map(\.title) == ["moved"])
  }

  @Test func restoringTheSameChildrenChangesNoLinks() {
    let map = IdentityMap()
    let shelf = map.store(Shelf.make(1, books: [.make("a", by: .ged)]))
    let before = shelf._handle.node.s.extras?.children.map { ObjectIdentifier($0.child) }
    map.store(Shelf.make(1, books: [.make("a", by: .ged, title: "retitled")]))
    let after = shelf._handle.node.s.extras?.children.map { ObjectIdentifier($0.child) }
    #expect(before == after)
    #expect(shelf.value.books[0].title == "retitled")
  }
}
