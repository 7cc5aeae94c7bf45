import TestSupport
import Testing

@testable import Concord

@Suite("Aggregates: propagation at every depth")
struct PropagationDepthTests {
  static let renamed = Author(id: 2, name: "Sparrowhawk")

  /// A page holding a shelf owned by Ursula with a book by Ged, and a second shelf without Ged.
  static func makePage(_ map: IdentityMap) -> EntityObserver<FeedPage> {
    map.store(
      FeedPage(
        id: 1,
        shelves: [
          .make(1, owner: .ursula, books: [.make("a", by: .ged)]), .make(2, owner: .ursula),
        ]))
  }

  @Test(arguments: ["store", "update", "another aggregate", "alias", "transaction", "batch"])
  func aNestedEntityUpdatedByAnyRouteReachesEveryDepth(route: String) {
    let map = IdentityMap()
    let page = Self.makePage(map)
    let shelf = map.find(Shelf.self, id: 1)!
    let book = map.find(Book.self, id: "a")!
    switch route {
    case "store": map.store(Self.renamed)
    case "update": map.update(Author.self, id: 2) { $0.name = "Sparrowhawk" }
    case "another aggregate": map.store(Book.make("other", by: Self.renamed))
    case "alias": map.store(Self.renamed, named: AliasKey<Author>("hero"))
    case "transaction": map.transaction { $0.store(Self.renamed) }
    default: map.store([Self.renamed])
    }
    #expect(book.value.author == Self.renamed)
    #expect(shelf.value.books[0].author == Self.renamed)
    #expect(page.value.shelves[0].books[0].author == Self.renamed)
  }

  @Test func eachParentIsNotifiedOncePerWrite() {
    let map = IdentityMap()
    let page = Self.makePage(map)
    let shelf = map.find(Shelf.self, id: 1)!
    let untouched = map.find(Shelf.self, id: 2)!
    let calls = Locked<[String: Int]>([:])
    func count(_ name: String) -> @Sendable (Any) -> Void {
      { _ in calls.withValue { $0[name, default: 0] += 1 } }
    }
    let subscriptions = [
      page.observe(count("page")), shelf.observe(count("shelf")),
      untouched.observe(count("untouched")),
    ]
    map.store(Self.renamed)
    #expect(calls.value == ["page": 1, "shelf": 1])
    withExtendedLifetime(subscriptions) {}
  }

  @Test func aParentHoldingTheChildTwiceIsNotifiedOnceAndShowsItInBothPlaces() {
    let map = IdentityMap()
    let shelf = map.store(
      Shelf.make(1, owner: .ged, books: [.make("a", by: .ged)], pinned: .make("a", by: .ged)))
    let calls = Locked(0)
    let subscription = shelf.observe { _ in calls.increment() }
    map.store(Self.renamed)
    #expect(calls.value == 1)
    #expect(shelf.value.owner == Self.renamed)
    #expect(shelf.value.books[0].author == Self.renamed)
    #expect(shelf.value.pinned?.author == Self.renamed)
    subscription.cancel()
  }

  @Test func anUnchangedEquatableChildDoesNotPropagate() {
    let map = IdentityMap()
    let page = Self.makePage(map)
    let calls = Locked(0)
    let subscription = page.observe { _ in calls.increment() }
    map.store(Author.ged)
    map.store(Book.make("a", by: .ged))
    #expect(calls.value == 0)
    subscription.cancel()
  }

  @Test func aNonEquatableAggregateIsToldOfEveryWriteToItsChild() {
    let map = IdentityMap()
    let draft = map.store(Draft(id: 1, author: .ged))
    let calls = Locked(0)
    let subscription = draft.observe { _ in calls.increment() }
    // Two equal names in two buffers: long strings are not stored inline.
    let long = { Author(id: Self.renamed.id, name: String(repeating: "Sparrowhawk ", count: 3)) }
    map.store(long())
    map.store(long())
    #expect(
      calls.value == 2,
      "each write reaches the draft; without `==` it cannot tell that nothing changed")
    let same = long()
    map.store(same)
    map.store(same)
    #expect(calls.value == 3, "a write of the very same value (same buffers) reaches nobody")
    subscription.cancel()
  }

  @Test func onlyTheParentsTouchedAreVisited() {
    let map = IdentityMap()
    let unrelated = map.store(
      (0..<2_000).map { Book.make("u\($0)", by: Author(id: 100 + $0, name: "\($0)")) })
    let page = Self.makePage(map)
    // Inside a transaction the journal still lists every node the write touched.
    let visited = map.transaction { _ in
      map.store(Self.renamed)
      return map._core.journal.entries.compactMap {
        $0.node.witness.reference($0.node)?.description
      }
    }
    #expect(Set(visited) == ["Author(2)", "Book(a)", "Shelf(1)", "FeedPage(1)"])
    withExtendedLifetime((unrelated, page)) {}
  }

  @Test func aChangeClimbsAThousandLevelsAndTellsTheRootOnce() {
    let map = IdentityMap()
    var chain = Member(id: 0, name: "leaf", friends: [])
    for id in 1..<1_000 { chain = Member(id: id, name: "\(id)", friends: [chain]) }
    let root = map.store(chain)
    let calls = Locked(0)
    let subscription = root.observe { _ in calls.increment() }
    map.update(Member.self, id: 0) { $0.name = "renamed leaf" }
    var deepest = root.value
    while let next = deepest.friends.first { deepest = next }
    #expect(deepest.name == "renamed leaf")
    #expect(calls.value == 1)
    #expect(map.count == 1_000)
    subscription.cancel()
  }
}
