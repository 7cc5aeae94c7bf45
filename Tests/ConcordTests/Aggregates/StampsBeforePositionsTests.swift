import ConcordTesting
import Testing

@testable import Concord

// Within one write, the occurrence of an entity with the newest own stamp wins; among equal or
// missing stamps, the one closest to the root, then the last. The engine's model-based test
// (`ModelBasedTests`) checks the rule on random aggregates with stamped revisions; these are the
// shapes a Mastodon timeline gives it.

@Suite("Stamps before positions")
struct StampsBeforePositionsTests {
  typealias Status = MastodonStatus

  @Test func aBoostNestingANewerCopyBeatsTheOlderOriginalOnTheSamePage() {
    let map = IdentityMap()
    // The original, then a boost made after the status was edited.
    let page = map.store([
      Status.post("9", "original", at: 10),
      Status.boost("b1", of: Status.post("9", "edited", at: 10, edited: 30), at: 31),
    ])
    #expect(map.find(Status.self, id: "9")?.value.content == "edited")
    // Every occurrence shows the winner.
    #expect(page.value[0].content == "edited")
    #expect(page.value[1].reblog?.content == "edited")
  }

  @Test func anOlderNestedCopyLosesToTheRootWhereverItIs() {
    let map = IdentityMap()
    let boost = Status.boost("b1", of: Status.post("9", "old", at: 10), at: 11)
    let page = map.store([boost, Status.post("9", "edited", at: 10, edited: 20)])
    #expect(page.value[0].reblog?.content == "edited")
    #expect(map.find(Status.self, id: "9")?.value.content == "edited")
  }

  @Test func equalStampsKeepTheClosestToTheRootThenTheLast() {
    let map = IdentityMap()
    let nested = Status.boost("b1", of: Status.post("9", "nested", at: 10), at: 11)
    let page = map.store([
      Status.post("9", "first", at: 10), nested, Status.post("9", "last", at: 10),
    ])
    #expect(map.find(Status.self, id: "9")?.value.content == "last")
    #expect(page.value[1].reblog?.content == "last")
  }

  @Test func anOccurrenceBitForBitAsStoredTakesPartInTheClaims() {
    let map = IdentityMap()
    let stored = map.store(Book(id: "b2", title: "T2", author: Author(id: 1, name: "stored")))
    // Two books at depth 1, each nesting author 1 at depth 2: the second is bit for bit what is
    // stored, and it comes last, so its copy of the author wins.
    let page = map.store([
      Book(id: "b1", title: "T1", author: Author(id: 1, name: "earlier")),
      Book(id: "b2", title: "T2", author: Author(id: 1, name: "stored")),
    ])
    #expect(map.find(Author.self, id: 1)?.value.name == "stored")
    #expect(page.value.map(\.author.name) == ["stored", "stored"])
    // The same copy closer to the root wins over a deeper one that comes after it.
    let shelf = Shelf(
      id: 1, owner: Author(id: 2, name: "owner"), books: [], pinned: nil, media: .none)
    let shelves = map.store([shelf])
    let second = map.store([
      shelf,
      Shelf(
        id: 2, owner: Author(id: 3, name: "other"),
        books: [Book(id: "b3", title: "T3", author: Author(id: 2, name: "deeper"))], pinned: nil,
        media: .none),
    ])
    #expect(map.find(Author.self, id: 2)?.value.name == "owner")
    #expect(second.value[1].books[0].author.name == "owner")
    withExtendedLifetime((stored, shelves)) {}
    map._core._checkInvariants()
  }

  @Test func aNewerNestedCopyOfTheRootTakesTheRoot() {
    let logger = RecordingLogger()
    let map = IdentityMap(logger: logger)
    // A status that boosts a newer copy of itself: contrived, but a value may carry anything.
    var status = Status.post("9", "root", at: 10)
    status.reblog = Status.post("9", "newer", at: 10, edited: 12)
    let handle = map.store(status)
    #expect(handle.value.content == "newer")
    #expect(logger.staleWrites.isEmpty, "losing to a newer occurrence is no stale write")
    map._core._checkInvariants()
  }

  @Test func anUnstampedOccurrenceDoesNotBeatAStampedOneByPositionAlone() {
    let map = IdentityMap()
    let status = map.store(Status.post("9", "stored", at: 10), modifiedAt: nil)
    // A nested occurrence of an entity that is not Stamped takes the call's stamp, as every
    // other occurrence does: position decides, the closest to the root.
    let book = map.store(
      Shelf(
        id: 1, owner: Author(id: 1, name: "root"),
        books: [Book(id: "b", title: "T", author: Author(id: 1, name: "nested"))], pinned: nil,
        media: .none), modifiedAt: 5)
    #expect(map.find(Author.self, id: 1)?.value.name == "root")
    #expect(book.value.books[0].author.name == "root")
    #expect(status.value.content == "stored")
  }
}
