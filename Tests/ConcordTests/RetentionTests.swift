import ConcordTesting
import Testing

@testable import Concord

@Suite("Retention: released entities can stay cached")
struct RetentionTests {
  @Test func noneReleasesAtOnce() {
    let map = IdentityMap(retention: .none)
    _ = map.store(Author(id: 1, name: "A"))
    #expect(map.count == 0)
    #expect(map.find(Author.self, id: 1) == nil)
  }

  @Test func aStoreWhoseHandleIsDroppedStaysFindable() {
    let map = IdentityMap(retention: .keepReleased(10))
    _ = map.store(Author(id: 1, name: "A"))
    #expect(map.count == 1, "count counts buffered entities")
    #expect(map.find(Author.self, id: 1)?.value.name == "A")
  }

  @Test func theLeastRecentlyReleasedIsEvictedFirst() {
    let logger = RecordingLogger()
    let map = IdentityMap(logger: logger, retention: .keepReleased(3))
    for id in 1...3 { _ = map.store(Author(id: id, name: "\(id)")) }
    // Author 1 is found and released again: it becomes the most recently released.
    _ = map.find(Author.self, id: 1)
    logger.clear()
    _ = map.store(Author(id: 4, name: "4"))
    #expect(map.count == 3)
    #expect(map.find(Author.self, id: 2) == nil, "2 was the least recently released")
    #expect(
      logger.events == [
        .stored(EntityReference(Author.self, id: 4), modifiedAt: nil),
        .released(EntityReference(Author.self, id: 2)),
      ])
    _ = map.store(Author(id: 5, name: "5"))
    #expect(map.find(Author.self, id: 3) == nil)
    #expect(map.find(Author.self, id: 1) != nil)
  }

  @Test func aHeldEntityIsNotInTheBuffer() {
    let map = IdentityMap(retention: .keepReleased(1))
    let held = map.store(Author(id: 1, name: "held"))
    _ = map.store(Author(id: 2, name: "2"))
    _ = map.store(Author(id: 3, name: "3"))
    #expect(map.count == 2, "the held one and the last released one")
    #expect(held.value.name == "held")
    #expect(map.find(Author.self, id: 2) == nil)
  }

  @Test func aBufferedEntityKeepsItsStampAndMergesWrites() {
    let map = IdentityMap(retention: .keepReleased(10))
    _ = map.store(Member2.full(1), modifiedAt: 10)
    _ = map.store(Member2(id: 1, login: "stale", name: "Stale", bio: nil), modifiedAt: 5)
    #expect(map.find(Member2.self, id: 1)?.value == .full(1))
    _ = map.store(Member2.stub(1), modifiedAt: 11)
    #expect(map.find(Member2.self, id: 1)?.value.name == "Ged", "merged into the buffered value")
  }

  @Test func aBufferedAggregateKeepsItsChildrenAliveAndCurrent() {
    let map = IdentityMap(retention: .keepReleased(1))
    _ = map.store(Book.make("a", by: .ged))
    #expect(map.count == 2, "the book is buffered, its author held by it")
    map.update(Author.self, id: 2) { $0.name = "Sparrowhawk" }
    #expect(map.find(Book.self, id: "a")?.value.author.name == "Sparrowhawk")
  }

  @Test func anEvictedAggregatesChildrenEnterTheBufferInTheirTurn() {
    let map = IdentityMap(retention: .keepReleased(1))
    _ = map.store(Book.make("a", by: .ged))
    _ = map.store(Author(id: 9, name: "newcomer"))
    // The book was evicted; its author lost its holder and entered the buffer, evicting the
    // newcomer in turn.
    #expect(map.find(Book.self, id: "a") == nil)
    #expect(map.find(Author.self, id: 2)?.value == .ged)
    #expect(map.find(Author.self, id: 9) == nil)
  }

  @Test func anyNewHolderTakesAnEntityOutOfTheBuffer() {
    let map = IdentityMap(retention: .keepReleased(1))
    _ = map.store(Author(id: 2, name: "Ged"))
    let book = map.store(Book(id: "a", title: "T", author: Author(id: 2, name: "Ged")))
    _ = map.store(Author(id: 3, name: "3"))
    #expect(map.find(Author.self, id: 2) != nil, "the book holds its author")
    let subscription = map.find(Author.self, id: 3)!.observe { _ in }
    _ = map.store(Author(id: 4, name: "4"))
    #expect(map.find(Author.self, id: 3) != nil, "the subscription holds it")
    subscription.cancel()
    withExtendedLifetime(book) {}
  }

  @Test func removeAndRemoveAllEmptyTheBufferOfWhatTheyRemove() {
    let map = IdentityMap(retention: .keepReleased(10))
    for id in 1...3 { _ = map.store(Author(id: id, name: "\(id)")) }
    map.remove(Author.self, id: 2)
    #expect(map.count == 2)
    #expect(map.find(Author.self, id: 2) == nil)
    map.removeAll()
    #expect(map.count == 0)
    for id in 4...13 { _ = map.store(Author(id: id, name: "\(id)")) }
    #expect(map.count == 10, "removed entities no longer take room in the buffer")
  }

  @Test func aRemovedBufferedEntityIsRemovedNotReleased() {
    let logger = RecordingLogger()
    let map = IdentityMap(logger: logger, retention: .keepReleased(10))
    _ = map.store(Author(id: 1, name: "A"))
    logger.clear()
    map.remove(Author.self, id: 1)
    #expect(logger.events == [.removed(EntityReference(Author.self, id: 1))])
  }

  @Test func aBufferedAliasedValueIsRetainedByTheAliasFirst() {
    let map = IdentityMap(retention: .keepReleased(1))
    map.store(User(id: 1, name: "Ged"), named: .currentUser)
    map.removeAlias(named: AliasKey<User>.currentUser)
    #expect(map.find(User.self, id: 1) != nil, "released by the alias into the buffer")
  }

  @Test func churnThroughASmallBufferStaysBounded() {
    let map = IdentityMap(retention: .keepReleased(100))
    for id in 0..<10_000 {
      _ = map.store(Author(id: id, name: "\(id)"))
      if id % 7 == 0 { _ = map.find(Author.self, id: id / 2) }
    }
    #expect(map.count == 100)
    map._core._checkInvariants()
  }
}
