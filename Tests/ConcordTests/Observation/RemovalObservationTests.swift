import TestSupport
import Testing

@testable import Concord

@Suite("observeRemoval: a screen learns its entity was deleted")
struct RemovalObservationTests {
  @Test func removeCallsOnceWithTheLastValue() {
    let map = IdentityMap()
    let author = map.store(Author(id: 1, name: "A"))
    map.update(Author.self, id: 1) { $0.name = "last" }
    let removed = Locked<[String]>([])
    let subscription = author.observeRemoval { removed.append($0.name) }
    map.remove(Author.self, id: 1)
    map.remove(Author.self, id: 1)
    #expect(removed.value == ["last"])
    subscription.cancel()
  }

  @Test func aRemovalCascadeAndRemoveAllCallIt() {
    let map = IdentityMap()
    let book = map.store(Book.make("a", by: .ged))
    let shelf = map.store(Shelf.make(1, owner: .ursula))
    let removed = Locked<[String]>([])
    let subscriptions = [
      book.observeRemoval { removed.append("book \($0.id)") },
      shelf.observeRemoval { removed.append("shelf \($0.id)") },
    ]
    map.remove(Author.self, id: 2)
    #expect(removed.value == ["book a"], "a book cannot exist without its author")
    map.removeAll()
    #expect(removed.value == ["book a", "shelf 1"])
    withExtendedLifetime(subscriptions) {}
  }

  @Test func aReleaseIsNotARemoval() {
    let map = IdentityMap()
    let removed = Locked(0)
    do {
      let author = map.store(Author(id: 1, name: "A"))
      let subscription = author.observeRemoval { _ in removed.increment() }
      subscription.cancel()
    }
    #expect(map.count == 0)
    #expect(removed.value == 0)
  }

  @Test func itHoldsTheEntityLikeAnySubscription() {
    let map = IdentityMap()
    let subscription = map.store(Author(id: 1, name: "A")).observeRemoval { _ in }
    #expect(map.find(Author.self, id: 1) != nil)
    subscription.cancel()
    #expect(map.find(Author.self, id: 1) == nil)
  }

  @Test func anAlreadyRemovedEntityCallsAtOnce() {
    let map = IdentityMap()
    let author = map.store(Author(id: 1, name: "A"))
    map.remove(Author.self, id: 1)
    let removed = Locked<[String]>([])
    let subscription = author.observeRemoval { removed.append($0.name) }
    #expect(removed.value == ["A"])
    subscription.cancel()
  }

  @Test func aRolledBackRemovalCallsNothing() {
    let map = IdentityMap()
    let author = map.store(Author(id: 1, name: "A"))
    let removed = Locked(0)
    let subscription = author.observeRemoval { _ in removed.increment() }
    try? map.transaction { transaction in
      transaction.remove(Author.self, id: 1)
      throw Rejected()
    }
    #expect(removed.value == 0)
    #expect(!author.isRemoved)
    subscription.cancel()
  }

  @Test func changesBeforeTheRemovalAreNotDeliveredToIt() {
    let map = IdentityMap()
    let author = map.store(Author(id: 1, name: "A"))
    let events = Locked<[String]>([])
    let subscriptions = [
      author.observe { events.append("changed to \($0.name)") },
      author.observeRemoval { events.append("removed as \($0.name)") },
    ]
    map.update(Author.self, id: 1) { $0.name = "B" }
    map.remove(Author.self, id: 1)
    #expect(events.value == ["changed to B", "removed as B"])
    withExtendedLifetime(subscriptions) {}
  }

  @Test func theStreamOfARemovedEntityFinishesAfterItsLastValue() async {
    let map = IdentityMap()
    let author = map.store(Author(id: 1, name: "A"))
    let stream = author.values
    map.update(Author.self, id: 1) { $0.name = "B" }
    map.remove(Author.self, id: 1)
    var names: [String] = []
    for await value in stream { names.append(value.name) }
    #expect(names.last == "B")
  }
}
